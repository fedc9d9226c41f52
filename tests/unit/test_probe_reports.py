"""Each probe's report part is its own module, found through `virtbench.probe_reports` by the
probe's name: a probe from another package adds its share of the `probes` section without
editing report/."""
from __future__ import annotations

import pytest

from virtbench.registry import PROBES
from virtbench.report import probes as report_probes
from virtbench.report.probes import PARTS, ProbePart, ProbeRecords
from virtbench.report.sections import SectionTable, add_to_json
from virtbench.store.db import Store, now


def test_every_built_in_probe_has_its_part_under_its_name():
    assert PARTS.names() == PROBES.names() == ["energy", "perf", "pressure"]
    for name in PARTS.names():
        assert PARTS.get(name).__module__ == f"virtbench.report.probes.{name}"


@pytest.fixture
def toy_part():
    """A throwaway probe's part, registered like a plugin's entry point."""
    seen: list[ProbeRecords] = []

    def part(rec: ProbeRecords) -> ProbePart:
        seen.append(rec)
        rounds = [ex.round for ex, _ in rec.items]
        return ProbePart(data={"readings": [att.json()["reading"] for _, att in rec.items]},
                         tables=[SectionTable("toy readings", ["round"], [[r] for r in rounds])],
                         notes=[f"toy: {len(rounds)} readings"],
                         row_fields={"toy": {"openssl|native": "read", "*": None}})

    PARTS.register("toy", part)
    yield seen
    PARTS._load().pop("toy")


def _store(tmp_path, probes):
    store = Store(f"sqlite:///{tmp_path / 'r.db'}")
    store.create_run(run_id="r", name="t", campaign={"baseline": "native", "probes": probes}, source="", seed=1,
                     host_id=None, host_facts={}, image={}, provenance={},
                     platforms=[{"name": "native", "type": "native", "label": "native", "config": {}}],
                     benchmarks=[{"key": "openssl", "name": "openssl", "params": {}}])
    for rnd in (0, 1):
        store.record(run_id="r", round=rnd, warmup=False, platform="native", benchmark="openssl", status="ok",
                     started_at=now(), finished_at=now(), duration_s=1.0,
                     attachments=[{"name": "probe:toy", "kind": "probe:toy", "status": "ok", "error": "",
                                   "data": {"reading": 10 + rnd}}])
    return store


def test_a_probe_from_elsewhere_adds_its_part(tmp_path, toy_part):
    """Its records reach it, its value sits under probes.toy, its table and note are the section's,
    its row field lands on every result row of the JSON document."""
    store = _store(tmp_path, [{"name": "toy"}, "perf"])
    section = report_probes.build(store, store.run("r"))
    assert section is not None and [len(r.items) for r in toy_part] == [2]
    assert section.data["toy"] == {"readings": [10, 11]}
    assert list(section.data) == ["perf", "toy"]  # the parts in the order of the probes' names
    assert [t.title for t in section.tables][-1] == "toy readings" and "toy: 2 readings" in section.notes
    doc = add_to_json({"results": [{"benchmark": "openssl", "platform": "native"},
                                   {"benchmark": "lifecycle", "platform": "native"}]}, [section])
    assert [r["toy"] for r in doc["results"]] == ["read", None]
    assert doc["probes"]["toy"] == {"readings": [10, 11]}


def test_a_probe_without_a_part_is_left_out(tmp_path):
    store = _store(tmp_path, ["toy"])
    section = report_probes.build(store, store.run("r"))
    assert section is not None and section.data == {} and not section.tables and not section.notes
