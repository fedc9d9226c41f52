"""Reference documentation generated from the plugin registries, so the README cannot drift
from the code: `virtbench list benchmarks --markdown` prints it, a test compares it."""
from __future__ import annotations

from .registry import BENCHMARKS, PLATFORMS

START, END = "<!-- benchmarks:start -->", "<!-- benchmarks:end -->"


def benchmarks_markdown() -> str:
    lines = ["| benchmark | what | metrics (unit, ↑ higher / ↓ lower is better) | parameters (default) |",
             "|---|---|---|---|"]
    for name, cls in BENCHMARKS.items():
        params = cls.Params()
        metrics = ", ".join(f"`{m.name}` {m.unit} {'↑' if m.higher_is_better else '↓'}"
                            for m in cls(params).metrics())
        fields = ", ".join(f"`{k}`={_default(getattr(params, k))}" for k in cls.Params.model_fields)
        lines.append(f"| `{name}` | {cls.description} | {metrics} | {fields} |")
    return "\n".join(lines)


def platforms_markdown() -> str:
    lines = ["| platform | kind | what | options |", "|---|---|---|---|"]
    for name, cls in PLATFORMS.items():
        lines.append(f"| `{name}` | {cls.kind} | {cls.description} | "
                     f"{', '.join(f'`{o}`' for o in cls.Options.model_fields) or '-'} |")
    return "\n".join(lines)


def _default(value: object) -> str:
    text = str(value.value if hasattr(value, "value") else value)
    return text.replace("|", "\\|") if text else '""'


def readme_section() -> str:
    return f"{START}\n{benchmarks_markdown()}\n\n{platforms_markdown()}\n{END}"


def update_readme(text: str) -> str:
    """The README text with its generated section replaced."""
    head, _, rest = text.partition(START)
    _, _, tail = rest.partition(END)
    return f"{head}{readme_section()}{tail}"
