"""What `make test` (tools/run-tests) built or is building in the background, for the tests.

tools/run-tests starts each of its BACKGROUND_BUILDS before the tests, with the directory of the
run in VIRTBENCH_TEST_RUN_DIR: builds/NAME.log (its output), builds/NAME.lock (held while it
builds), builds/NAME.rc ("EXIT SECONDS", once it ended). A test that needs a build waits on the
lock itself, an event rather than a poll, with a bound; outside `make test` (a developer running
one module) nothing was started, and the test builds what it needs itself.

    done = wait_for("build-kubernetes", timeout=3600)
    if done is None:      # not started by make test: build it here
        ...
    done.check()          # raises with the log's tail when the build failed
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from virtbench import proc

RUN_DIR = "VIRTBENCH_TEST_RUN_DIR"
RUN_STARTED = "VIRTBENCH_TEST_RUN_STARTED"


@dataclass(frozen=True)
class Build:
    name: str
    returncode: int
    seconds: float
    log: Path

    def check(self) -> None:
        if self.returncode != 0:
            tail = "\n".join(self.log.read_text(errors="replace").splitlines()[-40:]) if self.log.is_file() else ""
            raise AssertionError(f"the background build {self.name} failed (exit {self.returncode}, log {self.log}):\n{tail}")


def run_dir() -> Path | None:
    d = os.environ.get(RUN_DIR)
    return Path(d) if d else None


def run_started() -> float | None:
    """When this `make test` run started (epoch seconds), or None outside one."""
    s = os.environ.get(RUN_STARTED)
    return float(s) if s else None


def run_cache(name: str) -> Path | None:
    """An image cache of this `make test` run only (removed at its end): what is built there was
    built in this run, from nothing. None outside `make test`."""
    d = run_dir()
    return d / "caches" / name if d else None


def built_this_run(manifest: dict) -> bool:
    """Whether an image's manifest says it was built after this run started (True outside a run)."""
    started = run_started()
    if started is None:
        return True
    built = datetime.strptime(manifest["built_at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    return built >= started - 1  # built_at has whole seconds


def wait_for(name: str, timeout: float = 3600.0) -> Build | None:
    """Wait until the background build NAME of this run has ended; None when make test did not
    start it (not under make test, or its script does not exist)."""
    d = run_dir()
    if d is None or not (d / "builds" / f"{name}.lock").exists():
        return None
    lock, rc = d / "builds" / f"{name}.lock", d / "builds" / f"{name}.rc"
    t0 = time.monotonic()
    res = proc.run(["flock", "--shared", "--wait", str(int(timeout)), str(lock), "true"], timeout=timeout + 60,
                   check=False)
    if res.returncode != 0 or not rc.is_file():
        raise AssertionError(f"the background build {name} did not end within {timeout:.0f} s "
                             f"(waited {time.monotonic() - t0:.0f} s; log {d / 'builds' / f'{name}.log'})")
    code, seconds = rc.read_text().split()[:2]
    return Build(name, int(code), float(seconds), d / "builds" / f"{name}.log")
