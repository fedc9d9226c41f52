"""Latency histograms in HdrHistogram's standard form (the `hdrhistogram` package).

Values are stored in nanoseconds, 3 significant digits, from 1 ns to 10 s; the encoding is
HdrHistogram's compressed V2 format as base64 text (`HISTF...`), what every HdrHistogram
implementation reads (`HistogramLogProcessor`, hdrhistogram-go, HdrHistogram_py).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping

from hdrh.histogram import HdrHistogram

LOWEST_NS = 1
HIGHEST_NS = 10 * 10**9
DIGITS = 3
PERCENTILES = (50.0, 90.0, 99.0, 99.9, 99.99, 99.999)
MIN_BEYOND = 10
"""A percentile p is reported only when at least this many packets lie beyond it,
count * (1 - p) >= 10: p99.999 needs 10^6 packets, p99.9 needs 10^4."""
MEDIA_TYPE = "application/x-hdrhistogram"


def new() -> HdrHistogram:
    return HdrHistogram(LOWEST_NS, HIGHEST_NS, DIGITS)


def from_bins(bins: Mapping[int, int], bin_us: int = 1, above: int = 0, above_ns: int = 10**9) -> HdrHistogram:
    """iperf's bins (index k: [(k-1)w, kw) us) recorded at each bin's middle; the packets
    beyond the histogram's range at its end (a lower bound, flagged by the caller)."""
    h = new()
    for k, count in bins.items():
        if count > 0:
            h.record_value(max(LOWEST_NS, int(round((k - 0.5) * bin_us * 1000))), count)
    if above:
        h.record_value(above_ns, above)
    return h


def encode(h: HdrHistogram) -> bytes:
    return h.encode()


def decode(data: bytes | str) -> HdrHistogram:
    return HdrHistogram.decode(data if isinstance(data, bytes) else data.encode())


def merged(histograms: Iterable[HdrHistogram]) -> HdrHistogram:
    out = new()
    for h in histograms:
        out.add(h)
    return out


def supported(count: int, p: float) -> bool:
    return count * (1 - p / 100.0) >= MIN_BEYOND


def summary_us(h: HdrHistogram) -> dict[str, float | int | None]:
    """p50 ... p99.999, max and count in microseconds; a percentile the count cannot support is None."""
    count = h.get_total_count()
    out: dict[str, float | int | None] = {}
    for p in PERCENTILES:
        key = f"p{p:g}"
        out[key] = _us(h.get_value_at_percentile(p)) if count and supported(count, p) else None
    out["max"] = _us(h.get_max_value()) if count else None
    out["count"] = count
    return out


def _us(ns: int) -> float:
    """Microseconds to the histogram's precision (3 significant digits)."""
    return float(f"{ns / 1000.0:.{DIGITS}g}")


def percentile_curve(h: HdrHistogram, points_per_decade: int = 10, top: float = 99.9999) -> list[tuple[float, float]]:
    """(percentile, latency us) on the 1/(1-p) axis: evenly spaced in log10(1/(1-p)), up to
    the largest percentile the count supports."""
    count = h.get_total_count()
    pts: list[tuple[float, float]] = []
    i = 0
    while True:
        p = 100.0 * (1 - 10 ** (-i / points_per_decade))
        if p > top or not supported(count, p):
            break
        pts.append((p, _us(h.get_value_at_percentile(p))))
        i += 1
    return pts
