"""The web pages follow the verdicts: dashboard colours, and runs of different guest images are
never pooled as if they were one (#17)."""
from __future__ import annotations

import re

from virtbench.analysis import synthetic
from virtbench.store.models import Run

from .helpers import make_client


def _cell(page: str, platform: str) -> list[str]:
    """The dashboard's category cells of one platform's row: their verdict classes."""
    row = re.search(rf"<tr><td>{re.escape(platform)}</td>(.*?)</tr>", page, re.S)
    assert row, platform
    return re.findall(r'class="num v-cell ([a-z]*)"', row.group(1))


def test_dashboard_colour_follows_the_verdict_not_the_ratio(store):
    """A platform 21 % slower by its means, but so noisy that nothing is decided, is not painted red."""
    plats = synthetic.default_platforms()[:1] + [
        synthetic.SimPlatform("noisy", "docker", "container", dict.fromkeys(("cpu", "memory"), 0.79))]
    noisy = [synthetic.SimBenchmark("b", "b", {}, (synthetic.SimMetric("m", "op/s", True, "cpu", 100.0, 0.6),))]
    synthetic.fill(store, "n1", repetitions=3, platforms=plats, benchmarks=noisy, seed=3)
    clear = [synthetic.SimBenchmark("b", "b", {}, (synthetic.SimMetric("m", "op/s", True, "cpu", 100.0, 0.005),))]
    synthetic.fill(store, "n2", repetitions=3, platforms=[plats[0], synthetic.SimPlatform(
        "steady", "docker", "container", {"cpu": 0.79})], benchmarks=clear, seed=4)
    page = make_client(store).get("/").text
    assert _cell(page, "noisy") == ["inconclusive"], "a raw 0.79 without a decided cell is not red"
    assert _cell(page, "steady") == ["slower"]
    assert 'td.v-cell.slower' not in page  # the class is styled in the stylesheet, not inline


def test_compare_keeps_runs_of_different_images_apart(store):
    synthetic.fill(store, "i1", repetitions=3, seed=1)
    synthetic.fill(store, "i2", repetitions=3, seed=2)
    with store.session.begin() as s:
        s.get(Run, "i2").image = {**s.get(Run, "i2").image, "release": "trixie", "recipe_hash": "f" * 64}
    client = make_client(store)
    doc = client.get("/api/compare", params=[("run", "i1"), ("run", "i2")]).json()
    assert "different guest images" in " ".join(doc["notes"])
    platforms = {r["platform"] for r in doc["results"]}
    assert "docker [bookworm 00000000]" in platforms and "docker [trixie ffffffff]" in platforms
    assert "docker" not in platforms
    n = {r["platform"]: r["n"] for r in doc["results"] if r["metric"] == "HPL_Gflops"}
    assert n["docker [trixie ffffffff]"] == 3, "each image's samples alone, not pooled to 6"
    base = [r for r in doc["results"] if r["platform"] == "native [trixie ffffffff]" and r["metric"] == "HPL_Gflops"]
    assert base[0]["verdict"] == "baseline"
    same = client.get("/api/compare", params=[("run", "i1"), ("run", "i1")]).json()
    assert not any("guest images" in n for n in same["notes"])
    assert "different guest images" in client.get("/compare", params=[("run", "i1"), ("run", "i2")]).text
