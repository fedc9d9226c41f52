"""Structural rules that keep the code base in shape (issue #10): checked on every `make test`.

- Dependencies point one way: a module may import its own layer or a lower one, never a
  higher one (plugins below runner, runner below report, report below web and cli).
- No import cycle between virtbench's packages at run time, nor among its modules (inside a
  package too; imports in functions count, those only for type checking do not).
- No module over 500 lines.
- The runner knows no experiment kind: no module of runner/ imports one or loads one by name
  (a kind reaches the runner through its hooks on Experiment and its Plan).
- Rounds are added up in one place (virtbench/rounds.py).
- Only store/ speaks SQL.
- Every plugin's entry-point name is the name its class declares.
- Every parser yields exactly the metrics its benchmark declares (on the recorded outputs).
"""
from __future__ import annotations

import ast
import re
from importlib.metadata import entry_points
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "virtbench"

LAYERS: list[tuple[str, ...]] = [
    # neutral: imported by everyone, import nothing of virtbench above them
    ("errors", "proc", "constants", "executor", "extras", "hostinfo", "writeback", "boards", "services", "filemodes",
     "rounds", "notation"),
    ("store",),
    # plugins and what they share; analysis is pure statistics over stored samples
    ("registry", "benchmarks", "platforms", "images", "probes", "analysis", "remote"),
    ("experiments", "config"),
    ("runner",),
    ("report", "selftest"),
    ("studies",),
    ("web", "docs", "cli", "commands", "__main__"),
]
RANK = {name: i for i, names in enumerate(LAYERS) for name in names}
MAX_LINES = 500


def _modules() -> dict[str, Path]:
    out = {}
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC).with_suffix("")
        if rel.parts[0] == "store" and "migrations" in rel.parts:
            continue
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        out[".".join(("virtbench", *parts))] = path
    return out


def _type_checking_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in node.body:
                lines.update(range(sub.lineno, (sub.end_lineno or sub.lineno) + 1))
    return lines


def _imports(module: str, path: Path) -> list[tuple[str, int, bool]]:
    """(imported virtbench module, line, only for type checking)."""
    tree = ast.parse(path.read_text())
    typing_only = _type_checking_lines(tree)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names = [target] + [f"{target}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for name in names:
            if name.startswith("virtbench"):
                found.append((name, node.lineno, node.lineno in typing_only))
    return found


def _top(module: str) -> str:
    """The layer name of a module: its top-level package, except that the report part of a
    package below the report layer (a module named `report` or one under a `report` subpackage
    of a kind or probe: `virtbench.experiments.density.report`, `virtbench.probes.x.report.y`)
    is the report layer: report/ finds it through the `virtbench.report_sections` entry points,
    and nothing below the report layer may import it. A module of a higher layer named `report`
    (`virtbench.commands.report`) keeps its package's layer."""
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else ""
    if "report" in parts[2:] and RANK.get(top, len(LAYERS)) < RANK["report"]:
        return "report"
    return top


MODULES = _modules()


def test_every_top_level_module_has_a_layer():
    tops = {_top(m) for m in MODULES} - {""}
    assert tops <= set(RANK), f"give these a layer in LAYERS: {sorted(tops - set(RANK))}"


def test_no_import_from_a_higher_layer():
    upward = []
    for module, path in MODULES.items():
        mine = _top(module)
        if not mine:
            continue
        for target, line, _ in _imports(module, path):
            theirs = _top(target)
            if theirs in RANK and mine in RANK and RANK[theirs] > RANK[mine]:
                upward.append(f"{path.relative_to(SRC)}:{line} imports {target} ({mine} is below {theirs})")
    assert not upward, "upward imports:\n" + "\n".join(upward)


def test_no_import_cycle_between_packages():
    """Run-time imports (module level and in functions) between top-level packages form no cycle."""
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        mine = _top(module)
        for target, _, typing_only in _imports(module, path):
            theirs = _top(target)
            if mine and theirs and theirs != mine and not typing_only and theirs in RANK:
                graph.setdefault(mine, set()).add(theirs)
    cycles = []

    def visit(node: str, stack: list[str]) -> None:
        for nxt in sorted(graph.get(node, ())):
            if nxt in stack:
                cycles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif len(stack) < len(graph) + 1:
                visit(nxt, stack + [nxt])

    for start in sorted(graph):
        visit(start, [start])
    assert not cycles, "import cycles:\n" + "\n".join(sorted(set(cycles)))


def _module_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Which module imports which at run time (module level and in functions, not under
    TYPE_CHECKING). `from pkg import name` counts as importing the module pkg.name if there is
    one, else pkg; a module's import of its own package (its __init__) counts too."""
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        for target, _, typing_only in _imports(module, path):
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != module and not typing_only:
                graph.setdefault(module, set()).add(target)
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles: strongly connected components of more than one module (Tarjan's
    algorithm, iterative so that no recursion limit applies), each sorted, sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for start in sorted(set(graph) | {t for ts in graph.values() for t in ts}):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        out.append(sorted(component))
    return sorted(out)


def test_no_import_circle_among_modules():
    """A circle among modules (report.builder <-> report.figures, say) works only because one
    side imports late, in a function: the modules cannot be understood, tested or moved apart."""
    circles = _circles(_module_graph(MODULES))
    assert not circles, f"{sum(map(len, circles))} modules in {len(circles)} import circles:\n" + \
        "\n".join(f"{len(c)}: " + ", ".join(c) for c in circles)


def test_the_circle_test_catches_a_circle_made_in_a_function(tmp_path):
    """The check itself must fail on what it forbids: a() imports b at module level, b imports
    a in a function; a third module importing a only for type checking is in no circle."""
    pkg = tmp_path / "virtbench" / "platforms"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("def f():\n    from .a import g\n    return g\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\n"
                              "from .a import g\n")
    (pkg / "d.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .e import x\n")
    (pkg / "e.py").write_text("from .d import y\n")
    modules = {f"virtbench.platforms.{p.stem}": p for p in pkg.glob("[a-z].py")}
    modules["virtbench.platforms"] = pkg / "__init__.py"
    assert _circles(_module_graph(modules)) == [["virtbench.platforms.a", "virtbench.platforms.b"]]


def test_no_module_is_over_500_lines():
    """A module past 500 lines mixes jobs (front door, vocabulary and loop in one file): split it."""
    long = sorted((n, str(p.relative_to(SRC))) for p in SRC.rglob("*.py")
                  if (n := len(p.read_text().splitlines())) > MAX_LINES)
    assert not long, f"modules over {MAX_LINES} lines:\n" + "\n".join(f"{p}: {n}" for n, p in reversed(long))


KINDS = sorted(p.name for p in (SRC / "experiments").iterdir() if p.is_dir() and (p / "__init__.py").exists())
"""The built-in kinds' packages (experiments/<kind>/); base, planning and registry are no kind."""


def _kind_references(module: str, path: Path) -> list[str]:
    """Where a module imports an experiment kind's package or names one to load it: an import of
    virtbench.experiments.<kind>, or a string naming such a module or a kind passed to a lookup."""
    where = path.relative_to(SRC) if path.is_relative_to(SRC) else path.name
    found = [f"{where}:{line} imports {target}" for target, line, _ in _imports(module, path)
             if target.split(".")[:2] == ["virtbench", "experiments"] and len(target.split(".")) > 2
             and target.split(".")[2] in KINDS]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                any(f"experiments.{k}" in node.value or f"experiments/{k}" in node.value for k in KINDS):
            found.append(f"{where}:{node.lineno} names {node.value!r}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("get", "load") \
                and any(isinstance(a, ast.Constant) and a.value in KINDS for a in node.args):
            found.append(f"{where}:{node.lineno} looks up a kind by name: {ast.unparse(node)}")
        if isinstance(node, ast.Compare) and any(isinstance(c, ast.Constant) and c.value in KINDS
                                                 for c in node.comparators) and "experiment" in ast.unparse(node):
            found.append(f"{where}:{node.lineno} asks which kind: {ast.unparse(node)}")
    return found


def test_the_runner_knows_no_kind():
    """#40: 8 of runner/'s 10 modules imported the benchmarks kind (one a private name), two asked
    "is this the benchmarks kind?". A kind reaches the runner through Experiment's hooks and Plan."""
    assert KINDS and "benchmarks" in KINDS
    found = [f for m, p in MODULES.items() if m.startswith("virtbench.runner.") for f in _kind_references(m, p)]
    assert not found, "the runner names a kind:\n" + "\n".join(found)


def test_the_kind_check_catches_an_import_and_a_lookup(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from ..experiments.benchmarks.pair import x\nfrom ..experiments.base import Experiment\n"
                   "EXPERIMENTS.get('density')\nif campaign.experiment == 'benchmarks':\n    pass\n"
                   "import_module('virtbench.experiments.line.kind')\n")
    found = _kind_references("virtbench.runner.bad", bad)
    assert {f.split(" ")[0] for f in found} == {"bad.py:1", "bad.py:3", "bad.py:4", "bad.py:6"}, found
    assert not any("experiments.base" in f for f in found), found


def _round_sums(tree: ast.AST) -> list[ast.AST]:
    """Additions of a campaign's warm-ups to other rounds, and the maximum of repetitions and the
    adaptive cap: the round arithmetic."""
    def warmups(operand: ast.expr) -> bool:  # c.warmups, warmups, int(campaign.get("warmups", 0) or 0)
        text = ast.unparse(operand)
        return bool(re.fullmatch(r"([\w.]+\.)?warmups", text) or re.search(r"get\(['\"]warmups['\"]", text))

    out: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and (warmups(node.left) or warmups(node.right)):
            out.append(node)
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "max" and \
                "max_repetitions" in ast.unparse(node) and "repetitions" in ast.unparse(node).replace("max_repetitions", ""):
            out.append(node)
    return out


def test_rounds_are_added_up_in_one_place():
    """#40: the round cap (warm-ups + max(repetitions, the adaptive cap)) was computed in the
    budget, the estimate and the progress bar, each with its own per-round count; the store's
    and the web's counts of planned executions added the rounds up again."""
    home = SRC / "rounds.py"
    found = [f"{p.relative_to(SRC)}:{n.lineno}: {ast.unparse(n)}" for p in MODULES.values() if p != home
             for n in _round_sums(ast.parse(p.read_text()))]
    assert not found, "rounds added up outside virtbench/rounds.py:\n" + "\n".join(found)
    assert len(_round_sums(ast.parse("r = c.warmups + max(c.repetitions, a.max_repetitions)"))) == 2
    assert len(_round_sums(ast.parse("r = int(c.get('warmups', 0) or 0) + int(c.get('repetitions', 0))"))) == 1
    assert not _round_sums(ast.parse("t = 1.0 + d * (rnd - warmups)"))


def test_a_kind_or_probe_report_part_is_the_report_layer():
    """What the other packages rely on: their report parts rank with report/, so that nothing
    below may import them, while report/ itself stays what it is."""
    assert _top("virtbench.experiments.density.report") == "report"
    assert _top("virtbench.probes.x.report.figures") == "report"
    assert _top("virtbench.report.builder") == "report"
    assert _top("virtbench.experiments.density.kind") == "experiments"
    assert _top("virtbench.commands.report") == "commands" and _top("virtbench.studies.report") == "studies"
    assert _top("virtbench.reporting") == "reporting"


def test_the_layering_test_catches_an_upward_import(tmp_path):
    """The check itself must fail on what it forbids (a platform importing the runner)."""
    bad = tmp_path / "bad.py"
    bad.write_text("from ..runner import execute\n")
    targets = [t for t, _, _ in _imports("virtbench.platforms.bad", bad)]
    assert "virtbench.runner" in targets and RANK[_top(targets[0])] > RANK["platforms"]


@pytest.mark.parametrize("package", sorted({_top(m) for m in MODULES} - {"", "store"}))
def test_only_store_speaks_sql(package):
    """No SQLAlchemy and no database session, engine or cursor outside store/. Benchmarks' own
    SQL workloads (sqlite, mariadb) are strings run in the guest, not queries on the store."""
    offenders = []
    for module, path in MODULES.items():
        if _top(module) != package:
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n == "sqlalchemy" or n.startswith("sqlalchemy.") for n in names):
                offenders.append(f"{path.relative_to(SRC)}:{node.lineno}: imports SQLAlchemy")
            if isinstance(node, ast.Attribute) and node.attr in ("execute", "scalars", "scalar", "cursor",
                                                                 "exec_driver_sql", "session", "engine"):
                offenders.append(f"{path.relative_to(SRC)}:{node.lineno}: .{node.attr}")
    assert not offenders, "SQL outside store/:\n" + "\n".join(sorted(set(offenders)))


@pytest.mark.parametrize("group,attr", [("virtbench.benchmarks", "name"), ("virtbench.platforms", "type"),
                                        ("virtbench.experiments", "name"), ("virtbench.selftest", "name")])
def test_entry_point_names_match_their_classes(group, attr):
    eps = entry_points(group=group)
    assert eps, f"no entry points in {group}: reinstall with pip install -e ."
    wrong = [f"{ep.name} -> {ep.value} declares {attr}={getattr(ep.load(), attr, None)!r}"
             for ep in eps if ep.value.startswith("virtbench.") and getattr(ep.load(), attr, None) != ep.name]
    assert not wrong, "\n".join(wrong)


def test_campaign_validators_never_depend_on_a_later_field():
    from pydantic import BaseModel

    from virtbench.config import VALIDATOR_READS, Campaign, check_field_order

    check_field_order(Campaign, VALIDATOR_READS)  # as declared: fine

    class Reordered(BaseModel):
        platforms: list[str] = []
        experiment: str = "benchmarks"

    with pytest.raises(TypeError, match="Reordered.platforms is validated with experiment"):
        check_field_order(Reordered, {"platforms": ("experiment",)})


def test_test_module_basenames_are_unique():
    """pytest imports test modules by basename (rootdir-relative, no packages): two files of one
    name in different test folders break the whole suite's collection."""
    tests = SRC.parents[1] / "tests"
    seen: dict[str, Path] = {}
    for path in sorted(tests.rglob("test_*.py")):
        if "node_modules" in path.parts:
            continue
        assert path.name not in seen, f"{path} and {seen[path.name]}: rename one (test basenames must be unique)"
        seen[path.name] = path
