"""The quick campaign: every core benchmark on every platform this host can run, briefly.

For a first look and for CI; minutes, not hours, and an answer for every comparison where
the host allows one. Platforms this host cannot run are left out with the reason, so one
command works everywhere; the reasons are stored with the run for the report.

The settings were chosen by measuring each candidate's per-sample coefficient of variation
natively (2026-11-24, CPU-bound tools with the measuring process given CPU priority over the
other work on the machine): openssl 1 KiB 1 s 0.7 % (2 s: 0.8 %), sysbench-cpu 2 s 1.7 %
(1 s: 2.5 %), sqlite 100k rows x 1 query set total 6 % (50k x 3: 9 %). fio stays noisy where
the disk is shared (13-70 % at 1 s), so only two read jobs run. Then more rounds, and
adaptive rounds (capped) only for the comparisons still undecided.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..config import Campaign, parse_campaign
from ..platforms.base import Paths
from ..registry import PLATFORMS
from .session import probe_types

QUICK_PLATFORMS = ("native", "docker", "podman", "lxc", "containerd", "runc", "crun")
KVM_GUEST: dict[str, Any] = {"name": "kvm", "type": "qemu", "accel": "kvm", "memory": "1G"}
"""The VM of the quick campaign, only where KVM runs a guest: under TCG a guest measures an
emulator (10-50x slower), not the cost of virtualization."""
QUICK_BENCHMARKS: list[dict[str, Any]] = [
    {"name": "openssl", "algorithm": "aes-128-cbc", "bytes": 1024, "multi": 1, "seconds": 1},
    {"name": "fio", "size": "128M", "runtime": 1, "ramp_time": 0, "jobs": ["seq_read_bw", "rand_read_iops"]},
    {"name": "sysbench-cpu", "threads": 1, "time": 2},
    {"name": "sqlite", "rows": 100000, "repeats": 1},
]
REPETITIONS = 5
WARMUPS = 1
ADAPTIVE: dict[str, Any] = {"until": "decided", "target": 0.02, "max_repetitions": 10, "max_minutes": 5.5}
"""Extra rounds for undecided comparisons only, up to 10 measured rounds and 5.5 minutes after
the run started (the declared rounds included), so `make run` stays within 10 minutes on a new
machine (packages, image build and engine imports take 3 to 4 of them)."""


@dataclass
class QuickPlan:
    campaign: Campaign
    left_out: list[dict[str, str]] = field(default_factory=list)
    """{platform, reason, fix} of every platform not in the campaign (stored with the run)."""


def kvm_guest(paths: Paths) -> tuple[dict[str, Any] | None, dict[str, str] | None]:
    """The KVM guest entry if KVM runs a test guest here (decided by booting), else why not."""
    cls = PLATFORMS.get("qemu")
    fix = "apt-get install " + " ".join(cls.packages)
    missing = [b for b in cls.binaries if not _which(b)]
    if missing:
        return None, {"platform": "kvm (qemu)", "reason": f"no VM: {missing[0]} is not installed", "fix": fix}
    verdict = cls(KVM_GUEST["name"], cls.Options(), paths).verdict()  # type: ignore[attr-defined]  # qemu's own
    if verdict.kvm:
        return {**KVM_GUEST, "vcpus": min(2, os.cpu_count() or 1)}, None
    return None, {"platform": "kvm (qemu)",
                  "reason": f"no VM: KVM does not work here ({verdict.reason}); a TCG guest would measure "
                            "an emulator (10-50x slower), not the cost of virtualization",
                  "fix": "run on bare metal or a VM with nested virtualization for a KVM guest; "
                         "a campaign file can still declare a qemu platform with accel: tcg"}


def _which(binary: str) -> bool:
    from .. import proc

    return proc.which(binary) is not None


def quick_campaign(paths: Paths, log: Callable[[str], None] = lambda _m: None,
                   repetitions: int = REPETITIONS, warmups: int = WARMUPS,
                   adaptive: dict[str, Any] | None = ADAPTIVE, vm: bool = True,
                   probes: list[str] | None = None) -> QuickPlan:
    verdicts = probe_types(list(QUICK_PLATFORMS), paths, log)
    platforms: list[Any] = []
    left_out: list[dict[str, str]] = []
    for name in QUICK_PLATFORMS:
        v = verdicts[name]
        if v.available:
            platforms.append(name)
        else:
            left_out.append({"platform": name, "reason": v.reason, "fix": v.fix or ""})
    if vm:
        guest, why = kvm_guest(paths)
        if guest:
            platforms.append(guest)
        if why:
            left_out.append(why)
    for out in left_out:
        log(f"skipping {out['platform']}: {out['reason']}" + (f" (fix: {out['fix']})" if out["fix"] else ""))
    data = {"name": "quick", "baseline": "native", "repetitions": repetitions, "warmups": warmups,
            "platforms": platforms, "benchmarks": QUICK_BENCHMARKS}
    if probes:
        data["probes"] = probes
    if adaptive:
        data["adaptive"] = adaptive
    return QuickPlan(parse_campaign(data, "quick campaign"), left_out)
