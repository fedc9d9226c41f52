"""The results store: any SQLAlchemy URL, SQLite by default. Every sample is committed the
moment it is measured, in one transaction with its execution, so a kill loses at most the
execution in progress, and the unique keys make a resumed run unable to write a duplicate.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event, select, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import ArgumentError, OperationalError, SQLAlchemyError
from sqlalchemy.orm import sessionmaker

from ..errors import InputError, VirtbenchError
from ..extras import require
from .models import JSON_MEDIA_TYPE, Attachment, Execution, Host, Run, RunBenchmark, RunPlatform, Sample

HERE = Path(__file__).parent
MIGRATION_LOCK_KEY = 0x76627363  # "vbsc": the advisory lock of schema migrations on PostgreSQL


def default_url() -> str:
    """VIRTBENCH_DB if set; else a file under /var/lib/virtbench (root) or ~/.local/share."""
    if url := os.environ.get("VIRTBENCH_DB"):
        return url
    base = Path("/var/lib/virtbench") if os.geteuid() == 0 else Path.home() / ".local/share/virtbench"
    return f"sqlite:///{base / 'virtbench.db'}"


def now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _alembic_config(connection: Connection) -> Any:
    from alembic.config import Config

    cfg = Config(str(HERE / "alembic.ini"))
    cfg.set_main_option("script_location", str(HERE / "migrations"))
    cfg.attributes["connection"] = connection
    return cfg


@cache
def head_revision() -> str:
    """The newest migration's revision, read from the scripts' text (`revision = '0006'`, and
    the one no other names as its down_revision), so a current schema is recognized without
    importing Alembic; tests/unit/test_store.py checks it against Alembic's own answer."""
    revisions, downs = set(), set()
    for path in (HERE / "migrations" / "versions").glob("*.py"):
        src = path.read_text()
        if m := re.search(r"^revision\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", src, re.M):
            revisions.add(m.group(1))
        if m := re.search(r"^down_revision\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", src, re.M):
            downs.add(m.group(1))
    heads = revisions - downs
    return heads.pop() if len(heads) == 1 else ""  # several heads: Alembic decides (and complains)


class DatabaseBusy(OperationalError):
    """A statement gave up waiting for a lock another connection holds (SQLite busy,
    PostgreSQL lock_timeout): nothing is wrong, a retry later succeeds. Raised in place of
    the driver's error (_busy), so callers tell it from a broken database."""


def _busy(ctx: Any) -> BaseException | None:
    orig = ctx.original_exception
    text = str(orig).lower()
    if "database is locked" in text or "database table is locked" in text or getattr(orig, "sqlstate", "") == "55P03":
        return DatabaseBusy(ctx.statement, None, orig, hide_parameters=True)
    return None


class Store:
    def __init__(self, url: str | None = None, *, migrate: bool = True, busy_timeout_s: float | None = None) -> None:
        """busy_timeout_s: how long a statement waits for another connection's lock before
        DatabaseBusy (default: 10 s on SQLite, PostgreSQL's own setting)."""
        self.url = url or default_url()
        if self.url.startswith(("postgresql", "postgres:")):
            require("postgres", "a PostgreSQL store")
        self.busy_ms = int(1000 * (10.0 if busy_timeout_s is None else busy_timeout_s))
        connect_args: dict[str, Any] = {}
        if busy_timeout_s is not None and self.url.startswith(("postgresql", "postgres:")):
            connect_args["options"] = f"-c lock_timeout={self.busy_ms}"
        try:
            if self.url.startswith("sqlite:///") and self.url != "sqlite:///:memory:":
                Path(self.url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
            self.engine: Engine = create_engine(self.url, future=True, connect_args=connect_args)
        except (ArgumentError, ImportError) as exc:
            raise InputError(f"cannot use database URL {self.url!r}: {exc}",
                             "give an SQLAlchemy URL such as sqlite:///results.db or "
                             "postgresql+psycopg://user@host/db") from None
        if self.engine.dialect.name == "sqlite":
            busy_ms = self.busy_ms
            event.listen(self.engine, "connect", lambda conn, record: _sqlite_pragmas(conn, busy_ms))
        event.listen(self.engine, "handle_error", _busy)
        self.session = sessionmaker(self.engine, expire_on_commit=False)
        if migrate:
            self.migrate()

    # -- schema ----------------------------------------------------------------------
    def migrate(self) -> None:
        """Bring the schema to the newest revision. Processes opening the same database at once
        (a server and its worker, two reports after an upgrade) take turns: one migrates, the
        others then find the schema current (before, the second failed with `duplicate column`)."""
        if self._current_revision() == head_revision():
            return  # the common case, without loading Alembic and every migration script
        from alembic import command

        try:
            with self._migration_lock(), self.engine.begin() as conn:
                if self.engine.dialect.name == "postgresql":  # held until this transaction ends
                    conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
                command.upgrade(_alembic_config(conn), "head")
        except OperationalError as exc:
            raise VirtbenchError(f"cannot open the results database {self.url}: {exc.orig}",
                                 "check the path or URL and its permissions") from None

    def _current_revision(self) -> str | None:
        """The schema's revision as Alembic recorded it; None when there is no schema yet."""
        try:
            with self.engine.connect() as conn:
                return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
        except SQLAlchemyError:
            return None

    @contextmanager
    def _migration_lock(self) -> Iterator[None]:
        """An SQLite file's migrations are serialized by an flock on a file beside it (SQLite's
        own locks do not cover Alembic's read of the current revision); PostgreSQL's by an
        advisory lock inside the migration's transaction (migrate)."""
        database = self.engine.url.database if self.engine.dialect.name == "sqlite" else None
        if not database or database == ":memory:":
            yield
            return
        try:
            f = open(f"{database}.migrate-lock", "a")  # closed by the with below
        except OSError:  # a directory this user may not write: reading needs no migration lock
            yield
            return
        with f:
            fcntl.flock(f, fcntl.LOCK_EX)  # released when the file is closed, also by a kill
            yield

    @property
    def dialect(self) -> str:
        """The database kind (sqlite, postgresql), for status pages."""
        return self.engine.dialect.name

    def schema_version(self) -> tuple[str | None, str]:
        """(current revision, newest revision)."""
        from alembic.runtime.migration import MigrationContext
        from alembic.script import ScriptDirectory

        with self.engine.connect() as conn:
            current = MigrationContext.configure(conn).get_current_revision()
            head = ScriptDirectory.from_config(_alembic_config(conn)).get_current_head()
        return current, head or ""

    # -- hosts and runs --------------------------------------------------------------
    def upsert_host(self, facts: dict[str, Any]) -> int:
        ident = "|".join(str(facts.get(k, "")) for k in ("hostname", "machine_id", "cpu_model", "arch"))
        fingerprint = hashlib.sha256(ident.encode()).hexdigest()
        with self.session.begin() as s:
            host = s.scalar(select(Host).where(Host.fingerprint == fingerprint))
            if host is None:
                host = Host(fingerprint=fingerprint, hostname=str(facts.get("hostname", "")),
                            facts=facts, first_seen=now())
                s.add(host)
            else:
                host.facts = facts
            s.flush()
            return host.id

    def create_run(self, *, run_id: str, name: str, campaign: dict[str, Any], source: str, seed: int,
                   host_id: int | None, host_facts: dict[str, Any], image: dict[str, Any],
                   provenance: dict[str, Any], platforms: Sequence[dict[str, Any]],
                   benchmarks: Sequence[dict[str, Any]], status: str = "running") -> None:
        with self.session.begin() as s:
            run = Run(id=run_id, name=name, status=status, campaign=campaign, campaign_source=source,
                      seed=seed, host_id=host_id, host_facts=host_facts, image=image, provenance=provenance,
                      created_at=now(), started_at=now() if status == "running" else None)
            run.platforms = [RunPlatform(position=i, **p) for i, p in enumerate(platforms)]
            run.benchmarks = [RunBenchmark(position=i, **b) for i, b in enumerate(benchmarks)]
            s.add(run)

    def fill_run(self, run_id: str, *, host_id: int | None, host_facts: dict[str, Any], image: dict[str, Any],
                 provenance: dict[str, Any], platforms: Sequence[dict[str, Any]],
                 benchmarks: Sequence[dict[str, Any]]) -> None:
        """Complete a queued run with what is only known once it starts on its host."""
        with self.session.begin() as s:
            run = s.get(Run, run_id)
            if run is None:
                raise InputError(f"no run {run_id!r} in {self.url}")
            run.host_id, run.host_facts, run.image, run.provenance = host_id, host_facts, image, provenance
            run.platforms = [RunPlatform(position=i, **p) for i, p in enumerate(platforms)]
            run.benchmarks = [RunBenchmark(position=i, **b) for i, b in enumerate(benchmarks)]

    def update_run(self, run_id: str, **fields: Any) -> None:
        with self.session.begin() as s:
            run = s.get(Run, run_id)
            if run is None:
                raise InputError(f"no run {run_id!r} in {self.url}")
            for key, value in fields.items():
                setattr(run, key, value)

    def set_status(self, run_id: str, status: str, error: str = "") -> None:
        fields: dict[str, Any] = {"status": status, "error": error}
        if status in ("finished", "failed", "interrupted"):
            fields["finished_at"] = now()
        if status == "running":
            fields["started_at"] = now()
        self.update_run(run_id, **fields)

    def run(self, ref: str = "latest") -> Run:
        """A run by id, unique id prefix, or 'latest'."""
        with self.session() as s:
            if ref == "latest":
                run = s.scalar(select(Run).order_by(Run.created_at.desc()).limit(1))
                if run is None:
                    raise InputError(f"no runs in {self.url} yet", "run `virtbench run --quick` first")
            else:
                matches = s.scalars(select(Run).where(Run.id.startswith(ref, autoescape=True)).limit(2)).all()
                if len(matches) != 1:
                    what = "no run" if not matches else "more than one run"
                    raise InputError(f"{what} matches {ref!r} in {self.url}", "see `virtbench runs` for run ids")
                run = matches[0]
            _ = run.platforms, run.benchmarks, run.host  # load while the session is open
            return run

    def runs(self, limit: int = 50) -> list[Run]:
        with self.session() as s:
            return list(s.scalars(select(Run).order_by(Run.created_at.desc()).limit(limit)))

    # -- measurements ----------------------------------------------------------------
    def done_units(self, run_id: str, host: str | None = None) -> set[tuple[int, str, str]]:
        """(round, platform, benchmark) of every execution already recorded (on one host)."""
        with self.session() as s:
            q = select(Execution.round, Execution.platform, Execution.benchmark).where(Execution.run_id == run_id)
            if host is not None:
                q = q.where(Execution.host == host)
            return {(r, p, b) for r, p, b in s.execute(q)}

    def forget_unreached(self, run_id: str, host: str, marker: str) -> int:
        """Delete a host's executions recorded as never reached (their error starts with marker):
        placeholders of a host that was lost, to be measured now by a resume."""
        with self.session.begin() as s:
            found = list(s.scalars(select(Execution).where(Execution.run_id == run_id, Execution.host == host,
                                                           Execution.status == "failed",
                                                           Execution.error.startswith(marker))))
            for ex in found:
                s.delete(ex)
            return len(found)

    def record(self, *, run_id: str, round: int, warmup: bool, platform: str, benchmark: str,
               status: str, started_at: datetime, finished_at: datetime, duration_s: float,
               instance: str = "", argv: Sequence[str] = (), exit_code: int | None = None,
               stdout: str = "", stderr: str = "", error: str = "",
               samples: Iterable[dict[str, Any]] = (),
               attachments: Iterable[dict[str, Any]] = (), host: str = "") -> int:
        """One execution, its samples and its attachments (keyword arguments of
        `add_attachment` without execution_id), in one transaction; returns the execution id."""
        with self.session.begin() as s:
            ex = Execution(run_id=run_id, round=round, warmup=warmup, platform=platform, benchmark=benchmark,
                           instance=instance, status=status, argv=list(argv), exit_code=exit_code,
                           stdout=stdout, stderr=stderr, error=error, started_at=started_at,
                           finished_at=finished_at, duration_s=duration_s, host=host)
            s.add(ex)
            s.flush()
            for sample in samples:
                s.add(Sample(execution_id=ex.id, run_id=run_id, round=round, warmup=warmup,
                             platform=platform, benchmark=benchmark, host=host, **sample))
            for att in attachments:
                s.add(_attachment(ex.id, run_id, **att))
            return ex.id

    def samples(self, run_id: str, *, include_warmup: bool = False, per_instance: bool = False) -> list[Sample]:
        """The run's samples; per_instance adds each instance's own values (instance >= 1)
        of multi-instance executions, which analysis otherwise sees through instance 0."""
        with self.session() as s:
            q = select(Sample).where(Sample.run_id == run_id)
            if not per_instance:
                q = q.where(Sample.instance == 0)
            if not include_warmup:
                q = q.where(Sample.warmup.is_(False))
            return list(s.scalars(q.order_by(Sample.id)))

    def executions(self, run_id: str, *, status: str | None = None) -> list[Execution]:
        with self.session() as s:
            q = select(Execution).where(Execution.run_id == run_id)
            if status:
                q = q.where(Execution.status == status)
            return list(s.scalars(q.order_by(Execution.id)))

    # -- attachments (migration 0004) --------------------------------------------------
    def add_attachment(self, execution_id: int, name: str, kind: str, data: bytes | dict[str, Any] | list[Any], *,
                       media_type: str = "", status: str = "ok", error: str = "") -> int:
        """Store per-execution data that is not a scalar sample; a dict or list is stored as
        JSON. A failed probe still stores its attachment, with status 'failed' and the error,
        so what went wrong is kept beside the execution it concerns."""
        with self.session.begin() as s:
            ex = s.get(Execution, execution_id)
            if ex is None:
                raise InputError(f"no execution {execution_id} in {self.url}")
            att = _attachment(execution_id, ex.run_id, name=name, kind=kind, data=data, media_type=media_type,
                              status=status, error=error)
            s.add(att)
            s.flush()
            return att.id

    def attachments(self, run_id: str, *, kind: str | None = None, name: str | None = None,
                    execution_ids: Sequence[int] | None = None) -> list[Attachment]:
        """A run's attachments in execution order, optionally of one kind or name (`kind` ending
        in ':' selects a prefix, e.g. 'probe:')."""
        with self.session() as s:
            q = select(Attachment).where(Attachment.run_id == run_id)
            if kind is not None:
                q = q.where(Attachment.kind.startswith(kind, autoescape=True) if kind.endswith(":")
                            else Attachment.kind == kind)
            if name is not None:
                q = q.where(Attachment.name == name)
            if execution_ids is not None:
                q = q.where(Attachment.execution_id.in_(list(execution_ids)))
            return list(s.scalars(q.order_by(Attachment.execution_id, Attachment.id)))


def _attachment(execution_id: int, run_id: str, *, name: str, kind: str, data: bytes | dict[str, Any] | list[Any],
                media_type: str = "", status: str = "ok", error: str = "") -> Attachment:
    if isinstance(data, bytes):
        if not media_type:
            raise ValueError(f"attachment {name!r}: bytes need a media_type")
    else:
        data, media_type = json.dumps(data, separators=(",", ":")).encode(), media_type or JSON_MEDIA_TYPE
    return Attachment(execution_id=execution_id, run_id=run_id, name=name, kind=kind, media_type=media_type,
                      status=status, error=error, data=data, created_at=now())


def _sqlite_pragmas(dbapi_conn: Any, busy_ms: int) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute(f"PRAGMA busy_timeout={int(busy_ms)}")
    cur.close()


def redact(url: str) -> str:
    """The URL without its password, for logs."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001
        return "<database>"
