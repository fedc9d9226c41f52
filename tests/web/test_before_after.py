"""`compare A B` and the web's Before / after page cannot be fooled by the host (#42).

Before: two quick runs 11 minutes apart came out "slower by about 2 %" on every platform,
native included, which a reader blames on the change under test; lifecycle rows showed means
while `report` shows medians; the CLI put lifecycle last and the web did not; one web interval
read "[-3.4 to -0.0 %]" beside "slower"; the JSON did not say how it compared."""
from __future__ import annotations

import json
import re
from html import unescape

import pytest
from click.testing import CliRunner

from virtbench.analysis import synthetic
from virtbench.cli import cli
from virtbench.notation import change_interval
from virtbench.report.before_after import FORMAT_VERSION
from virtbench.store.db import Store

from .helpers import make_client


@pytest.fixture(scope="module")
def drifted(tmp_path_factory):
    """Run B on a host 6 % slower than during run A, every platform alike (the platforms themselves unchanged)."""
    store = Store(f"sqlite:///{tmp_path_factory.mktemp('ba') / 'ba.db'}")
    plats = synthetic.default_platforms()[:3]
    benches = synthetic.default_benchmarks()[:3]
    synthetic.fill(store, "before", repetitions=8, platforms=plats, benchmarks=benches, seed=3)
    synthetic.fill(store, "after", repetitions=8, platforms=plats, benchmarks=benches, seed=4, host_speed=0.94)
    return store


def _json(store, *extra):
    res = CliRunner().invoke(cli, ["compare", "before", "after", "--json", *extra, "--db", store.url])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def test_the_host_moving_is_flagged_and_taken_out_of_each_platform(drifted):
    doc = _json(drifted)
    assert doc["format_version"] == FORMAT_VERSION == 4 and doc["mode"] == "relative" and doc["baseline"] == "native"
    assert doc["baseline_drift"] and doc["baseline_drift"]["change"] < 0.97
    assert any("the baseline native itself moved between the runs" in n for n in doc["notes"])
    bench = [r for r in doc["results"] if r["category"] != "lifecycle"]
    native = [r for r in bench if r["platform"] == "native"]
    others = [r for r in bench if r["platform"] != "native"]
    assert all(r["basis"] == "absolute" for r in native) and sum(r["verdict"] == "slower" for r in native) >= 2
    assert all(r["basis"] == "relative to native" and r["statistic"] == "ratio" for r in others)
    assert sum(r["verdict"] == "slower" for r in others) <= 1, [(r["benchmark"], r["platform"], r["verdict"])
                                                               for r in others]
    absolute = _json(drifted, "--absolute")
    assert absolute["mode"] == "absolute"
    moved = [r for r in absolute["results"] if r["platform"] != "native" and r["verdict"] == "slower"]
    assert len(moved) >= 3 and all(r["baseline_moved"] == "slower" for r in moved)
    text = CliRunner().invoke(cli, ["compare", "before", "after", "--absolute", "--db", drifted.url]).output
    assert "⚑" in text and "moved" in text


def test_every_row_uses_the_reports_statistic(drifted):
    doc = _json(drifted, "--absolute")
    from virtbench.report import builder

    rows = {(r.benchmark, r.metric, r.platform): r for r in builder.build(drifted, "after").rows}
    for r in doc["results"]:
        row = rows[(r["benchmark"], r["metric"], r["platform"])]
        expected = row.median if r["category"] == "lifecycle" else row.mean
        assert r["statistic"] == ("median" if r["category"] == "lifecycle" else "mean")
        assert r["value_b"] == pytest.approx(expected)


def test_cli_and_web_show_the_same_rows_in_the_same_order(drifted):
    doc = _json(drifted)
    client = make_client(drifted)
    api = client.get("/api/compare/before-after", params={"a": "before", "b": "after"}).json()
    key = lambda rs: [(r["benchmark"], r["metric"], r["platform"], r["verdict"]) for r in rs]  # noqa: E731
    assert key(api["results"]) == key(doc["results"])
    assert [r["category"] == "lifecycle" for r in doc["results"]] == sorted(r["category"] == "lifecycle"
                                                                            for r in doc["results"])
    page = client.get("/compare/before-after", params={"a": "before", "b": "after"}).text
    body = page[page.index('id="before-after-table"'):]
    cells = [[unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", tr, flags=re.S)]
             for tr in re.findall(r"<tr><td>.*?</tr>", body, flags=re.S)]
    assert [(c[0], c[1].split(" [")[0], c[2].split(" relative")[0]) for c in cells] == \
        [(r["benchmark"], r["metric"], r["platform"]) for r in doc["results"]]
    text = CliRunner().invoke(cli, ["compare", "before", "after", "--db", drifted.url]).output
    from virtbench.report.before_after import shown

    for r, c in zip(doc["results"], cells):
        assert c[3] == shown(r, "a") and c[4] == shown(r, "b")  # the same words on both surfaces
        assert shown(r, "a") in text


def test_an_interval_that_excludes_one_never_reads_as_reaching_it():
    assert change_interval(0.966, 0.99996) == "[-3.4, -0.004]"
    assert change_interval(1.00004, 1.05) == "[+0.004, +5.0]"
