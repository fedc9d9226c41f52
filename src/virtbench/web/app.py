"""The FastAPI application: JSON API (api.py), server-rendered pages (pages.py), security.

Layout of the package:
  app.py       this: assembly, middleware, error handling, the OpenAPI document
  api.py       /api/...: the documented JSON API (schema at /openapi.json)
  pages.py     the HTML pages (Jinja2, autoescaped; templates/ and static/ beside)
  security.py  token, sessions, CSRF, body limit, headers, private mode
  queries.py   every read query; results.py: verify and compare from virtbench.analysis
  campaigns.py YAML uploads, validation, a run's campaign as a file, run again
  forms.py     the schedule form; svg.py: charts drawn on the server
  worker.py    `virtbench worker`: the queue; server.py: `virtbench serve`
FastAPI's own /docs pages load scripts from a CDN, so they are off; /api is the docs page.
"""
from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import jinja2
from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from starlette.middleware.trustedhost import TrustedHostMiddleware

from .. import __version__
from ..errors import InputError, NoData, VirtbenchError
from ..store.db import DatabaseBusy, Store
from . import api, pages, studypage
from .cache import ReportCache, Warmer
from .queries import NotFound
from .security import Auth, BodyLimit, PrivateGate, SecurityHeaders
from .settings import Settings

HERE = Path(__file__).parent
TOKEN_ROUTES = {("post", "/api/runs"), ("post", "/api/runs/{run_id}/cancel"), ("delete", "/api/runs/{run_id}"),
                ("post", "/api/campaigns/validate")}
"""The routes that need the token: every state change, and validating (it may read host files)."""
BUSY_TIMEOUT_S = 2.0
"""How long a request waits for another process's database lock before it is answered 503."""
BUSY_RETRY_S = 2


def templates() -> Jinja2Templates:
    """Autoescaping on for every template (not only .html): names in campaigns are user input."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(pages.FILTERS)
    return Jinja2Templates(env=env)


def settle_heap() -> None:
    """Move what start-up made (modules, classes, templates: about 130,000 objects) out of the
    garbage collector's sight (gc.freeze). A full collection walks every tracked object, and
    on this heap that took 70-110 ms of CPU inside whichever request triggered it; those
    objects live as long as the process anyway. numpy.random, which the first computed
    comparison would load, is loaded before."""
    import numpy.random  # noqa: F401 - loaded now, frozen with the rest

    gc.collect()
    gc.freeze()


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """While serving: a thread storing the reports of runs that have none (see cache.Warmer);
    the start-up heap settled first (settle_heap)."""
    settle_heap()
    warmer = Warmer(app.state.store, app.state.cache)
    warmer.start()
    try:
        yield
    finally:
        warmer.stop.set()


def create_app(settings: Settings, store: Store | None = None) -> FastAPI:
    app = FastAPI(title="virtbench", version=__version__, docs_url=None, redoc_url=None,
                  openapi_url="/openapi.json", lifespan=lifespan,
                  description="Schedule and watch benchmark campaigns, verify raw measurements and compare "
                              "platforms. Reads are open unless the instance is private; every state change, "
                              "and validating a campaign, needs `Authorization: Bearer <token>`.")
    app.state.settings = settings
    app.state.store = store or Store(settings.db_url, busy_timeout_s=BUSY_TIMEOUT_S)
    app.state.auth = Auth(settings)
    app.state.cache = ReportCache()
    app.state.templates = templates()
    app.include_router(api.router)
    app.include_router(pages.router)
    app.include_router(studypage.router)
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    if settings.private:
        app.add_middleware(PrivateGate, auth=app.state.auth)
    app.add_middleware(SecurityHeaders)
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(settings.allowed_hosts))
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)  # added last: runs first
    _errors(app)
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


def _wants_json(request: Request) -> bool:
    return request.url.path.startswith("/api") or "application/json" in request.headers.get("accept", "")


def _errors(app: FastAPI) -> None:
    """One error shape per audience: {"detail"} for the API, an escaped page for browsers."""

    def reply(request: Request, status: int, detail: str, fix: str | None = None,
              headers: dict[str, str] | None = None) -> Response:
        if _wants_json(request):
            body: dict[str, Any] = {"detail": detail}
            if fix:
                body["fix"] = fix
            return JSONResponse(body, status_code=status, headers=headers)
        return pages.error_page(request, status, detail, fix, headers)

    @app.exception_handler(NotFound)
    async def not_found(request: Request, exc: NotFound) -> Response:
        return reply(request, 404, str(exc))

    @app.exception_handler(NoData)
    async def no_data(request: Request, exc: NoData) -> Response:
        return reply(request, 409, exc.message, exc.fix)

    @app.exception_handler(InputError)
    async def bad_input(request: Request, exc: InputError) -> Response:
        return reply(request, 400, exc.message, exc.fix)

    @app.exception_handler(DatabaseBusy)
    async def busy(request: Request, exc: DatabaseBusy) -> Response:
        return reply(request, 503, "the results database is busy (another process is writing); retry in a moment",
                     headers={"Retry-After": str(BUSY_RETRY_S)})

    @app.exception_handler(VirtbenchError)
    async def failed(request: Request, exc: VirtbenchError) -> Response:
        return reply(request, 500, exc.message, exc.fix)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        return reply(request, exc.status_code, str(exc.detail), headers=getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> Response:
        errors = exc.errors()
        first = errors[0] if errors else {"loc": (), "msg": "invalid request"}
        where = ".".join(str(p) for p in first.get("loc", ()))
        return reply(request, 422, f"{where}: {first.get('msg')}" if where else str(first.get("msg")))

    @app.exception_handler(Exception)
    async def crashed(request: Request, exc: Exception) -> Response:  # logged by the server, never shown
        return reply(request, 500, "internal error; the server log has the details")

    @app.exception_handler(404)
    async def missing(request: Request, exc: Exception) -> Response:
        return reply(request, 404, "no such page")

    @app.get("/healthz", include_in_schema=False)
    def healthz() -> PlainTextResponse:
        return PlainTextResponse("ok")


def _openapi(app: FastAPI) -> dict[str, Any]:
    """The generated schema, plus the bearer scheme on exactly the routes that need the token."""
    if app.openapi_schema:
        return app.openapi_schema
    doc = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
    doc.setdefault("components", {})["securitySchemes"] = {
        "bearerToken": {"type": "http", "scheme": "bearer",
                        "description": "the token given to `virtbench serve` (--token or VIRTBENCH_TOKEN)"}}
    for path, methods in doc.get("paths", {}).items():
        for method, op in methods.items():
            if (method, path) in TOKEN_ROUTES:
                op["security"] = [{"bearerToken": []}]
    app.openapi_schema = doc
    return doc
