"""Platforms declare what they can do (issue #26): the quick comparison, stacking in a VM,
migration and campaign validation ask the class, not its type name, so a new platform is its
module and its entry point. A throwaway platform registered here, with no other file changed,
is treated as it declares by each of those call sites, and as a plain container when it
declares nothing."""
from __future__ import annotations

from pathlib import Path

import pytest

from virtbench.config import parse_campaign
from virtbench.errors import InputError
from virtbench.experiments.benchmarks.quick import quick_platforms
from virtbench.experiments.migration import live
from virtbench.images.image import Image
from virtbench.platforms.base import Availability, Instance, Paths, Platform
from virtbench.platforms.qemu import stack as qemu_stack
from virtbench.registry import PLATFORMS

PATHS = Paths(state=Path("/nonexistent/state"), runtime=Path("/nonexistent/run"))


class Plain(Platform):
    """A platform that declares no capability: what every subclass gets by default."""

    type = "plain"
    description = "throwaway test platform"

    @classmethod
    def availability(cls, paths: Paths) -> Availability:
        return Availability(False, "a test platform", None)

    def versions(self) -> dict[str, str]:
        return {}

    def create(self, image: Image, name: str, run_id: str) -> Instance:
        raise NotImplementedError

    def start(self, instance: Instance) -> None:
        raise NotImplementedError

    def exec_argv(self, instance: Instance, argv: list[str]) -> list[str]:
        return argv

    def stop(self, instance: Instance) -> None:
        raise NotImplementedError

    def remove(self, instance: Instance) -> None:
        raise NotImplementedError

    @classmethod
    def cleanup(cls, paths: Paths, run_id: str | None = None) -> list[str]:
        return []


class Capable(Plain):
    """Declares every capability, each of which some call site outside platforms/ asks for."""

    type = "capable"
    quick_rank = 99
    holds_inner = True
    runs_inside = True
    live_migration = "qmp"
    migrates_to_host = True
    packages = ("capable-engine",)


@pytest.fixture(autouse=True)
def registered(monkeypatch):
    """Both registered as a third-party entry point would be, for this test only."""
    for cls in (Plain, Capable):
        monkeypatch.setitem(PLATFORMS._load(), cls.type, cls)


def test_the_quick_comparison_tries_a_platform_that_declares_its_place():
    tried = quick_platforms()
    assert tried[-1] == "capable" and "plain" not in tried
    assert tried[:7] == ["native", "docker", "podman", "lxc", "containerd", "runc", "crun"]  # as before


def test_a_vm_hosts_a_platform_that_declares_it_runs_inside():
    outer = "vm"
    qemu_stack.check_inner(outer, Capable("c", Capable.Options(), PATHS))  # no InputError
    assert "capable" in qemu_stack.supported() and "plain" not in qemu_stack.supported()
    with pytest.raises(InputError, match=r"vm \(qemu\) cannot host p \(plain\): inside a VM virtbench runs "):
        qemu_stack.check_inner(outer, Plain("p", Plain.Options(), PATHS))


def test_a_campaign_stacks_a_container_inside_a_platform_that_declares_it_holds_inner():
    def stacked(outer: str):
        return parse_campaign({"name": "s", "benchmarks": ["openssl"], "platforms": [
            "native", {"name": "box", "type": outer}, {"name": "d", "type": "docker", "inside": "box"}]})

    assert stacked("capable").platform("d").inside == "box"
    with pytest.raises(InputError, match="'box' is a plain platform; only a VM can host another"):
        stacked("plain")


def test_live_migration_goes_the_way_the_platform_declares():
    ok, why = live.supports_live(Capable("c", Capable.Options(), PATHS))
    assert ok and "QMP" in why
    ok, why = live.supports_live(Plain("p", Plain.Options(), PATHS))
    assert not ok and why.startswith("plain has no live migration in virtbench") and "CRIU on lxc" in why


def test_only_a_platform_that_declares_it_moves_to_another_host():
    def to_host(ptype: str):
        return parse_campaign({"name": "m", "experiment": "migration", "platforms": [ptype],
                               "hosts": ["local", {"name": "b", "address": "10.231.7.2"}],
                               "migration": {"to": {"host": "b"}}})

    assert [p.type for p in to_host("capable").platforms] == ["capable"]
    with pytest.raises(InputError) as err:
        to_host("plain")
    assert "'plain' (plain) cannot move to another host; capable, lxc platforms can" in err.value.message
