"""The density fleet's resident runner in real containers (runc, lxc, docker): one exec per
container in its life starts it, every count's workload is then handed to it through its
FIFOs (reached through /proc/PID/root), runs synchronised with its VBSYNC marker, and a new
instance of a kept fleet gets its own runner while the others launch without an exec."""
from __future__ import annotations

import uuid

import pytest

from virtbench.executor import HostExecutor
from virtbench.experiments.density import resident
from virtbench.experiments.density.fleet import Fleet
from virtbench.experiments.density.guard import Guard, GuardSettings
from virtbench.platforms.docker import Docker
from virtbench.platforms.lxc import LXC
from virtbench.platforms.oci import Runc
from virtbench.registry import BENCHMARKS

pytestmark = pytest.mark.integration

CLASSES = {"runc": Runc, "lxc": LXC, "docker": Docker}


class Counting(HostExecutor):
    """This host's executor, counting the execs that start a runner and those that launch a workload."""

    def __init__(self) -> None:
        self.starts = self.launches = 0

    def run(self, argv, **kw):
        if "vbstart" in argv:
            self.starts += 1
        elif "vbsync" in argv:
            self.launches += 1
        return super().run(argv, **kw)


@pytest.mark.parametrize("kind", sorted(CLASSES))
def test_counts_launch_through_the_containers_runners_without_an_exec(kind, paths, image, run_id):
    cls = CLASSES[kind]
    if not cls.availability(paths).available:
        pytest.skip(f"{kind} is not available here")
    host = Counting()
    options = {"network": "none"} if kind != "lxc" else {}
    plat = cls(kind, cls.Options(**options), paths).bind(host)
    plat.prepare(image)
    bench_cls = BENCHMARKS.get("openssl")
    bench = bench_cls(bench_cls.Params(algorithm="des-ede3", bytes=64, multi=1, seconds=1))
    fleet = Fleet(plat, image, run_id, f"vb-t-res-{uuid.uuid4().hex[:4]}", Guard(GuardSettings(calm_wait=0)))
    assert fleet.resident
    try:
        started, errors = fleet.add_many(2)
        assert errors == [] and len(started) == 2
        first = fleet.run_workload(bench, "w1")
        assert host.starts == 2 and host.launches == 0
        fleet.add_many(1)
        second = fleet.run_workload(bench, "w2")
        assert host.starts == 3 and host.launches == 0
        for outcome, n in ((first, 2), (second, 3)):
            assert [r.returncode for _, r in outcome.results] == [0] * n, [r.stderr for _, r in outcome.results]
            assert outcome.sync is not None and outcome.sync.reported == n and outcome.sync.warnings == []
            assert all(bench.parse(r.stdout, r.stderr) for _, r in outcome.results)
        runners = [m.runner for m in fleet.members]
        assert all(isinstance(r, resident.Runner) and r.alive() for r in runners)
        assert all(r.jobs == (1 if i == 2 else 2) for i, r in enumerate(runners))
    finally:
        assert fleet.close() == []
    assert not any(r.alive() for r in runners if r is not None)
