"""A server started in the background inside an instance ends when it is stopped, on every
container platform: `docker exec` and its kin leave the exec'd process running when their
client is killed, which kept nginx, sockperf, iperf3 and mariadbd servers alive (and their
ports taken) after each execution."""
from __future__ import annotations

import time
import uuid

import pytest

from virtbench import proc
from virtbench.platforms.base import Paths, Platform
from virtbench.registry import PLATFORMS

pytestmark = pytest.mark.integration

KINDS = ["docker", "podman", "containerd", "runc", "lxc", "runsc", "native"]


def make(kind: str, paths: Paths) -> Platform:
    cls = PLATFORMS.get(kind)
    if proc.which(cls.binaries[0]) is None:
        pytest.skip(f"{cls.binaries[0]} not installed")
    cls.ensure_engine(paths)
    return cls(kind, cls.Options(), paths)


def sleepers(platform: Platform, inst, seconds: str) -> list[str]:
    """The server's processes still inside the instance (zombies left out: they hold nothing)."""
    out = platform.exec(inst, ["ps", "-e", "-o", "stat=,args="], timeout=60).stdout
    return [line for line in out.splitlines() if f"sleep {seconds}" in line and not line.strip().startswith("Z")]


@pytest.mark.parametrize("kind", KINDS)
def test_stopped_server_leaves_nothing_running_in_the_instance(kind, paths, image, run_id):
    platform = make(kind, paths)
    platform.prepare(image)
    inst = platform.create(image, f"vb-{run_id}-{kind[:4]}-{uuid.uuid4().hex[:4]}", run_id)
    seconds = str(50000 + uuid.uuid4().int % 9999)
    try:
        platform.start(inst)
        # A server with a child, as nginx (workers) and the mariadb script have.
        server = platform.spawn(inst, ["sh", "-c", f"sleep {seconds} & exec sleep {seconds}"])
        deadline = time.monotonic() + 30
        while len(sleepers(platform, inst, seconds)) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(sleepers(platform, inst, seconds)) == 2
        started = time.monotonic()
        server.stop()
        assert time.monotonic() - started < 10
        assert sleepers(platform, inst, seconds) == []
        if kind == "docker":  # what the engine itself lists, as a user would check
            top = proc.run(["docker", "top", inst.name, "-o", "pid,args"], timeout=60).stdout
            assert f"sleep {seconds}" not in top
    finally:
        platform.discard(inst)
