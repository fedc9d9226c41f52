"""One published value judged against this host's: {paper, yours, ci, verdict, detail}.

Kinds (studies/paper.py): relative (the paper's ratio +- its tolerance), value (an absolute
number on other hardware, +-20 %), range (Table 7), best (Tables 5 and 6: which of two wins,
decided by the interval of their ratio), claim (a statement: by the report's own verdicts of
the cells it covers, a band, or a rule of its own in studies/claims.py). Every verdict is the
interval rule of studies/judge.py; an undecided one says what would decide it.
"""
from __future__ import annotations

from typing import Any

from . import claims
from . import compare as C
from . import judge as J
from . import paper as P


def result(paper: Any = None, yours: Any = None, verdict: str = J.NOT_MEASURED, detail: str = "",
           ci: Any = None) -> dict[str, Any]:
    return {"paper": paper, "yours": yours, "verdict": verdict, "detail": detail,
            "ci": list(ci) if ci else None}


def _relative(value: P.PaperValue, m: C.Matcher, reps: int | None) -> dict[str, Any]:
    y, pv = value.yours, value.paper
    from ..analysis.summary import relative

    paper = relative(pv["value"], pv["baseline"], value.higher_is_better)
    out = result(paper)
    if y is None or paper is None:
        return out
    if y.section:
        a, b = m.section_estimate(y, y.where), m.section_estimate(y, y.baseline or {})
        est = J.ratio(a, b) if a and b else None
        if est is not None and not value.higher_is_better:
            est = J.Estimate(1 / est.value, (1 / est.ci[1], 1 / est.ci[0]) if est.ci else None, est.n, est.what)
    else:
        est = J.geomean([e for r in m.rows(y) if (e := C.relative_estimate(r)) is not None])
    if est is None:
        return out
    tol = value.tolerance
    return J.banded(out, est, paper - tol, paper + tol, f"ratio {est.value:.3f} here, {paper:.3f} in the paper", reps)


def _value(value: P.PaperValue, m: C.Matcher, reps: int | None) -> dict[str, Any]:
    y, paper = value.yours, value.paper.get("value")
    out = result(paper)
    if y is None or not paper:
        return out
    if y.section:
        est = m.section_estimate(y, y.where)
    else:
        rows = [e for r in m.rows(y) if (e := C.mean_estimate(r)) is not None]
        est = J.Estimate(rows[0].value * y.factor, (rows[0].ci[0] * y.factor, rows[0].ci[1] * y.factor)
                         if rows[0].ci else None, rows[0].n, rows[0].what) if rows else None
    if est is None:
        return out
    text = f"{C.fmt(est.value, value.unit)} here, {C.fmt(paper, value.unit)} in the paper"
    return J.banded(out, est, paper * (1 - C.VALUE_TOLERANCE), paper * (1 + C.VALUE_TOLERANCE), text, reps)


def _range(value: P.PaperValue, m: C.Matcher, cats: dict[str, P.CategorySpec], reps: int | None) -> dict[str, Any]:
    lo, hi = value.paper["low"], value.paper["high"]
    out = result([lo, hi])
    spec = cats.get(value.category or "")
    if spec is None or not value.of:
        return out
    est, best, _ = m.category(spec, value.of, value.yours)
    if est is None:
        return out
    return J.banded(out, est, lo, hi, f"best {value.of} here ({best}) {est.value:.2f}", reps)


def _best(value: P.PaperValue, m: C.Matcher, cats: dict[str, P.CategorySpec]) -> dict[str, Any]:
    """Tables 5/6: the paper's winner (or its tie) against the interval of the two candidates' ratio here:
    a winner where it excludes 1, a tie where it lies within 1 +- the value's tolerance (5 %)."""
    pv = value.paper
    out = result(pv.get("best"))
    spec = cats.get(value.category or "")
    if spec is None or not value.of:
        return out
    _, _, values = m.category(spec, value.of, value.yours)
    names = {k.lower(): k for k in pv if k != "best"}
    alias = {"qemu": "proxmox", "kubernetes": "k0s"}  # the paper's column of a platform type
    known = {names.get(t, names.get(alias.get(t, ""))): g for t, g in values.items()}
    known.pop(None, None)
    if len(known) < 2:
        out["detail"] = (f"only {next(iter(known))} measured here: nothing to rank" if known else out["detail"])
        return out
    a, b = sorted(known, key=lambda k: known[k].value, reverse=True)[:2]
    est = J.ratio(known[a], known[b])
    out["yours"] = a
    listing = ", ".join(f"{k} {g.value:.3f} {g.span()}" for k, g in known.items())
    if est is None:
        out["detail"] = listing
        return out
    named, close = paper_winner(value)
    margin = 1 + value.tolerance
    lo, hi = est.ci if est.ci else (None, None)
    within = lo is not None and hi is not None and 1 / margin <= lo and hi <= margin
    out["yours"] = a if lo is not None and lo > 1 else "tie" if within else a
    note = f" (the paper's own gap is under {value.tolerance:.0%})" if close else ""
    if lo is None or hi is None or not (lo > 1 or within):
        out["verdict"], out["estimate"], out["band"] = J.UNDECIDED, est, (1 / margin, margin)
        out["detail"] = f"{listing}; {a} over {b} {est.value:.3f} {est.span()}{note}: " + J.to_decide(est, 1 / margin, margin)
        return out
    if lo > 1:  # a decided winner: the paper's, or a gap both call small
        agree = a == named or (close and hi <= margin)
    else:  # a decided tie: the paper's own values within the margin too
        agree = close
    out["verdict"] = J.AGREES if agree else J.DIFFERS
    out["detail"] = f"{listing}; {a} over {b} {est.value:.3f} {est.span()}{note}"
    return out


LOWER_IS_BETTER = {"Blender", "Deep learning", "Database", "REST server"}
"""Tables 5/6 give these categories as times (the best is the least)."""


def paper_winner(value: P.PaperValue) -> tuple[str, bool]:
    """The paper's best of a Table 5/6 row, and whether its own top two lie within the value's
    tolerance (5 %: the paper gives no interval, so such a gap is no ranking by this rule)."""
    nums = {k: float(v) for k, v in value.paper.items() if k != "best" and isinstance(v, (int, float))}
    best = str(value.paper.get("best"))
    if len(nums) < 2:
        return best, False
    low = value.category in LOWER_IS_BETTER
    ranked = sorted(nums, key=nums.__getitem__, reverse=not low)
    top, second = nums[ranked[0]], nums[ranked[1]]
    gap = (second / top if low else top / second) - 1 if top and second else 0.0
    return (best if best in nums else ranked[0]), gap < value.tolerance


def _claim(value: P.PaperValue, m: C.Matcher, reps: int | None) -> dict[str, Any]:
    y, e = value.yours, value.expect
    out = result(value.claim)
    if y is None:
        return out
    if value.judge:
        return claims.JUDGES[value.judge](value, m, out)
    if y.overall and e is not None and e.near is not None:
        est = m.overall(y.overall)
        if est is not None:
            J.banded(out, est, e.near - e.tolerance, e.near + e.tolerance,
                   f"best {y.overall} here: {est.value:.3f} of the baseline over every metric", reps)
        return out
    if y.stacks:
        return claims.stacks(value, m, out)
    if e is not None and e.cpu_share:
        return claims.cpu_share(value, m, out)
    rows = [r for r in m.rows(y) if r.relative]
    if rows:
        rels = [float(r.relative or 0) for r in rows]
        out["yours"] = [min(rels), max(rels)]
        out["detail"] = f"ratios {min(rels):.3f}-{max(rels):.3f} here over {len(rels)} points"
        if e is not None:
            out["verdict"], why = claims.by_cells(rows, e)
            out["detail"] += f"; {why}" if why else ""
        else:
            out["verdict"] = J.UNDECIDED
            out["detail"] += "; the claim states no bound to hold them to"
    return out


def judge(value: P.PaperValue, m: C.Matcher, caps: dict[str, str], cats: dict[str, P.CategorySpec],
          repetitions: int | None = None) -> dict[str, Any]:
    """One paper value beside the user's. repetitions: the paper scale's, for the advice."""
    if value.kind == "relative":
        out = _relative(value, m, repetitions)
    elif value.kind == "value":
        out = _value(value, m, repetitions)
    elif value.kind == "range":
        out = _range(value, m, cats, repetitions)
    elif value.kind == "best":
        out = _best(value, m, cats)
    else:
        out = _claim(value, m, repetitions)
    if out["verdict"] == J.NOT_MEASURED and value.needs and not out["detail"]:
        out["detail"] = f"needs {value.needs.replace('_', ' ')}" + (f": {caps[value.needs]}" if value.needs in caps else "")
    return out
