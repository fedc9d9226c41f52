"""report.figures specs drawn as inline SVG on the server: no plotting library in the browser,
no external script, nothing for the Content-Security-Policy to allow.

Every text and attribute value goes through html.escape (names come from campaigns, which
users write). Colours are CSS classes (c0..c9 in app.css) so a platform keeps its colour
across every chart of a page; tooltips are SVG <title> elements.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from html import escape

from markupsafe import Markup

from ..report.figures import FigureSpec, Series

W, H = 980, 320
PAD_L, PAD_R, PAD_T, PAD_B = 64, 16, 28, 70
PALETTE = 10


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def _num(v: float) -> str:
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1e6 or a < 1e-3:
        return f"{v:.3g}"
    if a >= 100:
        return f"{v:,.0f}"
    return f"{v:.3g}"


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round-numbered ticks covering [lo, hi]."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return [0.0]
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    step = 10 ** math.floor(math.log10((hi - lo) / count))
    for mult in (1, 2, 2.5, 5, 10):
        if (hi - lo) / (step * mult) <= count:
            step *= mult
            break
    start = math.floor(lo / step) * step
    ticks, t = [], start
    while t <= hi + step * 1e-9:
        ticks.append(round(t, 12))
        t += step
    return ticks


class Colors:
    """A stable colour class per series name (the platform), shared by the charts of one page."""

    def __init__(self, names: Iterable[str] = ()) -> None:
        self.index: dict[str, int] = {}
        for n in names:
            self.of(n)

    def of(self, name: str) -> str:
        base = name.removesuffix(" (warm-up)")
        if base not in self.index:
            self.index[base] = len(self.index)
        return f"c{self.index[base] % PALETTE}"


def _legend_rows(legend: Sequence[tuple[str, str, bool]], width: int) -> list[list[tuple[float, str, str, bool]]]:
    """Legend entries laid out left to right, wrapped at the chart's width."""
    rows: list[list[tuple[float, str, str, bool]]] = [[]]
    x = float(PAD_L)
    for name, cls, hollow in legend:
        w = 24 + 6.6 * len(name)
        if rows[-1] and x + w > width - PAD_R:
            rows.append([])
            x = float(PAD_L)
        rows[-1].append((x, name, cls, hollow))
        x += w
    return rows


def _frame(spec: FigureSpec, width: int, ticks: list[float], y: Callable[[float], float], body: list[str],
           legend: Sequence[tuple[str, str, bool]], note: str = "") -> Markup:
    rows = _legend_rows(legend, width)
    height = H + 16 * (len(rows) - 1) + (16 if note else 0)
    out = [f'<svg class="chart" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
           f'aria-label="{_e(spec.title)}" xmlns="http://www.w3.org/2000/svg">',
           f'<text class="title" x="{PAD_L}" y="16">{_e(spec.title)}</text>']
    for t in ticks:
        yy = y(t)
        out.append(f'<line class="grid" x1="{PAD_L}" x2="{width - PAD_R}" y1="{yy:.1f}" y2="{yy:.1f}"/>'
                   f'<text class="tick" x="{PAD_L - 6}" y="{yy + 4:.1f}" text-anchor="end">{_e(_num(t))}</text>')
    out.append(f'<text class="axis" transform="translate(14 {PAD_T + (H - PAD_T - PAD_B) / 2:.0f}) rotate(-90)" '
               f'text-anchor="middle">{_e(spec.ylabel[:60])}</text>')
    if spec.refline is not None:
        yy = y(spec.refline)
        out.append(f'<line class="ref" x1="{PAD_L}" x2="{width - PAD_R}" y1="{yy:.1f}" y2="{yy:.1f}"/>')
    out += body
    for i, row in enumerate(rows):
        ly = H - 10 + 16 * i
        for lx, name, cls, hollow in row:
            out.append(f'<g class="legend"><circle class="{cls}{" hollow" if hollow else ""}" cx="{lx + 5:.0f}" '
                       f'cy="{ly}" r="4"/><text x="{lx + 13:.0f}" y="{ly + 4}">{_e(name)}</text></g>')
    if note:
        out.append(f'<text class="tick" x="{PAD_L}" y="{height - 4}">{_e(note)}</text>')
    out.append("</svg>")
    return Markup("".join(out))


def _range(values: Iterable[float | None], include: Sequence[float] = ()) -> tuple[float, float]:
    vals = [v for v in values if v is not None and math.isfinite(v)] + list(include)
    if not vals:
        return 0.0, 1.0
    lo, hi = min(vals), max(vals)
    pad = (hi - lo) * 0.08 or abs(hi) * 0.05 or 1.0
    return lo - pad, hi + pad


def bars(spec: FigureSpec, colors: Colors) -> Markup:
    """Grouped bars (categories on x, one bar per series) with interval whiskers and the 1.0 line."""
    cats = list(dict.fromkeys(x for s in spec.series for x in s.x))
    n = max(1, len(spec.series))
    group_w = 18 * n + 28
    width = max(420, PAD_L + 7 * len(spec.title), min(1600, PAD_L + PAD_R + group_w * len(cats)))
    plot_w = width - PAD_L - PAD_R
    values = [v for s in spec.series for v in (*s.y, *(s.lo or []), *(s.hi or []))]
    lo, hi = _range(values, [0.0] + ([spec.refline] if spec.refline is not None else []))
    if all(v is None or v >= 0 for v in values):
        lo = 0.0  # bars start at zero; no axis below it when nothing is negative
    ticks = [t for t in nice_ticks(lo, hi) if t >= lo - 1e-12]
    lo, hi = min(lo, ticks[0]), max(hi, ticks[-1])

    def y(v: float) -> float:
        return PAD_T + (hi - v) / (hi - lo) * (H - PAD_T - PAD_B)

    body: list[str] = []
    slot = plot_w / max(1, len(cats))
    bar_w = max(3.0, min(22.0, (slot - 8) / n))
    for ci, cat in enumerate(cats):
        cx = PAD_L + slot * (ci + 0.5)
        label = str(cat)[:24]
        body.append(f'<text class="tick" transform="translate({cx:.1f} {H - PAD_B + 12}) rotate(-30)" '
                    f'text-anchor="end">{_e(label)}</text>')
        for si, s in enumerate(spec.series):
            if cat not in s.x:
                continue
            i = s.x.index(cat)
            v = s.y[i]
            if v is None or not math.isfinite(v):
                continue
            x0 = cx - n * bar_w / 2 + si * bar_w
            top, base = sorted((y(v), y(max(lo, 0.0))))
            tip = f"{s.name} {cat}: {_num(v)}"
            if s.lo and s.hi and s.lo[i] is not None and s.hi[i] is not None:
                tip += f" [{_num(s.lo[i])}, {_num(s.hi[i])}]"  # type: ignore[arg-type]
            if s.text and s.text[i]:
                tip += f"; {s.text[i]}"
            body.append(f'<rect class="{colors.of(s.name)}" x="{x0:.1f}" y="{top:.1f}" width="{bar_w - 1:.1f}" '
                        f'height="{max(0.5, base - top):.1f}"><title>{_e(tip)}</title></rect>')
            if s.lo and s.hi and s.lo[i] is not None and s.hi[i] is not None:
                mx = x0 + (bar_w - 1) / 2
                y1, y2 = y(s.lo[i]), y(s.hi[i])  # type: ignore[arg-type]
                body.append(f'<path class="whisker" d="M{mx:.1f} {y1:.1f}V{y2:.1f}M{mx - 3:.1f} {y1:.1f}h6'
                            f'M{mx - 3:.1f} {y2:.1f}h6"/>')
    legend = [(s.name, colors.of(s.name), False) for s in spec.series]
    return _frame(spec, int(width), ticks, y, body, legend)


def trend(spec: FigureSpec, colors: Colors, outliers: dict[str, Sequence[int]] | None = None) -> Markup:
    """Value per round per platform; warm-up rounds hollow, outliers ringed, drift visible as slope."""
    xs = [x for s in spec.series for x in s.x]
    x_lo, x_hi = (min(xs), max(xs)) if xs else (0, 1)
    if x_hi == x_lo:
        x_hi = x_lo + 1
    lo, hi = _range([v for s in spec.series for v in s.y])
    ticks = nice_ticks(lo, hi)
    lo, hi = min(lo, ticks[0]), max(hi, ticks[-1])
    width = W

    def x(v: float) -> float:
        return PAD_L + 10 + (v - x_lo) / (x_hi - x_lo) * (width - PAD_L - PAD_R - 20)

    def y(v: float) -> float:
        return PAD_T + (hi - v) / (hi - lo) * (H - PAD_T - PAD_B)

    body: list[str] = []
    for t in nice_ticks(x_lo, x_hi, min(10, int(x_hi - x_lo) or 1)):
        if float(t).is_integer() and x_lo <= t <= x_hi:
            body.append(f'<text class="tick" x="{x(t):.1f}" y="{H - PAD_B + 16}" text-anchor="middle">{int(t)}</text>')
    body.append(f'<text class="axis" x="{(PAD_L + width) / 2:.0f}" y="{H - PAD_B + 32}" '
                f'text-anchor="middle">{_e(spec.xlabel)}</text>')
    rings = outliers or {}
    legend = []
    for s in spec.series:
        cls = colors.of(s.name)
        hollow = s.style == "hollow"
        pts = [(xv, yv) for xv, yv in zip(s.x, s.y) if yv is not None and math.isfinite(yv)]
        if not hollow and len(pts) > 1:
            d = "M" + "L".join(f"{x(a):.1f} {y(b):.1f}" for a, b in pts)
            body.append(f'<path class="line {cls}" d="{d}"/>')
        flagged = set(rings.get(s.name, ()))
        for a, b in pts:
            ring = a in flagged and not hollow
            body.append(f'<circle class="{cls}{" hollow" if hollow else ""}{" outlier" if ring else ""}" '
                        f'cx="{x(a):.1f}" cy="{y(b):.1f}" r="{5 if ring else 3.5}"><title>'
                        f'{_e(f"{s.name}, round {a}: {_num(b)}" + (" (outlier)" if ring else ""))}</title></circle>')
        if not hollow:
            legend.append((s.name, cls, False))
    hollow_any = any(s.style == "hollow" for s in spec.series)
    note = "hollow: warm-up rounds (not in the statistics)" if hollow_any else ""
    if rings and any(rings.values()):
        note += ("; " if note else "") + "red ring: outlier"
    return _frame(spec, width, ticks, y, body, legend, note)


def draw(spec: FigureSpec | None, colors: Colors, outliers: dict[str, Sequence[int]] | None = None) -> Markup:
    if spec is None:
        return Markup("")
    if spec.kind in ("bar", "stack"):
        return bars(spec, colors)
    return trend(spec, colors, outliers)


def series_names(specs: Iterable[FigureSpec | None]) -> list[str]:
    names: list[str] = []
    for spec in specs:
        for s in (spec.series if spec else []):
            names.append(s.name.removesuffix(" (warm-up)"))
    return list(dict.fromkeys(names))


__all__ = ["Colors", "Series", "bars", "draw", "nice_ticks", "trend"]
