"""The studies in the web app: each paper beside this host, as `virtbench study report` shows it.

/studies lists the five studies with the finished runs of each in the store; /studies/ID shows
the study before any run (studies.show.document, the one `study show` prints: parts, what each
needs and how long it takes, the paper's commands, values and claims, every difference) and,
with runs, builds the study's section (studies.report.build, the one `study report` prints)
from the chosen runs, by default the newest finished run of each part and scale, drawn as the
run page draws a report's. /api/studies/ID is `study show ID --json` (with the study's
finished runs here); /api/studies/ID?run=... is `study report ID RUN... --json`. An unknown
study is a 404 naming the studies that exist.
"""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, Path, Query, Request
from fastapi.responses import HTMLResponse

from ..errors import VirtbenchError
from ..report.model import Section
from ..store.browse import iso
from ..store.db import Store
from ..studies import compare as C
from ..studies import report as sreport
from ..studies import show
from ..studies.registry import STUDIES, Study
from ..studies.registry import study as find
from . import queries, results
from .queries import NotFound
from .security import require_read

router = APIRouter()
STUDY_ID = Path(..., max_length=32, description="the study's number, e.g. 000")
RUNS = Query([], alias="run", max_length=64, description="runs of the study (default: the newest of each part)")
MAX_RUNS = 20


def study_runs(store: Store, study: Study) -> list[dict[str, Any]]:
    """The store's finished runs of the study, newest first, each with its part and scale."""
    out = []
    for run in store.runs(limit=1000):
        part, scale = C.part_of(study, run.name)
        if scale and run.status == "finished":
            out.append({"id": run.id, "name": run.name, "part": part, "scale": scale, "created": iso(run.created_at)})
    return out


def _chosen(store: Store, study: Study, runs: list[str]) -> list[str]:
    if runs:
        if len(runs) > MAX_RUNS:
            raise HTTPException(400, f"at most {MAX_RUNS} runs at once")
        return runs
    newest: dict[tuple[str, str], str] = {}
    for r in study_runs(store, study):  # newest first: keep the first of each part and scale
        newest.setdefault((r["part"], r["scale"]), r["id"])
    return list(newest.values())


def _find(study_id: str) -> Study:
    try:
        return find(study_id)
    except VirtbenchError as exc:
        raise NotFound(f"{exc.message} ({exc.fix})" if exc.fix else exc.message) from None


def _section(request: Request, study_id: str, runs: list[str]) -> tuple[Study, Section | None, list[str]]:
    study = _find(study_id)
    store: Store = request.app.state.store
    chosen = _chosen(store, study, runs)
    if not chosen:
        return study, None, []
    reports = [results.full_report(store, request.app.state.cache, queries.get_run(store, rid).id)
               for rid in chosen]
    try:
        return study, sreport.build(study, sreport.part_runs(study, reports)), [r.run.id for r in reports]
    except VirtbenchError as exc:  # a run of another study among the chosen
        raise HTTPException(400, exc.message) from None


@router.get("/api/studies/{study_id}", tags=["studies"])
def study_json(request: Request, study_id: str = STUDY_ID, run: list[str] = RUNS) -> dict[str, Any]:
    """The study before any run (`virtbench study show ID --json`, with its finished runs here under
    `runs_here`); with `run=`: its comparison with the paper, `virtbench study report ID RUN... --json`."""
    require_read(request)
    if not run:
        study = _find(study_id)
        return {**show.document(study), "runs_here": study_runs(request.app.state.store, study)}
    _, section, _ = _section(request, study_id, run)
    assert section is not None
    return section.data


@router.get("/studies", response_class=HTMLResponse, include_in_schema=False)
def studies_page(request: Request) -> HTMLResponse:
    from .pages import render

    require_read(request)
    store: Store = request.app.state.store
    listing = [{"id": s.id, "title": s.title, "parts": [p.name for p in s.parts], "runs": study_runs(store, s)}
               for s in STUDIES]
    return render(request, "studies.html", title="Studies", studies=listing)


@router.get("/studies/{study_id}", response_class=HTMLResponse, include_in_schema=False)
def study_page(request: Request, study_id: str = STUDY_ID, run: list[str] = RUNS) -> HTMLResponse:
    from .pages import render, section_view

    require_read(request)
    study, section, chosen = _section(request, study_id, run)
    return render(request, "study.html", title=f"Study {study.id}", study=study, chosen=chosen,
                  runs=study_runs(request.app.state.store, study), doc=show.document(study),
                  section=section_view(section) if section is not None else None)
