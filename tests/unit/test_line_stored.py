"""Study 004's figures in the paper's shapes, from a real stored line run (tests/data/line/):
the loss curve traced past the first loss (Fig. 3), the 5000 worst latencies at 17.3 kpkt/s of
the round with the highest worst case (Fig. 8), the HDR plot of that round (Figs. 5-7), and the
counters the paper blamed: dTLB misses as a share of loads (null without a PMU, said why) and
rescheduling interrupts per CPU."""
from __future__ import annotations

import shutil

import pytest

from virtbench.experiments.line import hdr
from virtbench.experiments.line import report as line
from virtbench.store.db import Store


@pytest.fixture(scope="module")
def section(tmp_path_factory):
    from pathlib import Path
    src = Path(__file__).parents[1] / "data" / "line" / "run.sqlite"
    db = tmp_path_factory.mktemp("line") / "run.sqlite"
    shutil.copy(src, db)  # the fixture stays as recorded
    store = Store(f"sqlite:///{db}")
    (run,) = store.runs()
    return store, run, line.build(store, run)


def fig(section, fid):
    return next(f for f in section[2].figures if f.id == fid and f.static)


def test_loss_curve_goes_past_the_first_loss_for_every_length(section):
    store, run, _ = section
    f = fig(section, "line-loss")
    assert "pinning node" in f.title
    names = {s.name for s in f.series}
    # one curve per length (Fig. 3)
    assert names == {f"{p} {n} node{'' if n == 1 else 's'}" for p in ("netns", "lxc") for n in (1, 2, 4)}
    for s in f.series:
        assert s.x == sorted(s.x) and len(set(s.x)) == len(s.x)
    top = run.provenance["line"]["generator_top_pps"]
    for a in store.attachments(run.id, kind="line:search"):
        trials = a.json()["trials"]
        failed = [i for i, t in enumerate(trials)  # every goal failed: loss above 0.5 %, or the rate not sent
                  if t["loss"] > 0.005 or t["sent"] < 0.99 * t["rate_pps"] * t["seconds"]]
        if failed:  # past_loss: 3 more steps of 10000 pkt/s after it, unless the generator's limit came first
            assert len(trials) - failed[0] - 1 == 3 or trials[-1]["rate_pps"] + 10000 > top, trials


def test_worst_latencies_at_the_papers_rate_of_the_worst_round(section):
    store, run, sec = section
    f = fig(section, "line-worst")
    assert f.title.startswith("5000 worst latencies over time, 4 nodes") and "highest worst case" in f.title
    for s in f.series:
        assert s.style == "points" and "17300 pkt/s" in s.name
        counts = [int(t.split()[0]) for t in s.text]
        assert sum(counts) == 5000 and s.y == sorted(s.y, reverse=True)
    row = next(r for r in sec.data if r["platform"] == "lxc" and r["length"] == 4)
    lat = next(x for x in row["latency"] if x["rate"] == "17300pps")
    rounds = {e.round: e for e in store.executions(run.id) if e.benchmark == "line[length=4,pinning=node]"
              and e.platform == "lxc"}
    maxima = {r: hdr.decode(a.data).get_max_value() for r, e in rounds.items()
              for a in store.attachments(run.id, name="hdr@17300pps", execution_ids=[e.id])}
    assert lat["worst_run"]["round"] == max(maxima, key=maxima.get)
    assert f"lxc 17300 pkt/s round {lat['worst_run']['round'] + 1}" in [s.name for s in f.series]


def test_hdr_plot_draws_the_worst_round(section):
    f = fig(section, "line-hdr")
    assert "highest worst case" in f.title and all(" round " in s.name for s in f.series)
    assert all(s.x == sorted(s.x) and s.y == sorted(s.y) for s in f.series)  # percentiles rise


def test_counters_give_dtlb_as_a_share_and_rescheduling_interrupts(section):
    sec = section[2]
    t = next(t for t in sec.tables if t.title.startswith("counters"))
    assert "dTLB misses % of loads" in t.columns and "RES per CPU per trial" in t.columns
    dtlb, res, per_cpu = (t.columns.index(c) for c in ("dTLB misses % of loads", "RES interrupts per trial",
                                                       "RES per CPU per trial"))
    assert all(r[dtlb] is None for r in t.rows)  # no PMU on this host
    assert any("share of loads" in n for n in sec.notes) and any("no PMU" in n for n in sec.notes)
    assert all(r[res] is not None and r[res] >= 0 for r in t.rows)
    assert all(r[per_cpu].startswith("cpu0 ") and "cpu1 " in r[per_cpu] for r in t.rows)
    lat = [x for r in sec.data for x in r["latency"]]
    assert all(x["dtlb_miss_pct"] is None and x["res_interrupts"] > 0 for x in lat)  # in report --json too


def test_the_worst_latencies_are_drawn_as_a_cloud_of_points(section):
    """Fig. 8 is a scatter over time; joined in the order of their size they were a scribble."""
    pytest.importorskip("matplotlib")
    from virtbench.report import static

    f = fig(section, "line-worst")
    figure = static.render(f)
    drawn = [ln for ax in figure.axes for ln in ax.get_lines() if ln.get_label() in {s.name for s in f.series}]
    assert len(drawn) == len(f.series) and all(ln.get_linestyle() == "None" for ln in drawn)


def test_the_run_flagged_an_implausible_point_and_measured_it_again(section):
    """On this shared host lxc's 1-node PDR came out above netns's beyond the noise: the run
    logged it, searched that point once more (line-recheck, no samples), and the report says so."""
    store, run, sec = section
    (again,) = [e for e in store.executions(run.id) if e.benchmark.startswith("line-recheck[")]
    assert again.benchmark == "line-recheck[length=1,pinning=node]" and again.platform == "lxc"
    assert not [s for s in store.samples(run.id) if s.benchmark.startswith("line-recheck[")]  # outside the statistics
    row = next(r for r in sec.data if (r["platform"], r["length"]) == ("lxc", 1))
    (flag,) = row["implausible"]
    assert flag["against"] == {"platform": "netns", "length": 1} and flag["recheck_pps"] is not None
    assert any(t.title.startswith("implausible results") for t in sec.tables)
    assert any(n.startswith("implausible: lxc 1 node (pinning node)") and "measured again" in n for n in sec.notes)
