"""The schedule form offers the quick comparison and every field a campaign file has (#29).

Before: no fields for adaptive rounds, probes, the benchmark profile or the image release; the
quick comparison could not be scheduled from the form; sizes showed in bytes (`1073741824`)."""
from __future__ import annotations

from virtbench.experiments.benchmarks import quick
from virtbench.store.models import Run
from virtbench.web import forms

from .helpers import login


def test_the_form_has_every_field_a_campaign_file_has_and_sizes_in_binary_units(client):
    page = client.get("/schedule").text
    for name in ("adaptive.use", "adaptive.until", "adaptive.target", "adaptive.max_repetitions",
                 "adaptive.max_minutes", "probe.energy", "probe.perf", "probe.pressure", "bench_profile",
                 "release", "sequential", "profile", "hosts", "seed", "shuffle", "experiment"):
        assert f'name="{name}"' in page, name
    assert "1073741824" not in page and 'placeholder="1 GiB"' in page  # the qemu row's memory default


def test_the_new_fields_and_human_sizes_become_the_campaign(client, filled):
    csrf = login(client)
    form = {"csrf": csrf, "mode": "form", "name": "fields-web", "repetitions": "2", "warmups": "0",
            "profile": "auto", "bench_profile": "full", "release": "trixie",
            "adaptive.use": "on", "adaptive.until": "decided", "adaptive.target": "0.05",
            "adaptive.max_repetitions": "6", "adaptive.max_minutes": "",
            "probe.pressure": "on", "probe.perf": "",
            "p0.use": "on", "p0.name": "native", "p0.type": "native",
            "p1.use": "on", "p1.name": "docker-small", "p1.type": "docker", "p1.opt.memory": "512 MiB",
            "b0.use": "on", "b0.name": "sysbench-cpu", "b0.param.time": "1"}
    r = client.post("/schedule", data=form, follow_redirects=False)
    assert r.status_code == 303, r.text
    with filled.session() as s:
        run = s.get(Run, r.headers["location"].rsplit("/", 1)[1])
    c = run.campaign
    assert c["adaptive"] == {"target": 0.05, "max_repetitions": 6, "max_minutes": 60.0, "until": "decided",
                             "noise_check": 0, "aim": None}
    assert c["probes"] == ["pressure"] and c["profile"] == "full" and c["image"]["release"] == "trixie"
    assert c["platforms"][1]["options"] == {"memory": 512 << 20}
    assert "memory: 512 MiB" in run.campaign_source  # the form's YAML keeps the size as typed


def test_the_quick_comparison_fills_the_form_with_the_quick_campaign(client):
    page = client.get("/schedule?preset=quick").text
    assert 'id="quick-preset"' in client.get("/schedule").text
    for name in ("openssl", "fio", "sqlite"):
        row = page.split(f'data-type="{name}"', 1)[1].split("</tr>", 1)[0]
        assert "checked" in row.split("</td>", 1)[0], name
    assert 'id="f-adaptive" checked' in page
    adaptive = page.split('id="adaptive-section"', 1)[1].split("</section>", 1)[0]
    assert "<option selected>decided</option>" in adaptive and f'value="{quick.ADAPTIVE["max_minutes"]}"' in adaptive
    # what the form holds is the CLI's quick campaign on the platforms the workers found
    found = {"runc": {"host-a": {"available": True}}, "docker": {"host-a": {"available": False}}}
    campaign, _ = forms.from_form(forms.quick_form(found))
    cli = quick._campaign(["native", "runc"], quick.REPETITIONS, quick.WARMUPS, quick.ADAPTIVE, None)
    assert campaign.model_dump(mode="json") == cli.model_dump(mode="json")
