"""Claims of the papers judged by rules of their own, each from the data its `yours` points at and
with the interval rule of studies/judge.py wherever there is an interval.

Each judge fills the result of studies/verdicts.py: paper (the claim), yours, verdict, detail.
A claim whose data is missing stays "not measured here" and says what would measure it.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..analysis.stats import MIN_EFFECT
from ..analysis.summary import Row
from ..report import runinfo
from . import compare as C
from . import judge as J
from . import paper as P

Judge = Callable[[P.PaperValue, C.Matcher, dict[str, Any]], dict[str, Any]]


def combine(verdicts: Sequence[str]) -> str:
    """Every part agrees: agrees; one differs: differs; else undecided."""
    if not verdicts:
        return J.NOT_MEASURED
    if J.DIFFERS in verdicts:
        return J.DIFFERS
    return J.AGREES if all(v == J.AGREES for v in verdicts) else J.UNDECIDED


def by_cells(rows: Sequence[Row], e: P.Expect) -> tuple[str, str]:
    """A claim over several ratios (within 1 +- w, below b or above a), each cell by its own interval."""
    low, high = (1 - e.within, 1 + e.within) if e.within is not None else (e.above, e.below)
    if high is None and low is None:
        return J.UNDECIDED, "the claim states no bound"
    verdicts, open_ = [], []
    for r in rows:
        est = C.relative_estimate(r)
        v = J.decide(est, low, high) if est else J.UNDECIDED
        verdicts.append(v)
        if v == J.UNDECIDED and est is not None:
            open_.append(f"{r.benchmark} {J.to_decide(est, low, high)}")
    bad = [r.benchmark for r, v in zip(rows, verdicts) if v == J.DIFFERS]
    verdict = combine(verdicts)
    why = (f"outside {J.band_text(low, high)}: {', '.join(bad[:4])}" if bad else
           f"{len(open_)} of {len(rows)} cells undecided ({'; '.join(open_[:2])})" if open_ else
           f"every cell's interval inside {J.band_text(low, high)}")
    return verdict, why


def cpu_share(value: P.PaperValue, m: C.Matcher, out: dict[str, Any]) -> dict[str, Any]:
    """002's Figs. 11-13: each VM point's ratio against the CPU share it gets."""
    e = value.expect
    assert value.yours is not None and e is not None
    shares = [(r, est, x) for r, est, x in m.cpu_shares(value.yours) if est is not None]
    if not shares:
        return out
    rels = [est.value for _, est, _ in shares]
    out["yours"] = [min(rels), max(rels)]
    verdicts = [J.decide(est, x * (1 - e.tolerance), x * (1 + e.tolerance)) for _, est, x in shares]
    out["verdict"] = combine(verdicts)
    off = [f"{r.benchmark} {est.value:.2f} (share {x:.2f})" for (r, est, x), v in zip(shares, verdicts)
           if v != J.AGREES]
    out["detail"] = (f"ratios to native alone {min(rels):.3f}-{max(rels):.3f} over {len(rels)} points; the CPU "
                     "shares predict " + ", ".join(f"{r.benchmark} {x:.2f}" for r, _, x in shares)
                     + f" (+-{e.tolerance:.0%})" + (f"; not inside: {', '.join(off[:4])}" if off else ""))
    return out


def stacks(value: P.PaperValue, m: C.Matcher, out: dict[str, Any]) -> dict[str, Any]:
    """003's Fig. 4: each stacked cell against the product of its layers, within +-10 % (its measured
    interval carried to the error), except the cells the paper itself excepts (Docker on the database)."""
    within = value.expect.within if value.expect and value.expect.within else 0.1
    cells = [s for s in m.stacks() if not (s.benchmark.split("[")[0] == "sqlite" and "docker" in s.platform + s.inner)]
    if not cells:
        return out
    verdicts = []
    for s in cells:
        ci = s.measured_ci95
        est = J.Estimate(s.error, (s.predicted / ci[1] - 1, s.predicted / ci[0] - 1) if ci and ci[0] > 0 else None)
        verdicts.append(J.decide(est, -within, within))
    worst = max(cells, key=lambda s: abs(s.error))
    out["yours"], out["verdict"] = worst.error, combine(verdicts)
    out["detail"] = (f"largest prediction error {worst.error:+.1%} ({worst.platform} {worst.benchmark}) over "
                     f"{len(cells)} stacked cells, Docker on the database left out as the paper excepts it; "
                     f"{verdicts.count(J.AGREES)} within +-{within:.0%}, {verdicts.count(J.DIFFERS)} outside")
    return out


def _boards(value: P.PaperValue, m: C.Matcher, out: dict[str, Any]) -> dict[str, Any]:
    """A board with AES instructions against one without: runs of the part on two hosts."""
    y, e = value.yours, value.expect
    assert y is not None and e is not None and e.ratio is not None
    groups: dict[bool, list[float]] = {True: [], False: []}
    for pr in m.runs_of(y):
        aes = bool(runinfo.facts(pr.report.run).get("aes"))
        if y.section:
            sub = C.Matcher([pr])
            groups[aes] += [float(C.walk(en, y.field or "")) for en, _ in sub.entries(y, y.where)
                            if isinstance(C.walk(en, y.field or ""), (int, float))]
        else:
            groups[aes] += [r.mean for r in C.Matcher([pr]).rows(y) if r.mean is not None]
    low, high = e.ratio
    if not groups[True] or not groups[False]:
        have = "with" if groups[True] else "without" if groups[False] else ""
        out["detail"] = ("needs runs on two hosts, one with AES instructions and one without"
                         + (f" (the given runs are all {have})" if have else "")
                         + f": run part {y.part} on each and give both runs to `study report`")
        return out
    a, b = J.of_values(groups[True]), J.of_values(groups[False])
    est = J.ratio(a, b) if a and b else None
    if est is None:
        return out
    return J.banded(out, est, low, high, f"with AES instructions over without: {est.value:.3g}")


def _density_trend(value: P.PaperValue, m: C.Matcher, out: dict[str, Any]) -> dict[str, Any]:
    """000's Figs. 4-9 (Sections IV.A-B; IV.C states no trend for Figs. 10-11): per-container throughput
    at the highest healthy count against one container."""
    assert value.yours is not None
    verdicts, parts = [], []
    for entry, _ in m.entries(value.yours, {}):
        one = entry.get("throughput_at_1")
        points = [p for p in entry.get("points") or [] if p.get("ok") and p.get("count", 0) > 1 and p.get("per_instance")]
        if not one or not points:
            continue
        top = max(points, key=lambda p: p["count"])
        est = J.of_values([v / one for v in top["per_instance"]], "containers")
        if est is None:
            continue
        v = J.decide(est, None, 1.0)
        if est.ci and 1 / (1 + MIN_EFFECT) <= est.ci[0] and est.ci[1] <= 1 + MIN_EFFECT:
            v = J.DIFFERS  # flat within 2 %: no decrease
        verdicts.append(v)
        parts.append(f"{entry.get('platform')}: {est.value:.2f} of one container's at {top['count']} {est.span('.2f')}")
    if not verdicts:
        return out
    out["verdict"], out["yours"] = combine(verdicts), "; ".join(parts)
    out["detail"] = ("per-container rate at the highest healthy count over the rate of one container (interval "
                     "over the containers at that count): " + "; ".join(parts[:3]))
    return out


def _migration_storage(value: P.PaperValue, m: C.Matcher, out: dict[str, Any]) -> dict[str, Any]:
    """000's Fig. 12: judged only from moves to another host whose destinations' storage differs (two
    media or more, each with its raw write rate and the network path's rate recorded): where a
    medium is slower than the path the move follows the medium (times differ with it); where every
    medium is faster, the network bounds the move (times alike)."""
    assert value.yours is not None
    dests: list[dict[str, Any]] = []
    for pr in m.runs_of(value.yours):
        for sec in pr.report.sections:
            if sec.key != "migration" or not isinstance(sec.data, dict):
                continue
            facts = sec.data.get("storage") or {}
            for p in sec.data.get("points") or []:
                f = facts.get(p.get("to") or "") or {}
                rate = (f.get("path_throughput") or {}).get("MBps")
                total = (p.get("metrics") or {}).get("total_s")
                if f.get("host") and rate and f.get("write_MBps") and total:
                    dests.append({"count": p["count"], "kind": f.get("kind"), "write": f["write_MBps"], "path": rate,
                                  "total": J.Estimate(total["mean"], tuple(total["ci95"]) if total.get("ci95") else None,
                                                      total.get("n", 1), f"{total.get('n', 1)} rounds"),
                                  "host": f["host"], "run": pr.report.run.id})
    if not dests:
        out["detail"] = ("needs a migration to another host: `virtbench study run 000 --part migration --hosts NAME`"
                         "; the given runs moved containers within one host or none")
        return out
    top = max(d["count"] for d in dests)
    at = [d for d in dests if d["count"] == top]
    media = {(d["kind"], round(d["write"], -1)) for d in at}
    if len(at) < 2 or len(media) < 2 or max(d["write"] for d in at) < 1.2 * min(d["write"] for d in at):
        out["verdict"] = J.NOT_MEASURED
        out["detail"] = (f"one destination storage only ({at[0]['kind']}, {at[0]['write']:.0f} MB/s, the path "
                         f"{at[0]['path']:.0f} MB/s): the claim compares media; move to a destination on another medium "
                         "(USB 2.0/3.0, PCIe Gen 2/3) in a second run and give both runs")
        return out
    slow, fast = min(at, key=lambda d: d["write"]), max(at, key=lambda d: d["write"])
    est = J.ratio(slow["total"], fast["total"])
    if est is None:
        return out
    bound_ratio = min(fast["write"], fast["path"]) / min(slow["write"], slow["path"])
    storage_bound = slow["write"] < slow["path"]
    low, high = (max(1.0 + MIN_EFFECT, 0.5 * bound_ratio), None) if storage_bound else (1 / 1.15, 1.15)
    text = (f"{top} containers: {slow['kind']} ({slow['write']:.0f} MB/s) took {est.value:.2f} x the time of "
            f"{fast['kind']} ({fast['write']:.0f} MB/s), the path {slow['path']:.0f} MB/s: "
            + ("the slower medium is below the path, so the paper expects it to take longer" if storage_bound else
               "both media are above the path, so the paper expects the network to bound both alike"))
    return J.banded(out, est, low, high, text)


def _owd(value: P.PaperValue, m: C.Matcher, out: dict[str, Any]) -> dict[str, Any]:
    """000's Figs. 17-18: the delay grows with the size (largest against smallest message), and
    differs substantially (x1.5 or more) between nodes where both parts ran."""
    assert value.yours is not None
    by_part: dict[str, dict[int, J.Estimate]] = {}
    for pr in m.runs:
        if pr.base not in ("network-same", "network-different"):
            continue
        for r in C.Matcher([pr]).rows(value.yours):
            size = m.params_of(r).get("msg_size")
            if size is not None and (e := C.mean_estimate(r)) is not None:
                by_part.setdefault(pr.base or pr.part, {})[int(size)] = e
    if not by_part:
        return out
    verdicts, parts = [], []
    for part, sizes in by_part.items():
        if len(sizes) >= 2:
            est = J.ratio(sizes[max(sizes)], sizes[min(sizes)])
            if est is not None:
                verdicts.append(J.decide(est, 1.0, None))
                parts.append(f"{part}: {max(sizes)} B over {min(sizes)} B {est.value:.2f} {est.span('.2f')}")
    same, diff = by_part.get("network-same", {}), by_part.get("network-different", {})
    common = sorted(set(same) & set(diff))
    if common:
        est = J.ratio(diff[common[-1]], same[common[-1]])
        if est is not None:
            verdicts.append(J.decide(est, 1.5, None) if est.value >= 1 else J.decide(est, None, 1 / 1.5))
            parts.append(f"different over same node at {common[-1]} B {est.value:.2f} {est.span('.2f')}")
    else:
        parts.append("same against different nodes needs both parts: `virtbench study run 000 --part network-same "
                     "--part network-different --hosts NAME`")
    out["verdict"], out["detail"] = combine(verdicts), "; ".join(parts)
    return out


def _read_over_write(value: P.PaperValue, m: C.Matcher, out: dict[str, Any]) -> dict[str, Any]:
    """002's Figs. 7-9: dd's read rate above its write rate at every point."""
    assert value.yours is not None
    rows = m.rows(value.yours)
    pairs: dict[tuple[str, str], dict[str, J.Estimate]] = {}
    for r in rows:
        if (e := C.mean_estimate(r)) is not None and r.metric in ("read_MBps", "write_MBps"):
            pairs.setdefault((r.platform, r.benchmark), {})[r.metric] = e
    verdicts, low = [], []
    for (platform, bench), d in pairs.items():
        if len(d) == 2 and (est := J.ratio(d["read_MBps"], d["write_MBps"])) is not None:
            verdicts.append(J.decide(est, 1.0, None))
            if verdicts[-1] != J.AGREES:
                low.append(f"{platform} {bench} read/write {est.value:.2f} {est.span('.2f')}")
    if not verdicts:
        return out
    out["verdict"] = combine(verdicts)
    out["detail"] = f"read over write at {len(verdicts)} points" + (f"; not decidedly above 1: {'; '.join(low[:3])}"
                                                                     if low else ": every interval above 1")
    return out


def _ping(value: P.PaperValue, m: C.Matcher, out: dict[str, Any]) -> dict[str, Any]:
    """003's ping: a container's round trip minus bare metal's, in ms, against the paper's 0.1 ms."""
    y, e = value.yours, value.expect
    assert y is not None and e is not None and e.near is not None
    rows = m.rows(y)
    native = {r.benchmark: r for r in rows if r.relative == 1.0 or r.verdict == "baseline"}
    verdicts, parts = [], []
    for r in rows:
        base = native.get(r.benchmark)
        if base is None or r is base:
            continue
        a, b = C.mean_estimate(r), C.mean_estimate(base)
        if a is None or b is None:
            continue
        ci = None
        if a.ci and b.ci:
            half = ((a.ci[1] - a.ci[0]) ** 2 + (b.ci[1] - b.ci[0]) ** 2) ** 0.5 / 2
            ci = (a.value - b.value - half, a.value - b.value + half)
        est = J.Estimate(a.value - b.value, ci, min(a.n, b.n), f"{min(a.n, b.n)} repetitions")
        verdicts.append(J.decide(est, e.near - e.tolerance, e.near + e.tolerance))
        parts.append(f"{r.platform} {est.value:+.3f} ms {est.span('.3f')}")
    if verdicts:
        out["verdict"], out["yours"] = combine(verdicts), parts[0]
        out["detail"] = f"round trip over bare metal's: {'; '.join(parts)}; the paper's {e.near:g} +- {e.tolerance:g} ms"
    return out


def _latency_rows(m: C.Matcher, y: P.Yours) -> list[dict[str, Any]]:
    return [en for en, _ in m.entries(y, y.where)]


def _spikes(value: P.PaperValue, m: C.Matcher, out: dict[str, Any]) -> dict[str, Any]:
    """004's Figs. 7-8: rare spikes at 17.3 kpkt/s with per-node pinning: the worst latency at least
    5 x the 99.9th percentile on a line (an observation of rare events: no interval)."""
    assert value.yours is not None
    seen = []
    for en in _latency_rows(m, value.yours):
        for lat in en.get("latency") or []:
            rate = lat.get("rate_pps") or 0
            if abs(rate - 17300) <= 0.05 * 17300 and lat.get("max") and lat.get("p99.9"):
                seen.append((en["length"], lat["max"] / lat["p99.9"], lat["max"]))
    if not seen:
        return out
    spiky = [s for s in seen if s[1] >= 5]
    out["verdict"] = J.AGREES if spiky else J.DIFFERS if all(s[1] < 2 for s in seen) else J.UNDECIDED
    out["yours"] = max(s[2] for s in seen)
    out["detail"] = ("worst latency over p99.9 at 17.3 kpkt/s: " + ", ".join(f"{n} nodes x{r:.1f} ({mx:.0f} us)"
                                                                           for n, r, mx in seen)
                     + "; a spike is x5 or more (observed, not estimated)")
    return out


def _pinning(value: P.PaperValue, m: C.Matcher, out: dict[str, Any], better: str, worse: str, field: str,
             higher: bool, longest: int | None = None) -> dict[str, Any]:
    """`better` pinning against `worse` on each line (up to `longest` nodes), by `field`'s rounds."""
    assert value.yours is not None
    by: dict[tuple[str, int], dict[str, Any]] = {}
    for en in _latency_rows(m, value.yours):
        if longest is not None and en["length"] > longest:
            continue
        by.setdefault((en.get("platform", ""), en["length"]), {})[en.get("pinning", "")] = en
    verdicts, parts = [], []
    for (_, length), pins in sorted(by.items()):
        if better not in pins or worse not in pins:
            continue
        a = J.of_values([v for v in C.walk(pins[better], f"{field}_rounds") or [] if v], "rounds")
        b = J.of_values([v for v in C.walk(pins[worse], f"{field}_rounds") or [] if v], "rounds")
        if a is None or b is None:
            continue
        est = J.ratio(a, b) if higher else J.ratio(b, a)
        if est is None:
            continue
        verdicts.append(J.decide(est, 1.0, None))
        parts.append(f"{length} nodes {est.value:.2f} {est.span('.2f')}")
    if verdicts:
        out["verdict"], out["yours"] = combine(verdicts), "; ".join(parts)
        out["detail"] = f"{better} over {worse} ({field}, above 1 is the paper's way): " + "; ".join(parts[:4])
    return out


CORE_PIN_LONGEST = 8
"""004 pinned per core on lines up to 8 nodes ('limited by the AMD EPYC 7551P to lines of length 8')."""


def _core_pin(value: P.PaperValue, m: C.Matcher, out: dict[str, Any]) -> dict[str, Any]:
    return _pinning(value, m, out, "core", "node", "latency/1ndr/p99.99", higher=False, longest=CORE_PIN_LONGEST)


def _pin_latency(value: P.PaperValue, m: C.Matcher, out: dict[str, Any]) -> dict[str, Any]:
    return _pinning(value, m, out, "node", "none", "latency/1ndr/p99.99", higher=False)


def _pin_rate(value: P.PaperValue, m: C.Matcher, out: dict[str, Any]) -> dict[str, Any]:
    return _pinning(value, m, out, "node", "none", "ndr_pps", higher=True)


JUDGES: dict[str, Judge] = {"boards": _boards, "density-trend": _density_trend, "migration-storage": _migration_storage,
                            "owd": _owd, "read-over-write": _read_over_write, "ping": _ping, "spikes": _spikes,
                            "core-pin": _core_pin, "pin-rate": _pin_rate, "pin-latency": _pin_latency}
