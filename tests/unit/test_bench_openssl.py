"""openssl speed parser and command, against outputs recorded from OpenSSL 3.0 (Debian 12)."""
from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from virtbench.benchmarks.openssl import OpenSSLParams, OpenSSLSpeed
from virtbench.errors import ParseError

DATA = Path(__file__).resolve().parent.parent / "data" / "openssl"


def read(name: str) -> tuple[str, str]:
    stderr = DATA / f"{name}.stderr.txt"
    return (DATA / f"{name}.txt").read_text(), stderr.read_text() if stderr.exists() else ""


def bench(**kw: object) -> OpenSSLSpeed:
    return OpenSSLSpeed(OpenSSLParams(**kw))


def final_rate(stdout: str) -> float:
    """The aggregate +F line: the one not prefixed with 'Got:'."""
    (line,) = [ln for ln in stdout.splitlines() if ln.startswith("+F:")]
    return float(line.rsplit(":", 1)[1])


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("aes-128-cbc_single", dict(algorithm="aes-128-cbc", seconds=1)),
        ("aes-128-cbc_multi2", dict(algorithm="aes-128-cbc", seconds=1, multi=2)),
        ("des-ede3_single", dict(algorithm="des-ede3", seconds=1)),
        ("des-ede3_multi2", dict(algorithm="des-ede3", seconds=1, multi=2)),
        ("aes-256-gcm_16384", dict(algorithm="aes-256-gcm", bytes=16384, seconds=1)),
        ("des-cbc_legacy", dict(algorithm="des-cbc", seconds=1)),
    ],
)
def test_parse_recorded(name: str, params: dict) -> None:
    b = bench(**params)
    stdout, stderr = read(name)
    result = b.parse(stdout, stderr, name)
    assert set(result) == {m.name for m in b.metrics()}
    assert result["throughput"] == final_rate(stdout)
    assert result["throughput"] > 0


def test_single_values_from_file() -> None:
    result = bench(algorithm="aes-128-cbc", seconds=1).parse(*read("aes-128-cbc_single"))
    assert result == {"throughput": 1450963648.0}
    # +F is bytes per second: the +R count of 64-byte blocks in 1 s, times 64.
    assert result["throughput"] == 22671307 * 64


def test_multi_is_sum_of_children() -> None:
    stdout, stderr = read("aes-128-cbc_multi2")
    result = bench(algorithm="aes-128-cbc", seconds=1, multi=2).parse(stdout, stderr)
    assert result["throughput"] == 2888717568.0 == 1441887040.0 + 1446830528.0


def test_des_ede3_means_cbc() -> None:
    stdout, stderr = read("des-ede3_multi2")
    assert bench(algorithm="des-ede3", multi=2).parse(stdout, stderr)["throughput"] == 70399680.0
    assert "DES-EDE3-CBC" in stdout


def test_multi_child_failure_is_not_a_zero() -> None:
    # Both children failed, yet openssl printed "+F:...:0.00" and exited 0.
    stdout, stderr = read("fail_des-cbc_nolegacy_multi2")
    assert "+F:25:DES-CBC:0.00" in stdout
    b = bench(algorithm="des-cbc", multi=2)
    with pytest.raises(ParseError, match="Child exited|error"):
        b.parse(stdout, stderr, "multi.txt")
    with pytest.raises(ParseError):  # even if stderr were lost
        b.parse(stdout, "", "multi.txt")


def test_single_failure() -> None:
    with pytest.raises(ParseError, match=r"fail\.txt"):
        bench(algorithm="des-cbc").parse(*read("fail_des-cbc_nolegacy_single"), "fail.txt")


def test_error_lines_in_stderr_fail_even_with_a_rate() -> None:
    # -bytes 17 with a 16-byte block cipher: every op fails, openssl still prints a rate.
    stdout, stderr = read("fail_aes-128-cbc_17bytes")
    assert final_rate(stdout) > 0
    with pytest.raises(ParseError, match="wrong final block length"):
        bench(algorithm="aes-128-cbc").parse(stdout, stderr)


def test_truncated_and_empty() -> None:
    stdout, stderr = read("aes-128-cbc_multi2")
    b = bench(algorithm="aes-128-cbc", multi=2)
    truncated = "\n".join(ln for ln in stdout.splitlines() if not ln.startswith("+F:"))
    with pytest.raises(ParseError, match=r"no match for .*\+F.* in t\.txt"):
        b.parse(truncated, stderr, "t.txt")
    missing_child = "\n".join(ln for ln in stdout.splitlines() if not ln.endswith("from 1"))
    with pytest.raises(ParseError, match="children"):
        b.parse(missing_child, stderr)
    with pytest.raises(ParseError, match="empty"):
        b.parse("", "", "empty")


def test_wrong_algorithm_in_output() -> None:
    with pytest.raises(ParseError, match="des-ede3-cbc"):
        bench(algorithm="des-ede3").parse(*read("aes-128-cbc_single"))


def test_params_defaults_and_rejections() -> None:
    p = OpenSSLParams()
    assert (p.algorithm, p.bytes, p.multi, p.seconds) == ("aes-128-cbc", 64, 1, 3)
    for bad in (
        dict(nosuch=1), dict(bytes=17), dict(bytes=8), dict(bytes=0), dict(multi=0),
        dict(seconds=0), dict(algorithm="rot13"), dict(algorithm="des-ede3; rm"),
    ):
        with pytest.raises(ValidationError):
            OpenSSLParams(**bad)


def test_command() -> None:
    argv = bench().command("/scratch")
    assert argv[:2] == ["openssl", "speed"]
    assert "-elapsed" in argv and "-mr" in argv
    assert "-multi" not in argv
    assert argv[-2:] == ["-evp", "aes-128-cbc"]
    assert argv[argv.index("-seconds") + 1] == "3" and argv[argv.index("-bytes") + 1] == "64"

    argv = bench(algorithm="des-ede3", multi=2, seconds=5, bytes=16).command("/scratch")
    assert argv[argv.index("-multi") + 1] == "2"
    assert argv[-2:] == ["-evp", "des-ede3-cbc"]
    assert "-provider" not in argv

    argv = bench(algorithm="des-cbc").command("/scratch")
    assert argv[argv.index("-provider") + 1] == "legacy"
    assert argv[-2:] == ["-evp", "des-cbc"]


def test_metadata() -> None:
    b = bench()
    (m,) = b.metrics()
    assert (m.name, m.unit, m.higher_is_better, m.category) == ("throughput", "B/s", True, "cpu")
    assert OpenSSLSpeed.name == "openssl" and OpenSSLSpeed.packages == ("openssl",)
    assert b.version_command() == ["openssl", "version"]
    assert b.execution_timeout() >= 4 * 3 + 60


def test_clock_cpu_is_the_rate_per_cpu_second() -> None:
    """The quick campaign's form: no -elapsed, a metric of its own name (never mixed with wall-clock rates)."""
    b = bench(bytes=1024, seconds=2, clock="cpu")
    assert "-elapsed" not in b.command("/w") and "-elapsed" in bench().command("/w")
    assert [m.name for m in b.metrics()] == ["throughput_cpu"]
    text = (DATA / "aes-128-cbc_1024_cpu.txt").read_text()
    # +R:count:cipher:cpu_seconds -> count x bytes / seconds, as openssl's +F line says
    assert b.parse(text) == {"throughput_cpu": 1401580579.31} == {"throughput_cpu": pytest.approx(396932 * 1024 / 0.29)}


# Plain `openssl speed ALG` (evp: false), the command of study 000 (seeds/000 Figs. 2 and 3).

def test_plain_command_is_the_papers_with_mr() -> None:
    """No -evp, no -elapsed with clock cpu: `openssl speed -seconds D -bytes 64 -multi 2 des-ede3` plus -mr."""
    argv = bench(algorithm="des-ede3", bytes=64, multi=2, seconds=20, evp=False, clock="cpu").command("/w")
    assert argv == ["openssl", "speed", "-mr", "-seconds", "20", "-bytes", "64", "-multi", "2", "des-ede3"]
    assert bench(algorithm="des-ede3", evp=False).command("/w")[2] == "-elapsed"  # the wall clock stays the default


@pytest.mark.parametrize("algorithm", ["sha256", "aes-256-gcm", "des-cbc", "des-ede3-cbc"])
def test_plain_refuses_names_plain_speed_does_not_share(algorithm: str) -> None:
    with pytest.raises(ValidationError, match="evp: false runs plain"):
        OpenSSLParams(algorithm=algorithm, evp=False)


@pytest.mark.parametrize(("name", "algorithm", "printed"), [
    ("bullseye_openssl_seconds1_bytes64_multi2_algorithmdes-ede3_evpFalse_clockcpu", "des-ede3", "des ede3"),
    ("bullseye_openssl_seconds1_bytes64_multi2_algorithmaes-128-cbc_evpFalse_clockcpu", "aes-128-cbc", "aes-128 cbc"),
    ("bookworm_openssl_seconds1_bytes64_multi2_algorithmdes-ede3_evpFalse_clockcpu", "des-ede3", "des-ede3"),
    ("bookworm_openssl_seconds1_bytes64_multi2_algorithmaes-128-cbc_evpFalse_clockcpu", "aes-128-cbc", "aes-128-cbc"),
])
def test_plain_multi_parses_both_namings(name: str, algorithm: str, printed: str) -> None:
    """OpenSSL 1.1.1 prints plain speed's names with a space (`+F:9:des ede3:...`), 3.0 with a dash."""
    stdout, stderr = read(name)
    assert f":{printed}:" in stdout
    result = bench(algorithm=algorithm, seconds=1, multi=2, evp=False, clock="cpu").parse(stdout, stderr, name)
    assert result == {"throughput_cpu": final_rate(stdout)}


def test_plain_refuses_another_algorithms_line() -> None:
    stdout, stderr = read("bullseye_openssl_seconds1_bytes64_multi2_algorithmdes-ede3_evpFalse_clockcpu")
    with pytest.raises(ParseError):
        bench(algorithm="aes-128-cbc", seconds=1, multi=2, evp=False, clock="cpu").parse(stdout, stderr)


def _rate(name: str, evp: bool) -> float:
    stdout, stderr = read(name)
    return bench(algorithm="aes-128-cbc", bytes=16384, seconds=1, evp=evp, clock="cpu").parse(stdout, stderr)[
        "throughput_cpu"]


@pytest.mark.parametrize(("hw", "masked", "plain_uses_hw"), [
    ("bullseye", "bullseye-noaesni", False), ("bookworm", "bookworm-noaesni", True),
    ("bullseye-arm64-qemuuser", "bullseye-arm64-qemuuser-noaes", False),
    ("bookworm-arm64-qemuuser", "bookworm-arm64-qemuuser-noaes", True),
])
def test_plain_aes_uses_the_aes_instructions_on_openssl3_only(hw: str, masked: str, plain_uses_hw: bool) -> None:
    """Recorded with the CPU's AES instructions and again with them masked (OPENSSL_ia32cap on x86_64,
    OPENSSL_armcap=0x1 for Debian's arm64 builds under qemu-aarch64): OpenSSL 1.1.1's plain aes-128-cbc
    is software AES (masking does not change its rate), 3.0's is not; -evp uses them on both. Why
    study 000's Debian 10 'gains nothing from the AES instructions'. (Under the emulator, emulated
    AES instructions are slower than software AES: only whether masking changes a rate counts.)"""
    stem = "openssl_seconds1_bytes16384_algorithmaes-128-cbc"
    plain, plain_masked = (_rate(f"{r}_{stem}_evpFalse_clockcpu", False) for r in (hw, masked))
    evp, evp_masked = (_rate(f"{r}_{stem}_clockcpu", True) for r in (hw, masked))
    assert evp > 3 * evp_masked
    assert (plain > 3 * plain_masked) is plain_uses_hw
    assert plain_uses_hw or 0.8 < plain / plain_masked < 1.25
