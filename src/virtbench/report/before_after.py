"""`virtbench compare A B --json` and the web's Before / after page: one document, built once.

The rows come from analysis/compare.py (each platform relative to its own run's baseline by
default, the baseline absolute, the report's statistic for every row, one order); the notes
say what else changed between the runs: the host, its conditions, and whether the baseline
itself moved (which a reader would otherwise blame on the change under test).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..analysis import stats
from ..analysis.compare import CompareRow, baseline_drift
from ..notation import change
from ..store.models import Run
from .runinfo import facts

FORMAT_VERSION = 4
"""Version of the `compare --json` document. 3: rows with mean_a/mean_b, raw values compared;
4: `mode` (relative: each platform against its own run's baseline, the default; absolute),
rows with value_a/value_b and the `statistic` they are (mean, median for lifecycle steps,
ratio to the baseline), `basis`, `baseline_moved`; the document's `baseline_drift`."""
METHOD = {
    "relative": ("each platform's per-round ratios to its own run's baseline (the report's estimate), B against A "
                 "by the verdict rule of `report`: the unpaired 95 % Welch t interval of the log ratio of means "
                 "(two runs' rounds share nothing to pair on), same when the 90 % interval lies within the minimum "
                 "effect; the baseline and lifecycle steps compared absolute"),
    "absolute": ("raw values, B against A by the verdict rule of `report`: the unpaired 95 % Welch t interval of the "
                 "log ratio of means, same when the 90 % interval lies within the minimum effect; a change of the "
                 "host between the runs is in every row"),
}


def notes(run_a: Run, run_b: Run, rows: Sequence[CompareRow], mode: str, baseline: str) -> list[str]:
    """What else changed between the runs, each in one sentence."""
    out = []
    hosts = [str(facts(r).get("hostname") or "?") for r in (run_a, run_b)]
    if hosts[0] != hosts[1]:
        out.append(f"the runs are from different hosts ({hosts[0]}, {hosts[1]}): differences include the hardware")
    conds = [{k: facts(r).get(k) for k in ("kernel", "governor", "turbo", "microcode")} for r in (run_a, run_b)]
    changed = [k for k in conds[0] if conds[0][k] != conds[1][k]]
    if changed:
        out.append("changed between the runs: " + ", ".join(f"{k} {conds[0][k]} -> {conds[1][k]}" for k in changed))
    if run_a.baseline != run_b.baseline:
        out.append(f"the runs have different baselines ({run_a.baseline}, {run_b.baseline}): compared absolute")
    drift = baseline_drift(rows, baseline)
    if drift:
        which = ", ".join(drift["metrics"][:4]) + (", ..." if len(drift["metrics"]) > 4 else "")
        then = ("each platform is compared relative to its own run's baseline, which takes the host's change out"
                if mode == "relative" else "every absolute row below carries that change: compare without "
                "--absolute to take it out")
        out.append(f"the baseline {baseline} itself moved between the runs, {change(drift['change'])} in "
                   f"{drift['moved']} of {drift['of']} metrics ({which}): the host changed, not only what is "
                   f"compared; {then}")
    return out


def document(run_a: Run, run_b: Run, rows: Sequence[CompareRow], *, mode: str = "relative",
             min_effect: float = stats.MIN_EFFECT) -> dict[str, Any]:
    """The compare document: the runs, the method, the notes, the rows in their one order."""
    baseline = run_a.baseline if run_a.baseline == run_b.baseline else None
    common = {p.name for p in run_a.platforms} & {p.name for p in run_b.platforms}
    only = sorted(({p.name for p in run_a.platforms} | {p.name for p in run_b.platforms}) - common)
    return {"format_version": FORMAT_VERSION, "a": run_a.id, "b": run_b.id,
            "names": {"a": run_a.name, "b": run_b.name},
            "hosts": [str(facts(r).get("hostname") or "?") for r in (run_a, run_b)],
            "mode": mode if baseline else "absolute", "baseline": baseline, "min_effect": min_effect,
            "method": METHOD[mode if baseline else "absolute"], "notes": notes(run_a, run_b, rows, mode, baseline or ""),
            "baseline_drift": baseline_drift(rows, baseline), "only_one_run": only,
            "results": [r.public() for r in rows]}


def shown(row: dict[str, Any], side: str) -> str:
    """Run `side`'s value of a result row as every surface prints it: a ratio to the baseline,
    a lifecycle step's median in ms, else the mean in its unit (scaled: 28.5 MB/s)."""
    from ..notation import MISSING, milliseconds, number, ratio
    from .units import scale

    value = row.get(f"value_{side}")
    if value is None:
        return MISSING
    if row.get("statistic") == "ratio":
        return ratio(value)
    if row.get("category") == "lifecycle" and row.get("unit") == "s":
        return milliseconds(value)
    factor, unit = scale([row.get("value_a"), row.get("value_b")], str(row.get("unit") or ""))
    return f"{number(value / factor)} {unit}".strip()
