"""A shared start time inside the instances, and the check that they really ran together.

Starting the workload "together" from the host is not enough at high counts: the execs into
80 containers (or through a VM's agent) spread over seconds, longer than a short workload, so
the aggregate of such a count is not a concurrent measurement. Instead every instance runs a
small POSIX shell wrapper (busybox's sh and Debian's alike) that sleeps until one absolute
start time and then runs the tool (first, so that nothing else is created on the way: its
start is read just after, an upper bound), and reports when it arrived, started and ended in
its own clock:

    VBSYNC clock=realtime arrived=NS start=NS end=NS

The start time is set far enough ahead to cover the launch of every wrapper (a rehearsal of
the launch measures how long that takes, once per fleet where the instances share the host's
clock: later counts go by their previous launch's arrivals). The clock is CLOCK_REALTIME
(`date +%s%N`); where `date` has no `%N` (busybox) it is `/proc/uptime` in centiseconds. Each instance's offset from
the host's clock is read in the rehearsal: zero for containers reading the realtime clock (one
kernel, one clock), measured at the midpoint of the exec otherwise (a VM's clock, a
namespaced uptime). From the markers, in the host's clock: the start spread (last start minus
first) and the overlap (the share of the whole window during which every instance ran).
"""
from __future__ import annotations

from dataclasses import dataclass, field

MARK = "VBSYNC"

_NOW = ('now() { t=$(date +%s%N 2>/dev/null); case "$t" in ""|*[!0-9]*) '
        'read u _ < /proc/uptime; echo "uptime ${u%.*}${u#*.}0000000";; *) echo "realtime $t";; esac; }')

_RAISE = """
n0=$(nice 2>/dev/null); renice -n -10 -p $$ >/dev/null 2>&1; n1=$(nice 2>/dev/null)
up=$(( ${n0:-0} - ${n1:-0} ))
"""

SYNCED = _NOW + _RAISE + """
synced() {
deadline=$1; workdir=$2; shift 2
if [ -n "$workdir" ]; then mkdir -p "$workdir" || return 125; fi
r=$(now); clock=${r%% *}; arrived=${r#* }
rem=$((deadline - arrived))
if [ "$rem" -gt 0 ] && [ "$rem" -lt 600000000000 ]; then sleep "$((rem / 1000000000)).$(printf %09d $((rem % 1000000000)))"; fi
if [ "$up" -gt 0 ]; then nice -n "$up" "$@" & else "$@" & fi
tool=$!
r=$(now); start=${r#* }
wait $tool; rc=$?
r=$(now); end=${r#* }
echo "VBSYNC clock=$clock arrived=$arrived start=$start end=$end deadline=$deadline" >&2
return $rc
}
"""
"""The shell function `synced DEADLINE WORKDIR TOOL ARGS...` (after `now` and the priority
raise): the one body of the wrapper below and of the resident runner (resident.py)."""

WRAPPER = SYNCED + 'synced "$@"\n'
"""argv: sh -c WRAPPER vbsync DEADLINE_NS WORKDIR TOOL ARGS... (the deadline in the instance's
clock; WORKDIR made first unless empty, so that a count needs no rehearsal to make it).

The wrapper raises its own priority (renice -10) where the instance allows it (CAP_SYS_NICE:
LXC keeps it, Docker drops it) and starts the tool back at the niceness it was given. Why: at
the start time every wrapper wakes at once among the tools the first ones already started;
at nice 0 each fork/exec on the way waits its turn behind them, and 64 LXC instances' starts
spread over 5 s of a 10 s window (overlap 0.36). The tools themselves run at equal, ordinary
priority, as the baseline does. Without the capability nothing changes."""

CLOCK = _NOW + '\nmkdir -p "$1" && now'
"""The rehearsal: make the work directory and print `CLOCK NS` (sh -c CLOCK vbsync WORKDIR)."""


def wrap(argv: list[str], deadline_ns: int, workdir: str = "") -> list[str]:
    """The workload argv that makes `workdir` and waits for `deadline_ns` (instance clock)
    before it starts."""
    return ["sh", "-c", WRAPPER, "vbsync", str(deadline_ns), workdir, *argv]


def exec_timeout(workload_s: float, lead: float) -> float:
    """How long one exec of a count's workload may take: its launch (the lead covers 1.5 times
    the estimate; twice the lead is three times it), then the workload. A `docker exec` into a
    fleet of 1024 hung for six minutes (2026-11-30), and its bound was 2 s per instance (2048 s):
    a signal's cleanup waited for it."""
    return workload_s + 2 * lead + 60.0


def rehearsal(workdir: str) -> list[str]:
    return ["sh", "-c", CLOCK, "vbsync", workdir]


@dataclass(frozen=True)
class Clock:
    """An instance's clock: its kind and its offset from the host's realtime clock (instance
    minus host), whatever its kind: an instance reading = host realtime + offset."""

    kind: str
    offset_ns: int


def read_clock(stdout: str, t0_ns: int, t1_ns: int, *, shared_kernel: bool) -> Clock:
    """The instance's clock from a rehearsal's output and the host's clock around the exec.

    t0/t1 are the host's realtime clock just before and after the exec."""
    kind, _, value = stdout.strip().splitlines()[-1].partition(" ")
    if kind not in ("realtime", "uptime") or not value.strip().isdigit():
        raise ValueError(f"no clock reading in {stdout.strip()[-200:]!r}")
    if kind == "realtime" and shared_kernel:
        return Clock(kind, 0)
    return Clock(kind, int(value) - (t0_ns + t1_ns) // 2)


@dataclass(frozen=True)
class Marker:
    arrived: int
    start: int
    end: int
    deadline: int

    @property
    def late(self) -> bool:
        return self.arrived > self.deadline


def parse_marker(stderr: str) -> Marker | None:
    """The wrapper's last VBSYNC line (None: the wrapper did not get there)."""
    for line in reversed(stderr.splitlines()):
        if line.startswith(MARK + " "):
            fields = dict(f.split("=", 1) for f in line.split()[1:] if "=" in f)
            try:
                return Marker(*(int(fields[k]) for k in ("arrived", "start", "end", "deadline")))
            except (KeyError, ValueError):
                return None
    return None


def strip_marker(stderr: str) -> str:
    """The tool's own stderr, for its parser and the stored output."""
    return "".join(ln for ln in stderr.splitlines(keepends=True) if not ln.startswith(MARK + " "))


@dataclass
class Overlap:
    """How well the instances of one count ran together (seconds, host clock)."""

    instances: int
    reported: int
    spread_s: float | None = None
    overlap: float | None = None
    late: int = 0
    lead_s: float = 0.0
    attempts: int = 1
    warnings: list[str] = field(default_factory=list)

    def ok(self, min_overlap: float) -> bool:
        return self.reported == self.instances and self.overlap is not None and self.overlap >= min_overlap

    def as_dict(self) -> dict:
        return {"instances": self.instances, "reported": self.reported, "start_spread_s": self.spread_s,
                "overlap": self.overlap, "late": self.late, "lead_s": round(self.lead_s, 3),
                "attempts": self.attempts, "warnings": self.warnings}


def overlap(markers: list[Marker | None], offsets: list[int], lead_s: float = 0.0) -> Overlap:
    """Start spread and the share of the window [first start, last end] that every instance
    was running (0 when one ended before the last started)."""
    spans = [(m.start - o, m.end - o) for m, o in zip(markers, offsets) if m is not None]
    out = Overlap(instances=len(markers), reported=len(spans), lead_s=lead_s,
                  late=sum(1 for m in markers if m is not None and m.late))
    if not spans:
        return out
    starts, ends = [s for s, _ in spans], [e for _, e in spans]
    window = max(ends) - min(starts)
    out.spread_s = round((max(starts) - min(starts)) / 1e9, 4)
    out.overlap = round(max(0, min(ends) - max(starts)) / window, 4) if window > 0 else 1.0
    return out
