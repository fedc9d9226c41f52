"""Hosts a campaign runs on: inline in the campaign, or read from an Ansible inventory.

Users already keep their machines in Ansible inventories (YAML or INI, with groups, ranges,
group_vars). Validating a campaign (CLI or web) must run nothing, so an inventory is read as
data by `inventory_files` (Ansible's YAML and INI formats, its precedence of variables);
a dynamic inventory (a script, a plugin configuration, a directory) is refused unless the CLI
user asks for it (`run --dynamic-inventory`), and then only `ansible-inventory` runs it, with
a private HOME and an empty configuration. Missing tool, file or group: one line naming the
fix, exit 2, before anything starts; no message quotes the file or a variable's value.
"""
from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .. import proc
from ..errors import InputError
from . import inventory_files

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

MAPPED_VARS = frozenset({*ANSIBLE_VARS, "ansible_connection"})
"""The only variables read from an inventory (others, passwords included, are never kept)."""


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
        # never an ssh option (-oProxyCommand=..., -J...): the address is a command-line word
        if v and not re.fullmatch(r"[A-Za-z0-9_.:%\[\]][A-Za-z0-9_.:%\[\]-]{0,252}", v):
            raise ValueError("not a host name or IP address (letters, digits and . - _ : [ ] %, "
                             "not starting with -)")
        return v

    @field_validator("work_dir")
    @classmethod
    def _work_dir(cls, v: str) -> str:
        # reaches scp's remote path (which an old scp hands to the remote shell): no metacharacters
        if not re.fullmatch(r"/[A-Za-z0-9_./+,@=-]{0,199}", v) or ".." in Path(v).parts:
            raise ValueError("give an absolute path without '..', spaces or shell metacharacters")
        return v.rstrip("/") or "/"

    @field_validator("key", "known_hosts")
    @classmethod
    def _local_file(cls, v: str | None) -> str | None:
        # ssh splits an -o value at blanks and quotes: one plain path, never a second option
        if v is not None and (not v or v.startswith("-") or re.search(r"[\s\"'\\\x00-\x1f\x7f]", v)):
            raise ValueError("give a file path without spaces, quotes or control characters, "
                             "not starting with -")
        return v

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


def parse_hosts(value: Any, *, dynamic: bool = False) -> list[HostSpec]:
    """The campaign's `hosts:` value -> HostSpecs, each named once; ValueError (one line) if bad.

    dynamic: the CLI user asked that an inventory script or plugin may run (never on the web)."""
    if isinstance(value, dict):
        try:
            ref = InventoryRef(**value)
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(p) for p in err["loc"])
            raise ValueError(f"hosts.{loc}: {err['msg']} (give {{inventory: PATH, group: NAME}})") from None
        return _unique(read_inventory(Path(ref.inventory).expanduser(), ref.group, dynamic=dynamic))
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


DYNAMIC_FIX = ("export it once as data: ansible-inventory -i PATH --list --yaml > hosts.yml, or let "
               "ansible-inventory run it: virtbench run --dynamic-inventory CAMPAIGN (CLI only)")


def read_inventory(path: Path, group: str, *, dynamic: bool = False) -> list[HostSpec]:
    """The hosts of `group` (and its child groups) in an Ansible inventory, in file order.

    Read as YAML or INI data; with `dynamic`, what only Ansible can read (a script, a plugin
    configuration, a directory) goes to ansible-inventory instead of being refused."""
    unreadable = (f"inventory {str(path)!r}: could not read it as a YAML or INI inventory",
                  "give the path of an Ansible inventory file (YAML or INI) that root can read; "
                  "check it with `ansible-inventory -i FILE --list`")
    try:
        listing = inventory_files.read_listing(path, keep=MAPPED_VARS)
    except inventory_files.NotData as exc:
        if not dynamic:
            raise InputError(f"inventory {str(path)!r} is {exc.kind}: virtbench reads inventories as "
                             "YAML or INI data and runs nothing while reading a campaign", DYNAMIC_FIX) from None
        listing = _ansible_listing(path)
    except inventory_files.Unreadable as exc:
        why = f" ({exc.detail})" if exc.detail else " (not found, not readable, or not an inventory)"
        raise InputError(unreadable[0] + why, unreadable[1]) from None
    return hosts_of_listing(listing, group, str(path))


def _ansible_listing(path: Path) -> dict[str, Any]:
    """`ansible-inventory --list`, asked for on the command line: a private HOME and an empty
    configuration, so no ansible.cfg of another user (a world-writable /tmp, the current
    directory) configures what runs as root."""
    tool = proc.which("ansible-inventory")
    if tool is None:
        raise InputError(f"reading the dynamic inventory {path} needs `ansible-inventory`",
                         "apt-get install ansible-core (or pip install ansible-core), or list the hosts inline")
    with tempfile.TemporaryDirectory(prefix="vb-ansible-") as home:
        config = Path(home) / "ansible.cfg"
        config.write_text("")
        res = proc.run([tool, "-i", str(path.resolve()), "--list"], timeout=120, check=False, cwd=home,
                       env={"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home, "ANSIBLE_CONFIG": str(config),
                            "ANSIBLE_LOCAL_TEMP": str(Path(home) / "tmp"), "ANSIBLE_NOCOLOR": "1",
                            "ANSIBLE_INVENTORY_UNPARSED_FAILED": "True",
                            "ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED": "True", "LANG": "C.UTF-8"})
    try:
        listing = json.loads(res.stdout) if res.ok else None
    except ValueError:
        listing = None
    if not isinstance(listing, dict):
        # its output is not repeated: Ansible's errors quote the lines they could not parse
        raise InputError(f"inventory {str(path)!r}: ansible-inventory could not read it (exit {res.returncode})",
                         f"see why with `ansible-inventory -i {path} --list`")
    return listing


def hosts_of_listing(listing: dict[str, Any], group: str, source: str = "<inventory>") -> list[HostSpec]:
    """`ansible-inventory --list` JSON -> the group's hosts with their variables mapped."""
    groups = {k: v for k, v in listing.items() if k != "_meta" and isinstance(v, dict)}
    if group not in groups:
        shown = [inventory_files.shown(g) for g in groups if g != "ungrouped"]
        plain = sorted(n.strip("'") for n in shown if n.startswith("'"))
        odd = f" (and {len(shown) - len(plain)} names with odd characters)" if len(plain) < len(shown) else ""
        raise InputError(f"inventory {source}: no group {group!r}", f"use one of: {', '.join(plain) or 'none'}{odd}")
    names: list[str] = []
    seen: set[str] = set()
    todo = [group]
    while todo:  # depth first, in file order: a group's own hosts, then each child's
        g = todo.pop()
        if g in seen:
            continue
        seen.add(g)
        names += [h for h in groups.get(g, {}).get("hosts", []) if h not in names]
        todo += reversed(groups.get(g, {}).get("children", []))
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
            field = ".".join(map(str, err["loc"]))
            var = next((k for k, f in ANSIBLE_VARS.items() if f == field and k in v), field)
            # the message names the variable, never its value (a key path, a password nearby)
            msg = str(err["msg"]).removeprefix("Value error, ")
            where = field if var == field else f"{field} ({var})"
            raise InputError(f"inventory {source}: host {inventory_files.shown(name)}: {where}: {msg}",
                             "fix that host's variables in the inventory") from None
    return hosts
