"""Every command within 100 columns on a pipe, wrapped at word boundaries, and help that says
what the code does (#42).

Before: on a pipe the console was 200 columns wide (`show --execution` printed a 200-column
rule, the text report of a run across hosts had 31 of 51 lines over 100 columns), the report's
header broke 'load ⏎0.40'; `report --min-effect` said "95 % interval within 1 +- this" while the
rule reads the 90 % interval, `compare --min-effect` described another meaning, and `list
benchmarks`, `list platforms`, `show --platform/--benchmark` had no help."""
from __future__ import annotations

import re

import click
import pytest
from click.testing import CliRunner
from rich.cells import cell_len

from virtbench.analysis import synthetic, verdict
from virtbench.cli import cli
from virtbench.store.db import Store

WIDTH = 100
NUMBER_START = re.compile(r"^\s*[+±-]?\d")


def commands(group: click.Group = cli, path: tuple[str, ...] = ()):
    for name, cmd in sorted(group.commands.items()):
        yield (*path, name), cmd
        if isinstance(cmd, click.Group):
            yield from commands(cmd, (*path, name))


def test_every_help_fits_100_columns_and_every_option_says_what_it_does():
    runner = CliRunner()
    for path, cmd in commands():
        out = runner.invoke(cli, [*path, "--help"]).output
        assert max(cell_len(line) for line in out.splitlines()) <= WIDTH, (path, out)
        assert (cmd.help or cmd.short_help or "").strip(), f"`{' '.join(path)}` has no help"
        for p in cmd.params:
            if isinstance(p, click.Option) and not p.hidden and p.name not in ("help",) and not p.is_flag \
                    and path[:1] in (("show",), ("list",), ("report",), ("compare",), ("export",)):
                assert (p.help or "").strip(), f"`{' '.join(path)} {p.opts[0]}` has no help"


@pytest.mark.parametrize("command", ["report", "compare"])
def test_min_effect_help_states_the_rule(command):
    """The help's percentages are the rule's, and the rule behaves as the help says: a ratio whose
    90 % interval lies within 1 +- margin while its 95 % one does not is 'same'."""
    out = " ".join(CliRunner().invoke(cli, [command, "--help"]).output.split())
    m = re.search(r"same when the ratio's (\d+) % interval lies within 1 \+- this; slower or faster when its "
                  r"(\d+) % interval excludes 1", out)
    assert m, out
    assert int(m.group(1)) == round(verdict.EQUIVALENCE * 100) and int(m.group(2)) == round(verdict.CONFIDENCE * 100)
    base = [100.0, 101.0, 99.0, 100.5, 99.5, 100.2]
    same = verdict.decide([v * 1.005 for v in base], base, True, min_effect=0.02)
    assert same.verdict == "same"
    slower = verdict.decide([v * 0.9 for v in base], base, True, min_effect=0.02)
    assert slower.verdict == "slower" and slower.ci[1] < 1


@pytest.fixture(scope="module")
def hosts_store(tmp_path_factory):
    store = Store(f"sqlite:///{tmp_path_factory.mktemp('widths') / 'h.db'}")
    synthetic.fill(store, "hosts", repetitions=3, hosts=("pi5-a.example.org", "pi5-b.example.org"),
                   fail={("docker", "sim-fio"): [2]})
    synthetic.fill(store, "one", repetitions=3, facts={"loadavg": [0.4, 0.38, 0.31]})
    return store


@pytest.mark.parametrize("args", [["report", "hosts"], ["report", "hosts", "--detail"], ["report", "one"],
                                  ["show", "hosts", "--failed"], ["show", "one"], ["compare", "one", "hosts"],
                                  ["runs"]])
def test_read_commands_keep_to_100_columns_on_a_pipe(hosts_store, args):
    out = CliRunner().invoke(cli, [*args, "--db", hosts_store.url]).output
    lines = out.splitlines()
    assert lines and max(cell_len(line) for line in lines) <= WIDTH, [line for line in lines if cell_len(line) > WIDTH]
    assert "…" not in out, "a cell wraps inside a long name, never cut"


@pytest.mark.parametrize("width", range(60, 101, 4))
def test_free_text_never_breaks_before_a_number(hosts_store, width):
    """At any width the header and the notes break between phrases, never 'load ⏎0.40'."""
    from rich.console import Console

    from virtbench.report import builder, text

    report = builder.build(hosts_store, "one")
    console = Console(record=True, width=width, file=open("/dev/null", "w"))  # noqa: SIM115
    text.render(report, console)
    free = [line for line in console.export_text().splitlines() if not set(line) & set("│┃┏┡└━─┳╇┓┩┗┛")]
    broken = [(a, b) for a, b in zip(free, free[1:]) if a.strip() and NUMBER_START.match(b) and a[-1:].isalpha()]
    assert not broken, broken


def test_an_error_wraps_to_the_terminal_and_stays_one_line_on_a_pipe(tmp_path):
    """Before: a 144-column error line on any stream. A terminal now wraps it at word boundaries
    (its continuation indented); a pipe keeps the one line scripts and logs read."""
    import os
    import subprocess
    import sys

    argv = [sys.executable, "-m", "virtbench", "report", "--db", "sqlite:///no/such-store.db"]
    env = {**os.environ, "COLUMNS": "60"}
    piped = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert piped.returncode == 2 and len(piped.stderr.splitlines()) == 1 and len(piped.stderr) > 100
    master, slave = os.openpty()
    try:
        tty = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=slave, env=env, timeout=120, cwd=tmp_path)
        os.close(slave)
        out = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(master)
    lines = out.decode().replace("\r", "").splitlines()
    assert tty.returncode == 2 and len(lines) > 1 and all(cell_len(line) <= 60 for line in lines), lines
    assert " ".join(line.strip() for line in lines) == " ".join(piped.stderr.split())
