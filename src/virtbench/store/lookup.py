"""Runs as the read commands and the web take them: refused while they have nothing to read."""
from __future__ import annotations

from sqlalchemy import select

from ..errors import NoData
from .db import LATEST, Store
from .models import Execution, Run


def measured(store: Store, run_id: str) -> bool:
    """Whether the run recorded any execution (a failed one too: its report lists the failure)."""
    with store.session() as s:
        return s.scalar(select(Execution.id).where(Execution.run_id == run_id).limit(1)) is not None


def run_with_data(store: Store, ref: str = LATEST) -> Run:
    """store.run(ref), refused (NoData) while it has recorded nothing: the report of a queued run
    made up facts and said 'no failed executions', a comparison with one was an empty table."""
    run = store.run(ref)
    if not measured(store, run.id):
        raise NoData(f"run {run.id} is {run.status} and has no measurements yet: nothing to read",
                     "wait until it has measured (`virtbench runs` shows its status), or name another run")
    return run
