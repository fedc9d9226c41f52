"""Every experiment kind, and a campaign over several hosts, can be scheduled from the web
app's form: the kind's own settings are fields of the form, checked by the same pydantic
config as a file, and a refused value is one line naming the field."""
from __future__ import annotations

from typing import ClassVar

import pytest
from pydantic import BaseModel, ConfigDict, Field

from virtbench.experiments.base import Experiment, ExperimentContext
from virtbench.experiments.registry import EXPERIMENTS
from virtbench.platforms.base import Paths
from virtbench.report import sections
from virtbench.runner import execute
from virtbench.store.db import now
from virtbench.store.models import Run

from .helpers import login, make_client


def _queue(client, store, **fields):
    csrf = login(client)
    form = {"csrf": csrf, "mode": "form", "name": "kind-web", "repetitions": "1", "warmups": "0",
            "profile": "auto", **fields}
    r = client.post("/schedule", data=form, follow_redirects=False)
    if r.status_code != 303:
        return r, None
    with store.session() as s:
        return r, s.get(Run, r.headers["location"].rsplit("/", 1)[1])


def test_the_form_lists_every_kind_with_its_settings(client):
    page = client.get("/schedule").text
    for kind in ("benchmarks", "density", "migration", "line"):
        assert f'<option value="{kind}"' in page
    for name in ("x.line.lengths", "x.density.workload", "x.density.counts", "x.migration.to", 'name="hosts"'):
        assert f'name="{name}"' in page or name in page, name
    assert "PydanticUndefined" not in page


def test_line_from_the_form(client, filled):
    r, run = _queue(client, filled, experiment="line", **{
        "p0.use": "on", "p0.name": "netns", "p0.type": "netns", "p1.use": "on", "p1.name": "lxc", "p1.type": "lxc",
        "x.line.lengths": "1, 4", "x.line.pinning": "none, node", "x.line.latency_seconds": "2",
        "x.line.search": "{method: ndr-pdr, trial_seconds: 0.5, max_trials: 6}",
        "x.density.workload": "ignored: another kind's field"})
    assert run is not None, r.text
    assert run.status == "queued" and run.campaign["experiment"] == "line"
    assert run.campaign["baseline"] == "netns"  # the kind's default: the form's baseline was left empty
    section = run.campaign[run.campaign["experiment"]]
    assert section["lengths"] == [1, 4] and section["pinning"] == ["none", "node"]
    assert section["search"]["trial_seconds"] == 0.5 and section["search"]["max_trials"] == 6
    assert "line:" in run.campaign_source and "density" not in run.campaign_source


def test_density_and_migration_from_the_form(filled, tmp_path):
    """A migration destination is a directory of the server's host: it must be one that
    `serve --allow-path` allowed (tests/web/test_host_paths.py has the refusals)."""
    client = make_client(filled, allowed_paths=(tmp_path,))
    r, run = _queue(client, filled, experiment="density", baseline="runc", **{
        "p0.use": "on", "p0.name": "runc", "p0.type": "runc",
        "x.density.workload": "{name: openssl, seconds: 2}", "x.density.counts": "{until: failure, max: 8}"})
    assert run is not None, r.text
    assert run.campaign[run.campaign["experiment"]]["workload"]["name"] == "openssl"
    assert run.campaign[run.campaign["experiment"]]["counts"]["max"] == 8
    r, run = _queue(client, filled, experiment="migration", **{
        "p0.use": "on", "p0.name": "native", "p0.type": "native", "p1.use": "on", "p1.name": "runc",
        "p1.type": "runc", "x.migration.counts": "1, 2", "x.migration.to": f"{{path: {tmp_path}, name: other-dir}}"})
    assert run is not None, r.text
    assert run.campaign["experiment"] == "migration" and run.campaign[run.campaign["experiment"]]["counts"] == [1, 2]


def test_a_kinds_bad_value_is_one_line_naming_the_field(client, filled):
    r, run = _queue(client, filled, experiment="line", **{
        "p0.use": "on", "p0.name": "netns", "p0.type": "netns", "x.line.payload": "9000"})
    assert run is None and r.status_code == 400
    assert "campaign form: line" in r.text and "payload" in r.text
    assert 'value="9000"' in r.text  # what was typed is shown again
    r, run = _queue(client, filled, experiment="density", **{
        "p0.use": "on", "p0.name": "runc", "p0.type": "runc", "x.density.workload": "{name: openssl, a: *x}"})
    assert run is None and r.status_code == 400 and "aliases" in r.text


def test_hosts_from_the_form(client, filled):
    r, run = _queue(client, filled, hosts="[local, {name: nsb, address: 10.9.0.2}]", **{
        "p0.use": "on", "p0.name": "native", "p0.type": "native",
        "b0.use": "on", "b0.name": "sysbench-cpu", "b0.param.time": "1"})
    assert run is not None, r.text
    assert [h["name"] for h in run.campaign["hosts"]] == ["local", "nsb"]
    assert run.campaign["hosts"][1]["address"] == "10.9.0.2"
    r, run = _queue(client, filled, hosts="local, local", **{
        "p0.use": "on", "p0.name": "native", "p0.type": "native",
        "b0.use": "on", "b0.name": "sysbench-cpu", "b0.param.time": "1"})
    assert run is None and r.status_code == 400 and "campaign form: hosts" in r.text


# -- a kind scheduled, run by the queue's path and shown: a small kind registered as a plugin would be
class DotsSection(BaseModel):
    model_config = ConfigDict(extra="forbid")
    points: list[int] = Field([1], min_length=1, description="points to record")


class Dots(Experiment):
    name: ClassVar[str] = "dots"
    description: ClassVar[str] = "test kind"
    Section = DotsSection
    node_types: ClassVar[tuple[str, ...]] = ("thing",)
    default_baseline: ClassVar[str] = "thing"

    def run(self, ctx: ExperimentContext) -> None:
        for p in self.campaign.platforms:
            for n in self.section.points:
                ctx.sink.record(run_id=ctx.run_id, round=0, warmup=False, platform=p.name, benchmark=f"dots[n={n}]",
                                 status="ok", started_at=now(), finished_at=now(), duration_s=0.0,
                                 samples=[{"metric": "rate", "value": float(n), "unit": "pkt/s",
                                           "higher_is_better": True, "category": "network"}])


def dots_section(store, run):
    rows = [[s.platform, s.value] for s in store.samples(run.id)]
    return sections.ReportSection(key="dots", title="Dots by count", data=rows,
                                  tables=[sections.SectionTable("points", ["platform", "n"], rows)])


@pytest.fixture
def dots_kind():
    EXPERIMENTS.register("dots", Dots)
    sections.SECTIONS.register("dots", dots_section)
    yield
    EXPERIMENTS._load().pop("dots")
    sections.SECTIONS._load().pop("dots")


def test_a_scheduled_kind_runs_from_the_queue_and_its_page_shows_its_section(client, filled, dots_kind, tmp_path):
    assert 'name="x.dots.points"' in client.get("/schedule").text
    r, run = _queue(client, filled, experiment="dots", **{
        "p0.use": "on", "p0.name": "thing", "p0.type": "thing", "x.dots.points": "3, 7"})
    assert run is not None, r.text
    out = execute.run_queued(filled, run.id, Paths(state=tmp_path / "s", runtime=tmp_path / "r"))
    assert out.failed == 0
    progress = client.get(f"/api/runs/{run.id}/progress").json()
    assert progress["status"] == "finished"
    page = client.get(f"/runs/{run.id}").text
    assert "Dots by count" in page and 'id="dots"' in page
