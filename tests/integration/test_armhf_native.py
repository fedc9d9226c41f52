"""#20: a 32-bit ARM board (Debian armhf, as on a Raspberry Pi 2) runs `native` through
virtbench, driven from this machine like any host of a campaign.

numpy and scipy publish no armv7l wheels: the board uses Debian's python3-numpy and
python3-scipy (in the guest's image, as a board's user installs them), and the dependencies without an
armv7l wheel that are cheap to build (PyYAML, hdrhistogram) are built from their sdists on
this machine in an emulated armhf chroot. The guest runs under TCG: minutes. integration + slow.
"""
from __future__ import annotations

import json

import pytest

from hostsupport.qemu_host import MIRRORS, qemu_host, run_campaign, skip_unless_affordable
from virtbench import proc
from virtbench.images.arch import emulation

pytestmark = [pytest.mark.integration, pytest.mark.slow]

def test_an_armhf_board_runs_native_through_virtbench(env, tmp_path):
    if not proc.which("qemu-system-arm") or not emulation("armhf").ok:
        pytest.skip("needs qemu-system-arm and qemu-user through binfmt_misc (tools/prepare-tests)")
    # what a board's user installs once (README: Raspberry Pi and other boards); the test guest's
    # network is restricted to this machine, so its image carries them
    debian = ("python3-numpy", "python3-scipy")
    skip_unless_affordable("armhf", extra=debian)
    mirrors = [m.format(r="bookworm") for m in MIRRORS["armhf"]]
    with qemu_host("armhf", memory="1G", extra_packages=debian) as board:
        name = board.spec.name
        campaign = {"name": "armhf-native", "repetitions": 2, "warmups": 0,
                    "hosts": [board.spec.model_dump(exclude_none=True)], "platforms": ["native"],
                    "image": {"profile": "quick", "mirrors": mirrors},
                    "benchmarks": [{"name": "openssl", "seconds": 1}, {"name": "sysbench-cpu", "time": 1}]}
        run = run_campaign(env, tmp_path, campaign)
    report = run.report
    shipped = report["hosts"]["hosts"][name]["shipped"]
    print(f"armhf native: guest {board.timings}, run {run.seconds:.0f} s\n"
          f"shipped: {json.dumps(shipped, indent=1)}\n{run.stdout[-4000:]}\n{run.text}")
    hw = report["hardware"]["hosts"][name]
    assert hw["arch"] == "armv7l" and hw["emulated"] is True
    assert set(shipped["system"]) == {"numpy", "scipy"}
    assert {b["requirement"].split("==")[0] for b in shipped["built"]} >= {"PyYAML", "hdrhistogram"}
    for bench in ("openssl", "sysbench-cpu"):
        assert any(r.get("host") == name and r["platform"] == "native" and r["benchmark"] == bench and r["n"] == 2
                   for r in report["results"]), bench
