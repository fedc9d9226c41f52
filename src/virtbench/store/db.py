"""The results store: any SQLAlchemy URL, SQLite by default. Every sample is committed the
moment it is measured, in one transaction with its execution, so a kill loses at most the
execution in progress, and the unique keys make a resumed run unable to write a duplicate."""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import cache, wraps
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import create_engine, event, select, text, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import ArgumentError, OperationalError, SQLAlchemyError
from sqlalchemy.orm import sessionmaker

from ..errors import InputError, NoData, StoreError
from ..extras import require
from ..filemodes import PRIVATE_FILE
from . import owner as owners
from .files import DISK_FULL_FIX, LOW_SPACE, create_private, free_bytes, size_text
from .models import JSON_MEDIA_TYPE, Attachment, Execution, Host, Run, RunBenchmark, RunPlatform, Sample

HERE = Path(__file__).parent
MIGRATION_LOCK_KEY = 0x76627363  # "vbsc": the advisory lock of schema migrations on PostgreSQL


def default_path() -> Path:
    """The SQLite file used when nothing else is given: under /var/lib/virtbench (root) or ~/.local/share."""
    base = Path("/var/lib/virtbench") if os.geteuid() == 0 else Path.home() / ".local/share/virtbench"
    return base / "virtbench.db"


def default_url() -> str:
    """VIRTBENCH_DB if set; else default_path()."""
    if url := os.environ.get("VIRTBENCH_DB"):
        return url
    return f"sqlite:///{default_path()}"


BUSY_TIMEOUT_MS = 10_000
"""How long an SQLite statement waits for another process's write transaction to end."""

T = TypeVar("T")


def _writes(method: Callable[..., T]) -> Callable[..., T]:
    """A write that fails in the database (locked, disk full, connection lost) raises one
    StoreError naming the cause and the fix, with no password in it."""
    @wraps(method)
    def wrapper(self: Store, *args: Any, **kwargs: Any) -> T:
        try:
            return method(self, *args, **kwargs)
        except OperationalError as exc:
            raise self.failure(exc, "write") from exc

    return wrapper


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


LATEST = "latest"  # the run id that names the newest finished run with measurements


class DatabaseBusy(StoreError):
    """A statement gave up waiting for a lock another connection holds (SQLite busy,
    PostgreSQL lock_timeout): nothing is wrong with the database and a retry later succeeds
    (the web app answers 503 with Retry-After)."""


class Store:
    def __init__(self, url: str | None = None, *, migrate: bool = True, busy_timeout_s: float | None = None) -> None:
        """busy_timeout_s: how long a statement waits for another connection's lock before
        DatabaseBusy (default: 10 s on SQLite, PostgreSQL's own setting)."""
        self.url = url or default_url()
        self.shown = redact(self.url)
        """The URL without its password: the only form of it any message or log may carry."""
        if self.url.startswith(("postgresql", "postgres:")):
            require("postgres", "a PostgreSQL store")
        self.busy_ms = BUSY_TIMEOUT_MS if busy_timeout_s is None else int(1000 * busy_timeout_s)
        connect_args: dict[str, Any] = {}
        if busy_timeout_s is not None and self.url.startswith(("postgresql", "postgres:")):
            connect_args["options"] = f"-c lock_timeout={self.busy_ms}"
        try:
            self.engine: Engine = create_engine(self.url, future=True, connect_args=connect_args)
        except (ArgumentError, ImportError, ValueError) as exc:
            raise InputError(f"cannot use database URL {self.shown}: {self.scrub(str(exc))}",
                             "give an SQLAlchemy URL such as sqlite:///results.db or "
                             "postgresql+psycopg://user@host/db") from None
        self.path = self._sqlite_path()
        if self.path is not None:
            create_private(self.path, self.shown, tighten=self.path == default_path())
        if self.engine.dialect.name == "sqlite":
            busy_ms = self.busy_ms
            event.listen(self.engine, "connect", lambda conn, _record: _sqlite_pragmas(conn, busy_ms))
        event.listen(self.engine, "handle_error", self._unusable)
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
            raise self.failure(exc, "open") from None

    def _sqlite_path(self) -> Path | None:
        """The database file of an SQLite store (None: another database, or in memory)."""
        database = self.engine.url.database if self.engine.dialect.name == "sqlite" else None
        return Path(database) if database and database != ":memory:" and not database.startswith("file:") else None

    def scrub(self, message: str) -> str:
        """message with this store's URL and password replaced by their redacted form: the one
        redaction every text about the store goes through (SQLAlchemy's own errors may embed the URL)."""
        message = message.replace(self.url, self.shown)
        password = _password(self.url)
        return message.replace(password, "***") if password else message

    def failure(self, exc: BaseException, doing: str) -> StoreError:
        """A database error as one line: locked, disk full (with the free space), or what the
        database said, always without the password."""
        return self._unusable_now(exc) or StoreError(
            f"cannot {doing} the results database {self.shown}: {self._said(exc) or type(exc).__name__}",
            "check the path or URL, its permissions and that the database server is up")

    def _said(self, exc: BaseException) -> str:
        orig = getattr(exc, "orig", None) or exc
        lines = self.scrub(str(orig)).strip().splitlines()
        return lines[0] if lines else ""

    def _unusable_now(self, exc: BaseException) -> StoreError | None:
        """Locked or disk full: nothing any statement can do until another process or the
        administrator acts; None for every other error."""
        said, where = self._said(exc), f"the results database {self.shown}"
        orig = getattr(exc, "orig", None)
        if "database is locked" in said or "database table is locked" in said or "could not obtain lock" in said \
                or getattr(orig, "sqlstate", "") == "55P03":  # PostgreSQL: lock_not_available (lock_timeout)
            return DatabaseBusy(f"{where} is locked: another process holds a write transaction on it "
                                f"(waited {self.busy_ms / 1000:g} s)",
                              "let that process finish (another virtbench run or worker, an open sqlite3 shell; "
                              + (f"`fuser {self.path}` names it" if self.path else "see pg_stat_activity")
                              + "), then try again")
        free = free_bytes(self.path.parent) if self.path else None
        low = free is not None and free < LOW_SPACE and any(w in said for w in ("disk I/O error", "unable to open"))
        if "disk is full" in said or "No space left" in said or low:
            shown_free = f"{size_text(free)} free" if free is not None else "no space left"
            return StoreError(f"disk full: {where} cannot be written ({shown_free} on its filesystem)",
                              DISK_FULL_FIX)
        return None

    def _unusable(self, context: Any) -> None:
        """SQLAlchemy's handle_error hook: a locked or full database raises one StoreError from
        any statement (reads, the queue's writes, the web's), not a traceback."""
        if isinstance(context.sqlalchemy_exception, OperationalError):
            if (err := self._unusable_now(context.sqlalchemy_exception)) is not None:
                raise err

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
            f = os.fdopen(os.open(f"{database}.migrate-lock", os.O_WRONLY | os.O_APPEND | os.O_CREAT, PRIVATE_FILE),
                          "a")  # closed by the with below
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
    @_writes
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

    @_writes
    def create_run(self, *, run_id: str, name: str, campaign: dict[str, Any], source: str, seed: int,
                   host_id: int | None, host_facts: dict[str, Any], image: dict[str, Any],
                   provenance: dict[str, Any], platforms: Sequence[dict[str, Any]],
                   benchmarks: Sequence[dict[str, Any]], status: str = "running") -> None:
        with self.session.begin() as s:
            run = Run(id=run_id, name=name, status=status, campaign=campaign, campaign_source=source,
                      seed=seed, host_id=host_id, host_facts=host_facts, image=image, provenance=provenance,
                      created_at=now(), started_at=now() if status == "running" else None,
                      owner=owners.identity() if status == "running" else None)
            run.platforms = [RunPlatform(position=i, **p) for i, p in enumerate(platforms)]
            run.benchmarks = [RunBenchmark(position=i, **b) for i, b in enumerate(benchmarks)]
            s.add(run)

    @_writes
    def fill_run(self, run_id: str, *, host_id: int | None, host_facts: dict[str, Any], image: dict[str, Any],
                 provenance: dict[str, Any], platforms: Sequence[dict[str, Any]],
                 benchmarks: Sequence[dict[str, Any]]) -> None:
        """Complete a queued run with what is only known once it starts on its host."""
        with self.session.begin() as s:
            run = s.get(Run, run_id)
            if run is None:
                raise InputError(f"no run {run_id!r} in {self.shown}")
            run.host_id, run.host_facts, run.image, run.provenance = host_id, host_facts, image, provenance
            run.platforms = [RunPlatform(position=i, **p) for i, p in enumerate(platforms)]
            run.benchmarks = [RunBenchmark(position=i, **b) for i, b in enumerate(benchmarks)]

    @_writes
    def update_run(self, run_id: str, **fields: Any) -> None:
        with self.session.begin() as s:
            run = s.get(Run, run_id)
            if run is None:
                raise InputError(f"no run {run_id!r} in {self.shown}")
            for key, value in fields.items():
                setattr(run, key, value)

    def state(self, run_id: str) -> dict[str, Any]:
        """A kind's state kept for resume (adaptive log, noise note): the run's provenance."""
        return dict(self.run(run_id).provenance or {})

    def set_state(self, run_id: str, key: str, value: Any) -> None:
        self.update_run(run_id, provenance={**self.state(run_id), key: value})

    def set_status(self, run_id: str, status: str, error: str = "") -> None:
        fields: dict[str, Any] = {"status": status, "error": error}
        if status in ("finished", "failed", "interrupted"):
            fields["finished_at"] = now()
        if status == "running":  # this process measures it now (see reap_dead)
            fields["started_at"], fields["owner"] = now(), owners.identity()
        self.update_run(run_id, **fields)

    def reap_dead(self) -> list[str]:
        """Mark `running` runs whose process died on this host (kill -9, OOM kill, reboot)
        interrupted, so they can be resumed, cancelled or deleted; returns their ids. Each
        update is conditional on the owner read, so a run resumed meanwhile is left alone.
        Best effort: a store this process may not write keeps showing the stored status."""
        with self.session() as s:
            running = s.execute(select(Run.id, Run.owner).where(Run.status == "running",
                                                                Run.owner.is_not(None))).all()
        reaped = []
        for run_id, owner in running:
            if not owners.is_dead(owner):
                continue
            try:
                with self.engine.begin() as conn:
                    done = conn.execute(update(Run).where(Run.id == run_id, Run.status == "running",
                                                          Run.owner == owner)
                                        .values(status="interrupted", finished_at=now(),
                                                error=f"its process ({owners.describe(owner)}) ended "
                                                      "without stopping it (killed or crashed)")).rowcount
            except (OperationalError, StoreError):
                continue
            if done:
                reaped.append(run_id)
        return reaped

    def run(self, ref: str = LATEST) -> Run:
        """A run by id, unique id prefix, or 'latest': the newest finished run with measurements
        (a queued run, or one still measuring, has nothing to report yet)."""
        self.reap_dead()
        with self.session() as s:
            if ref == LATEST:
                measured = select(Execution.id).where(Execution.run_id == Run.id).exists()
                run = s.scalar(select(Run).where(Run.status == "finished", measured)
                               .order_by(Run.created_at.desc()).limit(1))
                if run is None:
                    newest = s.scalar(select(Run).order_by(Run.created_at.desc()).limit(1))
                    if newest is None:
                        raise InputError(f"no runs in {self.shown} yet", "run `virtbench run --quick` first")
                    raise NoData(f"no finished run with measurements in {self.shown} yet (the newest, {newest.id}, "
                                 f"is {newest.status})", "wait until it has finished, or name a run (`virtbench runs`)")
            elif (exact := s.get(Run, ref)) is not None:  # an id that is also the prefix of another's
                run = exact
            else:
                matches = s.scalars(select(Run).where(Run.id.startswith(ref, autoescape=True)).limit(2)).all()
                if len(matches) != 1:
                    what = "no run" if not matches else "more than one run"
                    raise InputError(f"{what} matches {ref!r} in {self.shown}", "see `virtbench runs` for run ids")
                run = matches[0]
            _ = run.platforms, run.benchmarks, run.host  # load while the session is open
            return run

    def runs(self, limit: int = 50) -> list[Run]:
        self.reap_dead()
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

    @_writes
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

    @_writes
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
    @_writes
    def add_attachment(self, execution_id: int, name: str, kind: str, data: bytes | dict[str, Any] | list[Any], *,
                       media_type: str = "", status: str = "ok", error: str = "") -> int:
        """Store per-execution data that is not a scalar sample; a dict or list is stored as
        JSON. A failed probe still stores its attachment, with status 'failed' and the error,
        so what went wrong is kept beside the execution it concerns."""
        with self.session.begin() as s:
            ex = s.get(Execution, execution_id)
            if ex is None:
                raise InputError(f"no execution {execution_id} in {self.shown}")
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
    cur.execute(f"PRAGMA busy_timeout={int(busy_ms)}")  # first: switching to WAL may wait for a lock too
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA journal_mode=WAL")
    cur.close()


def redact(url: str) -> str:
    """The URL without its password, for messages and logs."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - not even parseable: nothing of it is shown
        return "<database>"


def _password(url: str) -> str:
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).password or ""
    except Exception:  # noqa: BLE001 - unparseable: the userinfo as written, if any
        m = re.match(r"^[^:/]+://[^:@/]*:([^@/]*)@", url)
        return m.group(1) if m else ""


