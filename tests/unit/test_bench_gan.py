"""gan (PyTorch DCGAN) parser and command, against outputs recorded from python3-torch 1.13.1 (Debian 12)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from virtbench.benchmarks.gan import SCRIPT, Gan, GanParams
from virtbench.errors import ParseError

DATA = Path(__file__).resolve().parent.parent / "data" / "pytorch"
CASES = [("gan_322images_32px_2epochs", {}, 2),
         ("gan_64images_32px_1epoch", dict(images=64, epochs=1), 1),
         ("gan_322images_64px_1epoch_1thread", dict(size=64, epochs=1, threads=1), 1)]


def bench(**kw: object) -> Gan:
    return Gan(GanParams(**kw))


def read(name: str) -> tuple[str, str]:
    stderr = DATA / f"{name}.stderr.txt"
    return (DATA / f"{name}.txt").read_text(), stderr.read_text() if stderr.exists() else ""


@pytest.mark.parametrize("platform", ["native", "docker"])
@pytest.mark.parametrize(("name", "params", "epochs"), CASES)
def test_parse_recorded(name: str, params: dict, epochs: int, platform: str) -> None:
    text, stderr = read(f"{name}_{platform}")
    b = bench(**params)
    result = b.parse(text, stderr, name)
    assert list(result) == [m.name for m in b.metrics()] == ["train_s"]
    (line,) = [ln for ln in text.splitlines() if ln.startswith("vb:train_s ")]
    assert result["train_s"] == float(line.split()[1]) > 0
    per_epoch = [float(s) for s in re.findall(r"seconds=(\S+)$", text, re.M)]
    assert len(per_epoch) == epochs
    assert result["train_s"] == pytest.approx(sum(per_epoch), rel=1e-3)  # the loop is all that is timed


def test_concrete_values() -> None:
    text, _ = read("gan_322images_64px_1epoch_1thread_native")
    assert bench(size=64, epochs=1, threads=1).parse(text) == {"train_s": 2.438113}
    assert "threads=1 images=322 size=64 batch=32 epochs=1" in text


def test_parameters_must_match_the_run() -> None:
    text, _ = read("gan_64images_32px_1epoch_native")
    with pytest.raises(ParseError, match="images/size/batch/epochs"):
        bench(images=322, epochs=1).parse(text)


def test_script_error_fails_with_the_source() -> None:
    text, stderr = read("fail_gan_size48")
    assert text == "" and "AssertionError" in stderr
    with pytest.raises(ParseError, match=r"vb:done.*fail_gan_size48"):
        bench().parse(text, stderr, "fail_gan_size48")


@pytest.mark.parametrize(("edit", "match"), [
    (lambda t: t.replace("loss_g=2.108513", "loss_g=nan", 1), "finite losses"),
    (lambda t: re.sub(r"^vb:epoch 2 .*\n", "", t, flags=re.M), "epochs 1..2"),
    (lambda t: re.sub(r"^vb:train_s .*\n", "", t, flags=re.M), "vb:train_s"),
])
def test_broken_copies_fail(edit, match: str) -> None:
    text, _ = read("gan_322images_32px_2epochs_native")
    assert "loss_g=2.108513" in text
    with pytest.raises(ParseError, match=match):
        bench().parse(edit(text))


def test_command_passes_values_as_argv_not_code() -> None:
    assert bench(images=10, size=64, epochs=3, batch=5, threads=2).command("/w") == [
        "python3", "-c", SCRIPT, "10", "64", "3", "5", "2"]


@pytest.mark.parametrize("bad", [dict(size=48), dict(images=0), dict(epochs=0), dict(batch=0), dict(lr=1)])
def test_bad_parameters(bad: dict) -> None:
    with pytest.raises(ValidationError):
        GanParams(**bad)
