"""blender parser and command, against outputs recorded from Blender 3.4.1 (Debian 12)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from virtbench.benchmarks.blender import SCRIPT, Blender, BlenderParams
from virtbench.errors import ParseError

DATA = Path(__file__).resolve().parent.parent / "data" / "blender"
SMALL = dict(width=64, height=36, samples=4, objects=4)


def bench(**kw: object) -> Blender:
    return Blender(BlenderParams(**kw))


def read(name: str) -> tuple[str, str]:
    stderr = DATA / f"{name}.stderr.txt"
    return (DATA / f"{name}.txt").read_text(), stderr.read_text() if stderr.exists() else ""


def render_s(text: str) -> float:
    (line,) = [ln for ln in text.splitlines() if ln.startswith("vb:render_s ")]
    return float(line.split()[1])


@pytest.mark.parametrize("platform", ["native", "docker"])
@pytest.mark.parametrize(("name", "params"), [("320x180_16samples_16objects", {}), ("64x36_4samples_4objects", SMALL)])
def test_parse_recorded(name: str, params: dict, platform: str) -> None:
    text, stderr = read(f"{name}_{platform}")
    b = bench(**params)
    result = b.parse(text, stderr, name)
    assert list(result) == [m.name for m in b.metrics()] == ["render_s"]
    assert result["render_s"] == render_s(text) > 0
    # Blender's own "Time:" of the render includes saving the PNG; ours is the render call
    assert "Blender quit" in text and "Saved: '" in text


def test_concrete_values_and_same_image_everywhere() -> None:
    native, _ = read("64x36_4samples_4objects_native")
    docker, _ = read("64x36_4samples_4objects_docker")
    assert bench(**SMALL).parse(native) == {"render_s": 0.202488}
    # fixed seed, no denoiser: the same picture on every platform
    mean = re.compile(r"^vb:image .*$", re.M)
    assert mean.findall(native) == mean.findall(docker) == ["vb:image 64x36 mean=0.745509"]


def test_parameters_must_match_the_render() -> None:
    text, _ = read("64x36_4samples_4objects_native")
    with pytest.raises(ParseError, match="samples/size/objects"):
        bench(width=64, height=36, samples=8, objects=4).parse(text)


def test_unwritable_output_fails_with_the_source() -> None:
    text, stderr = read("fail_unwritable_workdir")
    assert "cannot save" in text and not re.search(r"^vb:render_s", text, re.M)
    with pytest.raises(ParseError, match=r"vb:done.*fail_unwritable_workdir"):
        bench(**SMALL).parse(text, stderr, "fail_unwritable_workdir")


@pytest.mark.parametrize(("edit", "match"), [
    (lambda t: t.replace("mean=0.745509", "mean=0.000000"), "not black"),
    (lambda t: re.sub(r"^vb:image .*\n", "", t, flags=re.M), "vb:image"),
    (lambda t: re.sub(r"^vb:render_s .*\n", "", t, flags=re.M), "vb:render_s"),
    (lambda t: t.replace("vb:image 64x36", "vb:image 32x18"), "64x36 image"),
])
def test_broken_copies_fail(edit, match: str) -> None:
    text, _ = read("64x36_4samples_4objects_native")
    with pytest.raises(ParseError, match=match):
        bench(**SMALL).parse(edit(text))


def test_command_passes_values_as_argv_not_code() -> None:
    argv = bench(width=100, height=50, samples=3, objects=9, threads=2).command("/scratch/")
    assert argv[:7] == ["blender", "--background", "--factory-startup", "-noaudio", "--python-exit-code", "1",
                        "--python-expr"]
    assert argv[7] == SCRIPT
    assert argv[8:] == ["--", "/scratch/render.png", "100", "50", "3", "9", "2"]


@pytest.mark.parametrize("bad", [dict(width=8), dict(samples=0), dict(objects=0), dict(threads=-1), dict(scene="x")])
def test_bad_parameters(bad: dict) -> None:
    with pytest.raises(ValidationError):
        BlenderParams(**bad)


def test_full_profile_takes_longer_than_quick() -> None:
    assert bench(**Blender.study).execution_timeout() > bench().execution_timeout() >= 300
