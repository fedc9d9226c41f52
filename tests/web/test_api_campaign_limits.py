"""Campaign bounds reach the web API too: refused with 400 and the CLI's line, nothing queued.

Before the seed was bounded in the model, POST /api/runs with `seed: 2147483648` answered 500
on PostgreSQL (the 32-bit column refused the insert) and queued nothing; the other inputs
here were accepted and queued, to fail on the worker after its probes."""
from __future__ import annotations

import pytest

RUN = {"name": "q", "repetitions": 2, "warmups": 0, "platforms": ["native"],
       "benchmarks": [{"name": "sysbench-cpu", "time": 1}]}


@pytest.mark.parametrize("changes, needle", [
    ({"seed": 2**31}, "seed"),
    ({"seed": 10**30}, "seed"),
    ({"image": {"release": "buster"}}, "unknown Debian release 'buster'"),
    ({"benchmarks": [{"name": "fio", "sweep": {k: list(range(1, 41)) for k in
                                               ("iodepth", "runtime", "ramp_time", "bs_iops")}}]}, "2560000 points"),
    ({"platforms": ["native", {"name": "d", "type": "docker", "memory": ".inf"}]}, "platforms[1].memory"),
])
def test_post_runs_refuses_out_of_range_campaigns(client, auth, changes, needle):
    r = client.post("/api/runs", json={"campaign": {**RUN, **changes}}, headers=auth)
    assert r.status_code == 400, r.text
    assert needle in r.json()["detail"] and "\n" not in r.json()["detail"]
    assert client.get("/api/runs", params={"status": "queued"}).json() == []


def test_the_largest_seed_the_column_holds_is_queued(client, auth):
    r = client.post("/api/runs", json={"campaign": {**RUN, "seed": 2**31 - 1}}, headers=auth)
    assert r.status_code == 201, r.text
    assert client.get(f"/api/runs/{r.json()['run_id']}").json()["status"] == "queued"
