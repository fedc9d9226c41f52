"""Quality checks shown beside the numbers, so a reader can judge whether to trust them.

Per platform and metric: drift over the repetitions, outliers, a warm-up effect and high
variation. Per run: the host's conditions when it started (load, frequency governor,
turbo, whether the host is itself a VM). A flag is a hint with its evidence, never a
silent correction: the statistics use every measured value regardless.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ..boards import emulated
from . import special, stats

DRIFT_MIN_N = 5
DRIFT_P = 0.01
DRIFT_RHO = 0.5
"""Drift is flagged at |Spearman rho| >= 0.5 with p < 0.01: strict, because every metric of
every platform is checked and a 5% level would flag one in twenty by chance."""
OUTLIER_Z = 3.5
"""Iglewicz and Hoaglin's cut-off for the MAD-based modified z-score."""
NORMAL_MAD = 0.6744897501960817
"""The MAD of a standard normal (its 75th percentile): MAD / this estimates the standard
deviation (scipy.stats.median_abs_deviation's scale="normal")."""
MATERIAL = 0.01
"""Spreads below 1 % of the median are never flagged as drift or outliers: with CPU-time
metrics (quick campaign) the values can cluster within 0.3 %, and a MAD that small made a
value 0.5 % off an 'outlier' and a 0.35 % rise a 'drift' (every openssl cell carried a flag)."""
CV_WARN = 0.035
"""Phoronix Test Suite adds runs while the relative standard deviation exceeds 3.5%."""
WARMUP_EFFECT = 0.05
LOAD_PER_CPU = 0.1


@dataclass(frozen=True)
class Flag:
    check: str
    """drift, outliers, warmup, variation, host, power."""
    severity: str
    """'warn' may change a conclusion; 'info' is context."""
    message: str
    value: float | None = None

    def public(self) -> dict[str, Any]:
        return asdict(self)


def drift(values: Sequence[float], rounds: Sequence[int]) -> Flag | None:
    """A monotone trend of value with repetition index (thermal throttling, filling caches)."""
    return drift_many([(values, rounds)])[0]


def drift_many(items: Sequence[tuple[Sequence[float], Sequence[int]]]) -> list[Flag | None]:
    """drift() of many (values, rounds) pairs; pairs of equal length are computed together.

    Spearman's rho is Pearson's r of the ranks, and its p-value (t with n-2 degrees of
    freedom) equals pearsonr's exact one, so average ranks and Pearson's r along an axis
    give spearmanr's answer for a whole batch (analysis.special, without importing
    scipy.stats; tests check it against spearmanr).
    """
    out: list[Flag | None] = [None] * len(items)
    by_n: dict[int, list[int]] = {}
    for i, (values, rounds) in enumerate(items):
        if len(values) < DRIFT_MIN_N:
            continue
        arr = np.asarray(values, dtype=float)  # once for the spread and the median (np.ptp = max - min)
        if arr.max() - arr.min() > MATERIAL * abs(stats.median(arr)) and np.ptp(rounds) > 0:
            by_n.setdefault(len(values), []).append(i)
    for n, idx in by_n.items():
        x, _ = special.rankdata(np.asarray([items[i][1] for i in idx], dtype=float))
        y, _ = special.rankdata(np.asarray([items[i][0] for i in idx], dtype=float))
        xm, ym = x - x.mean(axis=1, keepdims=True), y - y.mean(axis=1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            rho = np.clip((xm * ym).sum(axis=1) / np.sqrt((xm * xm).sum(axis=1) * (ym * ym).sum(axis=1)), -1.0, 1.0)
        strong = np.flatnonzero(np.abs(np.nan_to_num(rho)) >= DRIFT_RHO)  # only these can be flagged: p for them
        for j, p in zip(strong.tolist(), special.pearson_p(rho[strong], n)):
            out[idx[j]] = _drift_flag(float(rho[j]), float(p))
    return out


def _drift_flag(rho: float, p: float) -> Flag | None:
    if not np.isfinite(rho) or abs(rho) < DRIFT_RHO or p >= DRIFT_P:
        return None
    way = "rise" if rho > 0 else "fall"
    return Flag("drift", "warn", f"values {way} over the repetitions (Spearman rho={rho:+.2f}, p={p:.3g}): "
                "throttling, caches or background load; see the per-repetition trend", rho)


def outliers(values: Sequence[float], rounds: Sequence[int] | None = None) -> Flag | None:
    """Values far from the median in units of the scaled MAD (modified z-score > 3.5).

    A value counts only when it also differs from the median by more than 1 % of it (MATERIAL),
    so integer-valued metrics and tightly clustered CPU times are not flagged for noise.
    """
    return outliers_many([(values, rounds)])[0]


def outliers_many(items: Sequence[tuple[Sequence[float], Sequence[int] | None]]) -> list[Flag | None]:
    """outliers() of many samples; samples of equal length share one call."""
    out: list[Flag | None] = [None] * len(items)
    by_n: dict[int, list[int]] = {}
    for i, (values, _) in enumerate(items):
        if len(values) >= 3:
            by_n.setdefault(len(values), []).append(i)
    for idx in by_n.values():
        masks = outlier_masks(np.asarray([items[i][0] for i in idx], dtype=float))
        for j, i in enumerate(idx):
            out[i] = _outlier_flag(masks[j], items[i][1])
    return out


def outlier_mask(values: Sequence[float]) -> list[bool]:
    """Which of these values the outlier rule counts (what the verify page rings)."""
    if len(values) < 3:
        return [False] * len(values)
    return [bool(m) for m in outlier_masks(np.asarray([values], dtype=float))[0]]


def outlier_masks(arr: np.ndarray) -> np.ndarray:
    """The outlier rule, once: per row of arr, the values whose modified z-score (distance to
    the median over the MAD scaled to a normal's standard deviation) exceeds OUTLIER_Z, and
    only those more than MATERIAL (1 %) from the median (with a MAD of zero, just that)."""
    med = np.median(arr, axis=1, keepdims=True)
    mad = np.median(np.abs(arr - med), axis=1, keepdims=True) / NORMAL_MAD
    dev = np.abs(arr - med)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (dev > MATERIAL * np.abs(med)) & np.where(mad > 0, dev / mad > OUTLIER_Z, True)


def _outlier_flag(mask: np.ndarray, rounds: Sequence[int] | None) -> Flag | None:
    count = int(mask.sum())
    if not count:
        return None
    where = ""
    if rounds is not None:
        where = f" (round{'s' if count > 1 else ''} {', '.join(str(r) for r in np.asarray(rounds)[mask][:8])})"
    return Flag("outliers", "warn" if count / mask.size > 0.1 else "info",
                f"{count} of {mask.size} values are outliers by MAD (|z| > {OUTLIER_Z}){where}", float(count))


def warmup_effect(warmup: Sequence[float], measured: Sequence[float], higher_is_better: bool) -> Flag | None:
    """Warm-up rounds clearly outside the measured range: discarding them mattered."""
    if not len(warmup) or len(measured) < 2:
        return None
    w, m = float(np.mean(warmup)), stats.median(np.asarray(measured, dtype=float))
    if not w or not m:
        return None
    ratio = w / m if higher_is_better else m / w
    outside = min(warmup) > max(measured) or max(warmup) < min(measured)
    if not outside or abs(ratio - 1) < WARMUP_EFFECT:
        return None
    how = "slower" if ratio < 1 else "faster"
    return Flag("warmup", "info", f"warm-up rounds were {abs(1 - ratio):.0%} {how} than the measured ones "
                "(discarded); if the first measured rounds also differ, add warm-up rounds", ratio)


def variation(values: Sequence[float], threshold: float = CV_WARN, severity: str = "warn") -> Flag | None:
    """Relative standard deviation above the threshold (Phoronix's 3.5% by default)."""
    if len(values) < 2:
        return None
    arr = np.asarray(values, dtype=float)
    mean = float(arr.mean())
    if not mean:
        return None
    cv = float(arr.std(ddof=1)) / abs(mean)
    if cv <= threshold:
        return None
    return Flag("variation", severity, f"high variation: coefficient of variation {cv:.1%} (> {threshold:.1%}); "
                "more repetitions or a quieter host narrow the interval", cv)


def check_values(values: Sequence[float], rounds: Sequence[int], warmup_values: Sequence[float],
                 higher_is_better: bool, category: str = "") -> list[Flag]:
    """Every per-sample check, in a fixed order.

    Lifecycle steps take milliseconds and vary by tens of percent by nature; their
    variation is reported as information, not as a warning about the measurement.
    """
    return check_many([(values, rounds, warmup_values, higher_is_better, category)])[0]


def check_many(items: Sequence[tuple[Sequence[float], Sequence[int], Sequence[float], bool, str]]
               ) -> list[list[Flag]]:
    """check_values() of many samples at once (a report's every platform and metric)."""
    drifts = drift_many([(v, r) for v, r, *_ in items])
    outs = outliers_many([(v, r) for v, r, *_ in items])
    result = []
    for (values, _, warm, hib, category), d, o in zip(items, drifts, outs):
        found = [d, o, warmup_effect(warm, values, hib),
                 variation(values, severity="info" if category == "lifecycle" else "warn")]
        result.append([f for f in found if f is not None])
    return result


SCALING_WARN = 0.75
"""Parallel scaling per CPU below which the host's CPUs are said not to scale."""


def host_conditions(facts: dict[str, Any]) -> list[Flag]:
    """What the run's recorded host facts say about the conditions of the measurement."""
    out: list[Flag] = []
    load = facts.get("loadavg")
    cpus = facts.get("cpus") or 1
    if isinstance(load, (list, tuple)) and load:
        load1 = float(load[0])
        if load1 > LOAD_PER_CPU * cpus:
            out.append(Flag("host", "warn", f"host load average {load1:.2f} on {cpus} CPUs when the run started: "
                            "other work may have competed with the benchmarks", load1))
    scaling = facts.get("parallel_scaling")
    if isinstance(scaling, dict) and scaling.get("efficiency") is not None and scaling["efficiency"] < SCALING_WARN:
        out.append(Flag("host", "warn", f"{scaling['processes']} CPU-bound processes got only {scaling['scaling']:.2f}x "
                        "the work of one when the run started: the CPUs did not scale (shared or stolen vCPUs, "
                        "other work); multi-threaded results and CPU limits change less than their share "
                        "(the limits section gives each limit's expected effect)", float(scaling["efficiency"])))
    gov = str(facts.get("governor", ""))
    if gov.startswith("unknown"):
        out.append(Flag("host", "info", "CPU frequency governor not visible (no cpufreq; usual in a VM): "
                        "frequency scaling cannot be ruled out"))
    elif gov and gov != "performance":
        out.append(Flag("host", "warn", f"CPU frequency governor '{gov}': the clock follows the load; "
                        "set 'performance' for stable results"))
    if facts.get("turbo") == "on":
        out.append(Flag("host", "info", "turbo boost on: the clock depends on temperature and on how many "
                        "cores are busy; watch for drift"))
    virt = facts.get("virtualization")
    if isinstance(virt, dict) and emulated(str(virt.get("vm") or "")):
        out.append(Flag("host", "warn", "the host is an emulated machine (QEMU TCG, no KVM): its numbers measure "
                        "the emulator on another CPU, not the hardware it imitates"))
    elif isinstance(virt, dict) and virt.get("vm") not in (None, "", "none"):
        out.append(Flag("host", "warn", f"the host is itself a VM ({virt.get('vm')}): overheads are relative "
                        "to this VM, not to bare metal"))
    return out


def run_checks(campaign: dict[str, Any]) -> list[Flag]:
    """Checks of the campaign's design itself."""
    out: list[Flag] = []
    if campaign.get("warmups") == 0:
        out.append(Flag("warmup", "info", "no warm-up rounds: the first repetition may include cold caches"))
    if campaign.get("shuffle") is False:
        out.append(Flag("order", "warn", "platform order not randomized: slow drift lands on whichever "
                        "platform runs last"))
    return out
