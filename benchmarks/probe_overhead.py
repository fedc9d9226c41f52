"""What do probes cost the benchmark they watch? (target: under 1 %)

A/B in one run: the same benchmark command on the host, `pairs` times with and without
the probes, the order inside each pair drawn at random so drift and other load hit both
arms alike. Reports each arm's mean, the ratio with its 95 % bootstrap CI (the report's
own `ratio_ci`) and the Mann-Whitney p.

    .venv/bin/python benchmarks/probe_overhead.py [--pairs 10] [--seconds 2] [--probes energy,perf,pressure]

Energy uses the test meter (tests/data/meter/known_watts) at 1 s, perf counts system-wide,
pressure samples at 10 Hz: the defaults of a campaign with `probes: [energy, perf, pressure]`.

On a busy shared host the A/B ratio is noisy; the second figure does not depend on the load:
the CPU time the probes themselves use (this process's sampling threads plus the perf and
meter processes they start) while watching an idle `sleep`, as a share of one CPU.
"""
from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import time
from pathlib import Path

from virtbench import proc
from virtbench.analysis import stats
from virtbench.benchmarks.openssl import OpenSSLSpeed
from virtbench.experiments.benchmarks import probing
from virtbench.probes.base import Target
from virtbench.probes.energy import Energy, EnergyOptions
from virtbench.probes.perf import Perf
from virtbench.probes.pressure import Pressure

METER = Path(__file__).resolve().parents[1] / "tests/data/meter/known_watts"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=10)
    ap.add_argument("--seconds", type=int, default=2)
    ap.add_argument("--probes", default="energy,perf,pressure")
    args = ap.parse_args()
    make = {"energy": lambda: Energy(EnergyOptions(meter=[str(METER)], interval=1.0)), "perf": Perf,
            "pressure": Pressure}
    probes = [make[n]() for n in args.probes.split(",") if n]
    probing.check_probes(probes)
    bench = OpenSSLSpeed(OpenSSLSpeed.Params(algorithm="aes-128-cbc", bytes=1024, multi=1, seconds=args.seconds))
    argv = bench.command("/tmp")
    target = Target("overhead", "host", "native", "openssl", 0, "host", (os.getpid(),))
    rng = random.Random(1)
    values: dict[str, list[float]] = {"off": [], "on": []}
    for i in range(args.pairs + 1):  # pair 0 is a warm-up, not counted
        for arm in rng.sample(["off", "on"], 2):
            with probing.around(probes if arm == "on" else [], target) as found:
                result = proc.run(argv, timeout=120)
            assert all(a["status"] == "ok" for a in found), found
            rate = bench.parse(result.stdout, result.stderr)["throughput"]
            if i:
                values[arm].append(rate)
    cost = probe_cpu(probes, target, 5.0 * args.seconds)
    off, on = values["off"], values["on"]
    ratio = statistics.fmean(on) / statistics.fmean(off)
    ci = stats.ratio_ci(on, off, True)
    test = stats.rank_test(on, off)
    load = os.getloadavg()
    print(f"openssl aes-128-cbc 1 KiB, {args.seconds} s per execution, {args.pairs} pairs, probes: {args.probes}")
    print(f"  without probes: mean {statistics.fmean(off) / 1e6:.1f} MB/s (sd {statistics.stdev(off) / 1e6:.1f})")
    print(f"  with probes:    mean {statistics.fmean(on) / 1e6:.1f} MB/s (sd {statistics.stdev(on) / 1e6:.1f})")
    print(f"  ratio with/without: {ratio:.4f} (overhead {100 * (1 - ratio):+.2f} %), 95% CI {ci}, "
          f"Mann-Whitney p {test.p if test else None}")
    print(f"  the probes' own CPU time: {100 * cost:.2f} % of one CPU ({os.cpu_count()} CPUs here)")
    print(f"  load average during the run: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


def probe_cpu(probes: list, target: Target, seconds: float) -> float:
    """CPU seconds the probes use per second of watching (nothing else runs in this process)."""
    self0, kids0 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    with probing.around(probes, target):
        time.sleep(seconds)
    wall = time.perf_counter() - t0
    self1, kids1 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    used = sum(getattr(b, f) - getattr(a, f) for a, b in ((self0, self1), (kids0, kids1)) for f in ("ru_utime", "ru_stime"))
    return used / wall


if __name__ == "__main__":
    main()
