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
