"""Heavy dependencies are extras; a command that needs a missing one names it (#10 item 9)."""
from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from virtbench import extras
from virtbench.cli import cli
from virtbench.errors import InputError

PYPROJECT = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())


def _hide(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(extras.importlib.util, "find_spec",
                        lambda name, *a: None if name in modules else real(name, *a))


def test_every_extra_is_declared_in_pyproject_and_not_a_core_dependency():
    optional = PYPROJECT["project"]["optional-dependencies"]
    core = {re.split(r"[<>=\[ ]", d)[0].lower() for d in PYPROJECT["project"]["dependencies"]}
    for extra in extras.EXTRAS:
        assert extra in optional, f"extra {extra!r} missing from pyproject"
        names = {re.split(r"[<>=\[ ]", d)[0].lower() for d in optional[extra]}
        assert not names & core, f"{names & core} are core dependencies and in the {extra} extra"


def test_serve_without_the_web_extra_names_it(monkeypatch):
    _hide(monkeypatch, "fastapi")
    result = CliRunner().invoke(cli, ["serve"])
    assert isinstance(result.exception, InputError)
    assert "'web' extra (fastapi not installed)" in result.exception.message
    assert result.exception.fix == "pip install 'virtbench[web]'" and result.exception.exit_code == 2


def test_parquet_export_without_pyarrow_names_the_extra(monkeypatch, tmp_path):
    from virtbench.report.export import write_table

    _hide(monkeypatch, "pyarrow")
    with pytest.raises(InputError, match="'parquet' extra"):
        write_table([{"a": 1}], tmp_path / "x.parquet", "parquet", ["a"])


def test_postgres_store_without_psycopg_names_the_extra(monkeypatch):
    from virtbench.store.db import Store

    _hide(monkeypatch, "psycopg")
    with pytest.raises(InputError, match="'postgres' extra") as err:
        Store("postgresql+psycopg://nobody@127.0.0.1:1/none")
    assert err.value.fix == "pip install 'virtbench[postgres]'"


def test_html_report_without_plotly_names_the_extra(monkeypatch):
    from virtbench.report import html

    html.plotly_js.cache_clear() if hasattr(html.plotly_js, "cache_clear") else None
    _hide(monkeypatch, "plotly")
    with pytest.raises(InputError, match="'figures' extra"):
        html.plotly_js()
