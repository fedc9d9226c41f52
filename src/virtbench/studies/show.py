"""A study before any run: its parts, what each needs and takes, the paper's commands, settings,
values and claims, and every difference of the presets from the paper (`virtbench study show ID`,
the web's /studies/ID and /api/studies/ID: one document)."""
from __future__ import annotations

from typing import Any

from . import options as O
from . import paper as P
from .model import Part, Study
from .report import comparisons
from .scales import presets, quick_changes

NEEDS = {"kvm": "KVM (a guest that boots under it)", "second_host": "a second host (--hosts NAME)",
         "pmu": "hardware performance counters", "meter": "a power meter (--meter CMD)"}


def estimate(study: Study, part: Part) -> dict[str, str]:
    """The presets' own duration estimate per scale (`virtbench run FILE --dry-run`'s, from the
    benchmarks' duration parameters), for benchmark parts; other kinds keep their own schedules."""
    from ..experiments.registry import DEFAULT
    from ..runner import estimate as est

    out = {}
    for scale in ("quick", "paper"):
        campaigns = presets(study.id, part.name, scale)
        if all(c.experiment == DEFAULT for c in campaigns):
            out[scale] = est.duration(sum(est.estimate(c).max_s for c in campaigns))
    return out


def document(study: Study) -> dict[str, Any]:
    pv = P.load(study.id)
    values, _ = comparisons(study, [])
    parts = []
    for p in study.parts:
        parts.append({
            "name": p.name, "title": p.title, "variants": [v for v in p.variants if v],
            "campaigns": {scale: p.campaign_stems(study.id, scale) for scale in ("quick", "paper")},
            "needs": [NEEDS.get(n, n) for n in p.needs], "degrades": [NEEDS.get(n, n) for n in p.degrades],
            "hosts": p.hosts or None, "duration": dict(p.duration), "estimate": estimate(study, p),
            "options": [{"name": n, "help": O.OPTIONS[n].option.help} for n in p.options],
            "run": f"virtbench study run {study.id} --part {p.name}" + (" --hosts NAME" if "second_host" in p.needs
                                                                        else "")
                   + (" --meter CMD" if "meter" in p.needs else ""),
            "commands": [{"where": c.where, "benchmark": c.benchmark, "role": c.role, "argv": c.text(),
                          "given": dict(c.given), "note": c.note or None} for c in p.commands],
            "settings": [{"where": st.where, "target": st.target, "values": dict(st.values), "note": st.note or None}
                         for st in p.settings],
            "differences": [d.as_json(p.name) for d in p.differences],
            "quick_scale": list(quick_changes(study.id, p.name)),
        })
    shown = []
    for v, c in zip(pv.values, values):
        shown.append({"id": v.id, "source": {"where": v.where, "section": v.section}, "kind": v.kind,
                      "quantity": v.label(), "unit": v.unit, "paper": c["paper"], "paper_values": dict(v.paper),
                      "part": c["part"],
                      "measured_by": c["detail"].split("; ", 1)[-1], "differences": c["differences"]})
    return {"study": study.id, "title": study.title, "measures": study.measures, "seed": f"seeds/{study.seed}_*.txt",
            "paper_host": pv.host.model_dump(), "repetitions": pv.repetitions,
            "repetitions_text": P.repetitions_text(pv.repetitions), "parts": parts, "values": shown}
