"""Reports are computed once: stored per finished run, reused after a restart, recomputed
when the run or the analysis code changes; comparisons honour the chosen baseline."""
from __future__ import annotations

from sqlalchemy import select

from virtbench.report import cache as report_cache
from virtbench.store.models import ReportCache as ReportCacheRow
from virtbench.web import cache as results

from .helpers import make_client


def cached(store) -> dict[str, str]:
    with store.session() as s:
        return dict(s.execute(select(ReportCacheRow.run_id, ReportCacheRow.version)).all())


def test_report_is_stored_reused_and_invalidated(filled, monkeypatch):
    client = make_client(filled)
    first = client.get("/api/runs/r1/report").json()
    assert list(cached(filled)) == ["r1"]
    calls = []
    real_build = results.builder.build
    monkeypatch.setattr(results.builder, "build", lambda *a, **k: calls.append(a) or real_build(*a, **k))
    again = make_client(filled).get("/api/runs/r1/report").json()  # a new app: memory cache empty
    assert calls == [] and again["results"] == first["results"]
    monkeypatch.setattr(report_cache, "fingerprint", lambda: "other-analysis-code")
    make_client(filled).get("/api/runs/r1/report")
    assert len(calls) == 1 and cached(filled)["r1"].endswith("other-analysis-code")
    filled.update_run("r1", status="interrupted")  # e.g. resumed and stopped again: other data
    make_client(filled).get("/api/runs/r1/report")
    assert len(calls) == 2 and cached(filled)["r1"].startswith("interrupted|")
    assert client.delete("/api/runs/r1", headers={"Authorization": "Bearer test-token-0123456789abcdef"}).json()
    assert "r1" not in cached(filled)  # ON DELETE CASCADE


def test_running_runs_are_not_stored(filled):
    filled.update_run("r2", status="running")
    make_client(filled).get("/runs/r2")
    assert "r2" not in cached(filled)


def test_precompute_stores_what_the_pages_read(filled):
    results.precompute(filled, "r2")
    assert cached(filled)["r2"].startswith("finished|")


def test_compare_with_another_baseline(client):
    doc = client.get("/api/compare", params={"run": "r1", "baseline": "docker"}).json()
    rel = {(r["metric"], r["platform"]): r["relative"] for r in doc["results"] if r["benchmark"] == "sim-hpcc"}
    assert rel[("HPL_Gflops", "docker")] == 1.0 and rel[("HPL_Gflops", "native")] != 1.0
    assert doc["baseline"] == "docker"


def test_warmer_stores_reports_of_runs_that_have_none(filled):
    cache = results.ReportCache()
    warmer = results.Warmer(filled, cache, batch=1)
    assert warmer.once() == ["r2"]  # newest first, one per round here
    assert warmer.once() == ["r1"]
    assert warmer.once() == [] and set(cached(filled)) == {"r1", "r2"}


def test_the_app_starts_the_warmer_while_serving(filled):
    from fastapi.testclient import TestClient

    from virtbench.web.app import create_app
    from virtbench.web.settings import Settings

    with TestClient(create_app(Settings(db_url=filled.url, token="t" * 20), filled)) as client:
        assert client.get("/healthz").text == "ok"
        import time
        deadline = time.monotonic() + 60
        while len(cached(filled)) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
    assert set(cached(filled)) == {"r1", "r2"}


def test_serving_freezes_the_start_up_heap_out_of_the_collectors_sight(filled):
    """A full garbage collection walked the ~130,000 objects of start-up (modules, classes,
    templates) inside whichever request triggered it: 70-110 ms. The app freezes them when it
    starts serving (app.settle_heap), so a collection walks only what requests made since."""
    import gc

    from fastapi.testclient import TestClient

    from virtbench.web.app import create_app
    from virtbench.web.settings import Settings

    gc.unfreeze()
    try:
        with TestClient(create_app(Settings(db_url=filled.url, token="t" * 20), filled)) as client:
            assert client.get("/healthz").text == "ok"
            assert gc.get_freeze_count() > 50_000
            assert len(gc.get_objects()) < gc.get_freeze_count() / 2
    finally:
        gc.unfreeze()
