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

from ..notation import number
from ..report.figures import FigureSpec, Series

W, H = 980, 320
PAD_L, PAD_R, PAD_T, PAD_B = 64, 16, 28, 70
PALETTE = 10


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def _num(v: float) -> str:
    """Tooltips in the report's notation: three significant digits, never an exponent."""
    return number(v, 3)


def tick_labels(ticks: Sequence[float]) -> list[str]:
    """An axis's ticks with one number of decimals, the fewest that tell them apart (0.95, 1.00, 1.05)."""
    if all(float(t).is_integer() for t in ticks):
        return [f"{int(t):,}" for t in ticks]
    for d in range(1, 7):
        texts = [f"{t:,.{d}f}" for t in ticks]
        if len(set(texts)) == len(texts) and all(abs(float(x.replace(",", "")) - t) <= abs(t) * 1e-9 + 10 ** -d / 2
                                                 for x, t in zip(texts, ticks)):
            return texts
    return [_num(t) for t in ticks]


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
        w = 30 + 7.0 * len(name)
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
    for t, label in zip(ticks, tick_labels(ticks)):
        yy = y(t)
        out.append(f'<line class="grid" x1="{PAD_L}" x2="{width - PAD_R}" y1="{yy:.1f}" y2="{yy:.1f}"/>'
                   f'<text class="tick" x="{PAD_L - 6}" y="{yy + 4:.1f}" text-anchor="end">{_e(label)}</text>')
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


ROW_LABEL_CHARS = 48
"""A category's label is shown whole up to this many characters (its full text in the tooltip)."""
MARK_WORDS = {"faster": "faster", "slower": "slower", "same": "same", "inconclusive": "undecided"}


def _marker(mark: str | None, cls: str, cx: float, cy: float, tip: str) -> str:
    """The verdict as the marker, as the report's figures draw it: ▲ faster, ▼ slower, a filled
    dot same (or no verdict), a hollow one undecided."""
    title = f"<title>{_e(tip)}</title>"
    if mark in ("faster", "slower"):
        d = f"M{cx:.1f} {cy - 4.5:.1f}l4.5 8h-9z" if mark == "faster" else f"M{cx:.1f} {cy + 4.5:.1f}l4.5 -8h-9z"
        return f'<path class="{cls} mark" d="{d}">{title}</path>'
    hollow = " hollow" if mark == "inconclusive" else ""
    return f'<circle class="{cls}{hollow}" cx="{cx:.1f}" cy="{cy:.1f}" r="3.5">{title}</circle>'


def _log_ticks(lo: float, hi: float) -> list[float]:
    out = [m * 10 ** k for k in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1) for m in (1, 2, 5)]
    return [t for t in out if lo <= t <= hi] or [lo, hi]


def points(spec: FigureSpec, colors: Colors) -> Markup:
    """Estimates with their intervals as points, one row per category (its label whole, at the
    left), the platforms dodged within it, the verdict as the marker, the 'same' band shaded
    and 1.0 marked: the report's figures (static.py) drawn for the web, never bars from 0. A
    figure with ylog (lifecycle times) gets a log value axis, where a 0.5 ms step still shows."""
    cats = list(dict.fromkeys(x for s in spec.series for x in s.x))
    n = max(1, len(spec.series))
    row_h = max(18.0, 8.0 * n + 8)
    label_w = min(ROW_LABEL_CHARS, max((len(str(c)) for c in cats), default=4)) * 6.3 + 14
    width = W
    x0, x1 = PAD_L + label_w - 50, width - PAD_R - 8
    values = [v for s in spec.series for v in (*s.y, *(s.lo or []), *(s.hi or []))
              if v is not None and math.isfinite(v) and (v > 0 or not spec.ylog)]
    band = spec.meta.get("band")
    include = [spec.refline] if spec.refline is not None else []
    if band:
        include += list(band)
    log = bool(spec.ylog) and all(v > 0 for v in values + include) and bool(values)
    if log:
        lo, hi = min(values + include) / 1.25, max(values + include) * 1.25
        ticks = _log_ticks(lo, hi)
        lo, hi = min(lo, ticks[0]), max(hi, ticks[-1])
    else:
        lo, hi = _range(values, include)
        ticks = nice_ticks(lo, hi)
        lo, hi = min(lo, ticks[0]), max(hi, ticks[-1])

    def xv(v: float) -> float:
        f = (math.log(v) - math.log(lo)) / (math.log(hi) - math.log(lo)) if log else (v - lo) / (hi - lo)
        return x0 + f * (x1 - x0)

    top = PAD_T + 8
    bottom = top + row_h * len(cats)
    body: list[str] = []
    if band:
        a, b = xv(max(lo, band[0])), xv(min(hi, band[1]))
        body.append(f'<rect class="band" x="{a:.1f}" y="{top:.1f}" width="{max(0.5, b - a):.1f}" '
                    f'height="{bottom - top:.1f}"><title>{_e(spec.meta.get("band_label", "the same"))}</title></rect>')
    for t, label in zip(ticks, tick_labels(ticks)):
        tx = xv(t)
        body.append(f'<line class="grid" x1="{tx:.1f}" x2="{tx:.1f}" y1="{top:.1f}" y2="{bottom:.1f}"/>'
                    f'<text class="tick" x="{tx:.1f}" y="{bottom + 14:.1f}" text-anchor="middle">{_e(label)}</text>')
    if spec.refline is not None and lo <= spec.refline <= hi:
        rx = xv(spec.refline)
        body.append(f'<line class="ref" x1="{rx:.1f}" x2="{rx:.1f}" y1="{top:.1f}" y2="{bottom:.1f}"/>')
    body.append(f'<text class="axis" x="{(x0 + x1) / 2:.0f}" y="{bottom + 30:.1f}" text-anchor="middle">'
                f'{_e(spec.ylabel)}</text>')
    marks_seen: dict[str, None] = {}
    for ci, cat in enumerate(cats):
        cy = top + row_h * (ci + 0.5)
        label = str(cat)
        shown = label if len(label) <= ROW_LABEL_CHARS else label[:ROW_LABEL_CHARS - 1] + "…"
        body.append(f'<text class="tick" x="{x0 - 8:.1f}" y="{cy + 4:.1f}" text-anchor="end"><title>{_e(label)}'
                    f'</title>{_e(shown)}</text>')
        for si, s in enumerate(spec.series):
            if cat not in s.x:
                continue
            i = s.x.index(cat)
            v = s.y[i]
            if v is None or not math.isfinite(v) or (log and v <= 0):
                continue
            yy = cy + (si - (n - 1) / 2) * min(8.0, (row_h - 6) / n)
            cls = colors.of(s.name)
            lo_i, hi_i = (s.lo[i] if s.lo else None), (s.hi[i] if s.hi else None)
            tip = f"{s.name}, {cat}: {_num(v)}"
            if lo_i is not None and hi_i is not None and (not log or lo_i > 0):
                tip += f" [{_num(lo_i)}, {_num(hi_i)}]"
                a, b = xv(max(lo, lo_i)), xv(min(hi, hi_i))
                body.append(f'<path class="whisker {cls}" d="M{a:.1f} {yy:.1f}H{b:.1f}M{a:.1f} {yy - 3:.1f}v6'
                            f'M{b:.1f} {yy - 3:.1f}v6"/>')
            if s.text and s.text[i]:
                tip += f"; {s.text[i]}"
            mark = s.marks[i] if s.marks else None
            if mark:
                marks_seen[mark] = None
            body.append(_marker(mark, cls, xv(v), yy, tip))
    legend = [(s.name, colors.of(s.name), False) for s in spec.series]
    legend += [(MARK_WORDS[m], "mark-" + m, m == "inconclusive") for m in MARK_WORDS if m in marks_seen]
    rows = _legend_rows(legend, width)
    height = bottom + 44 + 16 * len(rows) + (16 if spec.note else 0)
    out = [f'<svg class="chart points" viewBox="0 0 {width} {height:.0f}" width="{width}" height="{height:.0f}" '
           f'role="img" aria-label="{_e(spec.title)}" xmlns="http://www.w3.org/2000/svg">',
           f'<text class="title" x="{PAD_L - 50}" y="16">{_e(spec.title)}</text>', *body]
    for r, row in enumerate(rows):
        ly = bottom + 50 + 16 * r
        for lx, name, cls, hollow in row:
            symbol = (f'<path class="legend-mark" d="M{lx + 5:.0f} {ly - 5}l4.5 8h-9z"/>' if cls == "mark-faster" else
                      f'<path class="legend-mark" d="M{lx + 5:.0f} {ly + 4}l4.5 -8h-9z"/>' if cls == "mark-slower" else
                      f'<circle class="{"legend-mark" if cls.startswith("mark-") else cls}{" hollow" if hollow else ""}" '
                      f'cx="{lx + 5:.0f}" cy="{ly}" r="4"/>')
            out.append(f'<g class="legend">{symbol}<text x="{lx + 13:.0f}" y="{ly + 4}">{_e(name)}</text></g>')
    if spec.note:
        out.append(f'<text class="tick" x="{PAD_L - 50}" y="{height - 4:.0f}">{_e(spec.note)}</text>')
    out.append("</svg>")
    return Markup("".join(out))


def draw(spec: FigureSpec | None, colors: Colors, outliers: dict[str, Sequence[int]] | None = None) -> Markup:
    """A figure as the report draws it: estimates and absolute times as points with their
    intervals (points), values per round as a trend."""
    if spec is None:
        return Markup("")
    if spec.kind in ("bar", "stack"):
        return points(spec, colors)
    return trend(spec, colors, outliers)


def series_names(specs: Iterable[FigureSpec | None]) -> list[str]:
    names: list[str] = []
    for spec in specs:
        for s in (spec.series if spec else []):
            names.append(s.name.removesuffix(" (warm-up)"))
    return list(dict.fromkeys(names))


__all__ = ["Colors", "Series", "draw", "nice_ticks", "points", "trend"]
