"""The density, migration and line kinds name their instances through platforms/naming.py.

They cut names by hand at 63 characters: two platforms whose names differ only past the cut,
or instance 1 and instance 10 of one step, got one name (the second create fails or, worse,
finds the first's leftovers), and a copy's suffix (`-in`, `-m`) was cut off or pushed the
name past 63.
"""
from __future__ import annotations

import re

import pytest

from virtbench.experiments.density.fleet import Fleet
from virtbench.experiments.density.ramp import fleet_prefix
from virtbench.experiments.line import topology
from virtbench.experiments.migration import remote
from virtbench.experiments.migration.kind import instance_names
from virtbench.platforms import naming

RUN = "20261124-210000-abcd"
# Two valid platform names (63 characters at most) that differ only past the 63rd character
# of an instance name: "vb-" + run id + "-" is 24 characters, so past the platform's 39th.
A, B = "p" * 50 + "a", "p" * 50 + "b"
HOSTNAME = re.compile(r"[A-Za-z0-9]+(?:[._-][A-Za-z0-9]+)*")


def _density(platform: str, probe: int = 1, count: int = 256) -> list[str]:
    fleet = Fleet(None, None, RUN, fleet_prefix(RUN, platform, probe), None)  # type: ignore[arg-type]
    return [fleet.name(n) for n in range(1, count + 1)]


def _check(names: list[str]) -> None:
    assert len(set(names)) == len(names), "two instances share a name"
    for name in names:
        assert len(name) <= naming.MAX_NAME - naming.SUFFIX_ROOM and HOSTNAME.fullmatch(name), name


def test_density_names_differing_past_63_characters_stay_apart() -> None:
    assert len(f"vb-{RUN}-{A}-p1-1") > 63 and f"vb-{RUN}-{A}"[:63] == f"vb-{RUN}-{B}"[:63]
    _check(_density(A) + _density(B) + _density(A, probe=2))
    assert _density("docker", count=2) == [f"vb-{RUN}-docker-p1-1", f"vb-{RUN}-docker-p1-2"]


@pytest.mark.parametrize("dest", [None, "d" * 31])
def test_migration_names_differing_past_63_characters_stay_apart(dest: str | None) -> None:
    names = [n for p in (A, B) for r in (0, 1) for c in (1, 10, 64) for n in instance_names(RUN, p, r, dest, c)]
    _check(names)
    copies = [naming.derived(n, "-in") for n in names] + [remote.dest_name(n) for n in names]
    assert len(set(copies)) == len(copies) and all(len(c) <= naming.MAX_NAME for c in copies)
    assert instance_names(RUN, "lxc", 0, None, 2) == [f"vb-{RUN}-lxc-r0-n2-0", f"vb-{RUN}-lxc-r0-n2-1"]


def test_line_names_differing_past_63_characters_stay_apart() -> None:
    run = "r" * 50  # the cut took the hop number of every instance on the line
    line = topology.Line(tag="abc123", run_id=run, length=12, platform="lxc", namespaces=[])
    _check(topology.instance_names(line))
    short = topology.Line(tag="abc123", run_id=RUN, length=2, platform="lxc", namespaces=[])
    assert topology.instance_names(short) == [f"vb-{RUN}-vblabc123-1", f"vb-{RUN}-vblabc123-2"]
