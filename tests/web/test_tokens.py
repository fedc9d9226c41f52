"""The token: wrong ones limited on every instance without ever locking out the right one,
weak ones refused at `serve` start, never inherited by the worker; malformed cookies and
CSRF values refused with 4xx; every state-changing form needs its CSRF value."""
from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time

import pytest

from virtbench.web import security, server

from .helpers import TOKEN, login, make_client

AUTH = {"Authorization": f"Bearer {TOKEN}"}
WRONG = {"Authorization": "Bearer guess-guess-guess-guess"}
CAMPAIGN = {"name": "ok", "platforms": ["native"], "benchmarks": ["sysbench-cpu"]}


@pytest.mark.parametrize("private", [False, True])
def test_wrong_tokens_are_limited_and_the_right_one_never_locked_out(filled, private):
    """Before: 20 wrong tries from one address gave the right token 429 for a minute (public),
    and a private instance never limited wrong tokens at all."""
    client = make_client(filled, private=private)
    codes = [client.get("/api/runs", headers=WRONG).status_code for _ in range(security.FailureLimiter.LIMIT + 5)]
    codes += [client.post("/api/runs/r1/cancel", headers=WRONG).status_code for _ in range(3)]
    assert 429 in codes and codes[-1] == 429
    throttled = client.post("/api/runs/r1/cancel", headers=WRONG)
    assert throttled.status_code == 429 and 1 <= int(throttled.headers["retry-after"]) <= 60
    assert client.get("/api/runs", headers=AUTH).status_code == 200
    r = client.post("/api/runs", json={"campaign": CAMPAIGN}, headers=AUTH)
    assert r.status_code == 201, r.text
    assert client.get("/api/runs", headers=WRONG).status_code == 429  # still limited for the guesser


def test_wrong_logins_are_limited_but_the_right_token_still_logs_in(client):
    for _ in range(security.FailureLimiter.LIMIT + 3):
        page = client.get("/login")
        value = re.search(r'name="login_csrf" value="([^"]+)"', page.text).group(1)
        last = client.post("/login", data={"login_csrf": value, "token": "wrong-wrong-wrong-wrong"})
    assert last.status_code == 429
    login(client)  # asserts the 303


def test_a_huge_token_is_refused_without_hashing(client, monkeypatch):
    hashed = []
    monkeypatch.setattr(security, "_digest", lambda v: hashed.append(len(v)) or b"")
    r = client.post("/api/runs", json={"campaign": CAMPAIGN}, headers={"Authorization": "Bearer " + "x" * 50000})
    assert r.status_code == 403 and not [n for n in hashed if n > security.MAX_TOKEN_CHARS]


@pytest.mark.parametrize("token", ["short", "a" * 40, "ab" * 20, "password" * 4, "0123456789" * 2,
                                   "x" * 300, " " + "Zq8-Lr2vT9wYk3mN7pB4cX6hJ1", "Zq8-Lr2vT9wYk3mN\n7pB4cX6hJ1"])
def test_weak_tokens_are_refused(token):
    assert security.token_problem(token)
    with pytest.raises(server.InputError):
        server.check_token(token)


@pytest.mark.parametrize("token", ["password1234567890123456", "qwertyuiopasdfghjklzxcvbnm", "abcdefghijklmnopqrstuvwx",
                                   "Summer2026Summer2026Summer2026", "iloveyouiloveyou12345678"])
def test_guessable_tokens_are_refused_by_the_strength_estimator(token):
    """Before (#42): these passed the length and distinct-character rule and served the app.
    Now a password-strength estimator (zxcvbn) must give its top score, and the fix offers a
    generated token."""
    problem = security.token_problem(token)
    assert problem and "zxcvbn" in problem
    with pytest.raises(server.InputError) as err:
        server.check_token(token)
    suggested = re.search(r"such as (\S+)", err.value.fix or "")
    assert suggested and security.token_problem(suggested.group(1)) is None and token not in str(err.value)


def test_a_non_ascii_token_is_refused():
    """Before (#42): accepted at start, yet no client can send it (HTTP headers are ASCII)."""
    problem = security.token_problem("Zq8-Lr2vT9wYk3mN7pB4cX6hJ1-grüße")
    assert problem and "non-ASCII" in problem


@pytest.mark.parametrize("token", [TOKEN, "Zq8-Lr2vT9wYk3mN7pB4cX6hJ1", "correct horse battery staple"])
def test_strong_tokens_are_accepted(token):
    assert security.token_problem(token) is None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("token", ["short1234", "q" * 5000])
def test_serve_refuses_a_weak_token_in_one_line(tmp_path, token):
    env = {**os.environ, "VIRTBENCH_TOKEN": token, "VIRTBENCH_DB": f"sqlite:///{tmp_path / 'w.db'}"}
    r = subprocess.run([sys.executable, "-m", "virtbench", "serve", "--no-worker", "--port", str(_free_port())],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert lines[0].startswith("error: --token/VIRTBENCH_TOKEN") and "Traceback" not in r.stderr
    assert token not in r.stderr and not (tmp_path / "w.db").exists()  # refused before anything started


def test_serve_generates_and_prints_a_strong_token(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "VIRTBENCH_TOKEN"}
    env["VIRTBENCH_DB"] = f"sqlite:///{tmp_path / 'w.db'}"
    proc = subprocess.Popen([sys.executable, "-m", "virtbench", "serve", "--no-worker", "--port", str(_free_port())],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 90
        token = None
        while token is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line and proc.poll() is not None:
                break
            if m := re.search(r"^token \(.*\): (\S+)$", line.strip()):
                token = m.group(1)
    finally:
        proc.terminate()
        proc.wait(30)
    assert token and security.token_problem(token) is None and len(token) >= 40


def test_the_worker_gets_no_token(monkeypatch):
    """Before: the worker `serve` starts inherited VIRTBENCH_TOKEN."""
    monkeypatch.setenv("VIRTBENCH_TOKEN", TOKEN)
    monkeypatch.setenv("SOME_WRAPPER_SECRET", f"prefix:{TOKEN}")
    monkeypatch.setenv("VB_TEST_KEEP", "kept")
    env = server.worker_env("sqlite:///x.db", hide=(TOKEN,))
    assert not [k for k, v in env.items() if TOKEN in v or k == "VIRTBENCH_TOKEN"]
    assert env["VB_TEST_KEEP"] == "kept" and env["VIRTBENCH_DB"] == "sqlite:///x.db"


def test_the_started_worker_process_has_no_token(monkeypatch, tmp_path):
    """The real child: its environment and argv, as the kernel shows them."""
    monkeypatch.setenv("VIRTBENCH_TOKEN", TOKEN)
    monkeypatch.setenv("VIRTBENCH_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("VIRTBENCH_RUNTIME_DIR", str(tmp_path / "run"))
    proc = server.start_worker(f"sqlite:///{tmp_path / 'w.db'}", hide=(TOKEN,))
    try:  # Popen returns once the child has exec'd: /proc shows the worker's own environment
        environ = open(f"/proc/{proc.pid}/environ", "rb").read()
        cmdline = open(f"/proc/{proc.pid}/cmdline", "rb").read()
    finally:
        proc.kill()
        proc.wait(30)
    assert TOKEN.encode() not in environ and b"VIRTBENCH_TOKEN" not in environ
    assert TOKEN.encode() not in cmdline and b"VIRTBENCH_DB=sqlite" in environ


@pytest.mark.parametrize("value", [b"\xc3\xa9", b"v1.1.abc.\xff", b"v1.\xc3\xa9.x.y", b"\x00\x01", b"a" * 5000])
def test_malformed_session_cookies_are_not_a_500(filled, value):
    """Before: a non-ASCII session cookie made every page an HTTP 500."""
    public, private = make_client(filled), make_client(filled, private=True)
    headers = {"Cookie": b"vb_session=" + value}
    assert public.get("/", headers=headers).status_code == 200
    assert "log out" not in public.get("/", headers=headers).text
    assert private.get("/", headers=headers, follow_redirects=False).status_code == 303
    assert private.get("/api/runs", headers=headers).status_code == 401
    assert public.post("/schedule", data={"csrf": "x"}, headers=headers).status_code == 403


def test_every_state_changing_form_needs_its_csrf_value(client):
    """All POST routes of the pages: no session -> 403; a session without the right CSRF
    value -> 403 (the login form has its own double-submit value)."""
    from virtbench.web import pages

    forms = [r.path.replace("{run_id}", "r1") for r in pages.router.routes if "POST" in (getattr(r, "methods", None) or ())]
    assert {"/schedule", "/logout", "/login"} <= set(forms)
    for path in forms:
        assert client.post(path, data={"csrf": "x", "login_csrf": "x"}).status_code == 403, path
    login(client)
    for path in (f for f in forms if f != "/login"):
        for bad in ({}, {"csrf": "é" * 40}, {"csrf": "0" * 40}):
            assert client.post(path, data=bad).status_code == 403, (path, bad)


def test_cookies_are_httponly_and_samesite_and_serve_binds_to_loopback(client):
    from virtbench.cli import serve

    login_cookie = client.get("/login").headers["set-cookie"].lower()
    assert "httponly" in login_cookie and "samesite=strict" in login_cookie
    assert next(p for p in serve.params if p.name == "host").default == "127.0.0.1"
