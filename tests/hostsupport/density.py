"""Helpers of the density integration tests: the CLI, a campaign file, and what a run left."""
from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

from virtbench.experiments.density.kind import parent_prefix
from virtbench.platforms import cgroups
from virtbench.platforms.base import Paths


def vb(env, *args, timeout=1200):
    return subprocess.run([sys.executable, "-m", "virtbench", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def leftovers(env) -> list[str]:
    """Containers in the private lxcpath, confining parents, and mounts under the state dir."""
    state = env["VIRTBENCH_STATE_DIR"]
    lxc = subprocess.run(["lxc-ls", "-P", f"{state}/lxc"], capture_output=True, text=True).stdout.split()
    db = env["VIRTBENCH_DB"].removeprefix("sqlite:///")
    runs = set()
    if Path(db).exists():
        with sqlite3.connect(db) as conn:
            try:
                runs = {r for (r,) in conn.execute("select id from runs")}
            except sqlite3.OperationalError:  # the run is creating the schema right now
                runs = set()
    prefix = parent_prefix(Paths(state=Path(state)))
    parents = [p for p in cgroups.leftover_parents(prefix) if p.removeprefix(prefix) in runs]  # this test's runs only
    mounts = [ln.split()[4] for ln in Path("/proc/self/mountinfo").read_text().splitlines()
              if ln.split()[4].startswith(state)]
    return [f"lxc:{n}" for n in lxc] + [f"cgroup:{p}" for p in parents] + mounts


def _campaign(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "density.yaml"
    p.write_text(body)
    return p
