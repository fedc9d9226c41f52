"""The study report and `study show` as text within 100 columns: one block per published value
(source and quantity; paper, this host, verdict; why), each line wrapped at word boundaries."""
from __future__ import annotations

import textwrap
from collections.abc import Iterator
from typing import Any

from ..report.model import Section
from .report import cell
from .scales import short

WIDTH = 100


def wrap(text: str, first: str = "", rest: str = "    ") -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=first, subsequent_indent=rest, break_long_words=True,
                         break_on_hyphens=False) or [first.rstrip()]


def _source(c: dict[str, Any]) -> str:
    where, section = c["source"]["where"], c["source"]["section"]
    return f"§{section}" if where.startswith("Section") else f"{where}, §{section}"


def report_lines(section: Section) -> Iterator[str]:
    doc = section.data
    yield from wrap(section.title)
    for c in doc["comparisons"]:
        yield ""
        yield from wrap(f"{_source(c)}: {c['quantity']}", "", "    ")
        unit = "" if c["kind"] == "relative" else c["unit"]
        ci = f" [{cell(c['ci95'][0])}-{cell(c['ci95'][1])}]" if c.get("ci95") else ""
        yield from wrap(f"paper {cell(c['paper'], unit)} | this host {cell(c['yours'], unit)}{ci} | {c['verdict']}",
                        "  ", "    ")
        why = "; ".join(c["likely_reasons"]) or c["detail"]
        if why:
            yield from wrap(why, "  ", "    ")
        if c["differences"]:
            yield from wrap("run differently: " + "; ".join(d["what"] for d in c["differences"]), "  ", "    ")
    yield ""
    for note in section.notes:
        yield from wrap(note, "note: ", "      ")


def show_lines(doc: dict[str, Any]) -> Iterator[str]:
    yield from wrap(f"Study {doc['study']}: {doc['title']} ({doc['seed']})")
    yield from wrap(doc["measures"], "  ", "  ")
    host = doc["paper_host"]
    yield from wrap(f"the paper's machine: {host['machine']}; {doc['repetitions_text']}", "  ", "  ")
    for p in doc["parts"]:
        yield ""
        yield from wrap(f"part {p['name']}: {p['title']}")
        took = (f"; the presets' own estimate (--dry-run): quick {p['estimate']['quick']}, paper "
                f"{p['estimate']['paper']}" if p["estimate"] else "")
        yield from wrap(f"run: {p['run']} (quick {p['duration'].get('quick', '?')}; --scale paper "
                        f"{p['duration'].get('paper', '?')}{took})", "  ", "    ")
        if p["needs"] or p["degrades"]:
            yield from wrap("needs " + (", ".join(p["needs"]) or "nothing beyond its platforms")
                            + ("; without " + ", ".join(p["degrades"]) + " it runs with less" if p["degrades"] else ""),
                            "  ", "    ")
        if p["hosts"]:
            yield from wrap(f"with --hosts NAME: {p['hosts']}", "  ", "    ")
        for o in p["options"]:
            yield from wrap(f"--option {o['name']}: {o['help']}", "  ", "    ")
        for c in p["commands"]:
            yield from wrap(f"the paper's command ({c['where']}): {c['argv']}" + (f" ({c['note']})" if c["note"] else ""),
                            "  ", "    ")
        for s in p["settings"]:
            values = ", ".join(f"{k} {short(v, k)}" for k, v in s["values"].items())
            yield from wrap(f"the paper states ({s['where']}), {s['target']}: {values}", "  ", "    ")
        for d in p["differences"]:
            text = f"{d['what']} ({d['why']}" + (f"; expected effect: {d['effect']}" if d["effect"] else "")
            text += (f"; {d['removed_by']} runs it as the paper did" if d["removed_by"] else "")
            text += (f"; handled by {d['handled_by']}" if d["handled_by"] else "") + ")"
            scales = "" if len(d["scales"]) > 1 else f" [{d['scales'][0]} scale]"
            scales += " [with --hosts]" if d["only_with_hosts"] else ""
            yield from wrap(f"differs{scales}: {text}", "  ", "    ")
        if p["quick_scale"]:
            yield from wrap("at quick scale: " + "; ".join(p["quick_scale"]), "  ", "    ")
    yield ""
    yield from wrap(f"published values ({len(doc['values'])}):")
    for v in doc["values"]:
        where = v["source"]["where"]
        src = f"§{v['source']['section']}" if where.startswith("Section") else f"{where}, §{v['source']['section']}"
        if v["kind"] == "relative":
            raw = v["paper_values"]
            shown = f"{cell(v['paper'])} of the baseline ({raw['baseline']} -> {raw['value']} {v['unit']})"
        else:
            shown = cell(v["paper"], v["unit"])
        yield from wrap(f"{src}: {v['quantity']}: {shown} [{v['part']}]", "  ", "    ")
