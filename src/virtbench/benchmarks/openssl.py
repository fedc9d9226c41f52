"""openssl speed: cipher throughput, the load of the Raspberry Pi density study (seeds/000).

Rates are taken with -elapsed (wall clock) by default: without it openssl divides by CPU user
time, which hides exactly the contention between instances that a density run is after.
`clock: cpu` asks for that CPU-time rate on purpose: on a host shared with other work, the
wall-clock rate of a 1-2 s run measures the neighbours' time slices (CV 50 % natively at load
5-7 on 2 CPUs, against 3.5 % per CPU second), while a platform's cost in a compute loop is in
the CPU time itself (openssl reads it in clock ticks, 10 ms: run it for 2 s or more). It is
also what the study's numbers mean: the paper ran `openssl speed -seconds D -bytes 64 -multi 2
des-ede3` (and `aes-128-cbc`), without -elapsed.

-evp routes through the EVP layer, so AES-NI / ARMv8 crypto extensions are used when present.
`evp: false` runs the plain `openssl speed ALG` of the paper instead (aes-*-cbc, des-ede3 only,
the names plain speed knows). What that measures depends on the OpenSSL version, measured here
(x86_64 with AES-NI, 16 KiB blocks, per CPU second; AES-NI masked with
OPENSSL_ia32cap=~0x200000200000000 for the software rate):
- OpenSSL 1.1.1 (Debian 10/11): plain `aes-128-cbc` is the low-level AES_cbc_encrypt, software
  AES: 0.29 GB/s with or without AES-NI; only `-evp aes-128-cbc` uses AES-NI (1.42 GB/s);
- OpenSSL 3.0 (Debian 12) and later: plain `aes-128-cbc` uses AES-NI as -evp does (1.44 GB/s,
  0.30 GB/s masked).
The ARM builds behave alike (Debian's arm64 1.1.1w and 3.0.20 under qemu-aarch64 `-cpu max`, AES
masked with OPENSSL_armcap=0x1: 3.0's plain rate falls 9x, 1.1.1's plain rate not at all, its
-evp rate 9x; emulator rates, only their ratios mean something). So the paper's "Debian 10 gains
nothing from the AES instructions" is the command (no -evp on OpenSSL 1.1.1), not the
distribution: with -evp Debian 10's OpenSSL uses them too.
Plain speed names its lines as 1.1.1 prints them (`+F:16:aes-128 cbc:...`, `des ede3`) or as 3.x
does (`aes-128-cbc`, `des-ede3`); both are read. `des-ede3` is DES-EDE3 in CBC mode in both
forms (plain speed runs DES_ede3_cbc_encrypt), although the study's text says ECB.
"""
from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from ..errors import ParseError
from .base import Benchmark, Metric, Params, search

Algorithm = Literal[
    "aes-128-cbc", "aes-192-cbc", "aes-256-cbc", "aes-128-ctr", "aes-256-ctr",
    "aes-128-gcm", "aes-256-gcm", "chacha20", "chacha20-poly1305",
    "des-ede3", "des-ede3-cbc", "des-cbc", "bf-cbc", "cast5-cbc",
    "sha1", "sha256", "sha512", "md5",
]

# `openssl speed des-ede3` (the study's command, no -evp) measures DES-EDE3 in CBC mode,
# but `-evp des-ede3` names the ECB cipher. Keep the study's meaning.
_EVP_NAMES: dict[str, str] = {"des-ede3": "des-ede3-cbc"}
# OpenSSL 3 moved these to the legacy provider; without it the run fails to init the context.
_LEGACY: frozenset[str] = frozenset({"des-cbc", "bf-cbc", "cast5-cbc"})
# Names plain `openssl speed` (no -evp) knows in 1.1.1 and 3.x alike, checked on both.
PLAIN: frozenset[str] = frozenset({"aes-128-cbc", "aes-192-cbc", "aes-256-cbc", "des-ede3"})

_FINAL = r"^\+F:\d+:([^:\n]+):([0-9.]+)[ \t]*$"
_CHILD = r"^Got: \+F:\d+:([^:\n]+):([0-9.]+) from (\d+)[ \t]*$"
_OPENSSL_ERROR = r"^[0-9A-F]+:error:.*$"
_CHILD_FAILED = r"^Child exited with (\d+).*$"


class OpenSSLParams(Params):
    algorithm: Algorithm = Field(
        "aes-128-cbc",
        description="EVP cipher or digest; 'des-ede3' is DES-EDE3-CBC, as in plain `openssl speed`",
    )
    bytes: int = Field(
        64, ge=16, le=1048576, multiple_of=16,
        description="buffer size per operation (multiple of the block size, else openssl errors)",
    )
    multi: int = Field(1, ge=1, le=1024, description="parallel openssl processes (-multi)")
    seconds: int = Field(3, ge=1, le=3600, description="measuring time in seconds")
    clock: Literal["wall", "cpu"] = Field(
        "wall", description="rate per second of wall-clock time (-elapsed: contention shows) or of the "
        "process's CPU time (openssl's own default: other processes' time slices do not count; the "
        "quick campaign on a shared host; study 000, as the paper ran it)")
    evp: bool = Field(
        True, description="-evp ALG: the EVP interface (hardware AES where present); false: plain "
        "`openssl speed ALG` as study 000 ran it (aes-*-cbc and des-ede3 only; OpenSSL 1.1.1 then "
        "measures software AES, 3.x uses AES-NI either way)")

    @model_validator(mode="after")
    def _plain_names(self) -> OpenSSLParams:
        if not self.evp and self.algorithm not in PLAIN:
            raise ValueError(f"evp: false runs plain `openssl speed {self.algorithm}`, which only knows "
                             f"{', '.join(sorted(PLAIN))}; use evp: true for {self.algorithm}")
        return self


class OpenSSLSpeed(Benchmark):
    """Symmetric crypto throughput in bytes per second of wall-clock time."""

    name: ClassVar[str] = "openssl"
    tool: ClassVar[str] = "openssl"
    packages: ClassVar[tuple[str, ...]] = ("openssl",)
    Params: ClassVar[type[Params]] = OpenSSLParams
    description: ClassVar[str] = "openssl speed [-evp]: cipher/digest throughput (wall clock or per CPU second)"
    study: ClassVar[dict[str, Any]] = {"bytes": 64, "multi": 2, "seconds": 20}
    """The `full` profile: density study: `openssl speed -bytes 64 -multi 2`."""

    params: OpenSSLParams

    @property
    def evp_name(self) -> str:
        """The name openssl measures and prints: the EVP cipher, or the plain speed test's name."""
        if not self.params.evp:
            return self.params.algorithm
        return _EVP_NAMES.get(self.params.algorithm, self.params.algorithm)

    def _what(self) -> str:
        p = self.params
        how = "" if p.evp else " (plain `openssl speed`, no -evp)"
        return f"{self.evp_name}{how}, {p.bytes} B blocks, {p.multi} process(es) summed"

    def metrics(self) -> list[Metric]:
        p = self.params
        if p.clock == "cpu":
            return [Metric("throughput_cpu", "B/s", True, "cpu", f"{self._what()}, per CPU second",
                           label="{unit} of CPU time")]
        return [Metric("throughput", "B/s", True, "cpu", f"{self._what()}, wall clock")]

    def command(self, workdir: str) -> list[str]:
        p = self.params
        argv = ["openssl", "speed", *(["-elapsed"] if p.clock == "wall" else []), "-mr"]
        argv += ["-seconds", str(p.seconds), "-bytes", str(p.bytes)]
        if p.multi > 1:
            argv += ["-multi", str(p.multi)]
        if not p.evp:
            return argv + [p.algorithm]
        if p.algorithm in _LEGACY:
            argv += ["-provider", "legacy", "-provider", "default"]
        return argv + ["-evp", self.evp_name]

    def parse(self, stdout: str, stderr: str = "", source: str = "<output>") -> dict[str, float]:
        # Failures do not always change the exit status or the +F line: with -multi a child
        # that cannot init its cipher exits 1 and the parent still prints "+F:...:0.00", rc 0.
        for pattern in (_OPENSSL_ERROR, _CHILD_FAILED):
            bad = re.search(pattern, stderr, re.M)
            if bad:
                expected = f"no line like {pattern!r} (found {bad.group(0)!r})"
                raise ParseError(self.tool, expected, source)
        final = search(_FINAL, stdout, self.tool, source, re.M)
        if len(re.findall(_FINAL, stdout, re.M)) != 1:
            raise ParseError(self.tool, f"exactly one {_FINAL!r} line", source)
        # OpenSSL 1.1.1 (bullseye) names the parent's sum of -multi children just "evp";
        # the children's lines still carry the cipher, checked below.
        # Plain speed in 1.1.1 prints "aes-128 cbc" / "des ede3".
        name = _printed(final.group(1))
        if name != self.evp_name and not (name == "evp" and self.params.evp and self.params.multi > 1):
            expected = f"+F line for {self.evp_name} (got {final.group(1)!r})"
            raise ParseError(self.tool, expected, source)
        if self.params.multi > 1:
            found = re.findall(_CHILD, stdout, re.M)
            children = {int(i) for _, _, i in found}
            wrong = sorted({n for n, _, _ in found if _printed(n) != self.evp_name})
            if wrong:
                raise ParseError(self.tool, f"children's +F lines for {self.evp_name} (got {wrong})", source)
            if children != set(range(self.params.multi)):
                expected = f"{_CHILD!r} for each of {self.params.multi} children"
                raise ParseError(self.tool, f"{expected} (got {sorted(children)})", source)
        rate = float(final.group(2))
        if rate <= 0:
            raise ParseError(self.tool, f"a positive rate in {final.group(0)!r}", source)
        return {"throughput" if self.params.clock == "wall" else "throughput_cpu": rate}

    def version_command(self) -> list[str]:
        return ["openssl", "version"]

    def execution_timeout(self) -> float:
        # One block size is measured; -multi runs the children in parallel.
        return 4.0 * (self.params.seconds + 2) + 60.0


def _printed(name: str) -> str:
    """A +F line's algorithm as the benchmark names it: OpenSSL 1.1.1's plain `aes-128 cbc` -> `aes-128-cbc`."""
    return name.lower().replace(" ", "-")
