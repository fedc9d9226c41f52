"""`latest` is the newest finished run with measurements, on every surface, and a run with
nothing measured is refused by every read: the CLI in one line (exit 2), the web with 409.
The web reads run ids as the CLI does: an exact id, `latest` or a unique prefix.

Before (#42): with a queued run newest (the normal state of a web queue) `report latest`
printed the queued run's made-up facts ("AES no", virtualized "none") and "No failed
executions", exit 0; `compare r1 QUEUED` exited 0 with an empty table and 'platforms in only
one run: native, runc'; the web answered 404 for /runs/latest and for a prefix the CLI took."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from virtbench.cli import cli
from virtbench.config import parse_campaign
from virtbench.errors import NoData
from virtbench.runner.execute import enqueue

from .helpers import make_client

CAMPAIGN = {"name": "queued-one", "platforms": ["native", "runc"], "benchmarks": ["sysbench-cpu"]}


@pytest.fixture
def with_queued(filled):
    """r1 and r2 finished (r2 newest), then a queued run, newest of all."""
    return filled, enqueue(filled, parse_campaign(CAMPAIGN, "test"))


def vb(*args: str):
    return CliRunner().invoke(cli, list(args))


def test_latest_is_the_newest_finished_run_with_data(with_queued):
    store, queued = with_queued
    assert store.run("latest").id == "r2"
    res = vb("report", "latest", "--json", "--db", store.url)
    assert res.exit_code == 0 and '"run": "r2"' in res.output


@pytest.mark.parametrize("args", [["report", "{q}"], ["report", "r1", "{q}"], ["compare", "r1", "{q}"],
                                  ["compare", "{q}", "r1"], ["export", "{q}", "-o", "{tmp}"], ["show", "{q}"]])
def test_a_run_without_data_is_refused_in_one_line(with_queued, tmp_path, args):
    store, queued = with_queued
    res = vb(*[a.format(q=queued, tmp=tmp_path / "out") for a in args], "--db", store.url)
    assert isinstance(res.exception, NoData) and res.exception.exit_code == 2, res.output
    assert res.exception.message == f"run {queued} is queued and has no measurements yet: nothing to read"
    assert not (tmp_path / "out").exists()


def test_latest_without_any_finished_run_is_refused(tmp_path):
    from virtbench.store.db import Store

    store = Store(f"sqlite:///{tmp_path / 'q.db'}")
    queued = enqueue(store, parse_campaign(CAMPAIGN, "test"))
    res = vb("report", "--db", store.url)
    assert isinstance(res.exception, NoData) and f"the newest, {queued}, is queued" in res.exception.message


def test_the_web_reads_latest_and_unique_prefixes(with_queued):
    store, queued = with_queued
    client = make_client(store)
    page = client.get("/runs/latest", follow_redirects=False)
    assert page.status_code == 307 and page.headers["location"] == "/runs/r2"
    assert client.get("/runs/latest").status_code == 200
    assert client.get("/api/runs/latest").json()["id"] == "r2"
    assert client.get("/api/runs/latest/report").json()["run"] == "r2"
    assert client.get(f"/api/runs/{queued[:12]}").json()["id"] == queued  # a unique prefix
    assert client.get("/api/runs/r").status_code == 404  # r1 and r2: not unique
    ba = client.get("/api/compare/before-after", params={"a": "r1", "b": "latest"})
    assert ba.status_code == 200 and ba.json()["b"] == "r2"


@pytest.mark.parametrize("path", ["/api/runs/{q}/report", "/api/runs/{q}/download/json", "/api/runs/{q}/verify",
                                  "/api/compare/before-after?a=r1&b={q}", "/api/compare?run=r1&run={q}",
                                  "/compare/before-after?a={q}&b=r1", "/runs/{q}/verify"])
def test_the_web_answers_409_for_a_run_without_data(with_queued, path):
    store, queued = with_queued
    r = make_client(store).get(path.format(q=queued))
    assert r.status_code == 409, r.text
    assert "has no measurements yet" in r.text
    assert make_client(store).get(f"/runs/{queued}").status_code == 200  # its page shows its progress
