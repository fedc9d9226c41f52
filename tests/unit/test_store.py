"""The results store: migrations, atomic records, no duplicates, lookups."""
from __future__ import annotations

import pytest
from sqlalchemy.exc import IntegrityError

from virtbench.errors import InputError
from virtbench.store.db import Store, now


@pytest.fixture
def store(tmp_path):
    return Store(f"sqlite:///{tmp_path / 'r.db'}")


def make_run(store, run_id="r1"):
    store.create_run(run_id=run_id, name="t", campaign={"baseline": "native"}, source="", seed=1,
                     host_id=store.upsert_host({"hostname": "h"}), host_facts={}, image={}, provenance={},
                     platforms=[{"name": "native", "type": "native", "label": "native", "config": {}}],
                     benchmarks=[{"key": "fio", "name": "fio", "params": {}}])


def record(store, run_id="r1", round=0, value=1.0, status="ok"):
    store.record(run_id=run_id, round=round, warmup=False, platform="native", benchmark="fio", status=status,
                 started_at=now(), finished_at=now(), duration_s=0.1, stdout="raw",
                 samples=[{"metric": "m", "value": value, "unit": "s", "higher_is_better": False,
                           "category": "storage"}] if status == "ok" else [])


def test_schema_is_at_head(store):
    current, head = store.schema_version()
    assert current == head and head


def test_record_and_read_back(store):
    make_run(store)
    record(store, round=0, value=2.5)
    record(store, round=1, status="failed")
    assert store.done_units("r1") == {(0, "native", "fio"), (1, "native", "fio")}
    [s] = store.samples("r1")
    assert (s.value, s.unit, s.higher_is_better) == (2.5, "s", False)
    assert [e.status for e in store.executions("r1")] == ["ok", "failed"]
    assert store.executions("r1")[0].stdout == "raw"


def test_duplicate_execution_is_rejected_and_nothing_half_written(store):
    make_run(store)
    record(store, round=0)
    with pytest.raises(IntegrityError):
        record(store, round=0, value=9.0)
    assert [s.value for s in store.samples("r1")] == [1.0]
    assert len(store.executions("r1")) == 1


def test_run_lookup(store):
    make_run(store, "20260101-000000-abcd")
    record(store, "20260101-000000-abcd")
    store.update_run("20260101-000000-abcd", status="finished")
    make_run(store, "20260102-000000-newer")  # newer, but nothing measured: not 'latest'
    assert store.run("latest").id == "20260101-000000-abcd"
    assert store.run("20260101").id == "20260101-000000-abcd"
    make_run(store, "20260101-000000-abcd2")  # an exact id wins over the longer id it is a prefix of
    assert store.run("20260101-000000-abcd").id == "20260101-000000-abcd"
    with pytest.raises(InputError, match="no run"):
        store.run("nope")


def test_bad_url_is_a_clear_error():
    with pytest.raises(InputError, match="database URL"):
        Store("notadb://x")


def test_attachments_are_stored_per_execution_and_read_back_by_kind(store):
    make_run(store)
    ex_id = store.record(run_id="r1", round=0, warmup=False, platform="native", benchmark="fio", status="ok",
                         started_at=now(), finished_at=now(), duration_s=0.1,
                         attachments=[{"name": "probe:perf", "kind": "probe:perf", "data": {"cycles": None}}])
    store.add_attachment(ex_id, "hdr:latency", "hdr", b"HISTFAAA", media_type="application/x-hdrhistogram")
    store.add_attachment(ex_id, "probe:energy", "probe:energy", {"reason": "no source"}, status="failed",
                         error="meter exited 1")
    probes = store.attachments("r1", kind="probe:")
    assert [a.name for a in probes] == ["probe:perf", "probe:energy"]
    assert probes[0].json() == {"cycles": None} and probes[1].status == "failed"
    [hdr] = store.attachments("r1", kind="hdr")
    assert hdr.data == b"HISTFAAA" and hdr.execution_id == ex_id
    with pytest.raises(ValueError):
        hdr.json()
    with pytest.raises(IntegrityError):  # one attachment of a name per execution
        store.add_attachment(ex_id, "hdr:latency", "hdr", b"x", media_type="application/octet-stream")
    with pytest.raises(InputError):
        store.add_attachment(999, "x", "hdr", b"x", media_type="application/octet-stream")


def test_head_revision_read_from_the_scripts_is_alembics(tmp_path):
    """Store.migrate skips Alembic when the schema is at head_revision(): it must be Alembic's head."""
    from virtbench.store import db

    s = Store(f"sqlite:///{tmp_path / 'h.db'}")
    current, head = s.schema_version()
    assert db.head_revision() == head == current


def test_report_keys_of_several_runs_in_one_read_equal_each_runs_key(store):
    """A pooled page reads the keys of all its runs at once (browse.report_keys): each must be the
    run's own report_key (status, finish time, executions counted per run, failed ones too)."""
    from virtbench.store import browse

    make_run(store, "r1")
    make_run(store, "r2")
    make_run(store, "r3")
    for rnd in range(3):
        record(store, "r1", round=rnd)
    record(store, "r2", round=0, status="failed")
    keys = browse.report_keys(store, ["r1", "r2", "r3", "missing"])
    assert set(keys) == {"r1", "r2", "r3"}
    assert [keys[r][2] for r in ("r1", "r2", "r3")] == [3, 1, 0]
    assert all(keys[r] == browse.report_key(store, r) for r in keys)
    with pytest.raises(browse.NotFound):
        browse.report_key(store, "missing")
