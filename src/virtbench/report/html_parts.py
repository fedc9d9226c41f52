"""HTML fragments of the report: provenance, tables, warnings, failures. Every text is escaped.

Kept apart from html.py (the page, figures and script) so each stays readable.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Any

from .. import notation
from ..notation import interval, number, percent, ratio
from . import units
from .model import Comparison, Mark

BADGE = {"faster": ("good", "faster"), "slower": ("bad", "slower"), "same": ("same", "same"), "mixed": ("ns", "mixed"),
         "inconclusive": ("ns", "inconclusive"), "baseline": ("base", "baseline"), "unit changed": ("ns", "unit changed")}
"""Verdict -> (CSS class, word): colour follows the verdict, never the raw ratio."""


def e(x: Any) -> str:
    return escape(str(x), quote=True)


def fmt(x: float | None, digits: int = 4) -> str:
    return "–" if x is None else number(x, digits)


def pct(x: float | None) -> str:
    return "–" if x is None else percent(x)


def table(head: Sequence[str], rows: Iterable[Sequence[str]], cls: str = "", caption: str = "") -> str:
    """Cells are given as HTML already escaped by the caller; headers are escaped here."""
    cap = f'<p class="cap">{e(caption)}</p>' if caption else ""
    th = "".join(f"<th>{e(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f'{cap}<table class="{e(cls)}"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>'


def badge(verdict: str | None, reason: str | None = None) -> str:
    if not verdict:
        return ""
    cls, text = BADGE.get(verdict, ("ns", verdict))
    title = f' title="{e(reason)}"' if reason else ""
    return f'<span class="badge {cls} v-{e(verdict.replace(" ", "-"))}"{title}>{e(text)}</span>'


def kv(pairs: Iterable[tuple[str, Any]]) -> str:
    return table(["", ""], ([e(k), e(v)] for k, v in pairs), "kv")


def provenance(run: Any, facts: Mapping[str, Any], label: str, rows: Sequence[Any] = ()) -> str:
    virt = facts.get("virtualization") or {}
    mem = facts.get("memory_bytes") or 0
    mitig = facts.get("mitigations") or {}
    vulnerable = [k for k, v in mitig.items()
                  if "vulnerable" in str(v).lower() and "not affected" not in str(v).lower()]
    host = kv([("host", label), ("CPU", f"{facts.get('cpu_model', '?')} ({facts.get('cpus', '?')} CPUs)"),
               ("memory", f"{mem / 2**30:.1f} GiB"), ("architecture", facts.get("arch", "?")),
               ("kernel", facts.get("kernel", "?")), ("OS", facts.get("os", "?")),
               ("cgroup", facts.get("cgroup", "?")), ("microcode", facts.get("microcode") or "?"),
               ("virtualized", f"vm: {notation.plain(virt.get('vm'))}, container: {notation.plain(virt.get('container'))}"),
               ("governor", notation.plain(facts.get("governor"))), ("turbo", notation.plain(facts.get("turbo"))),
               ("load average at start", " ".join(str(x) for x in facts.get("loadavg") or []) or "?"),
               ("mitigations", f"{len(mitig)} listed, vulnerable: {', '.join(vulnerable) or 'none'}"),
               ("CPU flags", " ".join(facts.get("cpu_flags") or []) or "?")])
    img = run.image or {}
    camp = run.campaign or {}
    warm = units.warmups(run, rows)
    design = kv([("run", run.id), ("name", run.name), ("status", run.status),
                 ("started", units.when(run.started_at)), ("finished", units.when(run.finished_at)),
                 ("rounds", units.rounds_measured(run, rows)),
                 ("warm-up rounds", "none (steps of its own)" if warm is None else warm),
                 ("order", f"randomized (seed {run.seed})" if camp.get("shuffle", True) else "fixed (shuffle: false)"),
                 ("baseline", run.baseline),
                 ("image", f"{str(img.get('recipe_hash', '?'))[:12]} {img.get('release', '')}/{img.get('arch', '')} "
                           f"profile {img.get('profile', '')}, archive sha256 {str(img.get('tar_sha256', '?'))[:16]}"),
                 ("virtbench", (run.provenance or {}).get("virtbench", "?"))])
    plats = table(["platform", "type", "kind", "inside", "label", "versions"],
                  ([e(p.name), e(p.type), e((p.config or {}).get("kind", "")), e((p.config or {}).get("inside", "")),
                    e(notation.platform_label(p.label)), e(notation.plain(p.versions or {}))]
                   for p in run.platforms))
    benches = table(["benchmark", "tool", "parameters", "tool version"],
                    ([e(b.key), e(b.name), e(notation.params(b.params)), e(b.tool_version)]
                     for b in run.benchmarks))
    return (f'<div class="cols"><div><h3>Host</h3>{host}</div><div><h3>Run</h3>{design}</div></div>'
            f"<h3>Platforms</h3>{plats}<h3>Benchmarks</h3>{benches}{adaptive_html(run)}")


def adaptive_html(run: Any) -> str:
    """Extra rounds of adaptive repetition, each with the reason the runner recorded."""
    log = (run.provenance or {}).get("adaptive") or []
    if not log:
        return ""
    body = ([e(x.get("round", "")), e(", ".join(x.get("platforms", []))),
             e("; ".join(f"{k}: {v}" for k, v in (x.get("reasons") or {}).items()) or x.get("stop", ""))]
            for x in log)
    return "<h3>Adaptive repetition</h3>" + table(["extra round", "platforms", "reason"], body)


def warnings_html(warnings: Sequence[Mapping[str, Any]]) -> str:
    if not warnings:
        return '<p class="ok">No warnings: host conditions and every quality check passed.</p>'
    general = [w for w in warnings if w["scope"] != "result"]
    results = [w for w in warnings if w["scope"] == "result"]
    out = "".join(f'<div class="flag {e(w["severity"])}"><b>{e(w["check"])}</b>: {e(w["message"])}</div>'
                  for w in general)
    if results:
        n_warn = sum(w["severity"] == "warn" for w in results)
        rows = ([e(w["benchmark"]), e(w["metric"]), e(w["platform"]), e(w["check"]),
                 f'<span class="{e(w["severity"])}">{e(w["severity"])}</span>', e(w["message"])] for w in results)
        out += (f"<details{' open' if len(results) <= 15 else ''}><summary>{len(results)} quality flags on results "
                f"({n_warn} warnings)</summary>"
                + table(["benchmark", "metric", "platform", "check", "severity", "evidence"], rows, "filterable")
                + "</details>")
    return out


def comparison(c: Comparison) -> str:
    """A cell comparing a platform with the baseline: ratio, interval, verdict badge, flags."""
    if c.relative is None:
        return f'<span class="bad">failed ×{c.failed}</span>' if c.failed else badge(c.verdict, c.reason) or "–"
    ci = f' <span class="ci">{e(interval(*c.ci))}</span>' if c.ci else ""
    p = f' <span class="ci">{e(c.reason)}</span>' if c.reason and c.verdict == "inconclusive" else ""
    flags = f' <span class="flags" title="{e("; ".join(c.warnings))}">⚑{len(c.warnings)}</span>' if c.warnings else ""
    failed = f' <span class="bad">({c.failed} failed)</span>' if c.failed else ""
    return f"<b>{ratio(c.relative)}</b>{ci} {badge(c.verdict, c.reason)}{p}{flags}{failed}"


def cell(v: Any) -> str:
    """Any cell of a model table as escaped HTML (the HTML file and the web pages)."""
    if isinstance(v, Comparison):
        return comparison(v)
    if isinstance(v, Mark):
        cls = BADGE.get(v.verdict or "", ("ns", ""))[0]
        return f'<span class="badge {cls}">{e(v.text)}</span>' if v.verdict else e(v.text)
    if v is None:
        return "–"
    if isinstance(v, float):
        return e(fmt(v))
    text = str(v)
    return f"<pre>{e(text)}</pre>" if "\n" in text else e(text)


def availability_html(avail: Sequence[Mapping[str, Any]], kinds: Sequence[str] = ("container", "vm")) -> str:
    def rng(v: Mapping[str, Any] | None) -> str:
        if not v:
            return "–"
        return pct(v["min"]) if abs(v["max"] - v["min"]) < 5e-3 else f"{pct(v['min'])} to {pct(v['max'])}"
    body = ([e(a["category"]), "100%", *[e(rng(a.get(k))) for k in kinds]] for a in avail)
    return table(["category", "bare metal", *kinds], body, "", "Performance availability: the best platform of "
                 "each kind per category, its range over the hosts")


def hosts_html(matrix: Sequence[Mapping[str, Any]], hosts: Sequence[str]) -> str:
    def cell(h: Mapping[str, Any] | None) -> str:
        if not h or h["relative"] is None:
            return "–"
        ci = h["relative_ci95"]
        return f"<b>{ratio(h['relative'])}</b>" + (f" <span class='ci'>{e(interval(*ci))}</span>" if ci else "") \
            + " " + badge(h["verdict"])
    shown = [m for m in matrix if any(h["verdict"] != "baseline" for h in m["hosts"].values())]
    body = ([e(f"{m['benchmark']} {m['metric']}"), e(m["platform"]), *[cell(m["hosts"].get(h)) for h in hosts],
             e(f"{ratio(m['min'])} to {ratio(m['max'])}" if m["min"] is not None else "–")] for m in shown)
    return table(["benchmark metric", "platform", *hosts, "range"], body, "filterable main",
                 "Relative performance per host (each host against its own baseline)")


def category_ranges_html(ranges: Mapping[str, Mapping[str, Any]], hosts: Sequence[str]) -> str:
    body = []
    for cat, per in ranges.items():
        for platform, v in per.items():
            body.append([e(cat), e(platform), *[e(fmt(v["hosts"].get(h), 3)) for h in hosts],
                         e(f"{pct(v['min'])} to {pct(v['max'])}")])
    return table(["category", "platform", *hosts, "range"], body, "", "Category geometric means per host and "
                 "their range")
