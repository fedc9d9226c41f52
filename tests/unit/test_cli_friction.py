"""Everyday command-line friction (#29 item 2, and the progress bar's ETA of item 3).

Before: `doctor` and `study list` were refused while anything measured; `runs` had no header
and no --json; a mistyped `--db sqlite:///typo.db` silently created an empty store; `show`
without arguments printed every execution's raw output (1.4 MB for a quick run); `list`
lines reached 200 columns; nothing validated a campaign and showed its plan and duration
without running it; the progress bar had no ETA and read 254/96 once adaptive rounds ran."""
from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from virtbench.analysis import synthetic
from virtbench.cli import cli
from virtbench.errors import InputError
from virtbench.platforms.base import Paths
from virtbench.runner import hostlock
from virtbench.store.db import Store


@pytest.fixture()
def env(tmp_path, monkeypatch):
    paths = Paths(state=tmp_path / "state", runtime=tmp_path / "run")
    monkeypatch.setenv("VIRTBENCH_STATE_DIR", str(paths.state))
    monkeypatch.setenv("VIRTBENCH_RUNTIME_DIR", str(paths.runtime))
    store = Store(f"sqlite:///{tmp_path / 'v.db'}")
    synthetic.fill(store, "r1", repetitions=3, warmups=1, platforms=synthetic.default_platforms()[:3],
                   benchmarks=synthetic.default_benchmarks()[:2], fail={("docker", "sim-hpcc"): [2]})
    return paths, store


def vb(*args: str):
    return CliRunner().invoke(cli, list(args))


def refused(res) -> str:
    """The message of an input error (main() prints it as one line and exits 2)."""
    assert isinstance(res.exception, InputError) and res.exception.exit_code == 2, res.output
    return res.exception.message


def test_runs_has_a_header_and_json(env):
    _, store = env
    res = vb("runs", "--db", store.url)
    assert res.exit_code == 0
    head, first = res.output.splitlines()[:2]
    assert head.split()[:3] == ["run", "status", "name"] and first.startswith("r1 ")
    doc = json.loads(vb("runs", "--json", "--db", store.url).output)
    assert doc[0]["id"] == "r1" and doc[0]["status"] == "finished" and isinstance(doc[0]["platforms"], int)


@pytest.mark.parametrize("args", [["runs"], ["report", "latest"], ["show"], ["compare", "a", "b"],
                                  ["export", "latest", "-o", "{tmp}/out"]])
def test_read_commands_do_not_create_a_missing_store(tmp_path, args):
    typo = tmp_path / "typo.db"
    res = vb(*[a.format(tmp=tmp_path) for a in args], "--db", f"sqlite:///{typo}")
    assert refused(res) == f"no results store at {typo}: nothing was ever stored there" and not typo.exists()


def test_a_missing_store_is_one_line_and_exit_2(tmp_path):
    typo = tmp_path / "typo.db"
    proc = subprocess.run([sys.executable, "-m", "virtbench", "runs", "--db", f"sqlite:///{typo}"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and not typo.exists()
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: no results store at {typo}: nothing was ever stored "
                                                   "there (fix: check the --db URL")


def test_show_summarizes_and_gives_raw_output_on_request(env):
    _, store = env
    summary = vb("show", "r1", "--db", store.url).output
    lines = summary.splitlines()
    executions = store.executions("r1")
    assert len(lines) == len(executions) + 2 and all(len(line) <= 100 for line in lines)
    assert "sim output" not in summary  # no raw output unless asked for
    one = executions[0]
    raw = vb("show", "r1", "--execution", str(one.id), "--db", store.url).output
    assert "sim output" in raw and f"execution {one.id}:" in raw and raw.count("execution ") == 1
    failed = vb("show", "r1", "--failed", "--db", store.url).output
    assert "device busy" in failed
    assert "has no execution 999999" in refused(vb("show", "r1", "--execution", "999999", "--db", store.url))


@pytest.mark.parametrize("what", ["benchmarks", "platforms", "probes", "experiments"])
def test_every_list_keeps_within_100_columns(what):
    res = vb("list", what)
    assert res.exit_code == 0 and res.output.strip()
    too_wide = [line for line in res.output.splitlines() if len(line) > 100]
    assert not too_wide, too_wide[:3]


def test_read_only_commands_answer_while_a_run_measures(env, monkeypatch):
    paths, store = env
    from virtbench.commands import lastprobe

    doc = {"host": {"hostname": "h"}, "platforms": [], "sandboxes": [], "cross_build": [], "store": "x",
           "image_cache": "y"}
    _, fresh_at = lastprobe.probe_or_last(paths, "doctor", "test", False, lambda: doc)
    lastprobe.probe_or_last(paths, "study-list", "test", False, lambda: [{"id": "1", "title": "t"}])
    with hostlock.hold(paths, "campaign 'other'"):
        res = vb("doctor", "--json")
        assert res.exit_code == 0, res.output
        answer = json.loads(res.stdout)
        assert answer["probed_at"] == fresh_at and answer["host"] == {"hostname": "h"}
        assert "a run is measuring on this host" in res.stderr
        res = vb("study", "list", "--json")
        assert res.exit_code == 0 and json.loads(res.stdout) == [{"id": "1", "title": "t"}]
        assert vb("runs", "--db", store.url).exit_code == 0
        assert vb("report", "r1", "--db", store.url).exit_code == 0
        (paths.state / "last-probe" / "doctor.json").unlink()
        # never probed: the refusal as before, naming who measures
        assert "campaign 'other'" in refused(vb("doctor"))


CAMPAIGN = """
name: try
platforms: [native, runc, {name: vm, type: qemu, accel: tcg}]
benchmarks:
  - {name: openssl, seconds: 3, sweep: {bytes: [64, 1024]}}
  - {name: fio}
repetitions: 4
adaptive: {max_repetitions: 10, max_minutes: 20}
"""


def test_dry_run_prints_the_plan_and_starts_nothing(tmp_path, env, monkeypatch):
    paths, _ = env

    def never(*_a, **_k):
        raise AssertionError("a dry run started something")
    monkeypatch.setattr("virtbench.experiments.benchmarks.quick.availability_of", never)
    monkeypatch.setattr("virtbench.runner.execute.start", never)
    monkeypatch.setattr("virtbench.runner.hostlock.hold", never)
    monkeypatch.setattr("virtbench.images.build.build", never)
    campaign = tmp_path / "c.yaml"
    campaign.write_text(CAMPAIGN)
    db = tmp_path / "none.db"
    res = vb("run", "--dry-run", str(campaign), "--db", f"sqlite:///{db}")
    assert res.exit_code == 0, res.output
    out = res.output
    for needle in ("campaign try: valid", "platforms (3)", "vm ", "qemu", "openssl[bytes=64]", "fio ",
                   "sweep openssl: 2 points", "1 warm-up + 4 measured", "at most 10 measured rounds and 20 minutes",
                   "estimated duration: about", "with adaptive rounds"):
        assert needle in out, needle
    assert not db.exists() and not (paths.runtime / hostlock.LOCK_NAME).exists()
    quick = vb("run", "--quick", "--dry-run", "--db", f"sqlite:///{db}")
    assert quick.exit_code == 0 and "campaign quick: valid" in quick.output and "kvm" in quick.output
    assert all(len(line) <= 100 for line in quick.output.splitlines())
    bad = tmp_path / "bad.yaml"
    bad.write_text(CAMPAIGN.replace("repetitions: 4", "repetitons: 4"))
    assert "repetitons" in refused(vb("run", "--dry-run", str(bad)))
    # an experiment kind's own nodes (line's netns) are no platform plugin; before: "unknown platform type 'netns'"
    from virtbench.studies.run import SHIPPED

    line = vb("run", "--dry-run", str(SHIPPED / "study004-line-quick.yaml"), "--db", f"sqlite:///{db}")
    assert line.exit_code == 0 and "netns" in line.output and "node" in line.output, line.output


def test_eta_follows_the_plan_and_its_cap():
    from virtbench.report.progress import Cap, eta_text

    # 10 of 20 planned done in 100 s: 100 s to go
    assert eta_text(10, 20, 0, 100.0) == "10/20 ETA 1:40"
    now = time.monotonic()
    cap = Cap(executions=100, per_round=10, deadline=now + 60)
    # the plan may grow to 100: at most 60 s to the deadline + one round (100 s) = 2:40, not 900 s
    assert eta_text(10, 20, 0, 100.0, cap, now=now) == "10/20 (cap 100) ETA 1:40, at most 2:40"
    assert eta_text(3, 20, 3, 5.0) == "3/20 ETA -"  # nothing measured by this process yet (a resume)


def test_progress_bar_shows_eta(monkeypatch):
    import io

    from rich.console import Console

    from virtbench.report.progress import RichReporter

    out = io.StringIO()
    reporter = RichReporter(Console(file=out, width=120, force_terminal=True))
    reporter.begin(4, 0)
    reporter.advance()
    reporter.begin(6, 1)  # adaptive rounds grew the plan (begin is told the plan whole: 1 of 6 done)
    reporter.end()
    assert "1/6" in out.getvalue() and "ETA" in out.getvalue()


def test_cap_of_a_campaign():
    from virtbench.config import parse_campaign
    from virtbench.report.progress import Cap

    c = parse_campaign({"name": "c", "platforms": ["native", "runc"], "benchmarks": ["openssl"],
                        "repetitions": 3, "warmups": 1, "adaptive": {"max_repetitions": 8, "max_minutes": 1}})
    from virtbench.experiments.planning import plan_of

    cap = Cap.of(plan_of(c), started=0.0)
    assert cap is not None and cap.executions == 2 * 2 * 9 and cap.per_round == 4 and cap.deadline == 60
    assert Cap.of(plan_of(parse_campaign({"name": "c", "platforms": ["native"], "benchmarks": ["openssl"]}))) is None
