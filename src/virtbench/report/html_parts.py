"""HTML fragments of the report: provenance, tables, warnings, failures. Every text is escaped.

Kept apart from html.py (the page, figures and script) so each stays readable.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Any

from ..analysis.summary import Row
from ..analysis.tables import BestRow, CategoryCell, StackRow
from ..constants import LIFECYCLE, LIFECYCLE_STEPS

BADGE = {"faster": ("good", "faster"), "slower": ("bad", "slower"), "same": ("same", "same"),
         "inconclusive": ("ns", "inconclusive"), "baseline": ("base", "baseline"), "unit changed": ("ns", "unit changed")}
"""Verdict -> (CSS class, word): colour follows the verdict, never the raw ratio."""


def e(x: Any) -> str:
    return escape(str(x), quote=True)


def fmt(x: float | None, digits: int = 4) -> str:
    if x is None:
        return "–"
    if x == 0:
        return "0"
    if abs(x) >= 1e6 or abs(x) < 1e-3:
        return f"{x:.{digits - 1}e}"
    return f"{x:.{digits}g}"


def pct(x: float | None) -> str:
    return "–" if x is None else f"{x:.0%}"


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
    return f'<span class="badge {cls}"{title}>{e(text)}</span>'


def kv(pairs: Iterable[tuple[str, Any]]) -> str:
    return table(["", ""], ([e(k), e(v)] for k, v in pairs), "kv")


def provenance(run: Any, facts: Mapping[str, Any], label: str) -> str:
    virt = facts.get("virtualization") or {}
    mem = facts.get("memory_bytes") or 0
    mitig = facts.get("mitigations") or {}
    vulnerable = [k for k, v in mitig.items()
                  if "vulnerable" in str(v).lower() and "not affected" not in str(v).lower()]
    host = kv([("host", label), ("CPU", f"{facts.get('cpu_model', '?')} ({facts.get('cpus', '?')} CPUs)"),
               ("memory", f"{mem / 2**30:.1f} GiB"), ("architecture", facts.get("arch", "?")),
               ("kernel", facts.get("kernel", "?")), ("OS", facts.get("os", "?")),
               ("cgroup", facts.get("cgroup", "?")), ("microcode", facts.get("microcode") or "?"),
               ("virtualized", f"vm: {virt.get('vm', '?')}, container: {virt.get('container', '?')}"),
               ("governor", facts.get("governor", "?")), ("turbo", facts.get("turbo", "?")),
               ("load average at start", " ".join(str(x) for x in facts.get("loadavg") or []) or "?"),
               ("mitigations", f"{len(mitig)} listed, vulnerable: {', '.join(vulnerable) or 'none'}"),
               ("CPU flags", " ".join(facts.get("cpu_flags") or []) or "?")])
    img = run.image or {}
    camp = run.campaign or {}
    design = kv([("run", run.id), ("name", run.name), ("status", run.status),
                 ("started", run.started_at or "?"), ("finished", run.finished_at or "?"),
                 ("repetitions", camp.get("repetitions")), ("warm-up rounds", camp.get("warmups")),
                 ("randomized order", f"{camp.get('shuffle', True)} (seed {run.seed})"),
                 ("baseline", run.baseline),
                 ("image", f"{str(img.get('recipe_hash', '?'))[:12]} {img.get('release', '')}/{img.get('arch', '')} "
                           f"profile {img.get('profile', '')}, archive sha256 {str(img.get('tar_sha256', '?'))[:16]}"),
                 ("virtbench", (run.provenance or {}).get("virtbench", "?"))])
    plats = table(["platform", "type", "kind", "inside", "label", "versions"],
                  ([e(p.name), e(p.type), e((p.config or {}).get("kind", "")), e((p.config or {}).get("inside", "")),
                    e(p.label), e(", ".join(f"{k} {v}" for k, v in (p.versions or {}).items()))]
                   for p in run.platforms))
    benches = table(["benchmark", "tool", "parameters", "tool version"],
                    ([e(b.key), e(b.name), e(", ".join(f"{k}={v}" for k, v in b.params.items())), e(b.tool_version)]
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


def _rel_cell(r: Row | None) -> str:
    if r is None:
        return "–"
    if r.relative is None:
        return f'<span class="bad">failed ×{r.failed}</span>' if r.failed else badge(r.verdict, r.verdict_reason) or "–"
    ci = f' <span class="ci">[{r.relative_ci95[0]:.3f}–{r.relative_ci95[1]:.3f}]</span>' if r.relative_ci95 else ""
    p = f' <span class="ci">{e(r.verdict_reason)}</span>' if r.verdict_reason and r.verdict == "inconclusive" else ""
    flags = f' <span class="flags" title="{e("; ".join(f["message"] for f in r.quality))}">⚑{len(r.quality)}</span>' \
        if any(f["severity"] == "warn" for f in r.quality) else ""
    failed = f' <span class="bad">({r.failed} failed)</span>' if r.failed else ""
    return f"<b>{r.relative:.3f}</b>{ci} {badge(r.verdict, r.verdict_reason)}{p}{flags}{failed}"


def relative_table(rows: Sequence[Row], platforms: Sequence[str], baseline: str,
                   order: Sequence[str] = ()) -> str:
    """Relative performance per benchmark metric and platform, with verdict after Holm's correction.

    order: benchmark keys in the campaign's order (a sweep reads 64, 1024, 16384, not 1024, 16384, 64).
    """
    pos = {k: i for i, k in enumerate(order)}
    by: dict[tuple[str, str], dict[str, Row]] = {}
    for r in sorted(rows, key=lambda r: pos.get(r.benchmark, len(pos))):
        if r.benchmark != LIFECYCLE:
            by.setdefault((r.benchmark, r.metric), {})[r.platform] = r
    others = [p for p in platforms if p != baseline]
    body = []
    for (bench, metric), per in by.items():
        any_row = next(iter(per.values()))
        base = per.get(baseline)
        arrow = "↑" if any_row.higher_is_better else "↓"
        body.append([f"{e(bench)} <b>{e(metric)}</b> {arrow}", e(any_row.unit),
                     e(fmt(base.mean)) if base and base.mean is not None else '<span class="bad">no data</span>',
                     *[_rel_cell(per.get(p)) for p in others]])
    return table(["benchmark / metric", "unit", f"{baseline} mean", *others], body, "filterable main",
                 f"Performance relative to {baseline}: 1.0 = same, above = better; [95% interval of the ratio]; "
                 "verdict: slower/faster when the interval excludes 1, same when it lies within the minimum "
                 "effect, otherwise inconclusive with what would decide it; ⚑ = quality warnings")


def detail_table(rows: Sequence[Row]) -> str:
    body = ([e(r.benchmark), e(r.metric), e(r.unit), e(r.platform), str(r.n), str(r.failed), e(fmt(r.mean)),
             e(f"{fmt(r.mean_boot_ci95[0])}–{fmt(r.mean_boot_ci95[1])}" if r.mean_boot_ci95 else "–"),
             e(fmt(r.median)), e(f"{fmt(r.median_ci95[0])}–{fmt(r.median_ci95[1])}" if r.median_ci95 else "–"),
             e(fmt(r.stdev)), e(pct(r.cv) if r.cv is None else f"{r.cv:.1%}"), e(fmt(r.relative)),
             e(fmt(r.p_value, 2)), e(fmt(r.p_holm, 2)), e(fmt(r.effect_size, 2)), badge(r.verdict, r.verdict_reason),
             e(r.verdict_reason or "")] for r in rows)
    return table(["benchmark", "metric", "unit", "platform", "n", "failed", "mean", "mean 95% CI", "median",
                  "median 95% CI", "stdev", "CV", "relative", "p", "p (Holm)", "rank-biserial", "verdict", "reason"],
                 body, "filterable small")


def category_html(cat: Mapping[str, Mapping[str, CategoryCell]], platforms: Sequence[str]) -> str:
    cols = [p for p in platforms if any(p in cells for cells in cat.values())]
    body = ([e(c), *[f"{cells[p].geomean:.3f} <span class='ci'>({cells[p].metrics})</span>" if p in cells else "–"
                     for p in cols]] for c, cells in cat.items())
    return table(["category", *cols], body, "", "Geometric mean of relative performance per category "
                 "(number of metrics in brackets)")


def best_html(best: Sequence[BestRow], kind: str) -> str:
    names = list(dict.fromkeys(n for b in best for n in b.values))
    if len(names) < 1:
        return f"<p>No {e(kind)} platforms measured directly on the host.</p>"

    def cell(b: BestRow, n: str) -> str:
        if n not in b.values:
            return "–"
        v = f"{b.values[n]:.3f}"
        return f"<b>{v}</b>" if n == b.best else f"<i>{v}</i>" if n == b.worst else v
    body = ([e(b.category), *[cell(b, n) for n in names], e(b.best or "--")] for b in best)
    title = {"vm": "Hypervisor comparison (Table 5 style)", "container": "Container runtime comparison "
             "(Table 6 style)"}.get(kind, kind)
    return table(["category", *names, "best"], body, "", f"{title}: bold best, italic worst")


def availability_html(avail: Sequence[Mapping[str, Any]], kinds: Sequence[str] = ("container", "vm")) -> str:
    def rng(v: Mapping[str, Any] | None) -> str:
        if not v:
            return "–"
        return pct(v["min"]) if abs(v["max"] - v["min"]) < 5e-3 else f"{pct(v['min'])}–{pct(v['max'])}"
    body = ([e(a["category"]), "100%", *[e(rng(a.get(k))) for k in kinds]] for a in avail)
    return table(["category", "bare metal", *kinds], body, "", "Performance availability (Table 7 style): best "
                 "platform of each kind per category, range over hosts")


def stacks_html(stacks: Sequence[StackRow]) -> str:
    if not stacks:
        return "<p>No stacked platforms (a platform with <code>inside:</code>) in this run.</p>"
    body = ([e(s.platform), e(f"{s.outer} × {s.inner}"), e(f"{s.benchmark} {s.metric}"), f"{s.outer_relative:.3f}",
             f"{s.inner_relative:.3f}", f"<b>{s.predicted:.3f}</b>", f"<b>{s.measured:.3f}</b>",
             f"{s.error:+.1%}"] for s in stacks)
    return table(["stack", "layers", "benchmark metric", "outer", "inner", "predicted", "measured", "error"], body,
                 "filterable", "Stack prediction (Fig. 4 style): product of the layers' relative performances")


def lifecycle_html(rows: Sequence[Row], platforms: Sequence[str]) -> str:
    life = [r for r in rows if r.benchmark == LIFECYCLE]
    if not life:
        return ""
    known = [f"{s}_s" for s in LIFECYCLE_STEPS]
    steps = sorted(dict.fromkeys(r.metric for r in life), key=lambda m: known.index(m) if m in known else 99)
    per = {(r.platform, r.metric): r for r in life}
    body = ([e(p), *[e(fmt(per[(p, s)].median, 3)) if (p, s) in per and per[(p, s)].median is not None else "–"
                     for s in steps]] for p in platforms)
    return table(["platform", *[s.removesuffix("_s") for s in steps]], body, "", "Lifecycle: median seconds")


def failures_html(failures: Sequence[Mapping[str, Any]]) -> str:
    if not failures:
        return '<p class="ok">No failed executions.</p>'
    body = ([str(f["round"]), e(f["platform"]), e(f["benchmark"]), e(f.get("exit_code")), e(f["error"]),
             f"<pre>{e(f.get('output_tail', ''))}</pre>"] for f in failures)
    return table(["round", "platform", "benchmark", "exit", "error", "output (tail)"], body, "filterable")


def hosts_html(matrix: Sequence[Mapping[str, Any]], hosts: Sequence[str]) -> str:
    def cell(h: Mapping[str, Any] | None) -> str:
        if not h or h["relative"] is None:
            return "–"
        ci = h["relative_ci95"]
        return f"<b>{h['relative']:.3f}</b>" + (f" <span class='ci'>[{ci[0]:.2f}–{ci[1]:.2f}]</span>" if ci else "") \
            + " " + badge(h["verdict"])
    shown = [m for m in matrix if any(h["verdict"] != "baseline" for h in m["hosts"].values())]
    body = ([e(f"{m['benchmark']} {m['metric']}"), e(m["platform"]), *[cell(m["hosts"].get(h)) for h in hosts],
             e(f"{fmt(m['min'], 3)}–{fmt(m['max'], 3)}" if m["min"] is not None else "–")] for m in shown)
    return table(["benchmark metric", "platform", *hosts, "range"], body, "filterable main",
                 "Relative performance per host (each host against its own baseline)")


def category_ranges_html(ranges: Mapping[str, Mapping[str, Any]], hosts: Sequence[str]) -> str:
    body = []
    for cat, per in ranges.items():
        for platform, v in per.items():
            body.append([e(cat), e(platform), *[e(fmt(v["hosts"].get(h), 3)) for h in hosts],
                         e(f"{pct(v['min'])}–{pct(v['max'])}")])
    return table(["category", "platform", *hosts, "range"], body, "", "Category geometric means per host and "
                 "their range")
