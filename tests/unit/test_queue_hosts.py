"""A campaign with `hosts:` queued from the web app runs through the worker (its host is the
controller), with the same preflight as `virtbench run`: a host that cannot be reached fails
the queued run with the host named, before anything is measured."""
from __future__ import annotations

import pytest

from virtbench.config import parse_campaign
from virtbench.errors import InputError
from virtbench.platforms.base import Paths
from virtbench.runner.execute import enqueue, run_queued


def test_a_queued_multi_host_run_goes_through_the_hosts_preflight(store, tmp_path):
    campaign = parse_campaign({"name": "hosts-queued", "platforms": ["native"], "repetitions": 1, "warmups": 0,
                               "benchmarks": [{"name": "sysbench-cpu", "time": 1}],
                               "hosts": ["local", {"name": "gone", "address": "127.0.0.1", "port": 9}]}, "test")
    run_id = enqueue(store, campaign, source="test")
    paths = Paths(state=tmp_path / "state", runtime=tmp_path / "run")
    with pytest.raises(InputError) as caught:
        run_queued(store, run_id, paths)
    assert "gone" in caught.value.message  # the hosts' preflight spoke, not a refusal of the queue
    run = store.run(run_id)
    assert run.status == "failed" and "gone" in (run.error or "")
