"""Synthetic runs written through Store.record, for tests, the report-speed benchmark and demos.

Values are drawn around realistic magnitudes per metric, scaled by a per-platform and
per-category factor (a VM loses a little CPU, more network; a container in a VM roughly
both), with warm-up rounds slower, optional drift and optional failed executions, so every
table, check and figure of a report has something to show. Benchmark names carry a 'sim-'
prefix so they never collide with a real plugin's declared metrics.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import numpy as np

from ..rounds import Rounds
from ..store.db import Store, now


@dataclass(frozen=True)
class SimMetric:
    name: str
    unit: str
    higher_is_better: bool
    category: str
    value: float
    cv: float = 0.01


@dataclass(frozen=True)
class SimBenchmark:
    key: str
    name: str
    params: dict[str, Any]
    metrics: tuple[SimMetric, ...]
    scale: float = 1.0
    """Multiplies every value: a sweep's parameter effect."""


@dataclass(frozen=True)
class SimPlatform:
    name: str
    type: str
    kind: str
    factors: dict[str, float] = field(default_factory=dict)
    """category -> relative performance (1.0 = as native)."""
    inside: str | None = None


def _latency(prefix: str, p50: float) -> tuple[SimMetric, ...]:
    tails = {"p50": 1.0, "p99": 1.8, "p99_9": 3.0, "p99_99": 6.0, "p99_999": 15.0}
    return tuple(SimMetric(f"{prefix}{k}", "us", False, "network", p50 * f, 0.03) for k, f in tails.items())


def default_benchmarks() -> list[SimBenchmark]:
    out = [
        SimBenchmark("sim-hpcc", "sim-hpcc", {}, (SimMetric("HPL_Gflops", "Gflop/s", True, "cpu", 52.0),
                                                  SimMetric("StarDGEMM_Gflops", "Gflop/s", True, "cpu", 18.0))),
        SimBenchmark("sim-mbw", "sim-mbw", {}, (SimMetric("memcpy", "MiB/s", True, "memory", 9800.0, 0.02),)),
        SimBenchmark("sim-fio", "sim-fio", {}, (SimMetric("randread_iops", "IO/s", True, "storage", 41000.0, 0.03),
                                                SimMetric("seqwrite_bw", "KiB/s", True, "storage", 880000.0, 0.02))),
        SimBenchmark("sim-sockperf", "sim-sockperf", {}, _latency("", 11.0)),
        SimBenchmark("sim-sqlite", "sim-sqlite", {}, (SimMetric("total_s", "s", False, "application", 3.2),)),
    ]
    for size in (64, 1024, 16384, 65000):
        out.append(SimBenchmark(f"sim-iperf3[l={size}]", "sim-iperf3", {"l": size},
                                (SimMetric("throughput", "Gbit/s", True, "network", 16.0, 0.02),),
                                scale=min(1.0, (size / 16384) ** 0.35)))
    for count in (1, 2, 4, 8):
        out.append(SimBenchmark(f"sim-density[instances={count}]", "sim-density", {"instances": count},
                                (SimMetric("total_rate", "kB/s", True, "cpu", 30000.0, 0.015),),
                                scale=min(count, 2) * (0.97 ** count)))
    return out


def default_platforms() -> list[SimPlatform]:
    cats = ("cpu", "memory", "storage", "network", "application")
    return [
        SimPlatform("native", "native", "baseline", dict.fromkeys(cats, 1.0)),
        SimPlatform("docker", "docker", "container", dict(zip(cats, (0.99, 0.98, 0.93, 0.90, 0.99)))),
        SimPlatform("runc", "runc", "container", dict(zip(cats, (1.0, 0.99, 0.97, 0.96, 1.0)))),
        SimPlatform("qemu", "qemu", "vm", dict(zip(cats, (0.95, 0.90, 0.80, 0.85, 0.96)))),
        SimPlatform("qemu-docker", "docker", "container", dict(zip(cats, (0.93, 0.88, 0.74, 0.74, 0.95))),
                    inside="qemu"),
    ]


def host_facts(hostname: str, **overrides: Any) -> dict[str, Any]:
    facts = {"hostname": hostname, "machine_id": f"sim-{hostname}", "arch": "x86_64", "cpu_model": "Sim CPU 3000",
             "cpu_flags": ["aes", "avx2"], "aes": True, "microcode": "0x1", "cpus": 8, "memory_bytes": 32 * 2**30,
             "kernel": "6.1.0-sim", "os": "Debian GNU/Linux 12 (bookworm)", "cgroup": "v2",
             "virtualization": {"vm": "none", "container": "none"}, "governor": "performance", "turbo": "off",
             "mitigations": {}, "loadavg": [0.05, 0.1, 0.1], "memory_available_bytes": 30 * 2**30}
    facts.update(overrides)
    return facts


def fill(store: Store, run_id: str, *, hostname: str = "sim-host", repetitions: int = 10, warmups: int = 1,
         platforms: Sequence[SimPlatform] | None = None, benchmarks: Sequence[SimBenchmark] | None = None,
         seed: int = 0, host_speed: float = 1.0, drift: dict[str, float] | None = None,
         fail: dict[tuple[str, str], Sequence[int]] | None = None, facts: dict[str, Any] | None = None,
         hosts: Sequence[str] = (), name: str = "synthetic") -> str:
    """Create a finished run and record every execution; returns the run id.

    name: the campaign's (a study's campaign name makes it a run of that study's part).

    hosts: a multi-host run (`hosts:` in its campaign), every execution recorded on each host,
    the i-th host measuring (1 - 0.1 i) as fast.

    drift: platform -> relative change per round (0.01 = 1% better each round). fail:
    (platform, benchmark key) -> rounds whose execution fails (an error and raw output kept).
    """
    platforms = list(platforms or default_platforms())
    benchmarks = list(benchmarks or default_benchmarks())
    rng = np.random.default_rng(seed)
    hf = facts or host_facts(hostname)
    store.create_run(
        run_id=run_id, name=name, seed=seed, host_id=store.upsert_host(hf), host_facts=hf, source="",
        campaign={"name": name, "baseline": platforms[0].name, "repetitions": repetitions,
                  "warmups": warmups, "shuffle": True, **({"hosts": [{"name": h} for h in hosts]} if hosts else {})},
        image={"recipe_hash": "0" * 64, "tar_sha256": "1" * 64, "release": "bookworm", "arch": "amd64",
               "profile": "quick"},
        provenance={"virtbench": "synthetic"},
        platforms=[{"name": p.name, "type": p.type, "label": p.name,
                    "config": {"name": p.name, "type": p.type, "kind": p.kind,
                               **({"inside": p.inside} if p.inside else {})}, "versions": {"sim": "1"}}
                   for p in platforms],
        benchmarks=[{"key": b.key, "name": b.name, "params": b.params, "tool_version": "sim 1.0",
                     "metrics": [{"name": m.name, "unit": m.unit, "higher_is_better": m.higher_is_better,
                                  "category": m.category, "description": ""} for m in b.metrics]}
                    for b in benchmarks],
        status="running")
    t = now()
    for hi, host in enumerate(hosts or [""]):
        for rnd in range(Rounds(warmups, repetitions).repeated):
            warm = rnd < warmups
            for pi in rng.permutation(len(platforms)):
                p = platforms[pi]
                trend = 1.0 + (drift or {}).get(p.name, 0.0) * (rnd - warmups)
                for b in benchmarks:
                    failed = rnd in (fail or {}).get((p.name, b.key), ())
                    speed = host_speed * (1 - 0.1 * hi) * trend * (0.9 if warm else 1.0)
                    samples = [] if failed else [_sample(rng, m, p, b, speed) for m in b.metrics]
                    store.record(run_id=run_id, round=rnd, warmup=warm, platform=p.name, benchmark=b.key,
                                 status="failed" if failed else "ok", started_at=t, finished_at=t + timedelta(seconds=1),
                                 duration_s=1.0, argv=[b.name, "--sim"], exit_code=1 if failed else 0,
                                 stdout="" if failed else "sim output", stderr="sim: error: device busy" if failed else "",
                                 error="exit status 1: device busy" if failed else "", samples=samples, host=host)
                    t += timedelta(seconds=1)
                life = [{"metric": f"{step}_s", "value": float(base * (1 + 4 * (p.kind != "baseline"))
                                                                 * rng.lognormal(0, 0.1)),
                         "unit": "s", "higher_is_better": False, "category": "lifecycle"}
                        for step, base in (("create", 0.02), ("start", 0.05), ("stop", 0.01), ("remove", 0.01))]
                store.record(run_id=run_id, round=rnd, warmup=warm, platform=p.name, benchmark="lifecycle", status="ok",
                             started_at=t, finished_at=t, duration_s=0.1, samples=life, host=host)
    store.set_status(run_id, "finished")
    return run_id


def _sample(rng: np.random.Generator, m: SimMetric, p: SimPlatform, b: SimBenchmark, speed: float) -> dict[str, Any]:
    perf = p.factors.get(m.category, 1.0) * speed * b.scale
    centre = m.value * perf if m.higher_is_better else m.value / perf
    return {"metric": m.name, "value": float(centre * rng.normal(1.0, m.cv)), "unit": m.unit,
            "higher_is_better": m.higher_is_better, "category": m.category}
