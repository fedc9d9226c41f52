"""The run page shows the campaign as YAML a user can reuse, and runs it again (#29).

Before: the campaign of a run queued without a file (the quick one) showed as a Python dict,
sizes in bytes, and nothing queued it again."""
from __future__ import annotations

import yaml

from virtbench.config import parse_campaign
from virtbench.store.models import Run

from .helpers import TOKEN, login

CAMPAIGN = {"name": "again", "repetitions": 2, "warmups": 0,
            "platforms": ["native", {"name": "vm", "type": "qemu", "accel": "tcg", "memory": "1G"}],
            "benchmarks": [{"name": "sysbench-cpu", "time": 1}, {"name": "openssl", "sweep": {"bytes": [64, 1024]}}],
            "adaptive": {"until": "decided", "max_repetitions": 4}}


def stored(store, run_id: str) -> Run:
    with store.session() as s:
        return s.get(Run, run_id)


def test_the_campaign_shows_as_yaml_that_runs_again(client, filled, auth):
    first = client.post("/api/runs", json={"campaign": CAMPAIGN}, headers=auth).json()["run_id"]
    filled.update_run(first, campaign_source="")  # as a quick run: no text it was scheduled with
    page = client.get(f"/runs/{first}").text
    shown = page.split('id="campaign-yaml">', 1)[1].split("</pre>", 1)[0]
    assert "{&#39;" not in shown and "1073741824" not in shown and "memory: 1 GiB" in shown
    text = client.get(f"/api/runs/{first}").json()["campaign_yaml"]
    old = stored(filled, first).campaign
    assert parse_campaign(yaml.safe_load(text), "t").model_dump(mode="json") == old

    # the button: a form POST needing the session's CSRF value; the API needs the token
    assert 'id="run-again"' not in page  # not logged in
    csrf = login(client)
    assert 'id="run-again"' in client.get(f"/runs/{first}").text
    assert client.post(f"/runs/{first}/again", data={"csrf": "wrong"}, follow_redirects=False).status_code == 403
    r = client.post(f"/runs/{first}/again", data={"csrf": csrf}, follow_redirects=False)
    assert r.status_code == 303, r.text[-2000:]
    second = r.headers["location"].rsplit("/", 1)[1]
    assert second != first and stored(filled, second).campaign == old and stored(filled, second).status == "queued"
    assert client.post(f"/api/runs/{first}/again").status_code == 401
    r = client.post(f"/api/runs/{first}/again", headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 201 and stored(filled, r.json()["run_id"]).campaign == old


def test_run_again_validates_like_scheduling(client, filled, auth):
    """A stored campaign that scheduling would refuse now (a meter command without --allow-meter)
    is refused again with the same one-line message, and nothing is queued."""
    first = client.post("/api/runs", json={"campaign": CAMPAIGN}, headers=auth).json()["run_id"]
    filled.update_run(first, campaign_source=yaml.safe_dump(
        {**CAMPAIGN, "probes": [{"name": "energy", "meter": ["/bin/true"]}]}))
    before = len(filled.runs())
    r = client.post(f"/api/runs/{first}/again", headers=auth)
    assert r.status_code == 400 and "meter" in r.json()["detail"] and "\n" not in r.json()["detail"]
    csrf = login(client)
    page = client.post(f"/runs/{first}/again", data={"csrf": csrf}, follow_redirects=False)
    assert page.status_code == 400 and "meter" in page.text
    assert len(filled.runs()) == before


def test_run_again_keeps_the_size_limit_of_scheduling(client, filled, auth):
    first = client.post("/api/runs", json={"campaign": CAMPAIGN}, headers=auth).json()["run_id"]
    limit = client.app.state.settings.max_campaign_bytes
    filled.update_run(first, campaign_source=yaml.safe_dump(CAMPAIGN) + "# " + "x" * limit + "\n")
    r = client.post(f"/api/runs/{first}/again", headers=auth)
    assert r.status_code == 400 and f"larger than {limit} bytes" in r.json()["detail"]


ALIASED = """name: aliased
platforms: [native]
benchmarks:
  - &cpu {name: sysbench-cpu, time: 1}
  - {<<: *cpu, threads: 2}
"""


def test_a_campaign_with_yaml_aliases_runs_again(client, filled, auth, tmp_path):
    """Before (#42): the CLI ran a campaign file that used YAML aliases, but the web refused every
    alias, so such a run could not be run again (nor the file be pasted). Now the web accepts what
    the CLI accepts: aliases, bounded by the values they expand to (the billion laughs stays out,
    tests/web/test_security.py)."""
    from virtbench.config.files import read_campaign

    (tmp_path / "aliased.yaml").write_text(ALIASED)
    cli_campaign, _ = read_campaign(tmp_path / "aliased.yaml")  # what `virtbench run FILE` accepts
    first = client.post("/api/runs", json={"yaml": ALIASED}, headers=auth)
    assert first.status_code == 201, first.text
    run_id = first.json()["run_id"]
    assert stored(filled, run_id).campaign_source == ALIASED
    r = client.post(f"/api/runs/{run_id}/again", headers=auth)
    assert r.status_code == 201, r.text
    again = stored(filled, r.json()["run_id"]).campaign
    assert again == cli_campaign.model_dump(mode="json") == stored(filled, run_id).campaign
