"""Helpers of the web tests (imported by conftest.py and the tests; no fixtures here)."""
from __future__ import annotations

import re

from virtbench.analysis import synthetic
from virtbench.store.db import Store
from virtbench.web.app import create_app
from virtbench.web.settings import Settings

TOKEN = "test-token-0123456789abcdef"


def fill(store: Store) -> None:
    """Two finished synthetic runs on two hosts; r1 has drift on docker and a failed fio execution."""
    synthetic.fill(store, "r1", repetitions=6, drift={"docker": 0.03}, fail={("runc", "sim-fio"): [2]})
    synthetic.fill(store, "r2", repetitions=6, hostname="other-host", seed=2)


def make_client(store, **settings):
    from fastapi.testclient import TestClient

    app = create_app(Settings(db_url=store.url, token=TOKEN, **settings), store)
    return TestClient(app, base_url="http://testserver")


def login(client) -> str:
    """Log in through the form like a browser; returns the CSRF value of the session's forms."""
    page = client.get("/login")
    value = re.search(r'name="login_csrf" value="([^"]+)"', page.text).group(1)
    r = client.post("/login", data={"login_csrf": value, "token": TOKEN, "next": "/"}, follow_redirects=False)
    assert r.status_code == 303, r.text
    home = client.get("/schedule")
    return re.search(r'name="csrf" value="([^"]+)"', home.text).group(1)

