"""The hosts of a run across hosts, before it measures: each checked and supplied (virtbench and
the image shipped, the agent's own check answered, the clock offset read), and talked to.

A host that cannot take part (unreachable, wrong host key, no root, a platform missing, no image
for its architecture) refuses the campaign before anything starts, naming the host and the fix.
"""
from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from .. import hostinfo as hostfacts
from .. import proc
from ..config import Campaign, check_host
from ..errors import InputError, VirtbenchError
from ..experiments.base import Experiment, HostLink
from ..images import build as images
from ..images.arch import MACHINE_TO_DEB
from ..images.image import Image
from ..platforms.base import Paths
from ..platforms.closing import NotRemoved
from ..registry import PLATFORMS
from ..remote import ship
from ..remote.inventory import HostSpec
from ..remote.ssh import SSHExecutor
from ..store.db import Store
from .wire import parse

PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass
class Part:
    """One host's share of the run."""

    spec: HostSpec
    seed: int
    executor: SSHExecutor | None = None
    agent: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    shipped: ship.Shipment = field(default_factory=ship.Shipment)
    clock: dict[str, Any] = field(default_factory=dict)
    stream: proc.Stream | None = None
    status: str = "pending"
    reason: str = ""

    @property
    def name(self) -> str:
        return self.spec.name

    def remote_env(self) -> list[str]:
        work = self.spec.work_dir
        tag = hashlib.sha256(work.encode()).hexdigest()[:8]
        return [f"VIRTBENCH_STATE_DIR={work}/state", f"VIRTBENCH_RUNTIME_DIR=/run/virtbench-remote/{tag}",
                f"PATH={PATH}"]

    @property
    def image_cache(self) -> str:
        return f"{self.spec.work_dir}/images"

    def agent_argv(self) -> list[str]:
        """`virtbench agent` on the host, over its SSH connection."""
        assert self.executor is not None
        return self.executor.ssh_argv(["env", *self.remote_env(), self.agent, "agent"])


def host_seed(seed: int, name: str) -> int:
    """Each host its own order, reproducible from the run's seed."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{name}".encode()).digest()[:4], "big") % 2**31


def instance_run_id(run_id: str, name: str) -> str:
    """The id a remote host labels its instances with: another host's cleanup never matches it."""
    return f"{run_id}-{hashlib.sha256(name.encode()).hexdigest()[:4]}"


def prepare_parts(kind: Experiment, paths: Paths, seed: int, log: Any) -> list[Part]:
    """Check and supply every host of a campaign run through agents: each reached and given the
    kind's cheap checks (remote_checks), the kind prepared here when `local` is one of them, then
    virtbench and the kind's image shipped to each other host (the image prepared here when the
    architecture matches, else built from host_recipe), whose agent answers the kind's own
    checks (its prepare there). InputError naming the first host that cannot take part."""
    parts = _reach(kind.campaign, paths, seed, lambda part: kind.remote_checks(part.name, _reader(part)))
    try:
        if any(p.spec.is_local for p in parts):
            kind.prepare(log)
        recipe = kind.host_recipe()  # no image for the controller's own architecture unless it is a host
        for part in parts:
            if not part.spec.is_local:
                _prepare_remote(part, kind.campaign, recipe, kind.host_image(), log)
    except BaseException:
        close(parts)
        raise
    return parts


def _reader(part: Part) -> Callable[[str], str | None]:
    """A file of the part's host, read over its SSH connection (None when it cannot be read)."""
    def read(path: str) -> str | None:
        assert part.executor is not None
        res = part.executor.run(["cat", path], timeout=30, check=False)
        return res.stdout if res.ok else None

    return read


def link(part: Part, job: dict[str, Any]) -> HostLink:
    """The part as a kind's after_parts sees it."""
    return HostLink(name=part.name, address=part.spec.address, seed=part.seed, status=part.status,
                    reason=part.reason, clock=part.clock, job=job,
                    agent=None if part.spec.is_local or part.executor is None else part.agent_argv())


def _reach(campaign: Campaign, paths: Paths, seed: int, cheap: Callable[[Part], None]) -> list[Part]:
    """Every host reached and given the cheap checks (`cheap`: the kind's own, over SSH) before
    anything is built or shipped: a host that cannot be reached refuses at once."""
    parts = [Part(spec=h, seed=host_seed(seed, h.name)) for h in campaign.hosts]
    try:
        for part in parts:
            if part.spec.is_local:
                check_host(campaign, paths, source=f"host {part.name}", one_of_hosts=True)
            else:
                part.executor = SSHExecutor(part.spec, paths.runtime)
                part.executor.open()  # host key, reachability, root or sudo: InputError naming the host
                _check_remote(part, campaign, paths)
                cheap(part)
    except BaseException:
        close(parts)
        raise
    return parts


def _check_remote(part: Part, campaign: Campaign, paths: Paths) -> None:
    """The host's CPUs and memory against the campaign's limits (config.check_host), read over
    SSH before anything is built or started there."""
    assert part.executor is not None
    out = part.executor.run(["sh", "-c", "nproc; cat /proc/meminfo"], timeout=30, check=False).stdout
    first, _, meminfo = out.partition("\n")
    if first.strip().isdigit():
        check_host(campaign, paths, source=f"host {part.name}", cpus=int(first), free=-1, one_of_hosts=True,
                   memory=hostfacts.meminfo(meminfo).get("MemTotal", 0))


def _prepare_remote(part: Part, campaign: Campaign, recipe: images.Recipe | None, image: Image | None,
                    log: Any) -> None:
    """virtbench and the image (`image` if it is for the host's architecture, else `recipe`
    built for it; none when the kind measures with no image) shipped, the agent's check
    answered, the clock offset read."""
    ex = part.executor
    assert ex is not None
    machine = ex.run(["uname", "-m"], timeout=30).stdout.strip()
    py = ex.run(["python3", "-c", "import sys, venv; print('%d.%d' % sys.version_info[:2])"], timeout=30,
                check=False)
    if not py.ok or tuple(map(int, py.stdout.strip().split("."))) < (3, 11):
        raise InputError(f"host {part.name}: needs Python 3.11 or later with venv "
                         f"({(py.stdout or py.stderr).strip()[-80:] or 'no python3'})",
                         f"install python3 and python3-venv on {part.name}")
    arch = MACHINE_TO_DEB.get(machine, machine)
    if recipe is not None and (image is None or arch != image.arch):  # that host's architecture (qemu-user)
        try:
            image = images.build(replace(recipe, arch=arch), log=log)
        except VirtbenchError as exc:
            raise InputError(f"host {part.name} is {machine}: no {arch} guest image for it: {exc.message}",
                             exc.fix or f"build it first: virtbench image build --arch {arch}") from None
    extras = tuple(sorted({x for p in campaign.platforms if p.type in PLATFORMS.names()
                           if (x := PLATFORMS.get(p.type).python_extra)}))
    part.agent = ship.ensure_virtbench(ex, machine, py.stdout.strip(), part.shipped, log, extras=extras)
    if image is not None:
        ship.ensure_image(ex, image.root, part.image_cache, part.shipped, log)
    part.clock = clock_offset(ex)
    msgs = talk(part, {"mode": "check", "campaign": for_agent(campaign), "run_id": "check",
                        "image_cache": part.image_cache}, log=lambda m: log(f"{part.name}: {m}"))
    end = msgs[-1] if msgs else {}
    if end.get("event") == "error" or end.get("status") != "checked":
        raise InputError(f"host {part.name}: {end.get('message') or 'the agent did not answer'}",
                         end.get("fix") or f"see `virtbench doctor` on {part.name}")
    part.details = next((m["details"] for m in msgs if m.get("event") == "hello"), {})


def for_agent(campaign: Campaign) -> dict[str, Any]:
    """The campaign as a host's agent gets it (it measures only where it runs)."""
    return campaign.model_dump(mode="json")


def talk(part: Part, job: dict[str, Any], log: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """A short agent job (check, cleanup): every line it wrote, until it exits. log: its log
    lines as they come (a check prepares the platforms there: image imports take minutes on a
    slow board or an emulated host, and the terminal says which)."""
    assert part.executor is not None
    stream = proc.stream(part.agent_argv())
    stream.send(json.dumps(job))
    msgs = []
    for m in map(parse, stream.lines()):
        if m:
            msgs.append(m)
            if log is not None and m.get("event") == "log":
                log(str(m.get("message", "")))
    rc = stream.close()
    if not msgs:
        return [{"event": "error", "message": f"the agent exited with status {rc}: {stream.stderr().strip()[-300:]}"}]
    return msgs


def clock_offset(ex: SSHExecutor, tries: int = 20) -> dict[str, Any]:
    """The host's clock minus ours, NTP-style: one remote shell answers each request with its
    time, so every exchange is a symmetric round trip on an open session; the exchange with the
    smallest round trip gives the offset, known to within half of it. Plus the host's chrony
    state where chrony runs."""
    stream = proc.stream(ex.ssh_argv(["sh", "-c", "while read -r _; do date +%s.%N; done"]))
    best: tuple[float, float] | None = None
    try:
        replies = stream.lines()
        for _ in range(tries):
            t0 = time.time()
            if not stream.send("t"):
                break
            reply = next(replies, "")
            t1 = time.time()
            try:
                remote = float(reply.strip())
            except ValueError:
                break
            if best is None or t1 - t0 < best[1]:
                best = (remote - (t0 + t1) / 2, t1 - t0)
    finally:
        stream.close(grace=5)
    out: dict[str, Any] = {"method": f"time requests over SSH, smallest round trip of {tries}"}
    if best is not None:
        out.update(offset_s=best[0], uncertainty_s=best[1] / 2)
    chrony = ex.run(["chronyc", "-c", "tracking"], timeout=30, check=False)
    if chrony.ok:
        fields = chrony.stdout.strip().split(",")
        if len(fields) > 4:
            out["chrony"] = {"reference": fields[1], "system_time_offset_s": float(fields[4])}
    return out


def close(parts: list[Part]) -> None:
    for part in parts:
        if part.executor is not None:
            part.executor.close()


def cleanup_host(store: Store, name: str, paths: Paths, run_id: str | None = None) -> list[str]:
    """`cleanup --host NAME`: the agent there removes what virtbench left (of one run, or all),
    under that host's own state; NAME is looked up in the newest run whose campaign lists it."""
    spec = next((HostSpec(**h) for r in store.runs(limit=1000) for h in (r.campaign or {}).get("hosts", [])
                 if isinstance(h, dict) and h.get("name") == name), None)
    if spec is None:
        raise InputError(f"no run in the store lists a host named {name!r}",
                         "give a host of a multi-host campaign run from this store (see `virtbench runs`)")
    part = Part(spec=spec, seed=0)
    part.executor = SSHExecutor(spec, paths.runtime)
    part.executor.open()
    try:
        res = part.executor.run(["find", spec.work_dir, "-maxdepth", "3", "-path", "*/venv-*/bin/virtbench",
                                 "-printf", "%T@ %p\n"], timeout=30, check=False)
        found = sorted((float(t), p) for t, p in (ln.split(" ", 1) for ln in res.stdout.splitlines() if " " in ln))
        if not found:
            return []  # virtbench never ran there: nothing of it to clean up
        part.agent = found[-1][1]  # the newest environment shipped there
        job: dict[str, Any] = {"mode": "cleanup",
                               "run_id": instance_run_id(run_id, name) if run_id else None}
        msgs = talk(part, job)
    finally:
        part.executor.close()
    end = msgs[-1] if msgs else {}
    if end.get("event") == "error":
        raise VirtbenchError(f"host {name}: cleanup failed: {end.get('message')}")
    return ([f"{name}: {line}" for line in end.get("removed", [])]
            + [NotRemoved(f"{name}: {line}") for line in end.get("not_removed", [])])
