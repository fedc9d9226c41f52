"""podman with `runtime: runsc` for real: the container runs gVisor's kernel, the platform is a
sandbox, its provenance names the runtime, and nothing is left after it."""
from __future__ import annotations

import uuid

import pytest

from virtbench import proc
from virtbench.platforms.podman import Podman

pytestmark = pytest.mark.integration


def test_podman_runsc_runs_gvisor(paths, image, run_id):
    for tool in ("podman", "runsc"):
        if proc.which(tool) is None:
            pytest.skip(f"{tool} not installed")
    platform = Podman("pod-gvisor", Podman.Options(runtime="runsc"), paths)
    assert platform.kind == "sandbox"
    platform.prepare(image)
    inst = platform.create(image, f"vb-{run_id}-pg-{uuid.uuid4().hex[:4]}", run_id)
    try:
        platform.start(inst)
        assert "gVisor" in platform.exec(inst, ["dmesg"], timeout=60).stdout
        assert platform.exec(inst, ["openssl", "version"], timeout=60).ok
        doc = platform.describe()
        assert doc["engine"]["runtime"] == "runsc" and "runsc" in platform.versions()
    finally:
        platform.discard(inst)
    left = proc.run([*Podman.base_argv(), "ps", "-a", "-q", "--filter", f"name={inst.name}"], timeout=60).stdout
    assert left.strip() == ""
