"""The density search at work, for real and small (confined hosts of tens of MiB): the kept
fleet grows in parallel batches and shrinks, the maximum is confirmed from an empty fleet,
the report's sizing section fits what one instance costs inside and outside its cgroup, and
a prediction made at one confined size is checked against the maximum measured at twice it
(issue 43's 512 MiB -> 1 GiB check, scaled down; benchmarks/density_search.py takes it at
full size on a quiet machine)."""
from __future__ import annotations

import json

import pytest

from hostsupport.density import _campaign, leftovers, vb

pytestmark = [pytest.mark.integration, pytest.mark.measures]  # pushes the host to its guard: runs alone

WORKLOAD = "{name: openssl, algorithm: des-ede3, bytes: 64, multi: 1, seconds: 1}"
PLATFORMS = {"lxc": "{name: lxc, type: lxc, memory: 64M, swap: 0}",
             "runc": "{name: runc, type: runc, network: none}"}


def _search(env, tmp_path, platform: str, host_memory: str, extra: str = "") -> dict:
    tmp_path.mkdir(parents=True, exist_ok=True)
    camp = _campaign(tmp_path, f"""
name: density-search-{platform}-{host_memory}
experiment: density
platforms:
  - {PLATFORMS[platform]}
density:
  workload: {WORKLOAD}
  counts: {{until: failure, max: 400{extra}}}
  host_memory: {host_memory}
  settle: 0.5
""")
    res = vb(env, "run", str(camp), "--no-report", timeout=1800)
    assert res.returncode in (0, 1), res.stderr[-3000:]
    doc = json.loads(vb(env, "report", "--json").stdout)
    assert leftovers(env) == []
    entry = next(e for e in doc["density"] if e["platform"] == platform)
    sizing = next((s for s in doc.get("sizing") or [] if s["platform"] == platform), None)
    return {"entry": entry, "sizing": sizing, "doc": doc, "log": res.stderr}


def test_a_kept_fleet_search_is_confirmed_from_empty_and_its_costs_fitted(env, tmp_path):
    got = _search(env, tmp_path, "lxc", "64M")
    e, s = got["entry"], got["sizing"]
    assert e["stop_reason"] in ("guard", "oom"), e["stop_detail"]       # memory stopped it
    assert e["stop_count"] == e["max_count"] + 1 and e["max_count"] >= 4, e
    checks = e["stop_evidence"]["confirmation"]
    # the maximum ran from an empty fleet: the found count itself, or (where that fleet failed it)
    # the fresh fleet's own maximum within 1 % below, found by that fleet (`within`: a CI run's
    # fresh fleet failed 31 and ran 30)
    assert checks and (checks[-1]["healthy"] or checks[-1].get("within")), checks
    if checks[-1].get("within"):
        assert checks[-1]["agrees"] and e["max_count"] < checks[-1]["count"], (checks, e["max_count"])
    rounds = {p["probe"] for p in e["points"]}
    assert len(rounds) >= 2                                            # the kept fleet, then the fresh one
    started = sum(b["started"] for b in e["start_batches"])
    fresh_per_probe = sum(p["count"] for p in e["probes"])             # what starting every count afresh costs
    assert started < fresh_per_probe, (started, fresh_per_probe)
    assert s is not None and s["stopped_by"] == "memory"
    inside = s["costs"]["memory_inside"]
    assert inside and inside["slope"] > 0 and inside["n"] >= 3
    host_side = s["costs"]["host_side_pss"]                            # LXC's monitors, outside the payload cgroups
    assert host_side and host_side["slope"] > 0
    assert any(p["where"] == "confined host" and p["measured"] == e["max_count"] for p in s["predictions"])
    text = vb(env, "report").stdout
    assert "What one instance costs" in text and "keeping the guard's floor" in text
    assert "confirmed by a fresh fleet" in text


@pytest.mark.slow
@pytest.mark.parametrize("platform", ["runc", "lxc"])
def test_a_prediction_from_one_confined_size_holds_at_twice_it(env, tmp_path, platform):
    """Predict the maximum of a 128 MiB confined host from a run at 64 MiB and measure it:
    within 5 % (at least one instance), each search stopped by memory."""
    small = _search(env, tmp_path, platform, "64M", ", confirm: false")
    assert small["sizing"] and small["sizing"]["stopped_by"] == "memory", small["entry"]["stop_detail"]
    predicted = next(p for p in small["sizing"]["predictions"]
                     if p["where"] == "confined host" and p["memory_bytes"] == 128 << 20)
    large = _search(env, tmp_path / "large", platform, "128M", ", confirm: false")
    measured = large["entry"]["max_count"]
    if large["entry"]["stop_reason"] in ("cpu_starvation", "throughput_collapse"):
        # 2 CPUs gave out before 128 MiB did (the fresh CI run: lxc, 1 of 60 workloads got no CPU
        # in its window, the parent at 108 of 128 MiB): memory's maximum is beyond what was
        # reached, so the prediction can only be checked from below here
        assert measured < predicted["count"] + max(1, 0.05 * predicted["count"]), (predicted, measured)
        pytest.skip(f"{platform} at 128 MiB: the CPUs gave out at {measured + 1} before memory did "
                    f"(predicted {predicted['count']}); the prediction's precision needs more CPUs")
    assert large["entry"]["stop_reason"] in ("guard", "oom"), large["entry"]["stop_detail"]
    assert abs(predicted["count"] - measured) <= max(1, 0.05 * measured), (predicted, measured, small["sizing"])
