"""Figures a reviewer accepts (#42), on the web as in the files.

Before: the web run page drew ratios as bars from 0, in colours of its own (the first platform
after the baseline took the baseline's colour of the files), with labels cut at 24 characters;
`story` had no band for "the same" and a legend a third of its height; `lifecycle` on a linear
axis hid 0.5 ms steps; the trend figure had a legend entry per platform and per warm-up series
(12 for six platforms); `tables.tex` set an 8-platform results table as one tabular three pages
wide, with "?" in one table and "undecided" in the next."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from virtbench.analysis import synthetic
from virtbench.report import builder, paper, static
from virtbench.report.figures import BAND, RATIO, for_files
from virtbench.store.db import Store

DATA = Path(__file__).parents[1] / "data" / "report"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("figs")
    shutil.copy(DATA / "store-0003.sqlite", tmp / "s.db")
    s = Store(f"sqlite:///{tmp / 's.db'}")
    extra = [synthetic.SimPlatform(f"extra-{i}", "runc", "container", dict.fromkeys(
        ("cpu", "memory", "storage", "network", "application"), 0.97)) for i in range(3)]
    synthetic.fill(s, "wide", repetitions=3, platforms=[*synthetic.default_platforms(), *extra])
    return s


def _web_page(store, run_id: str) -> str:
    from fastapi.testclient import TestClient

    from virtbench.web.app import create_app
    from virtbench.web.settings import Settings

    client = TestClient(create_app(Settings(db_url=store.url, token="t" * 24), store), base_url="http://testserver")
    return client.get(f"/runs/{run_id}").text


def test_the_web_draws_points_with_intervals_in_the_reports_colours(store):
    page = _web_page(store, "fixture-0003")
    charts = re.findall(r"<svg class=\"chart[^\"]*\".*?</svg>", page, flags=re.S)
    assert charts
    for chart in charts:
        rects = re.findall(r"<rect class=\"([^\"]*)\"", chart)
        assert set(rects) <= {"band"}, rects  # no bar from 0: only the 'same' band
    story = next(c for c in charts if "Every result relative to" in c)
    assert 'class="band"' in story and "whisker" in story
    # every label whole (the longest result label of this run has 25 characters; the old cut was 24)
    assert "sim-hpcc StarDGEMM_Gflops" in story
    # one palette: the report's files give platforms colours in the run's order (native first)
    report = builder.build(store, "fixture-0003")
    specs, platforms = for_files([report])
    palette = static.palette_of(specs, platforms)
    order = list(dict.fromkeys(palette.values()))
    for name in ("docker", "runc", "qemu"):
        cls = re.search(rf'<title>{name}, [^<]*</title>', story) and re.findall(
            rf'class="(c\d)[^"]*"[^>]*>(?:<title>{name}, )', story)
        assert cls, name
        assert order.index(palette[name]) == int(cls[0][1:]), (name, cls[0], palette[name])


def test_story_has_a_same_band_dodged_markers_and_a_compact_legend(store):
    report = builder.build(store, "wide")
    specs, platforms = for_files([report])
    story = specs[0]
    assert story.id == "story" and story.meta.get(BAND) and story.meta.get(RATIO)
    fig = static.render(story, static.palette_of(specs, platforms), "page")
    try:
        fig.canvas.draw()
        ax = fig.axes[0]
        assert len(ax.patches) == 1  # the band
        ys = {}
        for line in ax.lines:
            for x, y in zip(*line.get_data()):
                if abs(x - 1.0) < 0.5:
                    ys.setdefault(round(float(y)), set()).add(round(float(y), 3))
        assert all(len(v) > 1 for v in ys.values() if v), "platforms of one result dodged, not stacked"
        legend = fig.legends[0].get_window_extent()
        assert legend.height < 0.1 * fig.bbox.height, (legend.height, fig.bbox.height)
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)


def test_lifecycle_on_a_log_axis_and_trend_legends_one_entry_per_platform(store):
    report = builder.build(store, "wide")
    specs, platforms = for_files([report])
    palette = static.palette_of(specs, platforms)
    life = next(s for s in specs if s.id == "lifecycle")
    assert life.ylog and [str(x) for x in life.series[0].x] == ["create", "start", "stop", "remove"]
    trend = next(s for s in specs if s.kind == "trend")
    import matplotlib.pyplot as plt

    for spec, check in ((life, "log"), (trend, "legend")):
        fig = static.render(spec, palette, "page")
        try:
            if check == "log":
                assert fig.axes[0].get_yscale() == "log" and not fig.axes[0].patches
            else:
                labels = [t.get_text() for t in fig.legends[0].get_texts()]
                assert len(labels) == len(report.run.platforms) + 1 and labels[-1] == "warm-up", labels
        finally:
            plt.close(fig)


def test_tables_tex_fits_a_page_and_says_undecided_in_one_word(store):
    report = builder.build(store, "wide")
    tex = paper.latex([report])
    for block in re.findall(r"\\begin\{tabular\}\{(.*?)\}\n(.*?)\\end\{tabular\}", tex, flags=re.S):
        spec, body = block
        wraps = [c.startswith("p") for c in re.findall(r"p\{[^}]*\}|l", spec)]
        rows = [[re.sub(r"\\\w+|[{}$\\]", "", c).strip() for c in line.split(" & ")] for line in body.splitlines()
                if "&" in line]
        widths = [min(paper.WRAP_CHARS if wrap else 10**6, max(len(r[i]) for r in rows)) + 2
                  for i, wrap in enumerate(wraps)]
        assert sum(widths) <= paper.PAGE_CHARS + 10, (widths, rows[0])
    assert " ? " not in tex and "& ? " not in tex and "? -" not in tex
    assert "undecided" in tex and "part 1 of" in tex
    md = paper.markdown([report])
    assert "| ? |" not in md and "| ? " not in md
