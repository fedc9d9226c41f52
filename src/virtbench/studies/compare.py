"""The paper beside the user's runs: one report Section (report/model.py) per study report.

Every published value (studies/paper/<id>.yaml) is matched to the user's number, from the
same rows and sections the ordinary report computes (ratios to the baseline, category
geometric means, the density and line sections), never from statistics of its own. Each gets
a verdict, agrees / differs / not measured here, and for a difference the likely reasons,
read from the run's host facts against the paper's machine: AES instructions, a virtualized
host, memory, CPUs, storage and network, and whether the run was at quick scale.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..analysis import tables
from ..analysis.summary import Row, relative
from ..report import runinfo
from ..report.model import Report
from ..report.probes.energy import energy_rows
from . import paper as P
from .registry import Study

VALUE_TOLERANCE = 0.2
"""An absolute value on other hardware 'agrees' within +-20 % (it is context, not a test)."""


@dataclass
class PartRun:
    part: str
    """The part with its variant (density-hostram-2g), from the campaign name."""
    scale: str
    report: Report
    base: str | None = None
    """The study's part it is a run of (density-hostram), where known: `lsbs` is then not `lsbs-vm`."""


def part_of(study: Study, name: str) -> tuple[str, str]:
    """(part with variant, scale) of a run from its campaign name `study<ID>-<part>-<scale>`."""
    stem = name.removeprefix(f"study{study.id}-")
    part, _, scale = stem.rpartition("-")
    return (part, scale) if part and stem != name else (name, "")


def _walk(data: Any, path: str) -> Any:
    """a/b/c through mappings; in a list, the item any of whose values equals the step
    (`/`, not `.`: keys such as p99.999 hold dots)."""
    for step in path.split("/"):
        if isinstance(data, dict):
            data = data.get(step)
        elif isinstance(data, list):
            data = next((x for x in data if isinstance(x, dict) and step in map(str, x.values())), None)
        else:
            return None
    return data


def _matches(entry: dict[str, Any], where: dict[str, Any]) -> bool:
    return all(str(entry.get(k)) == str(v) for k, v in where.items())


class Matcher:
    """Finds the user's numbers for a paper value among the study's runs."""

    def __init__(self, runs: Sequence[PartRun]) -> None:
        self.runs = runs

    def runs_of(self, y: P.Yours) -> list[PartRun]:
        return [r for r in self.runs if y.part is None or r.part == y.part or r.base == y.part
                or r.base is None and r.part.startswith(f"{y.part}-")]

    def rows(self, y: P.Yours) -> list[Row]:
        """The report rows of the point: its results, or its energy rows (power_W, energy_J: the
        energy probe's part of the report, summarized like results)."""
        out = []
        for pr in self.runs_of(y):
            points = {b.key: b for b in pr.report.run.benchmarks}
            for row in [*pr.report.rows, *energy_rows(pr.report.sections)]:
                b = points.get(row.benchmark)
                name = b.name if b else row.benchmark.split("[")[0]
                params = (b.params if b else {}) or {}
                if (y.benchmark in (None, name, row.benchmark) and (y.metric is None or row.metric == y.metric)
                        and (y.platform is None or row.platform == y.platform)
                        and all(str(params.get(k)) == str(v) for k, v in y.params.items())):
                    out.append(row)
        return out

    def cpu_shares(self, y: P.Yours) -> list[tuple[Row, float]]:
        """Each matching row with the ratio the CPU alone predicts: its VM's usable CPUs against
        native's, min(threads, vCPUs, host CPUs / VMs at once) / min(threads, host CPUs) (the paper's
        Figs. 11-13 on a 4-core board: 1/4 for a 1-vCPU VM; 1, 1/2, 1/4 for 1, 2, 4 VMs of 4 vCPUs)."""
        out = []
        for pr in self.runs_of(y):
            cpus = runinfo.facts(pr.report.run).get("cpus")
            points = {b.key: b for b in pr.report.run.benchmarks}
            vcpus = {p.name: (p.config or {}).get("vcpus") for p in pr.report.run.platforms}
            mine = {id(r) for r in self.rows(P.Yours(**{**y.model_dump(), "part": pr.part}))}
            for row in pr.report.rows:
                b = points.get(row.benchmark)
                threads = (b.params if b else {}).get("threads")
                match = re.search(r"instances=(\d+)", row.benchmark)
                v = vcpus.get(row.platform)
                if id(row) in mine and cpus and threads and v:
                    n = int(match.group(1)) if match else 1
                    out.append((row, min(threads, v, cpus / n) / min(threads, cpus)))
        return out

    def section_value(self, y: P.Yours, where: dict[str, Any]) -> tuple[float | None, PartRun | None]:
        for pr in self.runs_of(y):
            for sec in pr.report.sections:
                if sec.key != y.section:
                    continue
                entries = sec.data if isinstance(sec.data, list) else (sec.data or {}).get("points", [])
                for e in entries:
                    if isinstance(e, dict) and _matches(e, where):
                        v = _walk(e, y.field or "")
                        if isinstance(v, (int, float)):
                            return float(v) * y.factor, pr
        return None, None

    def category(self, spec: P.CategorySpec, of: str, y: P.Yours | None = None
                 ) -> tuple[float | None, str | None, dict[str, float]]:
        """Best platform of a kind in a paper category: (its geomean ratio, its name, every candidate's),
        from the runs of `y.part` where the value names one (Table 6's runtimes from the part that runs
        them on one network mode, not the VM part's Docker beside a VM)."""
        values: dict[str, float] = {}
        for pr in self.runs if y is None else self.runs_of(y):
            infos = {i.name: i for i in runinfo.platform_infos(pr.report.run)}
            for name, info in infos.items():
                if info.kind != of or info.inside:
                    continue
                rel = [r.relative for r in pr.report.rows if r.platform == name and r.relative
                       and r.benchmark.split("[")[0] in spec.benchmarks
                       and (spec.category is None or r.category == spec.category)
                       and (spec.metrics is None or r.metric in spec.metrics)]
                g = tables.geomean(rel)
                if g is not None:
                    values[info.type] = max(g, values.get(info.type, 0.0))
        if not values:
            return None, None, {}
        best = max(values, key=values.__getitem__)
        return values[best], best, values

    def overall(self, of: str) -> float | None:
        spec = P.CategorySpec(benchmarks=sorted({r.benchmark.split("[")[0] for pr in self.runs for r in pr.report.rows}))
        return self.category(spec, of)[0]

    def stacks(self) -> list[tables.StackRow]:
        return [s for pr in self.runs for s in tables.stack_predictions(pr.report.rows, runinfo.platform_infos(pr.report.run))]


def reasons(value: P.PaperValue, facts: dict[str, Any], host: P.PaperHost, quick: bool) -> list[str]:
    """Likely reasons for a difference: what differs between this host and the paper's."""
    out = []
    for d in value.depends:
        aes = host.aes if value.paper_aes is None else value.paper_aes
        if d == "aes" and bool(facts.get("aes")) != aes:
            out.append(f"AES instructions: {'yes' if facts.get('aes') else 'none'} here, "
                       f"{'yes' if aes else 'none'} on the paper's machine")
        elif d == "virtualized" and (facts.get("virtualization") or {}).get("vm", "none") not in ("none", "", None):
            out.append(f"this host is itself a VM ({facts['virtualization']['vm']}): the baseline is virtualized too")
        elif d == "memory" and facts.get("memory_bytes"):
            gib = facts["memory_bytes"] / 2**30
            if not 0.67 < gib / host.memory_gib < 1.5:
                out.append(f"memory: {gib:.0f} GiB here, {host.memory_gib:g} GiB on the paper's machine")
        elif d == "cpus" and facts.get("cpus") and facts["cpus"] != host.cpus:
            out.append(f"CPUs: {facts['cpus']} here, {host.cpus} on the paper's machine ({host.arch})")
        elif d == "storage":
            out.append("storage: a different disk and filesystem" + (" (a VM's virtual disk here)"
                       if (facts.get("virtualization") or {}).get("vm", "none") != "none" else ""))
        elif d == "network":
            out.append("network: veth/loopback inside one host here, physical NICs in the paper")
        elif d == "quick" and quick:
            out.append("quick scale: smaller sizes, counts and durations than the paper's")
    return out or ["different hardware and software versions"]


def fmt(v: float | None, unit: str = "") -> str:
    if v is None:
        return "-"
    text = f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"
    return f"{text} {unit}".strip()


def judge(value: P.PaperValue, m: Matcher, caps: dict[str, str], cats: dict[str, P.CategorySpec]) -> dict[str, Any]:
    """One paper value beside the user's: {paper, yours, verdict, detail}."""
    y, pv, kind = value.yours, value.paper, value.kind
    out: dict[str, Any] = {"paper": None, "yours": None, "verdict": "not measured here", "detail": "", "ci": None}
    if value.needs:
        out["detail"] = f"needs {value.needs.replace('_', ' ')}" + (f": {caps[value.needs]}" if value.needs in caps else "")
    ci: list[float] | None = None
    if kind == "relative":
        out["paper"] = relative(pv["value"], pv["baseline"], value.higher_is_better)
        if y is not None and y.section:
            v, _ = m.section_value(y, y.where)
            b, _ = m.section_value(y, y.baseline or {})
            out["yours"] = relative(v, b, value.higher_is_better) if v and b else None
        elif y is not None:
            rows = [r for r in m.rows(y) if r.relative]
            out["yours"] = tables.geomean([r.relative for r in rows])  # type: ignore[misc]
            ci = rows[0].relative_ci95 if len(rows) == 1 else None
            out["ci"] = ci
        if out["yours"] is not None:
            tol, paper = value.tolerance, out["paper"]
            near = abs(out["yours"] - paper) <= tol
            noisy = bool(ci and ci[0] - tol <= paper <= ci[1] + tol) and not near
            out["verdict"] = "agrees" if near else "inconclusive" if noisy else "differs"
            out["detail"] = f"ratio {out['yours']:.3f} here" + (f" [95% {ci[0]:.3f}-{ci[1]:.3f}]" if ci else "") + \
                f", {paper:.3f} in the paper" + (": the paper's value is inside this host's interval; more "
                                                  "repetitions (--scale paper) decide it" if noisy else "")
    elif kind == "value":
        out["paper"] = pv.get("value")
        if y is not None and y.section:
            out["yours"], _ = m.section_value(y, y.where)
        elif y is not None:
            means = [r.mean for r in m.rows(y) if r.mean is not None]
            out["yours"] = means[0] * y.factor if means else None
        if out["yours"] is not None and out["paper"]:
            out["verdict"] = "agrees" if abs(out["yours"] / out["paper"] - 1) <= VALUE_TOLERANCE else "differs"
            out["detail"] = f"{fmt(out['yours'], value.unit)} here, {fmt(out['paper'], value.unit)} in the paper"
    elif kind == "range":
        lo, hi = pv["low"], pv["high"]
        out["paper"] = [lo, hi]
        spec = cats.get(value.category or "")
        if spec is not None and value.of:
            v, best, _ = m.category(spec, value.of, y)
            out["yours"] = v
            if v is not None:
                out["verdict"] = "agrees" if lo <= v <= hi else "differs"
                side = "inside" if lo <= v <= hi else "above" if v > hi else "below"
                out["detail"] = f"best {value.of} here ({best}) {v:.2f}, {side} the paper's {lo:.2f}-{hi:.2f}"
    elif kind == "best":
        out["paper"] = pv.get("best")
        spec = cats.get(value.category or "")
        if spec is not None and value.of:
            _, best, values = m.category(spec, value.of, y)
            names = {k.lower(): k for k in pv if k != "best"}
            alias = {"qemu": "proxmox", "kubernetes": "k0s"}  # the paper's column of a platform type
            known = {names.get(t, names.get(alias.get(t, ""))): g for t, g in values.items()}
            known.pop(None, None)
            if len(known) >= 2:
                ranked = sorted(known, key=known.__getitem__, reverse=True)
                tie = known[ranked[0]] - known[ranked[1]] <= tables.TIE * known[ranked[0]]
                out["yours"] = "tie" if tie else ranked[0]
                out["verdict"] = "agrees" if out["yours"] == out["paper"] else "differs"
                out["detail"] = ", ".join(f"{k} {g:.3f}" for k, g in known.items())
            elif known:
                out["detail"] = f"only {next(iter(known))} measured here: nothing to rank"
    elif kind == "claim":
        out["paper"] = value.claim
        e = value.expect
        if y is not None and y.overall:
            v = m.overall(y.overall)
            out["yours"] = v
            if v is not None and e is not None and e.near is not None:
                out["verdict"] = "agrees" if abs(v - e.near) <= e.tolerance else "differs"
                out["detail"] = f"best {y.overall} here: {v:.3f} of the baseline over every metric"
        elif y is not None and y.stacks:
            stacks = m.stacks()
            errs = [s.error for s in stacks if getattr(s, "error", None) is not None]
            if errs:
                out["yours"] = max(errs, key=abs)
                out["verdict"] = "agrees" if abs(out["yours"]) <= 0.1 else "differs"
                out["detail"] = f"largest prediction error here {out['yours']:+.1%} over {len(errs)} stacked cells"
        elif y is not None and e is not None and e.cpu_share:
            shares = [(r, x) for r, x in m.cpu_shares(y) if r.relative]
            if shares:
                rels = [float(r.relative or 0) for r, _ in shares]
                out["yours"] = [min(rels), max(rels)]
                off = [(r, x) for r, x in shares if abs(float(r.relative or 0) / x - 1) > e.tolerance]
                out["verdict"] = "differs" if off else "agrees"
                out["detail"] = (f"ratios {min(rels):.3f}-{max(rels):.3f} here over {len(rels)} points; the CPU shares "
                                 "predict " + ", ".join(f"{r.benchmark} {x:.2f}" for r, x in shares)
                                 + ("; off: " + ", ".join(f"{r.benchmark} {float(r.relative or 0):.2f}" for r, _ in off)
                                    if off else ""))
        elif y is not None:
            rows = [r for r in m.rows(y) if r.relative]
            if rows:
                rels = [float(r.relative or 0) for r in rows]
                out["yours"] = [min(rels), max(rels)]
                out["detail"] = f"ratios {min(rels):.3f}-{max(rels):.3f} here over {len(rels)} points"
                out["verdict"] = _claim_verdict(rows, e) if e is not None else "see ratios"
    if out["verdict"] == "not measured here" and y is not None and y.part and m.runs_of(y):
        quick = any(r.scale == "quick" for r in m.runs_of(y))
        out["detail"] = f"part {y.part} ran without this point" + (" (quick scale: --scale paper runs it)" if quick else "")
    if out["verdict"] == "not measured here" and not out["detail"]:
        out["detail"] = "nothing in the given runs measures it" + (
            " (a VM: needs a KVM guest)" if "kvm" in value.depends or value.of == "vm" else "")
    return out


def _claim_verdict(rows: Sequence[Row], e: P.Expect) -> str:
    """A claim over several ratios, judged from the cells the report decided (its verdicts):
    violated by one decided cell = differs; all decided and none violates = agrees."""
    decided = [r for r in rows if r.verdict in ("same", "slower", "faster")]
    if e.within is not None:
        bad = [r for r in decided if r.verdict != "same" and abs((r.relative or 1) - 1) > e.within]
    elif e.below is not None:
        bad = [r for r in decided if r.verdict != "slower" and (r.relative or 0) >= e.below]
    else:
        return "see ratios"
    return "differs" if bad else "agrees" if len(decided) == len(rows) else "inconclusive"
