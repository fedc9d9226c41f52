"""#20's done-when: one command on this machine runs a campaign on `local` and an emulated arm64
board (tests/hostsupport/qemu_host.py), native and runc on both, and reports them side by
side with each host's architecture, CPU and AES support, saying the arm64 host is emulated.

The arm64 host gets its image of its own architecture (cross-built here with `image build
--arch arm64`, then shipped by the several-hosts machinery) and virtbench itself. Everything
on that host runs under TCG on a loaded 2-core machine: minutes. integration + slow.
"""
from __future__ import annotations

import json
import re
import time

import pytest

from hostsupport.qemu_host import cli, qemu_host, run_campaign, skip_unless_affordable
from virtbench import proc
from virtbench.images.arch import emulation

pytestmark = [pytest.mark.integration, pytest.mark.slow]



def test_local_and_an_emulated_arm64_host_side_by_side(env, tmp_path):
    if not proc.which("qemu-system-aarch64") or not emulation("arm64").ok:
        pytest.skip("needs qemu-system-arm and qemu-user through binfmt_misc (tools/prepare-tests)")
    skip_unless_affordable("arm64")
    t0 = time.monotonic()
    built = cli(env, "image", "build", "--arch", "arm64")  # the campaign's (quick) image for the board
    assert built.returncode == 0, built.stdout + built.stderr
    board_image = re.search(r" at \S*/images/([0-9a-f]{16})\b", built.stdout)
    assert board_image, built.stdout
    t_image = time.monotonic() - t0
    with qemu_host("arm64", memory="2G") as arm:
        name = arm.spec.name
        campaign = {"name": "arm-e2e", "repetitions": 2, "warmups": 0, "image": {"profile": "quick"},
                    "hosts": ["local", arm.spec.model_dump(exclude_none=True)],
                    "platforms": ["native", "runc"],
                    "benchmarks": [{"name": "openssl", "seconds": 1}, {"name": "sysbench-cpu", "time": 1}]}
        run = run_campaign(env, tmp_path, campaign)
    report, t_run = run.report, run.seconds
    print(f"arm64 e2e: image {t_image:.0f} s, guest {arm.timings}, run {t_run:.0f} s")
    for host, entry in report["hosts"]["hosts"].items():  # what each host was sent, for the record
        print(f"shipped to {host}: {json.dumps(entry.get('shipped'), indent=1)}")
    print(run.stdout[-4000:], run.text, sep="\n")
    hw = report["hardware"]["hosts"]
    assert hw["local"]["arch"] == "x86_64" and hw[name]["arch"] == "aarch64"
    assert hw[name]["emulated"] is True and hw["local"]["emulated"] is False
    assert hw[name]["cpu"].startswith("2x ") and hw["local"]["cpu"]
    assert isinstance(hw[name]["aes"], bool) and isinstance(hw["local"]["aes"], bool)
    rows = report["results"]
    for host in ("local", name):
        for platform in ("native", "runc"):
            assert any(r.get("host") == host and r["platform"] == platform and r["benchmark"] == "openssl"
                       and r["n"] == 2 for r in rows), (host, platform)
    shipped = report["hosts"]["hosts"][name]["shipped"]
    assert shipped and shipped["bytes"] > 0
    # the board gets the image `image build --arch arm64` made, not another one built during the run
    assert any(s["what"] == f"image {board_image[1]}" for s in shipped["sent"]) or \
        f"image {board_image[1]}" in shipped["skipped"], (board_image[1], shipped)
    # hdrhistogram has no aarch64 wheel on the package index: built here from its sdist (#20)
    assert any(b["requirement"].startswith("hdrhistogram==") for b in shipped["built"]), shipped["built"]
    assert not report["hosts"]["hosts"]["local"].get("shipped"), "nothing is shipped to the controller"
