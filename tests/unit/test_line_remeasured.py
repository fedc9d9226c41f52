"""A line run's result that the run itself judged disturbed is replaced by its re-measurement on
every surface, with the note; a generator limit that reads below a line's NDR is flagged (#42).

Before: a run judged its own 8-node loss-free rate implausible (79,391 pkt/s, 22 % above the
1-node line), measured it again (65,784, within the noise) and said so in a note, but the
tables, the JSON and the figures still carried 79,391; the generator's own limit (length 0:
NDR 48,004) read lower than the 1-node line (65,280) without a flag.

The stored line run of tests/data/line (lxc's 1-node PDR 45,000 pkt/s, above netns's 35,000
beyond the noise, measured again) with its re-measurement set to 34,000 (within the noise: the
first was disturbed) and its generator limit to 20,000 pkt/s in both rounds."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import text

from virtbench.cli import cli
from virtbench.experiments.line import report as line
from virtbench.report import builder
from virtbench.store.db import Store

SRC = Path(__file__).parents[1] / "data" / "line" / "run.sqlite"


@pytest.fixture(scope="module")
def disturbed(tmp_path_factory):
    db = tmp_path_factory.mktemp("remeasured") / "run.sqlite"
    shutil.copy(SRC, db)
    store = Store(f"sqlite:///{db}")
    (run,) = store.runs()
    again = next(e for e in store.executions(run.id) if e.benchmark.startswith("line-recheck["))
    att = next(a for a in store.attachments(run.id, kind="line:search") if a.execution_id == again.id)
    doc = {**att.json(), "pdr_pps": 34_000.0, "ndr_pps": 30_000.0}
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE attachments SET data = :d WHERE id = :i"), {"d": json.dumps(doc).encode(), "i": att.id})
        conn.execute(text("UPDATE samples SET value = 20000 WHERE run_id = :r AND benchmark = "
                          "'line[length=0,pinning=node]' AND metric = 'ndr_pps'"), {"r": run.id})
    return store, run


def test_the_remeasurement_replaces_the_disturbed_result_everywhere(disturbed):
    store, run = disturbed
    sec = line.build(store, run)
    row = next(r for r in sec.data if (r["platform"], r["length"]) == ("lxc", 1))
    assert row["pdr_pps"] == 34_000.0 and row["remeasured"] == {"pdr_pps": {"first": 45_000.0, "again": 34_000.0}}
    (flag,) = row["implausible"]
    assert flag["confirmed"] is False
    assert any("show the re-measurement" in n and "lxc 1 node" in n for n in sec.notes)
    rate_table = next(t for t in sec.tables if t.title.startswith("loss-free rate"))
    lxc1 = next(r for r in rate_table.rows if r[0] == "lxc" and r[2] == 1)
    assert lxc1[4] == 34_000
    drawn = [y for f in sec.figures for s in f.series if s.name.startswith("lxc") for y in s.y]
    assert 45_000.0 not in drawn
    # the main rows (every table, the JSON, the figures of the report) carry it too
    report = builder.build(store, run.id, cached=False)
    pdr = next(r for r in report.rows if r.benchmark == "line[length=1,pinning=node]" and r.metric == "pdr_pps"
               and r.platform == "lxc")
    assert set(pdr.values) == {34_000.0}
    doc = json.loads(CliRunner().invoke(cli, ["report", run.id, "--json", "--db", store.url]).output)
    assert all(r["pdr_pps"] != 45_000.0 for r in doc["line"] if r["platform"] == "lxc" and r["length"] == 1)
    res = next(r for r in doc["results"] if r["benchmark"] == "line[length=1,pinning=node]"
               and r["metric"] == "pdr_pps" and r["platform"] == "lxc")
    assert res["mean"] == pytest.approx(34_000.0)


def test_a_generator_limit_below_a_line_is_flagged(disturbed):
    store, run = disturbed
    sec = line.build(store, run)
    assert all(r["generator_limit_suspect"] for r in sec.data)
    assert any(n.startswith("generator limit (pinning node): 20,000 pkt/s reads below") for n in sec.notes)
    rate_table = next(t for t in sec.tables if t.title.startswith("loss-free rate"))
    assert {r[-1] for r in rate_table.rows} == {"unknown (generator limit suspect)"}
