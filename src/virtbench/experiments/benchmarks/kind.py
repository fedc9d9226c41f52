"""The built-in kind `benchmarks`: every benchmark on every platform, the classic campaign.

It is the default when a campaign has no `experiment:` key. Its run is the rounds loop
(`rounds.py`: interleaved platform order, adaptive repetition); the session it measures with
(platforms, benchmarks, image, probes) is built in `prepare`, before the run is recorded.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from ...errors import InputError
from ..base import Experiment, ExperimentContext
from . import rounds
from .plan import noise_rounds
from .session import Session, build_objects, close_platforms, prepare, session_details

if TYPE_CHECKING:
    from ...store.models import Run


class Benchmarks(Experiment):
    name: ClassVar[str] = "benchmarks"
    description: ClassVar[str] = "every benchmark on every platform, interleaved rounds, verdicts against the baseline"
    uses_benchmarks: ClassVar[bool] = True
    uses_probes: ClassVar[bool] = True
    hosts = "agents"

    prepared: Session | None = None

    @classmethod
    def of(cls, session: Session) -> Benchmarks:
        """The kind over a session built already (one host's share of a run across hosts)."""
        kind = cls(session.campaign, session.paths)
        kind.prepared = session
        return kind

    def prepare(self, log: Callable[[str], None]) -> None:
        """Probe, build the image, and drop the platforms a generated campaign goes on without."""
        session = build_objects(self.campaign, self.paths)
        for platform in session.platforms.values():
            platform.cgroup_parent = self.cgroup_parent if platform.confinable else None
        kwargs: dict[str, Any] = {"cache": self.image_cache} if self.image_cache is not None else {}
        try:
            prepare(session, log=log, left_out=self.left_out, **kwargs)
        except BaseException:
            close_platforms(session.platforms.values())  # what the platforms prepared before the failure
            raise
        self.prepared, self.campaign = session, session.campaign  # without the platforms left out

    def built(self) -> Session:
        if self.prepared is None:
            raise RuntimeError("the benchmarks kind measures only after prepare()")
        return self.prepared

    def details(self) -> dict[str, Any]:
        details = session_details(self.built())
        if self.left_out:
            details["provenance"]["left_out"] = self.left_out
        return details

    def summary(self, run_id: str, seed: int) -> str:
        c = self.campaign
        noise = noise_rounds(c)
        return (f"run {run_id}: {len(self.built().platforms)} platforms x {len(self.built().benchmarks)} benchmarks, "
                f"{c.repetitions} repetitions + {c.warmups} warm-up"
                + (f" + {noise} rounds of {c.baseline} alone (the noise check)" if noise else "") + f", seed {seed}")

    def resuming(self, run: Run, log: Callable[[str], None]) -> None:
        image = self.built().image
        assert image is not None
        if image.recipe_hash != run.image.get("recipe_hash"):
            raise InputError(f"run {run.id} was measured with image {run.image.get('recipe_hash', '?')[:12]}, "
                             f"this host now builds {image.short}",
                             "resume on the host and virtbench version that started the run")
        if image.tar_sha256 != run.image.get("tar_sha256"):
            log("warning: the image was rebuilt since the run started; package versions may differ")

    def run(self, ctx: ExperimentContext) -> None:
        rounds.run(ctx, self.built())

    def close(self) -> None:
        """What the platforms made for the run (a Kubernetes namespace, an imported image) removed."""
        if self.prepared is not None:
            close_platforms(self.prepared.platforms.values())
