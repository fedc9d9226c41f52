"""Every paper command held by a test (#41): each command a paper prints (000, 002) against the argv
the presets build, flag by flag, and each setting a paper states in prose (001, 003, 004, and 000's
containers) against the paper-scale preset. What differs is a listed Difference of the part (its
`adds`/`drops` for argv words, its `settings` for values), and no Difference names a setting or
word that does not exist."""
from __future__ import annotations

import re
from typing import Any

import pytest

from virtbench.config import SHIPPED, load_campaign
from virtbench.registry import BENCHMARKS, PLATFORMS
from virtbench.studies.model import SCALES, Difference, PaperCommand, PaperSetting, Part, Study
from virtbench.studies.registry import STUDIES

WORKDIR = "/var/tmp/vb"
SERVER = "192.0.2.1"
PARTS = [(s, p) for s in STUDIES for p in s.parts]
COMMANDS = [(s, p, c) for s, p in PARTS for c in p.commands]


def presets(s: Study, part: Part, scale: str) -> list[Any]:
    return [load_campaign(SHIPPED / f"{stem}.yaml") for stem in part.campaign_stems(s.id, scale)]


def benchmarks(campaign: Any, name: str, select: dict[str, Any]) -> list[tuple[Any, Any]]:
    """(entry or None, benchmark) of the campaign's points of this benchmark with the selected values."""
    if campaign.experiment == "density":
        bench = campaign.section.benchmark()
        return [(None, bench)] if bench.name == name else []
    out = []
    for e in campaign.benchmarks:
        if e.name != name:
            continue
        cls = BENCHMARKS.get(name)
        bench = cls(cls.Params(**e.params))
        if all(getattr(bench.params, k, None) == v for k, v in select.items()):
            out.append((e, bench))
    return out


def argv_of(bench: Any, role: str) -> list[str]:
    if role == "command":
        return bench.command(WORKDIR)
    if role == "client":
        return bench.client_command(WORKDIR, SERVER)
    if role == "server":
        return bench.server_command(WORKDIR)
    return bench.phases(WORKDIR)[role]


def applying(part: Part, scale: str) -> list[Difference]:
    return [d for d in part.differences if scale in d.scales]


def _words(group: str) -> list[str]:
    return [group] if group.startswith(">") else group.split(" ")


def present(argv: list[str], group: str) -> bool:
    words = _words(group)
    return any(argv[i:i + len(words)] == words for i in range(len(argv) - len(words) + 1))


def strip(argv: list[str], groups: list[str]) -> list[str]:
    """argv without each group (an option and its value as one string, "-p 5201") once."""
    out = list(argv)
    for g in groups:
        words = _words(g)
        i = next(i for i in range(len(out) - len(words) + 1) if out[i:i + len(words)] == words)
        del out[i:i + len(words)]
    return out


def word_matches(paper: str, mine: str) -> bool:
    """A paper word with a harness placeholder (<ip-server>, <testFile>) matches the word the harness puts there."""
    if "<" not in paper:
        return paper == mine
    pattern = "".join(r"[^-\s]\S*" if part.startswith("<") else re.escape(part)
                      for part in re.split(r"(<[^>]+>)", paper) if part)
    return re.fullmatch(pattern, mine) is not None


def filled(cmd: PaperCommand, params: Any) -> list[str]:
    values = {k: getattr(params, k) for k in re.findall(r"\{(\w+)\}", " ".join(cmd.argv))}
    return [w.format(**values) for w in cmd.argv]


@pytest.mark.parametrize("s, part, cmd", COMMANDS, ids=[f"{s.id}-{p.name}-{c.benchmark}-{c.role}" for s, p, c in COMMANDS])
@pytest.mark.parametrize("scale", SCALES)
def test_each_presets_argv_is_the_papers_command_flag_by_flag(s, part, cmd, scale):
    """The preset's argv is the paper's, `{param}`s filled from the preset, once the words the part's
    listed differences add and drop are taken out; a `<...>` word is the harness's (address, file)."""
    seen = 0
    for campaign in presets(s, part, scale):
        for _, bench in benchmarks(campaign, cmd.benchmark, dict(cmd.select)):
            diffs = applying(part, scale)
            raw, wanted = argv_of(bench, cmd.role), filled(cmd, bench.params)
            mine = strip(raw, [g for d in diffs for g in d.adds if present(raw, g)])
            paper = strip(wanted, [g for d in diffs for g in d.drops if present(wanted, g)])
            assert len(mine) == len(paper) and all(map(word_matches, paper, mine)), \
                f"{campaign.name}: {mine} is not the paper's {paper} ({cmd.where})"
            seen += 1
    assert seen, f"no preset of {s.id} {part.name} ({scale}) runs {cmd.benchmark} {dict(cmd.select)}"


def _entry_values(campaign: Any, setting: PaperSetting, key: str, part: Part) -> list[Any]:
    """What the preset sets for one key of a setting, one value per matching entry."""
    if setting.target == "campaign":
        node: Any = campaign
        for step in key.split("."):
            node = getattr(node, step)
        return [node]
    if setting.target == "section":
        node = campaign.section
        for step in key.split("."):
            node = node.get(step) if isinstance(node, dict) else getattr(node, step)
        return list(node) if isinstance(node, (list, tuple)) else [node]
    kind, _, name = setting.target.partition(":")
    if kind == "platform":
        out = []
        for p in campaign.platforms:
            if p.type != name:
                continue
            options = PLATFORMS.get(p.type).Options(**p.options)
            if getattr(options, key, None) is not None and key in ("vcpus", "memory") and p.name in part.size_to_host:
                out.append("host")  # sized to this host when planned (studies/run.py)
            else:
                out.append(getattr(options, key, None))
        return out
    return [e.instances or 1 if key == "instances" else getattr(b.params, key)
            for e, b in benchmarks(campaign, name, dict(setting.select))]


def _same(paper: Any, mine: list[Any]) -> bool:
    def norm(v: Any) -> Any:
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v
    if isinstance(paper, list):
        return {norm(v) for v in paper} == {norm(v) for v in mine}
    return bool(mine) and all(norm(v) == norm(paper) for v in mine)


def _given(part: Part) -> list[tuple[str, str, Any, PaperCommand]]:
    return [(f"benchmark:{c.benchmark}.{k}", k, v, c) for c in part.commands for k, v in c.given.items()]


@pytest.mark.parametrize("s, part", PARTS, ids=[f"{s.id}-{p.name}" for s, p in PARTS])
def test_stated_values_hold_in_the_paper_scale_preset_or_are_listed(s, part):
    """Each value the paper states (a setting, or a command's `{param}` it gives) is the paper preset's,
    or a difference of the part names it (`settings`)."""
    listed = {k for d in applying(part, "paper") for k in d.settings}
    campaigns = presets(s, part, "paper")
    problems = []
    for setting in part.settings:
        for key, value in setting.values.items():
            mine = [v for c in campaigns for v in _entry_values(c, setting, key, part)]
            if not _same(value, mine) and f"{setting.target}.{key}" not in listed:
                problems.append(f"{setting.target}.{key}: paper {value!r} ({setting.where}), preset {mine!r}")
    for full, key, value, cmd in _given(part):
        mine = [getattr(b.params, key) for c in campaigns for _, b in benchmarks(c, cmd.benchmark, dict(cmd.select))]
        if not _same(value, mine) and full not in listed:
            problems.append(f"{full}: paper {value!r} ({cmd.where}), preset {mine!r}")
    assert not problems, f"study {s.id} part {part.name}: unlisted differences: {problems}"


@pytest.mark.parametrize("s, part", PARTS, ids=[f"{s.id}-{p.name}" for s, p in PARTS])
def test_every_listed_difference_names_what_exists(s, part):
    """No stale difference: the settings it names are stated, its argv words are in a command."""
    keys = {k for st in part.settings for k in st.keys()} | {full for full, *_ in _given(part)}
    for d in part.differences:
        assert d.what and d.why, d
        assert set(d.settings) <= keys, f"{part.name}: {d.what!r} names {set(d.settings) - keys}"
        for g in d.drops:
            assert any(g in c.text() for c in part.commands), f"{part.name}: drops {g!r} of no command"
        if d.adds:
            assert part.commands, f"{part.name}: {d.what!r} adds words to no command"
        if d.option:
            assert d.option in part.options, f"{part.name}: {d.option} is not an option of the part"


def test_the_readme_sentence_is_true():
    """'a unit test holds each preset's argv against the paper's command': each study whose paper prints
    a command has it recorded; the others' prose settings are recorded."""
    printed = {s.id for s, p, _ in COMMANDS}
    assert printed == {"000", "002"}
    for s in STUDIES:
        assert any(p.settings for p in s.parts), s.id
    readme = (SHIPPED.parents[2] / "README.md").read_text()
    assert "a unit test holds each preset's argv against the paper's command" in readme
