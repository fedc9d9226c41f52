"""#28 item 5, ARM on a fresh machine: an emulated arm64 board built from nothing, in every CI run.

The other ARM tests (test_arm_guest.py, test_arm_e2e.py, test_wheelbuild.py) need the full
test-host image (Python, runc, the quick suite's tools: a 15-40 minute cross-build), so they
skip unless it is cached or VIRTBENCH_TEST_ARM=1 asks for it, and a new machine never runs
them. This one always runs: the smallest board image that still runs a real benchmark over
SSH (hostsupport.qemu_host.board_recipe: minbase, sshd, openssl, Debian's arm64 cloud kernel
and what its initrd needs), cross-built through qemu-user into a cache of this run's own
(so no image left by an earlier run or another test can stand in for the build: under `make
test` the run's own cache, where tests/hostsupport/prebuild.py starts the build in the background
as the run begins, and the test checks the image was built after the run started), turned into a
VM disk, booted under `qemu-system-aarch64` TCG, reached over SSH with the several-hosts
transport, and `openssl speed` run there and read by the openssl plugin's parser.

What it costs, measured from scratch on a 2-core x86 machine shared with other work: the
emulated build once took 472 s of CPU and 925 s wall at load 7 (issue #39), half of it in two
maintainer-script chores a board under test needs no part of: the kernel's initrd with
initramfs-tools' MODULES=most (220 modules, each copied by shell programs that under qemu-user
take about a second: 340 s wall) and ca-certificates' trust store (built twice: 160 s). The
board's initrd now holds only the virtio root-disk modules (Recipe.initrd_modules), the board has
no ca-certificates, and the build takes 238 s of CPU, 345 s wall at load 5 (278 s in this test at
load 2-3); boot to SSH 93 s at load 7, openssl 3 s. What is left is mostly dpkg and the essential
packages' scripts under emulation. The parts are printed on every run. The build runs beside
the unit tests and the integration tests that time nothing; the known-answer tests (`cpus: 1`
halving openssl) wait for it to end (they are marked `measures`: tests/hostsupport/suitelock.py).
"""
from __future__ import annotations

import os
import shutil
import time
import uuid
from pathlib import Path

import pytest

from hostsupport.background import built_this_run, run_cache
from hostsupport.prebuild import BOARD_CACHE
from hostsupport.qemu_host import board_recipe, qemu_host
from virtbench import proc
from virtbench.images.arch import emulation
from virtbench.images.build import mounts_using
from virtbench.registry import BENCHMARKS
from virtbench.remote.ssh import SSHExecutor

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
def fresh_cache():
    """An image cache for this run only, removed afterwards (never the shared one): under make
    test the run's own (the board may be building there already), else a new empty one."""
    path = run_cache(BOARD_CACHE) or Path("/var/tmp") / f"virtbench-test-arm-{uuid.uuid4().hex[:8]}"
    yield path
    if not mounts_using(path):
        shutil.rmtree(path, ignore_errors=True)


def test_a_fresh_machine_cross_builds_boots_and_benchmarks_an_arm64_board_over_ssh(fresh_cache, tmp_path):
    if not proc.which("qemu-system-aarch64"):
        pytest.skip("qemu-system-arm is not installed (tools/prepare-tests installs it)")
    emu = emulation("arm64")
    if not emu.ok:
        pytest.skip(f"cannot cross-build arm64 here: {emu.reason} ({emu.fix})")
    assert run_cache(BOARD_CACHE) is not None or not fresh_cache.exists()
    t0 = time.monotonic()
    with qemu_host("arm64", recipe=board_recipe("arm64"), cache=fresh_cache) as board:
        manifest = board.image.manifest
        with SSHExecutor(board.spec, tmp_path / "rt") as ex:
            arch = ex.run(["uname", "-m"], timeout=60).stdout.strip()
            cls = BENCHMARKS.get("openssl")
            bench = cls(cls.Params(seconds=1, bytes=1024))
            ex.run(["mkdir", "-p", "/var/tmp/vbtest"], timeout=60)
            t_bench = time.monotonic()
            res = ex.run(bench.command("/var/tmp/vbtest"), timeout=600, check=False)  # TCG: 10-50x slower
            t_bench = time.monotonic() - t_bench
    total = time.monotonic() - t0
    print(f"arm64 board from scratch: {board.timings}, openssl {t_bench:.0f} s, total {total:.0f} s "
          f"({len(manifest['installed'])} packages)")
    # built here, in this run, for arm64 through emulation: not found in a cache
    assert manifest["arch"] == "arm64" and manifest["emulated_build"] is True, manifest
    assert str(board.image.root).startswith(str(fresh_cache)), board.image.root
    assert built_this_run(manifest), f"built {manifest['built_at']}, before this run started"
    assert "python3" not in manifest["installed"], "the board image grew: its build no longer fits CI"
    assert manifest.get("initrd_modules"), "the board's initrd is MODULES=most again: minutes more of its build"
    assert arch == "aarch64"
    assert res.returncode == 0, f"openssl failed on the arm64 board: {res.stderr[-500:]}"
    values = bench.parse(res.stdout, res.stderr, source="openssl on the arm64 board")
    assert sorted(values) == sorted(m.name for m in bench.metrics())
    assert all(v > 0 for v in values.values()), values
    assert not os.path.exists(board.base), "the board's files were left behind"
