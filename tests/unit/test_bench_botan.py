"""botan speed parser and command, against outputs recorded from Botan 2.19.3 (Debian 12)."""
from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from virtbench.benchmarks.botan import Botan, BotanParams, metric_base
from virtbench.errors import ParseError

DATA = Path(__file__).resolve().parent.parent / "data" / "botan"


def bench(**kw: object) -> Botan:
    return Botan(BotanParams(**kw))


def read(name: str) -> tuple[str, str]:
    stderr = DATA / f"{name}.stderr.txt"
    return (DATA / f"{name}.txt").read_text(), stderr.read_text() if stderr.exists() else ""


def rates(text: str) -> dict[tuple[str, str], float]:
    """(algorithm, encrypt|decrypt) -> MiB/sec, read independently of the parser."""
    out = {}
    for line in text.splitlines():
        head, tail = line.split(" buffer size ")
        alg, op = head.rsplit(" ", 1)
        out[(alg, op)] = float(tail.split(": ")[1].split()[0])
    return out


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("aes256_blowfish_1000ms", {}),
        ("aes128_tripledes_twofish_200ms_4096",
         dict(algorithms=["AES-128", "TripleDES", "Twofish"], msec=200, buf_size=4096)),
    ],
)
def test_parse_recorded(name: str, params: dict) -> None:
    text, stderr = read(name)
    b = bench(**params)
    result = b.parse(text, stderr, name)
    assert list(result) == [m.name for m in b.metrics()]
    expected = rates(text)
    assert len(expected) == 2 * len(b.params.algorithms)
    for (alg, op), rate in expected.items():
        assert result[f"{metric_base(alg)}_{op}"] == rate


def test_concrete_values() -> None:
    text, _ = read("aes256_blowfish_1000ms")
    assert bench().parse(text) == {
        "aes_256_encrypt": 4398.232, "aes_256_decrypt": 3401.743,
        "blowfish_encrypt": 257.256, "blowfish_decrypt": 337.739,
    }


def test_unknown_algorithm_exits_0() -> None:
    # `botan speed ... AES-256 Kasumi`: exit 0, AES-256 lines, "Unknown algorithm 'Kasumi'" on stderr
    text, stderr = read("fail_unknown_kasumi")
    assert stderr.strip() == "Unknown algorithm 'Kasumi'"
    with pytest.raises(ParseError, match=r"Unknown algorithm 'Kasumi'.*kasumi"):
        bench(algorithms=["AES-256"], msec=200).parse(text, stderr, "kasumi")
    # without the stderr, the missing lines of a requested algorithm still fail
    with pytest.raises(ParseError, match=r"\^Blowfish.* encrypt"):
        bench(msec=200).parse(text, "", "kasumi")


def test_other_buffer_size_is_rejected() -> None:
    text, _ = read("aes256_blowfish_1000ms")
    with pytest.raises(ParseError, match="buffer size 4096"):
        bench(buf_size=4096).parse(text)


def test_truncated_and_empty() -> None:
    text, _ = read("aes256_blowfish_1000ms")
    with pytest.raises(ParseError, match=r"\^Blowfish.* decrypt"):
        bench().parse(text[: text.index("Blowfish decrypt")])
    with pytest.raises(ParseError, match=r"\^AES-256.* encrypt.*empty"):
        bench().parse("", "", "empty")


def test_metric_names_follow_the_parameters() -> None:
    assert metric_base("AES-256") == "aes_256"
    assert metric_base("Threefish-512") == "threefish_512"
    names = [m.name for m in bench(algorithms=["Serpent", "AES-128"]).metrics()]
    assert names == ["serpent_encrypt", "serpent_decrypt", "aes_128_encrypt", "aes_128_decrypt"]


def test_params() -> None:
    p = BotanParams()
    assert (p.algorithms, p.msec, p.buf_size) == (("AES-256", "Blowfish"), 1000, 1024)
    for bad in (
        dict(nosuch=1), dict(algorithms=[]), dict(algorithms=["AES-256", "AES-256"]),
        dict(algorithms=["Kasumi"]), dict(algorithms=["AES-256; rm -rf /"]),
        dict(algorithms=["ChaCha20"]), dict(msec=0), dict(buf_size=1000), dict(algorithms="AES-256"),
    ):
        with pytest.raises(ValidationError):
            BotanParams(**bad)


def test_command() -> None:
    assert bench().command("/scratch") == [
        "botan", "speed", "--msec=1000", "--buf-size=1024", "AES-256", "Blowfish",
    ]
    assert bench(algorithms=["Blowfish", "AES-256"], msec=15000).command("/s")[2:] == [
        "--msec=15000", "--buf-size=1024", "Blowfish", "AES-256",
    ]


def test_metadata() -> None:
    b = bench()
    assert all(m.unit == "MiB/s" and m.higher_is_better and m.category == "cpu" for m in b.metrics())
    assert Botan.name == "botan" and Botan.packages == ("botan",)
    assert b.version_command() == ["botan", "version", "--full"]
    # 2 algorithms x 2 directions x 1 s, with margin
    assert 8 < b.execution_timeout() < 120
    assert bench(msec=15000).execution_timeout() > 4 * 15
