"""A delay injected with tc netem on a pair's link must appear in the measured latency.

First the kernel is asked whether it has the netem qdisc at all: `tc qdisc add ... netem`
on the loopback of a network namespace the check creates (and removes). Kernels built
without sch_netem (some cloud and VM kernels) answer "qdisc kind is unknown": the check is
skipped with that reason and the fix.

Where netem exists, a runc container on the bridge is pinged from the host end (the
image's own ping in a chroot, as every client: host benchmark runs) through the runner's
pair machinery, in turns with netem on the container's host-side veth at 0 ms and at
DELAY_MS. The qdisc delays only the requests on their way in, so the round trip must grow
by DELAY_MS within 0.1 ms (medians of the turns' mean round-trip times).
"""
from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any, ClassVar

from .. import proc
from ..benchmarks.base import PairBenchmark
from ..config import parse_campaign
from ..experiments.benchmarks import session as sessions
from ..experiments.benchmarks.pair import run_pair
from ..runner.execute import new_run_id
from .base import Check, Judgement, Skip
from .context import Context, record, remove

DELAY_MS = 1.0
TOLERANCE_MS = 0.1
TURNS = 4
PING: dict[str, Any] = {"name": "ping", "client": "host", "server": "instance", "count": 50, "interval": 0.01}
FIX = ("load the netem qdisc (modprobe sch_netem) or boot a kernel built with CONFIG_NET_SCH_NETEM "
       "(Debian's linux-image-amd64 has it; some cloud and VM kernels leave it out)")


def judge(base: list[float], delayed: list[float], delay: float = DELAY_MS,
          tolerance: float = TOLERANCE_MS) -> Judgement:
    """The median round trip with the delay minus the one without must be `delay` +- `tolerance` (ms)."""
    if not base or not delayed:
        return Judgement(False, "-", "no round-trip times measured")
    added = statistics.median(delayed) - statistics.median(base)
    shown = f"+{added:.3f} ms (round trip {statistics.median(base):.3f} -> {statistics.median(delayed):.3f} ms)"
    if abs(added - delay) <= tolerance + 1e-9:
        return Judgement(True, shown)
    return Judgement(False, shown, f"the added latency {added:.3f} ms is outside {delay:g} +- {tolerance:g} ms")


def netem_gap(ctx: Context) -> str | None:
    """Why this kernel cannot run netem (None: it can), tried in a namespace of our own."""
    ns = ctx.name("netem")
    record(ctx.paths, "netns", ns)
    try:
        made = proc.run(["ip", "netns", "add", ns], timeout=30, check=False)
        if not made.ok:
            return f"cannot create a network namespace to try netem: {made.stderr.strip()}"
        r = proc.run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "lo", "root", "netem",
                      "delay", f"{DELAY_MS:g}ms"], timeout=30, check=False)
        if r.ok:
            return None
        said = (r.stderr or r.stdout).strip().splitlines()
        return f"this kernel has no netem qdisc (sch_netem): tc said {said[-1] if said else f'exit {r.returncode}'!r}"
    finally:
        remove(ctx.paths, "netns", ns)


class Netem(Check):
    name: ClassVar[str] = "netem"
    title: ClassVar[str] = "a delay injected with tc netem on a link shows in the measured latency"

    def expected(self) -> str:
        return f"+{DELAY_MS:g} ms +- {TOLERANCE_MS:g} ms of round-trip time (netem on a runc container's link, ping)"

    def measure(self, ctx: Context) -> tuple[Judgement, dict[str, Any]]:
        if not proc.which("tc"):
            raise Skip("tc is not installed", "apt-get install iproute2")
        if (gap := netem_gap(ctx)) is not None:
            raise Skip(gap, FIX)
        ctx.require_platform("runc")
        ctx.require_real_cpu("its timers fire late (a 1 ms netem delay read as +2.2 ms on a TCG guest), so a "
                             "delay's size is no known answer there")
        base, delayed = round_trips(ctx)
        return judge(base, delayed), {"base_rtt_ms": base, "delayed_rtt_ms": delayed}


CAMPAIGN: dict[str, Any] = {"name": "selftest-netem", "baseline": "link",
                            "platforms": [{"name": "link", "type": "runc", "network": "bridge"}],
                            "benchmarks": [PING]}
"""The link and its ping (its image is the ping's own, not the other checks' quick one)."""


def netem_qdisc(delay_ms: float) -> list[str]:
    return ["netem", "delay", f"{delay_ms:g}ms"]


def round_trips(ctx: Context, qdisc: Callable[[float], list[str]] = netem_qdisc,
                turns: int = TURNS) -> tuple[list[float], list[float]]:
    """Mean round-trip times (ms) of the turns without and with the delay: 0 D D 0 0 D D 0 ...,
    so drift hits both alike. `qdisc` builds the link's qdisc for a delay (a test on a kernel
    without netem swaps in one that delays nothing, to try everything else)."""
    campaign = parse_campaign(CAMPAIGN, "selftest netem campaign")
    session = sessions.build_objects(campaign, ctx.paths)
    sessions.prepare(session, log=ctx.log)
    platform, bench, image = session.platforms["link"], session.benchmarks["ping"], session.image
    assert image is not None and isinstance(bench, PairBenchmark)
    platform.cgroup_parent = ctx.cgroup_parent
    instance = platform.create(image, ctx.name("netem-link"), new_run_id())
    base: list[float] = []
    delayed: list[float] = []
    try:
        platform.start(instance)
        veth = instance.data["veth"]
        for i in range(2 * turns):
            delay = DELAY_MS if i % 4 in (1, 2) else 0.0
            proc.run(["tc", "qdisc", "replace", "dev", veth, "root", *qdisc(delay)], timeout=30)
            pair = run_pair(platform, instance, bench, "/tmp", image, ctx.paths, bench.execution_timeout())
            if not pair.client.ok:
                raise RuntimeError(f"ping failed (exit {pair.client.returncode}): {pair.client.stderr.strip()[-300:]}")
            rtt = bench.parse(pair.client.stdout, pair.client.stderr, source="ping through netem")["rtt_avg"]
            (delayed if delay else base).append(rtt)
    finally:
        platform.discard(instance)
    return base, delayed
