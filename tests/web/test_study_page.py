"""The study page: a paper beside this host in the web app, the same document as `study report --json`."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from html import unescape

from click.testing import CliRunner

from virtbench.analysis import synthetic
from virtbench.cli import cli

from .helpers import make_client


def _study_run(store, run_id: str = "s1") -> str:
    synthetic.fill(store, run_id, repetitions=3, platforms=synthetic.default_platforms()[:2])
    store.update_run(run_id, name="study001-power-quick")  # as `study run 001 --part power` names it
    return run_id


def test_the_studies_page_lists_each_study_with_its_runs_here(filled):
    _study_run(filled)
    page = make_client(filled).get("/studies")
    assert page.status_code == 200
    for sid in ("000", "001", "002", "003", "004"):
        assert f'href="/studies/{sid}"' in page.text
    assert 'href="/runs/s1">power (quick)</a>' in page.text
    assert 'href="/studies" class="here">Studies</a>' in page.text


def test_a_study_page_shows_the_paper_beside_this_host_as_study_report_does(filled, tmp_path):
    _study_run(filled)
    client = make_client(filled)
    page = client.get("/studies/001")
    assert page.status_code == 200
    assert "Study 001: the paper beside this host" in page.text
    assert "published values and this host&#39;s, with verdicts" in page.text or \
        "published values and this host's, with verdicts" in page.text
    assert 'value="s1" checked' in page.text
    api = client.get("/api/studies/001", params={"run": "s1"})
    assert api.status_code == 200
    doc = api.json()
    assert doc["study"] == "001" and doc["runs"] == [{"run_id": "s1", "part": "power", "scale": "quick"}]
    assert doc["comparisons"] and all("verdict" in c for c in doc["comparisons"])
    cli_out = CliRunner().invoke(cli, ["study", "report", "001", "s1", "--json", "--db", filled.url])
    assert cli_out.exit_code == 0, cli_out.output
    assert json.loads(cli_out.output) == doc  # one document, two surfaces


def test_a_study_without_runs_shows_the_study_and_bad_requests_are_refused(filled):
    """Before any run (#41, #42): the page shows the parts, what each needs and how long it takes,
    the paper's values and claims and every difference; the API answers `study show --json`'s
    document; an unknown study is a 404 that names the studies (not 'no such page')."""
    client = make_client(filled)
    page = client.get("/studies/002")
    assert page.status_code == 200 and "virtbench study run 002" in page.text
    for text in ("vm-suite", "KVM (a guest that boots under it)", "about 3 h", "Figs. 7-9",
                 "botan speed --msec=15000 Blowfish AES-256", "uClibc-ng", 'id="study-values"'):
        assert text in page.text, text
    api = client.get("/api/studies/002")
    assert api.status_code == 200
    doc = api.json()
    assert doc.pop("runs_here") == []
    cli_out = CliRunner().invoke(cli, ["study", "show", "002", "--json"])
    assert cli_out.exit_code == 0, cli_out.output
    assert json.loads(cli_out.output) == doc  # one document, two surfaces
    assert [p["name"] for p in doc["parts"]] == ["vm-memory", "vm-suite"] and doc["values"]
    for bad in ("/api/studies/999", "/api/studies/9", "/studies/999"):
        r = client.get(bad)
        assert r.status_code == 404, bad
        assert "unknown study" in r.text and "000, 001, 002, 003, 004" in r.text, r.text
    assert client.get("/api/studies/001", params={"run": "r1"}).status_code == 400  # not a run of study 001
    assert client.get("/api/studies/001", params={"run": "nope"}).status_code == 404


def test_every_study_page_renders_with_no_runs(filled):
    client = make_client(filled)
    for sid in ("000", "001", "002", "003", "004"):
        page = client.get(f"/studies/{sid}")
        assert page.status_code == 200 and 'id="study-parts"' in page.text and "differs" in page.text, sid


def test_study_report_given_a_database_that_does_not_exist_refuses_and_creates_nothing(tmp_path):
    missing = tmp_path / "typo.db"
    out = subprocess.run([sys.executable, "-m", "virtbench", "study", "report", "001", "s1", "--db",
                          f"sqlite:///{missing}"], capture_output=True, text=True)
    assert out.returncode == 2 and not missing.exists()
    assert len(out.stderr.strip().splitlines()) == 1 and "no results store at" in out.stderr


def test_a_study_reads_in_words_on_the_page_and_in_study_show(filled):
    """#42: a value a preset leaves to its default read "(paper None)" ("7zip passes 1 (paper None)"),
    the paper's settings `proxmox True`, `host_memory None`, and on the page Python lists
    (`memory [201326592, 268435456]`, `jobs [2, 'cpus']`). Now: "not set", yes/no, `192M/256M`."""
    client = make_client(filled)
    for sid in ("000", "002", "003"):
        html = client.get(f"/studies/{sid}").text
        page = re.sub(r"<script.*?</script>|<code>.*?</code>", " ", html, flags=re.S)
        surfaces = {"web": unescape(re.sub(r"<[^>]+>", " ", page)),
                    "study show": CliRunner().invoke(cli, ["study", "show", sid]).output}
        for name, text in surfaces.items():
            text = " ".join(text.split())  # as read, across wrapped lines
            text = re.sub(r"`[^`]*`", " ", text)  # campaign fragments quoted as code are YAML, not reprs
            reprs = re.findall(r".{30}(?:\bNone\b|\bTrue\b|\bFalse\b|\[\d[\d, ]*\]|\['|\[\d+, ').{0,10}", text)
            assert not reprs, (sid, name, reprs)
            if sid == "002":
                assert "7zip passes 1 (paper scale not set)" in text and "memory 192M/256M" in text, name
            if sid == "000":
                assert "proxmox yes" in text and "host_memory not set (paper scale 8G)" in text, name
