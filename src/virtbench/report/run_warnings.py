"""Every warning of a run in words, with its fix: host conditions, campaign design, platforms
left out, the noise check, how many comparisons are undecided, and each result's quality flags.

`report --json` lists them under `warnings` (summary.to_json), the layout shows them as the
Warnings section (layout.warnings), the web run page says the power note.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..analysis import forecast, quality
from ..analysis.summary import Row
from ..store.models import Run
from .runinfo import facts


def warnings(run: Run, rows: Sequence[Row]) -> list[dict[str, Any]]:
    """Host conditions, campaign design and every result's quality flags, in that order."""
    out = [{"scope": "host", **f.public()} for f in quality.host_conditions(facts(run))]
    out += [{"scope": "run", **f.public()} for f in quality.run_checks(run.campaign)]
    out += [{"scope": "run", "check": "left_out", "severity": "info", "platform": p.get("platform"),
             "message": f"{p.get('platform')} not measured: {p.get('reason')}", "fix": p.get("fix", "")}
            for p in (run.provenance or {}).get("left_out", [])]
    if noise := (run.provenance or {}).get("noise"):
        out.append(noise_warning(noise))
    if note := power_note(rows):
        out.append(note)
    for r in rows:
        for flag in r.quality:
            out.append({"scope": "result", "benchmark": r.benchmark, "metric": r.metric, "platform": r.platform,
                        **flag})
    return out


def noise_warning(noise: dict[str, Any]) -> dict[str, Any]:
    """The noise check measured before the first round (experiments.benchmarks.adaptive.note_noise), as the run said it."""
    head, *per_metric = forecast.note_lines(noise)
    return {"scope": "run", "check": "noise",
            "severity": "info" if noise["expected_decided"] >= forecast.NOISY * noise["cells"] else "warn",
            "value": noise["expected_decided"] / noise["cells"] if noise["cells"] else None,
            "message": f"{head} ({'; '.join(line.strip() for line in per_metric)})"}


def power_note(rows: Sequence[Row]) -> dict[str, Any] | None:
    """Say how many comparisons are undecided and what would decide most of them."""
    compared = [r for r in rows if r.verdict in ("slower", "faster", "same", "inconclusive")]
    open_ = [r for r in compared if r.verdict == "inconclusive"]
    if not open_:
        return None
    needed = sorted(r.repetitions_needed for r in open_ if r.repetitions_needed)
    advice = (f"about {needed[len(needed) // 2]} repetitions would decide half of them at the noise seen"
              if needed else "more repetitions or a quieter host would narrow the intervals")
    return {"scope": "run", "check": "power", "severity": "warn" if len(open_) * 10 > len(compared) else "info",
            "value": len(open_) / len(compared),
            "message": f"{len(open_)} of {len(compared)} comparisons are inconclusive; {advice}"}
