"""The last edges of #42, refused in one line with exit 2 before any work, never a traceback:
a `--db` that names no database (a text file, a directory, /dev/null, /proc/self/environ) and
export targets no file can be written in (`export -o`, `report --html`, `report --figures`).

Before: a text file or /etc/passwd as --db ended in sqlalchemy's 'file is not a database'
traceback; /dev/null waited 10 s to be called 'locked', /proc/self/environ was 'disk full';
`export -o /sys/kernel` and `report --html /sys/kernel/x.html` wrote nothing and died in a
PermissionError traceback after building the report."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from virtbench.cli import main

STORED = Path(__file__).parents[1] / "data" / "report" / "store-0003.sqlite"


def run_main(monkeypatch, capsys, *argv: str) -> tuple[int, list[str]]:
    monkeypatch.setattr("sys.argv", ["virtbench", *argv])
    with pytest.raises(SystemExit) as done:
        main()
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    return int(done.value.code or 0), err


@pytest.fixture()
def stored(tmp_path) -> str:
    shutil.copy(STORED, tmp_path / "s.db")
    return f"sqlite:///{tmp_path / 's.db'}"


@pytest.mark.parametrize("what", ["text", "directory", "/dev/null", "/proc/self/environ", "/etc/passwd"])
@pytest.mark.parametrize("command", [["runs"], ["report", "latest"], ["compare", "a", "b"],
                                     ["export", "latest", "-o", "/tmp/vb-never-made"]])
def test_a_db_that_is_no_database_is_one_line(tmp_path, monkeypatch, capsys, what, command):
    path = {"text": tmp_path / "notes.txt", "directory": tmp_path}.get(what, Path(what))
    if what == "text":
        path.write_text("these are my notes, not a database\n")
    before = path.stat()
    code, err = run_main(monkeypatch, capsys, *command, "--db", f"sqlite:///{path}")
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith(f"error: cannot use {path} as the results database: it is ") and "locked" not in err[0] \
        and "disk full" not in err[0]
    assert path.stat().st_mtime == before.st_mtime  # nothing written into it


@pytest.mark.parametrize("option", [["export", "-o", "{target}"], ["report", "--html", "{target}/r.html"],
                                    ["report", "--figures", "{target}/figures"]])
@pytest.mark.parametrize("target", ["/sys/kernel", "/proc/self", "{file}"])
def test_an_unwritable_export_target_is_one_line(tmp_path, monkeypatch, capsys, stored, option, target):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    target = target.format(file=blocker)
    argv = [a.format(target=target) for a in option]
    code, err = run_main(monkeypatch, capsys, *argv, "--db", stored)
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith(f"error: {argv[1]} {target}") and "cannot write files" in err[0] \
        or err[0].startswith("error: Invalid value for '--output' / '-o'") and "is a file" in err[0], err
