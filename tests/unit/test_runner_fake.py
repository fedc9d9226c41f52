"""The runner without root: a fake platform and an injected executor (#10 items 4 and 6).

The platform records its lifecycle and runs nothing; its executor answers the benchmark's
command with output recorded from the real tool (tests/data/sysbench), so the real parser,
store and schedule are exercised. The real runtimes stay covered by tests/integration.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest

from virtbench import proc
from virtbench.config import parse_campaign
from virtbench.experiments.base import ExperimentContext
from virtbench.experiments.benchmarks.kind import Benchmarks
from virtbench.experiments.benchmarks.schedule import schedule
from virtbench.experiments.benchmarks.session import build_objects, platform_rows
from virtbench.images.image import Image
from virtbench.platforms.base import Availability, Instance, Paths, Platform
from virtbench.registry import PLATFORMS
from virtbench.runner import execute
from virtbench.store.db import Store

OUTPUT = (Path(__file__).resolve().parent.parent / "data" / "sysbench" / "trixie_sysbench_cpu_time1.txt").read_text()


class FakeExecutor:
    """Implements virtbench.executor.Executor: answers sysbench with a recorded output."""

    def __init__(self, platform: str, events: list[tuple[str, ...]], failing: set[str]) -> None:
        self.platform, self.events, self.failing = platform, events, failing

    def run(self, argv: list[str], *, timeout: float | None = None, check: bool = True,
            input: str | None = None, detached_children: bool = False) -> proc.Result:
        if argv[0] == "sysbench":
            self.events.append(("measure", self.platform))
            if self.platform in self.failing:
                return proc.Result(argv, 1, "", "FATAL: simulated failure", 0.01)
            return proc.Result(argv, 0, OUTPUT, "", 0.01)
        return proc.Result(argv, 0, "", "", 0.0)

    def spawn(self, argv: list[str]) -> proc.Background:
        raise AssertionError("no background process in this campaign")


class Fake(Platform):
    type = "fake"
    kind = "container"
    events: ClassVar[list[tuple[str, ...]]] = []

    @classmethod
    def availability(cls, paths: Paths) -> Availability:
        return Availability(True, "fake")

    def versions(self) -> dict[str, str]:
        return {"fake": "1"}

    def create(self, image: Image, name: str, run_id: str) -> Instance:
        self.events.append(("create", self.name))
        return Instance(name, self.name, run_id)

    def start(self, instance: Instance) -> None:
        self.events.append(("start", self.name))

    def exec_argv(self, instance: Instance, argv: list[str]) -> list[str]:
        return list(argv)

    def stop(self, instance: Instance) -> None:
        self.events.append(("stop", self.name))

    def remove(self, instance: Instance) -> None:
        self.events.append(("remove", self.name))

    @classmethod
    def cleanup(cls, paths: Paths, run_id: str | None = None) -> list[str]:
        return []


@pytest.fixture
def fake_registered() -> Any:
    items = PLATFORMS._load()
    items["fake"] = Fake
    Fake.events = []
    yield Fake.events
    items.pop("fake", None)


def _run(tmp_path: Path, events: list[tuple[str, ...]], *, failing: set[str] = frozenset(), repetitions: int = 3,
         stop_after: int | None = None, store: Store | None = None, run_id: str = "r1") -> tuple[Store, Any]:
    campaign = parse_campaign({"name": "fake", "baseline": "a", "repetitions": repetitions, "warmups": 0,
                               "platforms": [{"name": "a", "type": "fake"}, {"name": "b", "type": "fake"}],
                               "benchmarks": [{"name": "sysbench-cpu", "time": 1}]}, "test")
    paths = Paths(state=tmp_path / "state", runtime=tmp_path / "run")
    session = build_objects(campaign, paths)
    # the executor is injected, never patched on: each platform gets its own fake
    session.platforms = {n: p.bind(FakeExecutor(n, events, set(failing))) for n, p in session.platforms.items()}
    session.image = Image("h", tmp_path, "trixie", "amd64", "quick", ("sysbench",), "ab" * 32)
    if store is None:
        store = Store(f"sqlite:///{tmp_path}/db.sqlite")
        store.create_run(run_id=run_id, name="fake", campaign=campaign.model_dump(mode="json"), source="", seed=7,
                         host_id=None, host_facts={}, image={}, provenance={}, platforms=platform_rows(session),
                         benchmarks=[{"key": b.key, "name": b.name, "params": {}, "tool_version": "1"}
                                     for b in campaign.benchmarks])
    calls = {"n": 0}

    def stop() -> bool:
        calls["n"] += 1
        return stop_after is not None and calls["n"] > stop_after

    outcome = execute.measure(Benchmarks.of(session), ExperimentContext(sink=store, run_id=run_id, seed=7, paths=session.paths,
                                                                      stop_requested=stop))
    return store, (outcome, campaign)


def test_rounds_interleave_platforms_in_the_stored_schedule(tmp_path, fake_registered):
    store, (outcome, campaign) = _run(tmp_path, fake_registered)
    created = [name for event, name in fake_registered if event == "create"]
    assert created == [u.platform for u in schedule(campaign, 7)]
    assert [created[i:i + 2] for i in range(0, 6, 2)] and all(sorted(created[i:i + 2]) == ["a", "b"]
                                                            for i in range(0, 6, 2))
    # each instance lives through create, start, measure, stop, remove before the next one
    assert fake_registered[:5] == [("create", created[0]), ("start", created[0]), ("measure", created[0]),
                                   ("stop", created[0]), ("remove", created[0])]
    assert outcome.failed == 0 and not outcome.interrupted
    values = [s.value for s in store.samples("r1") if s.metric == "events_per_second"]
    assert len(values) == 6 and len(set(values)) == 1  # the recorded output, parsed by the real parser


def test_a_failing_tool_is_a_failed_sample_with_its_output_and_the_run_goes_on(tmp_path, fake_registered):
    store, (outcome, _) = _run(tmp_path, fake_registered, failing={"b"})
    failed = store.executions("r1", status="failed")
    assert outcome.failed == 3 and len(failed) == 3
    assert all(e.platform == "b" and e.exit_code == 1 and "simulated failure" in e.stderr for e in failed)
    assert {s.platform for s in store.samples("r1") if s.benchmark == "sysbench-cpu"} == {"a"}
    assert sum(1 for e, _ in fake_registered if e == "remove") == 6  # every instance removed, failed or not


def test_interrupted_run_resumes_without_losing_or_repeating_a_sample(tmp_path, fake_registered):
    store, (first, _) = _run(tmp_path, fake_registered, stop_after=2)
    assert first.interrupted
    done_before = store.done_units("r1")
    assert 0 < len(done_before) < 12
    fake_registered.clear()
    store, (second, _) = _run(tmp_path, fake_registered, store=store)
    assert not second.interrupted
    # only the units not stored before were run again
    assert sum(1 for e, _ in fake_registered if e == "create") == 6 - len(
        {(r, p) for r, p, _ in done_before if (r, p, "lifecycle") in done_before})
    keys = [(e.round, e.platform, e.benchmark) for e in store.executions("r1")]
    assert len(keys) == len(set(keys)) == 12  # 3 rounds x 2 platforms x (sysbench-cpu + lifecycle)
