"""An experiment kind: counts to `upto` on every platform, one execution per count, and runs on
each of `hosts:` through agents like the built-in kinds (it needs no image there). After every
host's part, on the controller, it records which hosts took part and how (its after_parts)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from virtbench.experiments.base import Experiment, ExperimentContext, HostLink
from virtbench.experiments.planning import Plan, Work, platform_kinds, rounds_of
from virtbench.store.db import now

HOSTS_KEY = "toy-count-hosts"


class CountSection(BaseModel):
    model_config = ConfigDict(extra="forbid")
    upto: int = 3


class Count(Experiment):
    name: ClassVar[str] = "toy-count"
    description: ClassVar[str] = "one execution per count and platform (a plugin test's kind)"
    Section = CountSection
    main_table: ClassVar[bool] = False
    across_hosts = "agents"

    @classmethod
    def plan(cls, campaign: Any, seed: int = 0, done: Any = frozenset(), past: Any = None) -> Plan:
        work = [Work(name, f"toy-count[n={n}]", expected_s=0.01, source="a count")
                for name, _, _ in platform_kinds(campaign) for n in range(1, campaign.section.upto + 1)]
        return Plan(kind=cls.name, rounds=rounds_of(campaign), platforms=platform_kinds(campaign), round=work,
                    in_rounds=False, order="each platform counts up", schedule=lambda: list(work))

    def host_recipe(self) -> None:
        return None  # counting needs no image on the other hosts

    def run(self, ctx: ExperimentContext) -> None:
        """Count; what it counted to is its state (kept through the sink, as the adaptive rule keeps
        its log: a resumed part finds it again, and each host's stays apart)."""
        done = ctx.done()
        for platform in self.campaign.platforms:
            for n in range(1, self.section.upto + 1):
                key = f"toy-count[n={n}]"
                if (0, platform.name, key) in done:
                    continue
                t = now()
                ctx.sink.record(run_id=ctx.run_id, round=0, warmup=False, platform=platform.name, benchmark=key,
                                status="ok", started_at=t, finished_at=t, duration_s=0.0,
                                samples=[{"metric": "n", "value": float(n), "unit": "count",
                                          "higher_is_better": True, "category": "kernel"}])
        ctx.sink.set_state(ctx.run_id, "counted_to", self.section.upto)

    def after_parts(self, ctx: ExperimentContext, hosts: Sequence[HostLink]) -> None:
        t = now()
        ctx.sink.record(run_id=ctx.run_id, round=0, warmup=False, platform=self.campaign.platforms[0].name,
                        benchmark=HOSTS_KEY, status="ok", started_at=t, finished_at=t, duration_s=0.0,
                        stdout="\n".join(f"{h.name} {h.status} {'local' if h.local else 'agent'}" for h in hosts))
