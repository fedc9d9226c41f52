"""Every parser yields exactly the metrics its benchmark declares (#10 item 8).

Checked on the real outputs recorded for every Debian release (tests/data/<tool>/
`<release>[-<arch>]_<benchmark>_<param><value>...txt`, see tests/data/README.md): the benchmark is
built with the parameters the file name records, its output parsed, and the keys compared
with `metrics()` of those parameters. A parser that adds, drops or renames a key fails here,
whatever its own test checks.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from virtbench.benchmarks.base import PairBenchmark
from virtbench.registry import BENCHMARKS

DATA = Path(__file__).resolve().parent.parent / "data"
RELEASES = ("bullseye", "bookworm", "trixie", "upstream")
"""Debian releases, and `upstream` for tools built from their upstream release (`upstream-<tool><version>_`)."""


def _params_from(rest: str, fields: list[str]) -> dict[str, str | None]:
    """'time1_file_total_size64M' -> {'time': '1', 'file_total_size': '64M'} for known fields ('None' -> None)."""
    names = "|".join(sorted((re.escape(f) for f in fields), key=len, reverse=True))
    out = {}
    for m in re.finditer(rf"(?:^|_)({names})([^_]+(?:_(?!(?:{names}))[^_]+)*)", rest):
        out[m.group(1)] = None if m.group(2) == "None" else m.group(2)
    return out


def _recorded() -> list[tuple[str, Path, dict[str, str | None]]]:
    cases = []
    for name, cls in BENCHMARKS.items():
        stem = name.replace("-", "_")
        for path in sorted(DATA.glob(f"*/*_{stem}*.txt")):
            release, _, rest = path.name.removesuffix(".txt").partition("_")
            # <release>_ or <release>-<arch>[-<variant>]_ (ARM builds recorded under qemu-user or in a guest)
            if release.split("-")[0] not in RELEASES or path.name.endswith(".stderr.txt") or not rest.startswith(stem):
                continue
            rest = rest[len(stem):].lstrip("_")
            if rest and not any(rest.startswith(f) for f in cls.Params.model_fields) and rest != "defaults":
                continue  # another benchmark whose name starts like this one (sysbench_cpu vs sysbench_cpu_x)
            cases.append((name, path, _params_from(rest, list(cls.Params.model_fields))))
    return cases


CASES = _recorded()


def test_recorded_outputs_exist_for_most_benchmarks():
    assert len({name for name, _, _ in CASES}) >= 12, sorted({name for name, _, _ in CASES})


@pytest.mark.parametrize("name,path,params", CASES, ids=[p.name for _, p, _ in CASES])
def test_parser_keys_are_exactly_the_declared_metrics(name, path, params):
    cls = BENCHMARKS.get(name)
    bench = cls(cls.Params(**params))
    stderr_file = path.with_name(path.name.removesuffix(".txt") + ".stderr.txt")
    stderr = stderr_file.read_text() if stderr_file.exists() else ""
    values = bench.parse(path.read_text(), stderr, source=path.name)
    declared = [m.name for m in bench.metrics()]
    assert sorted(values) == sorted(declared), (
        f"{name}{params}: parser yields {sorted(set(values) - set(declared))} undeclared, "
        f"misses {sorted(set(declared) - set(values))}")
    assert not isinstance(bench, PairBenchmark) or bench.port() is None or bench.port() > 0
