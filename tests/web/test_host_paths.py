"""A request cannot make the server open files of its host: validating needs the token, and
every path a campaign names (inventory, SSH key, known_hosts, rootfs archive, migration
destination, local mirror) must lie under a directory `serve --allow-path` allowed.

Before: POST /api/campaigns/validate needed no token and ran `ansible-inventory -i PATH`
on any path, as root (an executable inventory is a script Ansible runs), and its 400 told
whether the file existed."""
from __future__ import annotations

import os
import shutil

import pytest

from virtbench.store.models import Run

from .helpers import TOKEN, login, make_client

AUTH = {"Authorization": f"Bearer {TOKEN}"}
BASE = {"name": "x", "platforms": ["native"], "benchmarks": ["sysbench-cpu"]}


def queued(store) -> int:
    with store.session() as s:
        return s.query(Run).filter(Run.status == "queued").count()


@pytest.fixture
def script_inventory(tmp_path):
    """An executable inventory: Ansible's script plugin would run it (it leaves a marker)."""
    marker = tmp_path / "ran"
    inv = tmp_path / "inventory.sh"
    inv.write_text(f"#!/bin/sh\ntouch {marker}\necho '{{\"all\": {{\"hosts\": [\"h\"]}}}}'\n")
    inv.chmod(0o755)
    return inv, marker


def test_validate_needs_the_token_and_runs_no_inventory(client, script_inventory):
    inv, marker = script_inventory
    campaign = {**BASE, "hosts": {"inventory": str(inv), "group": "all"}}
    r = client.post("/api/campaigns/validate", json={"campaign": campaign})
    assert r.status_code == 401 and "token" in r.json()["detail"]
    r = client.post("/api/campaigns/validate", json={"campaign": campaign}, headers=AUTH)  # no --allow-path
    assert r.status_code == 403 and "--allow-path" in r.json()["fix"]
    assert not marker.exists()


def test_refusal_does_not_tell_whether_a_file_exists_or_echo_it(client, tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("root:$6$very-secret-hash:19000:0:99999:7:::\n")
    answers = []
    for path in (secret, tmp_path / "missing"):
        for api in ("/api/campaigns/validate", "/api/runs"):
            r = client.post(api, json={"yaml": f"name: x\nplatforms: [native]\nbenchmarks: [sysbench-cpu]\n"
                                                f"hosts: {{inventory: {path}, group: all}}\n"}, headers=AUTH)
            assert r.status_code == 403 and "very-secret" not in r.text
            answers.append(r.json()["detail"].replace(str(path), "PATH"))
    assert len(set(answers)) == 1
    assert queued(client.app.state.store) == 0


FIELDS = {
    "inventory": {"hosts": {"inventory": "{p}", "group": "all"}},
    "ssh-key": {"hosts": [{"name": "b", "address": "10.0.0.2", "key": "{p}"}]},
    "known-hosts": {"hosts": [{"name": "b", "address": "10.0.0.2", "known_hosts": "{p}"}]},
    "rootfs": {"platforms": [{"name": "l", "type": "lxc", "image": {"rootfs": "{p}"}}]},
    "migration": {"experiment": "migration", "benchmarks": [], "platforms": ["runc"],
                  "migration": {"to": {"path": "{p}"}}},
    "migration-list": {"experiment": "migration", "benchmarks": [], "platforms": ["runc"],
                       "settings": {"to": [{"path": "{p}"}]}},
    "mirror-file-url": {"image": {"mirrors": ["deb [trusted=yes] file://{p} bookworm main"]}},
    "mirror-sources-file": {"image": {"mirrors": ["{p}"]}},
}


def _fill(template, path: str):
    if isinstance(template, dict):
        return {k: _fill(v, path) for k, v in template.items()}
    if isinstance(template, list):
        return [_fill(v, path) for v in template]
    return template.replace("{p}", path) if isinstance(template, str) else template


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize("path", ["/etc/shadow", "relative/file", "~/.ssh/id_ed25519", "ALLOWED/../outside",
                                  "ALLOWED/link-out"])
def test_every_host_path_field_is_refused_outside_the_allowed_directories(filled, tmp_path, field, path):
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    (allowed / "link-out").symlink_to("/etc")
    client = make_client(filled, allowed_paths=(allowed,))
    campaign = {**BASE, **_fill(FIELDS[field], path.replace("ALLOWED", str(allowed)))}
    for api in ("/api/campaigns/validate", "/api/runs"):
        r = client.post(api, json={"campaign": campaign}, headers=AUTH)
        assert r.status_code == 403, (api, r.text)
        detail = r.json()["detail"]
        assert detail.count("\n") == 0 and "not under a directory" in detail and str(allowed) in r.json()["fix"]
    assert queued(filled) == 0


def test_paths_under_an_allowed_directory_are_parsed(filled, tmp_path):
    allowed = tmp_path / "allowed"
    (allowed / "images").mkdir(parents=True)
    client = make_client(filled, allowed_paths=(allowed,))
    campaign = {"name": "x", "experiment": "density", "density": {"workload": {"name": "sysbench-cpu"}, "counts": [1]},
                "platforms": ["native", {"name": "l", "type": "lxc",
                                         "image": {"rootfs": str(allowed / "images" / "missing.tar.xz")}}]}
    r = client.post("/api/campaigns/validate", json={"campaign": campaign}, headers=AUTH)
    assert r.status_code == 400 and "is not a file" in r.json()["detail"]  # looked at: it is allowed
    (allowed / "images" / "rootfs.tar.xz").write_bytes(b"")
    campaign["platforms"][1]["image"]["rootfs"] = str(allowed / "images" / "rootfs.tar.xz")
    r = client.post("/api/campaigns/validate", json={"campaign": campaign}, headers=AUTH)
    assert r.status_code == 200, r.text


def test_the_schedule_form_refuses_host_paths_too(client, script_inventory):
    inv, marker = script_inventory
    csrf = login(client)
    form = {"csrf": csrf, "name": "x", "p0.use": "on", "p0.name": "native", "p0.type": "native", "b0.use": "on",
            "b0.name": "sysbench-cpu", "hosts": f"{{inventory: {inv}, group: all}}"}
    page = client.post("/schedule", data=form)
    assert page.status_code == 403 and "--allow-path" in page.text
    text = f"name: x\nplatforms: [native]\nbenchmarks: [sysbench-cpu]\nhosts: {{inventory: {inv}, group: all}}\n"
    page = client.post("/schedule", data={"csrf": csrf, "mode": "yaml", "campaign_yaml": text})
    assert page.status_code == 403
    assert not marker.exists() and queued(client.app.state.store) == 0


def test_every_path_field_of_the_schema_is_found():
    """A path field added to a model later must be covered: every field typed Path, or
    described as a file or a directory of this host, has its name in PATH_KEYS."""
    import re
    import typing
    from pathlib import Path

    from pydantic import BaseModel

    from virtbench.config import Campaign
    from virtbench.experiments.registry import EXPERIMENTS
    from virtbench.images.guest import PlatformImage
    from virtbench.registry import BENCHMARKS, PLATFORMS, PROBES
    from virtbench.remote.inventory import HostSpec, InventoryRef
    from virtbench.web import hostpaths

    models: list[type[BaseModel]] = [Campaign, HostSpec, InventoryRef, PlatformImage]
    models += [getattr(c, a) for r, a in ((PLATFORMS, "Options"), (BENCHMARKS, "Params"), (PROBES, "Options"))
               for _, c in r.items() if getattr(c, a, None)]
    models += [c.Section for _, c in EXPERIMENTS.items() if c.Section]
    found, seen = set(), set()
    while models:
        m = models.pop()
        if m in seen:
            continue
        seen.add(m)
        for name, f in m.model_fields.items():
            kinds = {a for t in (f.annotation, *typing.get_args(f.annotation)) for a in (t, *typing.get_args(t))}
            models += [k for k in kinds if isinstance(k, type) and issubclass(k, BaseModel)]
            desc = (f.description or "").lower()
            named = re.search(r"\b(key|known_hosts) file\b|\barchive\b|on this host", desc)
            if Path in kinds or (m, name) == (InventoryRef, "inventory") or named:
                found.add(name)
    assert found and found <= hostpaths.PATH_KEYS, found - hostpaths.PATH_KEYS


@pytest.mark.skipif(not shutil.which("ansible-inventory"), reason="ansible-inventory not installed")
def test_an_allowed_inventory_is_read(filled, tmp_path):
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    (allowed / "hosts.yml").write_text("all:\n  hosts:\n    b:\n      ansible_host: 10.0.0.2\n")
    client = make_client(filled, allowed_paths=(allowed,))
    r = client.post("/api/campaigns/validate", headers=AUTH, json={"campaign": {
        **BASE, "hosts": {"inventory": str(allowed / "hosts.yml"), "group": "all"}}})
    assert r.status_code == 200 and r.json()["campaign"]["hosts"][0]["address"] == "10.0.0.2"
    assert os.path.exists(allowed / "hosts.yml")


def test_a_meter_command_is_refused_unless_the_server_allows_it(client, filled, tmp_path):
    """The energy probe's meter is the one program a campaign can name; the web queues it only
    where the server was started with --allow-meter (whose worker then runs it)."""
    marker = tmp_path / "meter-ran"
    campaign = {**BASE, "probes": [{"name": "energy", "meter": ["/bin/sh", "-c", f"touch {marker}; echo 1"]}]}
    for api in ("/api/campaigns/validate", "/api/runs"):
        r = client.post(api, json={"campaign": campaign}, headers=AUTH)
        assert r.status_code == 400 and "needs --allow-meter" in r.json()["detail"], r.text
    assert queued(client.app.state.store) == 0 and not marker.exists()
    allowing = make_client(filled, allow_meter=True)
    assert allowing.post("/api/campaigns/validate", json={"campaign": campaign}, headers=AUTH).status_code == 200
    assert not marker.exists()  # validating runs nothing, even where the meter is allowed


@pytest.mark.parametrize("make", ["/tmp", "/", "world", "group"])
def test_allow_path_refuses_a_directory_others_can_write_or_the_root(tmp_path, make, capsys):
    """Before (#42): `serve --allow-path /tmp` (world-writable: another user swaps a symlink
    between the check and the use) and `--allow-path /` (every file of the host) were accepted
    silently. Now `serve` refuses them in one line, exit 2, before anything starts."""
    from virtbench.cli import main
    from virtbench.web import hostpaths

    target = tmp_path / make
    if make in ("world", "group"):
        target.mkdir()
        target.chmod(0o777 if make == "world" else 0o770)
        os.chown(target, os.geteuid(), 4242)
    else:
        target = make
    with pytest.raises(hostpaths.InputError):
        hostpaths.allowed_dirs([target])
    db = tmp_path / "never.db"
    argv = ["virtbench", "serve", "--no-worker", "--token", TOKEN, "--allow-path", str(target), "--db", f"sqlite:///{db}"]
    with pytest.MonkeyPatch.context() as mp, pytest.raises(SystemExit) as exit_:
        mp.setattr("sys.argv", argv)
        main()
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert exit_.value.code == 2 and len(err) == 1 and err[0].startswith("error: --allow-path") and not db.exists()


def test_allow_path_accepts_a_private_directory(tmp_path):
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    from virtbench.web import hostpaths

    assert hostpaths.allowed_dirs([private]) == (private.resolve(),)
