"""Reading a campaign file: bounded before it is parsed, parsed as data only.

A campaign file comes from elsewhere (shared by a colleague, posted to the web app), so
reading it must not cost more than its size suggests:
- size: at most MAX_CAMPAIGN_BYTES, checked before reading;
- encoding: UTF-8 (YAML's own), a binary file refused with the offset of the first bad byte;
- nesting: at most MAX_DEPTH levels, checked while scanning, before PyYAML's composer recurses
  (a file of 100,000 `[` took 5 minutes to scan and then overflowed the stack);
- aliases: the values after expanding every alias at most MAX_NODES, counted on the composed
  graph before anything is constructed (the "billion laughs": ten anchors of ten aliases
  each are 10^10 values, which the validators would walk one by one);
- safe construction only (no Python objects), and a key given twice is refused rather than
  silently taking the later value.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ..errors import InputError
from .campaign import Campaign, parse_campaign
from .messages import one_line

MAX_CAMPAIGN_BYTES = 1 << 20
MAX_DEPTH = 32
MAX_NODES = 100_000
SHIPPED = Path(__file__).parent.parent / "campaigns"
"""Campaigns installed with the package, run by name (`virtbench run sandboxes`)."""


class _Refused(yaml.YAMLError):
    def __init__(self, problem: str, mark: Any = None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.problem_mark = mark


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader with the limits above enforced where the structure is read."""

    def fetch_flow_collection_start(self, TokenClass: Any) -> None:  # noqa: N803 - PyYAML's name
        if self.flow_level + len(self.indents) >= MAX_DEPTH:
            raise _Refused(f"nested deeper than {MAX_DEPTH} levels", self.get_mark())
        super().fetch_flow_collection_start(TokenClass)

    def add_indent(self, column: int) -> bool:
        if len(self.indents) + self.flow_level >= MAX_DEPTH:
            raise _Refused(f"nested deeper than {MAX_DEPTH} levels", self.get_mark())
        return bool(super().add_indent(column))

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            seen: set[Any] = set()
            for key_node, _ in node.value:
                if not isinstance(key_node, yaml.ScalarNode) or key_node.value == "<<":
                    continue
                key = (key_node.tag, key_node.value)
                if key in seen:
                    raise _Refused(f"key {key_node.value!r} given twice in one mapping", key_node.start_mark)
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _expanded_size(root: yaml.Node) -> int:
    """Values in the document once every alias is expanded, without expanding them: an alias is
    the same node object as its anchor, so each node's size is computed once (iteratively:
    the depth is bounded, but the graph is walked without recursion anyway)."""
    size: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        if id(node) in size:
            continue
        children: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        if done or not children:
            size[id(node)] = 1 + sum(size[id(c)] for c in children)
            if size[id(node)] > MAX_NODES:
                return size[id(node)]
            continue
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in size)
    return size[id(root)]


def load_yaml(text: str | bytes, source: str) -> Any:
    """YAML data (never Python objects) within the limits above; one InputError line otherwise."""
    if isinstance(text, bytes):
        text = decode(text, source)
    if len(text) > MAX_CAMPAIGN_BYTES:
        raise InputError(f"{source}: {len(text)} characters, more than {MAX_CAMPAIGN_BYTES}; not a campaign file",
                         "give the campaign file itself (a campaign is a few kilobytes)")
    loader: _BoundedLoader | None = None
    try:
        loader = _BoundedLoader(text)  # its reader refuses control characters (a binary file) right here
        node = loader.get_single_node()
        if node is None:
            return None
        if (n := _expanded_size(node)) > MAX_NODES:
            raise _Refused(f"more than {MAX_NODES} values once its aliases (*name) are expanded ({n} counted "
                           "before giving up)")
        return loader.construct_document(node)
    except yaml.reader.ReaderError as exc:  # a control character: a binary file
        raise InputError(one_line(f"{source}: not a text file (character #x{exc.character:04x} at position "
                                  f"{exc.position})"), "give the campaign file itself (YAML text)") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}: line {mark.line + 1}" if mark else source
        problem = getattr(exc, "problem", None) or exc
        raise InputError(one_line(f"{where}: not valid YAML ({problem})"),
                         "fix the YAML" if not isinstance(exc, _Refused) else
                         "write the campaign out plainly (a campaign is a few kilobytes)") from None
    except (ValueError, RecursionError) as exc:  # an integer of 5,000 digits; a structure PyYAML cannot build
        raise InputError(one_line(f"{source}: not a campaign ({str(exc)[:200]})"), "fix the YAML") from None
    finally:
        if loader is not None:
            loader.dispose()


def decode(data: bytes, source: str) -> str:
    """UTF-8 text (what YAML is), or one line naming the first byte that is not."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{source}: not UTF-8 text (byte {exc.start} is {data[exc.start:exc.start + 1]!r}); "
                         "a campaign is a YAML text file", "save the file as UTF-8 (or give the right file)") from None


def campaign_path(path: str | Path) -> Path:
    """The file itself, else the shipped campaign of that name (a file wins over a name)."""
    p = Path(path)
    shipped = SHIPPED / f"{p.name}.yaml"
    return shipped if not p.is_file() and p.parent == Path(".") and shipped.is_file() else p


def read_campaign(path: str | Path, *, dynamic_inventory: bool = False) -> tuple[Campaign, str]:
    """The campaign of a file (or a shipped campaign's name) and the file's text, read once.
    dynamic_inventory: the CLI user allowed ansible-inventory to run an inventory script/plugin."""
    p = campaign_path(path)
    shown = one_line(str(p))
    if not p.is_file():
        names = ", ".join(sorted(f.stem for f in SHIPPED.glob("*.yaml")))
        what = "is not a regular file" if p.exists() else "not found"
        raise InputError(f"campaign file {shown!r} {what}",
                         f"give the path of a YAML campaign file, or a shipped campaign: {names or 'none'}")
    try:
        size = p.stat().st_size
        if size > MAX_CAMPAIGN_BYTES:
            raise InputError(f"{shown}: {size} bytes, larger than {MAX_CAMPAIGN_BYTES}; not a campaign file",
                             "give the campaign file itself (a campaign is a few kilobytes)")
        with p.open("rb") as f:
            data = f.read(MAX_CAMPAIGN_BYTES + 1)  # a file that grew since stat() is still bounded
    except OSError as exc:
        raise InputError(f"{shown}: cannot be read ({exc.strerror or exc})", "check the path and its permissions") from None
    text = decode(data, shown)
    return parse_campaign(load_yaml(text, shown), shown, dynamic_inventory=dynamic_inventory), text


def load_campaign(path: str | Path, *, dynamic_inventory: bool = False) -> Campaign:
    return read_campaign(path, dynamic_inventory=dynamic_inventory)[0]
