"""Figures as files for papers: PNG, SVG and PDF drawn with matplotlib (Agg, no display).

Output is reproducible: SVG ids are salted with a fixed string and PDF/SVG carry no
creation date, so the same run gives byte-identical files. Each platform keeps one colour
across every figure, the same as in the HTML report.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from .figures import FigureSpec, Series  # noqa: E402
from .interactive import colours  # noqa: E402

FORMATS = ("png", "svg", "pdf")
plt.rcParams.update({"svg.hashsalt": "virtbench", "figure.dpi": 100, "savefig.dpi": 150,
                     "axes.grid": True, "grid.alpha": 0.3, "font.size": 9})
_METADATA = {"png": {"Software": "virtbench"}, "svg": {"Date": None, "Creator": "virtbench"},
             "pdf": {"CreationDate": None, "Creator": "virtbench", "Producer": "virtbench"}}


def _err(s: Series) -> np.ndarray | None:
    if s.lo is None or s.hi is None:
        return None
    y = np.array([np.nan if v is None else v for v in s.y], dtype=float)
    lo = np.array([np.nan if v is None else v for v in s.lo], dtype=float)
    hi = np.array([np.nan if v is None else v for v in s.hi], dtype=float)
    return np.nan_to_num(np.vstack([y - lo, hi - y]), nan=0.0).clip(min=0)


def _floats(v: Sequence[float | None]) -> np.ndarray:
    return np.array([np.nan if x is None else x for x in v], dtype=float)


def _colour(name: str, palette: dict[str, str]) -> str | None:
    return palette.get(name.removesuffix(" (warm-up)"))


def _bars(ax, spec: FigureSpec, palette: dict[str, str]) -> None:
    cats = list(dict.fromkeys(x for s in spec.series for x in s.x))
    width = 0.8 / max(1, len(spec.series))
    pos = np.arange(len(cats))
    for i, s in enumerate(spec.series):
        idx = [cats.index(x) for x in s.x]
        ax.bar(pos[idx] + (i - (len(spec.series) - 1) / 2) * width, np.nan_to_num(_floats(s.y)), width,
               yerr=_err(s), capsize=2, label=s.name, color=_colour(s.name, palette))
    ax.set_xticks(pos, cats, rotation=30 if max((len(str(c)) for c in cats), default=0) > 8 else 0, ha="right")


def _boxes(ax, spec: FigureSpec, palette: dict[str, str]) -> None:
    data = [np.asarray(s.y, dtype=float) for s in spec.series]
    ax.boxplot(data, showfliers=False, medianprops={"color": "black"})
    rng = np.random.default_rng(0)
    for i, (d, s) in enumerate(zip(data, spec.series), start=1):
        ax.plot(i + rng.uniform(-0.15, 0.15, d.size), d, "o", ms=3, alpha=0.7, color=_colour(s.name, palette))
    ax.set_xticks(range(1, len(data) + 1), [s.name for s in spec.series], rotation=20, ha="right")


def _lines(ax, spec: FigureSpec, palette: dict[str, str]) -> None:
    categorical = spec.meta.get("categorical_x")
    for s in spec.series:
        x = list(range(len(s.x))) if categorical else _floats(s.x)
        y = _floats(s.y)
        colour = _colour(s.name, palette)
        if s.style == "hollow":
            ax.plot(x, y, "o", mfc="none", alpha=0.6, label=s.name, color=colour)
        elif s.style == "dashed":
            ax.plot(x, y, "--", color="grey", label=s.name)
        else:
            ax.errorbar(x, y, yerr=_err(s), marker="o", ms=3, capsize=2, label=s.name, color=colour)
    if categorical and spec.series:
        ax.set_xticks(range(len(spec.series[0].x)), [str(v) for v in spec.series[0].x])


def render(spec: FigureSpec, palette: dict[str, str] | None = None):
    """A matplotlib Figure of the spec (the caller closes it); palette: series name -> colour."""
    palette = palette if palette is not None else colours([s.name for s in spec.series])
    fig, ax = plt.subplots(figsize=(7, 4))
    if spec.kind in ("bar", "stack"):
        _bars(ax, spec, palette)
    elif spec.kind == "box":
        _boxes(ax, spec, palette)
    else:
        _lines(ax, spec, palette)
    if spec.xlog:
        ax.set_xscale("log")
    if spec.ylog:
        ax.set_yscale("log")
    if spec.xticks:
        ax.set_xticks(spec.xticks[0], spec.xticks[1])
        ax.minorticks_off()
    if spec.refline is not None:
        ax.axhline(spec.refline, color="black", lw=0.8, ls=":")
    ax.set_title(spec.title, fontsize=10)
    ax.set_xlabel(spec.xlabel)
    ax.set_ylabel(spec.ylabel)
    if spec.kind != "box" and len(spec.series) > 1:
        ax.legend(fontsize=7, loc="best")
    if spec.note:
        fig.text(0.01, 0.01, spec.note, fontsize=6, color="grey")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return fig


def export(specs: Sequence[FigureSpec], directory: Path, formats: Sequence[str] = FORMATS,
           platforms: Sequence[str] = ()) -> list[Path]:
    """Write every figure in every format; returns the files written.

    platforms: names in the run's order, so colours match the HTML report's.
    """
    directory.mkdir(parents=True, exist_ok=True)
    palette = colours([*platforms, *(s.name.removesuffix(" (warm-up)") for spec in specs for s in spec.series
                                     if s.style != "dashed")])
    written = []
    for spec in specs:
        fig = render(spec, palette)
        try:
            for fmt in formats:
                path = directory / f"{spec.id}.{fmt}"
                fig.savefig(path, format=fmt, metadata=_METADATA.get(fmt))
                written.append(path)
        finally:
            plt.close(fig)
    return written
