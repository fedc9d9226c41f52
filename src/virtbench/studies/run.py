"""Run a study: its parts' shipped campaigns through the ordinary runner, one run each.

One run per campaign file, not one grouped run: a campaign has one experiment kind and the
parts of a study are of different kinds (density, migration, benchmarks), and separate runs
keep each part resumable (`virtbench run --resume`) and reportable on its own. The study
report takes the runs back (`virtbench study report ID RUN...`) and knows each run's part
by its campaign name (`study<ID>-<part>-<scale>`).

Nothing is skipped silently: a part whose capability is missing (KVM, a second host, a
meter), a platform this host cannot run (left out of the campaign, recorded with the run like
the quick campaign's), a baseline that cannot run, and a host check of the experiment kind
that refuses (its one line) are each logged and returned with the reason and the fix. A part
asked for by name (`--part`) that cannot run is an error instead: one line, exit 2.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import Campaign, check_host, load_yaml, parse_campaign
from ..config.consent import require_consent
from ..errors import InputError
from ..experiments.registry import DEFAULT as DEFAULT_EXPERIMENT
from ..experiments.registry import EXPERIMENTS
from ..registry import PLATFORMS
from . import options as O
from .capabilities import Capabilities
from .registry import SHIPPED, Part, Study


@dataclass
class Planned:
    """One campaign of a part: ready to run, or skipped with its reason."""

    part: str
    stem: str
    path: Path
    campaign: Campaign | None = None
    source: str = ""
    left_out: list[dict[str, str]] = field(default_factory=list)
    skipped: str = ""
    fix: str = ""


@dataclass
class Done:
    part: str
    campaign: str
    run_id: str | None = None
    seconds: float = 0.0
    executions: int = 0
    failed: int = 0
    skipped: str = ""
    fix: str = ""
    left_out: list[dict[str, str]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {"part": self.part, "campaign": self.campaign, "run_id": self.run_id, "seconds": round(self.seconds, 1),
                "executions": self.executions, "failed": self.failed, "skipped": self.skipped or None,
                "fix": self.fix or None, "left_out": self.left_out}


def _entry(raw: Any) -> tuple[str, str, dict[str, Any]]:
    """(name, type, mapping) of a platform as written in a campaign file."""
    data = {"name": raw} if isinstance(raw, str) else dict(raw)
    return str(data["name"]), str(data.get("type", data["name"])), data


def available_platforms(data: dict[str, Any], caps: Capabilities) -> tuple[list[Any], list[dict[str, str]]]:
    """The campaign's platforms this host runs, and each one left out with reason and fix.

    A VM that would use KVM runs only where a KVM guest boots (under TCG it would measure an
    emulator); a platform stacked inside a left-out VM goes with it."""
    kind = EXPERIMENTS.get(data.get("experiment", DEFAULT_EXPERIMENT))
    entries = [_entry(p) for p in data.get("platforms") or []]
    verdicts = caps.platforms([t for _, t, _ in entries if t in PLATFORMS.names() and t not in kind.node_types])
    keep, left_out, gone = [], [], set()
    for (name, ptype, spec), raw in zip(entries, data.get("platforms") or []):
        why = None
        if spec.get("inside") in gone:
            why = {"reason": f"runs inside {spec['inside']}, which is left out", "fix": ""}
        elif ptype in verdicts and not verdicts[ptype].available:
            why = {"reason": verdicts[ptype].reason, "fix": verdicts[ptype].fix}
        elif ptype in PLATFORMS.names() and (gap := PLATFORMS.get(ptype).entry_gap(spec)) is not None:
            why = {"reason": gap.reason, "fix": gap.fix}
        elif ptype in PLATFORMS.names() and PLATFORMS.get(ptype).uses_kvm(spec) and not caps.check("kvm").available:
            kvm = caps.check("kvm")
            why = {"reason": f"KVM does not work here ({kvm.reason})", "fix": kvm.fix}
        if why:
            gone.add(name)
            left_out.append({"platform": name, **why})
        else:
            keep.append(raw)
    return keep, left_out


SECOND_HOST = "node2"
"""The name shipped campaigns give the second host; `--hosts NAME` takes its place."""


def with_second_host(data: Any, name: str) -> Any:
    """The campaign with the placeholder second host replaced by the user's, in `hosts:` and in
    every `server: {host: ...}`."""
    if isinstance(data, dict):
        out = {k: with_second_host(v, name) for k, v in data.items()}
        if out.get("host") == SECOND_HOST:
            out["host"] = name
        if isinstance(out.get("hosts"), list):
            out["hosts"] = [name if h == SECOND_HOST else h for h in out["hosts"]]
        return out
    if isinstance(data, list):
        return [with_second_host(v, name) for v in data]
    return data


def with_migration_host(data: Any, name: str) -> Any:
    """A migration campaign moving its containers to the user's second host (`--hosts NAME`),
    as the paper moved them between two nodes, instead of to a directory of this host."""
    if data.get("experiment") != "migration":
        return data
    section = dict(data.get("migration") or {})
    return {**data, "hosts": ["local", name], "migration": {**section, "to": {"host": name}}}


def with_host_specs(data: Any, specs: Mapping[str, dict[str, Any]]) -> Any:
    """The campaign's `hosts:` with each host named in `study run --inventory` written out (how to
    reach it), so the run reaches it as the inventory says."""
    if not specs or not isinstance(data.get("hosts"), list):
        return data
    return {**data, "hosts": [specs.get(h, h) if isinstance(h, str) else h for h in data["hosts"]]}


def with_meter(data: Any, argv: Sequence[str]) -> Any:
    """The campaign with the user's meter (`--meter`) in its energy probe."""
    probes = []
    for p in data.get("probes") or []:
        entry = {"name": p} if isinstance(p, str) else dict(p)
        probes.append({**entry, "meter": list(argv)} if entry.get("name") == "energy" else p)
    return {**data, "probes": probes} if probes else data


def with_control_host(data: Any, name: str) -> Any:
    """A suite whose network tests' other end is this host (001's other machine, 003's control
    system) with that end on the user's second host instead: `server: host` becomes `server: {host:
    NAME}`; a container receiving TCP from the host becomes a client receiving from NAME (`-R`); the
    platforms use their host's network, as pairs across hosts need. UDP towards the container stays
    on this host (iperf3 has no reverse UDP mode here). The other host runs the suite too: its rows
    are its own, the study compares this host's."""
    benchmarks, moved = [], False
    for b in data.get("benchmarks") or []:
        entry = {"name": b} if isinstance(b, str) else dict(b)
        bench = entry.get("name")
        server, client = entry.get("server"), entry.get("client", "instance")
        if bench in ("iperf3", "ping", "sockperf") and server == "host" and client == "instance":
            entry["server"], moved = {"host": name}, True
        elif bench == "iperf3" and server == "instance" and client == "host" and entry.get("mode", "tcp") == "tcp":
            entry.update(client="instance", server={"host": name}, mode="tcp-reverse")
            moved = True
        benchmarks.append(entry)
    if not moved:
        return data
    platforms = []
    for p in data.get("platforms") or []:
        entry = {"name": p} if isinstance(p, str) else dict(p)
        if entry.get("type", entry["name"]) != "native":
            entry["network"] = "host"
        platforms.append(entry)
    return {**data, "hosts": ["local", name], "benchmarks": benchmarks, "platforms": platforms}


def sized_to_host(data: Any, names: Sequence[str]) -> Any:
    """003's VM given every CPU of this host and 60 % of its memory (the paper gave it the most
    available; the rest stays for the host and the network tests' second VM)."""
    import os

    from ..hostinfo import meminfo

    memory = max(2 << 30, int(meminfo().get("MemTotal", 0) * 0.6) // (256 << 20) * (256 << 20))
    platforms = []
    for p in data.get("platforms") or []:
        entry = {"name": p} if isinstance(p, str) else dict(p)
        if entry["name"] in names:
            entry.update(vcpus=os.cpu_count() or 1, memory=f"{memory >> 20}M")
        platforms.append(entry)
    return {**data, "platforms": platforms}


def plan(study: Study, scale: str, caps: Capabilities, parts: Sequence[str] = (),
         options: Sequence[str] = ()) -> list[Planned]:
    """What runs and what is skipped (and why), before anything starts."""
    chosen: list[Part] = [study.part(p) for p in parts] if parts else list(study.parts)
    asked = O.check(tuple(options), chosen, study)
    out: list[Planned] = []
    for part in chosen:
        stems = part.campaign_stems(study.id, scale)
        if not stems:
            none = "no campaign for this part in this version" + (
                f" (it needs {', '.join(part.needs).replace('_', ' ')})" if part.needs else "")
            if parts:
                raise InputError(f"study {study.id} part {part.name}: {none}", part.differs or None)
            out.append(Planned(part.name, f"study{study.id}-{part.name}", SHIPPED, skipped=none, fix=part.differs))
            continue
        missing = [(c, caps.check(c)) for c in part.needs if not caps.check(c).available]
        if missing:
            cap, verdict = missing[0]
            if parts:
                raise InputError(f"study {study.id} part {part.name} needs {cap.replace('_', ' ')}: {verdict.reason}",
                                 verdict.fix or "run it on a host that has it")
            out += [Planned(part.name, s, SHIPPED / f"{s}.yaml", skipped=f"needs {cap.replace('_', ' ')}: "
                            f"{verdict.reason}", fix=verdict.fix) for s in stems]
            continue
        for stem in stems:
            path = SHIPPED / f"{stem}.yaml"
            source = path.read_text()
            data = load_yaml(source, str(path))
            second = next((h for h in caps.hosts if h not in ("local", "localhost")), None)
            if "hosts" in data and second:
                data = with_second_host(data, second)
            elif second and data.get("experiment") == "migration":
                data = with_migration_host(data, second)
            elif second and part.hosts:
                data = with_control_host(data, second)
            data = O.apply(asked, part, data)
            if scale == "paper" and part.size_to_host:
                data = sized_to_host(data, part.size_to_host)
            data = with_host_specs(data, caps.specs)
            if caps.meter:
                data = with_meter(data, caps.meter)
            keep, left_out = available_platforms(data, caps)
            planned = Planned(part.name, stem, path, source=source, left_out=left_out)
            baseline = data.get("baseline", EXPERIMENTS.get(data.get("experiment", DEFAULT_EXPERIMENT)).default_baseline)
            base_out = next((x for x in left_out if x["platform"] == baseline), None)
            if base_out or not keep:
                why = base_out or (left_out[0] if left_out else {"platform": "-", "reason": "no platform", "fix": ""})
                planned.skipped = f"platform {why['platform']} cannot run here: {why['reason']}"
                planned.fix = why["fix"]
            elif baseline and all(_entry(p)[0] == baseline for p in keep):
                planned.skipped = "nothing to compare with the baseline: " + "; ".join(
                    f"{x['platform']}: {x['reason']}" for x in left_out)
                planned.fix = next((x["fix"] for x in left_out if x["fix"]), "")
            else:
                planned.campaign = parse_campaign({**data, "platforms": keep}, str(path))
                require_consent(planned.campaign, bool(caps.meter))  # --meter is the user's consent, as --allow-meter
                try:  # what this host cannot give (a paper's 8 GiB host_memory on a 4 GiB one): skipped with why
                    check_host(planned.campaign, caps.paths)
                except InputError as exc:
                    planned.campaign, planned.skipped, planned.fix = None, exc.message, exc.fix or ""
            if planned.skipped and parts:
                raise InputError(f"study {study.id} part {part.name}: {planned.skipped}", planned.fix or None)
            out.append(planned)
    return out


def run(store: Any, planned: Sequence[Planned], paths: Any, reporter: Any,
        log: Callable[[str], None]) -> list[Done]:
    """Run every planned campaign in order; the skipped ones are logged with their reason."""
    from ..runner import execute

    done: list[Done] = []
    for p in planned:
        for x in p.left_out:
            log(f"{p.stem}: leaving out {x['platform']}: {x['reason']}" + (f" (fix: {x['fix']})" if x["fix"] else ""))
        if p.skipped or p.campaign is None:
            log(f"skipping {p.stem}: {p.skipped}" + (f" (fix: {p.fix})" if p.fix else ""))
            done.append(Done(p.part, p.stem, skipped=p.skipped, fix=p.fix, left_out=p.left_out))
            continue
        log(f"part {p.part}: campaign {p.stem} ({p.path})")
        t0 = time.monotonic()
        try:
            outcome = execute.start(store, p.campaign, paths, source=p.source, reporter=reporter,
                                    left_out=p.left_out or None)
        except InputError as exc:  # a host check of the kind refused: this host cannot run the part
            log(f"skipping {p.stem}: {exc.message}" + (f" (fix: {exc.fix})" if exc.fix else ""))
            done.append(Done(p.part, p.stem, seconds=time.monotonic() - t0, skipped=exc.message, fix=exc.fix or "",
                             left_out=p.left_out))
            continue
        done.append(Done(p.part, p.stem, outcome.run_id, time.monotonic() - t0, outcome.executions, outcome.failed,
                         left_out=p.left_out))
        if outcome.interrupted:
            break
    return done
