"""One notation on every surface (#42): a stored run of every kind (the run stored by old code in
tests/data/report, a synthetic benchmarks run with a stack, density, migration, line) rendered
through every surface: the terminal report (and --detail), the HTML file (the web's download
renders the same), the figures (their titles, axes and notes, as every drawing shows them) and
tables.md/tables.tex, the web run page, `compare` in the terminal and the web's Before/after
and compare pages, the dashboard, `show` and `list`. Every text a person reads must follow
notation.py: one interval style `[lo, hi]`, no exponents, µs (never us), no Python reprs, labels
instead of raw keys, times with their zone to the second, no signed zero.

Before: seven notations for one interval (`[0.982–1.005]`, `[0.893, 0.962]`, `0.8928..0.9619`,
`[0.94-1.02]`, `[0.9431, 1.023]`, `[-5..+2]`, `[-10.7 to -3.8 %]`), `7.646e-04`, `[us]` on the
web and in figures, `('AES-256', 'Blowfish')`, `None`, `True` in `list` and provenance,
`higher_is_better False` heading --detail, "host: host (warn)", "Table 6 style", and
`21:02:42.609720` without a zone on the web run page."""
from __future__ import annotations

import re
import shutil
from html import unescape

import pytest
from click.testing import CliRunner
from test_every_surface import DATA, _density, _line, _migration

from virtbench.analysis import synthetic
from virtbench.cli import cli
from virtbench.report import builder, layout, paper
from virtbench.report.figures import run_figures
from virtbench.store.db import Store

RULES = {
    "an interval as lo..hi": re.compile(r"[+-]?\d[\d.]*\.\.[+-]?\d"),
    "an interval as [lo-hi]": re.compile(r"\[\s*[+-]?\d[\d.]*\s*%?\s*[–-]\s*[+-]?\d[\d.]*\s*%?\s*\]"),
    "an interval as [lo to hi]": re.compile(r"\[\s*[+-]?\d[\d.]*\s*%?\s+to\s+[+-]?\d"),
    "an exponent": re.compile(r"\d\.?\d*e[+-]\d\d"),
    "a Python repr": re.compile(r"\('[^']*', '|\bNone\b|\bTrue\b|\bFalse\b"),
    "us for µs": re.compile(r"\[us\]|\d us\b|\(us\)"),
    "a time with microseconds": re.compile(r"\d\d:\d\d:\d\d\.\d+"),
    "a raw key": re.compile(r"\bhigher_is_better\b|\bratio_of_means\b|\brelative_ci95\b|\bverdict_reason\b"),
    "a paper-style label": re.compile(r"Table \d(/\d)? style|Fig\. \d style"),
    "a doubled label": re.compile(r"\b(\w+): \1 \((warn|info)\)"),
    "a signed zero": re.compile(r"(?<![\d.])[+-]0(\.0+)?(?![\d.])"),
}
CANONICAL = re.compile(r"\[[+±-]?\d[\d,]*(\.\d+)?( %)?, [+±-]?\d[\d,]*(\.\d+)?( %)?\]")
"""The one interval notation; any bracket holding two numbers must read so."""
TWO_NUMBERS = re.compile(r"\[[^\[\]]*\d[^\[\]]*[,;–]\s*[^\[\]]*\d[^\[\]]*\]")
RUNS = ("fixture-0003", "bench", "density", "migration", "line")


def violations(text: str) -> list[str]:
    found = [f"{name}: {m.group()!r}" for name, rx in RULES.items() for m in rx.finditer(text)]
    for m in TWO_NUMBERS.finditer(text):
        inner = m.group()
        if re.fullmatch(r"\[[+±-]?[\d.,]+( %)?, [+±-]?[\d.,]+( %)?\]", inner) and not CANONICAL.fullmatch(inner):
            found.append(f"an interval off the notation: {inner!r}")
    return found


def visible(html: str) -> str:
    html = re.sub(r"<script.*?</script>|<style.*?</style>", " ", html, flags=re.S)
    return unescape(re.sub(r"<[^>]+>", " ", html))


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("voice")
    shutil.copy(DATA / "store-0003.sqlite", tmp / "s.db")
    s = Store(f"sqlite:///{tmp / 's.db'}")
    benches = synthetic.default_benchmarks()[:5]  # every notation, a fifth of the figures to draw
    synthetic.fill(s, "bench", repetitions=4, drift={"runc": 0.03}, fail={("qemu", "sim-fio"): [2]}, benchmarks=benches)
    synthetic.fill(s, "later", repetitions=4, seed=5, benchmarks=benches)
    _density(s)
    _migration(s)
    _line(s)
    return s


@pytest.fixture(scope="module")
def web(store):
    from fastapi.testclient import TestClient

    from virtbench.web.app import create_app
    from virtbench.web.settings import Settings

    return TestClient(create_app(Settings(db_url=store.url, token="t" * 24), store), base_url="http://testserver")


def _figure_text(report) -> str:
    """What every drawing of the run's figures prints: titles, axis labels, notes, ticks and hover texts."""
    figures = [*run_figures(report.run, report.rows), *(f for s in report.sections for f in s.figures)]
    return "\n".join(" ".join([f.title, f.xlabel, f.ylabel, f.note, *(f.xticks[1] if f.xticks else []),
                               *(t for s in f.series for t in (s.text or []))]) for f in figures)


@pytest.mark.usefixtures("figures_drawn_once")
@pytest.mark.parametrize("run_id", RUNS)
def test_every_surface_speaks_one_notation(store, web, run_id, tmp_path, monkeypatch):
    monkeypatch.setattr("virtbench.report.html.plotly_js", lambda: "")
    runner = CliRunner()
    report = builder.build(store, run_id)
    html_file = tmp_path / "r.html"
    assert runner.invoke(cli, ["report", run_id, "--html", str(html_file), "--db", store.url]).exit_code == 0
    surfaces = {
        "terminal": runner.invoke(cli, ["report", run_id, "--db", store.url]).output,
        "terminal --detail": runner.invoke(cli, ["report", run_id, "--detail", "--db", store.url]).output,
        "show": runner.invoke(cli, ["show", run_id, "--failed", "--db", store.url]).output,
        "HTML file": visible(html_file.read_text()),
        "figures": _figure_text(report),
        "tables.md": paper.markdown([report]),
        "tables.tex": paper.latex([report]),
        "web run page": visible(web.get(f"/runs/{run_id}").text),
    }  # the web's HTML download is the HTML file's renderer (test_every_surface holds them to the same parts)
    assert any(s.key == "headline" for s in layout.of(report))
    bad = {name: v[:5] for name, text in surfaces.items() if (v := violations(text))}
    assert not bad, bad


def test_compare_and_lists_speak_it_too(store, web):
    runner = CliRunner()
    surfaces = {
        "compare": runner.invoke(cli, ["compare", "bench", "later", "--db", store.url]).output,
        "web before/after": visible(web.get("/compare/before-after?a=bench&b=later").text),
        "web compare": visible(web.get("/compare?run=bench&run=later").text),
        "web dashboard": visible(web.get("/").text),
        **{f"list {w}": runner.invoke(cli, ["list", w]).output for w in ("benchmarks", "platforms", "probes")},
    }
    bad = {name: v[:5] for name, text in surfaces.items() if (v := violations(text))}
    assert not bad, bad
    assert "algorithms=AES-256 Blowfish" in surfaces["list benchmarks"]


def test_the_checker_catches_every_old_notation():
    """The rules fail on what the surfaces printed before."""
    for old in ("0.993 [0.982–1.005]", "0.8928..0.9619", "[0.94-1.02]", "? -5% [-5..+2]", "[-10.7 to -3.8 %]",
                "7.646e-04 s", "latency [us]", "algorithms=('AES-256', 'Blowfish')", "vm None", "evp=True",
                "higher_is_better", "Table 6 style", "host: host (warn)", "2026-11-24 21:02:42.609720",
                "slower [-3.4, -0.0]"):
        assert violations(old), old
    for new in ("0.993 [0.982, 1.005]", "-1.7 % [-7.4, +4.4]", "? ±0% [-4, +5]", "0.7646 ms", "latency [µs]",
                "2026-11-24 21:02:42 UTC", "slower by 3.4 % [-6.1, -0.04], 3 rounds paired"):
        assert not violations(new), new
