"""Figure specs as plotly.js traces and layouts (plain JSON, no plotly Python objects).

Building dicts directly instead of plotly.graph_objects skips per-figure validation, which
for a report with a thousand figures is the difference between seconds and a minute.
Values are rounded to 6 significant digits: a plot cannot show more, and the file shrinks.
"""
from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .figures import BAND, POINTS, RATIO, FigureSpec, Series

SYMBOLS = {"faster": "triangle-up", "slower": "triangle-down", "same": "circle", "inconclusive": "circle-open"}
"""The verdict as the marker, as in the files and the web's charts."""
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf")


def _num(v: Any) -> Any:
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, (int, float)):
        f = float(v)
        if not math.isfinite(f):
            return None
        return int(f) if isinstance(v, int) else float(f"{f:.6g}")
    return v


def _nums(vs: Sequence[Any] | None) -> list[Any] | None:
    """_num of every value, with fast paths for the common all-int and all-finite-float lists."""
    if vs is None:
        return None
    if not len(vs):
        return []
    if all(type(v) is int for v in vs):
        return list(vs)
    try:
        arr = np.asarray(vs, dtype=float)
    except (TypeError, ValueError):
        return [_num(v) for v in vs]
    if arr.ndim != 1 or not np.isfinite(arr).all():
        return [_num(v) for v in vs]
    return list(map(float, map(_SIX.format, arr.tolist())))


_SIX = "{:.6g}"
"""Six significant digits (formatted and read back: the float the text shows)."""


def txt(v: Any) -> Any:
    """Strings as plotly text: plotly interprets a few HTML tags in labels, so < > & are
    entities and a benchmark parameter can never become markup or a link."""
    if isinstance(v, str):
        return v.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return v


def txts(vs: Sequence[Any]) -> list[Any]:
    """[txt(v) for v in vs], without a call per value when nothing needs escaping (no string
    at all, or none holding & < >): a figure of every repetition has 100,000 labels."""
    joined = "".join([v for v in vs if isinstance(v, str)])
    if "&" not in joined and "<" not in joined and ">" not in joined:
        return list(vs)
    return [txt(v) for v in vs]


def colours(names: Sequence[str]) -> dict[str, str]:
    """One colour per platform, the same in every figure of a report."""
    return {n: PALETTE[i % len(PALETTE)] for i, n in enumerate(dict.fromkeys(names))}


def _colour(name: str, palette: dict[str, str]) -> str | None:
    return palette.get(name.removesuffix(" (warm-up)"))


def _error(s: Series) -> dict[str, Any] | None:
    if s.lo is None or s.hi is None:
        return None
    plus, minus = [], []
    for y, lo, hi in zip(s.y, s.lo, s.hi):
        ok = None not in (y, lo, hi)
        plus.append(_num(max(0.0, hi - y)) if ok else 0)  # type: ignore[operator]
        minus.append(_num(max(0.0, y - lo)) if ok else 0)  # type: ignore[operator]
    return {"type": "data", "symmetric": False, "array": plus, "arrayminus": minus, "thickness": 1, "width": 3}


def trace(s: Series, spec: FigureSpec, palette: dict[str, str]) -> dict[str, Any]:
    colour = _colour(s.name, palette)
    x = txts([str(v) for v in s.x]) if spec.meta.get("categorical_x") else txts(_nums(s.x) or [])
    name = txt(s.name)
    if s.style == "box":
        t: dict[str, Any] = {"type": "box", "name": name, "y": _nums(s.y), "boxpoints": "all", "jitter": 0.4,
                             "pointpos": 0, "marker": {"size": 4, "opacity": 0.6}}
    elif s.style == "bar":
        t = {"type": "bar", "name": name, "x": x, "y": _nums(s.y), "textposition": "none"}
    elif s.style == "hollow":
        t = {"type": "scatter", "mode": "markers", "name": name, "x": x, "y": _nums(s.y),
             "marker": {"symbol": "circle-open", "size": 7}, "showlegend": False,
             "legendgroup": txt(s.name.removesuffix(" (warm-up)"))}
    elif s.style == "dashed":
        t = {"type": "scatter", "mode": "lines", "name": name, "x": x, "y": _nums(s.y),
             "line": {"dash": "dash", "color": "#888"}}
    elif spec.meta.get(RATIO) or spec.meta.get(POINTS):  # estimates with intervals: markers, never joined
        t = {"type": "scatter", "mode": "markers", "name": name, "x": x, "y": _nums(s.y), "legendgroup": name,
             "marker": {"size": 8, "symbol": [SYMBOLS.get(m or "", "circle") for m in (s.marks or [None] * len(s.y))]}}
    elif s.style == "points":  # a cloud (worst latencies over time), no line
        t = {"type": "scatter", "mode": "markers", "name": name, "x": x, "y": _nums(s.y), "marker": {"size": 4},
             "legendgroup": name}
    else:
        t = {"type": "scatter", "mode": "lines+markers", "name": name, "x": x, "y": _nums(s.y),
             "marker": {"size": 5}, "legendgroup": name}
    if colour and s.style != "dashed":
        t.setdefault("marker", {})["color"] = colour
        if t["type"] == "scatter":
            t["line"] = {"color": colour, "width": 1.5}
    if (err := _error(s)) is not None:
        t["error_y"] = err
    if s.text is not None:
        t["text"] = txts(s.text)
        t["hovertemplate"] = "%{x}: %{y}<br>%{text}<extra>" + name + "</extra>"
    return t


def figure(spec: FigureSpec, palette: dict[str, str]) -> dict[str, Any]:
    """{'data': [...], 'layout': {...}} for Plotly.newPlot."""
    xaxis: dict[str, Any] = {"title": {"text": txt(spec.xlabel)}, "automargin": True}
    if spec.xlog:
        xaxis["type"] = "log"
    if spec.meta.get("categorical_x"):
        xaxis["type"] = "category"
    if spec.xticks:
        xaxis.update(tickvals=_nums(spec.xticks[0]), ticktext=[txt(t) for t in spec.xticks[1]])
    yaxis: dict[str, Any] = {"title": {"text": txt(spec.ylabel)}, "automargin": True}
    if spec.ylog:
        yaxis["type"] = "log"
    layout: dict[str, Any] = {
        "title": {"text": txt(spec.title), "font": {"size": 14}}, "xaxis": xaxis, "yaxis": yaxis, "height": 380,
        "margin": {"l": 60, "r": 20, "t": 50, "b": 60}, "barmode": "group", "showlegend": spec.kind != "box",
        "legend": {"orientation": "h", "y": -0.25}, "hovermode": "closest"}
    shapes = []
    if (band := spec.meta.get(BAND)) is not None:  # the verdict's 'same' band behind the points
        shapes.append({"type": "rect", "xref": "paper", "x0": 0, "x1": 1, "y0": band[0], "y1": band[1],
                       "fillcolor": "#e6e6e6", "line": {"width": 0}, "layer": "below"})
    if spec.refline is not None:
        shapes.append({"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": spec.refline,
                       "y1": spec.refline, "line": {"dash": "dot", "width": 1, "color": "#444"}})
    if shapes:
        layout["shapes"] = shapes
    if spec.meta.get(RATIO) or spec.meta.get(POINTS):
        layout["scattermode"] = "group"  # the platforms of a category side by side, never stacked on one spot
    return {"data": [trace(s, spec, palette) for s in spec.series], "layout": layout}


def script_json(obj: Any) -> str:
    """JSON safe inside a <script> element: no '</' or '<!--' can close or comment it."""
    text = json.dumps(obj, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
