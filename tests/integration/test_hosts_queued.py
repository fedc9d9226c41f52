"""A multi-host campaign queued (as the web app's schedule does) and run by `virtbench worker`:
the worker's host is the controller and the second host (a network namespace with its own
sshd) is measured over SSH into the same run."""
from __future__ import annotations

import subprocess
import sys

import pytest

from hostsupport.netns_host import netns_host
from virtbench.config import parse_campaign
from virtbench.runner.execute import enqueue
from virtbench.store.db import Store

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_a_queued_two_host_campaign_runs_through_the_worker(env):
    store = Store(env["VIRTBENCH_DB"])
    with netns_host() as second:
        campaign = parse_campaign({"name": "two-hosts-queued", "repetitions": 1, "warmups": 0,
                                   "hosts": ["local", second.spec.model_dump(exclude_none=True)],
                                   "platforms": ["native"], "benchmarks": [{"name": "openssl", "seconds": 1}]},
                                  "test")
        run_id = enqueue(store, campaign, source="queued from the test")
        r = subprocess.run([sys.executable, "-m", "virtbench", "worker", "--once", "--no-probe"], env=env,
                           capture_output=True, text=True, timeout=1500)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    run = store.run(run_id)
    assert run.status == "finished", run.error
    hosts = {e.host for e in store.executions(run_id) if e.status == "ok" and e.benchmark == "openssl"}
    assert hosts == {"local", second.spec.name}
    assert set((run.provenance or {}).get("hosts", {})) >= {second.spec.name}
