"""How long does a report over 100,000 samples take? (target: `virtbench report` within 1 s)

Fills an SQLite store with synthetic samples through Store.record (the runner's own write
path: one transaction per execution), then times each stage of the report: loading and
statistics (builder.build, computed and from the report cache), the JSON document, the
terminal report and the self-contained HTML file; then `virtbench report` end to end in a
fresh process, as a user waits for it (interpreter start, imports, store, report, output):
for a stopped run whose report is stored (the runner stores it when the run ends, or the
first report does) and cold (the stored report removed first: statistics computed, scipy
imported). Optionally the static figures (PNG+SVG+PDF), which are not part of the target.

    .venv/bin/python benchmarks/report_speed.py [--samples 100000] [--db /tmp/vb-speed.db | --db URL] [--figures]

--db takes an SQLite file or any store URL (postgresql+psycopg://...).

The store is reused when it already holds the run, so repeated timings skip the fill.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from sqlalchemy import event, func, select

from virtbench.analysis import synthetic
from virtbench.report import builder, html, static, text
from virtbench.store.db import Store
from virtbench.store.models import ReportCache, Sample

RUN_ID = "speed-100k"


def platforms(count: int) -> list[synthetic.SimPlatform]:
    """The default five platforms plus docker variants (different cpu quotas) up to count."""
    base = synthetic.default_platforms()
    docker = base[1]
    extra = [synthetic.SimPlatform(f"docker-cpus{i}", "docker", "container",
                                   {k: v * (0.97 + 0.005 * i) for k, v in docker.factors.items()})
             for i in range(1, max(0, count - len(base)) + 1)]
    return base + extra


def fill(store: Store, samples: int, n_platforms: int) -> None:
    plats = platforms(n_platforms)
    benches = synthetic.default_benchmarks()
    per_round = len(plats) * (sum(len(b.metrics) for b in benches) + 4)
    rounds = -(-samples // per_round)
    print(f"filling: {len(plats)} platforms x {len(benches)} benchmark keys, {rounds} rounds "
          f"(1 warm-up), {rounds * per_round} samples ...", flush=True)
    t = time.perf_counter()
    synthetic.fill(store, RUN_ID, repetitions=rounds - 1, warmups=1, platforms=plats, benchmarks=benches,
                   drift={"docker": 0.0001}, fail={("qemu", "sim-fio"): range(5, 40, 7)})
    print(f"filled in {time.perf_counter() - t:.0f} s", flush=True)


def timed(label: str, fn):
    t = time.perf_counter()
    out = fn()
    dt = time.perf_counter() - t
    print(f"  {label:<34} {dt:6.2f} s", flush=True)
    return out, dt


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=100_000)
    ap.add_argument("--platforms", type=int, default=10)
    ap.add_argument("--db", default=str(Path(tempfile.gettempdir()) / "vb-report-speed.db"))
    ap.add_argument("--repeat", type=int, default=3, help="end-to-end runs to time")
    ap.add_argument("--figures", action="store_true", help="also time the PNG/SVG/PDF export")
    args = ap.parse_args()

    url = args.db if "://" in args.db else f"sqlite:///{args.db}"
    store = Store(url)
    if store.engine.dialect.name == "sqlite":  # speeds up the fill only (no fsync per execution)
        event.listen(store.engine, "connect", lambda c, _: c.execute("PRAGMA synchronous=OFF"))
        store.engine.dispose()
    with store.session() as s:
        have = s.scalar(select(func.count()).select_from(Sample).where(Sample.run_id == RUN_ID))
    if not have:
        fill(store, args.samples, args.platforms)
        with store.session() as s:
            have = s.scalar(select(func.count()).select_from(Sample).where(Sample.run_id == RUN_ID))
    print(f"run {RUN_ID}: {have} samples in {store.engine.dialect.name} {store.engine.url.render_as_string()}")

    print(f"host load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    print("stages, in process (imports done):")
    report, _ = timed("load + statistics (builder.build)", lambda: builder.build(store, RUN_ID, cached=False))
    timed("load from the report cache", lambda: builder.build(store, RUN_ID))
    run, rows, failures = report.run, report.rows, report.failures
    doc, _ = timed("JSON document (report --json)",
                   lambda: json.dumps(builder.to_json(run, rows, failures), default=str))
    timed("terminal report", lambda: text.render(report, Console(file=io.StringIO(), width=200)))
    out = Path(tempfile.gettempdir()) / f"vb-report-speed-{store.engine.dialect.name}.html"
    timed("HTML file (report --html)", lambda: html.write(out, [report]))
    print(f"  {len(rows)} result rows, {len(doc) / 1e6:.1f} MB JSON, {out.stat().st_size / 1e6:.1f} MB HTML ({out})")

    print("end to end, a fresh process each time (interpreter start, imports, store, report, output):")
    env = dict(os.environ, VIRTBENCH_DB=url)
    for cold in (False, True):
        for argv in (["report", RUN_ID], ["report", RUN_ID, "--json"], ["report", RUN_ID, "--html", str(out)]):
            walls, cpus = [], []
            for _ in range(args.repeat):
                if cold:
                    with store.session.begin() as s:
                        s.query(ReportCache).filter(ReportCache.run_id == RUN_ID).delete()
                t, before = time.perf_counter(), os.times()
                subprocess.run([sys.executable, "-m", "virtbench", *argv], env=env, check=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                after = os.times()
                walls.append(time.perf_counter() - t)
                cpus.append(after.children_user - before.children_user + after.children_system - before.children_system)
            print(f"  {'cold' if cold else 'stored'} virtbench {' '.join(argv[:1] + argv[2:3]):<16} wall median "
                  f"{statistics.median(walls):.2f} s (min {min(walls):.2f}, max {max(walls):.2f}), CPU median "
                  f"{statistics.median(cpus):.2f} s (min {min(cpus):.2f}) over {args.repeat} runs, load "
                  f"{os.getloadavg()[0]:.2f}", flush=True)
    if args.figures:
        from virtbench.report.figures import for_reports

        specs, platforms = for_reports([report])
        files, _ = timed(f"static figures ({len(specs)} x png/svg/pdf)",
                         lambda: static.export(specs, out.with_suffix(".figures"), platforms=platforms))
        print(f"  {len(files)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
