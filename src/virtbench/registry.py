"""Plugin registries: benchmarks and platforms are looked up by name.

Built-ins register through the same Python entry points a third-party package would use
(`virtbench.benchmarks`, `virtbench.platforms`, `virtbench.probes` in pyproject.toml), so there is one mechanism.
"""
from __future__ import annotations

import difflib
from collections.abc import Iterable
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .errors import InputError

if TYPE_CHECKING:
    from .benchmarks.base import Benchmark
    from .platforms.base import Platform
    from .probes.base import Probe

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, group: str, kind: str) -> None:
        self.group = group
        self.kind = kind
        self._items: dict[str, type[T]] | None = None
        self._one: dict[str, type[T]] = {}
        """Plugins loaded one by one by get() before the whole registry was needed."""
        self.broken: dict[str, str] = {}
        """Plugins that failed to import: name -> error (shown by `get` and doctor)."""

    def _load(self) -> dict[str, type[T]]:
        if self._items is None:
            items: dict[str, type[T]] = {}
            for ep in entry_points(group=self.group):
                try:
                    items[ep.name] = ep.load()
                except Exception as exc:  # noqa: BLE001 - one broken plugin must not hide the others
                    self.broken[ep.name] = f"{type(exc).__name__}: {exc}"
            self._items = dict(sorted(items.items()))
        return self._items

    def register(self, name: str, cls: type[T]) -> None:
        """Register at run time (tests, notebooks); entry points are the normal route."""
        self._load()[name] = cls

    def names(self) -> list[str]:
        return list(self._load())

    def known(self) -> set[str]:
        """The names, without importing the plugins when they are not loaded yet (a report
        asks which section builders belong to an experiment kind; loading every kind would
        import the runner)."""
        if self._items is not None:
            return set(self._items)
        return {ep.name for ep in entry_points(group=self.group)}

    def get(self, name: str) -> type[T]:
        if self._items is None:  # only this plugin: a report asks for its run's kind, not for every kind
            if name not in self._one and name not in self.broken:
                for ep in entry_points(group=self.group, name=name):
                    try:
                        self._one[name] = ep.load()
                    except Exception as exc:  # noqa: BLE001 - reported below like _load's
                        self.broken[name] = f"{type(exc).__name__}: {exc}"
                    break
            if name in self._one:
                return self._one[name]
        items = self._load()
        if name in self.broken:
            raise InputError(f"{self.kind} {name!r} failed to load: {self.broken[name]}",
                             "reinstall virtbench or the plugin package")
        if name not in items:
            raise InputError(f"unknown {self.kind} {name!r}", hint(name, items))
        return items[name]

    def items(self) -> list[tuple[str, type[T]]]:
        return list(self._load().items())


def hint(name: str, known: Iterable[str]) -> str:
    names = list(known)
    close = difflib.get_close_matches(name, names, n=1)
    base = f"known: {', '.join(names)}"
    return f"did you mean {close[0]!r}? {base}" if close else base


BENCHMARKS: Registry[Benchmark] = Registry("virtbench.benchmarks", "benchmark")
PLATFORMS: Registry[Platform] = Registry("virtbench.platforms", "platform type")
PROBES: Registry[Probe] = Registry("virtbench.probes", "probe")

DEFAULT_EXPERIMENT = "benchmarks"
"""The kind of a campaign without `experiment:` (every benchmark on every platform)."""

EXPERIMENTS: Registry[Any] = Registry("virtbench.experiments", "experiment kind")
"""Experiment kinds: what a campaign does with its platforms (experiments/base.py for the
interface; experiments/registry.py gives it that type). Here with the other plugin registries, so
the campaign's validation (config/) finds a kind, its section and its plan without importing the
experiments package."""

AIMS: Registry[Any] = Registry("virtbench.adaptive_aims", "adaptive aim")
"""Adaptive aims: a campaign's `adaptive.aim` names one, a function (sink, campaign, run_id) ->
list of experiments.benchmarks.adaptive.Aimed: the cells to measure again for quantities it
judges from them (a study's paper values, studies/aim.py), beside the undecided comparisons."""
