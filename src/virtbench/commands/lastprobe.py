"""Read-only answers while a run measures: `doctor` and `study list` probe by starting tiny
instances, which must not happen while a run measures on this host (runner/hostlock.py). Each
fresh answer is saved; while the host is busy (and without --wait) the last one is given
instead of a refusal, with the time it was probed."""
from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from .shared import errconsole


def _path(paths: Any, name: str) -> Any:
    return paths.state / "last-probe" / f"{name}.json"


def probe_or_last(paths: Any, name: str, what: str, wait: bool, compute: Callable[[], Any]) -> tuple[Any, str]:
    """(answer, probed at: ISO time in UTC): compute() under the host lock, saved; while a run
    measures here, the saved answer of the last probe (HostBusy again if there is none)."""
    from ..runner import hostlock

    try:
        with hostlock.hold(paths, what, wait=wait, log=errconsole.print):
            answer = compute()
    except hostlock.HostBusy as busy:
        try:
            saved = json.loads(_path(paths, name).read_text())
        except (OSError, ValueError):
            raise busy from None  # nothing probed before: the refusal, naming who measures
        errconsole.print(f"a run is measuring on this host: the answer of the probe at {saved['probed_at']} "
                         "(add --wait for a fresh one after the run)", markup=False)
        return saved["answer"], saved["probed_at"]
    probed_at = datetime.now(UTC).isoformat(timespec="seconds")
    path = _path(paths, name)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"probed_at": probed_at, "answer": answer}, default=str))
        os.replace(tmp, path)
    except OSError as exc:  # the answer stands; only the next busy-time answer is lost
        errconsole.print(f"could not save the probe's answer to {path}: {exc}", markup=False)
    return answer, probed_at
