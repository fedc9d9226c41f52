"""The quick campaign: every core benchmark on every platform this host can run, briefly.

For a first look and for CI; minutes, not hours, and an answer for every comparison where
the host allows one. Platforms this host cannot run are left out with the reason, so one
command works everywhere; the reasons are stored with the run for the report.

The settings were chosen by measuring each candidate's per-sample coefficient of variation
natively, settings interleaved (2026-11-25, 6-8 each, with other work loading the 2 CPUs): on a
shared host the wall-clock rate of a CPU-bound tool measures the neighbours' time slices (at
load 5-7: openssl 1 s -elapsed 51 %, sysbench-cpu 2 s 41 %, sqlite 100k rows total 36 %, fio
1 s rates 26-27 %), while CPU time hardly does (load 5-7: openssl per CPU second 3.5 % at 1 s,
sqlite's CPU time 7.8-9.2 %, fio's CPU time per 4 KiB random read 2.2-3.6 %; load 19-66:
openssl 1.6 % at 2 s and 1.0 % at 3 s, sqlite 5.9 % at 50k rows and 8.6 % at 100k, fio 4.6 % on
64 MiB and 6.2 % on 16 MiB). So the quick campaign measures each platform's cost in CPU time
(`clock: cpu`, fio `measure: cpu`), one verdict cell per benchmark: CPU (openssl for 2 s: its
CPU time is read in 10 ms ticks; on a quiet host its round-paired ratio varied 0.2-0.6 % at
3 s), the storage path (fio random reads for 2 s, read in 20 intervals of 100 ms: at load
11-66, 2 s varied 3.6-3.8 % against 4.4-6.2 % for 1 s) and an application (sqlite on 20k rows,
20 passes in one process: at load 5-47 the median of 5 varied 2.3 % against 8.4 % for one pass
of 50k rows, whose disturbed runs, up to 50 % slower, left every sqlite cell of a quiet quick
run undecided; both now report their best pass, below). sysbench-cpu is left
out: a second compute loop adds a cell, not an answer. The wall-clock and throughput forms
stay the defaults of every campaign file. Then rounds paired by the report's rule, and
adaptive rounds (capped) only for the comparisons still undecided.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...config import Campaign, parse_campaign
from ...errors import UnavailableError
from ...platforms import slices
from ...platforms.availability import availability_of
from ...platforms.base import Availability, Paths
from ...registry import PLATFORMS

KVM_GUEST: dict[str, Any] = {"name": "kvm", "type": "qemu", "accel": "kvm", "memory": "1G"}
"""The VM of the quick campaign, only where KVM runs a guest: under TCG a guest measures an
emulator (10-50x slower), not the cost of virtualization."""
QUICK_BENCHMARKS: list[dict[str, Any]] = [
    {"name": "openssl", "algorithm": "aes-128-cbc", "bytes": 1024, "multi": 1, "seconds": 2, "clock": "cpu"},
    {"name": "fio", "size": "64M", "runtime": 2, "ramp_time": 0, "jobs": ["rand_read_iops"], "measure": "cpu",
     "passes": 20, "pass_estimate": "best"},
    {"name": "sqlite", "rows": 20000, "repeats": 1, "passes": 20, "clock": "cpu", "phases": False,
     "pass_estimate": "best"},
]
"""fio and sqlite report the best of several passes in one execution (benchmarks.base.PassEstimate):
other work only adds time, so the fastest pass is the platform's own cost. On the 2-CPU VM
(2026-11-27, quiet) the round-paired noise of sqlite's docker/native ratio fell from +-7.0 %
(median of 5 passes) to +-2.1 % (best of 5). The host's disturbances last up to a second
(sqlite passes of 70 ms ran 126 ms twelve times in a row), so many short passes find the gaps
between them: in the same 12 executions sqlite's docker/native ratio varied +-16 % with the
best of 7 passes and +-3.3 % with the best of 20; fio's best of 20 100 ms intervals varied
2.4 % over 16 executions against 5.1 % for the best of four 0.5 s passes. With these, quiet
quick runs decided 14, 9 (fresh) and 6 of 15 that day (before: 6-9 of 15).

fio runs on the CPUs that do not serve the disk's interrupts where one CPU serves them all
(`cpus_allowed`, from hostinfo.disk_irq_cpus; every platform alike): without IRQ time accounting a
completion's work is charged to whatever runs on that CPU, so fio's CPU time per I/O depended
on where the scheduler put it and on what else ran there (one core of stress-ng: +-20 % a
round). Pinned (2026-11-27/28, same VM): quick runs decided 6, 15 and 11 of 15 quiet with
caches kept, 15 and 14 from the fresh state, and 15 and 14 of 15 with stress-ng on one core
(benchmarks/README.md)."""
REPETITIONS = 3
"""Declared rounds: the adaptive rule's minimum. Then extra rounds only for the comparisons still
undecided, so the time cap goes to the noisy cells instead of re-measuring settled ones (at
load 15-90 the 6 declared rounds of 2026-11-25 alone outlasted the cap). The simulated error
rates hardly differ from 5 declared rounds (benchmarks/verdict_rates.py: the early looks at
2-4 degrees of freedom are wide)."""
WARMUPS = 1
ADAPTIVE: dict[str, Any] = {"until": "decided", "target": 0.02, "max_repetitions": 16, "max_minutes": 6,
                            "noise_check": 3}
"""Extra rounds for undecided comparisons only, up to 16 measured rounds and 6 minutes after
the run started (the declared rounds included; the round under way at the cap finishes), so
`make run` stays within 10 minutes on a new machine (on a quiet one, packages present: venv
40 s, image 30 s, engine imports 50 s). Before the first measured round, three executions of
the baseline spread through the warm-up round measure the host's noise (about 20 s) and the run says at once how many
comparisons it expects to decide (experiments.benchmarks.adaptive.note_noise); an undecided comparison the
caps cannot decide at its noise gets no more rounds, so the time goes where it decides."""


@dataclass
class QuickCampaign:
    campaign: Campaign
    left_out: list[dict[str, str]] = field(default_factory=list)
    """{platform, reason, fix} of every platform not in the campaign (stored with the run)."""
    availability: dict[str, Availability] = field(default_factory=dict)
    """The verdicts taken to choose the platforms: the run's preparation does not try them again."""


def quick_platforms() -> list[str]:
    """The platform types the quick comparison tries, in the order they declare (Platform.quick_rank)."""
    return [name for _, name in sorted((cls.quick_rank, name) for name, cls in PLATFORMS.items()
                                       if cls.quick_rank is not None)]


def kvm_guest(paths: Paths) -> tuple[dict[str, Any] | None, dict[str, str] | None]:
    """The KVM guest entry if KVM runs a test guest here (decided by booting), else why not."""
    cls = PLATFORMS.get("qemu")
    fix = "apt-get install " + " ".join(cls.packages)
    missing = [b for b in cls.binaries if not _which(b)]
    if missing:
        return None, {"platform": "kvm (qemu)", "reason": f"no VM: {missing[0]} is not installed", "fix": fix}
    verdict = cls(KVM_GUEST["name"], cls.Options(), paths).verdict()  # type: ignore[attr-defined]  # qemu's own
    if verdict.booted_linux:
        return {**KVM_GUEST, "vcpus": min(2, os.cpu_count() or 1)}, None
    if verdict.kvm:  # the guest's setup boots Linux under KVM; a stub that ran proves less
        return None, {"platform": "kvm (qemu)",
                      "reason": "no VM: KVM ran a firmware stub guest, but no kernel is at hand to boot a Linux "
                                "test guest as the VM's own setup does (none in /boot, no cached VM disk); left "
                                "out on doubt (in a VM of a VM a stub runs and Linux may hang)",
                      "fix": f"apt-get install {_kernel_package()} (a kernel in /boot for the KVM check), "
                             "or run a campaign with a qemu platform (accel: auto) once to cache a VM disk"}
    return None, {"platform": "kvm (qemu)",
                  "reason": f"no VM: KVM does not work here ({verdict.reason}); a TCG guest would measure "
                            "an emulator (10-50x slower), not the cost of virtualization",
                  "fix": "run on bare metal or a VM with nested virtualization for a KVM guest; "
                         "a campaign file can still declare a qemu platform with accel: tcg"}


def _kernel_package() -> str:
    """The Debian kernel package the VM disks boot on this host's architecture."""
    from ...images.arch import host_arch
    from ...images.vmdisk import KERNEL_PACKAGES

    arch = host_arch()
    return KERNEL_PACKAGES.get(arch, f"linux-image-{arch}")


def _which(binary: str) -> bool:
    from ... import proc

    return proc.which(binary) is not None


def quick_campaign(paths: Paths, log: Callable[[str], None] = lambda _m: None,
                   repetitions: int = REPETITIONS, warmups: int = WARMUPS,
                   adaptive: dict[str, Any] | None = ADAPTIVE, vm: bool = True,
                   probes: list[str] | None = None) -> QuickCampaign:
    log(f"host: {slices.host_kind()}")
    tried = quick_platforms()
    verdicts = availability_of(tried, paths, log)
    platforms: list[Any] = []
    left_out: list[dict[str, str]] = []
    for name in tried:
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
    if "native" not in platforms:  # the baseline every verdict is relative to
        v = verdicts["native"]
        raise UnavailableError(f"the quick campaign compares every platform with native (bare metal), which "
                               f"cannot run here: {v.reason}", v.fix or "see `virtbench doctor`")
    fio_cpus = None if _has_vm(platforms) else _fio_cpus(paths, log)
    return QuickCampaign(_campaign(platforms, repetitions, warmups, adaptive, probes, fio_cpus), left_out,
                     {t: v for t, v in verdicts.items() if v.available})


def _has_vm(platforms: list[Any]) -> bool:
    """The KVM guest is the one platform given as a dict (its options)."""
    return any(isinstance(p, dict) for p in platforms)


def _fio_cpus(paths: Paths, log: Callable[[str], None]) -> str | None:
    """fio's CPUs off the one serving the disk's interrupts, if one serves them all (host.py)."""
    from ... import hostinfo

    where = paths.state
    while not where.exists() and where != where.parent:
        where = where.parent
    cpus = hostinfo.cpus_off(hostinfo.disk_irq_cpus(where), sorted(os.sched_getaffinity(0)))
    if cpus is not None:
        log(f"fio runs on CPU {cpus}: the disk's interrupts are all served by another CPU, and their "
            "work is charged to whatever runs there")
    return cpus


def unprobed_campaign(probes: list[str] | None = None) -> Campaign:
    """The quick campaign before any probe: every platform it tries (each stays only if its
    probe passes at the start; the KVM guest only where KVM boots one), for `run --quick --dry-run`."""
    return _campaign([*quick_platforms(), {**KVM_GUEST, "vcpus": min(2, os.cpu_count() or 1)}], REPETITIONS,
                     WARMUPS, ADAPTIVE, probes)


def _campaign(platforms: list[Any], repetitions: int, warmups: int, adaptive: dict[str, Any] | None,
              probes: list[str] | None, fio_cpus: str | None = None) -> Campaign:
    benchmarks = QUICK_BENCHMARKS
    if _has_vm(platforms):  # a VM's disk emulation is outside its CPU time
        benchmarks = [{**b, "measure": "both"} if b["name"] == "fio" else b for b in benchmarks]
    elif fio_cpus is not None:  # not with a VM: a guest numbers its CPUs and routes its interrupts its own way
        benchmarks = [{**b, "cpus_allowed": fio_cpus} if b["name"] == "fio" else b for b in benchmarks]
    data = {"name": "quick", "baseline": "native", "repetitions": repetitions, "warmups": warmups,
            "platforms": platforms, "benchmarks": benchmarks}
    if probes:
        data["probes"] = probes
    if adaptive:
        data["adaptive"] = adaptive
    return parse_campaign(data, "quick campaign")
