"""A study's report: its runs' ordinary reports, led by one Section with the paper beside them.

The runs' own parts (ratio tables, category tables (Tables 5/6/7 style), stack predictions
(Fig. 4), sweeps by threads/clients/sizes (001's Figs. 2/3, 000's network figures), density
and migration curves (000's Figs. 4-12), NDR/PDR and HDR figures (004)) come from the report
model unchanged; this module adds the section `study`: every published value beside the
user's with a verdict decided by this host's interval (studies/judge.py), the likely reason of
a difference, the command that would measure what was not, every difference of the presets
from the paper that held for these runs, and figures of the paper's numbers next to the user's.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..report import runinfo
from ..report.figures import FigureSpec
from ..report.model import Report, Section, Table
from . import compare as C
from . import judge as J
from . import options as O
from . import paper as P
from . import verdicts as V
from .figures import figures
from .model import Difference, Part, Study
from .scales import quick_changes


def part_runs(study: Study, reports: Sequence[Report]) -> list[C.PartRun]:
    """Each report with its part and scale (from the campaign name), checked to be the study's."""
    out = []
    for rep in reports:
        part, scale = C.part_of(study, rep.run.name)
        if not scale:
            raise InputError(f"run {rep.run.id} is campaign {rep.run.name!r}, not a part of study {study.id}",
                             f"give runs of `virtbench study run {study.id}` (campaigns study{study.id}-...)")
        base = next((p.name for p in study.parts if part in (p.name, *(f"{p.name}-{v}" for v in p.variants if v))),
                    None)
        out.append(C.PartRun(part, scale, rep, base))
    return out


def source(v: P.PaperValue) -> str:
    return f"{v.where}, §{v.section}" if not v.where.startswith("Section") else f"§{v.section}"


def cell(x: Any, unit: str = "") -> str:
    if isinstance(x, list):
        return "-".join(C.fmt(v) if isinstance(v, (int, float)) else str(v) for v in x)
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return C.fmt(float(x), unit)
    return "-" if x is None else str(x)


def two_host_parts(runs: Sequence[C.PartRun]) -> set[str]:
    """The parts whose runs used a second host (a migration's `to: {host}`, a campaign's other
    hosts): their one-host differences did not happen."""
    out = set()
    for r in runs:
        campaign = r.report.run.campaign or {}
        if any(h.get("name") not in ("local", "localhost") for h in campaign.get("hosts") or []
               if isinstance(h, dict)):
            out.add(r.base or r.part)
    return out


def applying(study: Study, runs: Sequence[C.PartRun] = ()) -> dict[str, tuple[Difference, ...]]:
    """Each part's differences that hold for these runs: without runs of a part, all but those of a
    run across hosts; with runs, not the one-host ones of a run across hosts (nor the across-hosts ones
    of a run on one host), not those an option removed, and those of a scale only when a run was at it."""
    two = two_host_parts(runs)
    used: dict[str, set[str]] = {}
    scales: dict[str, set[str]] = {}
    for r in runs:
        name = r.base or r.part
        used.setdefault(name, set()).update(O.used(r.report.run.campaign or {}))
        scales.setdefault(name, set()).add(r.scale)
    out = {}
    for p in study.parts:
        out[p.name] = tuple(d for d in p.differences
                            if not (d.one_host and p.name in two) and not (d.hosts_only and p.name not in two)
                            and not (d.option and d.option in used.get(p.name, ()))
                            and (p.name not in scales or scales[p.name] & set(d.scales)))
    return out


def differences_by_value(study: Study, runs: Sequence[C.PartRun] = ()) -> dict[str, list[tuple[str, Difference]]]:
    """Each paper value's id -> the deliberate differences that bear on it, of the part that measures it
    (a run of one part does not carry another part's differences), each listed once."""
    out: dict[str, list[tuple[str, Difference]]] = {}
    held = applying(study, runs)
    owner = {v.id: part_for(study, v).name for v in P.load(study.id).values}
    for part in study.parts:
        for d in held[part.name]:
            for vid in d.affects:  # a difference of the part that measures the value (the others' ran elsewhere)
                if owner.get(vid, part.name) == part.name and all(d.what != seen.what for _, seen in out.get(vid, [])):
                    out.setdefault(vid, []).append((part.name, d))
    return out


def command_notes(study: Study, runs: Sequence[C.PartRun] = ()) -> list[str]:
    """The paper's commands of each part, every difference of its presets that held for these runs,
    and what a quick run changed."""
    held = applying(study, runs)
    scales = {(r.base or r.part): r.scale for r in runs}
    notes = []
    for part in study.parts:
        for c in part.commands:
            notes.append(f"{part.name}: the paper's command ({c.where}): `{c.text()}`" + (f" ({c.note})" if c.note else "")
                         + ".")
        for d in held[part.name]:
            notes.append(f"{part.name} differs: {d.line()}.")
        if scales.get(part.name) == "quick":
            notes.append(f"{part.name} at quick scale: " + "; ".join(quick_changes(study.id, part.name)) + ".")
    return notes


def part_for(study: Study, value: P.PaperValue) -> Part:
    """The part that measures a value: the one it names, the one whose kind or benchmarks it reads,
    or the one whose differences bear on it."""
    y = value.yours
    if y is not None and y.part:
        exact = [p for p in study.parts if p.name == y.part]
        return exact[0] if exact else next(p for p in study.parts if y.part in (f"{p.name}-{v}" for v in p.variants))
    named = [p for p in study.parts for d in p.differences if value.id in d.affects]
    if y is not None and (y.overall == "vm" or y.stacks or value.of == "vm"):
        return next((p for p in study.parts if "kvm" in p.needs), study.parts[0])
    if y is not None and y.benchmark:
        from .scales import presets

        for p in study.parts:
            if any(b.name == y.benchmark for c in presets(study.id, p.name) for b in c.benchmarks):
                return p
    return named[0] if named else study.parts[0]


def measure_command(study: Study, value: P.PaperValue, runs: Sequence[C.PartRun]) -> str:
    """The command that would measure a value this report has no number for."""
    part = part_for(study, value)
    cmd = f"virtbench study run {study.id} --part {part.name}"
    if "second_host" in part.needs or value.needs == "second_host" or value.judge == "migration-storage":
        cmd += " --hosts NAME"
    if "meter" in part.needs:
        cmd += " --meter CMD"
    if any(r.scale == "quick" for r in runs if (r.base or r.part) == part.name) or not value.yours:
        cmd += " --scale paper"
    need: str = value.needs or (part.needs[0] if part.needs else "")
    where = {"kvm": " on a host where KVM works", "pmu": " on a host with hardware counters"}.get(need, "")
    return f"`{cmd}`{where}"


def comparisons(study: Study, runs: Sequence[C.PartRun], caps: dict[str, str] | None = None
                ) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """Every published value judged: the JSON entries, and each id's raw result (for the figures)."""
    pv = P.load(study.id)
    facts = runinfo.facts(runs[0].report.run) if runs else {}
    matcher = C.Matcher(runs)
    quick = any(r.scale == "quick" for r in runs)
    diffs = differences_by_value(study, runs)
    data, judged = [], {}
    for v in pv.values:
        j = V.judge(v, matcher, caps or {}, pv.categories, pv.repetitions)
        if j["verdict"] == J.NOT_MEASURED:
            ran = v.yours is not None and v.yours.part and matcher.runs_of(v.yours)
            head = (f"part {v.yours.part} ran without this point" if ran and v.yours else j["detail"] or
                    ("nothing in the given runs measures it" if runs else "no run given"))
            j["detail"] = (f"{head}; {v.how}" if v.how else f"{head}; {measure_command(study, v, runs)} measures it"
                           if v.yours else f"{head}; no preset measures it (see the differences)")
        why = C.reasons(v, facts, pv.host, quick) if j["verdict"] == J.DIFFERS else []
        judged[v.id] = j
        data.append({"id": v.id, "source": {"where": v.where, "section": v.section, "page": None}, "kind": v.kind,
                     "quantity": v.label(), "unit": v.unit, "higher_is_better": v.higher_is_better,
                     "paper": j["paper"], "yours": j["yours"], "ci95": j["ci"], "verdict": j["verdict"],
                     "detail": j["detail"], "likely_reasons": why, "part": part_for(study, v).name,
                     "differences": [d.as_json(part) for part, d in diffs.get(v.id, [])]})
    return data, judged


def build(study: Study, runs: Sequence[C.PartRun], caps: dict[str, str] | None = None) -> Section:
    """The `study` section: every published value beside the user's, verdicts, reasons, figures."""
    pv = P.load(study.id)
    facts = runinfo.facts(runs[0].report.run) if runs else {}
    data, judged = comparisons(study, runs, caps)
    held = applying(study, runs)
    counts = Counter(d["verdict"] for d in data)
    compared = counts[J.AGREES] + counts[J.DIFFERS] + counts[J.UNDECIDED]
    notes = [f"Study {study.id}, {study.title}: of {len(data)} published values, {counts[J.AGREES]} agree with this "
             f"host, {counts[J.DIFFERS]} differ, {counts[J.UNDECIDED]} are undecided at this scale, "
             f"{counts[J.NOT_MEASURED]} were not measured here"
             + (f" ({counts[J.AGREES] + counts[J.DIFFERS]} of {compared} compared values decided)" if compared else "")
             + ". A verdict is decided by this host's 95 % interval: inside the paper's band agrees, outside it "
               "differs, across an edge undecided."]
    common = Counter(r.split(":")[0] for d in data if d["verdict"] == J.DIFFERS for r in d["likely_reasons"])
    if common:
        notes.append("Where they differ, most likely: " + ", ".join(f"{k} ({n})" for k, n in common.most_common(3)) + ".")
    if runs:
        notes.append(f"The paper's machine: {pv.host.machine}; {P.repetitions_text(pv.repetitions)}. "
                     f"This host: {facts.get('cpu_model', '?')}, {facts.get('cpus', '?')} CPUs, "
                     f"{(facts.get('memory_bytes') or 0) / 2**30:.0f} GiB, AES {'yes' if facts.get('aes') else 'no'}, "
                     f"virtualized: {(facts.get('virtualization') or {}).get('vm', '?')}.")
    scales = {(r.base or r.part): r.scale for r in runs}
    notes += command_notes(study, runs)
    notes.append("Sources are tables and figures with the paper's section; the seed texts carry no page numbers.")
    table = Table("published values and this host's, with verdicts",
                  ["source", "quantity", "paper", "this host", "verdict", "likely reason / detail",
                   "run differently from the paper"],
                  [[source(v), v.label(), _paper_cell(v, judged[v.id]), _mine(v, judged[v.id]), d["verdict"],
                    "; ".join(d["likely_reasons"]) or d["detail"],
                    "; ".join(x["what"] for x in d["differences"]) or "-"] for v, d in zip(pv.values, data)])
    doc = {"study": study.id, "title": study.title, "paper_host": pv.host.model_dump(),
           "runs": [{"run_id": r.report.run.id, "part": r.part, "scale": r.scale} for r in runs],
           "comparisons": data, "summary": dict(counts),
           "differences": [d.as_json(p) for p, ds in held.items() for d in ds],
           "quick_scale": {p: list(quick_changes(study.id, p)) for p, s in scales.items() if s == "quick"}}
    return Section(key="study", title=f"Study {study.id}: the paper beside this host", data=doc,
                   tables=[table], figures=figures(pv.values, judged, study), notes=notes)


def _mine(v: P.PaperValue, j: dict[str, Any]) -> str:
    unit = "" if v.kind == "relative" else v.unit
    text = cell(j["yours"], unit)
    return text + (f" [{cell(j['ci'][0])}-{cell(j['ci'][1])}]" if j.get("ci") else "")


def _paper_cell(v: P.PaperValue, j: dict[str, Any]) -> str:
    unit = "" if v.kind == "relative" else v.unit
    text = cell(j["paper"], unit)
    if v.kind == "relative":
        text += f" ({v.paper['baseline']} -> {v.paper['value']} {v.unit})"
    return text


def write_html(path: Path, section: Section, reports: Sequence[Report]) -> Path:
    """One self-contained page: the study section, then each run's report as `report --html` shows it."""
    from ..report import html

    page = html.Page([p.name for r in reports for p in r.run.platforms])
    labels = runinfo.host_labels([r.run for r in reports])
    body = html.experiment_html(page, [section], "s-")
    body += "".join(html.run_section(page, rep, lab, f"r{i}-")
                    for i, (rep, lab) in enumerate(zip(reports, labels)))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(html.document(section.title, body, page), encoding="utf-8")
    return path


def figure_specs(section: Section, reports: Sequence[Report]) -> tuple[list[FigureSpec], list[str]]:
    """The figures of the study for PNG/SVG/PDF export: the study's own (the paper beside this
    host) first, then each run's story (every result with its interval) and its experiment
    sections' figures. Not each run's figure per benchmark and metric: study 001 at quick scale
    has 227 of them (box, trend, sweep), four minutes of rendering on a quiet 2-core host for
    files a paper does not print; `virtbench report RUN --figures DIR` writes them."""
    from ..report.figures import for_reports, section_figures

    specs, platforms = for_reports(reports)
    return [*section.figures, *(s for s in specs if s.meta.get("story")), *section_figures(reports)], platforms
