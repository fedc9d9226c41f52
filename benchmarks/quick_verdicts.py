"""How often does the quick comparison decide? (target: 90 % of its cells on a quiet host,
70 % with one core of other work, within 10 minutes)

Runs `virtbench run --quick` N times, each into a store of its own, and prints per run the
cells decided (slower, faster or same, lifecycle excluded), the run's wall time, the forecast
its noise check said at the start, and the load average before and after. `--busy` keeps
`stress-ng --cpu 1` running beside each run (one core of other work on a 2-core host).

    .venv/bin/python benchmarks/quick_verdicts.py [--runs 2] [--busy] [--keep DIR]

This measures the quick comparison with the machine's caches in place (images, engines'
imports). A fresh machine's `make run` adds its packages, venv and image build in front:
`../shared/tools/fresh-run` (or moving /var/cache/virtbench, /var/lib/virtbench and
/run/virtbench aside by hand) measures that. Run it with nothing else on the machine and
say the load with every figure.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

VIRTBENCH = [sys.executable, "-m", "virtbench"]
DECIDED = ("slower", "faster", "same")


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def one_run(db: str) -> dict:
    before, t0 = load(), time.monotonic()
    run = subprocess.run([*VIRTBENCH, "run", "--quick", "--no-report", "--db", db], capture_output=True, text=True)
    wall, after = time.monotonic() - t0, load()
    if run.returncode not in (0, 1):
        raise SystemExit(f"virtbench run --quick exited {run.returncode}: {run.stderr[-2000:]}")
    report = subprocess.run([*VIRTBENCH, "report", "latest", "--json", "--db", db], capture_output=True, text=True,
                            check=True)
    doc = json.loads(report.stdout)
    cells = [r for r in doc["results"] if r["platform"] != doc.get("baseline", "native")
             and r["benchmark"] != "lifecycle"]
    decided = [r for r in cells if r.get("verdict") in DECIDED]
    said = next((line for line in (run.stdout + run.stderr).splitlines() if line.startswith("host noise")), "")
    return {"decided": len(decided), "cells": len(cells), "wall_s": round(wall), "load_before": before,
            "load_after": after, "forecast": said, "undecided": [f"{r['platform']} {r['benchmark']}"
                                                                 for r in cells if r not in decided]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--busy", action="store_true", help="stress-ng --cpu 1 beside each run")
    ap.add_argument("--keep", type=Path, default=None, help="keep each run's store in this directory")
    args = ap.parse_args()
    with ExitStack() as stack:
        where = args.keep or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        where.mkdir(parents=True, exist_ok=True)
        if args.busy:
            stress = subprocess.Popen(["stress-ng", "--cpu", "1", "--timeout", "0"], stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL)
            stack.callback(stress.wait)
            stack.callback(stress.terminate)
            time.sleep(5)
        for i in range(args.runs):
            res = one_run(f"sqlite:///{where}/quick-{os.getpid()}-{i}.db")
            print(json.dumps({"run": i + 1, "busy": args.busy, **res}), flush=True)


if __name__ == "__main__":
    main()
