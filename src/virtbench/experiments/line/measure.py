"""One point of the line experiment (platform, pinning, length, round): the NDR/PDR search,
then latency trials at the chosen rates, stored as one execution with its samples and
attachments (search trials as JSON, an HDR histogram and the worst case per 100 ms per rate)."""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...store.db import now
from . import counters, hdr, iperf2, search
from .iperf2 import Trial
from .pinning import Placement
from .section import LineSection, rate_label
from .topology import Line
from .traffic import TrialFailed, run_trial

NETWORK = "network"
LATENCY = "latency"


def key(length: int, pinning: str) -> str:
    return f"line[length={length},pinning={pinning}]"


def sample(metric: str, value: float, unit: str, higher: bool, category: str) -> dict[str, Any]:
    return {"metric": metric, "value": float(value), "unit": unit, "higher_is_better": higher, "category": category}


@dataclass
class Point:
    round: int
    warmup: bool
    platform: str
    pinning: str
    line: Line
    where: Placement


def trial_json(t: Trial) -> dict[str, Any]:
    return {"rate_pps": t.rate_pps, "seconds": t.seconds, "sent": t.sent, "received": t.received,
            "loss": t.loss, "offered_pps": t.offered_pps}


def find_rates(section: LineSection, trial: Callable[[float, float], Trial], max_rate: float) -> search.SearchResult:
    s = section.search
    if s.method == "steps":
        return search.steps(trial, start=s.start, step=s.step, seconds=s.seconds, max_rate=max_rate, goals=s.loss,
                            past_loss=s.past_loss)
    return search.ndr_pdr(trial, max_rate=max_rate, min_rate=max(10.0, max_rate / 1000), trial_seconds=s.trial_seconds,
                          final_seconds=s.final_seconds or s.trial_seconds, precision=s.precision, goals=s.loss,
                          max_trials=s.max_trials)


def measure(store: Any, run_id: str, point: Point, section: LineSection, max_rate: float,
            log: Callable[[str], None], benchmark: str | None = None) -> bool:
    """Search, then latency; store the execution (failed, with the tools' output, on error) under
    `benchmark` (default: the point's key; a re-measurement has its own, outside the statistics)."""
    started, t0 = now(), time.perf_counter()
    line = point.line
    payload = section.payload
    raws: list[str] = []

    def trial(rate: float, seconds: float) -> Trial:
        t, raw = run_trial(line, rate, seconds, payload, point.where)
        raws[:] = [raw.client, raw.server]
        return t

    samples: list[dict[str, Any]] = []
    attachments: list[dict[str, Any]] = []
    status, error, argv = "ok", "", []
    stdout_lines: list[str] = []
    try:
        result = find_rates(section, trial, max_rate)
        stdout_lines.append(f"{result.method}: NDR {result.ndr_pps:.0f} pkt/s, PDR {result.pdr_pps:.0f} pkt/s "
                            f"in {len(result.trials)} trials (max rate {max_rate:.0f}){'' if result.complete else ', capped'}")
        stdout_lines += [f"  {t.rate_pps:10.0f} pkt/s {t.seconds:g} s: sent {t.sent} received {t.received} "
                         f"loss {t.loss:.5f}" for t in result.trials]
        samples += [sample("ndr_pps", result.ndr_pps, "pkt/s", True, NETWORK),
                    sample("pdr_pps", result.pdr_pps, "pkt/s", True, NETWORK)]
        attachments.append({"name": "search", "kind": "line:search", "media_type": "application/json", "data": {
            "method": result.method, "ndr_pps": result.ndr_pps, "pdr_pps": result.pdr_pps, "max_rate_pps": max_rate,
            "complete": result.complete, "goals": section.search.loss,
            "trials": [trial_json(t) for t in result.trials]}})
        if line.length > 0 and benchmark is None:  # a re-measurement checks the rates only
            for rate in section.latency_rates:
                pps = float(rate) if not isinstance(rate, str) and rate > 1 else result.ndr_pps * (
                    1.0 if rate == "max" else float(rate))
                label = rate_label(rate)
                if pps < 1:
                    stdout_lines.append(f"latency at {label}: skipped, NDR is 0")
                    continue
                lat = latency_trial(line, pps, section, point.where)
                summ = hdr.summary_us(lat["hdr"])
                stdout_lines.append(f"latency at {label} ({pps:.0f} pkt/s): " + ", ".join(
                    f"{k} {v}" for k, v in summ.items()))
                for k in ("p50", "p99", "max"):
                    if (value := summ[k]) is not None:
                        samples.append(sample(f"{k}_us@{label}", float(value), "us", False, LATENCY))
                attachments += [
                    {"name": f"hdr@{label}", "kind": "line:hdr", "media_type": hdr.MEDIA_TYPE, "data": hdr.encode(lat["hdr"])},
                    {"name": f"latency@{label}", "kind": "line:latency", "media_type": "application/json",
                     "data": {k: v for k, v in lat.items() if k != "hdr"} | {"label": label}}]
    except TrialFailed as exc:
        status, error = "failed", str(exc)
        raws = [exc.raw.client, exc.raw.server]
        argv = exc.raw.argv
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as exc:  # noqa: BLE001 - a failed point, kept with what the tools printed
        status, error = "failed", f"{type(exc).__name__}: {exc}"
    if status == "failed":
        log(f"{point.platform} length {line.length} pinning {point.pinning}: failed: {error}")
    store.record(run_id=run_id, round=point.round, warmup=point.warmup, platform=point.platform,
                 benchmark=benchmark or key(line.length, point.pinning), status=status, started_at=started,
                 finished_at=now(),
                 duration_s=time.perf_counter() - t0, instance=line.tag, argv=argv,
                 stdout="\n".join(stdout_lines) + ("\n--- last iperf client output ---\n" + raws[0] if raws else ""),
                 stderr=raws[1] if len(raws) > 1 else "", error=error,
                 samples=samples if status == "ok" and benchmark is None else [],  # a recheck: its search attachment
                 attachments=attachments if status == "ok" else [])
    return status == "ok"


def latency_trial(line: Line, pps: float, section: LineSection, where: Placement) -> dict[str, Any]:
    probe = counters.start(section.latency_seconds) if section.counters else None
    t, _raw = run_trial(line, pps, section.latency_seconds, section.payload, where)
    counted = counters.finish(probe) if probe is not None else None
    return {"rate_pps": pps, "sent": t.sent, "received": t.received, "loss": t.loss, "above_1s": t.above,
            "worst": [[end, ms * 1000.0] for end, ms in t.worst_ms], "max_us": (t.max_ms or 0) * 1000.0,
            "worst_n": iperf2.worst(t.intervals, section.worst.count), "sustained": t.sustained,
            "counters": counted, "hdr": hdr.from_bins(t.bins, above=t.above)}
