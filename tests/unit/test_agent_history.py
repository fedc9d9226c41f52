"""A resumed part's agent gets back what its host measured (wire.history), read through the
agent's StreamStore as the kind and the runner's lifecycle read a store."""
from __future__ import annotations

import io
from types import SimpleNamespace

from virtbench.experiments.base import Experiment, ExperimentContext
from virtbench.platforms.base import Paths
from virtbench.runner import execute
from virtbench.runner.agent import Emitter, StreamStore
from virtbench.runner.wire import history


def _execution(id_: int, benchmark: str, status: str, error: str = "") -> SimpleNamespace:
    return SimpleNamespace(id=id_, round=1, platform="runc", benchmark=benchmark, status=status, error=error,
                           warmup=False)


class Nothing(Experiment):
    name = "nothing"

    def run(self, ctx: ExperimentContext) -> None:
        ctx.log("measured nothing more")


def test_a_resumed_part_reads_its_earlier_executions_and_the_lifecycle_counts_its_failures(tmp_path):
    executions = [_execution(1, "density[count=1]", "ok"),
                  _execution(2, "density[count=2]", "failed", "guard: confined host of 512 MiB: ...")]
    samples = [SimpleNamespace(execution_id=1, instance=0, metric="throughput", value=1.5),
               SimpleNamespace(execution_id=1, instance=1, metric="throughput", value=1.5),
               SimpleNamespace(execution_id=9, instance=0, metric="throughput", value=7.0)]  # another host's
    job = history(executions, samples)
    out = io.StringIO()
    sink = StreamStore(Emitter(out), {(1, "runc", "density[count=1]")}, job)
    assert [(e.benchmark, e.status) for e in sink.executions("r", status="failed")] == [("density[count=2]", "failed")]
    assert [s.value for s in sink.samples("r")] == [1.5] and len(sink.samples("r", per_instance=True)) == 2
    paths = Paths(state=tmp_path / "s", runtime=tmp_path / "r")
    kind = Nothing(SimpleNamespace(experiment="nothing"), paths)
    outcome = execute.measure(kind, ExperimentContext(sink=sink, run_id="r", seed=1, paths=paths))
    assert (outcome.failed, outcome.interrupted, outcome.unfinished) == (1, False, "")


def test_a_kinds_state_goes_through_the_sink_of_each_host(tmp_path):
    """#40: the adaptive rule's log is the kind's state, kept through the sink: in the run's
    provenance for a one-host run, under each host's name in a run across hosts (the local part's
    view of the store, and a remote part's agent, whose stream the controller keeps), so two
    hosts' logs never mix and a resumed agent gets its own back."""
    import json

    from virtbench.analysis import synthetic
    from virtbench.runner.hosts import HostView
    from virtbench.store.db import Store

    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    synthetic.fill(store, "r", repetitions=1, platforms=synthetic.default_platforms()[:1],
                   benchmarks=synthetic.default_benchmarks()[:1])
    store.set_state("r", "adaptive", [{"stop": "one host"}])
    assert store.state("r")["adaptive"] == [{"stop": "one host"}]
    local, far = HostView(store, "local"), HostView(store, "far")
    local.set_state("r", "adaptive", [{"round": 5}])
    far.set_state("r", "noise", {"rounds": 3})
    assert local.state("r") == {"adaptive": [{"round": 5}]} and far.state("r") == {"noise": {"rounds": 3}}
    assert store.state("r")["adaptive"] == [{"stop": "one host"}]  # the run's own is untouched

    out = io.StringIO()
    sink = StreamStore(Emitter(out), set(), None, far.state("r"))
    sink.set_state("x", "adaptive", [{"stop": "caps"}])
    assert sink.state("x") == {"noise": {"rounds": 3}, "adaptive": [{"stop": "caps"}]}
    (line,) = out.getvalue().splitlines()
    assert json.loads(line) == {"event": "state", "key": "adaptive", "value": [{"stop": "caps"}]}


def test_an_agent_reads_back_what_it_measured_in_this_part():
    """The adaptive rule decides on the samples of the rounds so far: a part's own executions
    are read back through its sink, as the store would give them (warm-ups only when asked)."""
    from datetime import datetime

    sink = StreamStore(Emitter(io.StringIO()), set())
    t = datetime(2026, 1, 1)
    for rnd, warm in ((0, True), (1, False)):
        sink.record(run_id="r", round=rnd, warmup=warm, platform="native", benchmark="openssl", status="ok",
                    started_at=t, finished_at=t, duration_s=2.5,
                    samples=[{"metric": "throughput", "value": 10.0 + rnd, "unit": "B/s", "higher_is_better": True,
                              "category": "cpu"}])
    assert [(s.round, s.value, s.platform) for s in sink.samples("r")] == [(1, 11.0, "native")]
    assert len(sink.samples("r", include_warmup=True)) == 2
    assert [e.duration_s for e in sink.executions("r")] == [2.5, 2.5] and sink.done_units("r") == {
        (0, "native", "openssl"), (1, "native", "openssl")}
