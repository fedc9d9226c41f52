"""`--figures` on a line run writes the study's figures, one file per kind (loss-free rate and
latency against line length; percentiles, loss and worst latencies for the longest line), not
one per length, pinning and benchmark key (a paper-scale run wrote hundreds of files)."""
from __future__ import annotations

from types import SimpleNamespace

from virtbench.experiments.line import hdr
from virtbench.experiments.line.report import figures as line_figures
from virtbench.report.figures import for_files
from virtbench.report.model import Report, Section

LENGTHS = (1, 2, 4, 8, 16, 32, 64)
PINS = ("none", "node")
PLATFORMS = ("netns", "lxc")


def _inputs():
    rows, hists, trials, meta = [], {}, {}, {}
    for pin in PINS:
        for n in LENGTHS:
            for p in PLATFORMS:
                lat = {"rate": "max", "rate_pps": 9000.0, "p50": 10.0 + n, "p90": 20.0 + n, "p99": 40.0 + n,
                       "p99.9": 80.0, "p99.99": None, "p99.999": None, "max": 200.0, "count": 10000}
                rows.append({"platform": p, "pinning": pin, "length": n, "ndr_pps": 10000.0 / n,
                             "pdr_pps": 11000.0 / n, "trials": 8, "rounds": 1, "generator_limit_pps": 50000.0,
                             "latency": [lat]})
                hists[(p, pin, n)] = {"max": {0: hdr.from_bins({5: 100, 20: 10, 90: 1})}}
                trials[(p, pin, n)] = [{"trials": [{"rate_pps": 1000.0, "loss": 0.0}, {"rate_pps": 20000.0, "loss": 0.1}]}]
                meta[(p, pin, n)] = {"max": {0: {"rate_pps": 9000.0, "worst": [[0.1, 50.0], [0.2, 70.0]]}}}
    return rows, hists, trials, meta


def test_one_static_figure_per_kind_and_the_per_point_ones_only_interactive():
    figs = line_figures.figures(*_inputs())
    static = [f.id for f in figs if f.static]
    assert static == ["line-ndr", "line-latency", "line-hdr", "line-loss", "line-worst"]
    assert len([f for f in figs if not f.static]) == 3 * len(PINS) * len(LENGTHS)  # still in the HTML/web report
    ndr = next(f for f in figs if f.id == "line-ndr")
    assert len(ndr.series) == 2 * len(PINS) * len(PLATFORMS) and ndr.series[0].x == list(LENGTHS)
    latency = next(f for f in figs if f.id == "line-latency")
    p99 = next(s for s in latency.series if s.name == "netns p99 (pinning none)")
    assert p99.y == [40.0 + n for n in LENGTHS]
    longest = next(f for f in figs if f.id == "line-hdr")
    assert "64 nodes" in longest.title and len(longest.series) == len(PINS) * len(PLATFORMS)


def test_for_files_leaves_out_the_per_key_figures_of_an_experiment_run():
    figs = line_figures.figures(*_inputs())
    run = SimpleNamespace(id="r", campaign={"experiment": "line"}, platforms=[SimpleNamespace(name=p) for p in PLATFORMS],
                          baseline="netns", host=None, host_facts={"hostname": "h"})
    report = Report(run, rows=[], failures=[], sections=[Section(key="line", title="Line topology", data=[], figures=figs)])
    specs, platforms = for_files([report])
    assert [f.id for f in specs] == ["line-ndr", "line-latency", "line-hdr", "line-loss", "line-worst"]
    assert platforms == list(PLATFORMS)
