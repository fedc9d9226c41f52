"""How many rounds a campaign asks for, counted in one place for every layer.

A campaign's rounds are its warm-ups (discarded), the adaptive rule's noise check (rounds of
the baseline alone after them), its repetitions (measured), and the adaptive rule's cap on
measured rounds. The budget, the plan and its estimate, the progress bar's cap, the web's count
of a run's planned executions and the store's expected total all read them from here
(tests/unit/test_structure.py keeps it so): three copies with different per-round counts had
drifted apart before. A neutral module, so the store and the web read a stored run's campaign
(a mapping) the way the runner reads a validated one.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Rounds:
    """warmups: discarded rounds first; noise: rounds of the baseline alone after them (the
    adaptive rule's noise check); repetitions: measured rounds asked; cap: measured rounds the
    adaptive rule may grow them to (None: no adaptive rule); max_minutes: its time cap."""

    warmups: int
    repetitions: int
    noise: int = 0
    cap: int | None = None
    max_minutes: float | None = None

    @classmethod
    def of(cls, campaign: Any) -> Rounds:
        """The rounds of a validated campaign or of a stored one (its mapping)."""
        if isinstance(campaign, Mapping):
            rule = campaign.get("adaptive")
            rule = rule if isinstance(rule, Mapping) else None
            return cls(int(campaign.get("warmups", 0) or 0), int(campaign.get("repetitions", 0) or 0),
                       int(rule.get("noise_check", 0) or 0) if rule else 0,
                       int(rule.get("max_repetitions", 30) or 0) if rule else None,
                       float(rule.get("max_minutes", 60.0) or 0) if rule else None)
        a = campaign.adaptive
        return cls(campaign.warmups, campaign.repetitions, a.noise_check if a is not None else 0,
                   a.max_repetitions if a is not None else None, a.max_minutes if a is not None else None)

    @property
    def unmeasured(self) -> int:
        """Rounds before the first measured one: the warm-ups, then the noise check."""
        return self.warmups + self.noise

    @property
    def declared(self) -> int:
        """Every round the campaign declares (warm-ups, noise check, measured)."""
        return self.unmeasured + self.repetitions

    @property
    def repeated(self) -> int:
        """Rounds every platform runs in: the warm-ups and the measured ones (not the noise check)."""
        return self.warmups + self.repetitions

    @property
    def most(self) -> int:
        """Measured rounds at most: the adaptive cap when it is higher than the rounds asked."""
        return max(self.repetitions, self.cap or 0)

    @property
    def extra_at_most(self) -> int:
        """Measured rounds the adaptive rule may add to those asked."""
        return self.most - self.repetitions

    @property
    def at_cap(self) -> int:
        """Warm-ups and measured rounds at the cap (the noise check's rounds run the baseline
        alone and are counted apart)."""
        return self.warmups + self.most
