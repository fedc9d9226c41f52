"""An experiment kind: counts to `upto` on every platform, one execution per count."""
from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict

from virtbench.experiments.base import Experiment, ExperimentContext
from virtbench.store.db import now


class CountSection(BaseModel):
    model_config = ConfigDict(extra="forbid")
    upto: int = 3


class Count(Experiment):
    name: ClassVar[str] = "toy-count"
    description: ClassVar[str] = "one execution per count and platform (a plugin test's kind)"
    Section = CountSection
    main_table: ClassVar[bool] = False

    def run(self, ctx: ExperimentContext) -> None:
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
