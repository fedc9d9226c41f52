"""Hosts of a campaign: inline entries, Ansible inventories (YAML and INI), and bad input."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from virtbench import proc
from virtbench.errors import InputError
from virtbench.hosts.inventory import HostSpec, hosts_of_listing, parse_hosts, read_inventory

DATA = Path(__file__).parent.parent / "data" / "inventory"
needs_ansible = pytest.mark.skipif(proc.which("ansible-inventory") is None,
                                   reason="ansible-inventory not installed (tools/install-debian-deps installs it)")


def test_inline_hosts_names_and_mappings():
    hosts = parse_hosts(["local", {"name": "pi5-a", "address": "192.0.2.10", "key": "~/.ssh/id_ed25519"},
                         {"name": "pi5-b", "address": "192.0.2.11", "port": 2222, "work_dir": "/srv/virtbench"}])
    assert [h.name for h in hosts] == ["local", "pi5-a", "pi5-b"]
    assert hosts[0].is_local and not hosts[1].is_local
    assert hosts[1].user == "root" and hosts[1].port == 22 and hosts[1].work_dir == "/var/lib/virtbench-remote"
    assert hosts[2].port == 2222 and hosts[2].work_dir == "/srv/virtbench"


def test_a_bare_name_is_its_own_address():
    assert parse_hosts(["bench1"])[0].address == "bench1"


@pytest.mark.parametrize("value, message", [
    ([], "give a list of hosts"),
    (["a", "a"], "'a' is listed twice"),
    ([{"name": "a", "adress": "x"}], "hosts[0].adress: unknown key"),
    ([{"name": "a", "port": 70000}], "hosts[0] (a).port"),
    ([{"name": "a", "work_dir": "relative/dir"}], "give an absolute path"),
    ([{"name": "a", "address": "x; rm -rf /"}], "not a host name or IP address"),
    ([{"name": "a b"}], "hosts[0] (a b).name"),
    ({"inventory": "x.yml", "grup": "bench"}, "hosts.grup"),
    ([3], "give a host name or a mapping"),
])
def test_bad_inline_hosts_name_the_entry(value, message):
    with pytest.raises(ValueError, match=None) as exc:
        parse_hosts(value)
    assert message in str(exc.value)


def test_listing_maps_ansible_variables_and_child_groups():
    listing = json.loads((DATA / "bench.yml.list.json").read_text())
    hosts = hosts_of_listing(listing, "bench")
    assert [h.name for h in hosts] == ["pi5-a", "pi5-b", "pi4"]
    a, b, c = hosts
    assert (a.address, a.user, a.key) == ("192.0.2.10", "root", "~/.ssh/id_ed25519")
    assert (b.port, b.work_dir) == (2222, "/srv/virtbench")
    assert c.address == "192.0.2.12"
    assert hosts_of_listing(listing, "other") == [HostSpec(name="local")]


def test_listing_unknown_group_names_the_known_ones():
    listing = json.loads((DATA / "bench.yml.list.json").read_text())
    with pytest.raises(InputError) as exc:
        hosts_of_listing(listing, "bnech", "inv.yml")
    assert "no group 'bnech'" in exc.value.message and "bench" in (exc.value.fix or "")


def test_listing_bad_host_variable_names_the_host():
    listing = {"_meta": {"hostvars": {"x": {"ansible_port": "ssh"}}}, "g": {"hosts": ["x"]}}
    with pytest.raises(InputError) as exc:
        hosts_of_listing(listing, "g")
    assert "host 'x': port" in exc.value.message


@needs_ansible
@pytest.mark.parametrize("name", ["bench.yml", "bench.ini"])
def test_inventory_files_yaml_and_ini_read_alike(name):
    hosts = read_inventory(DATA / name, "bench")
    assert [(h.name, h.address, h.port) for h in hosts] == [
        ("pi5-a", "192.0.2.10", 22), ("pi5-b", "192.0.2.11", 2222), ("pi4", "192.0.2.12", 22)]


@needs_ansible
def test_inventory_nested_group_through_children():
    assert [h.name for h in read_inventory(DATA / "bench.ini", "lab")] == ["pi5-a", "pi5-b", "pi4"]


def test_missing_inventory_file():
    with pytest.raises(InputError, match="not found"):
        read_inventory(Path("/nonexistent/inv.yml"), "bench")


@needs_ansible
def test_broken_inventory_file(tmp_path):
    bad = tmp_path / "inv.yml"
    bad.write_text("all:\n  hosts: [unclosed\n")
    with pytest.raises(InputError) as exc:
        read_inventory(bad, "all")
    assert "could not read it" in exc.value.message
