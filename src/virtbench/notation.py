"""One notation for every number a person reads, defined once and used by every surface
(terminal, HTML file, figures, tables.md/tex, web pages, compare, verdict reasons, `list`).

- An interval is `[lo, hi]`: brackets, a comma and a space, its ends in the notation of the
  estimate before it: a ratio `0.993 [0.982, 1.005]`, a change `-1.7 % [-7.4, +4.4]`. Never
  `0.98..1.01`, `[0.98-1.01]`, `[-7.4 to +4.4 %]`.
- A change is signed, in per cent with a space before `%`; its ends get as many decimals as
  it takes for an end off zero not to read as zero (`[-3.4, -0.04]` beside "slower", never
  `-0.0`).
- Numbers are positional, never `7.646e-04`: a column in a unit with prefixes is scaled
  (`report/units.py`), other numbers keep 4 significant digits, thousands grouped by commas.
- Units are spelled one way (`µs`, never `us`); lifecycle steps in ms.
- Times are UTC to the second with their zone: `2026-11-27 12:58:44 UTC`.
- Values from configuration read as words: `AES-256, Blowfish`, `yes`/`no`, `-`, never a
  Python repr (`('AES-256', 'Blowfish')`, `True`, `None`).
- Keys read as labels: `higher is better`, never `higher_is_better`.
"""
from __future__ import annotations

import ast
import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

MISSING = "-"
"""What stands for no value in a text; the HTML renderers draw it as an en dash."""
UNITS = {"us": "µs", "usec": "µs", "b/s": "bit/s"}
"""Unit spellings: what a tool or declaration wrote -> the one shown."""
LABELS = {
    "higher_is_better": "higher is better", "n": "n", "n_warmup": "warm-up n", "cv": "CV",
    "ci95": "95 % interval of the mean", "mean_boot_ci95": "bootstrap 95 % interval of the mean",
    "median_ci95": "bootstrap 95 % interval of the median", "relative": "relative (the verdict's estimate)",
    "relative_ci95": "95 % interval of the ratio", "ratio_of_means": "ratio of the means",
    "verdict_reason": "why", "p_value": "p", "stdev": "standard deviation", "sem": "standard error",
    "mad": "median absolute deviation", "iqr": "interquartile range", "min": "minimum", "max": "maximum",
    "drift_slope": "drift per round", "warmup_effect": "warm-up effect", "failed": "failed executions",
    "baseline_mean": "baseline mean", "baseline_median": "baseline median",
}
"""Field names of stored or computed records -> the words a reader sees."""


class Ratio(float):
    """A ratio to the baseline in a table: every renderer writes it as `ratio` does (0.800, never
    0.8000 beside 1.000)."""


def number(x: float | int | None, digits: int = 4) -> str:
    """A plain number: `MISSING` for none or NaN, integers grouped, others with `digits`
    significant digits, positional (0.0007646, never 7.646e-04), grouped from 10^digits up; a
    Ratio with three decimals."""
    if x is None or isinstance(x, float) and not math.isfinite(x):
        return MISSING
    if isinstance(x, Ratio):
        return ratio(x)
    if isinstance(x, bool):
        return yes_no(x)
    if isinstance(x, int) or float(x).is_integer() and abs(x) >= 10 ** digits:
        return f"{int(x):,}"
    if x == 0:
        return "0"
    if abs(x) >= 10 ** digits:
        return f"{x:,.0f}"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(x))))
    return f"{x:.{decimals}f}"


def ratio(x: float | None) -> str:
    """A ratio to the baseline (or of B to A): three decimals, 1.000 is the same."""
    return MISSING if x is None or not math.isfinite(x) else f"{x:.3f}"


def ratio_end(x: float | None) -> str:
    """An interval's end as a ratio: one more decimal (up to six) while an end off 1 would read
    as `1.000`, so an interval that excludes 1 never shows an end of 1 beside "slower"."""
    if x is None or not math.isfinite(x):
        return MISSING
    d = 3
    while d < 6 and x != 1 and float(f"{x:.{d}f}") == 1:
        d += 1
    return f"{x:.{d}f}"


def interval(lo: float | None, hi: float | None, fmt: Any = ratio_end) -> str:
    """The one interval notation: `[lo, hi]`, each end as fmt writes it (a ratio's by ratio_end)."""
    if lo is None or hi is None:
        return ""
    return f"[{fmt(lo)}, {fmt(hi)}]"


def ratio_with_interval(x: float | None, ci: Any) -> str:
    """`0.993 [0.982, 1.005]`, or the ratio alone without an interval."""
    return ratio(x) + (f" {interval(ci[0], ci[1])}" if ci else "")


def _signed(pct: float, decimals: int) -> str:
    """A signed percentage; one that rounds to zero is `±0` (never `-0.0`)."""
    text = f"{pct:+.{decimals}f}"
    return "±" + text[1:] if float(text) == 0 else text


def change(r: float | None, decimals: int = 1) -> str:
    """A ratio as a signed change in per cent: 0.983 -> `-1.7 %`."""
    if r is None or not math.isfinite(r):
        return MISSING
    return f"{_signed((r - 1) * 100, decimals)} %"


def change_interval(lo: float, hi: float, decimals: int = 1) -> str:
    """A ratio's interval as changes in per cent, `[-7.4, +4.4]` (the estimate before it carries
    the %): one more decimal while an end off zero would read as a zero, so an interval that
    excludes 1 never shows an end of `-0.0`."""
    ends = []
    for e in ((lo - 1) * 100, (hi - 1) * 100):
        d = decimals
        while d < 4 and e != 0 and float(f"{e:.{d}f}") == 0:
            d += 1
        ends.append(_signed(e, d))
    return f"[{ends[0]}, {ends[1]}]"


def percent(x: float | None, decimals: int = 0) -> str:
    """A share or a level as a percentage: 0.94 -> `94 %`."""
    return MISSING if x is None or not math.isfinite(x) else f"{x * 100:.{decimals}f} %"


def unit(u: str | None) -> str:
    """The one spelling of a unit."""
    return UNITS.get(u or "", u or "")


def milliseconds(seconds: float | None) -> str:
    """A lifecycle step or other short duration in ms: 0.0007646 s -> `0.765 ms`, 0.2472 -> `247.2 ms`."""
    if seconds is None or not math.isfinite(seconds):
        return MISSING
    return f"{number(seconds * 1000, 4)} ms"


def when(t: Any) -> str:
    """A stored time with its zone, to the second: `2026-11-27 12:58:44 UTC`. Stored times are
    UTC (naive or aware datetimes, or ISO text such as the API's `...T12:58:44Z`)."""
    if t is None or t == "":
        return MISSING
    if isinstance(t, str):
        try:
            t = datetime.fromisoformat(t.replace("Z", "+00:00"))
        except ValueError:
            return t
    if isinstance(t, datetime):
        if t.tzinfo is not None:
            t = t.astimezone(UTC)
        return f"{t:%Y-%m-%d %H:%M:%S} UTC"
    return str(t)


def yes_no(v: bool) -> str:
    return "yes" if v else "no"


def plain(v: Any) -> str:
    """Any configuration or provenance value as words, never a Python repr: lists joined by
    commas, mappings as `key value`, booleans yes/no, None as `MISSING`, numbers by `number`."""
    if v is None:
        return MISSING
    if isinstance(v, bool):
        return yes_no(v)
    if isinstance(v, int | float):
        return number(v) if isinstance(v, float) else str(v)
    if isinstance(v, Mapping):
        return ", ".join(f"{label(str(k))} {plain(x)}" for k, x in v.items()) or MISSING
    if isinstance(v, list | tuple | set | frozenset):
        return ", ".join(plain(x) for x in v) or MISSING
    if isinstance(v, datetime):
        return when(v)
    return str(v)


def params(p: Mapping[str, Any] | None) -> str:
    """Parameters as `name=value` pairs, each value plain: `algorithms=AES-256 Blowfish, msec=1000`."""
    return ", ".join(f"{k}={' '.join(plain(x) for x in v) if isinstance(v, list | tuple) else plain(v)}"
                     for k, v in (p or {}).items())


def option(v: Any) -> str:
    """One platform option's value in its label: plain, a list's items separated by spaces, a
    number as configured (`cpus=1.5`)."""
    if isinstance(v, list | tuple):
        return " ".join(option(x) for x in v) or MISSING
    return plain(v) if v is None or isinstance(v, bool | Mapping) else str(v)


def options(opts: Mapping[str, Any]) -> str:
    """A platform's options as its label shows them in brackets: `lxcfs=no,init=none`."""
    return ",".join(f"{k}={option(v)}" for k, v in opts.items())


_REPR_OPTION = re.compile(r"=(True|False|None|\[[^\[\]]*\]|\{[^{}]*\})(?=[,)\]/]|$)")


def platform_label(text: str | None) -> str:
    """A stored platform label in this notation: labels stored before it carry Python reprs as
    option values (`lxc(lxcfs=False,init=none)` -> `lxc(lxcfs=no,init=none)`)."""
    def value(m: re.Match[str]) -> str:
        try:
            return "=" + option(ast.literal_eval(m.group(1)))
        except (ValueError, SyntaxError):
            return m.group()
    return _REPR_OPTION.sub(value, text or "")


def label(key: str) -> str:
    """The words for a field name: LABELS, else the name with spaces for underscores."""
    return LABELS.get(key, key.replace("_", " "))
