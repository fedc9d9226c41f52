"""Hosts a campaign runs on: inline in the campaign, or read from an Ansible inventory.

Users already keep their machines in Ansible inventories (YAML or INI, with groups, ranges,
group_vars and plugins). Rather than re-implement that format, an inventory is read with
`ansible-inventory --list`, Ansible's own reader, so a file means exactly what it means to
Ansible; it runs as a subprocess (argv list) and only when a campaign names an inventory, so
virtbench neither imports nor bundles Ansible (GPL). Missing tool, file or group: one line
naming the fix, exit 2, before anything starts.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .. import proc
from ..errors import InputError

LOCAL = "local"
"""The inventory name of the machine virtbench is started on (no SSH)."""
DEFAULT_WORK_DIR = "/var/lib/virtbench-remote"
HOST_NAME_RE = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$"

# Ansible host variables and the HostSpec field each one fills.
ANSIBLE_VARS = {
    "ansible_host": "address", "ansible_ssh_host": "address",
    "ansible_port": "port", "ansible_ssh_port": "port",
    "ansible_user": "user", "ansible_ssh_user": "user",
    "ansible_ssh_private_key_file": "key", "ansible_private_key_file": "key",
    "virtbench_work_dir": "work_dir", "virtbench_known_hosts": "known_hosts",
}


class HostSpec(BaseModel):
    """One machine of a campaign: its inventory name and how to reach it over SSH.

    `local` is this machine (no SSH). key and known_hosts default to OpenSSH's own
    (~/.ssh/id_*, ~/.ssh/known_hosts): host keys are always verified, never added silently."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(pattern=HOST_NAME_RE, description="inventory name, shown on every result")
    address: str = Field("", description="DNS name or IP address (default: the name)")
    port: int = Field(22, ge=1, le=65535)
    user: str = Field("root", pattern=r"^[a-z_][a-z0-9_.-]{0,31}$")
    key: str | None = Field(None, description="private key file (default: OpenSSH's own)")
    work_dir: str = Field(DEFAULT_WORK_DIR, description="where virtbench keeps its files on that host")
    known_hosts: str | None = Field(None, description="known_hosts file (default: ~/.ssh/known_hosts)")

    @field_validator("address")
    @classmethod
    def _address(cls, v: str) -> str:
        if v and not re.fullmatch(r"[A-Za-z0-9_.:%\[\]-]{1,253}", v):
            raise ValueError(f"{v!r} is not a host name or IP address")
        return v

    @field_validator("work_dir")
    @classmethod
    def _work_dir(cls, v: str) -> str:
        if not v.startswith("/") or ".." in Path(v).parts or len(v) > 200:
            raise ValueError(f"{v!r}: give an absolute path without '..'")
        return v.rstrip("/") or "/"

    @model_validator(mode="before")
    @classmethod
    def _default_address(cls, data: Any) -> Any:
        if isinstance(data, dict) and not data.get("address") and isinstance(data.get("name"), str):
            data = {**data, "address": data["name"]}
        return data

    @property
    def is_local(self) -> bool:
        return self.name == LOCAL


class InventoryRef(BaseModel):
    """`hosts: {inventory: PATH, group: NAME}`."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    inventory: str
    group: str = "all"


def parse_hosts(value: Any) -> list[HostSpec]:
    """The campaign's `hosts:` value -> HostSpecs, each named once; ValueError (one line) if bad."""
    if isinstance(value, dict):
        try:
            ref = InventoryRef(**value)
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(p) for p in err["loc"])
            raise ValueError(f"hosts.{loc}: {err['msg']} (give {{inventory: PATH, group: NAME}})") from None
        return _unique(read_inventory(Path(ref.inventory).expanduser(), ref.group))
    if not isinstance(value, list) or not value:
        raise ValueError("hosts: give a list of hosts (names or mappings with name and address) "
                         "or {inventory: PATH, group: NAME}")
    return _unique([_one(i, v) for i, v in enumerate(value)])


def _one(index: int, item: Any) -> HostSpec:
    where = f"hosts[{index}]"
    if isinstance(item, HostSpec):
        return item
    if isinstance(item, str):
        item = {"name": item}
    if not isinstance(item, dict):
        raise ValueError(f"{where}: give a host name or a mapping with name and address")
    try:
        return HostSpec(**item)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        if err["type"] == "extra_forbidden":
            known = ", ".join(HostSpec.model_fields)
            raise ValueError(f"{where}.{loc}: unknown key (known keys: {known})") from None
        name = item.get("name", "?")
        raise ValueError(f"{where} ({name}).{loc}: {err['msg']}") from None


def _unique(hosts: list[HostSpec]) -> list[HostSpec]:
    names = [h.name for h in hosts]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"hosts: {dup[0]!r} is listed twice; give each host a unique name")
    return hosts


def read_inventory(path: Path, group: str) -> list[HostSpec]:
    """The hosts of `group` (and its child groups) in an Ansible inventory, in file order."""
    if not path.is_file():
        raise InputError(f"inventory {str(path)!r} not found", "give the path of an Ansible inventory (YAML or INI)")
    tool = proc.which("ansible-inventory")
    if tool is None:
        raise InputError(f"reading the inventory {path} needs `ansible-inventory`",
                         "apt-get install ansible-core (or pip install ansible-core), or list the hosts inline")
    res = proc.run([tool, "-i", str(path), "--list"], timeout=120, check=False,
                   env={"PATH": "/usr/local/bin:/usr/bin:/bin", "ANSIBLE_INVENTORY_UNPARSED_FAILED": "True",
                        "ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED": "True", "ANSIBLE_NOCOLOR": "1",
                        "ANSIBLE_LOCAL_TEMP": "/tmp", "HOME": "/tmp"})
    if not res.ok:
        detail = " ".join((res.stderr or res.stdout).split())[-240:]
        raise InputError(f"inventory {path}: ansible-inventory could not read it: {detail}",
                         "fix the inventory (check it with `ansible-inventory -i FILE --list`)")
    return hosts_of_listing(json.loads(res.stdout), group, str(path))


def hosts_of_listing(listing: dict[str, Any], group: str, source: str = "<inventory>") -> list[HostSpec]:
    """`ansible-inventory --list` JSON -> the group's hosts with their variables mapped."""
    groups = {k: v for k, v in listing.items() if k != "_meta" and isinstance(v, dict)}
    if group not in groups:
        known = ", ".join(sorted(g for g in groups if g != "ungrouped")) or "none"
        raise InputError(f"inventory {source}: no group {group!r}", f"use one of: {known}")
    names: list[str] = []

    def collect(g: str, seen: set[str]) -> None:
        if g in seen:
            return
        seen.add(g)
        for h in groups.get(g, {}).get("hosts", []):
            if h not in names:
                names.append(h)
        for child in groups.get(g, {}).get("children", []):
            collect(child, seen)

    collect(group, set())
    if not names:
        raise InputError(f"inventory {source}: group {group!r} has no hosts", "add hosts to it or name another group")
    hostvars = listing.get("_meta", {}).get("hostvars", {})
    hosts = []
    for name in names:
        v = hostvars.get(name, {})
        fields: dict[str, Any] = {"name": name}
        if v.get("ansible_connection") == "local" or name in ("localhost", LOCAL):
            fields = {"name": LOCAL}
        else:
            for var, field in ANSIBLE_VARS.items():
                if var in v and field not in fields:
                    fields[field] = v[var]
        try:
            hosts.append(HostSpec(**fields))
        except ValidationError as exc:
            err = exc.errors()[0]
            raise InputError(f"inventory {source}: host {name!r}: {'.'.join(map(str, err['loc']))}: {err['msg']}",
                             "fix that host's variables in the inventory") from None
    return hosts
