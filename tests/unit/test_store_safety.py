"""The results store refuses and reports in one line, never leaks its password, and keeps its
files to their owner: a database below a regular file, a full disk, a locked database, an
export directory that cannot be made, a PostgreSQL password in every message, file modes."""
from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import event

from virtbench.errors import InputError, StoreError, VirtbenchError
from virtbench.store.db import Store

SECRET = "s3cretPW-x9"
PG_URL = f"postgresql+psycopg://vb:{SECRET}@127.0.0.1:1/results"  # port 1: nothing listens


def vb(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "virtbench", *args], capture_output=True, text=True, timeout=120,
                          env=env)


def one_line_exit_2(res: subprocess.CompletedProcess[str]) -> str:
    """The CLI's refusal: exit 2, `error: ...` (and its `fix:`), no traceback."""
    assert res.returncode == 2, res.stdout + res.stderr
    assert "Traceback" not in res.stderr and res.stderr.startswith("error: "), res.stderr
    assert len(res.stderr.strip().splitlines()) <= 2, res.stderr
    return res.stderr


def test_postgres_password_is_never_in_a_message():
    pytest.importorskip("psycopg")
    with pytest.raises(VirtbenchError) as info:
        Store(PG_URL)
    assert SECRET not in str(info.value) and "vb:***@127.0.0.1:1/results" in info.value.message
    err = one_line_exit_2(vb("runs", "--db", PG_URL))
    assert SECRET not in err and "***" in err
    assert SECRET not in vb("report", env=dict(os.environ, VIRTBENCH_DB=PG_URL)).stderr


def test_scrub_removes_the_url_and_the_password_from_any_text(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'r.db'}")
    store.url, store.shown = PG_URL, "postgresql+psycopg://vb:***@127.0.0.1:1/results"
    said = store.scrub(f"(psycopg.OperationalError) cannot connect to {PG_URL}; password {SECRET} rejected")
    assert SECRET not in said and said.count("***") == 2


def test_database_below_a_regular_file_is_one_line(tmp_path):
    (tmp_path / "afile").write_text("x")
    with pytest.raises(InputError, match="afile is a file, not a directory"):
        Store(f"sqlite:///{tmp_path / 'afile' / 'x.db'}")
    # cancel opens (creates) the store; runs, report, show, compare and export refuse a missing one first (#29)
    err = one_line_exit_2(vb("cancel", "r1", "--db", "sqlite:////etc/passwd/x.db"))
    assert "/etc/passwd is a file" in err


def test_export_into_a_directory_that_cannot_be_made_is_one_line(tmp_path):
    from virtbench.analysis.synthetic import fill

    db = f"sqlite:///{tmp_path / 'r.db'}"
    fill(Store(db), "r1", repetitions=2)
    (tmp_path / "afile").write_text("x")
    err = one_line_exit_2(vb("export", "r1", "-o", str(tmp_path / "afile" / "out"), "--db", db))
    assert "cannot write files there" in err and "afile" in err


@pytest.fixture
def full_disk(tmp_path):
    """A 256 KiB tmpfs, filled but for a few KiB: a real full filesystem."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "full"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)], check=True)
    try:
        subprocess.run(["dd", "if=/dev/zero", f"of={mnt / 'fill'}", "bs=4k"], capture_output=True)
        yield mnt
    finally:
        subprocess.run(["umount", "--lazy", str(mnt)], check=True)  # a failed open may keep a descriptor


def test_full_disk_when_opening_says_disk_full_with_the_free_space(full_disk):
    with pytest.raises(StoreError) as info:
        Store(f"sqlite:///{full_disk / 'r.db'}")
    assert info.value.message.startswith("disk full") and "free on its filesystem" in info.value.message
    err = one_line_exit_2(vb("cancel", "r1", "--db", f"sqlite:///{full_disk / 'r2.db'}"))
    assert "disk full" in err and "KiB free" in err and "permissions" not in err


class ImpatientStore(Store):
    """Waits 0.2 s for a lock instead of 10 (the message and the outcome are the same)."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.engine.dispose()
        event.listen(self.engine, "connect", lambda conn, _rec: conn.execute("PRAGMA busy_timeout=200"))


def test_locked_database_is_one_line_naming_it_and_the_fix(tmp_path):
    path = tmp_path / "r.db"
    store = ImpatientStore(f"sqlite:///{path}")
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(StoreError) as info:
            store.upsert_host({"hostname": "h"})
    finally:
        holder.close()
    assert f"{path} is locked" in info.value.message and "fuser" in (info.value.fix or "")
    store.upsert_host({"hostname": "h"})  # and usable once the other process is done


def test_new_database_and_its_wal_are_owner_only(tmp_path):
    path = tmp_path / "new" / "deeper" / "r.db"
    store = Store(f"sqlite:///{path}")
    store.upsert_host({"hostname": "h"})  # a write: the WAL and shared memory exist now
    for name in ("r.db", "r.db-wal", "r.db-shm", "r.db.migrate-lock"):
        mode = stat.S_IMODE((path.parent / name).stat().st_mode)
        assert mode == 0o600, (name, oct(mode))
    for d in (path.parent, path.parent.parent):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d


def test_state_runtime_and_image_cache_are_closed_at_start(tmp_path):
    from virtbench.images.build import close_cache
    from virtbench.platforms.base import Paths

    state, runtime, cache = tmp_path / "state", tmp_path / "run", tmp_path / "cache" / "images"
    for d in (state, runtime, cache / "abc" / "rootfs"):
        d.mkdir(parents=True, mode=0o755)
        d.chmod(0o755)
    Paths(state=state, runtime=runtime).make_private()
    close_cache(cache)
    for d in (state, runtime, cache):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d
    fresh = Paths(state=tmp_path / "a" / "state", runtime=tmp_path / "a" / "run").make_private()
    assert stat.S_IMODE(fresh.state.stat().st_mode) == 0o700
    assert stat.S_IMODE(Path(tmp_path / "a").stat().st_mode) == 0o700


def test_locked_database_through_the_cli_names_it_and_the_fix(tmp_path):
    """Opening a store another process holds locked (here before its schema exists) waits
    10 s, then says so in one line, instead of "check the path ... and its permissions"."""
    path = tmp_path / "r.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        err = one_line_exit_2(vb("runs", "--db", f"sqlite:///{path}"))
    finally:
        holder.close()
    assert f"{path} is locked" in err and "fuser" in err and "permissions" not in err
