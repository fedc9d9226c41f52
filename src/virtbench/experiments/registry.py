"""The registry of experiment kinds, over the entry-point group `virtbench.experiments`.

The built-in kinds register in virtbench's own pyproject.toml exactly as a third-party
package registers its kind, so there is one mechanism:

    [project.entry-points."virtbench.experiments"]
    mykind = "mypackage.mykind:MyKind"     # a subclass of virtbench.experiments.base.Experiment
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..registry import Registry

if TYPE_CHECKING:
    from .base import Experiment

DEFAULT = "benchmarks"
"""The kind of a campaign without `experiment:` (every benchmark on every platform)."""

EXPERIMENTS: Registry[Experiment] = Registry("virtbench.experiments", "experiment kind")
