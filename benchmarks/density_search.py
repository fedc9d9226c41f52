"""Density at server scale in minutes: the search time per platform, the sizing prediction
against a measured maximum, and the limits proven per platform (issue 43's measurements).

    .venv/bin/python benchmarks/density_search.py search  [--platforms lxc,runc,docker] [--host-memory 1G]
                                                          [--max 1500] [--virtbench CMD] [--keep DIR]
    .venv/bin/python benchmarks/density_search.py predict [--platforms runc,lxc] [--small 512M] [--large 1G]
    .venv/bin/python benchmarks/density_search.py selftest [--platforms docker,podman,lxc,...]

`search` runs benchmarks/density_search.yaml (LXC memory 64M swap 0, runc, docker network none;
openssl des-ede3 for 2 s; until failure, max 1500; host_memory 1G) one platform per run, one
run after another (never two density runs at once), and prints per platform the search's
minutes (the platform's summary `duration_s`), the maximum, the stop and its confirmation from
an empty fleet, the instances started, the load before and after, and what was left behind.
`--virtbench CMD` measures another installation (the code before this change: the campaign
uses no key it lacks), e.g. `--virtbench /path/to/main/.venv/bin/virtbench`.

`predict` runs the same search at `--small` and at `--large` host_memory per platform and
compares the sizing section's prediction for the large size (made from the small run) with
the maximum measured there: the target is within +-5 %, each search stopped by memory.

`selftest` runs `virtbench selftest --platform P --json` for each platform and prints each
limit check's verdict (runsc's included, whatever it is).

Measure on a quiet machine only (the script prints the load before and after every run); a
density run pushes the host to its guard. `--scale small` (host_memory 128M, max 64) checks
that everything works in a few minutes.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
CAMPAIGN = HERE / "density_search.yaml"
MIB = 1 << 20


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(text[:-1]) * units[text[-1].upper()]) if text[-1].upper() in units else int(text)


def campaign(platform: str, host_memory: str, max_count: int, out: Path) -> Path:
    """The committed campaign with one platform, host_memory and max set."""
    doc = yaml.safe_load(CAMPAIGN.read_text())
    doc["name"] = f"density-{platform}-{host_memory}"
    doc["platforms"] = [p for p in doc["platforms"] if p["name"] == platform]
    if not doc["platforms"]:
        raise SystemExit(f"no platform {platform!r} in {CAMPAIGN}")
    doc["density"]["host_memory"] = host_memory
    doc["density"]["counts"]["max"] = max_count
    p = out / f"density-{platform}-{host_memory}.yaml"
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    return p


def vb(cmd: list[str], *args: str, db: str, timeout: float | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*cmd, *args, "--db", db], capture_output=True, text=True, timeout=timeout)


def one_search(cmd: list[str], platform: str, host_memory: str, max_count: int, work: Path) -> dict:
    db = f"sqlite:///{work / f'{platform}-{host_memory}.db'}"
    camp = campaign(platform, host_memory, max_count, work)
    before, t0 = load(), time.monotonic()
    run = vb(cmd, "run", str(camp), "--no-report", db=db)
    wall, after = time.monotonic() - t0, load()
    (work / f"{platform}-{host_memory}.log").write_text(run.stdout + run.stderr)  # the run's log lines
    rep = vb(cmd, "report", "latest", "--json", db=db)
    if rep.returncode != 0:
        raise SystemExit(f"{platform}: no report (run exit {run.returncode}): {run.stderr[-3000:]}")
    doc = json.loads(rep.stdout)
    entry = next(e for e in doc["density"] if e["platform"] == platform)
    checks = (entry.get("stop_evidence") or {}).get("confirmation") or []
    sizing = next((s for s in doc.get("sizing") or [] if s["platform"] == platform), None)
    left = subprocess.run([*cmd, "cleanup"], capture_output=True, text=True).stdout.strip()
    return {"platform": platform, "host_memory": host_memory, "run_exit": run.returncode,
            "search_min": round((entry.get("duration_s") or wall) / 60, 1), "wall_min": round(wall / 60, 1),
            "max": entry["max_count"], "stop": f"{entry['stop_reason']} at {entry.get('stop_count')}",
            "confirmed": ("yes" if checks and checks[-1].get("agrees") else
                          "no: " + str(checks[-1].get("why")) if checks else "-"),
            "started": sum(b.get("started", 0) for b in entry.get("start_batches") or []),
            "widest_batch": max((b.get("size", 1) for b in entry.get("start_batches") or []), default=1),
            "load": f"{before} -> {after}", "left_behind": left or "nothing", "sizing": sizing,
            "stop_detail": entry.get("stop_detail", "")[:200]}


def cmd_search(args: argparse.Namespace, cmd: list[str], work: Path) -> None:
    rows = [one_search(cmd, p, args.host_memory, args.max, work) for p in args.platforms]
    print(f"{'platform':<8} {'search min':>10} {'max':>5}  {'stop':<22} {'confirmed':<10} {'started':>7} "
          f"{'batch':>5}  load before -> after")
    for r in rows:
        print(f"{r['platform']:<8} {r['search_min']:>10} {r['max']:>5}  {r['stop']:<22} {r['confirmed'][:10]:<10} "
              f"{r['started']:>7} {r['widest_batch']:>5}  {r['load']}")
    for r in rows:
        print(f"  {r['platform']}: {r['stop_detail']}; left behind: {r['left_behind']}")
    (work / "search.json").write_text(json.dumps(rows, indent=1, default=str))


def cmd_predict(args: argparse.Namespace, cmd: list[str], work: Path) -> None:
    large = size(args.large)
    print(f"{'platform':<8} {'stopped by':<10} {'predicted':>9} {'measured':>8} {'error':>7}  at {args.large} "
          f"from {args.small}; per instance in cgroup / outside")
    out = []
    for p in args.platforms:
        small = one_search(cmd, p, args.small, args.max, work)
        big = one_search(cmd, p, args.large, args.max, work)
        s = small["sizing"] or {}
        pred = next((x for x in s.get("predictions", []) if x["where"] == "confined host"
                     and abs(x["memory_bytes"] - large) < MIB), None)
        costs = s.get("costs") or {}
        inside = (costs.get("memory_inside") or {}).get("slope")
        outside = (costs.get("host_side_outside_parent") or costs.get("host_side_pss") or {}).get("slope")
        err = None if pred is None or not big["max"] else (pred["count"] - big["max"]) / big["max"]
        out.append({"platform": p, "small": small, "large": big, "prediction": pred, "error": err})
        print(f"{p:<8} {s.get('stopped_by', '-'):<10} {pred['count'] if pred else '-':>9} {big['max']:>8} "
              f"{'-' if err is None else f'{err:+.1%}':>7}  "
              f"{'-' if inside is None else f'{inside / MIB:.2f} MiB'} / "
              f"{'-' if outside is None else f'{outside / MIB:.2f} MiB'}; stops: {small['stop']}, {big['stop']}")
    (work / "predict.json").write_text(json.dumps(out, indent=1, default=str))


def cmd_selftest(args: argparse.Namespace, cmd: list[str], work: Path) -> None:
    for p in args.platforms:
        before, t0 = load(), time.monotonic()
        r = subprocess.run([*cmd, "selftest", "--platform", p, "--json"], capture_output=True, text=True)
        try:
            doc = json.loads(r.stdout)
        except ValueError:
            print(f"{p}: selftest exit {r.returncode}: {r.stderr[-500:]}")
            continue
        for c in doc["checks"]:
            state = "skipped" if c["skipped"] else "passed" if c["passed"] else "FAILED"
            print(f"{p:<10} {c['name']:<10} {state:<8} {c['measured']}" + (f" ({c['reason']})" if c["reason"] else ""))
        print(f"{p:<10} {time.monotonic() - t0:.0f} s, load {before} -> {load()}")
        (work / f"selftest-{p}.json").write_text(r.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=("search", "predict", "selftest"))
    ap.add_argument("--platforms", default=None, help="comma-separated platform names (campaign names; selftest: types)")
    ap.add_argument("--host-memory", default="1G")
    ap.add_argument("--max", type=int, default=1500)
    ap.add_argument("--small", default="512M")
    ap.add_argument("--large", default="1G")
    ap.add_argument("--scale", choices=("full", "small"), default="full",
                    help="small: host_memory 128M (predict: 64M -> 128M), max 64: a check that it works")
    ap.add_argument("--virtbench", default=None, help="the virtbench command to measure (default: this checkout's)")
    ap.add_argument("--keep", type=Path, default=None, help="keep the stores and results here")
    args = ap.parse_args()
    default = {"search": "lxc,runc,docker", "predict": "runc,lxc",
               "selftest": "docker,podman,lxc,containerd,runc,crun,runsc,qemu"}[args.what]
    args.platforms = (args.platforms or default).split(",")
    if args.scale == "small":
        args.host_memory, args.max, args.small, args.large = "128M", 64, "64M", "128M"
    cmd = args.virtbench.split() if args.virtbench else [sys.executable, "-m", "virtbench"]
    with tempfile.TemporaryDirectory(prefix="density-bench-") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        print(f"# {args.what} on {os.cpu_count()} CPUs, load {load()}, {time.strftime('%Y-%m-%d %H:%M:%S')}")
        {"search": cmd_search, "predict": cmd_predict, "selftest": cmd_selftest}[args.what](args, cmd, work)


if __name__ == "__main__":
    main()
