"""Golden reports: stored runs of every experiment kind and their reports as text, JSON (the CLI's and the web API's) and HTML.

The stores were written once, by main at commit f2074be (before issue #40 made the plan the
currency of a run), and are kept as they were made; the renderings in this directory are what
the code printed for them. tests/unit/test_report_golden.py renders the same runs with today's
code and asserts the very same bytes. A change that alters a report on purpose (issue #42's
wording) regenerates the renderings, and only them, with one command:

    .venv/bin/python tests/data/report/golden/make.py

and the diff of the rendered files is the change to review. `make.py stores` rewrites the stores
themselves, which defeats their purpose (they stand for runs stored by older code): never needed.

Normalized, because it genuinely varies between two renderings: only the HTML's "generated
<date>" stamp (the time the page was made). The runs:
- fixture-0003: the run stored before metric declarations were stored (schema 0003, ../store-0003.sqlite);
- bench: the benchmarks kind, with an adaptive log, the noise check and platforms left out;
- hosts: the benchmarks kind on two hosts (`hosts:`), one report with the hosts side by side;
- density, migration: their kinds' executions and stop records as those kinds store them;
- line: a real line run (../../line/run.sqlite, recorded on this machine).
"""
from __future__ import annotations

import gzip
import json
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
DATA = HERE.parent.parent
STORES = {"golden": HERE / "runs.sqlite", "old": DATA / "report" / "store-0003.sqlite",
          "line": DATA / "line" / "run.sqlite"}
RUNS = {"fixture-0003": "old", "bench": "golden", "hosts": "golden", "density": "golden", "migration": "golden",
        "line": "golden-line"}
GENERATED = re.compile(r"generated \d{4}-\d\d-\d\d \d\d:\d\d UTC")


def normalize(name: str, text: str) -> str:
    """What varies between two renderings of one stored run: the HTML's generation time."""
    return GENERATED.sub("generated <time>", text) if name.endswith(".html") else text


def _copies(tmp: Path) -> dict[str, str]:
    """URL per store: a copy (opening a store migrates it, and a report is cached in it)."""
    urls = {}
    for name, src in STORES.items():
        shutil.copy(src, tmp / src.name)
        urls[name] = f"sqlite:///{tmp / src.name}"
    return urls


def _run_id(store_url: str, ref: str) -> str:
    if ref != "line":
        return ref
    from virtbench.store.db import Store

    (run,) = Store(store_url).runs()
    return run.id


SVG = re.compile(r"<svg\b.*?</svg>\s*", re.S)
MASK = "<svg>a figure</svg>"


def without_figures(html: str) -> str:
    """The page with every inline SVG element masked: what the report's own code writes, without
    matplotlib's drawing of each figure (seconds per figure; the fast check compares the rest)."""
    return SVG.sub(MASK, html)


def _web(url: str):  # noqa: ANN202 - a TestClient, imported only here
    from fastapi.testclient import TestClient

    from virtbench.store.db import Store
    from virtbench.web.app import create_app
    from virtbench.web.settings import Settings

    return TestClient(create_app(Settings(db_url=url, token="t" * 24), Store(url)), base_url="http://testserver")


@contextmanager
def _restored(console: Any, width: int) -> Iterator[None]:
    """The CLI's console gets its width back (other tests in this process read it)."""
    try:
        yield
    finally:
        console.width = width


def render_all(*, figures: bool = True, runs: tuple[str, ...] = tuple(RUNS)) -> dict[str, str]:
    """File name -> normalized rendering of the golden runs in every format, by today's code:
    the terminal's text, `report --json`, the web API's report and `report --html`.
    figures=False: the HTML's figures masked (without_figures), not drawn."""
    from unittest import mock

    from click.testing import CliRunner

    from virtbench.cli import cli
    from virtbench.commands import shared

    width, shared.console.width = shared.console.width, shared.PIPE_WIDTH  # a pipe's, whatever runs this
    out: dict[str, str] = {}
    with _restored(shared.console, width), tempfile.TemporaryDirectory() as d, \
            mock.patch("virtbench.report.html.svg_figure", lambda *_a: MASK) if not figures else nullcontext():
        tmp = Path(d)
        urls = _copies(tmp)
        for ref in runs:
            store = RUNS[ref]
            url = urls["line" if store == "golden-line" else store]
            run_id = _run_id(url, ref)
            runner = CliRunner()
            for args, fmt in (([], "txt"), (["--json"], "json")):
                res = runner.invoke(cli, ["report", run_id, *args, "--db", url], env={"COLUMNS": "100"})
                assert res.exit_code == 0, (ref, fmt, res.output, res.exception)
                out[f"{ref}.{fmt}"] = res.output
            api = _web(url).get(f"/api/runs/{run_id}/report")
            assert api.status_code == 200, (ref, api.text)
            out[f"{ref}.api.json"] = json.dumps(api.json(), indent=1, sort_keys=True) + "\n"
            html = tmp / f"{ref}.html"
            res = runner.invoke(cli, ["report", run_id, "--html", str(html), "--db", url])
            assert res.exit_code == 0, (ref, "html", res.output, res.exception)
            out[f"{ref}.html"] = html.read_text(encoding="utf-8")
    return {name: normalize(name, text) for name, text in out.items()}


def path_of(name: str) -> Path:
    """Where a rendering is kept: the HTML pages gzipped (their inline SVG figures are megabytes)."""
    return HERE / (f"{name}.gz" if name.endswith(".html") else name)


def read(name: str) -> str:
    path = path_of(name)
    data = path.read_bytes()
    return (gzip.decompress(data) if path.suffix == ".gz" else data).decode("utf-8")


def write_renderings(out: dict[str, str] | None = None) -> None:
    for name, text in (out or render_all()).items():
        data = text.encode("utf-8")
        path_of(name).write_bytes(gzip.compress(data, 9, mtime=0) if name.endswith(".html") else data)


# -- the stores (written once, at f2074be) ----------------------------------------------------------

def _record(store, run_id, platform, key, rnd, values, *, unit="s", hib=False, category="migration",
            status="ok", stdout="", error="", per_instance=None, t=None):
    from datetime import timedelta

    samples = [{"metric": m, "value": v, "unit": unit, "higher_is_better": hib, "category": category}
               for m, v in values.items()]
    samples += [{"metric": m, "value": v, "unit": unit, "higher_is_better": hib, "category": category,
                 "instance": i} for m, vs in (per_instance or {}).items() for i, v in enumerate(vs, 1)]
    store.record(run_id=run_id, round=rnd, warmup=False, platform=platform, benchmark=key, status=status,
                 started_at=t, finished_at=t + timedelta(seconds=1), duration_s=1.0, error=error, stdout=stdout,
                 samples=samples)


def _kind_run(store, run_id, kind, platforms, extra=None, provenance=None):
    from virtbench.analysis import synthetic

    campaign = {"name": kind, "experiment": kind, "baseline": platforms[0], "repetitions": 2, "warmups": 0,
                "platforms": [{"name": p, "type": "lxc"} for p in platforms], **(extra or {})}
    store.create_run(run_id=run_id, name=kind, campaign=campaign, source="", seed=1, status="running",
                     host_id=None, host_facts=synthetic.host_facts("kind-host"), image={},
                     provenance={"virtbench": "golden", "experiment": kind, **(provenance or {})}, benchmarks=[],
                     platforms=[{"name": p, "type": "lxc", "kind": "container", "label": p, "config": {}}
                                for p in platforms])


def _bench(store) -> None:
    from virtbench.analysis import synthetic

    plats = synthetic.default_platforms()
    synthetic.fill(store, "bench", repetitions=4, warmups=1, platforms=plats, seed=3, drift={"runc": 0.03},
                   fail={("qemu", "sim-fio"): [2]})
    run = store.run("bench")
    campaign = {**run.campaign, "adaptive": {"target": 0.02, "max_repetitions": 6, "max_minutes": 10.0,
                                             "noise_check": 2, "until": "decided"}}
    adaptive = [{"round": 5, "platforms": ["docker", "native"], "reasons": {"docker": "sim-fio read: undecided"},
                 "cells": {"docker sim-fio read": "ratio 0.93 [0.88..1.01], needs about 7 rounds"},
                 "forecast": "after 4 rounds 30 of 36 comparisons decided; 4 more expected in the extra rounds "
                             "the caps allow (about 2); 2 out of reach",
                 "out_of_reach": {"qemu sim-fio read": "out of reach: noise 9 %"}},
                {"stop": "time cap of 10 min reached"}]
    noise = {"rounds": 6, "round_s": 12.0, "cells": 12, "expected_decided": 9, "spread": 0.9,
             "metrics": {"sim-mbw memcpy": {"values": [9800.0, 9750.0, 9810.0], "pair_noise": 0.004,
                                            "beyond": 0.01, "within": 0.02, "describe": "a 1 % difference"}}}
    left_out = [{"platform": "gvisor", "reason": "runsc is not installed", "fix": "apt-get install runsc"}]
    store.update_run("bench", campaign=campaign,
                     provenance={**run.provenance, "adaptive": adaptive, "noise": noise, "left_out": left_out})


def _hosts(store) -> None:
    from virtbench.analysis import synthetic

    synthetic.fill(store, "hosts", repetitions=3, warmups=1, platforms=synthetic.default_platforms()[:3],
                   benchmarks=synthetic.default_benchmarks()[:3], seed=5, hosts=["local", "board"])


def _density(store) -> None:
    from virtbench.store.db import now

    t = now()
    _kind_run(store, "density", "density", ["lxc"])
    for count in (1, 2, 4):
        _record(store, "density", "lxc", f"density[count={count}]", 0, {"throughput_total": 100.0 * count},
                unit="MB/s", hib=True, category="cpu", per_instance={"throughput": [100.0 - count] * count}, t=t)
    stop = {"platform": "lxc", "label": "lxc", "type": "lxc", "max_count": 4, "stop_reason": "memory",
            "stop_detail": "MemAvailable below the guard", "stop_count": 8, "stop_evidence": {},
            "memory_per_instance_bytes": 5e6, "mem_available_drop_per_instance_bytes": 6e6, "confined": False,
            "host_memory": None, "mem_total": 2e10, "guard_thresholds": {}, "guard_series": [], "min_overlap": 0.8,
            "probes": [], "duration_s": 10.0, "image": {"name": "img", "release": "bookworm"}}
    _record(store, "density", "lxc", "density-stop", 0, {}, stdout=json.dumps(stop), error="memory: guard", t=t)
    store.set_status("density", "finished")


def _migration(store) -> None:
    from virtbench.store.db import now

    t = now()
    _kind_run(store, "migration", "migration", ["lxc"], {"migration": {"to": {"path": "/mnt/x"}, "counts": [1, 2]}},
              {"migration": {"storage": {"x": {"path": "/mnt/x", "filesystem": "xfs", "kind": "xfs on loop0",
                                               "write_MBps": 400.0, "read_MBps": 900.0}}}})
    for rnd, scale in ((0, 1.0), (1, 1.2)):
        for n in (1, 2):
            _record(store, "migration", "lxc", f"migration[count={n},to=x]", rnd,
                    {"stop_s": 0.1 * n * scale, "transfer_s": 0.5 * n * scale, "start_s": 0.2 * scale,
                     "total_s": (0.3 + 0.5 * n) * scale, "downtime_s": (0.3 + 0.5 * n) * scale}, t=t)
    store.set_status("migration", "finished")


def write_stores() -> None:
    from virtbench.store.db import Store

    STORES["golden"].unlink(missing_ok=True)
    store = Store(f"sqlite:///{STORES['golden']}")
    _bench(store)
    _hosts(store)
    _density(store)
    _migration(store)
    store.engine.dispose()


if __name__ == "__main__":
    if sys.argv[1:] == ["stores"]:
        write_stores()
    write_renderings()
