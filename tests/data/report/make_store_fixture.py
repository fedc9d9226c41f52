"""Write the stored-run fixture: a small SQLite store made by virtbench before metric
declarations were stored with the run (schema 0003), and its report as that code printed it.

    .venv/bin/python tests/data/report/make_store_fixture.py

Run once, at commit 2005de4 (main before the report model); the files are kept as they were
made, so tests/unit/test_stored_fixture.py checks that today's code reports that old run with
the same numbers. Re-running it with newer code would defeat the purpose.
"""
from __future__ import annotations

import json
from pathlib import Path

from virtbench.analysis import synthetic
from virtbench.registry import BENCHMARKS
from virtbench.report import builder
from virtbench.store.db import Store

HERE = Path(__file__).parent
DB = HERE / "store-0003.sqlite"
JSON_OUT = HERE / "store-0003-report.json"


def main() -> None:
    DB.unlink(missing_ok=True)
    store = Store(f"sqlite:///{DB}")
    plats = synthetic.default_platforms()[:4]
    openssl = BENCHMARKS.get("openssl")
    metrics = openssl(openssl.Params()).metrics()
    # A real plugin's benchmark whose every execution failed on qemu: only its declared metrics
    # (then read from today's plugin) give qemu a row with n=0 and the failure count.
    real = synthetic.SimBenchmark("openssl", "openssl", {}, tuple(
        synthetic.SimMetric(m.name, m.unit, m.higher_is_better, m.category, 1e6, 0.02) for m in metrics))
    benches = [*synthetic.default_benchmarks()[:5], real]
    synthetic.fill(store, "fixture-0003", repetitions=3, warmups=1, platforms=plats, benchmarks=benches,
                   fail={("qemu", "openssl"): range(0, 4), ("docker", "sim-fio"): (2,)})
    run, rows, failures = builder.build(store, "fixture-0003")
    doc = builder.to_json(run, rows, failures)
    JSON_OUT.write_text(json.dumps(doc, indent=1, sort_keys=True, default=str) + "\n", encoding="utf-8")
    store.engine.dispose()


if __name__ == "__main__":
    main()
