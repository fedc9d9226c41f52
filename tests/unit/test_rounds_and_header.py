"""What the header and the figures say of the rounds (#42).

Before: the header of a `shuffle: false` run said "randomized order"; a quick run (1 warm-up
round, 3 noise-check executions of the baseline stored as rounds 1-3) drew those executions in
its trend figures as rounds 1-3, and its warnings named the measured rounds 4, 5, 6 of a run
whose header said "3 rounds measured"."""
from __future__ import annotations

import re

from click.testing import CliRunner
from sqlalchemy import update

from virtbench.analysis import synthetic
from virtbench.cli import cli
from virtbench.report import builder
from virtbench.report.figures import run_figures
from virtbench.report.units import round_numbers
from virtbench.store.db import Store
from virtbench.store.models import Run


def _quick_like(tmp_path, *, shuffle: bool = True) -> Store:
    """A run stored as the quick comparison stores one: warm-up round 0, the noise check's
    executions as rounds 1-3 (warm-up), the measured rounds 4-6."""
    store = Store(f"sqlite:///{tmp_path / 'q.db'}")
    synthetic.fill(store, "q", repetitions=3, warmups=4, fail={("docker", "sim-fio"): [5]})
    with store.session.begin() as s:
        run = s.get(Run, "q")
        s.execute(update(Run).where(Run.id == "q").values(
            campaign={**run.campaign, "warmups": 1, "shuffle": shuffle, "adaptive": {"noise_check": 3}}))
    return store


def test_rounds_are_numbered_as_the_header_counts_them(tmp_path):
    shown = round_numbers({"warmups": 1, "adaptive": {"noise_check": 3}})
    assert [shown(r, r < 4) for r in range(7)] == [0, 0, 0, 0, 1, 2, 3]
    assert [round_numbers({"warmups": 1})(r, r < 1) for r in range(3)] == [0, 1, 2]  # campaign files: as stored
    store = _quick_like(tmp_path)
    report = builder.build(store, "q")
    assert {r for row in report.rows for r in row.rounds} == {1, 2, 3}
    assert {f["round"] for f in report.failures} == {2}
    trend = next(f for f in run_figures(report.run, report.rows) if f.kind == "trend")
    measured = {x for s in trend.series if s.style != "hollow" for x in s.x}
    warm = {x for s in trend.series if s.style == "hollow" for x in s.x}
    assert measured == {1, 2, 3} and warm <= {0} and "noise check" in trend.note
    out = CliRunner().invoke(cli, ["report", "q", "--db", store.url]).output
    assert "3 rounds measured" in out
    cited = {int(n) for m in re.finditer(r"\(rounds? ([\d, ]+)\)", out) for n in m.group(1).split(",")}
    assert cited <= {1, 2, 3}, cited
    shown_rounds = CliRunner().invoke(cli, ["show", "q", "--db", store.url]).output
    assert re.search(r"^\s+\d+\s+3 ", shown_rounds, flags=re.M) and not re.search(r"^\s+\d+\s+6 ", shown_rounds,
                                                                                    flags=re.M)


def test_a_fixed_order_run_says_so(tmp_path):
    store = _quick_like(tmp_path, shuffle=False)
    out = " ".join(CliRunner().invoke(cli, ["report", "q", "--db", store.url]).output.split())
    assert "fixed order (shuffle: false)" in out and "randomized order" not in out
