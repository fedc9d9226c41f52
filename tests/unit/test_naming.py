"""Instance names: unique and valid for every runtime whatever the platform is called.

Before the hash suffix, names were cut at 63 characters: platform names of 36+ characters
lost their round suffix (two rounds, one name) and with 33+ the `-peer` name passed 63.
"""
from __future__ import annotations

import itertools
import re

import pytest

from virtbench.config import NAME_RE as PLATFORM_NAME_RE
from virtbench.platforms import mounts, naming
from virtbench.runner.execute import new_run_id

# Each runtime's own rule for a container/instance name.
RULES = {
    "docker/podman": re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.-]+"),
    "containerd": re.compile(r"[A-Za-z0-9]+(?:[._-][A-Za-z0-9]+)*"),  # identifiers.Validate
    "runc": re.compile(r"[\w+.-]+"),
    "virtbench": mounts.NAME_RE,
}
MAX_HOSTNAME = 63  # UTS name of OCI/LXC containers, the VM's vb.hostname (RFC 1123 label)
SUFFIXES = ("", "-peer", "-host", "-vm", "-i2", "-i256")

LONG = [
    "docker-with-a-very-long-descriptive-name-x",  # 42
    "docker-with-a-very-long-descriptive-name-y",  # same 40-character head
    "a" * 63,
    "a" * 62 + "b",
    "p" * 33,
    "p" * 36,
]
UNUSUAL = ["a", "9", "A.b", "x_", "x.", "x--y", "x-y", "x..y", "x_y", "x.y", "Docker", "docker", "a._-b"]


def _names(platforms: list[str], run_id: str, rounds: int = 12) -> list[str]:
    return [naming.unit_name(run_id, p, r) for p in platforms for r in range(rounds)]


@pytest.mark.parametrize("run_id", ["20261124-210000-abcd", "new", "x"])
def test_names_are_unique_and_valid_for_every_runtime(run_id: str) -> None:
    """A fixed id, one made now (inside the test: xdist workers must collect the same names), one short."""
    run_id = new_run_id() if run_id == "new" else run_id
    platforms = LONG + UNUSUAL
    assert all(re.fullmatch(PLATFORM_NAME_RE, p) for p in platforms)  # all valid campaign names
    names = _names(platforms, run_id)
    every = [n + s for n in names for s in SUFFIXES]
    assert len(set(every)) == len(every), "two instances share a name"
    for name, (rule, pattern) in itertools.product(every, RULES.items()):
        assert pattern.fullmatch(name), f"{name!r} breaks the {rule} rule"
        assert len(name) <= MAX_HOSTNAME, f"{name!r} is longer than a hostname"
    assert [naming.derived(n, s) for n in names for s in SUFFIXES] == every


def test_short_valid_names_stay_readable() -> None:
    assert naming.unit_name("20261124-210000-abcd", "docker", 3) == "vb-20261124-210000-abcd-docker-r3"


def test_long_names_keep_round_and_a_hash() -> None:
    a = naming.unit_name("20261124-210000-abcd", LONG[0], 10)
    b = naming.unit_name("20261124-210000-abcd", LONG[1], 10)
    assert a != b and a.endswith("-r10") and b.endswith("-r10")
    assert a.startswith("vb-20261124-210000-abcd-docker-with")
    # stable: a resumed run and cleanup compute the same name
    assert a == naming.unit_name("20261124-210000-abcd", LONG[0], 10)


def test_a_suffix_that_would_break_the_rules_is_refused() -> None:
    name = naming.unit_name("20261124-210000-abcd", "p" * 40, 1)
    with pytest.raises(ValueError):
        naming.derived(name, "-toolongsuffix")


def test_a_group_member_name_fits_and_stays_unique() -> None:
    """naming.fit: short names as they are; long heads hashed, tails kept, room for a suffix."""
    assert naming.fit("vb-20261124-210000-abcd-docker-p1", "-17") == "vb-20261124-210000-abcd-docker-p1-17"
    heads = [f"vb-20261124-210000-abcd-{p}-p1" for p in LONG + UNUSUAL]
    names = [naming.fit(h, f"-{k}") for h in heads for k in (1, 10, 100, 256)]
    assert len(set(names)) == len(names)
    assert all(naming.derived(n, "-peer") for n in names)  # valid, with room for a companion
    assert naming.fit(heads[0], "-10").endswith("-10") and naming.fit(heads[0], "-10").startswith("vb-20261124")
    with pytest.raises(ValueError):
        naming.fit("vb-x", "-" + "t" * 60)
