"""The five studies: shipped campaigns validate, paper values load with their sources, the
plan skips or refuses what this host lacks, and the comparison judges what it should."""
from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import pytest

from virtbench.config import SHIPPED, load_campaign, load_yaml
from virtbench.errors import InputError
from virtbench.platforms.base import Availability, Paths
from virtbench.studies import compare as C
from virtbench.studies import paper as P
from virtbench.studies import run as srun
from virtbench.studies import verdicts as V
from virtbench.studies.capabilities import Capabilities
from virtbench.studies.registry import SCALES, STUDIES, check_scale, study

STUDY_FILES = sorted(SHIPPED.glob("study*.yaml"))


def test_every_study_has_its_seed_and_parts():
    assert [s.id for s in STUDIES] == ["000", "001", "002", "003", "004"]
    for s in STUDIES:
        assert s.parts and s.title and s.measures
        for scale in SCALES:
            for path in s.campaign_files(scale):
                assert path.is_file(), f"study {s.id}: {path.name} is missing"


@pytest.mark.parametrize("path", STUDY_FILES, ids=[p.stem for p in STUDY_FILES])
def test_shipped_study_campaign_validates(path):
    """Parsed exactly as a user's file: every benchmark, platform and option exists."""
    campaign = load_campaign(path)
    assert campaign.name == path.stem  # `virtbench run NAME` and the report's part lookup rely on it
    assert path.read_text().startswith("# Study "), "a shipped example says what it reproduces"


def test_no_orphan_study_campaign():
    known = {p for s in STUDIES for scale in SCALES for p in s.campaign_files(scale)}
    assert set(STUDY_FILES) == known


@pytest.mark.parametrize("s", STUDIES, ids=[s.id for s in STUDIES])
def test_quick_keeps_the_papers_shape(s):
    """quick and paper: the same kind, platforms, benchmarks and swept parameters."""
    for quick, full in zip(s.campaign_files("quick"), s.campaign_files("paper")):
        q, p = load_campaign(quick), load_campaign(full)
        assert q.experiment == p.experiment
        assert [x.name for x in q.platforms] == [x.name for x in p.platforms]
        assert {b.name for b in q.benchmarks} <= {b.name for b in p.benchmarks}
        assert {k for b in q.benchmarks for k in b.sweep} <= {k for b in p.benchmarks for k in b.sweep}
        assert q.repetitions <= p.repetitions


@pytest.mark.parametrize("s", STUDIES, ids=[s.id for s in STUDIES])
def test_paper_values_load_with_sources(s):
    pv = P.load(s.id)
    assert pv.study == s.id and pv.values
    parts = {p.name for p in s.parts}
    ids = [v.id for v in pv.values]
    assert len(ids) == len(set(ids))
    for v in pv.values:
        assert v.where and v.section
        if v.kind == "relative":
            assert {"baseline", "value"} <= set(v.paper)
        if v.kind == "range":
            assert v.paper["low"] <= v.paper["high"] and v.category in pv.categories
        if v.kind == "claim":
            assert v.claim
        if v.yours and v.yours.part:
            assert v.yours.part.split("-")[0] and any(v.yours.part.startswith(p) for p in parts), v.id


def test_paper_values_transcribed():
    """Spot checks against the seed texts (a typo here would be a wrong 'differs')."""
    v001 = {v.id: v for v in P.load("001").values}
    assert v001["cpu-time"].paper == {"baseline": 434.074, "value": 446}
    assert v001["mbw-memcpy"].paper == {"baseline": 598.22, "value": 562.05}
    assert v001["disk-read"].paper == {"baseline": 123.25, "value": 107.062}
    v003 = {v.id: v for v in P.load("003").values}
    assert v003["t7-storage-vm"].paper == {"low": 0.93, "high": 1.97}
    assert v003["t6-db"].paper["best"] == "k0s"  # the paper's "Containerd" column is k0s (#38)
    v000 = {v.id: v for v in P.load("000").values}
    assert v000["aes-one-rpi5"].paper["value"] == 2693.7 and v000["hostram-2g-rpi4"].paper["value"] == 6
    v004 = {v.id: v for v in P.load("004").values}
    assert v004["ndr-8"].paper["value"] == 477000 and v004["p-tail-4-node"].paper["value"] == 678


def test_bad_study_and_scale_are_one_line():
    with pytest.raises(InputError) as err:
        study("9")
    assert "unknown study" in err.value.message and "000" in (err.value.fix or "")
    assert study("1").id == "001"
    with pytest.raises(InputError):
        check_scale("huge")
    with pytest.raises(InputError) as err:
        study("000").part("nope")
    assert "density-ram" in (err.value.fix or "")


class FixedCapabilities(Capabilities):
    """This host's answers replaced by fixed ones: the plan's logic, not the host, is tested."""

    def __init__(self, have: set[str], platforms_ok: set[str]) -> None:
        super().__init__(Paths())
        self.have, self.ok = have, platforms_ok

    def check(self, name: str) -> Availability:
        return Availability(name in self.have, f"no {name} (test)", f"get {name}")

    def platforms(self, types):
        return {t: Availability(t in self.ok, f"{t} missing (test)", f"install {t}") for t in types}


def test_plan_skips_with_reason_and_refuses_when_asked():
    caps = FixedCapabilities(have=set(), platforms_ok={"native", "docker", "containerd"})
    planned = srun.plan(study("003"), "quick", caps)
    by = {p.stem: p for p in planned}
    assert by["study003-lsbs-quick"].campaign is not None and not by["study003-lsbs-quick"].skipped
    assert by["study003-lsbs-vm-quick"].skipped.startswith("needs kvm: no kvm")
    assert by["study003-lsbs-vm-quick"].fix == "get kvm"
    with pytest.raises(InputError) as err:
        srun.plan(study("003"), "quick", caps, ["lsbs-vm"])
    assert err.value.message.startswith("study 003 part lsbs-vm needs kvm") and err.value.fix == "get kvm"


def test_plan_leaves_out_missing_platforms_and_skips_without_comparison():
    caps = FixedCapabilities(have={"kvm"}, platforms_ok={"native", "docker"})
    by = {p.stem: p for p in srun.plan(study("003"), "quick", caps)}
    lsbs = by["study003-lsbs-quick"]
    assert [p.name for p in lsbs.campaign.platforms] == ["native", "docker"]
    assert lsbs.left_out == [{"platform": "containerd", "reason": "containerd missing (test)", "fix": "install containerd"},
                             {"platform": "k0s", "reason": "kubernetes missing (test)", "fix": "install kubernetes"}]
    caps = FixedCapabilities(have=set(), platforms_ok={"native"})
    with pytest.raises(InputError) as err:
        srun.plan(study("001"), "quick", caps, ["suite"])
    assert "nothing to compare" in err.value.message and err.value.fix == "install docker"
    skipped = srun.plan(study("001"), "quick", caps)
    assert all(p.skipped for p in skipped)


def test_a_pod_entry_without_a_kubeconfig_is_left_out_not_its_part(tmp_path, monkeypatch):
    """Study 003's quick LSBS part with the kubernetes client installed and no cluster given was
    skipped whole (`no kubeconfig at /root/.kube/config`, from the run's preflight): the pods
    are left out with that reason, the rest of the part runs; with a kubeconfig they stay."""
    caps = FixedCapabilities(have=set(), platforms_ok={"native", "docker", "containerd", "kubernetes"})
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    lsbs = next(p for p in srun.plan(study("003"), "quick", caps) if p.stem == "study003-lsbs-quick")
    assert lsbs.campaign is not None and not lsbs.skipped
    assert [p.name for p in lsbs.campaign.platforms] == ["native", "docker", "containerd"]
    assert lsbs.left_out == [{"platform": "k0s", "reason": f"no kubeconfig at {tmp_path / 'absent'}",
                              "fix": "give the cluster's kubeconfig as the platform's kubeconfig: PATH, "
                                     "or set KUBECONFIG (kubectl's own file works)"}]
    (tmp_path / "config").write_text("apiVersion: v1\nkind: Config\n")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "config"))
    lsbs = next(p for p in srun.plan(study("003"), "quick", caps) if p.stem == "study003-lsbs-quick")
    assert [p.name for p in lsbs.campaign.platforms] == ["native", "docker", "containerd", "k0s"]


def test_second_host_takes_the_placeholders_place():
    caps = FixedCapabilities(have={"second_host"}, platforms_ok={"native", "lxc"})
    caps.hosts = ("local", "pi5-b")
    planned = srun.plan(study("000"), "quick", caps, ["network-different"])[0]
    assert [h.name for h in planned.campaign.hosts] == ["local", "pi5-b"]
    assert {b.params["server"]["host"] for b in planned.campaign.benchmarks} == {"pi5-b"}
    caps = FixedCapabilities(have=set(), platforms_ok={"native", "lxc"})
    by = {p.part: p for p in srun.plan(study("000"), "quick", caps)}
    assert by["network-different"].skipped.startswith("needs second host")


def row(platform: str, rel: float, ci: list[float] | None = None, bench: str = "mbw", metric: str = "memcpy"):
    from virtbench.analysis.summary import Row

    return Row(bench, metric, "MiB/s", True, "memory", platform, 3, 0, mean=1.0, relative=rel, relative_ci95=ci)


class StubMatcher(C.Matcher):
    def __init__(self, rows):
        super().__init__([])
        self._rows = rows

    def rows(self, y):
        return [r for r in self._rows if r.metric == y.metric and r.platform == y.platform]


def test_judge_relative_agrees_differs_and_undecided():
    value = next(v for v in P.load("001").values if v.id == "mbw-memcpy")  # paper 0.940
    assert V.judge(value, StubMatcher([row("docker", 0.95, [0.94, 0.96])]), {}, {})["verdict"] == "agrees"
    out = V.judge(value, StubMatcher([row("docker", 0.70, [0.68, 0.72])]), {}, {})
    assert out["verdict"] == "differs" and out["yours"] == pytest.approx(0.70)
    assert V.judge(value, StubMatcher([row("docker", 1.5, [0.3, 7.8])]), {}, {})["verdict"] == "undecided at this scale"
    assert V.judge(value, StubMatcher([]), {}, {})["verdict"] == "not measured here"


def test_reasons_name_what_differs_from_the_papers_machine():
    value = next(v for v in P.load("000").values if v.id == "aes-one-rpi4")
    host = P.load("000").host
    facts = {"aes": True, "cpus": 2, "memory_bytes": 24 << 30, "virtualization": {"vm": "kvm"}}
    assert any("AES instructions: yes here" in r for r in C.reasons(value, facts, host, quick=False))
    facts["aes"] = False
    assert C.reasons(value, facts, host, quick=False) == ["different hardware and software versions"]
    rpi5 = next(v for v in P.load("000").values if v.id == "aes-one-rpi5")  # the RPi 5 has AES instructions
    assert any("AES instructions: none here, yes on" in r for r in C.reasons(rpi5, facts, host, quick=False))
    mem = next(v for v in P.load("000").values if v.id == "ram-max-128-rpi4")
    text = C.reasons(mem, {"memory_bytes": 24 << 30}, host, quick=True)
    assert any(r.startswith("memory: 24 GiB here") for r in text) and any("quick scale" in r for r in text)


def test_part_of_reads_the_campaign_name():
    s = study("000")
    assert C.part_of(s, "study000-density-hostram-2g-quick") == ("density-hostram-2g", "quick")
    assert C.part_of(s, "my-campaign") == ("my-campaign", "")


@pytest.mark.parametrize("argv, text", [
    (["run", "009"], "unknown study '009'"),
    (["run", "001", "--scale", "huge"], "unknown scale 'huge'"),
])
def test_cli_bad_input_is_one_line_exit_2(tmp_path, argv, text):
    r = subprocess.run([sys.executable, "-m", "virtbench", "study", *argv, "--db", f"sqlite:///{tmp_path / 'db'}"],
                       capture_output=True, text=True, timeout=120,
                       env={"PATH": "/usr/bin:/bin", "VIRTBENCH_STATE_DIR": str(tmp_path / "state"),
                            "VIRTBENCH_RUNTIME_DIR": str(tmp_path / "run")})
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith(f"error: {text} (fix: ")
    assert not (tmp_path / "db").exists() and not (tmp_path / "state").exists()


def test_yaml_of_shipped_campaigns_is_plain():
    """Readable examples: no anchors or tags a user would have to understand."""
    for path in STUDY_FILES:
        text = path.read_text()
        assert "&" not in text.replace("&&", "") and "!!" not in text, path.name
        assert isinstance(load_yaml(text, path.name), dict)


def test_matcher_walks_section_data():
    sec = SimpleNamespace(key="line", data=[{"platform": "lxc", "length": 8, "pinning": "node", "ndr_pps": 100.0,
                                             "latency": [{"rate": "1ndr", "p50": 35.0, "p99.999": 90.0}]}])
    run = SimpleNamespace(benchmarks=[])
    pr = C.PartRun("line", "quick", SimpleNamespace(run=run, rows=[], sections=[sec]))
    m = C.Matcher([pr])
    y = P.Yours(section="line", where={"platform": "lxc", "length": 8, "pinning": "node"}, field="latency/1ndr/p50")
    assert m.section_estimate(y, y.where).value == 35.0
    y = P.Yours(section="line", where={"platform": "lxc", "length": 8}, field="latency/1ndr/p99.999")
    assert m.section_estimate(y, y.where).value == 90.0
    assert m.section_estimate(y, y.where).ci is None  # one run, no rounds kept: no interval


def test_report_of_a_stored_run(tmp_path):
    """A stored run of another campaign is refused as a study's run; a study section builds from
    it (nothing matched: 'not measured here', never a made-up number) and renders into HTML."""
    import shutil
    from pathlib import Path

    from virtbench.report import builder
    from virtbench.store.db import Store
    from virtbench.studies import report as sreport

    db = tmp_path / "old.sqlite"
    shutil.copy(Path(__file__).parents[1] / "data" / "report" / "store-0003.sqlite", db)
    rep = builder.build(Store(f"sqlite:///{db}"), "fixture-0003")
    with pytest.raises(InputError) as err:
        sreport.part_runs(study("001"), [rep])
    assert "not a part of study 001" in err.value.message
    section = sreport.build(study("001"), [C.PartRun("suite", "quick", rep)])
    # the abstract's overall claim reads every container row of a suite run: this run's runc and lxc
    overall = {v.id for v in P.load("001").values if v.yours is not None and v.yours.overall}
    assert overall == {"overall-claim"}
    matched = [c for c in section.data["comparisons"] if c["verdict"] != "not measured here"]
    assert [c["id"] for c in matched] == ["overall-claim"] and matched[0]["yours"] is not None
    assert section.data["summary"]["not measured here"] == len(P.load("001").values) - 1
    assert all(c["yours"] is None for c in section.data["comparisons"] if c["id"] not in overall)
    page = sreport.write_html(tmp_path / "s.html", section, [rep]).read_text()
    assert "Study 001: the paper beside this host" in page and "Table I" in page


def test_listed_differences_name_existing_paper_values():
    for s in STUDIES:
        ids = {v.id for v in P.load(s.id).values}
        for part in s.parts:
            for d in part.differences:
                assert d.what and d.why and set(d.affects) <= ids, (s.id, part.name, d.what)


def test_study_report_shows_each_difference_beside_the_values_it_affects():
    from virtbench.studies import report as sreport

    section = sreport.build(study("000"), [])
    table = section.tables[0]
    col = table.columns.index("run differently from the paper")
    by_id = {c["id"]: c for c in section.data["comparisons"]}
    rows = {r[1]: r for r in table.rows}

    def cell(vid):
        return rows[by_id[vid]["quantity"]][col]

    assert "`-mr` added" in cell("des-one-rpi4") and "`-seconds`" in cell("des-one-rpi4")
    assert "buster" in cell("os-max-debian10") and cell("os-max-debian10").count("buster") == 1
    assert "`-mr`" not in cell("tcp-same-rpi4") and "privileged, without lxcfs" in cell("ram-max-128-rpi4")
    assert [d["part"] for d in by_id["aes-one-rpi5"]["differences"] if d["what"].startswith("`")] == ["density-os-aes"] * 2
    whats = [d["what"] for d in by_id["aes-one-rpi5"]["differences"]]
    assert len(whats) == len(set(whats)) and any("privileged" in w for w in whats)  # shared by 4 parts, listed once
    assert any("`openssl speed -seconds {seconds} -bytes 64 -multi 2 des-ede3 > /tmp/results.txt`" in n
               for n in section.notes)
    assert all(d["what"] and d["why"] for d in section.data["differences"]) and len(section.data["differences"]) > 40


def test_a_repetition_count_the_paper_does_not_state_is_not_made_up():
    """000 states none, 002 "several": `study show` said "1 repetition(s) per point" for both."""
    from virtbench.studies import show as sshow
    from virtbench.studies import text as stext

    for sid in ("000", "002"):
        doc = sshow.document(study(sid))
        assert doc["repetitions"] is None and doc["repetitions_text"] == "repetitions per point not stated"
        assert "repetitions per point not stated" in " ".join(" ".join(stext.show_lines(doc)).split())
    assert sshow.document(study("001"))["repetitions_text"] == "15 repetition(s) per point"


def test_study004_runs_the_papers_18_byte_payload_and_reads_its_31_mbits_from_the_same_rate():
    """The presets sent 64 B of payload, said to be because 18 B is below what iperf 2 sends
    (iperf 2.1.8 sends 18 B datagrams with its timestamps); tput-64 read the NDR where ndr-64,
    the same paper rate (64 kpkt/s in 60 B frames is 31 Mbit/s), reads the PDR."""
    from virtbench.studies import paper as P

    for scale in ("quick", "paper"):
        path = SHIPPED / f"study004-line-{scale}.yaml"
        assert load_yaml(path.read_text(), str(path))["line"]["payload"] == 18
    values = {v.id: v for v in P.load("004").values}
    tput, ndr = values["tput-64"].yours, values["ndr-64"].yours
    assert tput is not None and ndr is not None and tput.field == ndr.field == "pdr_pps"
    assert round(values["ndr-64"].paper["value"] * tput.factor) == values["tput-64"].paper["value"]


def test_study000_shows_the_rpi5s_values_beside_the_rpi4bs_as_its_difference_says():
    """Figs. 9 and 11's RPi 5 values had no measured counterpart although the preset says both
    boards' values are shown (a run on an RPi 5 was judged against the RPi 4B's numbers only)."""
    from virtbench.studies import paper as P

    values = {v.id: v for v in P.load("000").values}
    for vid in ("ram-max-128-rpi5", "ram-max-256-rpi5", "ram-max-512-rpi5", "hostram-2g-rpi5", "hostram-4g-rpi5",
                "hostram-8g-rpi5"):
        rpi4 = values[vid.replace("rpi5", "rpi4")]
        assert values[vid].yours == rpi4.yours and values[vid].yours is not None, vid
