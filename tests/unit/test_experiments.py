"""Experiment kinds: the registry, the campaign's `experiment:` key and section, runner dispatch,
cleanup and the report hook, with a small kind registered at run time as a plugin would be."""
from __future__ import annotations

import json
from typing import ClassVar

import pytest
from click.testing import CliRunner
from pydantic import BaseModel, ConfigDict, Field

from virtbench.cli import cli
from virtbench.config import parse_campaign
from virtbench.errors import InputError
from virtbench.experiments.base import Experiment, ExperimentContext
from virtbench.experiments.registry import EXPERIMENTS
from virtbench.platforms.base import Paths
from virtbench.report import sections
from virtbench.runner import execute
from virtbench.store.db import Store, now


class ToySection(BaseModel):
    model_config = ConfigDict(extra="forbid")
    points: list[int] = Field([1, 2], min_length=1)
    fail_at: int | None = None


LEFTOVERS: list[str] = []


class Toy(Experiment):
    name: ClassVar[str] = "toy"
    description: ClassVar[str] = "test kind"
    Section = ToySection
    node_types: ClassVar[tuple[str, ...]] = ("thing",)
    default_baseline: ClassVar[str] = "thing"

    def prepare(self, log) -> None:
        if 99 in self.section.points:
            raise InputError("toy.points: 99 is too many for this host")

    def run(self, ctx: ExperimentContext) -> None:
        LEFTOVERS.append(ctx.run_id)
        for p in self.campaign.platforms:
            for n in self.section.points:
                key = f"toy[n={n}]"
                if (0, p.name, key) in ctx.done():
                    continue
                if n == self.section.fail_at:
                    raise KeyboardInterrupt
                ctx.sink.record(run_id=ctx.run_id, round=0, warmup=False, platform=p.name, benchmark=key,
                                 status="ok", started_at=now(), finished_at=now(), duration_s=0.0,
                                 samples=[{"metric": "rate", "value": float(n), "unit": "pkt/s",
                                           "higher_is_better": True, "category": "network"}])

    @classmethod
    def cleanup(cls, paths: Paths, run_id: str | None = None) -> list[str]:
        gone = [r for r in LEFTOVERS if run_id in (None, r)]
        for r in gone:
            LEFTOVERS.remove(r)
        return [f"toy objects of {r}" for r in gone]


def toy_section(store, run):
    rows = [{"platform": s.platform, "n": s.value} for s in store.samples(run.id)]
    return sections.ReportSection(key="toy", title="Toy", data=rows,
                                  tables=[sections.SectionTable("points", ["platform", "n"],
                                                                [[r["platform"], r["n"]] for r in rows])])


@pytest.fixture(autouse=True)
def toy_kind():
    EXPERIMENTS.register("toy", Toy)
    sections.SECTIONS.register("toy", toy_section)
    yield
    EXPERIMENTS._load().pop("toy")
    sections.SECTIONS._load().pop("toy")


def campaign(**extra):
    return parse_campaign({"name": "t", "experiment": "toy", "platforms": ["thing"], **extra})


def test_benchmarks_is_the_default_kind_and_its_stored_form_is_unchanged():
    c = parse_campaign({"name": "c", "platforms": ["native"], "benchmarks": ["sqlite"]})
    assert c.experiment == "benchmarks" and c.section is None
    dumped = c.model_dump(mode="json")
    assert "experiment" not in dumped and "settings" not in dumped
    assert parse_campaign(dumped).model_dump(mode="json") == dumped
    assert EXPERIMENTS.get("benchmarks").uses_benchmarks


def test_section_is_validated_by_the_kind_and_round_trips():
    c = campaign(toy={"points": [3]})
    assert c.section == ToySection(points=[3]) and c.baseline == "thing"
    dumped = c.model_dump(mode="json")
    assert dumped["toy"] == {"points": [3], "fail_at": None} and dumped["experiment"] == "toy"
    assert parse_campaign(dumped).section == c.section
    assert campaign().section == ToySection()  # an absent section takes the defaults


@pytest.mark.parametrize("extra, words", [
    ({"toy": {"pionts": [1]}}, ["toy.pionts", "did you mean 'points'"]),
    ({"toy": {"points": []}}, ["toy.points"]),
    ({"toy": [1]}, ["toy: give a mapping"]),
    ({"benchmarks": ["sqlite"]}, ["takes no benchmarks"]),
    ({"probes": ["pressure"]}, ["experiment 'toy' does not run probes", "remove `probes:`"]),
    ({"experiment": "tyo"}, ["unknown kind 'tyo'", "did you mean 'toy'"]),
    ({"platforms": ["nope"]}, ["unknown platform type 'nope'", "thing"]),
    ({"platforms": [{"name": "thing", "memory": "1G"}]}, ["takes no options"]),
])
def test_bad_sections_are_one_line_input_errors(extra, words):
    with pytest.raises(InputError) as err:
        campaign(**extra)
    for w in words:
        assert w in str(err.value)


def test_a_section_without_its_kind_is_refused():
    with pytest.raises(InputError, match="experiment is 'benchmarks'"):
        parse_campaign({"name": "c", "platforms": ["native"], "benchmarks": ["sqlite"], "toy": {}})


def test_runner_dispatches_to_the_kind_stores_samples_and_cleans_up(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'r.db'}")
    paths = Paths(state=tmp_path / "s", runtime=tmp_path / "r")
    out = execute.start(store, campaign(toy={"points": [1, 2]}), paths)
    assert (out.failed, out.interrupted) == (0, False)
    run = store.run(out.run_id)
    assert run.status == "finished" and run.provenance["experiment"] == "toy"
    assert sorted((s.benchmark, s.value) for s in store.samples(run.id)) == [("toy[n=1]", 1.0), ("toy[n=2]", 2.0)]
    assert LEFTOVERS == []  # the kind's cleanup ran after the run
    doc = sections.add_to_json({}, sections.sections(store, run))
    assert sorted(r["n"] for r in doc["toy"]) == [1.0, 2.0]


def test_interrupted_kind_resumes_without_repeating_and_cleanup_reaches_kinds(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'r.db'}")
    paths = Paths(state=tmp_path / "s", runtime=tmp_path / "r")
    out = execute.start(store, campaign(toy={"points": [1, 2], "fail_at": 2}), paths)
    assert out.interrupted and store.run(out.run_id).status == "interrupted"
    assert LEFTOVERS == []
    LEFTOVERS.append("stray")
    assert "toy: toy objects of stray" in execute.cleanup(paths)
    # resume: the stored point is skipped; with fail_at still set the run stops again at n=2
    out2 = execute.resume(store, out.run_id, paths)
    assert out2.interrupted and len(store.samples(out.run_id)) == 1


def test_host_check_fails_before_anything_is_recorded(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'r.db'}")
    with pytest.raises(InputError, match="99 is too many"):
        execute.start(store, campaign(toy={"points": [99]}), Paths(state=tmp_path / "s", runtime=tmp_path / "r"))
    assert store.runs() == []


def test_cli_report_json_and_text_carry_the_section(tmp_path):
    db = f"sqlite:///{tmp_path / 'r.db'}"
    out = execute.start(Store(db), campaign(), Paths(state=tmp_path / "s", runtime=tmp_path / "r"))
    r = CliRunner().invoke(cli, ["report", out.run_id, "--json", "--db", db])
    assert r.exit_code == 0, r.output
    assert sorted(x["n"] for x in json.loads(r.output)["toy"]) == [1.0, 2.0]
    r = CliRunner().invoke(cli, ["report", out.run_id, "--db", db])
    assert "Toy: points" in r.output
    assert "None/None" not in r.output and "images named per platform" in r.output  # no image of its own
    html = tmp_path / "r.html"
    r = CliRunner().invoke(cli, ["report", out.run_id, "--html", str(html), "--db", db])
    assert r.exit_code == 0, r.output
    assert 'id="toy"' in html.read_text()
    assert "toy" in CliRunner().invoke(cli, ["list", "experiments"]).output
