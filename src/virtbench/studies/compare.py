"""The paper beside the user's runs: each published value matched to this host's, with its interval.

Every published value (studies/paper/<id>.yaml) is matched to the user's number from the same
rows and sections the ordinary report computes (ratios to the baseline with their intervals,
category geometric means, the density, migration and line sections), never from statistics
of its own beyond combining those intervals (studies/judge.py). Each gets a verdict (agrees,
differs, undecided at this scale, not measured here) decided by this host's interval, and for
a difference the likely reasons, read from the run's host facts against the paper's machine.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..analysis import tables
from ..analysis.summary import Row
from ..analysis.verdict import decide
from ..report import runinfo
from ..report.model import Report
from ..report.probes.energy import energy_rows
from . import judge as J
from . import paper as P
from .model import Study

VALUE_TOLERANCE = 0.2
"""An absolute value on other hardware agrees within +-20 % (context more than a test)."""


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


def walk(data: Any, path: str) -> Any:
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


def matches(entry: dict[str, Any], where: dict[str, Any]) -> bool:
    return all(str(entry.get(k)) == str(v) for k, v in where.items())


def relative_estimate(row: Row) -> J.Estimate | None:
    """A report row's ratio to the baseline with the interval its verdict was read from."""
    if row.relative is None:
        return None
    ci = tuple(row.relative_ci95) if row.relative_ci95 else None
    return J.Estimate(float(row.relative), ci, row.n, f"{row.n} repetitions")  # type: ignore[arg-type]


def against(row: Row, base: Row) -> J.Estimate | None:
    """A row's ratio to another row of the baseline (its run's rounds paired), by the report's
    own rule (analysis.verdict), with the 95 % interval a report row carries."""
    if not row.values or not base.values:
        return None
    v = decide(row.values, base.values, row.higher_is_better, rounds=row.rounds, base_rounds=base.rounds,
               confidence=0.95)
    if v.ratio is None:
        return None
    return J.Estimate(float(v.ratio), v.ci, row.n, f"{row.n} repetitions, against {base.benchmark}")


def mean_estimate(row: Row) -> J.Estimate | None:
    if row.mean is None:
        return None
    ci = tuple(row.ci95) if row.ci95 else None
    return J.Estimate(float(row.mean), ci, row.n, f"{row.n} repetitions")  # type: ignore[arg-type]


def as_paper_ran(params: dict[str, Any]) -> dict[str, Any]:
    """A pair point of a run across hosts named as the paper's point it measures: the container
    receiving TCP from the other host (`-R` to `server: {host}`) is the paper's `client: host, server:
    instance`; any other end on the other host is its `server: host`."""
    server = params.get("server")
    if not isinstance(server, dict):
        return params
    if params.get("mode") == "tcp-reverse" and params.get("client", "instance") == "instance":
        return {**params, "mode": "tcp", "client": "host", "server": "instance"}
    return {**params, "server": "host"}


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
                if row.host not in ("", "local"):
                    continue  # a run across hosts: the other host's own rows are not this host's
                b = points.get(row.benchmark)
                name = b.name if b else row.benchmark.split("[")[0]
                params = as_paper_ran((b.params if b else {}) or {})
                if (y.benchmark in (None, name, row.benchmark) and (y.metric is None or row.metric == y.metric)
                        and (y.platform is None or row.platform == y.platform)
                        and all(str(params.get(k)) == str(v) for k, v in y.params.items())):
                    out.append(row)
        return out

    def params_of(self, row: Row) -> dict[str, Any]:
        for pr in self.runs:
            for b in pr.report.run.benchmarks:
                if b.key == row.benchmark:
                    return dict(b.params or {})
        return {}

    def cpu_shares(self, y: P.Yours) -> list[tuple[Row, J.Estimate | None, float]]:
        """Each matching row, its ratio to native running alone, and the ratio the CPU alone
        predicts: its VM's usable CPUs against native's, min(threads, vCPUs, host CPUs / VMs at
        once) / min(threads, host CPUs) (the paper's Figs. 11-13 on a 4-core board: 1/4 for a
        1-vCPU VM; 1, 1/2, 1/4 for 1, 2, 4 VMs of 4 vCPUs). Native alone, because the paper's
        native bar is one run: the report's own ratio of N VMs is to native running N copies at
        once, which shares the CPUs as the VMs do (seen: 4 VMs at 0.25 predicted, read 1.0)."""
        out: list[tuple[Row, J.Estimate | None, float]] = []
        for pr in self.runs_of(y):
            cpus = runinfo.facts(pr.report.run).get("cpus")
            points = {b.key: b for b in pr.report.run.benchmarks}
            vcpus = {p.name: (p.config or {}).get("vcpus") for p in pr.report.run.platforms}
            alone = {(r.benchmark, r.metric): r for r in pr.report.rows if r.verdict == "baseline"}
            mine = {id(r) for r in self.rows(P.Yours(**{**y.model_dump(), "part": pr.part}))}
            for row in pr.report.rows:
                b = points.get(row.benchmark)
                threads = (b.params if b else {}).get("threads")
                match = re.search(r"instances=(\d+)", row.benchmark)
                v = vcpus.get(row.platform)
                if id(row) in mine and cpus and threads and v:
                    n = int(match.group(1)) if match else 1
                    base = alone.get((re.sub(r"instances=\d+", "instances=1", row.benchmark), row.metric))
                    est = relative_estimate(row) if n == 1 or base is None else against(row, base)
                    out.append((row, est, min(threads, v, cpus / n) / min(threads, cpus)))
        return out

    def entries(self, y: P.Yours, where: dict[str, Any]) -> list[tuple[dict[str, Any], PartRun]]:
        """The section entries of every run of the part that match `where`."""
        out = []
        for pr in self.runs_of(y):
            for sec in pr.report.sections:
                if sec.key != y.section:
                    continue
                data = sec.data if isinstance(sec.data, list) else (sec.data or {}).get("points", [])
                out += [(e, pr) for e in data if isinstance(e, dict) and matches(e, where)]
        return out

    def section_estimate(self, y: P.Yours, where: dict[str, Any]) -> J.Estimate | None:
        """The field over every matching run (several runs of a part pool into a t interval); one run
        whose entry keeps the field's rounds (`FIELD_rounds`) gives their mean and interval."""
        found = self.entries(y, where)
        field = y.field or ""
        if len(found) == 1:
            rounds = walk(found[0][0], f"{field}_rounds")
            if isinstance(rounds, list) and len(rounds) >= 2:
                return J.of_values([float(v) * y.factor for v in rounds], "rounds")
        values = [walk(e, field) for e, _ in found]
        return J.of_values([float(v) * y.factor for v in values if isinstance(v, (int, float))], "runs")

    def category_rows(self, spec: P.CategorySpec, of: str, y: P.Yours | None = None) -> dict[tuple[str, str], list[Row]]:
        """Each candidate of a kind in a paper category, (run id, platform) -> its rows: the
        category's metrics on this host, from the runs of `y.part` where the value names one
        (Table 6's runtimes from the part that runs them on one network mode, not the VM part's
        Docker beside a VM)."""
        out: dict[tuple[str, str], list[Row]] = {}
        for pr in self.runs if y is None else self.runs_of(y):
            infos = {i.name: i for i in runinfo.platform_infos(pr.report.run)}
            for name, info in infos.items():
                if info.kind != of or info.inside:
                    continue
                out[(pr.report.run.id, name)] = [
                    r for r in pr.report.rows if r.platform == name and r.host in ("", "local")
                    and r.benchmark.split("[")[0] in spec.benchmarks
                    and (spec.category is None or r.category == spec.category)
                    and (spec.metrics is None or r.metric in spec.metrics)]
        return out

    def category(self, spec: P.CategorySpec, of: str, y: P.Yours | None = None
                 ) -> tuple[J.Estimate | None, str | None, dict[str, J.Estimate]]:
        """Best platform of a kind in a paper category: (its geomean ratio with its interval, its type,
        every candidate's)."""
        values: dict[str, J.Estimate] = {}
        types = {(pr.report.run.id, i.name): i.type for pr in self.runs for i in runinfo.platform_infos(pr.report.run)}
        for key, rows in self.category_rows(spec, of, y).items():
            g = J.geomean([e for r in rows if (e := relative_estimate(r)) is not None])
            if g is not None and (types[key] not in values or g.value > values[types[key]].value):
                values[types[key]] = g
        if not values:
            return None, None, {}
        best = max(values, key=lambda t: values[t].value)
        return values[best], best, values

    def everything(self) -> P.CategorySpec:
        """Every benchmark of the runs as one category (an overall claim's)."""
        return P.CategorySpec(benchmarks=sorted({r.benchmark.split("[")[0] for pr in self.runs for r in pr.report.rows}))

    def overall(self, of: str) -> J.Estimate | None:
        return self.category(self.everything(), of)[0]

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
