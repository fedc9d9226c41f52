"""The typed interface of an experiment kind.

A kind declares its campaign section (a pydantic model, unknown keys rejected), checks what
depends on the host before anything starts, then measures, writing each result as an
execution with samples in the same store as benchmark runs (the point it measured is in the
benchmark key and its params, e.g. `line[length=4,pinning=none]`), so statistics, resume,
export and the web app's lists work unchanged. Its report part is a section builder in
`report/` registered under the kind's name (report sits above the runner and plugins).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel

from ..platforms.base import Paths

if TYPE_CHECKING:
    from ..config import Campaign
    from ..store.db import Store


def _quiet(_message: str) -> None:
    return None


@dataclass
class ExperimentContext:
    """What the runner hands a kind's run step: the store, the run, and how to talk back."""

    store: Store
    run_id: str
    seed: int
    paths: Paths
    log: Callable[[str], None] = _quiet
    step: Callable[[str], None] = _quiet
    stop_requested: Callable[[], bool] = field(default=lambda: False)

    def done(self) -> set[tuple[int, str, str]]:
        """(round, platform, benchmark key) already stored: a resumed run skips them."""
        return self.store.done_units(self.run_id)


class Experiment(ABC):
    """One kind of experiment. Subclass, declare, and register under `virtbench.experiments`."""

    name: ClassVar[str]
    description: ClassVar[str] = ""
    Section: ClassVar[type[BaseModel] | None] = None
    """The campaign section named like the kind (`line:`); None: the kind takes none."""
    uses_benchmarks: ClassVar[bool] = False
    """Whether the campaign's `benchmarks:` list applies (only the `benchmarks` kind)."""
    drives_hosts: ClassVar[bool] = False
    """Whether the kind reaches the campaign's other `hosts:` itself from this host (migration's
    destinations) instead of the multi-host runner starting an agent on each to measure there."""
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
        before anything is built. (0, "") when the kind has no rounds."""
        return 0, ""

    @classmethod  # noqa: B027 - optional hook
    def validate_campaign(cls, campaign: Campaign) -> None:
        """Cross-field checks that need no host (raise InputError); run at parse time."""

    def prepare(self, log: Callable[[str], None]) -> None:  # noqa: B027 - optional hook
        """Host checks and preparation before the run is recorded: bad input raises
        InputError (exit 2) here, with nothing started."""

    def provenance(self) -> dict[str, Any]:
        """Extra provenance stored with the run (tool versions, limits measured up front)."""
        return {}

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
