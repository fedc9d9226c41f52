"""A study's report: its runs' ordinary reports, led by one Section with the paper beside them.

The runs' own parts (ratio tables, category tables (Tables 5/6/7 style), stack predictions
(Fig. 4), sweeps by threads/clients/sizes (001's Figs. 2/3, 000's network figures), density
and migration curves (000's Figs. 4-12), NDR/PDR and HDR figures (004)) come from the report
model unchanged; this module adds the section `study`: a table of every published value
beside the user's with a verdict and the likely reason, figures of the paper's numbers next
to the user's on the same axes and units, and a short generated comparison.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..report import runinfo
from ..report.figures import FigureSpec, Series, slug
from ..report.model import Report, Section, Table
from . import compare as C
from . import paper as P
from .registry import Difference, Study


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


def _source(v: P.PaperValue) -> str:
    return f"{v.where}, §{v.section}" if not v.where.startswith("Section") else f"§{v.section}"


def _cell(x: Any, unit: str = "") -> str:
    if isinstance(x, list):
        return "-".join(C.fmt(v) for v in x)
    if isinstance(x, float):
        return C.fmt(x, unit)
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
    """Each part's differences that hold for these runs (all of them without runs)."""
    two = two_host_parts(runs)
    return {p.name: tuple(d for d in p.differences if not (d.one_host and p.name in two)) for p in study.parts}


def differences_by_value(study: Study, runs: Sequence[C.PartRun] = ()) -> dict[str, list[tuple[str, Difference]]]:
    """Each paper value's id -> the deliberate differences (with their part) that bear on it; a
    difference several parts share (the same container set-up) is listed once, with its first part."""
    out: dict[str, list[tuple[str, Difference]]] = {}
    held = applying(study, runs)
    for part in study.parts:
        for d in held[part.name]:
            for vid in d.affects:
                if all(d != seen for _, seen in out.get(vid, [])):
                    out.setdefault(vid, []).append((part.name, d))
    return out


def command_notes(study: Study, runs: Sequence[C.PartRun] = ()) -> list[str]:
    """The paper's command of each part and every deliberate difference of the presets from it."""
    notes = []
    held = applying(study, runs)
    for part in study.parts:
        if part.command:
            c = part.command
            notes.append(f"{part.name}: the paper's command ({c.where}): `{' '.join(c.argv)}`"
                         + (f" ({c.note})" if c.note else "") + ".")
        if held[part.name]:
            notes.append(f"{part.name} differs from the paper deliberately: "
                         + "; ".join(f"{d.what} ({d.why})" for d in held[part.name]) + ".")
    return notes


def figures(values: Sequence[P.PaperValue], judged: dict[str, dict[str, Any]], study: Study) -> list[FigureSpec]:
    """The paper's numbers beside this host's: ratios to the baseline, Table 7 ranges, values."""
    out = []
    rel = [v for v in values if v.kind == "relative" and judged[v.id]["yours"] is not None]
    if rel:
        xs = [v.id for v in rel]
        cis = [judged[v.id]["ci"] or [None, None] for v in rel]
        out.append(FigureSpec(
            slug("study", study.id, "relative"), "bar", f"Study {study.id}: relative to the baseline, paper and this host",
            "", "relative to the baseline (higher is better)",
            [Series("paper", xs, [judged[v.id]["paper"] for v in rel], style="bar"),
             Series("this host", xs, [judged[v.id]["yours"] for v in rel], lo=[c[0] for c in cis],
                    hi=[c[1] for c in cis], style="bar")],
            group="study", refline=1.0, note="The paper's ratio from its published values; this host's from its runs "
                                             "(whiskers: its 95% interval). " + "; ".join(f"{v.id}: {v.label()}" for v in rel)))
    for of in ("container", "vm"):
        rng = [v for v in values if v.kind == "range" and v.of == of]
        if not rng:
            continue
        xs = [v.category or v.id for v in rng]
        lo = [judged[v.id]["paper"][0] for v in rng]
        hi = [judged[v.id]["paper"][1] for v in rng]
        out.append(FigureSpec(
            slug("study", study.id, "table7", of), "bar", f"Study {study.id} Table 7: best {of} relative to bare metal",
            "category", "performance availability (1 = bare metal)",
            [Series("paper (range over 3 machines)", xs, [(a + b) / 2 for a, b in zip(lo, hi)], lo=lo, hi=hi,
                    style="bar"),
             Series("this host", xs, [judged[v.id]["yours"] for v in rng], style="bar")],
            group="study", refline=1.0, note="Bars of the paper: the middle of its range, whiskers its ends."))
    by_unit: dict[str, list[P.PaperValue]] = {}
    for v in values:
        if v.kind == "value" and judged[v.id]["yours"] is not None:
            by_unit.setdefault(v.unit, []).append(v)
    for unit, vs in by_unit.items():
        xs = [v.id for v in vs]
        ys = [judged[v.id]["yours"] for v in vs] + [judged[v.id]["paper"] for v in vs]
        spread = max(ys) / max(min(y for y in ys if y) or 1, 1e-12)
        out.append(FigureSpec(
            slug("study", study.id, "values", unit), "bar", f"Study {study.id}: published values and this host's ({unit})",
            "", unit, [Series("paper", xs, [judged[v.id]["paper"] for v in vs], style="bar"),
                       Series("this host", xs, [judged[v.id]["yours"] for v in vs], style="bar")],
            group="study", ylog=spread > 50, note="Absolute values on different hardware: context, not a test. "
                                                  + "; ".join(f"{v.id}: {v.label()}" for v in vs)))
    return out


def build(study: Study, runs: Sequence[C.PartRun], caps: dict[str, str] | None = None) -> Section:
    """The `study` section: every published value beside the user's, verdicts, reasons, figures."""
    pv = P.load(study.id)
    facts = runinfo.facts(runs[0].report.run) if runs else {}
    matcher = C.Matcher(runs)
    quick = any(r.scale == "quick" for r in runs)
    judged: dict[str, dict[str, Any]] = {}
    rows, data = [], []
    diffs = differences_by_value(study, runs)
    for v in pv.values:
        j = C.judge(v, matcher, caps or {}, pv.categories)
        why = C.reasons(v, facts, pv.host, quick) if j["verdict"] == "differs" else []
        judged[v.id] = j
        unit = "" if v.kind == "relative" else v.unit
        paper_cell = _cell(j["paper"], unit) + (f" ({v.paper['baseline']} -> {v.paper['value']} {v.unit})"
                                                if v.kind == "relative" else "")
        mine = diffs.get(v.id, [])
        rows.append([_source(v), v.label(), paper_cell, _cell(j["yours"], unit), j["verdict"],
                     "; ".join(why) or j["detail"], "; ".join(d.what for _, d in mine) or "-"])
        data.append({"id": v.id, "source": {"where": v.where, "section": v.section, "page": None}, "kind": v.kind,
                     "quantity": v.label(), "unit": v.unit, "higher_is_better": v.higher_is_better,
                     "paper": j["paper"], "yours": j["yours"], "verdict": j["verdict"], "detail": j["detail"],
                     "likely_reasons": why,
                     "differences": [{"part": part, "what": d.what, "why": d.why} for part, d in mine]})
    counts = Counter(d["verdict"] for d in data)
    notes = [f"Study {study.id}, {study.title}: {counts['agrees']} published values agree with this host, "
             f"{counts['differs']} differ, {counts['not measured here']} were not measured here"
             + (f", {counts['inconclusive']} are undecided at this host's noise" if counts["inconclusive"] else "")
             + (f", {counts['see ratios']} are shown for reading" if counts["see ratios"] else "") + "."]
    differ = [d for d in data if d["verdict"] == "differs"]
    common = Counter(r.split(":")[0] for d in differ for r in d["likely_reasons"])
    if common:
        notes.append("Where they differ, most likely: " + ", ".join(f"{k} ({n})" for k, n in common.most_common(3)) + ".")
    notes.append(f"The paper's machine: {pv.host.machine}; {pv.repetitions} repetition(s) per point. "
                 f"This host: {facts.get('cpu_model', '?')}, {facts.get('cpus', '?')} CPUs, "
                 f"{(facts.get('memory_bytes') or 0) / 2**30:.0f} GiB, AES {'yes' if facts.get('aes') else 'no'}, "
                 f"virtualized: {(facts.get('virtualization') or {}).get('vm', '?')}.")
    for part in study.parts:
        if part.differs:
            notes.append(f"{part.name}: {part.differs}.")
    notes += command_notes(study, runs)
    notes.append("Sources are tables and figures with the paper's section; the seed texts carry no page numbers.")
    table = Table("published values and this host's, with verdicts", ["source", "quantity", "paper", "this host", "verdict",
                                                 "likely reason / detail", "run differently from the paper"], rows)
    doc = {"study": study.id, "title": study.title, "paper_host": pv.host.model_dump(),
           "runs": [{"run_id": r.report.run.id, "part": r.part, "scale": r.scale} for r in runs],
           "comparisons": data, "summary": dict(counts)}
    return Section(key="study", title=f"Study {study.id}: the paper beside this host", data=doc,
                   tables=[table], figures=figures(pv.values, judged, study), notes=notes)


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
    """Every figure of the study report (the study's first), for PNG/SVG/PDF export."""
    from ..report.figures import for_files

    specs, platforms = for_files(reports)
    return [*section.figures, *specs], platforms
