"""What the web pages and the API read, as plain dicts: the store's read API for browsing.

Every query is a SQLAlchemy expression with bound parameters (no SQL text is ever built
from input), selects only the columns it shows, and is served by an index, so pages stay
fast with hundreds of thousands of samples: runs by created_at, executions and samples
by run_id (ix_samples_lookup), workers by hostname.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import selectinload

from ..errors import InputError, NoData
from ..rounds import Rounds
from .db import Store, now
from .models import Execution, Host, Run, Sample
from .models import Worker as WorkerRow
from .queue import hostname, worker_alive

ACTIVE = ("queued", "running")
TERMINAL = ("finished", "failed", "interrupted", "cancelled")
STATUSES = ("queued", "running", "finished", "failed", "interrupted", "cancelled")


class NotFound(LookupError):
    """The id names nothing in this store (404)."""


def iso(dt: datetime | None) -> str | None:
    return dt.isoformat(timespec="seconds") + "Z" if dt else None


def expected_total(campaign: dict[str, Any], platforms: int | None = None, benchmarks: int | None = None) -> int:
    """Executions a run will record: rounds x platforms x (benchmarks + lifecycle)."""
    rounds = Rounds.of(campaign)
    return ((rounds.repeated * (platforms if platforms is not None else len(campaign.get("platforms") or []))
             + rounds.noise)  # the noise check: the baseline alone
            * ((benchmarks if benchmarks is not None else len(campaign.get("benchmarks") or [])) + 1))


def platform_names(run: Run) -> list[str]:
    """From the campaign (a queued run has no platform rows yet), else from the rows."""
    return [p["name"] for p in run.campaign.get("platforms") or []] or [p.name for p in run.platforms]


def benchmark_keys(run: Run) -> list[str]:
    return [b["key"] for b in run.campaign.get("benchmarks") or []] or [b.key for b in run.benchmarks]


def resolve(store: Store, ref: str) -> str:
    """The run id a reference names, read as the CLI reads it: an exact id, 'latest' (the newest
    finished run with measurements) or a unique prefix. NotFound for none or several; NoData
    (409) for 'latest' in a store with no finished run yet."""
    with store.session() as s:
        if s.get(Run, ref) is not None:
            return ref
    try:
        return store.run(ref).id
    except NoData:
        raise
    except InputError as exc:
        raise NotFound(exc.message) from None


def get_run(store: Store, run_id: str) -> Run:
    """Exactly this id (the web never guesses by prefix), with platforms, benchmarks and host."""
    return get_runs(store, [run_id])[0]


def get_runs(store: Store, run_ids: Sequence[str]) -> list[Run]:
    """Exactly these ids, in one query (a comparison of ten runs: one round trip, not ten)."""
    ids = list(dict.fromkeys(run_ids))
    store.reap_dead()
    with store.session() as s:
        found = {r.id: r for r in s.scalars(
            select(Run).where(Run.id.in_(ids))
            .options(selectinload(Run.platforms), selectinload(Run.benchmarks), selectinload(Run.host)))}
    missing = [i for i in ids if i not in found]
    if missing:
        raise NotFound(f"no run {missing[0]!r}")
    return [found[i] for i in ids]


def execution_counts(store: Store, run_ids: Sequence[str]) -> dict[str, tuple[int, int]]:
    """run id -> (executions recorded, of which failed)."""
    if not run_ids:
        return {}
    with store.session() as s:
        rows = s.execute(select(Execution.run_id, Execution.status, func.count())
                         .where(Execution.run_id.in_(list(run_ids))).group_by(Execution.run_id, Execution.status))
        out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for run_id, status, n in rows:
            out[run_id][0] += n
            if status == "failed":
                out[run_id][1] += n
    return {k: (v[0], v[1]) for k, v in out.items()}


def run_brief(run: Run, counts: tuple[int, int] | None = None, workers: dict[str, bool] | None = None
              ) -> dict[str, Any]:
    """A run as the lists and the API show it."""
    platforms, benchmarks = platform_names(run), benchmark_keys(run)
    total = expected_total(run.campaign, len(platforms), len(benchmarks))
    done, failed = counts or (0, 0)
    host = run.worker_host or (run.host.hostname if run.host else None) or run.target_host
    return {
        "id": run.id, "name": run.name, "status": run.status, "description": run.campaign.get("description", ""),
        "baseline": run.baseline,
        "platforms": platforms, "benchmarks": benchmarks,
        "repetitions": run.campaign.get("repetitions"), "warmups": run.campaign.get("warmups"),
        "host": host, "target_host": run.target_host, "worker": run.worker,
        "worker_alive": (workers or {}).get(run.worker or "", None) if run.worker else None,
        "created_at": iso(run.created_at), "started_at": iso(run.started_at), "finished_at": iso(run.finished_at),
        "executions": done, "failed": failed, "expected": total,
        "percent": round(100 * done / total) if total else 0,
        "cancel_requested": run.cancel_requested, "error": run.error,
    }


def list_runs(store: Store, *, status: str | None = None, host: str | None = None, limit: int = 50,
              offset: int = 0) -> list[dict[str, Any]]:
    store.reap_dead()
    with store.session() as s:
        q = (select(Run).options(selectinload(Run.host), selectinload(Run.platforms), selectinload(Run.benchmarks))
             .order_by(Run.created_at.desc(), Run.id.desc()))
        if status:
            q = q.where(Run.status == status)
        if host:
            q = q.outerjoin(Host, Run.host_id == Host.id).where((Host.hostname == host) | (Run.worker_host == host))
        runs = list(s.scalars(q.limit(limit).offset(offset)))
        alive = _alive_workers(s, {r.worker for r in runs if r.worker})
    counts = execution_counts(store, [r.id for r in runs])
    return [run_brief(r, counts.get(r.id), alive) for r in runs]


def status_counts(store: Store) -> dict[str, int]:
    store.reap_dead()
    with store.session() as s:
        found = dict(s.execute(select(Run.status, func.count()).group_by(Run.status)).all())
    return {st: int(found.get(st, 0)) for st in STATUSES} | {k: int(v) for k, v in found.items()
                                                          if k not in STATUSES}


def _alive_workers(s: Any, ids: set[str]) -> dict[str, bool]:
    if not ids:
        return {}
    rows = s.scalars(select(WorkerRow).where(WorkerRow.id.in_(ids)))
    here, at = hostname(), now()
    return {w.id: worker_alive(w, here, at) for w in rows}


def workers(store: Store, *, include_stopped: bool = False) -> list[dict[str, Any]]:
    """Workers with a heartbeat in the last day, alive ones first."""
    from datetime import timedelta

    with store.session() as s:
        rows = list(s.scalars(select(WorkerRow).where(WorkerRow.heartbeat_at > now() - timedelta(days=1))
                              .order_by(WorkerRow.heartbeat_at.desc()).limit(100)))
    here, at = hostname(), now()
    out = []
    for w in rows:
        alive = worker_alive(w, here, at)
        if not alive and not include_stopped:
            continue
        out.append({"id": w.id, "hostname": w.hostname, "pid": w.pid, "state": w.state if alive else "gone",
                    "alive": alive, "run_id": w.run_id, "started_at": iso(w.started_at),
                    "heartbeat_at": iso(w.heartbeat_at), "seconds_since_heartbeat":
                    round((at - w.heartbeat_at).total_seconds()),
                    "platforms": (w.facts or {}).get("platforms", {}), "virtbench": (w.facts or {}).get("virtbench")})
    return out


def hosts(store: Store) -> list[dict[str, Any]]:
    """Hosts that measured something or run a worker, with their facts, runs and workers."""
    with store.session() as s:
        known = list(s.scalars(select(Host).order_by(Host.hostname)))
        per_host = dict(s.execute(select(Run.host_id, func.count()).group_by(Run.host_id)).all())
    live = workers(store)
    by_name: dict[str, dict[str, Any]] = {}
    blank: dict[str, Any] = {"cpu_model": "", "cpus": None, "memory_gib": 0, "kernel": "", "arch": "", "os": "",
             "virtualization": {}, "first_seen": None}  # a worker's host before its facts are stored
    for h in known:
        f = h.facts or {}
        entry = by_name.setdefault(h.hostname, {"hostname": h.hostname, "ids": [], "runs": 0, "workers": [],
                                                "facts": {}})
        entry["ids"].append(h.id)
        entry["runs"] += int(per_host.get(h.id, 0))
        entry["facts"] = {"cpu_model": f.get("cpu_model", ""), "cpus": f.get("cpus"),
                          "memory_gib": round(f.get("memory_bytes", 0) / 2**30, 1), "kernel": f.get("kernel", ""),
                          "arch": f.get("arch", ""), "os": f.get("os", ""),
                          "virtualization": f.get("virtualization", {}), "first_seen": iso(h.first_seen)}
    for w in live:
        by_name.setdefault(w["hostname"], {"hostname": w["hostname"], "ids": [], "runs": 0, "workers": [],
                                           "facts": dict(blank)})["workers"].append(w)
    return sorted(by_name.values(), key=lambda e: (not e["workers"], e["hostname"]))


def target_hosts(store: Store) -> list[str]:
    """Hosts a run can be scheduled for: those with a live worker, then any known host."""
    names = [w["hostname"] for w in workers(store)]
    with store.session() as s:
        names += list(s.scalars(select(Host.hostname).order_by(Host.hostname)))
    return list(dict.fromkeys(names))


def platform_availability(store: Store) -> dict[str, dict[str, Any]]:
    """platform type -> {hostname: {available, reason, fix}} from the live workers' probes."""
    out: dict[str, dict[str, Any]] = defaultdict(dict)
    for w in workers(store):
        for ptype, verdict in (w["platforms"] or {}).items():
            out[ptype][w["hostname"]] = verdict
    return dict(out)


def recent_finished(store: Store, limit: int = 3) -> list[Run]:
    """The last finished runs, with their host and platforms loaded."""
    with store.session() as s:
        return list(s.scalars(select(Run).where(Run.status == "finished")
                              .options(selectinload(Run.host), selectinload(Run.platforms))
                              .order_by(Run.created_at.desc()).limit(limit)))


def report_key(store: Store, run_id: str) -> tuple[str, datetime | None, int]:
    """What a run's report depends on in the store: status, finish time, executions recorded."""
    key = report_keys(store, [run_id]).get(run_id)
    if key is None:
        raise NotFound(f"no run {run_id!r}")
    return key


def report_keys(store: Store, run_ids: Sequence[str]) -> dict[str, tuple[str, datetime | None, int]]:
    """report_key() of several runs in one statement (a pooled comparison shows ten runs); runs
    that do not exist are left out."""
    count = (select(func.count()).select_from(Execution).where(Execution.run_id == Run.id)
             .correlate(Run).scalar_subquery())
    with store.engine.connect() as conn:  # one statement for all: pages ask for it once per run they show
        rows = conn.execute(select(Run.id, Run.status, Run.finished_at, count).where(Run.id.in_(list(run_ids))))
        return {r[0]: (r[1], r[2], r[3] or 0) for r in rows}


def progress(store: Store, run_id: str) -> dict[str, Any]:
    """Live state of a run for the page's poller: counts from the store, step and log from the worker."""
    run = get_run(store, run_id)
    counts = execution_counts(store, [run.id]).get(run.id, (0, 0))
    with store.session() as s:
        alive = _alive_workers(s, {run.worker} if run.worker else set())
    brief = run_brief(run, counts, alive)
    doc = run.progress or {}
    return {**{k: brief[k] for k in ("id", "status", "executions", "failed", "expected", "percent",
                                     "cancel_requested", "error", "worker", "worker_alive", "host",
                                     "started_at", "finished_at")},
            "step": doc.get("step", ""), "log": doc.get("log", []), "updated": doc.get("updated"),
            "heartbeat_at": iso(run.heartbeat_at)}


def executions(store: Store, run_id: str, *, status: str | None = None, platform: str | None = None,
               benchmark: str | None = None, limit: int = 200, offset: int = 0) -> list[dict[str, Any]]:
    """The run's executions without their output (the list); raw output is one click away."""
    cols = (Execution.id, Execution.round, Execution.warmup, Execution.platform, Execution.benchmark,
            Execution.status, Execution.exit_code, Execution.error, Execution.started_at, Execution.duration_s)
    q = select(*cols).where(Execution.run_id == run_id)
    if status:
        q = q.where(Execution.status == status)
    if platform:
        q = q.where(Execution.platform == platform)
    if benchmark:
        q = q.where(Execution.benchmark == benchmark)
    with store.session() as s:
        rows = s.execute(q.order_by(Execution.id).limit(limit).offset(offset)).all()
    return [{"id": r.id, "round": r.round, "warmup": r.warmup, "platform": r.platform, "benchmark": r.benchmark,
             "status": r.status, "exit_code": r.exit_code, "error": r.error, "started_at": iso(r.started_at),
             "duration_s": r.duration_s} for r in rows]


def execution(store: Store, execution_id: int) -> dict[str, Any]:
    """One execution with everything the tool printed, and the values parsed from it."""
    with store.session() as s:
        ex = s.get(Execution, execution_id)
        if ex is None:
            raise NotFound(f"no execution {execution_id}")
        samples = s.execute(select(Sample.metric, Sample.value, Sample.unit, Sample.higher_is_better)
                            .where(Sample.execution_id == ex.id).order_by(Sample.id)).all()
    return {"id": ex.id, "run_id": ex.run_id, "round": ex.round, "warmup": ex.warmup, "platform": ex.platform,
            "benchmark": ex.benchmark, "instance": ex.instance, "status": ex.status, "argv": ex.argv,
            "exit_code": ex.exit_code, "stdout": ex.stdout, "stderr": ex.stderr, "error": ex.error,
            "started_at": iso(ex.started_at), "finished_at": iso(ex.finished_at), "duration_s": ex.duration_s,
            "samples": [{"metric": m, "value": v, "unit": u, "higher_is_better": h} for m, v, u, h in samples]}


def sample_points(store: Store, run_id: str, benchmark: str, metric: str) -> list[dict[str, Any]]:
    """Every value of one metric in one run, with its execution, in round order (ix_samples_lookup)."""
    with store.session() as s:
        rows = s.execute(select(Sample.platform, Sample.round, Sample.warmup, Sample.value, Sample.execution_id)
                         .where(Sample.run_id == run_id, Sample.benchmark == benchmark, Sample.metric == metric,
                                Sample.instance == 0)  # the execution's value (1..N: one per parallel instance)
                         .order_by(Sample.platform, Sample.round)).all()
    return [{"platform": p, "round": r, "warmup": w, "value": v, "execution_id": e} for p, r, w, v, e in rows]


def failed_points(store: Store, run_id: str, benchmark: str) -> list[dict[str, Any]]:
    with store.session() as s:
        rows = s.execute(select(Execution.id, Execution.platform, Execution.round, Execution.warmup, Execution.error)
                         .where(Execution.run_id == run_id, Execution.benchmark == benchmark,
                                Execution.status == "failed").order_by(Execution.round)).all()
    return [{"execution_id": i, "platform": p, "round": r, "warmup": w, "error": e} for i, p, r, w, e in rows]


def finished_runs(store: Store, limit: int = 200) -> list[dict[str, Any]]:
    """Runs with results to compare (finished, or stopped part-way with samples), newest first."""
    with store.session() as s:
        runs = list(s.scalars(select(Run).where(Run.status.in_(("finished", "interrupted", "cancelled", "failed",
                                                                 "running")))
                              .options(selectinload(Run.host), selectinload(Run.platforms))
                              .order_by(Run.created_at.desc()).limit(limit)))
    return [{"id": r.id, "name": r.name, "status": r.status, "host": r.host.hostname if r.host else None,
             "created_at": iso(r.created_at), "baseline": r.baseline,
             "platforms": platform_names(r)} for r in runs if r.host_id]
