"""Database schema of the results store (SQLAlchemy 2). Changes go through an Alembic migration.

An execution is one run of one benchmark (or of the lifecycle steps) on one platform in one
round; it keeps the raw output and error text whatever happened. A sample is one metric value
from a successful execution, with unit and direction beside it.
"""
from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship


class Base(DeclarativeBase):
    pass


class Host(Base):
    __tablename__ = "hosts"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(64), unique=True)
    hostname: Mapped[str] = mapped_column(String(255))
    facts: Mapped[dict[str, Any]] = mapped_column(JSON)
    first_seen: Mapped[datetime] = mapped_column(DateTime)


class Run(Base):
    __tablename__ = "runs"
    __table_args__ = (Index("ix_runs_created_at", "created_at"),)
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(255))
    status: Mapped[str] = mapped_column(String(16), index=True)
    campaign: Mapped[dict[str, Any]] = mapped_column(JSON)
    campaign_source: Mapped[str] = mapped_column(Text, default="")
    seed: Mapped[int] = mapped_column(Integer)
    host_id: Mapped[int | None] = mapped_column(ForeignKey("hosts.id"))
    host_facts: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    """Facts at the start of this run (load, governor...), beside the host's stable ones."""
    image: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    provenance: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime)
    started_at: Mapped[datetime | None] = mapped_column(DateTime)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime)
    error: Mapped[str] = mapped_column(Text, default="")
    # Queue bookkeeping of the web app's worker (migration 0002); left empty by `virtbench run`.
    worker: Mapped[str | None] = mapped_column(String(128), default=None)
    """Id of the worker that claimed the run (claimed atomically while status is 'queued')."""
    worker_host: Mapped[str | None] = mapped_column(String(255), default=None)
    """Host of that worker: only a worker on the same host may resume the run."""
    target_host: Mapped[str | None] = mapped_column(String(255), default=None)
    """Host the run was scheduled for; None: the first worker that is free."""
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime, default=None)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    progress: Mapped[dict[str, Any] | None] = mapped_column(JSON, default=None)
    """Live progress written by the worker (step, log tail) for the web page."""
    owner: Mapped[str | None] = mapped_column(String(255), default=None)
    """The process that set the run running, `host|boot id|pid|start time` (migration 0009):
    a reader on that host tells a live run from one whose process died (store/owner.py)."""
    host: Mapped[Host | None] = relationship()
    platforms: Mapped[list[RunPlatform]] = relationship(back_populates="run", cascade="all, delete-orphan",
                                                          order_by="RunPlatform.position")
    benchmarks: Mapped[list[RunBenchmark]] = relationship(back_populates="run", cascade="all, delete-orphan",
                                                            order_by="RunBenchmark.position")

    @property
    def baseline(self) -> str:
        """The platform every other is compared with, as the stored campaign names it (runs
        made before the key existed compared with native)."""
        return str(self.campaign.get("baseline", "native"))


class RunPlatform(Base):
    __tablename__ = "run_platforms"
    __table_args__ = (UniqueConstraint("run_id", "name"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(Integer)
    name: Mapped[str] = mapped_column(String(255))
    type: Mapped[str] = mapped_column(String(64))
    label: Mapped[str] = mapped_column(String(255))
    kind: Mapped[str] = mapped_column(String(16), default="", server_default="")
    """baseline, container, sandbox, vm or stack, as declared when the run was made."""
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    versions: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    run: Mapped[Run] = relationship(back_populates="platforms")


class RunBenchmark(Base):
    __tablename__ = "run_benchmarks"
    __table_args__ = (UniqueConstraint("run_id", "key"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(Integer)
    key: Mapped[str] = mapped_column(String(255))
    name: Mapped[str] = mapped_column(String(64))
    params: Mapped[dict[str, Any]] = mapped_column(JSON)
    tool_version: Mapped[str] = mapped_column(Text, default="")
    metrics: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON, default=list)
    """Each metric's declaration as the run measured it: name, unit, higher_is_better, category,
    description (migration 0006). Reports read these, never today's plugin."""
    run: Mapped[Run] = relationship(back_populates="benchmarks")


class Execution(Base):
    __tablename__ = "executions"
    __table_args__ = (UniqueConstraint("run_id", "round", "platform", "benchmark", "host", name="uq_executions_point"),
                      Index("ix_executions_run_status", "run_id", "status"))
    """ix_executions_run_status (migration 0002): execution counts per run and status from the index alone."""
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    round: Mapped[int] = mapped_column(Integer)
    warmup: Mapped[bool] = mapped_column(Boolean)
    platform: Mapped[str] = mapped_column(String(255))
    benchmark: Mapped[str] = mapped_column(String(255))
    instance: Mapped[str] = mapped_column(String(255), default="")
    status: Mapped[str] = mapped_column(String(16))
    argv: Mapped[list[str]] = mapped_column(JSON, default=list)
    exit_code: Mapped[int | None] = mapped_column(Integer)
    stdout: Mapped[str] = mapped_column(Text, default="")
    stderr: Mapped[str] = mapped_column(Text, default="")
    error: Mapped[str] = mapped_column(Text, default="")
    started_at: Mapped[datetime] = mapped_column(DateTime)
    finished_at: Mapped[datetime] = mapped_column(DateTime)
    duration_s: Mapped[float] = mapped_column(Float)
    host: Mapped[str] = mapped_column(String(63), default="", server_default="")
    """Inventory name of the host that measured; '' for the machine the run started on (0007)."""


class Sample(Base):
    __tablename__ = "samples"
    __table_args__ = (
        UniqueConstraint("run_id", "round", "platform", "benchmark", "metric", "instance", "host",
                         name="uq_samples_point"),
        Index("ix_samples_lookup", "run_id", "benchmark", "metric", "platform"),
        Index("ix_samples_run_order", "run_id", "instance", "id"),
    )
    """ix_samples_run_order (migration 0008, replacing 0006's ix_samples_run_id): a run's samples
    (instance 0) in the order stored, without a sort, on SQLite and PostgreSQL alike (with the
    run_id-only index PostgreSQL walked the whole table in id order instead)."""
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    execution_id: Mapped[int] = mapped_column(ForeignKey("executions.id", ondelete="CASCADE"), index=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    round: Mapped[int] = mapped_column(Integer)
    warmup: Mapped[bool] = mapped_column(Boolean)
    platform: Mapped[str] = mapped_column(String(255))
    benchmark: Mapped[str] = mapped_column(String(255))
    metric: Mapped[str] = mapped_column(String(128))
    value: Mapped[float] = mapped_column(Float)
    unit: Mapped[str] = mapped_column(String(32))
    higher_is_better: Mapped[bool] = mapped_column(Boolean)
    category: Mapped[str] = mapped_column(String(32))
    instance: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    """0: the value of the execution (for several instances at once: the mean per instance,
    and `<metric>_total` the sum); 1..N: each instance's own value (migration 0003)."""
    host: Mapped[str] = mapped_column(String(63), default="", server_default="")
    """As Execution.host (migration 0007)."""


class Worker(Base):
    """A `virtbench worker` process, seen through its heartbeat (migration 0002)."""

    __tablename__ = "workers"
    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    hostname: Mapped[str] = mapped_column(String(255), index=True)
    pid: Mapped[int] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(16))
    run_id: Mapped[str | None] = mapped_column(String(64), default=None)
    started_at: Mapped[datetime] = mapped_column(DateTime)
    heartbeat_at: Mapped[datetime] = mapped_column(DateTime)
    facts: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    """What the worker found on its host: virtbench version, platform availability."""


class ReportCache(Base):
    """A run's computed statistics, kept so a page over a large run answers at once (migration 0002).

    `version` says what the data was computed from (run status, execution count, analysis
    code); anything else is recomputed. A cache only: deleting every row loses nothing.
    """

    __tablename__ = "report_cache"
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    version: Mapped[str] = mapped_column(String(255))
    created_at: Mapped[datetime] = mapped_column(DateTime)
    data: Mapped[bytes] = mapped_column(LargeBinary)
    """zlib-compressed JSON."""


class Attachment(Base):
    """Per-execution data that is not a scalar sample (migration 0004): an HDR histogram, a
    probe's time series or counters. `status` is the attachment's own: a probe that failed
    stores `failed` with its error here and never touches the execution's status."""

    __tablename__ = "attachments"
    __table_args__ = (UniqueConstraint("execution_id", "name", name="uq_attachments_execution_name"),
                      Index("ix_attachments_run_kind", "run_id", "kind"))
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    execution_id: Mapped[int] = mapped_column(ForeignKey("executions.id", ondelete="CASCADE"))
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(128))
    kind: Mapped[str] = mapped_column(String(32))
    """What reads it: 'hdr', 'probe:energy', 'probe:perf', 'probe:pressure', 'host-guard'..."""
    media_type: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16), default="ok", server_default="ok")
    error: Mapped[str] = mapped_column(Text, default="", server_default="")
    data: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(DateTime)

    def json(self) -> Any:
        """The decoded data of an `application/json` attachment."""
        if self.media_type != JSON_MEDIA_TYPE:
            raise ValueError(f"attachment {self.name!r} is {self.media_type}, not JSON")
        return json.loads(self.data)


JSON_MEDIA_TYPE = "application/json"
