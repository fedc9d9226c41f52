"""The registry of experiment kinds, over the entry-point group `virtbench.experiments`.

The built-in kinds register in virtbench's own pyproject.toml exactly as a third-party
package registers its kind, so there is one mechanism:

    [project.entry-points."virtbench.experiments"]
    mykind = "mypackage.mykind:MyKind"     # a subclass of virtbench.experiments.base.Experiment

The registry itself sits with the other plugin registries (virtbench/registry.py), so the
campaign's validation (config/) looks a kind up without importing this package; a campaign
selects one with `experiment: NAME` and configures it in the section of the same name.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..registry import DEFAULT_EXPERIMENT as DEFAULT
from ..registry import EXPERIMENTS as _EXPERIMENTS
from ..registry import Registry

if TYPE_CHECKING:
    from .base import Experiment

__all__ = ["DEFAULT", "EXPERIMENTS"]

EXPERIMENTS: Registry[Experiment] = _EXPERIMENTS
"""The one registry of kinds, typed."""
