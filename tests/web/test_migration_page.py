"""The migration experiment's report part from stored samples: table, storage, figure, JSON,
and the web app's run page showing it (both databases)."""
from __future__ import annotations

import pytest

from virtbench.config import parse_campaign
from virtbench.experiments.migration import report
from virtbench.report import sections
from virtbench.store.db import now

from .helpers import make_client


def _record(store, run_id, platform, key, rnd, values, status="ok"):
    units = {"bytes_moved": "B", "throughput_MBps": "MB/s"}
    store.record(run_id=run_id, round=rnd, warmup=False, platform=platform, benchmark=key, status=status,
                 started_at=now(), finished_at=now(), duration_s=1.0, error="boom" if status != "ok" else "",
                 samples=[{"metric": m, "value": v, "unit": units.get(m, "s"), "higher_is_better": m == "throughput_MBps",
                           "category": "migration"} for m, v in values.items()])


def fill(store):
    c = parse_campaign({"name": "m", "experiment": "migration", "platforms": ["lxc"],
                        "migration": {"to": {"path": "/mnt/x"}, "counts": [1, 2]}})
    store.create_run(run_id="r1", name="m", campaign=c.model_dump(mode="json"), source="", seed=1, status="finished",
                     host_id=None, host_facts={}, image={}, platforms=[], benchmarks=[],
                     provenance={"migration": {"storage": {
                         "source": {"path": "/var", "filesystem": "ext4", "device": "/dev/vda", "rotational": True,
                                    "kind": "ext4 on vda (rot)", "write_MBps": 500.0, "read_MBps": 600.0},
                         "x": {"path": "/mnt/x", "filesystem": "xfs", "device": "/dev/loop0", "rotational": True,
                               "kind": "xfs on loop0 (rot)", "backing": "/tmp/d.img", "backing_device": "/dev/vda",
                               "write_MBps": 400.0, "read_MBps": 900.0}}}})
    for rnd, scale in ((0, 1.0), (1, 1.2)):
        for n in (1, 2):
            _record(store, "r1", "lxc", f"migration[count={n}]".replace("]", ",to=x]"), rnd,
                    {"stop_s": 0.1 * n * scale, "transfer_s": 0.5 * n * scale, "start_s": 0.2 * scale,
                     "total_s": (0.3 + 0.5 * n) * scale, "downtime_s": (0.3 + 0.5 * n) * scale,
                     "bytes_moved": 1e8 * n, "throughput_MBps": 350.0})
    _record(store, "r1", "lxc", "migration[count=2,to=x]", 2, {}, status="failed")


def test_report_section_tables_figure_and_json(store):
    fill(store)
    sec = report.build(store, store.run("r1"))
    assert sec is not None and sec.key == "migration"
    rows = sec.tables[0].rows
    assert [r[1] for r in rows] == [1, 2] and sec.tables[0].title.startswith("offline to x:")
    assert rows[1][sec.tables[0].columns.index("MB moved")] == "200±0"
    fig = sec.figures[0]
    assert fig.series[0].name == "lxc: xfs on loop0 (rot)" and fig.series[0].x == [1, 2]
    assert fig.series[0].y == pytest.approx([0.8 * 1.1, 1.3 * 1.1])
    point = sec.data["points"][1]["metrics"]["total_s"]
    assert point["n"] == 2 and point["ci95"][0] < point["mean"] < point["ci95"][1]
    assert sec.data["failures"][0]["error"] == "boom"
    assert any("storage bounds" in n for n in sec.notes)  # 350 MB/s > half of the slower end's 400
    doc = sections.add_to_json({}, sections.sections(store, store.run("r1")))
    assert doc["migration"]["mode"] == "offline" and doc["migration"]["storage"]["x"]["filesystem"] == "xfs"


def test_run_page_shows_the_migration_section(store):
    fill(store)
    page = make_client(store).get("/runs/r1")
    assert page.status_code == 200
    text = page.text
    for words in ("Migration (offline)", "offline to x: seconds", "xfs on loop0 (rot)", "storage bounds", "<svg",
                  "/tmp/d.img"):
        assert words in text, words
