"""`virtbench doctor`: which platforms run here (decided by trying), why not, and the host's facts."""
from __future__ import annotations

import json
from typing import Any

import click
from rich.markup import escape

from .shared import console, db_option, state_paths


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--wait", is_flag=True, help="If a run is measuring on this host, wait for it instead of refusing.")
@db_option
def doctor(as_json: bool, wait: bool, db_url: str | None) -> None:
    """Which platforms run here (decided by trying), why not, and the host's facts."""
    from .. import hostinfo
    from ..images.arch import cross_build_report
    from ..images.build import DEFAULT_CACHE
    from ..platforms import sandboxes, slices
    from ..platforms.availability import availability_of
    from ..platforms.kubernetes import doctor as kube
    from ..registry import PLATFORMS
    from ..store.db import default_url, redact
    from .lastprobe import probe_or_last

    paths = state_paths()

    def probe() -> dict[str, Any]:
        verdicts = availability_of(PLATFORMS.names(), paths)
        return {"host": hostinfo.facts(), "store": redact(db_url or default_url()), "image_cache": str(DEFAULT_CACHE),
                "platforms": [{"name": n, "kind": PLATFORMS.get(n).kind, "available": v.available,
                               "reason": v.reason, "fix": v.fix} for n, v in verdicts.items()],
                "sandboxes": sandboxes.report(paths), "kubernetes": kube.report(paths),
                "cross_build": cross_build_report(),
                "host_kind": slices.host_kind()}

    # Probes start tiny instances: never while a run measures here (they would disturb it);
    # then the last probe's answer, with its time.
    doc, probed_at = probe_or_last(paths, "doctor", "`virtbench doctor`", wait, probe)
    doc["probed_at"] = probed_at
    facts = doc["host"]
    if as_json:
        click.echo(json.dumps(doc, indent=2))
        return
    virt = facts["virtualization"]
    console.print(f"[bold]host[/bold] {facts['hostname']}: {facts['cpu_model']}, {facts['cpus']} CPUs, "
                  f"{facts['memory_bytes'] / 2**30:.1f} GiB, {facts['arch']}, kernel {facts['kernel']}")
    console.print(f"  flags: {' '.join(facts['cpu_flags']) or '-'}; AES in hardware: {'yes' if facts['aes'] else 'no'}")
    console.print(f"  governor {facts['governor']}, turbo {facts['turbo']}, cgroup {facts['cgroup']}, "
                  f"virtualized: vm={virt['vm']} container={virt['container']}")
    if words := hostinfo.scaling_words(facts.get("parallel_scaling")):  # a last probe of an older virtbench has none
        console.print(f"  parallel scaling: {words} (a cpus: q limit leaves a k-thread CPU-bound load "
                      "min(1, q / scaling(k)) of its throughput)", markup=False)
    if doc.get("host_kind"):  # a last probe saved by an older virtbench has none
        console.print(f"  host kind: {doc['host_kind']}", markup=False)
    console.print(f"  results store: {doc['store']}; image cache: {doc['image_cache']}")
    for p in doc["platforms"]:
        mark = "[green]available[/green]" if p["available"] else "[red]not available[/red]"
        console.print(f"[bold]{p['name']:<11}[/bold] {mark}: {p['reason']}"
                      + (f"\n            fix: {p['fix']}" if p["fix"] and not p["available"] else ""))
    _print_sandboxes(doc["sandboxes"])
    if doc.get("kubernetes"):  # a last probe saved by an older virtbench has none
        console.print("[bold]kubernetes[/bold] (`type: kubernetes`)")
        for line in kube.lines(doc["kubernetes"]):
            console.print(line, markup=False)
    console.print("[bold]images for other architectures[/bold] (`image build --arch`)")
    for c in doc["cross_build"]:
        console.print(f"  {c['arch']}: {'[green]can build[/green]' if c['ok'] else '[red]cannot build[/red]'}: "
                      f"{escape(c['reason'])}" + (f"\n    fix: {escape(c['fix'])}" if c["fix"] and not c["ok"] else ""))


def _print_sandboxes(entries: list[dict[str, Any]]) -> None:
    """doctor's sandbox section: each runtime's version, and each mode or engine tried."""
    console.print("[bold]sandboxes[/bold]")
    for s in entries:
        version = s["version"] or "not installed"
        console.print(f"  [bold]{s['name']}[/bold] ({s['what']}) {escape(version)}"
                      + (f", default platform {s['default_mode']}" if s.get("default_mode") else ""))
        parts = [(f"platform {m['mode']}", m) for m in s.get("modes", [])]
        parts += [(f"as a {e} runtime", s[e]) for e in ("docker", "containerd") if e in s]
        if "available" in s:
            parts.append(("", s))
        for what, v in parts:
            mark = "[green]works[/green]" if v["available"] else "[red]does not work[/red]"
            console.print(f"    {what + ': ' if what else ''}{mark}: {escape(v['reason'])}"
                          + (f"\n      fix: {escape(v['fix'])}" if v.get("fix") and not v["available"] else ""))
        if s.get("fix") and not s.get("modes") and "available" not in s:
            console.print(f"    fix: {escape(s['fix'])}")
