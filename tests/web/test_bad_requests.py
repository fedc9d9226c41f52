"""Malformed requests of every kind get a 4xx with a short answer: never a 500, never a
traceback or the token in the body, and nothing queued. Several of these were HTTP 500
(non-ASCII cookies and CSRF values, lone surrogates in JSON, offsets beyond a database
integer); a locked database was a 500 after 10 s and is a 503 with Retry-After now."""
from __future__ import annotations

import json
import sqlite3
import threading
import time

import pytest

from virtbench.store.db import Store
from virtbench.store.models import Run

from .helpers import TOKEN, login, make_client

OK = {"name": "ok", "platforms": ["native"], "benchmarks": ["sysbench-cpu"]}
AUTH = {"Authorization": f"Bearer {TOKEN}"}
JSON = {"Content-Type": "application/json"}
CSRF = "<csrf>"
"""Replaced by the session's CSRF value in cases that log in first."""


def raw(body: bytes | str, content_type: str = "application/json") -> dict:
    return {"content": body.encode() if isinstance(body, str) else body,
            "headers": {**AUTH, "Content-Type": content_type}}


def camp(**changes) -> dict:
    return {"json": {"campaign": {**OK, **changes}}, "headers": AUTH}


def cookie(value: bytes) -> dict:
    return {"headers": {"Cookie": b"vb_session=" + value}}


# (id, method, path, request arguments, expected status, log in first)
CASES = [
    # -- bodies of POST /api/runs and /api/campaigns/validate --------------------------------
    ("bad-json", "POST", "/api/runs", raw("{bad"), 422, False),
    ("non-utf8-body", "POST", "/api/runs", raw(b"\xff\xfe\x00{"), 422, False),
    ("utf16-body", "POST", "/api/runs", raw('{"yaml": "name: x"}'.encode("utf-16")), 400, False),
    ("json-array", "POST", "/api/runs", raw("[]"), 422, False),
    ("json-null", "POST", "/api/runs", raw("null"), 422, False),
    ("json-string", "POST", "/api/runs", raw('"name: x"'), 422, False),
    ("empty-body", "POST", "/api/runs", raw(""), 422, False),
    ("text-plain", "POST", "/api/runs", raw(json.dumps({"campaign": OK}), "text/plain"), 422, False),
    ("form-encoded", "POST", "/api/runs", raw("campaign=x", "application/x-www-form-urlencoded"), 422, False),
    ("yaml-type", "POST", "/api/runs", raw("name: x\n", "application/yaml"), 422, False),
    ("both-given", "POST", "/api/runs", {"json": {"campaign": OK, "yaml": "name: x"}, "headers": AUTH}, 400, False),
    ("neither-given", "POST", "/api/runs", {"json": {}, "headers": AUTH}, 400, False),
    ("campaign-list", "POST", "/api/runs", {"json": {"campaign": [OK]}, "headers": AUTH}, 422, False),
    ("yaml-number", "POST", "/api/runs", {"json": {"yaml": 42}, "headers": AUTH}, 422, False),
    ("yaml-nul", "POST", "/api/runs", {"json": {"yaml": "name: \x00"}, "headers": AUTH}, 400, False),
    ("yaml-scalar", "POST", "/api/runs", {"json": {"yaml": "just text"}, "headers": AUTH}, 400, False),
    ("yaml-list", "POST", "/api/runs", {"json": {"yaml": "- a\n- b\n"}, "headers": AUTH}, 400, False),
    ("yaml-broken", "POST", "/api/runs", {"json": {"yaml": "a: [1\n"}, "headers": AUTH}, 400, False),
    ("yaml-python-tag", "POST", "/api/runs", {"json": {"yaml": "!!python/object/apply:os.system [id]"}, "headers": AUTH},
     400, False),
    ("surrogate-yaml", "POST", "/api/runs", raw('{"yaml": "name: \\ud800"}'), 422, False),
    ("surrogate-name", "POST", "/api/runs", raw('{"campaign": {"name": "\\ud800", "platforms": ["native"]}}'), 422, False),
    ("surrogate-description", "POST", "/api/runs",
     raw(json.dumps({"campaign": {**OK, "description": "X"}}).replace('"X"', '"\\udfff"')), 422, False),
    ("surrogate-key", "POST", "/api/runs", raw('{"campaign": {"\\ud800": 1, "name": "x"}}'), 422, False),
    ("surrogate-target", "POST", "/api/runs",
     raw(json.dumps({"campaign": OK, "target_host": "X"}).replace('"X"', '"\\ud800"')), 422, False),
    ("surrogate-validate", "POST", "/api/campaigns/validate",
     raw(json.dumps({"campaign": {**OK, "description": "X"}}).replace('"X"', '"\\ud800"')), 422, False),
    ("target-host-huge", "POST", "/api/runs", {"json": {"campaign": OK, "target_host": "h" * 300}, "headers": AUTH},
     422, False),
    ("unknown-key", "POST", "/api/runs", camp(colour="red"), 400, False),
    ("platforms-string", "POST", "/api/runs", camp(platforms="native"), 400, False),
    ("repetitions-text", "POST", "/api/runs", camp(repetitions="many"), 400, False),
    ("repetitions-huge", "POST", "/api/runs", camp(repetitions=10**30), 400, False),
    ("repetitions-nan", "POST", "/api/runs", raw('{"campaign": {"name": "x", "platforms": ["native"], '
                                                 '"benchmarks": ["sysbench-cpu"], "repetitions": NaN}}'), 400, False),
    ("deep-json", "POST", "/api/campaigns/validate", raw('{"campaign": ' + "[" * 5000 + "]" * 5000 + "}"), 400, False),
    ("huge-body", "POST", "/api/runs", raw(b'{"yaml": "' + b"x" * (2 << 20) + b'"}'), 413, False),
    ("inventory-path", "POST", "/api/runs", camp(hosts={"inventory": "/etc/shadow", "group": "all"}), 403, False),
    ("rootfs-path", "POST", "/api/campaigns/validate",
     camp(platforms=[{"name": "l", "type": "lxc", "image": {"rootfs": "/etc/shadow"}}]), 403, False),
    ("validate-no-token", "POST", "/api/campaigns/validate", {"json": {"campaign": OK}}, 401, False),
    # -- tokens and cookies --------------------------------------------------------------------
    ("bearer-non-ascii", "POST", "/api/runs", {"json": {"campaign": OK}, "headers": {"Authorization": b"Bearer \xc3\xa9"}},
     403, False),
    ("bearer-huge", "POST", "/api/runs", {"json": {"campaign": OK}, "headers": {"Authorization": "Bearer " + "t" * 60000}},
     403, False),
    ("basic-auth", "DELETE", "/api/runs/r1", {"headers": {"Authorization": f"Basic {TOKEN}"}}, 401, False),
    ("cookie-non-ascii-form", "POST", "/schedule", {"data": {"csrf": "x"}, **cookie(b"v1.1.\xc3\xa9.x")}, 403, False),
    ("cookie-bad-sig", "POST", "/logout", {"data": {"csrf": "x"}, **cookie(b"v1.1.abc.\xff")}, 403, False),
    ("login-csrf-non-ascii", "POST", "/login",
     {"data": {"login_csrf": "é", "token": TOKEN}, "headers": {"Cookie": "vb_login=é".encode()}}, 403, False),
    ("login-cookie-binary", "POST", "/login",
     {"data": {"login_csrf": "abc", "token": TOKEN}, "headers": {"Cookie": b"vb_login=\xff\xfe"}}, 403, False),
    ("login-non-utf8-form", "POST", "/login",
     {"content": b"login_csrf=\xff&token=\xfe", "headers": {"Content-Type": "application/x-www-form-urlencoded"}},
     403, False),
    ("login-multipart-no-boundary", "POST", "/login",
     {"content": b"x", "headers": {"Content-Type": "multipart/form-data"}}, 400, False),
    ("session-csrf-non-ascii", "POST", "/schedule", {"data": {"csrf": "é" * 40, "name": "x"}}, 403, True),
    ("session-logout-csrf-non-ascii", "POST", "/logout", {"data": {"csrf": "ü"}}, 403, True),
    ("session-csrf-huge", "POST", "/schedule", {"data": {"csrf": "a" * 100000}}, 403, True),
    ("schedule-form-inventory", "POST", "/schedule",
     {"data": {"csrf": CSRF, "name": "x", "p0.use": "on", "p0.name": "native", "p0.type": "native",
               "b0.use": "on", "b0.name": "sysbench-cpu", "hosts": "{inventory: /etc/shadow, group: all}"}}, 403, True),
    ("schedule-yaml-known-hosts", "POST", "/schedule",
     {"data": {"csrf": CSRF, "mode": "yaml", "campaign_yaml":
               "name: x\nplatforms: [native]\nbenchmarks: [sysbench-cpu]\n"
               "hosts: [{name: b, address: 10.0.0.2, known_hosts: /root/.ssh/known_hosts}]\n"}}, 403, True),
    ("schedule-upload-binary", "POST", "/schedule",
     {"data": {"csrf": CSRF, "mode": "yaml"}, "files": {"campaign_file": ("c.yaml", b"\x00\xff\xfe", "text/yaml")}},
     400, True),
    # -- ids, downloads, paging ----------------------------------------------------------------
    ("run-id-traversal", "GET", "/api/runs/..%2F..%2Fetc%2Fpasswd", {}, 404, False),
    ("run-id-dots", "GET", "/api/runs/%2e%2e", {}, 422, False),
    ("run-id-nul", "GET", "/api/runs/r1%00", {}, 422, False),
    ("run-id-long", "GET", "/api/runs/" + "a" * 100, {}, 422, False),
    ("run-id-unknown-report", "GET", "/api/runs/nope/report", {}, 404, False),
    ("download-format", "GET", "/api/runs/r1/download/exe", {}, 422, False),
    ("download-format-traversal", "GET", "/api/runs/r1/download/..%2F..%2Fetc%2Fpasswd", {}, 404, False),
    ("download-table-traversal", "GET", "/api/runs/r1/download/csv?table=../../etc/passwd", {}, 422, False),
    ("download-unknown-run", "GET", "/api/runs/nope/download/csv", {}, 404, False),
    ("delete-traversal", "DELETE", "/api/runs/..%2Fr1", {"headers": AUTH}, 404, False),
    ("cancel-bad-id", "POST", "/api/runs/r1%20x/cancel", {"headers": AUTH}, 422, False),
    ("execution-negative", "GET", "/api/executions/-1", {}, 422, False),
    ("execution-text", "GET", "/api/executions/abc", {}, 422, False),
    ("execution-huge", "GET", "/api/executions/" + "9" * 30, {}, 422, False),
    ("offset-overflow", "GET", f"/api/runs?offset={2**63}", {}, 422, False),
    ("executions-offset-overflow", "GET", f"/api/runs/r1/executions?offset={2**63}", {}, 422, False),
    ("limit-zero", "GET", "/api/runs?limit=0", {}, 422, False),
    ("page-zero", "GET", "/runs?page=0", {}, 422, False),
    ("compare-nothing", "GET", "/api/compare", {}, 400, False),
    ("compare-unknown", "GET", "/api/compare?run=nope", {}, 404, False),
    ("static-traversal", "GET", "/static/..%2F..%2Fapp.py", {}, 404, False),
    ("static-dotdot", "GET", "/static/%2e%2e/security.py", {}, 404, False),
]


def runs_of(store) -> list[tuple[str, str]]:
    with store.session() as s:
        return sorted((r.id, r.status) for r in s.query(Run))


@pytest.mark.parametrize("method,path,kwargs,expect,session", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_request_is_a_short_4xx(filled, tmp_path, method, path, kwargs, expect, session):
    client = make_client(filled)
    before = runs_of(filled)
    if session:
        csrf = login(client)
        kwargs = {**kwargs, "data": {k: (csrf if v == CSRF else v) for k, v in kwargs.get("data", {}).items()}}
    r = client.request(method, path, **kwargs)
    assert r.status_code == expect, r.text[:300]
    body = r.text
    assert "Traceback" not in body and 'File "' not in body and TOKEN not in body
    assert "root:" not in body  # no line of /etc/shadow or /etc/passwd
    if r.headers.get("content-type", "").startswith(("application/json", "text/plain")):
        assert len(body) < 600, body
    assert runs_of(filled) == before  # nothing queued, nothing changed


def test_at_least_forty_cases():
    assert len(CASES) >= 40 and len({c[0] for c in CASES}) == len(CASES)


# -- a locked database ------------------------------------------------------------------------------
def _hold_lock(store: Store, backend: str, ready: threading.Event, release: threading.Event) -> None:
    """Another process's writer: an open write transaction (SQLite) or a table lock (PostgreSQL)."""
    if backend == "sqlite":
        conn = sqlite3.connect(store.engine.url.database, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("UPDATE runs SET name = name")
        ready.set()
        release.wait(30)
        conn.execute("ROLLBACK")
        conn.close()
        return
    from sqlalchemy import create_engine, text

    engine = create_engine(store.url)
    with engine.connect() as conn:
        conn.execute(text("LOCK TABLE runs IN ACCESS EXCLUSIVE MODE"))
        ready.set()
        release.wait(30)
        conn.rollback()
    engine.dispose()


def test_a_locked_database_is_a_quick_503(filled, backend):
    store = Store(filled.url, migrate=False, busy_timeout_s=0.5)
    client = make_client(store)
    ready, release = threading.Event(), threading.Event()
    holder = threading.Thread(target=_hold_lock, args=(filled, backend, ready, release), daemon=True)
    holder.start()
    try:
        assert ready.wait(30)
        start = time.monotonic()
        r = client.post("/api/runs", json={"campaign": OK}, headers=AUTH)
        waited = time.monotonic() - start
    finally:
        release.set()
        holder.join(30)
        store.engine.dispose()
    assert r.status_code == 503, r.text[:300]
    assert r.headers["retry-after"].isdigit() and "busy" in r.json()["detail"]
    assert waited < 8  # the bounded busy timeout (0.5 s here), not the old 10 s and a 500
    assert [s for _, s in runs_of(filled)] == ["finished", "finished"]
