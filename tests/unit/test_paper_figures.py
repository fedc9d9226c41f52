"""Figures a paper can print (#29 item 1), checked as a reviewer's tools and eyes check them.

Before: PDFs embedded Type 3 fonts (ACM's and IEEE's checkers reject them), SVG text was
converted to paths, every figure was 7 x 4 in whatever the column, legends sat on the data,
long y-labels were cut, ratios were bars from 0 (a 3-10 % effect invisible), the category
figure's "error bars" were the min-max of its metrics, no figure showed each verdict with its
interval, no data beside a figure, no table for a paper, and the quick run's HTML report was
4.9 MB (4.6 of them the embedded plotly.js)."""
from __future__ import annotations

import csv
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from virtbench.analysis import synthetic
from virtbench.cli import cli
from virtbench.report import builder
from virtbench.store.db import Store

pytest.importorskip("matplotlib")
DATA = Path(__file__).parents[1] / "data" / "report"
WIDTH_IN = {"column": 3.3, "page": 7.0}


@pytest.fixture(scope="module")
def quick_store(tmp_path_factory):
    """A run shaped like the quick comparison: 3 platforms, the quick run's 3 kinds of benchmark,
    its cap of 16 measured rounds."""
    tmp = tmp_path_factory.mktemp("quick")
    store = Store(f"sqlite:///{tmp / 'q.db'}")
    benches = [b for b in synthetic.default_benchmarks() if b.name in ("sim-hpcc", "sim-fio", "sim-sqlite")]
    synthetic.fill(store, "quick", repetitions=16, warmups=1, platforms=synthetic.default_platforms()[:3],
                   benchmarks=benches)
    return store


@pytest.fixture(scope="module")
def fixture_store(tmp_path_factory):
    db = tmp_path_factory.mktemp("old") / "old.sqlite"
    shutil.copy(DATA / "store-0003.sqlite", db)
    return Store(f"sqlite:///{db}")


@pytest.fixture(scope="module")
def quick_column(quick_store, tmp_path_factory) -> Path:
    """The quick run's figure files at column width, written once for the tests that read them
    (each `report --figures` of a run renders every figure in three formats)."""
    out = tmp_path_factory.mktemp("quick-column") / "quick-column"
    _figures(quick_store, "quick", out, "column")
    return out


def _figures(store, run_id, out: Path, width: str) -> list[Path]:
    res = CliRunner().invoke(cli, ["report", run_id, "--figures", str(out), "--figure-width", width,
                                   "--db", store.url])
    assert res.exit_code == 0, res.output
    return sorted(out.iterdir())


def _pdf_fonts(data: bytes) -> set[str]:
    """The Subtype of every font dictionary (matplotlib writes them uncompressed)."""
    return {m.decode() for m in re.findall(rb"/Type\s*/Font\b[^>]*?/Subtype\s*/(\w+)", data, re.S)} | \
        {m.decode() for m in re.findall(rb"/Subtype\s*/(\w+)[^>]*?/Type\s*/Font\b", data, re.S)}


def _png_size(path: Path) -> tuple[int, int]:
    w, h = struct.unpack(">II", path.read_bytes()[16:24])
    return w, h


@pytest.mark.parametrize(("width", "name"), [("column", "quick"), ("page", "old")])
def test_figure_files_pass_a_papers_checks(request, fixture_store, tmp_path, width, name):
    """Each width on one of the two runs (every figure of both widths of both runs took 10
    minutes of CI's unit lane; a figure's width does not depend on the run)."""
    if (width, name) == ("column", "quick"):
        out = request.getfixturevalue("quick_column")
        files = sorted(out.iterdir())
    else:
        out = tmp_path / f"{name}-{width}"
        files = _figures(fixture_store, "fixture-0003", out, width)
    pdfs = [f for f in files if f.suffix == ".pdf"]
    assert pdfs and (out / "story.pdf").exists()
    for pdf in pdfs:
        stem = pdf.with_suffix("")
        for ext in (".svg", ".png", ".csv"):
            assert stem.with_suffix(ext).exists(), f"{stem.name}{ext} missing beside the PDF"
        data = pdf.read_bytes()
        fonts = _pdf_fonts(data)
        assert fonts and "Type3" not in fonts, (pdf.name, fonts)  # TrueType (Type 42) embedded
        if shutil.which("pdffonts"):
            listed = subprocess.run(["pdffonts", str(pdf)], capture_output=True, text=True).stdout
            assert "Type 3" not in listed and "TrueType" in listed, listed
        box = [float(v) for v in re.search(rb"/MediaBox\s*\[([^\]]*)\]", data)[1].split()]
        assert box[2] == pytest.approx(WIDTH_IN[width] * 72, abs=0.5), (pdf.name, box)
        svg = stem.with_suffix(".svg").read_text()
        assert "<text" in svg and f'width="{WIDTH_IN[width] * 72:g}pt"' in svg
        assert "DejaVuSans-" not in svg  # no glyphs drawn as paths
        assert _png_size(stem.with_suffix(".png"))[0] == pytest.approx(WIDTH_IN[width] * 200, abs=2)
        rows = list(csv.reader(stem.with_suffix(".csv").open()))
        assert rows[0][0] == "series" and len(rows) > 1
    md, tex = (out / "tables.md").read_text(), (out / "tables.tex").read_text()
    assert "| platform" in md.lower() or "| benchmark" in md.lower()
    assert re.search(r"^\|---(\|---)+\|$", md, re.M)
    assert "\\begin{tabular}" in tex and "\\toprule" in tex and "\\bottomrule" in tex
    assert re.search(r"\d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\] (slower|faster|same|undecided)", md)


def test_story_figure_every_verdict_with_its_interval(quick_store, quick_column):
    """story.csv of the quick run's files (its rows do not depend on the figure's width)."""
    _report = builder.build(quick_store, "quick")
    run, rows = _report.run, _report.rows
    cells = [r for r in rows if r.benchmark != "lifecycle" and r.platform != run.baseline and r.relative is not None]
    story = list(csv.DictReader((quick_column / "story.csv").open()))
    assert len(story) == len(cells)
    for line in story:
        lo, y, hi = float(line["interval_low"]), float(line[next(k for k in line if k.startswith("relative"))]), \
            float(line["interval_high"])
        assert lo <= y <= hi and line["verdict"] in ("slower", "faster", "same", "inconclusive")


def test_ratio_figures_are_points_on_a_tight_axis_with_legends_outside(fixture_store):
    from virtbench.report import static
    from virtbench.report.figures import RATIO, for_files

    specs, platforms = for_files([builder.build(fixture_store, "fixture-0003")])
    palette = static.palette_of(specs, platforms)
    assert specs[0].id == "story"
    cat = next(s for s in specs if s.id.startswith("categories"))
    assert all(s.lo is None and s.hi is None for s in cat.series)  # a min-max is no interval: no error bars
    for size in ("column", "page"):
        for spec in specs:
            fig = static.render(spec, palette, size)
            try:
                fig.canvas.draw()
                ax = fig.axes[0]
                box = fig.bbox
                texts = [ax.xaxis.label, ax.yaxis.label, ax.title] + ([fig._suptitle] if fig._suptitle else [])
                for t in texts:
                    if t.get_text():
                        e = t.get_window_extent()
                        assert e.x0 >= -1 and e.y0 >= -1 and e.x1 <= box.x1 + 1 and e.y1 <= box.y1 + 1, \
                            (spec.id, size, t.get_text())  # nothing cut at the figure's edge
                legend = fig.legends[0] if fig.legends else None
                if legend is not None:
                    assert not legend.get_window_extent().overlaps(ax.get_window_extent()), spec.id
                if spec.meta.get(RATIO):
                    assert len(ax.patches) == (1 if spec.meta.get("band") else 0), spec.id  # no bars: the band alone
                    lo, hi = ax.get_xlim() if spec.meta.get("story") else ax.get_ylim()
                    assert 0.3 < lo < 1.0 < hi < 3, (spec.id, lo, hi)  # around 1.0, not from 0
            finally:
                static.plt.close(fig)


def test_quick_runs_html_report_is_small_and_self_contained(quick_store, tmp_path):
    page = tmp_path / "q.html"
    res = CliRunner().invoke(cli, ["report", "quick", "--html", str(page), "--db", quick_store.url])
    assert res.exit_code == 0, res.output
    html = page.read_text()
    assert page.stat().st_size < 1_000_000, page.stat().st_size
    assert html.count("<svg") >= 5 and "<text" in html and "* plotly.js v" not in html
    assert html.index('id="fig-story"') < html.index('id="fig-categories')  # the story first
    assert not re.findall(r"""<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)\s*=""", html)
    interactive = tmp_path / "qi.html"
    res = CliRunner().invoke(cli, ["report", "quick", "--html", str(interactive), "--interactive",
                                   "--db", quick_store.url])
    assert res.exit_code == 0 and "* plotly.js v" in interactive.read_text()  # zoom and hover, on request
