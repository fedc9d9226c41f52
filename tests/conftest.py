"""Shared fixtures. Integration tests use the real guest image and real runtimes."""
from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from dbsupport import PG_ENV, database
from hostsupport import schedule
from hostsupport.prebuild import core_image_recipe
from virtbench.images.build import build
from virtbench.images.image import Image
from virtbench.platforms.base import Paths
from virtbench.store.db import Store

DATA = Path(__file__).parent / "data"


def pytest_configure(config):
    # groups, order and the suite lock of tests run side by side (make test, tests/README.md)
    config.pluginmanager.register(schedule, "virtbench-schedule")


def pytest_collection_modifyitems(config, items):
    if os.geteuid() != 0:
        skip = pytest.mark.skip(reason="integration tests need root (runtimes, mounts, cgroups)")
        for item in items:
            if "integration" in item.keywords:
                item.add_marker(skip)


@pytest.fixture(scope="session")
def image() -> Image:
    """The core tools' image (hostsupport.prebuild.TEST_PACKAGES), built in the background by make test."""
    return build(core_image_recipe())


@pytest.fixture(scope="session")
def paths(tmp_path_factory):
    """State under a per-session directory so tests never touch a user's real runs; whatever
    the tests left is cleaned up and the directories removed at the end."""
    import shutil

    base = Path("/var/lib/virtbench-test") / uuid.uuid4().hex[:8]
    p = Paths(state=base / "state", runtime=Path("/run/virtbench-test") / base.name)
    yield p
    from virtbench.runner.execute import cleanup

    cleanup(p)
    from virtbench.images.build import mounts_using

    for d in (base, p.runtime):
        if d.exists() and not mounts_using(d):
            shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def run_id() -> str:
    return "t" + uuid.uuid4().hex[:8]


@pytest.fixture
def data_dir() -> Path:
    return DATA


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request) -> str:
    """Each test using a store runs on SQLite, and again on PostgreSQL when a server is given."""
    if request.param == "postgresql" and not os.environ.get(PG_ENV):
        pytest.skip(f"{PG_ENV} not set: tools/start-postgres starts a server and prints its URL")
    return request.param


@pytest.fixture
def db_url(backend, tmp_path):
    """An empty database."""
    url, drop = database(backend, tmp_path, None)
    yield url
    if drop:
        drop()


@pytest.fixture
def store(db_url):
    s = Store(db_url)
    yield s
    s.engine.dispose()


@pytest.fixture(scope="module")
def figures_drawn_once():
    """Each figure drawn as SVG once per module, then reused: for the tests that compare what
    every surface (the HTML file, the web run page, the HTML download) carries of one run, where
    each surface draws the same figures again (test_every_surface's `bench` run: 425 s of the
    fresh CI rehearsal's unit lane). The drawing itself is tested where it is checked
    (test_paper_figures, test_export, test_report_golden)."""
    from virtbench.report import html

    drawn: dict[tuple[str, tuple[tuple[str, str], ...]], str] = {}
    draw = html.svg_figure

    def once(spec, palette):
        key = (repr(spec), tuple(sorted(palette.items())))
        if key not in drawn:
            drawn[key] = draw(spec, palette)
        return drawn[key]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(html, "svg_figure", once)
        yield
