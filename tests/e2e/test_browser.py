"""Browser tests: `virtbench serve` (with its worker) on a free port, driven by playwright-core
in Debian's chromium (journey.mjs): schedule a quick campaign through the form, watch it
finish, open verify and compare; screenshots in tests/e2e/screenshots/. On SQLite, and on
PostgreSQL when VIRTBENCH_TEST_PG_URL is set."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

pytestmark = pytest.mark.integration
HERE = Path(__file__).parent
CHROMIUM = os.environ.get("VIRTBENCH_CHROMIUM", "/usr/bin/chromium")
TOKEN = "e2e-" + uuid.uuid4().hex
PG_ENV = "VIRTBENCH_TEST_PG_URL"


def missing() -> str | None:
    if not shutil.which("node"):
        return "node is not installed (apt-get install nodejs npm)"
    if not (HERE / "node_modules" / "playwright-core").is_dir():
        return "playwright-core is not installed: (cd tests/e2e && npm ci)"
    if not os.access(CHROMIUM, os.X_OK):
        return f"{CHROMIUM} not found (apt-get install chromium)"
    return None


def remove_state(env: dict) -> None:
    """Remove the test's state and runtime directories once `virtbench cleanup` left no mount in them."""
    import shutil

    state = env["VIRTBENCH_STATE_DIR"]
    if not any(line.split()[4].startswith(state) for line in Path("/proc/self/mountinfo").read_text().splitlines()):
        shutil.rmtree(state, ignore_errors=True)
        shutil.rmtree(env["VIRTBENCH_RUNTIME_DIR"], ignore_errors=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request, tmp_path):
    if request.param == "sqlite":
        yield "sqlite", f"sqlite:///{tmp_path / 'e2e.db'}"
        return
    if not os.environ.get(PG_ENV):
        pytest.skip(f"{PG_ENV} not set: tools/start-postgres starts a server and prints its URL")
    name = "vbtest_e2e_" + uuid.uuid4().hex[:8]  # a throw-away database on the test server
    admin = create_engine(os.environ[PG_ENV], isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield "postgresql", make_url(os.environ[PG_ENV]).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture
def server(database, tmp_path):
    if reason := missing():
        pytest.skip(reason)
    backend, url = database
    uniq = uuid.uuid4().hex[:8]
    port = free_port()
    env = dict(os.environ, VIRTBENCH_DB=url, VIRTBENCH_TOKEN=TOKEN,
               VIRTBENCH_STATE_DIR=f"/var/lib/virtbench-test/e2e-{uniq}",
               VIRTBENCH_RUNTIME_DIR=f"/run/virtbench-test/e2e-{uniq}")
    log = open(tmp_path / "serve.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "virtbench", "serve", "--port", str(port)], env=env,
                            stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(base + "/healthz", timeout=2).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError((tmp_path / "serve.log").read_text()) from None
                time.sleep(0.2)
        yield backend, base, env, tmp_path / "serve.log"
    finally:
        proc.send_signal(signal.SIGTERM)  # stops its worker too
        try:
            proc.wait(240)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        subprocess.run([sys.executable, "-m", "virtbench", "cleanup"], env=env, capture_output=True, timeout=300)
        remove_state(env)


def test_schedule_watch_verify_compare_in_the_browser(server):
    backend, base, env, log = server
    shots = HERE / "screenshots"
    node = subprocess.run(["node", str(HERE / "journey.mjs")], cwd=HERE, capture_output=True, text=True,
                          timeout=900, env=dict(os.environ, VB_URL=base, VB_TOKEN=TOKEN, VB_SHOTS=str(shots),
                                                VB_TAG=backend))
    print(node.stdout)
    assert node.returncode == 0, node.stdout + node.stderr + "\n--- serve log ---\n" + log.read_text()
    for name in ("02-schedule", "03-running", "05-verify", "07-compare"):
        assert (shots / f"{backend}-{name}.png").stat().st_size > 10000
