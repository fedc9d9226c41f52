"""The +1 ms check of the line's latency measurement on a kernel that has netem (run when the
host's own kernel lacks it; with KVM the +-0.1 ms bound holds, under TCG only a lower bound).

This machine's own kernel is built without CONFIG_NET_SCH_NETEM, so the same measurement runs
in a QEMU guest with Debian's cloud kernel (netem as a module): a line of 2 namespaces inside
the guest, addressed like `topology`, iperf 2 started with the argv `iperf2` builds, its output
read by the same parser into HDR histograms; then `tc netem delay 1ms` on node 1's way out."""
from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest

from virtbench.errors import CommandError
from virtbench.experiments.line import hdr, iperf2
from virtbench.experiments.line.topology import address
from virtbench.images.build import BASE_PACKAGES, Recipe, build, host_arch
from virtbench.platforms.qemu.options import QemuOptions
from virtbench.platforms.qemu.platform import Qemu

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.measures]  # a delay in ms: runs alone

RATE, SECONDS = 500, 4
SINK = address(2, 2)


def _script() -> str:
    ns = ["vbl-vm-src", "vbl-vm-1", "vbl-vm-2", "vbl-vm-snk"]
    lines = ["set -e", "modprobe sch_netem"]
    lines += [f"ip netns add {n}" for n in ns]
    for j in range(3):
        lines.append(f"ip link add vblvm{j}a netns {ns[j]} type veth peer name vblvm{j}b netns {ns[j + 1]}")
    for hop, n in enumerate(ns):
        lines.append(f"ip -n {n} link set lo up")
        if hop > 0:
            lines += [f"ip -n {n} addr add {address(hop - 1, 2)}/30 dev vblvm{hop - 1}b",
                      f"ip -n {n} link set vblvm{hop - 1}b up"]
        if hop < 3:
            lines += [f"ip -n {n} addr add {address(hop, 1)}/30 dev vblvm{hop}a", f"ip -n {n} link set vblvm{hop}a up"]
        if 0 < hop < 3:
            lines.append(f"ip netns exec {n} sysctl -q -w net.ipv4.ip_forward=1")
            lines.append(f"ip -n {n} route add default via {address(hop - 1, 1)}")
            if hop < 2:
                lines.append(f"ip -n {n} route add {SINK}/32 via {address(hop, 2)}")
    lines += [f"ip -n {ns[0]} route add default via {address(0, 2)}",
              f"ip -n {ns[3]} route add default via {address(2, 1)}"]
    server = shlex.join(["ip", "netns", "exec", ns[3], *iperf2.server_argv(SINK, SECONDS)])
    client = shlex.join(["ip", "netns", "exec", ns[0], *iperf2.client_argv(SINK, RATE, SECONDS, 64)])
    warm = shlex.join(["ip", "netns", "exec", ns[0], *iperf2.client_argv(SINK, 100, 1, 64)])
    trial = [f"{server} > /tmp/server.txt 2>&1 &", "sleep 2", f"{client} > /tmp/client.txt 2>&1", "wait",
             "echo '=== client'", "cat /tmp/client.txt", "echo '=== server'", "cat /tmp/server.txt"]
    lines += [f"{server} > /dev/null 2>&1 &", "sleep 2", f"{warm} > /dev/null 2>&1", "wait"]
    lines += trial + [f"tc -n {ns[1]} qdisc add dev vblvm1a root netem delay 1ms"] + trial
    return "\n".join(lines)


def test_netem_delay_on_one_hop_shows_at_the_median_in_a_vm(paths, run_id):
    if Path("/lib/modules", os.uname().release, "kernel/net/sched/sch_netem.ko").exists() or \
            Path("/sys/module/sch_netem").exists():
        pytest.skip("the host kernel has netem: test_line.py checks the delay on the host")
    verdict = Qemu.availability(paths)
    if not verdict.available:
        pytest.skip(f"qemu not available: {verdict.reason}")
    image = build(Recipe(release="bookworm", arch=host_arch(), profile="auto",
                         packages=tuple(sorted({*BASE_PACKAGES, "iperf", "kmod"}))))
    vm = Qemu("vm", QemuOptions(), paths)
    vm.prepare(image)
    inst = vm.create(image, f"vb-{run_id}-vbl-netem", run_id)
    try:
        vm.start(inst)
        try:
            out = vm.exec(inst, ["sh", "-c", _script()], timeout=900).stdout
        except CommandError as exc:
            pytest.fail(f"the guest script failed: {exc.stdout[-2000:]} {exc.stderr[-2000:]}")
    finally:
        for step in (vm.stop, vm.remove):
            try:
                step(inst)
            except Exception:  # noqa: BLE001 - the session's cleanup is the backstop
                pass
    parts = out.split("=== client")[1:]
    assert len(parts) == 2, out[-2000:]
    medians = []
    for part in parts:
        client, server = part.split("=== server")
        t = iperf2.parse(RATE, SECONDS, client, server)
        # 500 pps through veths inside the guest: nothing should be lost, but a TCG guest on a loaded
        # host dropped 1 of 2010 once (CI, 2026-11-28); more than 1 % would be a broken line
        assert t.received > 0 and t.loss <= 0.01, t
        medians.append(hdr.summary_us(hdr.from_bins(t.bins))["p50"])
    added = medians[1] - medians[0]
    if vm.accel() == "kvm":
        assert added == pytest.approx(1000, abs=100), medians
    else:
        # Under TCG the guest's emulated timers fire late (about 10 ms on a loaded 2-CPU host):
        # the delay shows, inflated by the emulator; the +-0.1 ms check needs KVM or a host netem.
        assert added >= 900, medians
