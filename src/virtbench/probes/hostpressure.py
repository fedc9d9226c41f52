"""Reading how hard-pressed the host and one instance are: MemAvailable, PSI, CPU time,
cgroup memory and CPU usage (cgroup v1, v2 and hybrid).

One reader for everyone who asks: the pressure probe samples it as a time series beside
every execution, and the density experiment's host guard reads it to stop before the host
runs out of memory. Every path hangs off `root`, so tests read a recorded tree and a
reader of another machine's `/proc` can be pointed at it.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..hostinfo import meminfo

PSI_RESOURCES = ("cpu", "memory", "io")


@dataclass(frozen=True)
class Psi:
    """One `/proc/pressure/<resource>` (or cgroup v2 `<resource>.pressure`) reading.

    avg* are percentages of wall time with at least one task stalled ('some') or all
    non-idle tasks stalled ('full'); total_us is the cumulative stall time, whose delta
    between two readings is exact where the averages are smoothed. 'full' is None where
    the kernel does not report it (host-wide cpu before 5.13).
    """

    some_avg10: float
    some_avg60: float
    some_avg300: float
    some_total_us: int
    full_avg10: float | None = None
    full_total_us: int | None = None


def parse_psi(text: str) -> Psi:
    """Parse PSI text; ValueError names the line it cannot read."""
    rows: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        kind, *fields = line.split()
        try:
            rows[kind] = {k: float(v) for k, v in (f.split("=", 1) for f in fields)}
        except ValueError:
            raise ValueError(f"not a PSI line: {line!r}") from None
    if "some" not in rows:
        raise ValueError(f"no 'some' line in PSI text {text[:80]!r}")
    some, full = rows["some"], rows.get("full")
    # A 'full' line of all zeros on host-wide cpu is the kernel's placeholder, kept as read.
    return Psi(some["avg10"], some["avg60"], some["avg300"], int(some["total"]),
               full["avg10"] if full else None, int(full["total"]) if full else None)


@dataclass(frozen=True)
class CpuTimes:
    """Host-wide CPU time from /proc/stat in clock ticks: busy excludes idle and iowait."""

    busy: int
    total: int

    def utilisation_since(self, earlier: CpuTimes) -> float | None:
        """Share of CPU time busy between two readings (0..1), None if no tick passed."""
        total = self.total - earlier.total
        return (self.busy - earlier.busy) / total if total > 0 else None


def parse_proc_stat(text: str) -> CpuTimes:
    for line in text.splitlines():
        if line.startswith("cpu "):
            ticks = [int(v) for v in line.split()[1:]]
            # user nice system idle iowait irq softirq steal (guest time is inside user/nice)
            ticks = (ticks + [0] * 8)[:8]
            idle = ticks[3] + ticks[4]
            total = sum(ticks)
            return CpuTimes(busy=total - idle, total=total)
    raise ValueError("no aggregate 'cpu ' line in /proc/stat")


def parse_proc_cgroup(text: str) -> dict[str, str]:
    """`/proc/PID/cgroup` as controller -> path; the v2 unified line is under ''."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        for c in controllers.split(",") if controllers else [""]:
            out[c.removeprefix("name=")] = path
    return out


@dataclass(frozen=True)
class CgroupUsage:
    """One cgroup's memory (bytes) and cumulative CPU time (ns), with the PSI it has (v2)."""

    path: str
    memory_bytes: int | None
    cpu_ns: int | None
    psi: dict[str, Psi]


@dataclass(frozen=True)
class CgroupFiles:
    memory: Path | None
    cpu: Path | None
    cpu_scale: int
    """cpu file's unit in ns: 1 for v1 cpuacct.usage (ns), 1000 for v2 cpu.stat usage_usec."""

    def read(self) -> tuple[int | None, int | None]:
        """(memory bytes, CPU ns) now; None for what is unknown or gone."""
        mem = cpu = None
        try:
            mem = int(self.memory.read_text()) if self.memory else None
            if self.cpu is not None:
                text = self.cpu.read_text()
                cpu = (int(text) if self.cpu_scale == 1 else dict(_kv(text)).get("usage_usec", 0)) * self.cpu_scale
        except (OSError, ValueError):
            pass
        return mem, cpu


class PressureReader:
    """Reads the host's and a cgroup's pressure under `root` ('/' on a live host)."""

    def __init__(self, root: Path | str = "/") -> None:
        self.root = Path(root)
        self.cgroup_root = self.root / "sys/fs/cgroup"

    def _read(self, rel: str | Path) -> str | None:
        try:
            return (self.root / rel).read_text()
        except OSError:
            return None

    # -- host-wide -------------------------------------------------------------------
    def mem_available(self) -> int | None:
        """MemAvailable in bytes (the kernel's estimate of what can be allocated without swapping)."""
        text = self._read("proc/meminfo")
        if text is None:
            return None
        at = text.find("MemAvailable:")
        return int(text[at:].split(None, 2)[1]) * 1024 if at >= 0 else None

    def memory(self) -> dict[str, int]:
        text = self._read("proc/meminfo")
        return {} if text is None else meminfo(text)

    def psi(self, resource: str) -> Psi | None:
        """Host PSI of cpu, memory or io; None without PSI (kernel < 4.20 or psi=0)."""
        text = self._read(f"proc/pressure/{resource}")
        try:
            return None if text is None else parse_psi(text)
        except ValueError:
            return None

    def psi_available(self) -> bool:
        return (self.root / "proc/pressure/memory").exists()

    def cpu_times(self) -> CpuTimes | None:
        text = self._read("proc/stat")
        return None if text is None else parse_proc_stat(text)

    # -- cgroups ---------------------------------------------------------------------
    def cgroup_of(self, pid: int) -> dict[str, str]:
        """Controller -> cgroup path of a process ({} when it is gone)."""
        text = self._read(f"proc/{pid}/cgroup")
        return {} if text is None else parse_proc_cgroup(text)

    def _v2_dir(self) -> Path | None:
        for d in (self.cgroup_root, self.cgroup_root / "unified"):
            if (d / "cgroup.controllers").exists():
                return d
        return None

    def cgroup_usage(self, paths: dict[str, str]) -> CgroupUsage:
        """Usage of the cgroup(s) a process is in, from `cgroup_of(pid)`: the v1 controller's
        own hierarchy where one is mounted (v1 and hybrid), else the unified (v2) one. PSI
        of a cgroup exists only in v2, and only below the root (whose PSI is the host's)."""
        memory = cpu = None
        if "memory" in paths and (d := self._v1_dir("memory")):
            memory = _int(self._read(d / paths["memory"].lstrip("/") / "memory.usage_in_bytes"))
        if "cpuacct" in paths and (d := self._v1_dir("cpuacct")):
            cpu = _int(self._read(d / paths["cpuacct"].lstrip("/") / "cpuacct.usage"))
        unified = paths.get("", "/")
        v2 = self._v2_dir()
        psi: dict[str, Psi] = {}
        if v2 is not None:
            v2_dir = v2 / unified.lstrip("/")
            if memory is None:
                memory = _int(self._read(v2_dir / "memory.current"))
            if cpu is None and (cpu_stat := self._read(v2_dir / "cpu.stat")):
                usec = dict(_kv(cpu_stat)).get("usage_usec")
                cpu = usec * 1000 if usec is not None else None
            for res in PSI_RESOURCES if unified != "/" else ():
                if text := self._read(v2_dir / f"{res}.pressure"):
                    try:
                        psi[res] = parse_psi(text)
                    except ValueError:
                        continue
        return CgroupUsage(path=paths.get("memory", unified), memory_bytes=memory, cpu_ns=cpu, psi=psi)

    def _v1_dir(self, controller: str) -> Path | None:
        """The v1 hierarchy holding a controller (cpuacct may be co-mounted as cpu,cpuacct)."""
        for name in (controller, "cpu,cpuacct", "cpuacct,cpu"):
            d = self.cgroup_root / name
            if controller in name.split(",") and d.is_dir():
                return d
        return None

    def usage_files(self, pid: int) -> CgroupFiles | None:
        """The two files holding a process's cgroup memory and CPU time, found once, so a
        10 Hz sampler reads two small files per reading instead of resolving the cgroup."""
        paths = self.cgroup_of(pid)
        if not paths:
            return None
        mem = cpu = None
        scale = 1
        if "memory" in paths and (d := self._v1_dir("memory")):
            mem = d / paths["memory"].lstrip("/") / "memory.usage_in_bytes"
        if "cpuacct" in paths and (d := self._v1_dir("cpuacct")):
            cpu = d / paths["cpuacct"].lstrip("/") / "cpuacct.usage"
        if (v2 := self._v2_dir()) is not None:
            v2_dir = v2 / paths.get("", "/").lstrip("/")
            if mem is None and (v2_dir / "memory.current").exists():
                mem = v2_dir / "memory.current"
            if cpu is None and (v2_dir / "cpu.stat").exists():
                cpu, scale = v2_dir / "cpu.stat", 1000
        return CgroupFiles(mem if mem and mem.exists() else None, cpu if cpu and cpu.exists() else None, scale)

    def process_usage(self, pid: int) -> CgroupUsage | None:
        """Usage of the cgroup a process (an instance's init, a VM's QEMU) runs in."""
        paths = self.cgroup_of(pid)
        return self.cgroup_usage(paths) if paths else None


def _int(text: str | None) -> int | None:
    try:
        return int(text.strip()) if text else None
    except ValueError:
        return None


def _kv(text: str) -> list[tuple[str, int]]:
    out = []
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if value.strip().lstrip("-").isdigit():
            out.append((key, int(value)))
    return out
