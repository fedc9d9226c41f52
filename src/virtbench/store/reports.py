"""The report_cache table: a stopped run's computed report, stored so its pages open at once.

The store keeps opaque bytes under a version string; what goes in them (and when a version
is stale) is decided by the caller (web/cache.py), which knows the report code.
"""
from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, select
from sqlalchemy.exc import SQLAlchemyError

from ..errors import StoreError
from .db import Store, now
from .models import ReportCache, Run


def load(store: Store, run_id: str, version: str) -> bytes | None:
    """The stored report of this version, or None (a Core read: a pooled page reads ten)."""
    with store.engine.connect() as conn:
        return conn.execute(select(ReportCache.data).where(ReportCache.run_id == run_id,
                                                           ReportCache.version == version)).scalar()


def save(store: Store, run_id: str, version: str, data: bytes) -> bool:
    """Replace the run's stored report; False if it could not be stored (only speed is lost:
    the run was deleted meanwhile, or another process stored it at the same moment)."""
    try:
        with store.session.begin() as s:
            s.execute(delete(ReportCache).where(ReportCache.run_id == run_id))
            s.add(ReportCache(run_id=run_id, version=version, created_at=now(), data=data))
    except (SQLAlchemyError, StoreError):  # StoreError: locked or disk full
        return False
    return True


def runs_without(store: Store, statuses: Sequence[str], limit: int) -> list[str]:
    """Newest runs in these statuses that have no stored report at all."""
    with store.session() as s:
        stored = select(ReportCache.run_id)
        return list(s.scalars(select(Run.id).where(Run.status.in_(list(statuses)), Run.id.not_in(stored))
                              .order_by(Run.created_at.desc()).limit(limit)))
