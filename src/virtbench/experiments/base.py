"""The typed interface of an experiment kind.

A kind declares its campaign section (a pydantic model, unknown keys rejected), checks what
depends on the host before anything starts, then measures, writing each result as an
execution with samples in the same store as benchmark runs (the point it measured is in the
benchmark key and its params, e.g. `line[length=4,pinning=none]`), so statistics, resume,
export and the web app's lists work unchanged. A kind is a package: this class in `kind.py`,
its report part in `report.py`, registered under the kind's name in `virtbench.report_sections`
(it ranks with report/, above the runner and the plugins, so nothing else of the kind imports it).
"""
from __future__ import annotations

import signal
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

from pydantic import BaseModel

from ..platforms.base import Availability, Paths
from .planning import Done, Past, Plan, platform_kinds, rounds_of

if TYPE_CHECKING:
    from ..config import Campaign
    from ..images.build import Recipe
    from ..images.image import Image
    from ..store.models import Run


@dataclass
class HostLink:
    """Another host of a run across hosts, as a kind's after_parts sees it (runner/parts.py
    reaches it): where it is, how its part ended, and how to start a job of the kind's agent there."""

    name: str
    address: str
    seed: int
    status: str
    """finished, lost, interrupted: how its own part ended."""
    reason: str
    clock: dict[str, Any]
    """Its clock minus the controller's (offset_s, uncertainty_s), measured before the run."""
    agent: list[str] | None
    """The argv of `virtbench agent` there (over SSH); None for the controller itself."""
    job: dict[str, Any]
    """What every job for that agent carries (the campaign, the run's ids, its image cache)."""

    @property
    def local(self) -> bool:
        return self.agent is None


class Sink(Protocol):
    """Where a run's executions go: the store itself, one host's share of it (a run across
    hosts), or a remote agent's stream to its controller. Structural: each implements these."""

    def done_units(self, run_id: str) -> set[tuple[int, str, str]]: ...

    def record(self, *, run_id: str, round: int, warmup: bool, platform: str, benchmark: str,
               status: str, started_at: datetime, finished_at: datetime, duration_s: float,
               instance: str = "", argv: Sequence[str] = (), exit_code: int | None = None,
               stdout: str = "", stderr: str = "", error: str = "",
               samples: Iterable[dict[str, Any]] = (),
               attachments: Iterable[dict[str, Any]] = ()) -> int: ...

    def executions(self, run_id: str, *, status: str | None = None) -> list[Any]: ...

    def samples(self, run_id: str, *, include_warmup: bool = False, per_instance: bool = False) -> list[Any]: ...

    def set_status(self, run_id: str, status: str, error: str = "") -> None: ...

    def state(self, run_id: str) -> dict[str, Any]:
        """What the kind keeps of the run to find again on resume (adaptive rounds' log)."""
        ...

    def set_state(self, run_id: str, key: str, value: Any) -> None: ...


class Forwarding:
    """A sink that hands each execution on as one mapping (`put`): one host's share of the
    store, a remote agent's stream to its controller."""

    def record(self, *, run_id: str, round: int, warmup: bool, platform: str, benchmark: str,
               status: str, started_at: datetime, finished_at: datetime, duration_s: float,
               instance: str = "", argv: Sequence[str] = (), exit_code: int | None = None,
               stdout: str = "", stderr: str = "", error: str = "",
               samples: Iterable[dict[str, Any]] = (),
               attachments: Iterable[dict[str, Any]] = ()) -> int:
        return self.put({"run_id": run_id, "round": round, "warmup": warmup, "platform": platform,
                         "benchmark": benchmark, "status": status, "started_at": started_at,
                         "finished_at": finished_at, "duration_s": duration_s, "instance": instance,
                         "argv": list(argv), "exit_code": exit_code, "stdout": stdout, "stderr": stderr,
                         "error": error, "samples": list(samples), "attachments": list(attachments)})

    def put(self, fields: dict[str, Any]) -> int:
        raise NotImplementedError


class Reporter(Protocol):
    """How a run talks to whoever watches it (a progress bar, the web worker, an agent's stream).

    begin(total, done): the plan is `total` executions, `done` of them done already (a resume);
    said again, whole, when the plan grows. total 0: no count planned (yet)."""

    def begin(self, total: int, done: int) -> None: ...
    def step(self, description: str) -> None: ...
    def advance(self, n: int = 1) -> None: ...
    def log(self, message: str) -> None: ...
    def end(self) -> None: ...


class QuietReporter:
    def begin(self, total: int, done: int) -> None: ...
    def step(self, description: str) -> None: ...
    def advance(self, n: int = 1) -> None: ...
    def log(self, message: str) -> None: ...
    def end(self) -> None: ...


class Interrupted(BaseException):
    """SIGTERM or a cancel: treated like Ctrl-C so the instances in use are removed first.

    A BaseException, like KeyboardInterrupt, so no `except Exception` on the way (a retry
    loop, a best-effort probe) can swallow it and let the run go on."""


class Unfinished(Exception):  # noqa: N818 - an outcome, not a fault of the code
    """A run that ended with part of it not measured (a host lost): it is marked failed with
    this reason, what was measured stays, and `run --resume` measures the rest."""


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    def handler(signum: int, frame: Any) -> None:  # noqa: ARG001
        raise Interrupted(f"signal {signum}")

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not in the main thread (e.g. a web worker): leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _quiet(_message: str) -> None:
    return None


@dataclass
class ExperimentContext:
    """What the runner hands a kind's run step: where results go, the run, and how to talk back."""

    sink: Sink
    run_id: str
    seed: int
    paths: Paths
    log: Callable[[str], None] = _quiet
    step: Callable[[str], None] = _quiet
    stop_requested: Callable[[], bool] = field(default=lambda: False)
    reporter: Reporter = field(default_factory=QuietReporter)
    started: datetime = field(default_factory=lambda: datetime.now(UTC).replace(tzinfo=None))
    """When this process started measuring the run (the adaptive rule's time cap counts from it)."""

    def done(self) -> set[tuple[int, str, str]]:
        """(round, platform, benchmark key) already stored: a resumed run skips them."""
        return self.sink.done_units(self.run_id)


class Experiment(ABC):
    """One kind of experiment. Subclass, declare, and register under `virtbench.experiments`."""

    name: ClassVar[str]
    description: ClassVar[str] = ""
    Section: ClassVar[type[BaseModel] | None] = None
    """The campaign section named like the kind (`line:`); None: the kind takes none."""
    uses_benchmarks: ClassVar[bool] = False
    """Whether the campaign's `benchmarks:` list applies (only the `benchmarks` kind)."""
    across_hosts: ClassVar[Literal["agents", "drives", "no"]] = "no"
    """How the kind runs with `hosts:`: "agents" (the runner starts an agent on each host, which
    runs the same kind there and streams its executions back; the host hooks below), "drives"
    (the kind reaches the other hosts itself from this one, as migration reaches its
    destinations), "no" (refused when the campaign is parsed). A kind written before it had this
    name declares `hosts = "agents"`, still read."""
    uses_adaptive: ClassVar[bool] = False
    """Whether the kind adds rounds by the campaign's `adaptive:` rule; a kind that does not is
    refused one rather than silently measuring its declared rounds."""
    uses_probes: ClassVar[bool] = False
    """Whether the kind runs the campaign's `probes:` beside its executions; a kind that does
    not is refused a `probes:` list rather than silently measuring without them."""
    uses_platform_images: ClassVar[bool] = False
    """Whether the kind gives each platform its own `image:` (density compares guest OS images);
    a kind that does not is refused a per-platform image rather than silently using the campaign's."""
    node_types: ClassVar[tuple[str, ...]] = ()
    """Platform types the kind understands beyond the platform plugins (e.g. `netns`)."""
    default_baseline: ClassVar[str] = "native"
    main_table: ClassVar[bool] = True
    """Whether the kind's executions are rows of the report's table relative to the baseline;
    False when its own report section is the result (density: per-count executions are points
    of a curve, not benchmarks to compare), so the main table shows no empty rows for them."""

    cgroup_parent: str | None = None
    """A cgroup the kind's confinable instances go under (the self-test's CPU priority parent)."""
    left_out: list[dict[str, str]] | None = None
    """Given for a generated campaign (the quick one): platforms it goes on without, with why."""
    known_availability: dict[str, Availability] | None = None
    """Platform types' verdicts taken already in this process (the quick campaign chose its
    platforms by them): prepare does not try them again."""
    image_cache: Path | None = None
    """Where the campaign's image is kept (a remote agent's own work directory); None: the default."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        old = cls.__dict__.get("hosts")
        if isinstance(old, str):  # the attribute's name before #40 (a plugin's kind)
            cls.across_hosts = old  # type: ignore[assignment]

    def __init__(self, campaign: Campaign, paths: Paths) -> None:
        self.campaign = campaign
        self.paths = paths

    @property
    def section(self) -> Any:
        """The validated section (an instance of `Section`)."""
        return self.campaign.section

    @classmethod
    def work_per_round(cls, section: Any) -> tuple[int, str]:
        """What one round asks of each platform, counted from the section alone (e.g. instances
        migrated, line nodes built): the campaign's budget multiplies it by rounds and platforms
        before anything is built. (0, "") when the kind has no rounds. Read through `plan`."""
        return 0, ""

    @classmethod
    def plan(cls, campaign: Campaign, seed: int = 0, done: Done = frozenset(), past: Past | None = None) -> Plan:
        """What a run of the campaign will measure (planning.py), from the campaign alone: nothing
        is built or probed. seed: the run's (the order); done: what is stored already (a resume);
        past: durations of earlier executions, for the expected seconds. This default knows only
        the rounds and the budget: a kind that plans no executions says so."""
        return Plan(kind=cls.name, rounds=rounds_of(campaign), platforms=platform_kinds(campaign, cls.node_types),
                    round=[], budget=cls.work_per_round(campaign.section), open_ended=True, done=frozenset(done),
                    notes=[f"experiment {cls.name} plans its work as it runs: no estimate of its duration"],
                    order="its own order", in_rounds=False)

    @classmethod  # noqa: B027 - optional hook
    def validate_campaign(cls, campaign: Campaign) -> None:
        """Cross-field checks that need no host (raise InputError); run at parse time."""

    def prepare(self, log: Callable[[str], None]) -> None:  # noqa: B027 - optional hook
        """Host checks and preparation before the run is recorded: bad input raises
        InputError (exit 2) here, with nothing started."""

    # -- the host hooks: a kind that runs on each of `hosts:` through agents ----------------
    def remote_checks(self, host: str, read: Callable[[str], str | None]) -> None:  # noqa: B027 - optional hook
        """Cheap checks of another host before anything is built or shipped (InputError naming
        the host): read(path) is that host's file, None when it cannot be read."""

    def host_recipe(self) -> Recipe | None:
        """The image an agent of this kind measures with on another host (`across_hosts =
        "agents"`): built here for that host's architecture and shipped, since a board or a
        guest cannot be trusted to build the same binaries itself. None: the kind measures
        with no image (only virtbench is shipped)."""
        raise NotImplementedError(f"experiment {self.name!r} runs across hosts through agents but gives no "
                                  "host_recipe")

    def host_image(self) -> Image | None:
        """The image prepared here (when this host is one of them), shipped as it is to a host of
        the same architecture; None: built from host_recipe for each."""
        return None

    @classmethod
    def part_campaign(cls, campaign: Campaign) -> Campaign:
        """The campaign as each host's own part measures it (the benchmarks kind leaves out the
        pairs measured across hosts, which after_parts measures)."""
        return campaign

    def host_part(self) -> Experiment:
        """The kind as one host's part measures it (after prepare): its part_campaign."""
        return self

    def after_parts(self, ctx: ExperimentContext, hosts: Sequence[HostLink]) -> None:  # noqa: B027 - optional hook
        """After every host measured its part, here on the controller (the benchmarks kind: the
        pairs across hosts). ctx.sink writes as the controller's host (`local`)."""

    def describe_work(self) -> str:
        """What the run does, in a few words, for the line a run across hosts starts with."""
        return f"experiment {self.campaign.experiment}"

    def serve(self, job: dict[str, Any], requests: Iterable[str], emit: Callable[..., None]) -> None:
        """A job of this kind's own for its agent on another host (after prepare), other than
        measuring its part: the benchmarks kind's `pair-server` serves the server ends of the
        pairs across hosts. requests: the controller's lines; emit(event, **data): one answer."""
        raise NotImplementedError(f"experiment {self.name!r} has no agent job {job.get('mode')!r}")

    def provenance(self) -> dict[str, Any]:
        """Extra provenance stored with the run (tool versions, limits measured up front)."""
        return {}

    def details(self) -> dict[str, Any]:
        """What the run records about the host that measures it (besides its host id)."""
        from .. import __version__
        from .. import hostinfo as hostfacts
        from ..platforms import enforcement

        limits = enforcement.for_platforms(self.paths, [(p.name, p.type, p.options) for p in self.campaign.platforms])
        return {"host_facts": hostfacts.facts(), "image": {},
                "provenance": {"virtbench": __version__, "experiment": self.campaign.experiment,
                               **({"limits": limits} if limits else {}), **self.provenance()},
                "platforms": self.platform_rows(), "benchmarks": []}

    def recorded(self) -> dict[str, Any]:
        """What a run records of its kind and plan (provenance `plan`), so its report reads the
        run alone, never today's registry (a kind removed or changed since still reports)."""
        plan = self.plan(self.campaign)
        return {**plan.summary(), "main_table": self.main_table, "uses_benchmarks": self.uses_benchmarks}

    def summary(self, run_id: str, seed: int) -> str:
        """The line a started run begins with."""
        return (f"run {run_id}: experiment {self.campaign.experiment} on {len(self.campaign.platforms)} "
                f"platforms, seed {seed}")

    def resuming(self, run: Run, log: Callable[[str], None]) -> None:  # noqa: B027 - optional hook
        """Before a stored run is completed (after prepare): refuse what would not match it."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release what prepare opened (connections); the runner calls it however the run ends."""

    def platform_rows(self) -> list[dict[str, Any]]:
        """The run's platform rows (name, type, kind, label, config, versions)."""
        from ..registry import PLATFORMS

        kinds = {n: c.kind for n, c in PLATFORMS.items()}
        return [{"name": p.name, "type": p.type, "kind": "stack" if p.inside else kinds.get(p.type, ""), "label": p.type,
                 "config": {"type": p.type, **p.options}, "versions": {}} for p in self.campaign.platforms]

    @abstractmethod
    def run(self, ctx: ExperimentContext) -> None:
        """Measure, storing each execution as it completes; skip what `ctx.done()` holds."""

    @classmethod
    def cleanup(cls, paths: Paths, run_id: str | None = None) -> list[str]:
        """Remove what the kind left behind (of one run, or all); `virtbench cleanup` calls it."""
        return []
