"""Several instances at once: the same benchmark started simultaneously in N instances of a
platform (N VMs, N containers), as in the KVM-on-ARM study's 1, 2 and 4 guests.

Instance 1 is the unit's own instance; the others are created for the execution and removed
after it. Every instance's values are kept (sample.instance = 1..N); instance 0 holds the mean
per instance (what each one got, comparable with a single instance) and, for higher-is-better
metrics, `<metric>_total`: the sum, for count-versus-throughput curves.
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ... import proc
from ...benchmarks.base import Benchmark, Metric
from ...errors import ParseError
from ...images.image import Image
from ...platforms import naming
from ...platforms.base import Instance, Platform


def run_instances(platform: Platform, first: Instance, image: Image, count: int, argv: list[str],
                  workdir: str, timeout: float) -> list[tuple[Instance, proc.Result]]:
    extras: list[Instance] = []
    try:
        for i in range(2, count + 1):
            inst = platform.create(image, naming.derived(first.name, f"-i{i}"), first.run_id)
            extras.append(inst)
            platform.start(inst)
        instances = [first, *extras]
        for inst in instances:
            platform.exec(inst, ["mkdir", "-p", workdir], timeout=60)
        barrier = threading.Barrier(count)

        def one(inst: Instance) -> proc.Result:
            barrier.wait(timeout=60)  # release all together: they must overlap to contend
            return platform.host.run(platform.exec_argv(inst, argv), timeout=timeout, check=False)

        with ThreadPoolExecutor(max_workers=count) as pool:
            results = list(pool.map(one, instances))
        return list(zip(instances, results))
    finally:
        for inst in reversed(extras):
            platform.discard(inst)


def combine(bench: Benchmark, outcomes: list[tuple[Instance, proc.Result]], source: str,
            totals: bool) -> tuple[str, str, list[dict]]:
    """Raw output of every instance, and the samples; raises if any instance failed."""
    stdout = "".join(f"### instance {i} ({inst.name}) exit {r.returncode}\n{r.stdout}\n"
                     for i, (inst, r) in enumerate(outcomes, 1))
    stderr = "".join(f"### instance {i} ({inst.name})\n{r.stderr}\n" for i, (inst, r) in enumerate(outcomes, 1)
                     if r.stderr)
    failed = [i for i, (_, r) in enumerate(outcomes, 1) if r.returncode != 0]
    if failed:
        raise ParseError(bench.tool, "exit status 0 in every instance",
                         f"{source}: instances {failed} failed")
    per_instance = [bench.parse(r.stdout, r.stderr, source=f"{source}, instance {i}")
                    for i, (_, r) in enumerate(outcomes, 1)]
    metrics: dict[str, Metric] = {m.name: m for m in bench.metrics()}
    samples: list[dict] = []
    for name, metric in metrics.items():
        values = [v[name] for v in per_instance]
        base = {"unit": metric.unit, "higher_is_better": metric.higher_is_better, "category": metric.category}
        samples += [{"metric": name, "value": float(x), "instance": i, **base} for i, x in enumerate(values, 1)]
        samples.append({"metric": name, "value": float(np.mean(values)), "instance": 0, **base})
        if totals and metric.higher_is_better:
            samples.append({"metric": f"{name}_total", "value": float(np.sum(values)), "instance": 0, **base})
    return stdout, stderr, samples
