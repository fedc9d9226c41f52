"""The report reads each value with only the columns that vary (store.results.sample_values) and
each metric's unit, direction and category once: the rows must be those of the full read
(results.samples through summarize), on SQLite and PostgreSQL, for one host and per host of a
multi-host run, with warm-ups, failures and multi-instance executions."""
from __future__ import annotations

import pytest

from virtbench.analysis import summary as asum
from virtbench.analysis import synthetic
from virtbench.report.result_rows import declared_metrics
from virtbench.store import results
from virtbench.store.db import now


def _rows(store, run_id, host=None):
    run = store.run(run_id)
    args = ({}, [p.name for p in run.platforms], run.baseline, declared_metrics(run))
    full = asum.summarize(results.samples(store, run_id, host), *args)
    fast = asum.summarize_values(*results.sample_values(store, run_id, host), *args)
    return [r.public() | {"values": r.values, "rounds": r.rounds, "warmup": r.warmup_values} for r in full], \
        [r.public() | {"values": r.values, "rounds": r.rounds, "warmup": r.warmup_values} for r in fast]


@pytest.mark.parametrize("hosts", [(), ("lab-a", "lab-b")])
def test_value_read_gives_the_rows_of_the_full_read(store, hosts):
    run_id = synthetic.fill(store, "read", repetitions=4, warmups=1, hosts=hosts,
                            fail={("docker", "sim-fio"): [2]})
    # a multi-instance execution: instance 0 holds the round's mean, 1..N each instance's own value
    store.record(run_id=run_id, round=9, warmup=False, platform="docker", benchmark="sim-fio", status="ok",
                 started_at=now(), finished_at=now(), duration_s=0.1, host=hosts[0] if hosts else "",
                 samples=[{"metric": "randread_iops", "value": v, "unit": "IO/s", "higher_is_better": True,
                           "category": "storage", "instance": i} for i, v in ((1, 90.0), (2, 110.0), (0, 100.0))])
    for host in hosts or (None,):
        full, fast = _rows(store, run_id, host)
        assert len(full) > 20 and fast == full
    values, meta = results.sample_values(store, run_id, hosts[0] if hosts else None)
    assert all(len(v) == 7 for v in values) and meta[("sim-fio", "randread_iops")] == ("IO/s", True, "storage")
