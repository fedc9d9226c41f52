"""A platform written from virtbench's Platform interface alone (not a subclass of a built-in):
each instance is a directory of its own, each command runs on the host through `env -i` in a
shell that says "toy platform" on stderr first (what a wrapper runtime's argv looks like). It
never starts a process itself: the runner's one subprocess function runs its argv."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import ClassVar

from virtbench import proc
from virtbench.images.image import Image
from virtbench.platforms.base import EXEC_ENV, Availability, Instance, Paths, Platform

META = "toy-instance.json"


class Toy(Platform):
    type: ClassVar[str] = "toy"
    kind = "sandbox"
    description: ClassVar[str] = "the host's own binaries through env -i, one directory per instance (a plugin test's)"
    binaries: ClassVar[tuple[str, ...]] = ("env", "sh")

    @classmethod
    def try_instance(cls, paths: Paths) -> Availability:
        proc.run(["env", "-i", "sh", "-c", "true"], timeout=30)
        return Availability(True, "env -i sh runs")

    def versions(self) -> dict[str, str]:
        return {"toy": "0", "kernel": os.uname().release}

    def create(self, image: Image, name: str, run_id: str) -> Instance:  # noqa: ARG002 - the host's binaries
        d = self.paths.instances / f"toy-{name}"
        d.mkdir(parents=True)
        (d / META).write_text(json.dumps({"platform": self.type, "run_id": run_id, "name": name}))
        return Instance(name, self.name, run_id, {"dir": str(d)})

    def start(self, instance: Instance) -> None:
        pass

    def exec_argv(self, instance: Instance, argv: list[str]) -> list[str]:  # noqa: ARG002
        env = [f"{k}={v}" for k, v in EXEC_ENV.items()]
        return ["env", "-i", *env, "sh", "-c", 'echo "toy platform" >&2; exec "$@"', "sh", *argv]

    def stop(self, instance: Instance) -> None:
        pass

    def remove(self, instance: Instance) -> None:
        shutil.rmtree(instance.data["dir"], ignore_errors=True)

    @classmethod
    def cleanup(cls, paths: Paths, run_id: str | None = None) -> list[str]:
        removed = []
        for meta in sorted(Path(paths.instances).glob(f"toy-*/{META}")) if Path(paths.instances).is_dir() else []:
            if run_id is None or json.loads(meta.read_text()).get("run_id") == run_id:
                shutil.rmtree(meta.parent, ignore_errors=True)
                removed.append(str(meta.parent))
        return removed
