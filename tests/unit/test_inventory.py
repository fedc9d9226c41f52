"""Hosts of a campaign: inline entries, Ansible inventories (YAML and INI), and bad input."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from virtbench import proc
from virtbench.errors import InputError
from virtbench.remote.inventory import HostSpec, hosts_of_listing, parse_hosts, read_inventory

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


# -- read as data: nothing runs, nothing is quoted (issue 25) ------------------------------------
CAMPAIGN = {"name": "inv", "platforms": ["native"], "benchmarks": ["openssl"]}


def _script(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "inventory.sh"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    return script


def test_an_inventory_script_never_runs_while_a_campaign_is_validated(tmp_path):
    from virtbench.config import parse_campaign

    ran = tmp_path / "ran"
    script = _script(tmp_path, f'touch {ran}\necho \'{{"all": {{"hosts": ["h"]}}}}\'\n')
    with pytest.raises(InputError) as exc:
        parse_campaign({**CAMPAIGN, "hosts": {"inventory": str(script)}}, "c.yaml")
    assert not ran.exists(), "validating the campaign ran the inventory script"
    assert "executable" in exc.value.message and "--dynamic-inventory" in (exc.value.fix or "")
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("make, kind", [
    (lambda d: (d / "inv.yml").write_text("plugin: ansible.builtin.constructed\n") and d / "inv.yml", "plugin"),
    (lambda d: (d / "inv.d").mkdir() or d / "inv.d", "directory"),
    (lambda d: (d / "inv.ini").write_bytes(b"$ANSIBLE_VAULT;1.1;AES256\n6162\n") and d / "inv.ini", "vault"),
])
def test_what_only_ansible_can_read_is_refused_with_the_way_out(tmp_path, make, kind):
    with pytest.raises(InputError) as exc:
        read_inventory(make(tmp_path), "all")
    assert kind in exc.value.message and "--dynamic-inventory" in (exc.value.fix or "")


@needs_ansible
def test_a_dynamic_inventory_asked_for_runs_with_a_private_home_and_an_empty_config(tmp_path):
    seen = tmp_path / "seen"
    script = _script(tmp_path, f'echo "$HOME $(wc -c < "$ANSIBLE_CONFIG")" > {seen}\n'
                               'echo \'{"bench": {"hosts": ["h1"]}, "_meta": {"hostvars": '
                               '{"h1": {"ansible_host": "192.0.2.7"}}}}\'\n')
    hosts = parse_hosts({"inventory": str(script), "group": "bench"}, dynamic=True)
    assert [(h.name, h.address) for h in hosts] == [("h1", "192.0.2.7")]
    home, config_bytes = seen.read_text().split()
    assert home != "/tmp" and home.startswith(tempfile_dir()) and not Path(home).exists()
    assert config_bytes == "0"


def tempfile_dir() -> str:
    import tempfile

    return tempfile.gettempdir() + "/vb-ansible-"


@pytest.mark.parametrize("name, content", [
    ("shadow", "root:$6$S3cr3tSalt$0123456789abcdef:19000:0:99999:7:::\n"),
    ("inv.ini", '[db]\ndb1 ansible_password="S3cr3t-pass ansible_port=22\n'),
    ("inv.yml", "all:\n  hosts:\n    db1:\n      ansible_host: 'S3cr3t host'\n      ansible_password: S3cr3t\n"),
    ("inv.yml", "all:\n  hosts: [S3cr3t\n"),
    ("key", "-----BEGIN OPENSSH PRIVATE KEY-----\nS3cr3tb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n"),
])
def test_errors_never_quote_the_file(tmp_path, name, content):
    path = tmp_path / name
    path.write_text(content)
    for group in ("all", "bench"):
        with pytest.raises(InputError) as exc:
            read_inventory(path, group)
        assert "S3cr3t" not in str(exc.value), str(exc.value)


def test_missing_and_unreadable_inventories_read_alike_and_nothing_blocks(tmp_path):
    import os

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    messages = set()
    for path in (tmp_path / "missing.yml", fifo, Path("/dev/zero")):
        with pytest.raises(InputError) as exc:
            read_inventory(path, "all")
        messages.add(exc.value.message.replace(str(path), "PATH"))
    assert len(messages) == 1 and "could not read it as a YAML or INI inventory" in messages.pop()


def test_an_inventory_address_that_is_an_ssh_option_is_refused(tmp_path):
    inv = tmp_path / "inv.ini"
    inv.write_text("[g]\nh1 ansible_host=-oProxyJump=evil\nh2 ansible_host=-Jevil.example\n")
    with pytest.raises(InputError) as exc:
        read_inventory(inv, "g")
    assert "host 'h1': address (ansible_host)" in exc.value.message and "-J" not in exc.value.message


def test_host_patterns_expand_as_ansible_expands_them():
    from virtbench.remote.inventory_patterns import expand_pattern

    assert expand_pattern("web[01:03].lab") == (["web01.lab", "web02.lab", "web03.lab"], None)
    assert expand_pattern("n[a:c]-[1:2]:2200") == (["na-1", "na-2", "nb-1", "nb-2", "nc-1", "nc-2"], 2200)
    assert expand_pattern("10.0.0.[1:7:3]") == (["10.0.0.1", "10.0.0.4", "10.0.0.7"], None)
    assert expand_pattern("[2001:db8::1]:22") == (["2001:db8::1"], 22)
    assert expand_pattern("fe80::1") == (["fe80::1"], None)
    with pytest.raises(ValueError, match="more than 4096"):
        expand_pattern("h[0:99999999999999]-[0:99999999999999]")  # counted, never built
    with pytest.raises(ValueError, match="different lengths"):
        expand_pattern("h[01:100]")


def _ansible_listing(path: Path, home: Path) -> dict:
    cfg = home / "ansible.cfg"
    cfg.write_text("")
    res = proc.run(["ansible-inventory", "-i", str(path), "--list"], timeout=120,
                   env={"PATH": "/usr/bin:/bin", "HOME": str(home), "ANSIBLE_CONFIG": str(cfg)})
    return json.loads(res.stdout)


@needs_ansible
@pytest.mark.parametrize("name", ["lab/hosts.ini", "lab/hosts.yml", "bench.ini", "bench.yml"])
def test_the_data_reader_agrees_with_ansible_inventory(tmp_path, name):
    from virtbench.remote.inventory_files import read_listing

    ours, theirs = read_listing(DATA / name), _ansible_listing(DATA / name, tmp_path)
    groups = [g for g in theirs if g != "_meta" and hosts_of_listing_or_none(theirs, g)]
    assert groups and sorted(groups) == sorted(g for g in ours if g != "_meta" and hosts_of_listing_or_none(ours, g))
    for g in groups:
        assert hosts_of_listing(ours, g) == hosts_of_listing(theirs, g), g


def hosts_of_listing_or_none(listing: dict, group: str) -> list[HostSpec] | None:
    try:
        return hosts_of_listing(listing, group)
    except InputError:
        return None


def test_the_lab_inventory_maps_precedence_ranges_and_ports():
    hosts = {h.name: h for h in read_inventory(DATA / "lab" / "hosts.ini", "site")}
    assert list(hosts) == ["db1", "db2", "web01.lab", "web02.lab", "web03.lab", "weba.lab", "webb.lab",
                           "10.0.0.1", "10.0.0.4", "10.0.0.7"]
    assert (hosts["db1"].user, hosts["db1"].port) == ("root", 2022)  # host_vars/ beats the host line
    assert (hosts["db2"].user, hosts["db2"].port, hosts["db2"].address) == ("dbadmin", 2223, "198.51.100.21")
    assert (hosts["web01.lab"].user, hosts["web01.lab"].port) == ("deploy", 2200)
    assert hosts["webb.lab"].port == 2201 and hosts["webb.lab"].work_dir == "/srv/backend"
    assert hosts["10.0.0.4"].user == "ops" and hosts["10.0.0.4"].key == "~/.ssh/lab_ed25519"


def test_alias_bombs_and_loops_are_refused_not_walked(tmp_path):
    from virtbench.remote.inventory_files import Unreadable, read_listing

    lines = ["l0: &l0 {hosts: {h1: null}}"]
    lines += [f"l{n}: &l{n} {{children: {{g{n}a: *l{n - 1}, g{n}b: *l{n - 1}}}}}" for n in range(1, 45)]
    bomb = tmp_path / "bomb.yml"
    bomb.write_text("\n".join(lines) + "\n")  # 2**44 group entries if walked
    with pytest.raises(Unreadable, match="more than 100000 group and host entries"):
        read_listing(bomb)
    loop = tmp_path / "loop.ini"
    loop.write_text("[a:children]\nb\n[b:children]\na\n[c]\nh\n")
    with pytest.raises(Unreadable, match="its own ancestor"):
        read_listing(loop)
