"""The test suite's durations table, per module and the slowest tests, from pytest's JUnit XML.

    python benchmarks/ci_durations.py RESULTS.xml [RESULTS2.xml ...] [--wall SECONDS | --start FILE --end FILE]
                                     [--slowest N] [--title TEXT] [--summary]

Prints a Markdown table (tests/README.md keeps the latest one): for each test module, how many
tests ran, passed, were skipped or failed, and the seconds they took (setup, call and teardown
of each test, as pytest's JUnit report counts them: a module-scoped fixture's setup, such as a
guest's boot, counts in its module's first test). Several XML files (the lanes of one CI run:
unit and web tests beside the integration tests) are read as one run. With --wall (or the CI
run's start and end epoch files) the table also gives the run's wall time and what went
before and beside pytest (installs, lint, builds). Sums of test times exceed the wall time
when lanes or pytest-xdist workers run side by side: the column says where the time goes,
the wall time how long CI took.

Standard library only, so it runs from any Python (before `make venv`).
"""
from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Module:
    name: str
    seconds: float = 0.0
    passed: int = 0
    skipped: int = 0
    failed: int = 0
    skip_reasons: set[str] = field(default_factory=set)

    @property
    def tests(self) -> int:
        return self.passed + self.skipped + self.failed


@dataclass
class Case:
    module: str
    name: str
    seconds: float
    outcome: str


def module_of(classname: str) -> str:
    """tests.integration.test_qemu (or tests.unit.test_x.TestClass) -> tests/integration/test_qemu.py."""
    parts = classname.split(".")
    for i, part in enumerate(parts):
        if part.startswith("test_") or part == "conftest":
            return "/".join(parts[: i + 1]) + ".py"
    return "/".join(parts) + ".py"


def read(paths: list[Path]) -> tuple[list[Case], float]:
    """Every test case of the files, and the sum of their suites' own times."""
    cases: list[Case] = []
    suite_seconds = 0.0
    for path in paths:
        root = ET.parse(path).getroot()
        suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
        for suite in suites:
            suite_seconds += float(suite.get("time", 0) or 0)
            for tc in suite.iter("testcase"):
                outcome = "passed"
                if tc.find("failure") is not None or tc.find("error") is not None:
                    outcome = "failed"
                elif tc.find("skipped") is not None:
                    skipped = tc.find("skipped")
                    outcome = "skipped:" + (skipped.get("message", "") if skipped is not None else "")
                cases.append(Case(module_of(tc.get("classname", "?")), tc.get("name", "?"),
                                  float(tc.get("time", 0) or 0), outcome))
    return cases, suite_seconds


def modules(cases: list[Case]) -> list[Module]:
    by: dict[str, Module] = {}
    for c in cases:
        m = by.setdefault(c.module, Module(c.module))
        m.seconds += c.seconds
        if c.outcome == "passed":
            m.passed += 1
        elif c.outcome == "failed":
            m.failed += 1
        else:
            m.skipped += 1
            m.skip_reasons.add(c.outcome.removeprefix("skipped:")[:90])
    return sorted(by.values(), key=lambda m: -m.seconds)


def _mmss(seconds: float) -> str:
    return f"{int(seconds // 60)}:{int(round(seconds % 60)):02d}"


def table(cases: list[Case], suite_seconds: float, wall: float | None, slowest: int, title: str) -> str:
    mods = modules(cases)
    total = sum(m.seconds for m in mods)
    lines = [f"### {title}", ""]
    if wall is not None:
        lines.append(f"CI wall time {_mmss(wall)} (m:ss, {wall:.0f} s); pytest reported {suite_seconds:.0f} s; "
                     f"sum of test times {total:.0f} s.")
    else:
        lines.append(f"pytest reported {suite_seconds:.0f} s; sum of test times {total:.0f} s.")
    lines += ["", "| module | tests | passed | skipped | failed | seconds | m:ss | share |",
              "|---|---:|---:|---:|---:|---:|---:|---:|"]
    groups: dict[str, list[Module]] = defaultdict(list)
    for m in mods:
        groups[m.name.split("/")[1] if m.name.count("/") >= 2 else m.name].append(m)
    for m in mods:
        if m.name.startswith("tests/integration/") or m.name.startswith("tests/e2e/") or m.seconds >= 60:
            lines.append(f"| `{m.name}` | {m.tests} | {m.passed} | {m.skipped} | {m.failed} | {m.seconds:.0f} | "
                         f"{_mmss(m.seconds)} | {100 * m.seconds / total if total else 0:.1f} % |")
    for directory in ("unit", "web"):  # the many small modules, summed
        rest = [m for m in groups.get(directory, []) if m.seconds < 60]
        if rest:
            s = sum(m.seconds for m in rest)
            lines.append(f"| tests/{directory}/ (other {len(rest)} modules, each < 60 s) | {sum(m.tests for m in rest)} | "
                         f"{sum(m.passed for m in rest)} | {sum(m.skipped for m in rest)} | "
                         f"{sum(m.failed for m in rest)} | {s:.0f} | {_mmss(s)} | "
                         f"{100 * s / total if total else 0:.1f} % |")
    lines.append(f"| **all** | {len(cases)} | {sum(m.passed for m in mods)} | {sum(m.skipped for m in mods)} | "
                 f"{sum(m.failed for m in mods)} | {total:.0f} | {_mmss(total)} | 100 % |")
    if slowest:
        lines += ["", f"Slowest {slowest} tests:", "", "| seconds | test | outcome |", "|---:|---|---|"]
        for c in sorted(cases, key=lambda c: -c.seconds)[:slowest]:
            lines.append(f"| {c.seconds:.0f} | `{c.module}::{c.name}` | {c.outcome.split(':')[0]} |")
    skipped = [m for m in mods if m.skipped and m.name.startswith(("tests/integration/", "tests/e2e/"))]
    if skipped:
        lines += ["", "Skipped integration tests and why:", ""]
        for m in skipped:
            lines.append(f"- `{m.name}` ({m.skipped}): " + "; ".join(sorted(r for r in m.skip_reasons if r)))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("xml", nargs="+", type=Path, help="pytest --junitxml files of one run")
    ap.add_argument("--wall", type=float, help="the CI run's wall time in seconds")
    ap.add_argument("--start", type=Path, help="file holding the run's start (epoch seconds)")
    ap.add_argument("--end", type=Path, help="file holding the run's end (epoch seconds)")
    ap.add_argument("--slowest", type=int, default=15)
    ap.add_argument("--title", default="Test durations")
    ap.add_argument("--summary", action="store_true",
                    help="print only the closing line 'suite: N passed, N failed, N skipped' of the files together")
    args = ap.parse_args(argv)
    wall = args.wall
    if wall is None and args.start and args.end:
        wall = float(args.end.read_text().split()[0]) - float(args.start.read_text().split()[0])
    missing = [p for p in args.xml if not p.is_file()]
    if missing:
        print(f"ci_durations: no such file {missing[0]} (fix: give pytest's --junitxml output)", file=sys.stderr)
        return 2
    cases, suite_seconds = read(args.xml)
    if args.summary:
        n = {k: sum(c.outcome.split(":")[0] == k for c in cases) for k in ("passed", "failed", "skipped")}
        print(f"suite: {n['passed']} passed, {n['failed']} failed, {n['skipped']} skipped")
        return 0
    sys.stdout.write(table(cases, suite_seconds, wall, args.slowest, args.title))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
