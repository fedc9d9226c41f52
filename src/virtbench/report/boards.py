"""The host's hardware as the numbers depend on it, and the samples a board spoiled itself.

Every run says which architecture and CPU it ran on, whether the CPU has AES (and the other
crypto instructions: the studies saw AES support change results 22-41x), the board, what
the scratch directory is stored on, and whether the host is emulated (a TCG guest measures
an emulator, never the board it imitates). Executions during which the board throttled or
was under-powered carry a 'throttle' attachment; `flag_rows` marks their results with a
quality warning, since they measured the power supply and cooling, not the platform.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from ..analysis.summary import Row
from ..boards import emulated
from ..store.db import Store
from ..store.models import Run
from . import runinfo
from .model import Section, Table


def hardware(facts: dict[str, Any]) -> dict[str, Any]:
    """The facts of one host that a board user compares first."""
    virt = facts.get("virtualization") or {}
    vm = str(virt.get("vm") or "none")
    crypto = facts.get("crypto") or {"aes": bool(facts.get("aes"))}
    return {"hostname": facts.get("hostname", ""), "arch": facts.get("arch", ""), "cpu": facts.get("cpu_model", ""),
            "cpus": facts.get("cpus"), "board": facts.get("board", ""), "aes": bool(crypto.get("aes")),
            "crypto": crypto, "storage": (facts.get("storage") or {}).get("kind", ""),
            "virtualized": vm, "emulated": emulated(vm)}


def throttled(store: Store, run: Run) -> list[dict[str, Any]]:
    """Each execution during which the board throttled, with why."""
    atts = store.attachments(run.id, kind="throttle")
    if not atts:
        return []
    execs = {e.id: e for e in store.executions(run.id)}
    out = []
    for a in atts:
        e = execs.get(a.execution_id)
        if e is not None:
            out.append({"host": getattr(e, "host", None) or "local", "platform": e.platform,
                        "benchmark": e.benchmark, "round": e.round, "warmup": e.warmup,
                        "why": list(a.json().get("why", []))})
    return out


def flag_rows(rows: Sequence[Row], events: Sequence[dict[str, Any]]) -> None:
    """A 'throttle' quality warning on every result whose samples include a throttled one."""
    by_cell: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for ev in events:
        if not ev["warmup"]:
            by_cell[(ev.get("host") or "local", ev["platform"], ev["benchmark"])].append(ev)
    for r in rows:  # rows of a multi-host run carry their host
        evs = by_cell.get((getattr(r, "host", None) or "local", r.platform, r.benchmark))
        if evs:
            why = sorted({w for ev in evs for w in ev["why"]})
            rounds = ", ".join(str(ev["round"]) for ev in evs[:8])
            r.quality.append({"check": "throttle", "severity": "warn", "value": float(len(evs)),
                              "message": f"the board throttled during {len(evs)} sample(s) (round {rounds}): "
                                         f"{'; '.join(why)}; they measured its cooling or power supply"})


def host_facts(run: Run) -> list[tuple[str, dict[str, Any]]]:
    """(host name, facts) of every host of the run: each host's own facts as its agent read
    them in a multi-host run (provenance.hosts), else this run's host."""
    info = (run.provenance or {}).get("hosts") or {}
    out = [(name, (h or {}).get("facts") or {}) for name, h in info.items()]
    out = [(name, f or (runinfo.facts(run) if name == "local" else {})) for name, f in out]
    return out or [(str(runinfo.facts(run).get("hostname") or "local"), runinfo.facts(run))]


def measured_on(run: Run) -> dict[str, Any]:
    """The facts of the host the numbers were measured on when there is one: a campaign whose
    only host is a board reached over SSH measured the board, not the controller that ran
    virtbench; several hosts keep the controller's facts here (each host is described apart)."""
    hosts = host_facts(run)
    return dict(hosts[0][1]) if len(hosts) == 1 and hosts[0][1] else runinfo.facts(run)


def build(store: Store, run: Run) -> Section | None:
    hosts = {name: hardware(f) for name, f in host_facts(run)}
    events = throttled(store, run)
    rows, notes = [], []
    for name, hw in hosts.items():
        crypto = ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in hw["crypto"].items())
        rows.append([name, hw["arch"] or "?", hw["cpu"] or "?", "yes" if hw["aes"] else "no", crypto,
                     hw["board"] or "-", hw["storage"] or "-",
                     "emulated (QEMU TCG)" if hw["emulated"] else hw["virtualized"]])
        if hw["emulated"]:
            notes.append(f"{name} is an emulated {hw['arch']} machine (QEMU without KVM): its numbers measure "
                         "the emulator on its host's CPU, not a real board")
    if events:
        notes.append(f"{len(events)} execution(s) ran while the board throttled; their results carry a "
                     "'throttle' warning")
    table = Table("what each host measured on", ["host", "arch", "CPU", "AES", "crypto extensions", "board",
                                                 "scratch storage", "virtualized"], rows)
    return Section("hardware", "Host hardware", {"hosts": hosts, "throttled": events}, [table], notes=notes)
