"""The attacks: missing or wrong token, forged forms, script in names, oversized and hostile
uploads, SQL in parameters, state changes over GET, private mode, redirects, headers."""
from __future__ import annotations

import re

import pytest

from virtbench.store.models import Run

from .helpers import TOKEN, login, make_client

SCRIPT = "<script>alert(1)</script>"
CAMPAIGN = {"name": "ok", "platforms": ["native"], "benchmarks": ["sysbench-cpu"]}


def queued(store) -> int:
    with store.session() as s:
        return s.query(Run).filter(Run.status == "queued").count()


@pytest.mark.parametrize("headers,status", [({}, 401), ({"Authorization": "Bearer wrong"}, 403),
                                            ({"Authorization": f"Basic {TOKEN}"}, 401),
                                            ({"Authorization": f"Bearer {TOKEN}x"}, 403),
                                            ({"Authorization": "Bearer "}, 403)])
def test_writes_need_the_token(client, filled, headers, status):
    assert client.post("/api/runs", json={"campaign": CAMPAIGN}, headers=headers).status_code == status
    assert client.post("/api/runs/r1/cancel", headers=headers).status_code == status
    assert client.delete("/api/runs/r1", headers=headers).status_code == status
    assert queued(filled) == 0 and client.get("/api/runs/r1").status_code == 200


def test_a_session_cookie_is_not_enough_for_the_api(client):
    login(client)
    assert client.post("/api/runs", json={"campaign": CAMPAIGN}).status_code == 401
    assert client.delete("/api/runs/r1").status_code == 401


def test_guessing_is_slowed_down(client):
    for _ in range(20):
        assert client.post("/api/runs/r1/cancel", headers={"Authorization": "Bearer guess"}).status_code == 403
    assert client.post("/api/runs/r1/cancel", headers={"Authorization": "Bearer guess"}).status_code == 429
    assert client.post("/api/runs/r1/cancel", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 409


def test_forms_need_a_session_and_its_csrf_value(client, filled):
    data = {"name": "x", "p0.use": "on", "p0.name": "native", "p0.type": "native", "b0.use": "on",
            "b0.name": "sysbench-cpu"}
    assert client.post("/schedule", data=data).status_code == 403  # no session
    csrf = login(client)
    assert client.post("/schedule", data=data).status_code == 403  # session, no CSRF value
    assert client.post("/schedule", data={**data, "csrf": "0" * 40}).status_code == 403  # forged value
    other = make_client(filled)
    other_csrf = login(other)
    assert other_csrf != csrf
    assert client.post("/schedule", data={**data, "csrf": other_csrf}).status_code == 403  # another session's
    evil = client.post("/schedule", data={**data, "csrf": csrf}, headers={"Origin": "http://evil.example"})
    assert evil.status_code == 403
    assert client.post("/runs/r1/delete", data={}).status_code == 403
    assert queued(filled) == 0
    ok = client.post("/schedule", data={**data, "csrf": csrf}, follow_redirects=False)
    assert ok.status_code == 303 and queued(filled) == 1


def test_login_form_is_protected_and_cookies_are_strict(client):
    page = client.get("/login")
    value = re.search(r'name="login_csrf" value="([^"]+)"', page.text).group(1)
    assert client.post("/login", data={"login_csrf": "forged", "token": TOKEN}).status_code == 403
    wrong = client.post("/login", data={"login_csrf": value, "token": "nope"})
    assert wrong.status_code == 401 and "Wrong token" in wrong.text
    page = client.get("/login")
    value = re.search(r'name="login_csrf" value="([^"]+)"', page.text).group(1)
    r = client.post("/login", data={"login_csrf": value, "token": TOKEN, "next": "//evil.example/x"},
                    follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/"  # no open redirect
    cookie = r.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict")
    tampered = client.cookies.get("vb_session")[:-2] + "00"
    client.cookies.set("vb_session", tampered)
    assert "log out" not in client.get("/").text


def test_no_state_change_over_get(client, filled):
    for path in ("/runs/r1/cancel", "/runs/r1/delete", "/api/runs/r1/cancel", "/logout"):
        assert client.get(path).status_code in (404, 405), path
    assert client.get("/api/runs/r1").status_code == 200
    from virtbench.web import api, pages

    routes = [*api.router.routes, *pages.router.routes]  # the app's own list holds the routers, not their routes
    methods = {m for route in routes for m in getattr(route, "methods", ()) or ()}
    write_get = [r.path for r in routes if "GET" in (getattr(r, "methods", None) or ())
                 and any(w in r.path for w in ("cancel", "delete", "logout", "validate"))]
    assert not write_get and {"GET", "POST", "DELETE"} <= methods


def test_script_in_campaign_is_refused_and_escaped(client, auth):
    r = client.post("/api/runs", json={"campaign": {**CAMPAIGN, "name": SCRIPT}}, headers=auth)
    assert r.status_code == 400 and "name" in r.json()["detail"]
    csrf = login(client)
    page = client.post("/schedule", data={"csrf": csrf, "name": SCRIPT, "p0.use": "on", "p0.name": "native",
                                          "p0.type": "native", "b0.use": "on", "b0.name": "sysbench-cpu"})
    assert page.status_code == 400 and SCRIPT not in page.text and "&lt;script&gt;" in page.text
    yaml_page = client.post("/schedule", data={"csrf": csrf, "mode": "yaml", "campaign_yaml": f"name: '{SCRIPT}'\n"})
    assert yaml_page.status_code == 400 and SCRIPT not in yaml_page.text


def test_stored_markup_is_escaped_on_every_page(filled, auth):
    """A run written by any client of a shared store (here: straight into it) cannot inject markup."""
    client = make_client(filled)
    ok = client.post("/api/runs", json={"campaign": {**CAMPAIGN, "description": SCRIPT}}, headers=auth).json()
    filled.update_run("r1", name=SCRIPT, error=SCRIPT, campaign_source=SCRIPT)
    filled.update_run(ok["run_id"], target_host=SCRIPT)
    from virtbench.store.models import Execution
    with filled.session.begin() as s:
        ex = s.query(Execution).filter(Execution.run_id == "r1").first()
        ex.stdout, ex.stderr, ex.error = SCRIPT, SCRIPT, SCRIPT
        ex_id = ex.id
    for path in ("/", "/runs", "/runs/r1", f"/runs/{ok['run_id']}", "/runs/r1/verify", f"/executions/{ex_id}",
                 "/compare?run=r1&run=r2", "/schedule"):
        page = client.get(path)
        assert page.status_code == 200, path
        assert SCRIPT not in page.text and "<script>" not in page.text.replace(
            '<script src="/static/app.js" defer></script>', ""), path
    assert "&lt;script&gt;" in client.get(f"/executions/{ex_id}").text
    assert client.get("/api/runs/r1").json()["name"] == SCRIPT  # the API returns data, JSON-encoded


def test_oversized_bodies_are_refused_before_parsing(client, auth):
    big = "x" * (2 << 20)
    r = client.post("/api/runs", content=big, headers={**auth, "Content-Type": "application/json"})
    assert r.status_code == 413
    csrf = login(client)
    up = client.post("/schedule", data={"csrf": csrf, "mode": "yaml"},
                     files={"campaign_file": ("big.yaml", b"# " + b"x" * (2 << 20), "text/yaml")})
    assert up.status_code == 413

    def chunks():
        for _ in range(40):
            yield b"y" * 65536

    streamed = client.post("/api/campaigns/validate", content=chunks(), headers={"Content-Type": "application/json"})
    assert streamed.status_code == 413


def test_campaign_size_limit_below_the_body_limit(client, auth):
    text = "name: x\nplatforms: [native]\nbenchmarks: [sysbench-cpu]\n# " + "x" * (300 << 10) + "\n"
    r = client.post("/api/runs", json={"yaml": text}, headers=auth)
    assert r.status_code == 400 and "larger than" in r.json()["detail"]


def test_hostile_yaml_is_refused(client, auth):
    laughs = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi"))
    r = client.post("/api/runs", json={"yaml": laughs}, headers=auth)
    assert r.status_code == 400 and "aliases" in r.json()["detail"]
    deep = "name: " + "[" * 200 + "]" * 200 + "\n"
    assert "nested deeper" in client.post("/api/runs", json={"yaml": deep}, headers=auth).json()["detail"]
    code = "!!python/object/apply:os.system ['touch /tmp/pwned']\n"
    r = client.post("/api/runs", json={"yaml": code}, headers=auth)
    assert r.status_code == 400 and "not valid YAML" in r.json()["detail"]
    deep_json = '{"campaign": ' + "[" * 100000 + "]" * 100000 + "}"
    r = client.post("/api/campaigns/validate", content=deep_json, headers={"Content-Type": "application/json"})
    assert r.status_code == 400
    csrf = login(client)
    binary = client.post("/schedule", data={"csrf": csrf, "mode": "yaml"},
                         files={"campaign_file": ("x.yaml", b"\xff\xfe\x00bad", "text/yaml")})
    assert binary.status_code == 400 and "not UTF-8" in binary.text


@pytest.mark.parametrize("evil", ["' OR '1'='1", "r1'; DROP TABLE runs; --", "r1%", "%", "r_", "..%2F..%2Fetc"])
def test_sql_in_parameters_is_data(client, filled, evil):
    assert client.get(f"/api/runs/{evil}").status_code in (404, 422)
    listed = client.get("/api/runs", params={"status": evil, "host": evil})
    assert listed.status_code == 422 or listed.json() == []
    assert client.get("/api/compare", params={"run": evil}).status_code in (404, 422)
    v = client.get("/api/runs/r1/verify", params={"benchmark": evil, "metric": evil})
    assert v.status_code == 200  # unknown metric: the default one is shown
    assert client.get("/runs", params={"host": evil}).status_code == 200
    assert len(client.get("/api/runs").json()) == 2


def test_private_instance_needs_the_token_to_read(filled):
    client = make_client(filled, private=True)
    assert client.get("/", follow_redirects=False).headers["location"] == "/login"
    for path in ("/api/runs", "/openapi.json", "/api/runs/r1/report", "/runs/r1", "/api"):
        assert client.get(path, follow_redirects=False).status_code in (401, 303), path
    assert client.get("/api/runs", headers={"Authorization": "Bearer nope"}).status_code == 401
    assert client.get("/api/runs", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    assert client.get("/static/app.css").status_code == 200 and client.get("/login").status_code == 200
    login(client)
    assert client.get("/runs/r1").status_code == 200 and client.get("/api/runs/r1/progress").status_code == 200


def test_public_instance_reads_without_token_but_shows_no_write_controls(client):
    page = client.get("/runs/r1")
    assert page.status_code == 200 and 'action="/runs/r1/delete"' not in page.text and "Log in" in page.text
    login(client)
    assert 'action="/runs/r1/delete"' in client.get("/runs/r1").text


def test_headers_and_host_checks(filled):
    client = make_client(filled, allowed_hosts=("127.0.0.1", "localhost"))
    assert client.get("/", headers={"Host": "evil.example"}).status_code == 400  # DNS rebinding
    r = client.get("/", headers={"Host": "127.0.0.1:8080"})
    csp = r.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp
    assert r.headers["x-content-type-options"] == "nosniff" and r.headers["x-frame-options"] == "DENY"
    assert r.headers["cache-control"] == "no-store"
    assert not re.search(r"https?://(?!127\.0\.0\.1|localhost|testserver|HOST)", r.text)  # no external URL
    assert "<script>" not in r.text and " style=" not in r.text and " on" + "click=" not in r.text


@pytest.mark.parametrize("flag", [[], ["--secure-cookies"]])
def test_serve_marks_cookies_secure_only_when_asked(tmp_path, flag):
    """Behind an HTTPS proxy `virtbench serve --secure-cookies` keeps cookies off plain HTTP."""
    import os
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "VIRTBENCH_TOKEN": TOKEN, "VIRTBENCH_DB": f"sqlite:///{tmp_path / 'w.db'}"}
    server = subprocess.Popen([sys.executable, "-m", "virtbench", "serve", "--no-worker", "--port", str(port), *flag],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                page = urllib.request.urlopen(f"http://127.0.0.1:{port}/login", timeout=2)
                break
            except OSError:
                assert time.monotonic() < deadline and server.poll() is None, "serve did not start"
                time.sleep(0.2)
        cookie = page.headers["set-cookie"].lower()
    finally:
        server.terminate()
        server.wait(30)
    assert "httponly" in cookie and "samesite=strict" in cookie
    assert ("; secure" in cookie) == bool(flag)
