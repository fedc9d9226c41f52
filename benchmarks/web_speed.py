"""How fast do the web pages answer with 100,000 samples stored? (target: under 100 ms)

Fills an SQLite (or any --db URL) store through Store.record, the runner's own write path:
one big run (half the samples: 10 platforms, hundreds of repetitions) and ten smaller runs
on two hosts (the other half). Then starts `virtbench serve --no-worker` and times every
page and the main API reads over HTTP, as a browser gets them: the first request after the
server has served each page type once for another run (so templates are compiled; the runs'
reports stored as the worker stores them when a run ends) and the median and maximum of the
following requests. A comparison of runs never compared before is computed on that first view.

    .venv/bin/python benchmarks/web_speed.py [--samples 100000] [--db sqlite:////tmp/vb-web-speed.db]
                                            [--repeat 10] [--port 8799]

The store is reused when it already holds the runs, so repeated timings skip the fill.
"""
from __future__ import annotations

import argparse
import http.client
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sqlalchemy import event, func, select

from virtbench.analysis import synthetic
from virtbench.store.db import Store
from virtbench.store.models import Execution, Run, Sample
from virtbench.web import cache

BIG = "speed-big"
SMALL = [f"speed-small-{i}" for i in range(10)]
TARGET_MS = 100.0


def platforms(count: int) -> list[synthetic.SimPlatform]:
    base = synthetic.default_platforms()
    docker = base[1]
    return base + [synthetic.SimPlatform(f"docker-cpus{i}", "docker", "container",
                                         {k: v * (0.97 + 0.005 * i) for k, v in docker.factors.items()})
                   for i in range(1, max(0, count - len(base)) + 1)]


def fill(store: Store, samples: int) -> None:
    benches = synthetic.default_benchmarks()
    metrics = sum(len(b.metrics) for b in benches) + 4  # + lifecycle steps
    big_p = platforms(10)
    rounds = max(2, -(-samples // 2 // (len(big_p) * metrics)))
    t = time.perf_counter()
    print(f"filling {BIG}: {len(big_p)} platforms x {metrics} metrics x {rounds} rounds ...", flush=True)
    synthetic.fill(store, BIG, repetitions=rounds - 1, warmups=1, platforms=big_p, benchmarks=benches,
                   drift={"docker": 0.0005}, fail={("qemu", "sim-fio"): range(5, rounds, 17)})
    small_p = platforms(5)
    per = max(2, -(-samples // 2 // len(SMALL) // (len(small_p) * metrics)))
    print(f"filling {len(SMALL)} runs on 2 hosts: {len(small_p)} platforms x {metrics} metrics x {per} rounds ...",
          flush=True)
    for i, run_id in enumerate(SMALL):
        synthetic.fill(store, run_id, repetitions=per - 1, warmups=1, platforms=small_p, benchmarks=benches,
                       seed=i, hostname=f"lab-{i % 2 + 1}", host_speed=1.0 + 0.05 * (i % 2))
    print(f"filled in {time.perf_counter() - t:.0f} s", flush=True)


DB_NAME = ""
"""PostgreSQL: the database's name, so its server processes' CPU counts too (set in main)."""


def _task_ns(pid: int | str) -> int:
    total = 0
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return 0
    for task in tasks:
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, IndexError, ValueError):
            pass  # a thread that ended meanwhile
    return total


def _db_backends() -> list[str]:
    """PIDs of the PostgreSQL backends serving DB_NAME (their process title names the database)."""
    out = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                title = (proc / "cmdline").read_bytes()
            except OSError:
                continue
            if title.startswith(b"postgres: ") and f" {DB_NAME} ".encode() in title:
                out.append(proc.name)
    return out


def server_cpu_ms(pid: int) -> float:
    """CPU time the server's threads (and on PostgreSQL the database's backends) have run, in ms
    (/proc/PID/task/*/schedstat, in ns): a request's own cost, which on a shared machine is what
    its wall time would be when quiet."""
    total = _task_ns(pid)
    if DB_NAME:
        total += sum(_task_ns(b) for b in _db_backends())
    return total / 1e6


def get(conn: http.client.HTTPConnection, path: str, pid: int | None = None) -> tuple[float, int, int, float]:
    """(wall ms, status, bytes, server CPU ms) of one request."""
    cpu = server_cpu_ms(pid) if pid else 0.0
    t = time.perf_counter()
    conn.request("GET", path, headers={"Host": "127.0.0.1"})
    resp = conn.getresponse()
    body = resp.read()
    wall = (time.perf_counter() - t) * 1000
    return wall, resp.status, len(body), (server_cpu_ms(pid) - cpu if pid else 0.0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=100_000)
    ap.add_argument("--db", default=f"sqlite:///{Path(tempfile.gettempdir()) / 'vb-web-speed.db'}")
    ap.add_argument("--repeat", type=int, default=10, help="warm requests per page")
    ap.add_argument("--port", type=int, default=8799)
    args = ap.parse_args()

    store = Store(args.db)
    if store.engine.dialect.name == "postgresql":
        global DB_NAME
        DB_NAME = str(store.engine.url.database)
    if store.engine.dialect.name == "sqlite":  # speeds up the fill only (no fsync per execution)
        event.listen(store.engine, "connect", lambda c, _: c.execute("PRAGMA synchronous=OFF"))
        store.engine.dispose()
    with store.session() as s:
        have = s.scalar(select(func.count()).select_from(Sample))
    if have < args.samples:
        fill(store, args.samples)
    with store.session() as s:
        total = s.scalar(select(func.count()).select_from(Sample))
        big = s.scalar(select(func.count()).select_from(Sample).where(Sample.run_id == BIG))
        ex_id = s.scalar(select(Execution.id).where(Execution.run_id == BIG, Execution.status == "failed").limit(1))
    print(f"{total} samples stored ({big} in {BIG}, the rest in {len(SMALL)} runs on 2 hosts); {store.engine.dialect.name}")
    print(f"host load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")

    # What the worker does when a run ends (web.cache.precompute): its report, stored once
    # (again when it was stored by other analysis code: the version names the code).
    with store.session() as s:
        ids = list(s.scalars(select(Run.id).order_by(Run.created_at)))
    for run_id in ids:
        t = time.perf_counter()
        cache.precompute(store, run_id)
        if (dt := time.perf_counter() - t) > 0.05:
            print(f"report of {run_id} computed and stored (as the worker does when a run ends): {dt:.2f} s")

    env = dict(os.environ, VIRTBENCH_DB=args.db, VIRTBENCH_TOKEN="speed-test-token-0123456789")
    server = subprocess.Popen([sys.executable, "-m", "virtbench", "serve", "--no-worker", "--port", str(args.port)],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    pages = [
        ("dashboard", "/"),
        ("runs list", "/runs"),
        ("run page, 50k-sample run", f"/runs/{BIG}"),
        ("verify, default metric", f"/runs/{BIG}/verify"),
        ("verify, fio randread_iops", f"/runs/{BIG}/verify?benchmark=sim-fio&metric=randread_iops"),
        ("raw output of one sample", f"/executions/{ex_id}"),
        ("compare, 50k-sample run", f"/compare?run={BIG}"),
        ("compare, 2 runs pooled", f"/compare?run={SMALL[0]}&run={SMALL[2]}"),
        ("compare, 2 hosts side by side", "/compare?host=lab-1&host=lab-2&by_host=true"),
        ("schedule form", "/schedule"),
        ("API progress (polled)", f"/api/runs/{BIG}/progress"),
        ("API runs", "/api/runs"),
        ("API verify", f"/api/runs/{BIG}/verify?benchmark=sim-hpcc&metric=HPL_Gflops"),
        ("API compare, 2 runs pooled", f"/api/compare?run={SMALL[0]}&run={SMALL[2]}"),
    ]
    try:
        conn = http.client.HTTPConnection("127.0.0.1", args.port, timeout=120)
        deadline = time.monotonic() + 60
        while True:
            try:
                get(conn, "/healthz")
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    print(server.stderr.read() if server.stderr else "", file=sys.stderr)
                    return 1
                time.sleep(0.2)
                conn.close()
        # One request per page type on another run first: template compilation and lazy imports
        # are the process's start-up cost, not the data's; "first" below is the first view of the data.
        small = SMALL[-1]
        for path in ("/", "/runs", f"/runs/{small}", f"/runs/{small}/verify", f"/executions/{ex_id}",
                     f"/compare?run={small}", "/schedule", f"/api/runs/{small}/progress", "/api/runs",
                     f"/api/runs/{small}/verify", f"/api/compare?run={small}"):
            get(conn, path)
        print(f"\n{'page':<32} {'first':>7} {'median':>7} {'min':>7}   {'CPU first':>9} {'median':>7} {'min':>7}"
              f"  {'KiB':>5}  (ms; first = first view of that data)")
        worst = worst_cpu = 0.0
        for label, path in pages:
            first, status, size, first_cpu = get(conn, path, server.pid)
            assert status == 200, (path, status)
            warm = [get(conn, path, server.pid) for _ in range(args.repeat)]
            walls, cpus = [w[0] for w in warm], [w[3] for w in warm]
            worst, worst_cpu = max(worst, first, max(walls)), max(worst_cpu, first_cpu, statistics.median(cpus))
            mark = "" if max(first_cpu, statistics.median(cpus)) < TARGET_MS else "  over target"
            print(f"{label:<32} {first:7.1f} {statistics.median(walls):7.1f} {min(walls):7.1f}   {first_cpu:9.1f} "
                  f"{statistics.median(cpus):7.1f} {min(cpus):7.1f}  {size / 1024:5.0f}{mark}", flush=True)
        print(f"\nslowest answer: wall {worst:.0f} ms, server CPU {worst_cpu:.0f} ms (first view or warm median; "
              f"target {TARGET_MS:.0f} ms); load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        return 0 if worst_cpu < TARGET_MS else 2
    finally:
        server.terminate()
        server.wait(30)


if __name__ == "__main__":
    sys.exit(main())
