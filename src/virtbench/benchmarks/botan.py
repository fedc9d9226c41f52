"""Botan `speed`: block cipher throughput, the crypto test of the KVM-on-ARM study (seeds/002).

The study ran `botan speed --msec=15000 Blowfish AES-256`. Each algorithm is encrypted and
then decrypted for `msec` milliseconds each, on buffers of `buf_size` bytes (ECB over the raw
block cipher). Botan picks hardware AES (AES-NI, ARMv8 crypto) when the CPU has it; that
alone changes AES results by an order of magnitude, so the CPU flags belong in the report.

Only block ciphers are offered: for them Botan prints the requested name unchanged on both
lines ("AES-256 encrypt buffer size 1024 bytes: ..."), so each line maps back to a parameter.
Modes and stream ciphers are renamed in the output ("ChaCha20" -> "ChaCha(20)",
"AES-128/GCM" -> "AES-128/GCM(16) [clmul]") and print different line sets.

Botan exits 0 when an algorithm is unknown ("Unknown algorithm 'X'" on stderr) and simply
prints nothing for it, so the parser insists on both lines for every requested algorithm.
"""
from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from ..errors import ParseError
from .base import Benchmark, Metric, Params, search

BlockCipher = Literal[
    "AES-128", "AES-192", "AES-256", "ARIA-128", "ARIA-256", "Blowfish", "CAST-128",
    "Camellia-128", "Camellia-256", "DES", "IDEA", "Noekeon", "SEED", "SHACAL2", "SM4",
    "Serpent", "Threefish-512", "TripleDES", "Twofish", "XTEA",
]

_UNKNOWN = r"^Unknown algorithm '([^']*)'"


def metric_base(algorithm: str) -> str:
    """'AES-256' -> 'aes_256': stable metric names derived from the parameter."""
    return re.sub(r"[^a-z0-9]+", "_", algorithm.lower()).strip("_")


class BotanParams(Params):
    algorithms: tuple[BlockCipher, ...] = Field(
        ("AES-256", "Blowfish"), min_length=1, max_length=20,
        description="block ciphers, each measured encrypting and decrypting (KVM study: "
        "Blowfish AES-256)",
    )
    msec: int = Field(
        1000, ge=10, le=600_000,
        description="milliseconds per algorithm and direction (KVM study: 15000)",
    )
    buf_size: int = Field(
        1024, ge=16, le=16 * 2**20, multiple_of=16,
        description="bytes per encrypt/decrypt call (Botan's default 1024)",
    )

    @field_validator("algorithms")
    @classmethod
    def _distinct(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(value)) != len(value):
            raise ValueError("algorithms must not repeat")
        return value


class Botan(Benchmark):
    """Encryption and decryption throughput of block ciphers in MiB/s."""

    name: ClassVar[str] = "botan"
    tool: ClassVar[str] = "botan"
    packages: ClassVar[tuple[str, ...]] = ("botan",)
    Params: ClassVar[type[Params]] = BotanParams
    description: ClassVar[str] = "botan speed: block cipher encrypt/decrypt throughput"
    study: ClassVar[dict[str, Any]] = {"msec": 15000}
    """The `full` profile: KVM study: `botan speed --msec=15000 Blowfish AES-256`."""

    params: BotanParams

    def metrics(self) -> list[Metric]:
        p = self.params
        return [
            Metric(f"{metric_base(alg)}_{op}", "MiB/s", True, "cpu",
                   f"{alg} {op}, {p.buf_size} B buffers, one thread, {p.msec} ms")
            for alg in p.algorithms for op in ("encrypt", "decrypt")
        ]

    def command(self, workdir: str) -> list[str]:
        p = self.params
        return ["botan", "speed", f"--msec={p.msec}", f"--buf-size={p.buf_size}", *p.algorithms]

    def parse(self, stdout: str, stderr: str = "", source: str = "<output>") -> dict[str, float]:
        unknown = re.search(_UNKNOWN, stderr + "\n" + stdout, re.M)
        if unknown:
            expected = f"no 'Unknown algorithm' line (found: {unknown.group(0)})"
            raise ParseError(self.tool, expected, source)
        result: dict[str, float] = {}
        for alg in self.params.algorithms:
            for op in ("encrypt", "decrypt"):
                # names are letters, digits and '-' (BlockCipher): literal in a regex as is.
                # Botan 3 names the implementation after the cipher: "AES-256 [avx2_aes] encrypt".
                pattern = (rf"^{alg}(?: \[[\w.-]+\])? {op} buffer size {self.params.buf_size} bytes: "
                           r"([0-9]+(?:\.[0-9]+)?) MiB/sec .*$")
                rate = float(search(pattern, stdout, self.tool, source, re.M).group(1))
                if rate <= 0:
                    raise ParseError(self.tool, f"a positive rate for {alg} {op}", source)
                result[f"{metric_base(alg)}_{op}"] = rate
        return result

    def version_command(self) -> list[str]:
        return ["botan", "version", "--full"]

    def execution_timeout(self) -> float:
        p = self.params
        return 2.0 * len(p.algorithms) * (p.msec / 1000.0 + 1.0) * 2.0 + 60.0
