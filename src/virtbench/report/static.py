"""Figures as files for papers: PDF, SVG and PNG drawn with matplotlib (Agg, no display), each
with its data as CSV beside it.

What paper checkers and readers need: fonts embedded as TrueType (Type 42), never Type 3,
which ACM's and IEEE's PDF checkers reject; SVG text kept as text (searchable, editable);
one-column (3.3 in) or two-column (7 in) sizes with fonts readable at that size; legends
outside the data; ratios to the baseline as points with their interval on a tight axis
around 1.0 (bars from 0 would hide a 3-10 % effect); error bars only where they are
intervals, the figure saying which.

Output is reproducible: SVG ids are salted with a fixed string and PDF/SVG carry no
creation date, so the same run gives byte-identical files. Each platform keeps one colour
across every figure, the same as in the HTML report.
"""
from __future__ import annotations

import csv
import io
import math
import textwrap
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.layout_engine import ConstrainedLayoutEngine  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from .figures import BAND, POINTS, RATIO, FigureSpec, Series  # noqa: E402
from .interactive import colours  # noqa: E402

FORMATS = ("pdf", "svg", "png")
WIDTHS = {"column": 3.3, "page": 7.0}
"""Figure widths in inches: one column and two columns (a page) of ACM's and IEEE's layouts."""
FONT_PT = {"column": 7.0, "page": 8.0}
"""Base font size per width: at print size, never below the 6-7 pt the publishers ask for."""
PAPER_RC: Any = {"svg.hashsalt": "virtbench", "figure.dpi": 100, "savefig.dpi": 200, "axes.grid": True,
            "grid.alpha": 0.3, "pdf.fonttype": 42, "ps.fonttype": 42, "svg.fonttype": "none",
            "axes.titlesize": "medium", "figure.titlesize": "medium", "legend.fontsize": "small",
            "xtick.labelsize": "small", "ytick.labelsize": "small"}
"""pdf/ps fonttype 42: TrueType embedded, not Type 3; svg.fonttype none: text stays text."""
_METADATA = {"png": {"Software": "virtbench"}, "svg": {"Date": None, "Creator": "virtbench"},
             "pdf": {"CreationDate": None, "Creator": "virtbench", "Producer": "virtbench"}}
MARKERS = {"faster": "^", "slower": "v", "same": "o", "inconclusive": "o"}
"""Verdict markers: up/down triangles, a filled dot for same, a hollow one for undecided."""
MARK_LABEL = {"faster": "faster", "slower": "slower", "same": "same", "inconclusive": "undecided"}


def _floats(v: Sequence[float | None]) -> np.ndarray:
    return np.array([np.nan if x is None else x for x in v], dtype=float)


def _err(s: Series) -> np.ndarray | None:
    if s.lo is None or s.hi is None:
        return None
    y, lo, hi = _floats(s.y), _floats(s.lo), _floats(s.hi)
    return np.nan_to_num(np.vstack([y - lo, hi - y]), nan=0.0).clip(min=0)


def _colour(name: str, palette: dict[str, str]) -> str | None:
    return palette.get(name.removesuffix(" (warm-up)"))


def _wrap(text: str, chars: int) -> str:
    return "\n".join(textwrap.wrap(text, max(10, chars))) if text else ""


def _cats(spec: FigureSpec) -> list[str]:
    return [str(c) for c in dict.fromkeys(x for s in spec.series for x in s.x)]


def _ratio_limits(spec: FigureSpec) -> tuple[float, float]:
    """A tight axis around 1.0 that holds every estimate and interval, at least +-2 %; for
    absolute points on a log axis (lifecycle), every value with a margin."""
    vals = [v for s in spec.series for v in (*s.y, *(s.lo or []), *(s.hi or []))
            if v is not None and math.isfinite(v) and v > 0]
    if not spec.meta.get(RATIO):
        return (min(vals) / 1.3, max(vals) * 1.3) if vals else (0.1, 10.0)
    lo, hi = min([*vals, 0.98]), max([*vals, 1.02])
    pad = (hi - lo) * 0.06
    return max(lo - pad, 1e-9), hi + pad


def _ratio(ax, spec: FigureSpec, palette: dict[str, str], horizontal: bool) -> None:
    """Points with their intervals, one slot per category, platforms side by side in it; the
    marker says the verdict. Horizontal (the story figure) keeps long labels readable."""
    cats = _cats(spec)
    n = max(1, len(spec.series))
    step = 0.7 / n
    pos = np.arange(len(cats), dtype=float)
    for i, s in enumerate(spec.series):
        colour = _colour(s.name, palette)
        where = pos[[cats.index(str(x)) for x in s.x]] + (i - (n - 1) / 2) * step
        y, err = _floats(s.y), _err(s)
        kw = {"xerr": err} if horizontal else {"yerr": err}
        xs, ys = (y, where) if horizontal else (where, y)
        ax.errorbar(xs, ys, fmt="none", ecolor=colour, elinewidth=0.9, capsize=1.5, **kw)
        marks = s.marks or ["same"] * len(s.y)
        for mark in dict.fromkeys(marks):
            sel = np.array([m == mark for m in marks])
            hollow = mark in ("inconclusive", None)
            ax.plot(xs[sel], ys[sel], MARKERS.get(mark or "", "o"), ms=4, color=colour, ls="none",
                    mfc="white" if hollow else colour, mew=0.9)
    lo, hi = _ratio_limits(spec)
    ticks, labels = pos, [_wrap(c, 44 if horizontal else 28) for c in cats]
    band = spec.meta.get(BAND)
    ratio = bool(spec.meta.get(RATIO))
    if horizontal:
        if band:
            ax.axvspan(band[0], band[1], color="0.9", zorder=0, lw=0)
        if ratio:
            ax.axvline(1.0, color="black", lw=0.8, ls=":")
        ax.set_xlim(lo, hi)
        ax.set_yticks(ticks, labels)
        ax.set_ylim(len(cats) - 0.5, -0.5)  # the first result on top
    else:
        if band:
            ax.axhspan(band[0], band[1], color="0.9", zorder=0, lw=0)
        if ratio:
            ax.axhline(1.0, color="black", lw=0.8, ls=":")
        if spec.ylog:
            ax.set_yscale("log")
        ax.set_ylim(lo, hi)
        long = max((len(c) for c in cats), default=0) > 8
        ax.set_xticks(ticks, labels, rotation=30 if long else 0, ha="right" if long else "center")


def _bars(ax, spec: FigureSpec, palette: dict[str, str]) -> None:
    """Absolute quantities (lifecycle ms), where a bar from 0 is the honest picture."""
    cats = _cats(spec)
    width = 0.8 / max(1, len(spec.series))
    pos = np.arange(len(cats))
    for i, s in enumerate(spec.series):
        idx = [cats.index(str(x)) for x in s.x]
        ax.bar(pos[idx] + (i - (len(spec.series) - 1) / 2) * width, np.nan_to_num(_floats(s.y)), width,
               yerr=_err(s), capsize=2, label=s.name, color=_colour(s.name, palette))
    long = max((len(c) for c in cats), default=0) > 8
    ax.set_xticks(pos, cats, rotation=30 if long else 0, ha="right" if long else "center")


def _boxes(ax, spec: FigureSpec, palette: dict[str, str]) -> None:
    data = [np.asarray(s.y, dtype=float) for s in spec.series]
    ax.boxplot(data, showfliers=False, medianprops={"color": "black"})
    rng = np.random.default_rng(0)
    for i, (d, s) in enumerate(zip(data, spec.series), start=1):
        ax.plot(i + rng.uniform(-0.15, 0.15, d.size), d, "o", ms=2.5, alpha=0.7, color=_colour(s.name, palette))
    ax.set_xticks(range(1, len(data) + 1), [s.name for s in spec.series], rotation=20, ha="right")


def _lines(ax, spec: FigureSpec, palette: dict[str, str]) -> None:
    categorical = spec.meta.get("categorical_x")
    for s in spec.series:
        x = list(range(len(s.x))) if categorical else _floats(s.x)
        y = _floats(s.y)
        colour = _colour(s.name, palette)
        if s.style == "hollow":  # the warm-up, in its platform's colour; one legend entry says what hollow means
            ax.plot(x, y, "o", mfc="none", alpha=0.6, label="_nolegend_", color=colour)
        elif s.style == "dashed":
            ax.plot(x, y, "--", color="grey", label=s.name)
        elif s.style == "points":  # a cloud, not a curve (the worst latencies over time): no joining line
            ax.plot(x, y, "o", ms=2.5, alpha=0.7, label=s.name, color=colour)
        else:
            ax.errorbar(x, y, yerr=_err(s), marker="o", ms=3, capsize=2, label=s.name, color=colour)
    if categorical and spec.series:
        ax.set_xticks(range(len(spec.series[0].x)), [str(v) for v in spec.series[0].x])
    elif spec.kind == "trend":  # rounds are whole numbers
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def _legend(fig, ax, spec: FigureSpec, palette: dict[str, str], width: float) -> None:
    """Below the axes, outside the data: platforms by colour, and verdicts by marker."""
    handles: list[Line2D] = []
    if spec.meta.get(RATIO) or spec.meta.get(POINTS):
        handles = [Line2D([], [], color=_colour(s.name, palette), marker="s", ls="none", label=s.name)
                   for s in spec.series]
        seen = dict.fromkeys(m for s in spec.series for m in (s.marks or []) if m)
        handles += [Line2D([], [], color="grey", marker=MARKERS[m], ls="none",
                           mfc="white" if m == "inconclusive" else "grey", label=MARK_LABEL[m])
                    for m in MARKERS if m in seen]
    elif spec.kind != "box" and len(spec.series) > 1:
        found, labels = ax.get_legend_handles_labels()
        handles = list(dict(zip(labels, found)).values())  # one entry per platform
        if any(s.style == "hollow" for s in spec.series):
            handles.append(Line2D([], [], color="grey", marker="o", mfc="none", ls="none", label="warm-up"))
    if handles:
        # compact: short entries close together, as many to a row as fit (a story legend was a third of its height)
        chars = sum(len(str(h.get_label())) + 4 for h in handles)
        per_row = max(1, min(len(handles), int(len(handles) * width * 72 / max(1.0, chars * 4.6))))
        fig.legend(handles=handles, loc="outside lower center", ncols=per_row, frameon=False, handletextpad=0.3,
                   columnspacing=0.9, borderaxespad=0.2, fontsize="x-small" if spec.meta.get("story") else None)


def _positive(values: Iterable[Any]) -> bool:
    return any(isinstance(v, (int, float)) and math.isfinite(v) and v > 0 for v in values)


def _height(spec: FigureSpec, size: str) -> float:
    if spec.meta.get("story"):  # a row per result, tall enough for its platforms side by side and a 2-line label
        cats = _cats(spec)
        lines = max((len(_wrap(c, 44).splitlines()) for c in cats), default=1)
        per = max(0.16 if size == "page" else 0.2, 0.05 * len(spec.series) + 0.06, 0.13 * lines)
        return min(20.0, 1.6 + len(cats) * per)
    return 3.2 if size == "page" else 2.6


def render(spec: FigureSpec, palette: dict[str, str] | None = None, size: str = "page"):
    """A matplotlib Figure of the spec (the caller closes it); palette: series name -> colour;
    size: column (3.3 in wide) or page (7 in)."""
    palette = palette if palette is not None else colours([s.name for s in spec.series])
    width, height = WIDTHS[size], _height(spec, size)
    with plt.rc_context({**PAPER_RC, "font.size": FONT_PT[size]}):
        # pads in inches: the default 0.04 cut a rotated two-line label by a point
        fig, ax = plt.subplots(figsize=(width, height), layout=ConstrainedLayoutEngine(w_pad=0.07, h_pad=0.05))
        chars = int(width * 72 / (FONT_PT[size] * 0.55))  # characters of the base font per line
        if spec.meta.get(RATIO) or spec.meta.get(POINTS):
            _ratio(ax, spec, palette, horizontal=bool(spec.meta.get("story")))
        elif spec.kind in ("bar", "stack"):
            _bars(ax, spec, palette)
        elif spec.kind == "box":
            _boxes(ax, spec, palette)
        else:
            _lines(ax, spec, palette)
        if spec.xlog and _positive(v for s in spec.series for v in s.x):
            ax.set_xscale("log")
        if spec.ylog and _positive(v for s in spec.series for v in s.y) and not spec.meta.get(POINTS):
            ax.set_yscale("log")  # a log axis needs a positive value (an empty or all-zero series has none)
        if spec.xticks:
            ax.set_xticks(spec.xticks[0], spec.xticks[1])
            ax.minorticks_off()
        if spec.refline is not None and not spec.meta.get(RATIO):
            ax.axhline(spec.refline, color="black", lw=0.8, ls=":")
        story = bool(spec.meta.get("story"))
        fig.suptitle(_wrap(spec.title, chars))
        if spec.note:
            ax.set_title(_wrap(spec.note, int(chars * 0.9)), fontsize="x-small", color="dimgrey")
        ax.set_xlabel(_wrap(spec.ylabel if story else spec.xlabel, chars))
        # the axes get about half the figure's height: a longer label wraps instead of being cut
        ax.set_ylabel("" if story else _wrap(spec.ylabel, int(height * 36 / (FONT_PT[size] * 0.55))))
        _legend(fig, ax, spec, palette, width)
        # Lay out once and keep it: constrained layout run again by each savefig moves things by a
        # fraction of a point, so a file would depend on which formats were written before it.
        # Without rendering: a full raster draw for it was 40 % of a figure's time.
        fig.draw_without_rendering()
        fig.set_layout_engine("none")
    return fig


def data_csv(spec: FigureSpec) -> str:
    """What the figure draws, one row per point: series, x, y, the interval (if any), verdict, note."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["series", spec.xlabel, spec.ylabel, "interval_low", "interval_high", "verdict", "text"])
    for s in spec.series:
        for i, (x, y) in enumerate(zip(s.x, s.y)):
            w.writerow([s.name, x, "" if y is None else y, *("" if v is None else v for v in (
                s.lo[i] if s.lo else None, s.hi[i] if s.hi else None)),
                (s.marks[i] or "") if s.marks else "", s.text[i] if s.text else ""])
    return out.getvalue()


def export(specs: Sequence[FigureSpec], directory: Path, formats: Sequence[str] = FORMATS,
           platforms: Sequence[str] = (), size: str = "page") -> list[Path]:
    """Write every figure in every format, and its data as <id>.csv; returns the files written.

    platforms: names in the run's order, so colours match the HTML report's."""
    directory.mkdir(parents=True, exist_ok=True)
    palette = palette_of(specs, platforms)
    written = []
    for spec in specs:
        fig = render(spec, palette, size)
        try:
            with plt.rc_context(PAPER_RC):
                for fmt in formats:
                    path = directory / f"{spec.id}.{fmt}"
                    fig.savefig(path, format=fmt, metadata=_METADATA.get(fmt))
                    written.append(path)
        finally:
            plt.close(fig)
        path = directory / f"{spec.id}.csv"
        path.write_text(data_csv(spec), encoding="utf-8")
        written.append(path)
    return written


def palette_of(specs: Sequence[FigureSpec], platforms: Sequence[str] = ()) -> dict[str, str]:
    return colours([*platforms, *(s.name.removesuffix(" (warm-up)") for spec in specs for s in spec.series
                                  if s.style != "dashed")])


def svg(spec: FigureSpec, palette: dict[str, str], size: str = "page") -> str:
    """The figure as an inline SVG element (text as text), for the HTML report."""
    fig = render(spec, palette, size)
    try:
        buf = io.StringIO()
        with plt.rc_context(PAPER_RC):
            fig.savefig(buf, format="svg", metadata=_METADATA["svg"])
    finally:
        plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]
