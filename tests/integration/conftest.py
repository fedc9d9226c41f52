"""Fixtures shared by the integration tests that drive the real CLI."""
from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest


@pytest.fixture
def env(tmp_path):
    """The CLI's environment with its own database, state and runtime directories, so a test
    never touches a user's runs; whatever it left is cleaned up afterwards."""
    base = f"/var/lib/virtbench-test/cli-{uuid.uuid4().hex[:8]}"
    e = dict(os.environ, VIRTBENCH_DB=f"sqlite:///{tmp_path / 'results.db'}",
             VIRTBENCH_STATE_DIR=base, VIRTBENCH_RUNTIME_DIR=f"/run/virtbench-test/{Path(base).name}")
    yield e
    subprocess.run([sys.executable, "-m", "virtbench", "cleanup"], env=e, capture_output=True, timeout=300)
    for top in (e["VIRTBENCH_STATE_DIR"], e["VIRTBENCH_RUNTIME_DIR"]):
        _remove_empty(Path(top))


def _remove_empty(top: Path) -> None:
    """The test's directories, once cleanup emptied them (257 empty state directories had piled
    up here). rmdir only: a directory still holding a file or a mount stays, to be seen."""
    if not top.is_dir():
        return
    for d, _, _ in os.walk(top, topdown=False):  # deepest first
        try:
            os.rmdir(d)
        except OSError:
            pass
