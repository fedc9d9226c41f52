"""Ansible inventories read as data: the YAML and INI formats, parsed here, nothing executed.

A campaign naming an inventory is validated by the CLI and by the web app; running
`ansible-inventory` for that would run whatever the file names (an executable file is a
dynamic inventory script, a YAML file with `plugin:` loads an inventory plugin) as root, and
read a configuration from wherever HOME points. So an inventory is read the way Ansible's own
`yaml` and `ini` inventory plugins read it (groups, `children`, `vars`, hosts with variables,
`host:port`, ranges such as `web[01:03]`, `[group:vars]`, `[group:children]`) plus the
`group_vars/` and `host_vars/` files beside it, with Ansible's variable precedence, into the
JSON shape `ansible-inventory --list` prints (`hosts_of_listing` maps either). Scripts,
directories, plugin configurations and vault-encrypted files are refused here; the CLI runs
them through ansible-inventory only when its user asks (`run --dynamic-inventory`).

No error carries a line of the file: a path that is not an inventory (a key, /etc/shadow)
is answered with its line number and what was expected, never with what it holds.
"""
from __future__ import annotations

import ast
import os
import re
import shlex
import stat
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .inventory_patterns import MAX_HOSTS, expand_pattern

MAX_BYTES = 1 << 20
MAX_GROUPS = 1024
MAX_ENTRIES = 100_000
YAML_SUFFIXES = ("", ".yml", ".yaml", ".json")
"""The suffixes Ansible's yaml plugin takes (and group_vars/host_vars files)."""
VAULT_HEADER = b"$ANSIBLE_VAULT;"


class NotData(Exception):
    """The file is an inventory Ansible would run or load code for: a script, a directory, a
    plugin configuration, a vault-encrypted file. `kind` names which."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


class Unreadable(Exception):
    """Not a YAML or INI inventory; `detail` says where and why without quoting the file."""

    def __init__(self, detail: str = "") -> None:
        super().__init__(detail)
        self.detail = detail


class Vaulted(str):
    """A `!vault` value: kept encrypted (virtbench needs none of the variables Ansible vaults)."""


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader plus Ansible's own tags (as data: nothing is decrypted or templated)."""


_Loader.add_constructor("!vault", lambda loader, node: Vaulted("<vault>"))
_Loader.add_constructor("!unsafe", lambda loader, node: str(loader.construct_scalar(node)))  # type: ignore[arg-type]


@dataclass
class _Group:
    vars: dict[str, Any] = field(default_factory=dict)
    hosts: dict[str, None] = field(default_factory=dict)
    """In file order (a dict: membership in constant time)."""
    children: dict[str, None] = field(default_factory=dict)
    parents: set[str] = field(default_factory=set)


@dataclass
class _Inventory:
    groups: dict[str, _Group] = field(default_factory=lambda: {"all": _Group(), "ungrouped": _Group()})
    hostvars: dict[str, dict[str, Any]] = field(default_factory=dict)
    budget: int = MAX_ENTRIES
    """Group and host entries left to read: YAML aliases can repeat a subtree exponentially."""

    def spend(self) -> None:
        self.budget -= 1
        if self.budget < 0:
            raise Unreadable(f"more than {MAX_ENTRIES} group and host entries")

    def group(self, name: Any) -> _Group:
        if not isinstance(name, str) or not name:
            raise Unreadable("a group name that is not a string")
        if name not in self.groups and len(self.groups) > MAX_GROUPS:
            raise Unreadable(f"more than {MAX_GROUPS} groups")
        return self.groups.setdefault(name, _Group())

    def add_child(self, parent: str, child: str) -> None:
        """(A loop is found once everything is read, in `_depths`.)"""
        if parent == child:
            raise Unreadable(f"group {shown(child)} is its own child")
        self.group(parent).children[child] = None
        self.group(child).parents.add(parent)

    def add_hosts(self, group: str, names: list[str], port: int | None, variables: dict[Any, Any]) -> None:
        """Ansible: a pattern's :port is the hosts' ansible_port; a host's variables accumulate."""
        g = self.group(group)
        own = {str(k): v for k, v in variables.items()}
        if port is not None:
            own["ansible_port"] = port
        for name in names:
            self.spend()
            g.hosts[name] = None
            self.hostvars.setdefault(name, {}).update(own)
            if len(self.hostvars) > MAX_HOSTS:
                raise Unreadable(f"more than {MAX_HOSTS} hosts")


# -- the file ------------------------------------------------------------------------------------
def read_listing(path: Path, keep: Collection[str] | None = None) -> dict[str, Any]:
    """The inventory at `path` as `ansible-inventory --list` would print it (group vars merged
    into each host's variables; only the variables in `keep` when given, which bounds the work
    and holds no password). NotData for what only Ansible can run; Unreadable otherwise."""
    data = _read_file(path, inventory=True)
    inv = _Inventory()
    text = _text(data)
    loaded: Any = None
    why = "not a YAML mapping of groups"
    if path.suffix in YAML_SUFFIXES:
        try:
            loaded = yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            why = f"line {mark.line + 1}: not valid YAML" if mark else "not valid YAML"
        except (RecursionError, ValueError):
            why = "not valid YAML"
    if isinstance(loaded, dict):
        if "plugin" in loaded:
            raise NotData("an inventory plugin configuration")
        _parse_yaml(inv, loaded)
    elif path.suffix in (".yml", ".yaml", ".json"):
        raise Unreadable(why)
    else:
        _parse_ini(inv, text)
    return _listing(inv, path.parent, keep)


def _read_file(path: Path, *, inventory: bool) -> bytes:
    """A regular file's bytes (at most MAX_BYTES); never blocks on a FIFO or a device."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        if inventory and path.is_dir():
            raise NotData("a directory of inventory sources") from None
        raise Unreadable() from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode) and inventory:
            raise NotData("a directory of inventory sources")
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_BYTES:
            raise Unreadable()
        if inventory and st.st_mode & 0o111:
            raise NotData("an executable file (a dynamic inventory script)")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(MAX_BYTES + 1)
    finally:
        os.close(fd)
    if data.startswith(VAULT_HEADER):
        raise NotData("a vault-encrypted file")
    return data


def _text(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise Unreadable("not UTF-8 text") from None


def shown(name: str) -> str:
    """A name from the file, quoted only when it looks like one (never a line of a random file)."""
    plain = isinstance(name, str) and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}", name)
    return repr(name) if plain else "(a name with odd characters)"


# -- YAML -----------------------------------------------------------------------------------------
def _parse_yaml(inv: _Inventory, data: dict[Any, Any]) -> None:
    for name, body in data.items():
        _yaml_group(inv, name, body, depth=0)
        if name != "all":
            inv.add_child("all", name)


def _yaml_group(inv: _Inventory, name: Any, body: Any, depth: int) -> None:
    if depth > 50:
        raise Unreadable("groups nested more than 50 deep")
    inv.spend()
    if body is not None and not isinstance(body, dict):
        return  # Ansible skips a group that is not a mapping (with a warning)
    group = inv.group(name)
    if body is None:
        return
    for section in ("vars", "children", "hosts"):
        value = body.get(section)
        if isinstance(value, str):
            value = {value: None}
        if value is None:
            continue
        if not isinstance(value, dict):
            raise Unreadable(f"group {shown(name)}: {section} must be a mapping")
        if section == "vars":
            group.vars.update({str(k): v for k, v in value.items()})
        elif section == "children":
            for child, child_body in value.items():
                _yaml_group(inv, child, child_body, depth + 1)
                inv.add_child(name, child)
        else:
            for pattern, variables in value.items():
                if not isinstance(pattern, str):
                    raise Unreadable(f"group {shown(name)}: a host name that is not a string (quote numbers)")
                if variables is not None and not isinstance(variables, dict):
                    raise Unreadable(f"group {shown(name)}: a host's variables must be a mapping")
                inv.add_hosts(name, *_expanded(pattern), variables or {})


def _expanded(pattern: str) -> tuple[list[str], int | None]:
    try:
        return expand_pattern(pattern)
    except ValueError as exc:
        raise Unreadable(str(exc)) from None


# -- INI ------------------------------------------------------------------------------------------
_SECTION = re.compile(r"^\[([^:\]\s]+)(?::(\w+))?\]\s*(?:[#;].*)?$")
_GROUP_NAME = re.compile(r"^([^:\]\s]+)\s*(?:#.*)?$")


def _parse_ini(inv: _Inventory, text: str) -> None:
    """Ansible's ini plugin: lines before any section are ungrouped hosts; [g] hosts,
    [g:vars] key=value, [g:children] group names; a group must be declared somewhere."""
    group, state = "ungrouped", "hosts"
    declared = {"all", "ungrouped"}
    referenced: dict[str, int] = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        try:
            m = _SECTION.match(line)
            if m:
                group, state = m.group(1), m.group(2) or "hosts"
                if state not in ("hosts", "children", "vars"):
                    raise Unreadable("a section of unknown type (give [group], [group:vars] or [group:children])")
                inv.group(group)
                if state != "vars":
                    declared.add(group)
                else:
                    referenced.setdefault(group, lineno)
                continue
            if line.startswith("["):
                raise Unreadable("a malformed section header")
            if state == "hosts":
                pattern, variables = _ini_host_line(line)
                inv.add_hosts(group, *_expanded(pattern), variables)
            elif state == "vars":
                if "=" not in line:
                    raise Unreadable("expected key=value")
                key, value = (e.strip() for e in line.split("=", 1))
                inv.group(group).vars[key] = _ini_value(value)
            else:
                m = _GROUP_NAME.match(line)
                if not m:
                    raise Unreadable("expected a group name")
                inv.add_child(group, m.group(1))
                referenced.setdefault(m.group(1), lineno)
        except Unreadable as exc:
            raise Unreadable(f"line {lineno}: {exc.detail}") from None
    for name, lineno in referenced.items():
        if name not in declared:
            raise Unreadable(f"line {lineno}: group {shown(name)} is used but never declared as [{name}]"
                             if shown(name).startswith("'") else f"line {lineno}: a group used but never declared")
    for name in inv.groups:
        if name not in ("all", "ungrouped") and not inv.groups[name].parents:
            inv.add_child("all", name)


def _ini_host_line(line: str) -> tuple[str, dict[str, Any]]:
    try:
        tokens = shlex.split(line, comments=True)
    except ValueError:
        raise Unreadable("a host line with unbalanced quotes") from None
    if not tokens:
        raise Unreadable("an empty host line")
    variables: dict[str, Any] = {}
    for token in tokens[1:]:
        if "=" not in token:
            raise Unreadable("a host variable without '=' (give key=value)")
        key, value = token.split("=", 1)
        variables[key] = _ini_value(value)
    return tokens[0], variables


def _ini_value(value: str) -> Any:
    """As Ansible: a Python literal (a number, a quoted string, a list) if it is one, else the text."""
    if len(value) > 4096:
        return value
    try:
        return ast.literal_eval(value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return value


# -- variables and the listing --------------------------------------------------------------------
def _vars_file(directory: Path, name: str) -> dict[str, Any]:
    """group_vars/NAME or host_vars/NAME beside the inventory: a file (NAME, NAME.yml, .yaml,
    .json) or a directory of such files, read as YAML data."""
    out: dict[str, Any] = {}
    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", name):
        return out  # never a path: a group named ../x reads no file outside group_vars/
    base = directory / name
    candidates = [base.with_name(name + s) for s in YAML_SUFFIXES if (base.with_name(name + s)).is_file()]
    if base.is_dir():
        candidates += sorted(p for p in base.rglob("*") if p.is_file() and p.suffix in YAML_SUFFIXES)[:256]
    for path in candidates:
        try:
            loaded = yaml.load(_text(_read_file(path, inventory=False)), Loader=_Loader)  # noqa: S506
        except (yaml.YAMLError, RecursionError, ValueError):
            raise Unreadable(f"{path.parent.name}/{path.name}: not valid YAML") from None
        except NotData:
            continue  # a vaulted vars file: nothing virtbench maps can be in it as plain text
        if loaded is None:
            continue
        if not isinstance(loaded, dict):
            raise Unreadable(f"{path.parent.name}/{path.name}: not a mapping of variables")
        out.update({str(k): v for k, v in loaded.items()})
    return out


def _depths(inv: _Inventory) -> dict[str, int]:
    """Each group's depth below `all` (its longest path from it, as Ansible counts), in one
    pass in topological order; a group that is its own ancestor is refused, as Ansible does."""
    waiting = {g: len(body.parents) for g, body in inv.groups.items()}
    ready = [g for g, n in waiting.items() if n == 0]
    depth = dict.fromkeys(inv.groups, 0)
    done = 0
    while ready:
        g = ready.pop()
        done += 1
        for c in inv.groups[g].children:
            depth[c] = max(depth[c], depth[g] + 1)
            waiting[c] -= 1
            if waiting[c] == 0:
                ready.append(c)
    if done < len(inv.groups):
        raise Unreadable("a group that is its own ancestor (through children)")
    return depth


def _listing(inv: _Inventory, base: Path, keep: Collection[str] | None) -> dict[str, Any]:
    """Ansible's precedence: all's vars < other groups' (by depth, priority, name) <
    group_vars/all < group_vars/GROUP < the host's own < host_vars/HOST."""
    member: dict[str, set[str]] = {}
    for name, body in inv.groups.items():
        for h in body.hosts:
            member.setdefault(h, set()).add(name)
    for host in inv.hostvars:
        if not member.get(host, set()) - {"all", "ungrouped"}:
            inv.groups["ungrouped"].hosts[host] = None
            member.setdefault(host, set()).add("ungrouped")
    depth = _depths(inv)
    lineage: dict[str, set[str]] = {}

    def lineage_of(name: str) -> set[str]:  # the group and its ancestors, memoized (groups form a DAG)
        if name not in lineage:
            found, todo = {name}, [name]
            while todo:
                for p in inv.groups[todo.pop()].parents:
                    if p not in found:
                        found.add(p)
                        todo.append(p)
            lineage[name] = found
        return lineage[name]

    def priority(name: str) -> int:
        try:
            return int(inv.groups[name].vars.get("ansible_group_priority", 1))
        except (TypeError, ValueError):
            return 1

    def ancestors(host: str) -> list[str]:
        found: set[str] = set().union(*(lineage_of(g) for g in member.get(host, ())))
        found.discard("all")
        return sorted(found, key=lambda g: (depth.get(g, 1), priority(g), g))

    group_vars_dir, host_vars_dir = base / "group_vars", base / "host_vars"
    files: dict[str, dict[str, Any]] = {}
    if group_vars_dir.is_dir():
        files = {g: _vars_file(group_vars_dir, g) for g in inv.groups}
    hostvars: dict[str, dict[str, Any]] = {}
    for host, own in inv.hostvars.items():
        groups = ancestors(host)
        layers = [inv.groups["all"].vars, *(inv.groups[g].vars for g in groups), files.get("all", {}),
                  *(files.get(g, {}) for g in groups), own]
        if host_vars_dir.is_dir():
            layers.append(_vars_file(host_vars_dir, host))
        merged: dict[str, Any] = {}
        for layer in layers:
            merged.update(layer if keep is None else {k: layer[k] for k in keep if k in layer})
        hostvars[host] = merged
    listing: dict[str, Any] = {"_meta": {"hostvars": hostvars}}
    for name, body in inv.groups.items():
        entry: dict[str, Any] = {}
        if body.hosts and name != "all":
            entry["hosts"] = list(body.hosts)
        if body.children:
            entry["children"] = list(body.children)
        listing[name] = entry
    listing["all"] = {"children": ["ungrouped", *(c for c in inv.groups["all"].children if c != "ungrouped")]}
    return listing
