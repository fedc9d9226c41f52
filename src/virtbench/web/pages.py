"""The HTML pages: server-rendered (Jinja2, autoescaped), a little JavaScript for live progress.

Pages read through queries.py/results.py like the API does. State changes are HTML form
POSTs that need a login session and the session's CSRF value; after one the browser is
redirected (303), so a reload never repeats it.
"""
from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, HTTPException, Path, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from markupsafe import Markup

from .. import __version__, notation
from ..errors import InputError, NoData
from ..report import before_after, builder, layout
from ..report.model import Report, Section
from ..studies import scales
from . import api, campaigns, downloads, forms, hostpaths, queries, results, svg
from .security import (
    LOGIN_COOKIE,
    SESSION_COOKIE,
    check_form_write,
    client_of,
    cookie_args,
    require_read,
    same,
    too_many,
)

router = APIRouter(include_in_schema=False)
RUN_ID = api.RUN_ID
VERIFY_ROWS = 40
"""Repetitions listed per platform on the verify page before 'show all' (the chart has every one)."""


# -- template helpers -----------------------------------------------------------------------------
def fmt_num(v: Any, digits: int = 4) -> str:
    text = notation.number(v, digits)
    return "–" if text == notation.MISSING else text


def fmt_pct(v: Any) -> str:
    return "–" if v is None else notation.change(1 + v)


def fmt_rel(v: Any) -> str:
    return "–" if v is None else notation.ratio(v)


def fmt_ci(ci: Any) -> str:
    return "" if not ci else notation.interval(ci[0], ci[1], fmt_num)


def fmt_ratio_ci(ci: Any) -> str:
    return "" if not ci else notation.interval(ci[0], ci[1])


def fmt_p(v: Any) -> str:
    return "–" if v is None else (f"{v:.2g}" if v >= 0.001 else "< 0.001")


def fmt_time(iso: Any) -> str:
    """Stored times are UTC; say so (the lab's hosts and its browsers may be in other zones)."""
    text = notation.when(iso)
    return "–" if text == notation.MISSING else text


FILTERS = {"num": fmt_num, "pct": fmt_pct, "rel": fmt_rel, "ci": fmt_ci, "rci": fmt_ratio_ci, "p": fmt_p,
           "when": fmt_time, "unit": notation.unit, "plain": notation.plain, "ms": notation.milliseconds,
           "label": notation.label, "change": notation.change, "params": notation.params,
           "platform_label": notation.platform_label, "setting": lambda v, k="": scales.short(v, k),
           "compare_a": lambda r: before_after.shown(r, "a"), "compare_b": lambda r: before_after.shown(r, "b")}


def render(request: Request, name: str, code: int = 200, headers: dict[str, str] | None = None,
           **context: Any) -> HTMLResponse:
    viewer = request.app.state.auth.viewer(request)
    context.setdefault("title", "virtbench")
    return request.app.state.templates.TemplateResponse(
        request, name, {"viewer": viewer, "settings": request.app.state.settings, "path": request.url.path,
                        "version": __version__, **context}, status_code=code, headers=headers)


def error_page(request: Request, status: int, detail: str, fix: str | None = None,
               headers: dict[str, str] | None = None) -> HTMLResponse:
    return render(request, "error.html", status, headers, title=f"{status}", status=status, detail=detail, fix=fix)


def store_of(request: Request):
    return request.app.state.store


def _local(next_url: str | None) -> str:
    """Only same-site paths after a login (no open redirect to //evil or http://evil)."""
    if next_url and next_url.startswith("/") and not next_url.startswith(("//", "/\\")):
        return next_url
    return "/"


# -- dashboard and runs -------------------------------------------------------------------------------
@router.get("/", response_class=HTMLResponse)
def dashboard(request: Request) -> HTMLResponse:
    require_read(request)
    doc = api.dashboard(request)
    store = store_of(request)
    return render(request, "dashboard.html", title="virtbench", hosts=doc["hosts"], counts=doc["counts"],
                  active=results.with_planned(store, doc["active"]),
                  recent=results.with_planned(store, doc["recent_runs"]), results=doc["recent_results"],
                  repeated=doc["repeated"],
                  workers=doc["workers"])


@router.get("/runs", response_class=HTMLResponse)
def runs_page(request: Request, status: str | None = Query(None, max_length=16),
              host: str | None = Query(None, max_length=255), page: int = Query(1, ge=1, le=100000)) -> HTMLResponse:
    require_read(request)
    store = store_of(request)
    rows = queries.list_runs(store, status=status or None, host=host or None, limit=51, offset=(page - 1) * 50)
    return render(request, "runs.html", title="Runs", runs=results.with_planned(store, rows[:50]), more=len(rows) > 50,
                  page=page,
                  status=status or "", host=host or "", counts=queries.status_counts(store))


def _sections(report: Report) -> list[dict[str, Any]]:
    """The report's layout as the HTML file shows it (report/layout.py: results, lifecycle,
    categories, stacks, failures, then the run's own sections), with each section's figures
    drawn on the server like every chart here; 'every statistic' is left to the downloads."""
    order = [p.name for p in report.run.platforms]  # each platform the colour it has in the report's figures
    return [section_view(sec, order) for sec in layout.of(report) if not sec.detail]


def section_view(sec: Section, platforms: Sequence[str] = ()) -> dict[str, Any]:
    """One report section for the templates: its notes, tables (cells escaped) and charts drawn
    here, each platform in the colour the report's files give it (platforms: the run's order)."""
    from ..report.html_parts import cell

    names = [*platforms, *(s.name for f in sec.figures for s in f.series)]
    colors = svg.Colors(list(dict.fromkeys(names)))
    return {"key": sec.key, "title": sec.title, "notes": sec.notes,
            "tables": [{"title": t.title, "columns": t.columns, "empty": t.empty,
                        "rows": [[Markup(cell(v)) for v in r] for r in t.rows]} for t in sec.tables],  # cell() escapes
            "charts": [svg.draw(f, colors) for f in sec.figures]}


@router.get("/runs/{run_id}", response_class=HTMLResponse)
def run_page(request: Request, run_id: str = RUN_ID) -> Response:
    require_read(request)
    store = store_of(request)
    if (canonical := queries.resolve(store, run_id)) != run_id:  # 'latest' or a prefix: the run's own address
        return RedirectResponse(f"/runs/{quote(canonical)}", 307)
    run = queries.get_run(store, run_id)
    prog = results.progress(store, run.id)
    report = None
    if prog["executions"]:
        report = {"sections": _sections(results.full_report(store, request.app.state.cache, run.id))}
    return render(request, "run.html", title=f"Run {run.name}", run=run, progress=prog, report=report,
                  campaign_yaml=campaigns.campaign_yaml(run),
                  executions=queries.executions(store, run.id, limit=300), downloads=downloads.available(run.id),
                  active=run.status in queries.ACTIVE)


@router.post("/runs/{run_id}/cancel")
async def cancel_form(request: Request, run_id: str = RUN_ID) -> Response:
    form = await request.form(max_files=0, max_fields=20)
    check_form_write(request, str(form.get("csrf", "")))
    api.cancel_run(store_of(request), run_id)
    return RedirectResponse(f"/runs/{quote(run_id)}", status_code=303)


@router.post("/runs/{run_id}/again")
async def again_form(request: Request, run_id: str = RUN_ID) -> Response:
    """Run again: the page's YAML validated as a new campaign (api.run_again), then its page."""
    form = await request.form(max_files=0, max_fields=20)
    check_form_write(request, str(form.get("csrf", "")))
    try:
        new_id = api.run_again(request, run_id)
    except InputError as exc:
        return error_page(request, 403 if isinstance(exc, hostpaths.PathNotAllowed) else 400, exc.message, exc.fix)
    return RedirectResponse(f"/runs/{quote(new_id)}", status_code=303)


@router.post("/runs/{run_id}/delete")
async def delete_form(request: Request, run_id: str = RUN_ID) -> Response:
    form = await request.form(max_files=0, max_fields=20)
    check_form_write(request, str(form.get("csrf", "")))
    api.delete_run(request, run_id)
    return RedirectResponse("/runs", status_code=303)


@router.get("/runs/{run_id}/verify", response_class=HTMLResponse)
def verify_page(request: Request, run_id: str = RUN_ID, benchmark: str | None = Query(None, max_length=255),
                metric: str | None = Query(None, max_length=128), all: bool = Query(False)) -> HTMLResponse:
    require_read(request)
    run_id = queries.measured_id(store_of(request), run_id)
    doc = results.verify(store_of(request), request.app.state.cache, run_id, benchmark, metric,
                         table_limit=None if all else VERIFY_ROWS)
    colors = svg.Colors(p["platform"] for p in doc["platforms"])
    chart = svg.draw(doc["figure"], colors, doc.get("outlier_rounds"))
    return render(request, "verify.html", title=f"Verify {doc['name']}", doc=doc, chart=chart, colors=colors,
                  run=queries.get_run(store_of(request), run_id))


@router.get("/executions/{execution_id}", response_class=HTMLResponse)
def execution_page(request: Request, execution_id: int = Path(..., ge=1, le=2**62)) -> HTMLResponse:
    require_read(request)
    ex = queries.execution(store_of(request), execution_id)
    return render(request, "execution.html", title=f"Execution {ex['id']}", ex=ex)


@router.get("/compare", response_class=HTMLResponse)
def compare_page(request: Request, run: list[str] = Query([], max_length=100),
                 host: list[str] = Query([], max_length=50), baseline: str | None = Query(None, max_length=255),
                 by_host: bool = Query(False)) -> HTMLResponse:
    require_read(request)
    store = store_of(request)
    ids = api.compare_ids(request, run, host)
    doc = charts = None
    if ids:
        doc = results.compare(store, request.app.state.cache, ids, baseline=baseline or None, by_host=by_host,
                              bootstrap=False)  # the page shows no bootstrap interval: a first view in half the time
        colors = svg.Colors(doc.get("platforms") or [])
        charts = [svg.draw(f, colors) for f in doc["figures"]]
        if doc.get("lifecycle"):
            charts.append(svg.draw(doc["lifecycle"], colors))
    choices = queries.finished_runs(store)
    hostnames = list(dict.fromkeys(c["host"] for c in choices if c["host"]))
    return render(request, "compare.html", title="Platforms across runs", doc=doc, charts=charts, choices=choices,
                  hostnames=hostnames, chosen=set(ids), chosen_hosts=set(host), by_host=by_host,
                  baseline=baseline or "", export_query=urlencode([("run", i) for i in ids]),
                  verdict_rule=builder.VERDICT_RULE)


@router.get("/compare/before-after", response_class=HTMLResponse)
def before_after_page(request: Request, a: str = Query("", max_length=64),
                      b: str = Query("", max_length=64), absolute: bool = Query(False)) -> HTMLResponse:
    """Run B against run A, platform by platform: what `virtbench compare A B` prints."""
    require_read(request)
    store = store_of(request)
    doc = error = None
    if a and b:
        try:
            doc = results.before_after(store, request.app.state.cache, queries.measured_id(store, a),
                                       queries.measured_id(store, b), absolute=absolute)
        except InputError as exc:
            error = exc
    code = (409 if isinstance(error, NoData) else 400) if error else 200
    return render(request, "before_after.html", code, title="Before / after", doc=doc,
                  error=error, a=a, b=b, absolute=absolute, choices=queries.finished_runs(store))


# -- schedule -------------------------------------------------------------------------------------
def _schedule_page(request: Request, model: dict[str, Any], error: InputError | None = None,
                   yaml_text: str = "", code: int = 200, preset: str = "") -> HTMLResponse:
    store = store_of(request)
    cat = forms.catalog()
    return render(request, "schedule.html", code, title="Schedule", model=model, error=error, catalog=cat,
                  preset=preset,
                  ptypes={p["type"]: p for p in cat["platforms"]}, btypes={b["name"]: b for b in cat["benchmarks"]},
                  availability=queries.platform_availability(store),
                  hosts=queries.target_hosts(store), workers=queries.workers(store), yaml_text=yaml_text,
                  max_bytes=request.app.state.settings.max_campaign_bytes)


@router.get("/schedule", response_class=HTMLResponse)
def schedule_page(request: Request, preset: str = Query("", pattern="^(quick)?$")) -> HTMLResponse:
    """The form, empty or (preset=quick) filled with the quick comparison."""
    require_read(request)
    if preset == "quick":
        return _schedule_page(request, forms.quick_form(queries.platform_availability(store_of(request))),
                              preset=preset)
    return _schedule_page(request, forms.default_form())


@router.post("/schedule")
async def schedule_submit(request: Request) -> Response:
    settings = request.app.state.settings
    form = await request.form(max_files=1, max_fields=600, max_part_size=settings.max_campaign_bytes + 1)
    check_form_write(request, str(form.get("csrf", "")))
    mode = str(form.get("mode", "form"))
    model = forms.parse_form({k: v for k, v in form.items() if isinstance(v, str)})
    yaml_text = str(form.get("campaign_yaml", "") or "")
    try:
        if mode == "yaml":
            upload = form.get("campaign_file")
            if upload is not None and not isinstance(upload, str) and upload.filename:
                source = campaigns.safe_source_name(upload.filename)
                data = await upload.read(settings.max_campaign_bytes + 1)
                yaml_text = campaigns.decode_upload(data, source, settings.max_campaign_bytes)
            else:
                source = "pasted campaign"
            campaign, text = campaigns.from_yaml(yaml_text, source, settings.max_campaign_bytes,
                                                 settings.allowed_paths, settings.allow_meter)
        else:
            campaign, text = forms.from_form(model, settings.allowed_paths, settings.allow_meter)
    except InputError as exc:
        code = 403 if isinstance(exc, hostpaths.PathNotAllowed) else 400
        return _schedule_page(request, model, exc, yaml_text if len(yaml_text) < 20000 else "", code)
    target = str(form.get("target_host", "") or "") or None
    run_id = campaigns.schedule(store_of(request), campaign, text, target)
    return RedirectResponse(f"/runs/{quote(run_id)}", status_code=303)


# -- login ------------------------------------------------------------------------------------------
@router.get("/login", response_class=HTMLResponse)
def login_page(request: Request, next: str = Query("/", max_length=500)) -> HTMLResponse:
    value = secrets.token_urlsafe(24)
    response = render(request, "login.html", title="Log in", login_csrf=value, next=_local(next), failed=False)
    response.set_cookie(LOGIN_COOKIE, value, **cookie_args(request.app.state.settings, 1800))
    return response


@router.post("/login")
async def login_submit(request: Request) -> Response:
    auth = request.app.state.auth
    form = await request.form(max_files=0, max_fields=10)
    sent, cookie = str(form.get("login_csrf", "")), request.cookies.get(LOGIN_COOKIE, "")
    if not sent or not cookie or not same(sent, cookie):
        raise HTTPException(403, "the login form expired; reload the page and retry")
    wait = auth.check_token(str(form.get("token", "")), client_of(request))
    if wait:
        raise too_many(wait)
    if wait is not None:
        value = secrets.token_urlsafe(24)
        response = render(request, "login.html", 401, title="Log in", login_csrf=value,
                          next=_local(str(form.get("next", "/"))), failed=True)
        response.set_cookie(LOGIN_COOKIE, value, **cookie_args(request.app.state.settings, 1800))
        return response
    redirect = RedirectResponse(_local(str(form.get("next", "/"))), status_code=303)
    settings = request.app.state.settings
    redirect.set_cookie(SESSION_COOKIE, auth.new_session(), **cookie_args(settings, int(settings.session_hours * 3600)))
    redirect.delete_cookie(LOGIN_COOKIE, path="/")
    return redirect


@router.post("/logout")
async def logout(request: Request) -> Response:
    form = await request.form(max_files=0, max_fields=10)
    check_form_write(request, str(form.get("csrf", "")))
    response = RedirectResponse("/", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


# -- API documentation ------------------------------------------------------------------------------
@router.get("/api", response_class=HTMLResponse)
def api_docs(request: Request) -> HTMLResponse:
    """The API reference, rendered from the same OpenAPI document clients can fetch."""
    require_read(request)
    doc = request.app.openapi()
    endpoints = []
    for path, methods in doc.get("paths", {}).items():
        for method, op in methods.items():
            params = [{"name": p["name"], "in": p["in"], "required": p.get("required", False),
                       "description": p.get("description", "") or p.get("schema", {}).get("description", ""),
                       "type": p.get("schema", {}).get("type", "")} for p in op.get("parameters", [])]
            endpoints.append({"method": method.upper(), "path": path, "summary": op.get("summary", ""),
                              "description": op.get("description", ""), "params": params,
                              "token": bool(op.get("security")),
                              "body": "requestBody" in op, "responses": sorted(op.get("responses", {}))})
    return render(request, "api.html", title="API", endpoints=endpoints, description=doc.get("info", {}))
