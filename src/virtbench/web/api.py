"""The JSON API: everything the pages do, documented in the OpenAPI schema at /openapi.json.

Reads are open (unless the instance is private); every state change (schedule, cancel,
delete) is a POST or DELETE that needs ``Authorization: Bearer <token>``, and so does
validating a campaign (parsing one may read files of this host: web.hostpaths). Errors are
``{"detail": "..."}`` with the HTTP status; a refused campaign is 400 with the same one-line
message (and fix) the CLI prints, 403 when it names a host path the server does not allow.
"""
from __future__ import annotations

from typing import Any, Literal

import yaml
from fastapi import APIRouter, Body, Depends, HTTPException, Path, Query, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field, field_validator

from .. import __version__
from ..errors import InputError
from ..report import builder, runinfo
from ..store import queue
from . import cache, campaigns, downloads, forms, hostpaths, queries, results
from .security import require_api_write, require_read

RUN_ID = Path(..., pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$", description="a run id, e.g. 20240611-120000-ab12")
DELETABLE = ("finished", "failed", "interrupted", "cancelled")
MAX_OFFSET = 2**62
"""Beyond it a database integer overflows (that was an HTTP 500); no listing has that many rows."""

router = APIRouter(prefix="/api", dependencies=[Depends(require_read)])


class Problem(BaseModel):
    detail: str
    fix: str | None = None


class ScheduleRequest(BaseModel):
    """A campaign as a mapping (the YAML file's content as JSON) or as YAML text; one of the two."""

    campaign: dict[str, Any] | None = Field(None, description="the campaign mapping, as in a YAML campaign file")
    yaml: str | None = Field(None, description="the campaign as YAML text")
    target_host: str | None = Field(None, max_length=255,
                                    description="run only on this host's worker (default: the first free)")

    @field_validator("campaign", "yaml", "target_host")
    @classmethod
    def _text(cls, value: Any) -> Any:
        """JSON's \\ud800 escapes decode to lone surrogates, which no database or reply can encode."""
        _encodable(value)
        return value


def _encodable(value: Any) -> None:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("not valid Unicode text (a lone surrogate escape such as \\ud800)") from None
    elif isinstance(value, dict):
        for k, v in value.items():
            _encodable(k)
            _encodable(v)
    elif isinstance(value, list):
        for v in value:
            _encodable(v)


class Scheduled(BaseModel):
    run_id: str
    status: str
    url: str


class Validated(BaseModel):
    valid: bool
    campaign: dict[str, Any]
    expected_executions: int


def store_of(request: Request):
    return request.app.state.store


def cache_of(request: Request) -> cache.ReportCache:
    return request.app.state.cache


def _problem(exc: InputError) -> JSONResponse:
    status = 403 if isinstance(exc, hostpaths.PathNotAllowed) else 400
    return JSONResponse({"detail": exc.message, "fix": exc.fix}, status_code=status)


def _campaign_of(request: Request, req: ScheduleRequest):
    settings = request.app.state.settings
    if (req.campaign is None) == (req.yaml is None):
        raise InputError("give either 'campaign' (a mapping) or 'yaml' (text)", "see /api for an example")
    if req.yaml is not None:
        return campaigns.from_yaml(req.yaml, "campaign", settings.max_campaign_bytes, settings.allowed_paths,
                                   settings.allow_meter)
    campaign = campaigns.from_mapping(req.campaign, "campaign", settings.allowed_paths, settings.allow_meter)
    return campaign, yaml.safe_dump(req.campaign, sort_keys=False)


@router.get("/status", summary="Server, database and worker state")
def status(request: Request) -> dict[str, Any]:
    store = store_of(request)
    current, head = store.schema_version()
    settings = request.app.state.settings
    return {"virtbench": __version__, "database": store.dialect, "schema": current,
            "schema_head": head, "private": settings.private, "workers": queries.workers(store),
            "runs": queries.status_counts(store)}


@router.get("/dashboard", summary="What the dashboard shows: counts, active and recent runs, hosts, recent results")
def dashboard(request: Request) -> dict[str, Any]:
    store = store_of(request)
    return downloads.clean({
        "counts": queries.status_counts(store), "hosts": queries.hosts(store), "workers": queries.workers(store),
        "active": queries.list_runs(store, status="running", limit=20) + queries.list_runs(store, status="queued",
                                                                                          limit=20),
        "recent_runs": queries.list_runs(store, limit=25),
        "recent_results": [results.with_verdicts(store, cache_of(request), r) for r in
                           queries.recent_results(store, lambda run_id: cache_of(request).rows(store, run_id)[0])],
        "repeated": results.repeated_results(store, cache_of(request))})


@router.get("/hosts", summary="Hosts with their facts, run counts and live workers")
def hosts(request: Request) -> list[dict[str, Any]]:
    return queries.hosts(store_of(request))


@router.get("/catalog", summary="Platform types with options, benchmarks with parameters and metrics")
def catalog(request: Request) -> dict[str, Any]:
    return {**forms.catalog(), "availability": queries.platform_availability(store_of(request))}


@router.get("/runs", summary="Runs, newest first")
def runs(request: Request, status: str | None = Query(None, max_length=16), host: str | None = Query(None, max_length=255),
         limit: int = Query(50, ge=1, le=500), offset: int = Query(0, ge=0, le=MAX_OFFSET)) -> list[dict[str, Any]]:
    return queries.list_runs(store_of(request), status=status, host=host, limit=limit, offset=offset)


@router.post("/campaigns/validate", summary="Validate a campaign without scheduling it",
             response_model=Validated, responses={400: {"model": Problem}, 401: {"model": Problem},
                                                  403: {"model": Problem}},
             dependencies=[Depends(require_api_write)])
def validate(request: Request, req: ScheduleRequest) -> Any:
    try:
        campaign, _ = _campaign_of(request, req)
    except InputError as exc:
        return _problem(exc)
    data = campaign.model_dump(mode="json")
    return {"valid": True, "campaign": data, "expected_executions": queries.expected_total(data)}


@router.post("/runs", status_code=201, summary="Schedule a campaign (queued for a worker)",
             response_model=Scheduled, responses={400: {"model": Problem}, 401: {"model": Problem},
                                                  403: {"model": Problem}},
             dependencies=[Depends(require_api_write)])
def schedule(request: Request, req: ScheduleRequest = Body(...)) -> Any:
    try:
        campaign, source = _campaign_of(request, req)
    except InputError as exc:
        return _problem(exc)
    run_id = campaigns.schedule(store_of(request), campaign, source, req.target_host)
    return {"run_id": run_id, "status": "queued", "url": f"/runs/{run_id}"}


@router.post("/runs/{run_id}/again", status_code=201, summary="Schedule a run's campaign again (its YAML, "
             "validated as a new campaign)", response_model=Scheduled,
             responses={400: {"model": Problem}, 401: {"model": Problem}, 403: {"model": Problem}},
             dependencies=[Depends(require_api_write)])
def again(request: Request, run_id: str = RUN_ID) -> Any:
    try:
        new_id = run_again(request, run_id)
    except InputError as exc:
        return _problem(exc)
    return {"run_id": new_id, "status": "queued", "url": f"/runs/{new_id}"}


def run_again(request: Request, run_id: str) -> str:
    settings = request.app.state.settings
    return campaigns.again(store_of(request), queries.get_run(store_of(request), run_id), settings.allowed_paths,
                           settings.allow_meter, settings.max_campaign_bytes)


@router.get("/runs/{run_id}", summary="One run: campaign, provenance, platforms, benchmarks, counts")
def run(request: Request, run_id: str = RUN_ID) -> dict[str, Any]:
    store = store_of(request)
    r = queries.get_run(store, queries.resolve(store, run_id))
    brief = queries.run_brief(r, queries.execution_counts(store, [r.id]).get(r.id))
    return {**brief, "campaign": r.campaign, "campaign_source": r.campaign_source,
            "campaign_yaml": campaigns.campaign_yaml(r), "seed": r.seed,
            "host_facts": runinfo.facts(r) if r.host_id else r.host_facts, "image": r.image,
            "provenance": r.provenance,
            "platform_details": [{"name": p.name, "type": p.type, "label": p.label, "config": p.config,
                                  "versions": p.versions} for p in r.platforms],
            "benchmark_details": [{"key": b.key, "name": b.name, "params": b.params, "tool_version": b.tool_version}
                                  for b in r.benchmarks],
            "downloads": downloads.available(r.id)}


@router.get("/runs/{run_id}/progress", summary="Live progress: executions done, planned so far and the adaptive "
            "cap; current step, log tail, heartbeat")
def progress(request: Request, run_id: str = RUN_ID) -> dict[str, Any]:
    return results.progress(store_of(request), queries.resolve(store_of(request), run_id))


@router.post("/runs/{run_id}/cancel", summary="Cancel a queued or running run",
             responses={401: {"model": Problem}, 403: {"model": Problem}, 409: {"model": Problem}},
             dependencies=[Depends(require_api_write)])
def cancel(request: Request, run_id: str = RUN_ID) -> dict[str, Any]:
    return cancel_run(store_of(request), run_id)


def cancel_run(store, run_id: str) -> dict[str, Any]:
    """Queued and unclaimed: cancelled at once. Claimed or running: the worker stops it between
    instances. Interrupted: cancelled at once (nothing runs it)."""
    done = queue.request_cancel(store, run_id)
    run = queries.get_run(store, run_id)  # 404 if it does not exist
    if not done:
        raise HTTPException(409, f"run {run_id} is {run.status}: nothing to cancel")
    return {"run_id": run.id, "status": run.status, "cancel_requested": run.cancel_requested}


@router.delete("/runs/{run_id}", summary="Delete a run and every execution and sample of it",
               responses={401: {"model": Problem}, 403: {"model": Problem}, 409: {"model": Problem}},
               dependencies=[Depends(require_api_write)])
def delete(request: Request, run_id: str = RUN_ID) -> dict[str, Any]:
    return delete_run(request, run_id)


def delete_run(request: Request, run_id: str) -> dict[str, Any]:
    """Only runs nothing is working on: finished, failed, interrupted, cancelled, or queued and unclaimed."""
    store = store_of(request)
    run = queries.get_run(store, run_id)
    gone = queue.delete_idle(store, run_id, DELETABLE)
    if not gone:
        raise HTTPException(409, f"run {run_id} is {run.status}: cancel it first")
    cache_of(request).clear(run_id)
    return {"run_id": run_id, "deleted": True}


@router.get("/runs/{run_id}/report", summary="The report (the `virtbench report --json` document)")
def report(request: Request, run_id: str = RUN_ID) -> dict[str, Any]:
    run_id = queries.measured_id(store_of(request), run_id)
    return downloads.clean(builder.report_json(results.full_report(store_of(request), cache_of(request), run_id)))


@router.get("/runs/{run_id}/verify", summary="Every repetition of one metric per platform, drift and outlier flags")
def verify(request: Request, run_id: str = RUN_ID, benchmark: str | None = Query(None, max_length=255),
           metric: str | None = Query(None, max_length=128)) -> dict[str, Any]:
    run_id = queries.measured_id(store_of(request), run_id)
    doc = results.verify(store_of(request), cache_of(request), run_id, benchmark, metric)
    doc.pop("figure", None)
    return downloads.clean(doc)


@router.get("/runs/{run_id}/executions", summary="The run's executions (without output)")
def executions(request: Request, run_id: str = RUN_ID,
               status: Literal["ok", "failed"] | None = None, platform: str | None = Query(None, max_length=255),
               benchmark: str | None = Query(None, max_length=255), limit: int = Query(200, ge=1, le=5000),
               offset: int = Query(0, ge=0, le=MAX_OFFSET)) -> list[dict[str, Any]]:
    run_id = queries.resolve(store_of(request), run_id)
    return queries.executions(store_of(request), run_id, status=status, platform=platform, benchmark=benchmark,
                              limit=limit, offset=offset)


@router.get("/executions/{execution_id}", summary="One execution's raw output (stdout, stderr, error, argv)")
def execution(request: Request, execution_id: int = Path(..., ge=1, le=2**62)) -> dict[str, Any]:
    return queries.execution(store_of(request), execution_id)


@router.get("/compare", summary="Platforms side by side relative to the baseline, runs merged or hosts apart")
def compare(request: Request, run: list[str] = Query([], max_length=100, description="run ids (repeat)"),
            host: list[str] = Query([], max_length=50, description="hostnames: add their finished runs"),
            baseline: str | None = Query(None, max_length=255),
            by_host: bool = Query(False, description="hosts as columns instead of pooling")) -> dict[str, Any]:
    ids = compare_ids(request, run, host)
    if not ids:
        raise HTTPException(400, "choose runs (run=...) or hosts (host=...) to compare")
    doc = results.compare(store_of(request), cache_of(request), ids, baseline=baseline, by_host=by_host)
    return downloads.clean(results.compare_json(doc))


@router.get("/compare/before-after", summary="Before/after: run B against run A per platform and metric (the "
            "`virtbench compare A B --json` document)", responses={400: {"model": Problem}})
def before_after(request: Request, a: str = Query(..., max_length=64, description="run A (before)"),
                 b: str = Query(..., max_length=64, description="run B (after)"),
                 absolute: bool = Query(False, description="raw values (default: each platform relative to its "
                                                           "own run's baseline)")) -> Any:
    a, b = queries.measured_id(store_of(request), a), queries.measured_id(store_of(request), b)
    try:
        return downloads.clean(results.before_after(store_of(request), cache_of(request), a, b, absolute=absolute))
    except InputError as exc:
        return _problem(exc)


def compare_ids(request: Request, run_ids: list[str], hostnames: list[str]) -> list[str]:
    ids = [r for r in run_ids if r]
    if hostnames:
        for r in queries.list_runs(store_of(request), status="finished", limit=500):
            if r["host"] in hostnames:
                ids.append(r["id"])
    return list(dict.fromkeys(queries.measured_id(store_of(request), r) for r in ids))


@router.get("/runs/{run_id}/download/{fmt}", summary="The report as a file: html, csv, json, parquet",
            response_class=Response)
def download(request: Request, run_id: str = RUN_ID, fmt: str = Path(..., pattern=r"^(html|csv|json|parquet)$"),
             table: str | None = Query(None, pattern=r"^(report|samples|executions|summary)$",
                                       description="report (json, html) or a flat table (default samples)")
             ) -> Response:
    table = table or ("report" if fmt in ("html", "json") else "samples")
    run_id = queries.measured_id(store_of(request), run_id)
    return downloads.response(store_of(request), cache_of(request), run_id, fmt, table)
