"""One line per validation error: the field's full path, what is wrong, and the keys it takes.

pydantic reports a nested unknown key (`density.guard.x`) with its location; the hint must
list the keys of that nested section, not of the model the error surfaced in, so the
location is walked through the models' annotations to the section it names. Union branches
(`counts: list[int] | Until`) appear in the location as tags, which are dropped from the path.
"""
from __future__ import annotations

import difflib
import re
import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

_CONTROL = re.compile("[\x00-\x1f\x7f\x85\u2028\u2029]")
"""Control characters and everything str.splitlines() breaks a line at."""


def one_line(text: str) -> str:
    """A message that stays one line whatever the input held: control characters (a newline in
    a name, a YAML error's own line breaks) shown escaped, never printed."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode(), text)


def _members(annotation: Any) -> list[Any]:
    """The concrete types an annotation allows: Optional, unions and Annotated unwrapped."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _members(typing.get_args(annotation)[0])
    if origin is typing.Union or origin is types.UnionType:  # Optional's None is no branch pydantic tags
        return [m for arg in typing.get_args(annotation) if arg is not type(None) for m in _members(arg)]
    return [annotation]


def _model(member: Any) -> type[BaseModel] | None:
    return member if isinstance(member, type) and issubclass(member, BaseModel) else None


def _step(annotation: Any, part: str | int) -> tuple[Any, bool]:
    """The annotation one location part further in, and whether the part is shown in the path
    (False for a union's tag)."""
    members = _members(annotation)
    for m in members:
        if isinstance(part, int) and typing.get_origin(m) in (list, tuple, set, frozenset):
            args = typing.get_args(m)
            return (args[0] if args else Any), True
        if isinstance(part, str) and (model := _model(m)) is not None and part in model.model_fields:
            return model.model_fields[part].annotation, True
    for m in members:
        if isinstance(part, str) and typing.get_origin(m) is dict:
            args = typing.get_args(m)
            return (args[1] if len(args) == 2 else Any), True
    if isinstance(part, str) and len(members) > 1:  # a union's tag: the branch pydantic tried
        named = [m for m in members if getattr(m, "__name__", None) == part]
        return (named[0] if named else Any), False
    return Any, True


def locate(model: type[BaseModel] | None, loc: tuple[str | int, ...]) -> tuple[str, type[BaseModel] | None]:
    """(the dotted path pydantic's loc names, without union tags; the model the last part is a key of)."""
    shown: list[str] = []
    annotation: Any = model if model is not None else Any
    for part in loc[:-1]:
        annotation, visible = _step(annotation, part)
        if visible:
            shown.append(f"[{part}]" if isinstance(part, int) else f".{part}")
    members = _members(annotation)
    owner = next((m for m in map(_model, members) if m is not None), None)
    if loc:
        last = loc[-1]
        tag = isinstance(last, str) and len(members) > 1 and (owner is None or last not in owner.model_fields)
        if not tag:
            shown.append(f"[{last}]" if isinstance(last, int) else f".{last}")
    return "".join(shown).lstrip("."), owner


def unknown_key(key: str, path: str, owner: type[BaseModel] | None) -> str:
    """`did you mean 'x'? known keys of PATH: ...` for an unknown key in a (nested) section."""
    if owner is None:
        return "remove it"
    known = list(owner.model_fields)
    close = difflib.get_close_matches(key, known, n=1)
    section = path.rpartition(".")[0] if "." in path else ""
    where = f" of {section}" if section else ""
    keys = f"known keys{where}: {', '.join(known) or 'none'}"
    return f"did you mean {close[0]!r}? {keys}" if close else keys


def _pick(errors: list[Any]) -> Any:
    """The error to show: of the first field's errors the deepest, which for a union is the
    branch the input was meant for (a mapping given for `counts: list[int] | Until` fails as a
    list first, but its real error is inside Until)."""
    field = errors[0]["loc"][:1]
    return max((e for e in errors if e["loc"][:1] == field), key=lambda e: len(e["loc"]))


def first_error(exc: ValidationError, where: str, model: type[BaseModel] | None = None) -> str:
    """The first error as `WHERE.PATH: what is wrong` (one line, unknown keys with their section's keys)."""
    errors = exc.errors()
    err = _pick(errors)
    path, owner = locate(model, tuple(err["loc"]))
    field = f"{where}.{path}" if path and where else path or where
    if err["type"] == "extra_forbidden" and err["loc"]:
        key = str(err["loc"][-1])
        return one_line(f"{field}: unknown key; {unknown_key(key, field, owner)}")
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    msg = str(err["msg"]).removeprefix("Value error, ")
    if err["loc"] and isinstance(err["loc"][-1], str):  # a validator that named its field itself
        msg = msg.removeprefix(f"{err['loc'][-1]}: ")
    return one_line(f"{field}: {msg}{more}")
