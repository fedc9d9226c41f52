"""The HTML report opened in headless Chromium, offline: renders, no console errors, no network.

Two ways in: playwright-core over the DevTools protocol (tests/browser, `npm install` there;
it drives the system's /usr/bin/chromium and never downloads a browser) for console
errors, blocked requests and every figure drawn; and Chromium's own --dump-dom for the
rendered DOM. Each is skipped with its reason when its tool is missing.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from virtbench.analysis import synthetic
from virtbench.cli import cli
from virtbench.store.db import Store, now

BROWSER_DIR = Path(__file__).parents[1] / "browser"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]
HOSTILE = '<script>alert("x")</script><img src=http://example.invalid/x.png>'


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("html")
    store = Store(f"sqlite:///{tmp / 'h.db'}")
    synthetic.fill(store, "r1", hostname="alpha", repetitions=6, drift={"runc": 0.02},
                   fail={("qemu", "sim-fio"): [3]})
    synthetic.fill(store, "r2", hostname="beta", repetitions=6, seed=5, host_speed=0.9,
                   facts=synthetic.host_facts("beta", governor="powersave", turbo="on"))
    # A failure whose text would break the page if it were not escaped.
    store.record(run_id="r1", round=99, warmup=False, platform="docker", benchmark="sim-mbw", status="failed",
                 started_at=now(), finished_at=now(), duration_s=0.1, error=HOSTILE, stderr=HOSTILE)
    runner = CliRunner()
    single, merged = tmp / "single.html", tmp / "merged.html"
    # --interactive: the plotly.js figures this browser test drives (the default is inline SVG)
    for args in (["report", "r1", "--html", str(single), "--interactive"],
                 ["report", "r1", "r2", "--html", str(merged), "--interactive"]):
        res = runner.invoke(cli, [*args, "--db", store.url])
        assert res.exit_code == 0, res.output
    return single, merged


def test_self_contained_and_escaped(reports):
    for path in reports:
        html = path.read_text()
        refs = re.findall(r"""<(?:script|link|img|iframe|source)\b[^>]*\b(?:src|href)\s*=\s*["']?([^"' >]+)""", html)
        assert refs == [], f"external resources referenced: {refs[:5]}"
        assert "cdn.plot.ly/plotly" not in html and "Plotly.newPlot" in html and len(html) > 3_000_000
        assert HOSTILE not in html and "&lt;script&gt;alert" in html
        figs = json.loads(re.search(r'<script type="application/json" id="vb-figs">(.*?)</script>', html, re.S)[1])
        assert figs and all("data" in f and "layout" in f for f in figs.values())


def test_content(reports):
    single, merged = (p.read_text() for p in reports)
    for needle in ("Relative performance", "Hypervisors compared", "Container runtimes compared",
                   "Performance availability", "Stack prediction", "Failures", "Provenance", "Sim CPU 3000",
                   "slower by", "badge bad", "Welch t interval", "drift", "exit status 1: device busy"):
        assert needle in single, needle
    assert "Across hosts" in merged and "alpha" in merged and "beta" in merged and "powersave" in merged
    assert merged.count('<section id="r') == 2


def _node_ok() -> str | None:
    if not shutil.which("node"):
        return "node is not installed"
    if not (BROWSER_DIR / "node_modules" / "playwright-core").is_dir():
        return "run `npm install` in tests/browser for playwright-core"
    if not Path(CHROMIUM).exists():
        return "the Debian package chromium is not installed"
    return None


@pytest.mark.parametrize("which", [0, 1], ids=["single", "merged"])
def test_renders_in_chromium_offline(reports, which):
    if reason := _node_ok():
        pytest.skip(reason)
    proc = subprocess.run(["node", str(BROWSER_DIR / "check_report.mjs"), str(reports[which]), CHROMIUM],
                          capture_output=True, text=True, timeout=600, cwd=BROWSER_DIR)
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout)
    assert seen["consoleErrors"] == [], seen["consoleErrors"][:5]
    assert seen["pageErrors"] == [], seen["pageErrors"][:5]
    assert seen["externalRequests"] == []  # nothing even tried to reach the network
    figs = json.loads(re.search(r'id="vb-figs">(.*?)</script>', reports[which].read_text(), re.S)[1])
    assert seen["figures"] == seen["drawn"] == len(figs) > 40
    assert seen["logAxes"] >= 2  # HDR latency axis and the l sweep
    assert seen["filterHidesRows"] and seen["mainRows"] > 10
    assert "virtbench report" in seen["title"]
    assert "alert(" not in seen["text"] or "<script>alert" in seen["text"]  # shown as text, never run


def test_dump_dom(reports, tmp_path):
    if not Path(CHROMIUM).exists():
        pytest.skip("the Debian package chromium is not installed")
    profile = tmp_path / f"chromium-{uuid.uuid4().hex[:6]}"
    proc = subprocess.run([CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--window-size=1400,20000",
                           "--virtual-time-budget=60000", "--dump-dom", reports[0].as_uri()],
                          capture_output=True, text=True, timeout=300)
    dom = proc.stdout
    assert 'data-ready="1"' in dom, proc.stderr[-2000:]
    assert dom.count('class="main-svg"') >= 2  # figures in the tall viewport were drawn by plotly
    assert "<script>alert" not in dom.split('id="vb-figs"')[0].replace("&lt;script&gt;", "")


def test_every_execution_failed_still_renders(tmp_path):
    """A run with no sample at all: the page says so, shows the failures, and has no broken chart."""
    from virtbench.report import builder, html

    store = Store(f"sqlite:///{tmp_path / 'dead.db'}")
    store.create_run(run_id="dead", name="t", campaign={"baseline": "native"}, source="", seed=1, host_id=None,
                     host_facts={}, image={}, provenance={}, benchmarks=[],
                     platforms=[{"name": n, "type": n, "label": n, "config": {}} for n in ("native", "runc")])
    for platform in ("native", "runc"):
        store.record(run_id="dead", round=0, warmup=False, platform=platform, benchmark="lifecycle",
                     status="failed", started_at=now(), finished_at=now(), duration_s=0.0, error="runtime missing")
    page = html.write(tmp_path / "dead.html", [builder.build(store, "dead")]).read_text()
    assert page.count("runtime missing") == 2 and "No stacked platforms" in page
    if _node_ok() is None:
        proc = subprocess.run(["node", str(BROWSER_DIR / "check_report.mjs"), str(tmp_path / "dead.html"), CHROMIUM],
                              capture_output=True, text=True, timeout=300, cwd=BROWSER_DIR)
        seen = json.loads(proc.stdout)
        assert seen["consoleErrors"] == seen["pageErrors"] == seen["externalRequests"] == []
