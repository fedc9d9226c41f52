"""Multi-host runs without hosts: cross-host validation, the agent's wire format, seeds, clocks."""
from __future__ import annotations

from datetime import datetime
from pathlib import Path
from types import SimpleNamespace

import pytest

from virtbench.config import cross_host, parse_campaign
from virtbench.errors import InputError
from virtbench.experiments.benchmarks import crosspair
from virtbench.report.hosts import cross_pairs
from virtbench.runner import agent, wire
from virtbench.runner.parts import host_seed, instance_run_id

BASE = {"name": "t", "hosts": ["local", {"name": "b", "address": "192.0.2.2"}],
        "platforms": ["native", {"name": "runc", "network": "host"}]}


def campaign(**kw):
    return parse_campaign({**BASE, "benchmarks": [{"name": "openssl"}], **kw})


def test_cross_host_pairs_validated():
    c = campaign(benchmarks=["openssl", {"name": "iperf3", "server": {"host": "b"}}])
    assert set(cross_host(c)) == {"iperf3"}


@pytest.mark.parametrize("change, message", [
    ({"benchmarks": [{"name": "iperf3", "server": {"host": "c"}}]}, "no host 'c' in the campaign's hosts"),
    ({"benchmarks": [{"name": "iperf3", "server": {"host": "b"}}], "platforms": ["native", "runc"]},
     "platform 'runc' has network none"),
    ({"benchmarks": [{"name": "sockperf", "server": {"host": "local"}}]}, "cannot be its client"),
    ({"benchmarks": [{"name": "iperf3", "server": {"host": "b"}}], "hosts": None}, "no host 'b'"),
    ({"benchmarks": [{"name": "iperf3", "server": {"hots": "b"}}]}, "server"),
])
def test_bad_cross_host_pairs_refused(change, message):
    data = {**BASE, **change}
    if data.get("hosts") is None:
        data.pop("hosts")
    with pytest.raises(InputError) as exc:
        parse_campaign(data)
    assert message in exc.value.message


def test_agent_wire_format_round_trips_datetimes_and_bytes(capsys):
    import io
    import json

    out = io.StringIO()
    emit = agent.Emitter(out)
    t = datetime(2026, 1, 2, 3, 4, 5, 6)
    emit("record", record={"started_at": t, "attachments": [{"data": b"\x00\xff"}], "round": 1})
    msg = wire.decode(json.loads(out.getvalue()))
    assert msg["record"]["started_at"] == t and msg["record"]["attachments"][0]["data"] == b"\x00\xff"


def test_each_host_its_own_order_and_labels():
    assert host_seed(7, "local") != host_seed(7, "b") and host_seed(7, "b") == host_seed(7, "b")
    assert instance_run_id("r1", "b") != instance_run_id("r1", "c")


def test_cross_plan_interleaves_every_round_and_platform():
    c = campaign(benchmarks=["openssl", {"name": "iperf3", "server": {"host": "b"}}], repetitions=3, warmups=1)
    plan = crosspair.plan(c, 5)
    assert len(plan) == 4 * 2 and {p for _, _, p, _ in plan} == {"native", "runc"}
    assert [w for _, w, _, _ in plan].count(True) == 2


def _run(limit=0.1):
    return SimpleNamespace(campaign={"benchmarks": [
        {"key": "sockperf", "name": "sockperf", "params": {"server": {"host": "b", "max_clock_error": limit}}}]})


def _row(metric, mean, unit="us"):
    return SimpleNamespace(benchmark="sockperf", metric=metric, platform="native", host="local", mean=mean,
                           unit=unit, n=3)


def test_two_clock_figures_refused_when_clocks_differ(monkeypatch):
    from virtbench.registry import BENCHMARKS

    monkeypatch.setattr(BENCHMARKS.get("sockperf"), "two_clock_metrics", ("avg",))
    hosts = {"b": {"clock": {"offset_s": 0.002, "uncertainty_s": 0.0001}}}
    rows = [_row("avg", 10.0), _row("p50", 10.0)]
    pairs = {p["metric"]: p for p in cross_pairs(_run(), rows, hosts)}
    assert not pairs["avg"]["valid"] and "clocks differ by 2.100 ms" in pairs["avg"]["why"]
    assert pairs["p50"]["valid"] and pairs["p50"]["timing"] == "one clock"  # a round trip: always valid
    close = {"b": {"clock": {"offset_s": 0.0000005, "uncertainty_s": 0.0000001}}}
    assert cross_pairs(_run(), [_row("avg", 10.0)], close)[0]["valid"]  # 0.6 us < 10 % of 10 us


def test_a_remote_host_without_the_memory_controller_is_refused_before_anything_is_built_or_shipped(monkeypatch):
    """#20: Raspberry Pi OS boots with cgroup_disable=memory. A campaign limiting memory on such
    a board refuses at the cheap checks, naming the board and the fix: nothing is built here,
    shipped there or started (before, the refusal came from the host's agent after shipping)."""
    from virtbench.platforms.base import Paths
    from virtbench.runner import parts as hosts

    calls: list[object] = []

    class Board:
        def __init__(self, spec, runtime):
            self.spec = spec

        def open(self):
            calls.append("open")

        def run(self, argv, **kw):
            calls.append(argv)
            text = "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpu\t0\t1\t1\nmemory\t0\t1\t0\n"
            return SimpleNamespace(ok=True, returncode=0, stdout=text if argv == ["cat", "/proc/cgroups"] else "",
                                   stderr="")

        def close(self):
            pass

    from virtbench.experiments.benchmarks.kind import Benchmarks

    monkeypatch.setattr(hosts, "SSHExecutor", Board)
    monkeypatch.setattr(Benchmarks, "prepare", lambda *a, **k: calls.append("prepare"))
    monkeypatch.setattr(hosts, "_prepare_remote", lambda *a, **k: calls.append("ship"))
    c = campaign(platforms=["native", {"name": "small", "type": "runc", "options": {"memory": "256M"}}])
    paths = Paths(Path("/nonexistent-state"), Path("/nonexistent-run"))
    with pytest.raises(InputError) as exc:
        hosts.prepare_parts(Benchmarks(c, paths), paths, 1, lambda m: None)
    assert exc.value.message.startswith("host b: ") and "small cannot limit memory" in exc.value.message
    assert "disabled" in exc.value.message and "cgroup_enable=memory" in exc.value.fix
    assert "prepare" not in calls and "ship" not in calls and len(exc.value.message.splitlines()) == 1


def test_a_campaign_on_boards_only_builds_no_image_for_the_controllers_own_architecture(monkeypatch):
    """#20: a campaign whose only host is an armhf board needs the armhf image; the controller
    (x86) took part in nothing, yet its own image was built first (109 s on a fresh machine)."""
    from virtbench.platforms.base import Paths
    from virtbench.runner import parts as hosts

    class Stop(Exception):
        pass

    class Board:
        def __init__(self, spec, runtime):
            self.spec = spec

        def open(self):
            pass

        def run(self, argv, **kw):
            out = {"uname": "armv7l", "python3": "3.11"}.get(argv[0], "")
            return SimpleNamespace(ok=True, returncode=0, stdout=out + "\n", stderr="")

        def close(self):
            pass

    built: list[str] = []
    monkeypatch.setattr(hosts, "SSHExecutor", Board)
    monkeypatch.setattr(hosts.images, "build", lambda recipe, **kw: built.append(recipe.arch) or
                        SimpleNamespace(arch=recipe.arch, root=Path("/nonexistent")))
    monkeypatch.setattr(hosts.ship, "ensure_virtbench", lambda *a, **k: (_ for _ in ()).throw(Stop()))
    from virtbench.experiments.benchmarks.kind import Benchmarks

    c = parse_campaign({"name": "t", "hosts": [{"name": "pi2", "address": "192.0.2.2"}], "platforms": ["native"],
                        "benchmarks": [{"name": "openssl"}]})
    paths = Paths(Path("/nonexistent-state"), Path("/nonexistent-run"))
    with pytest.raises(Stop):
        hosts.prepare_parts(Benchmarks(c, paths), paths, 1, lambda m: None)
    assert built == ["armhf"]


def test_a_hosts_check_says_what_its_platforms_took_as_it_goes(monkeypatch):
    """The agent's check prepares the platforms there (3.5 minutes of image imports on the
    emulated reference host, in silence before): each log line reaches the terminal, named by
    its host, when the agent writes it, not after the check ends."""
    from virtbench.remote.inventory import HostSpec
    from virtbench.runner import parts as hosts
    from virtbench.runner.parts import Part

    seen: list[str] = []

    class FakeStream:
        def send(self, text):
            return True

        def lines(self):
            yield '{"event": "log", "message": "docker: ready in 52 s"}'
            assert seen == ["b: docker: ready in 52 s"]  # before the next line
            yield "a stray print"
            yield '{"event": "end", "status": "checked"}'

        def close(self):
            return 0

        def stderr(self):
            return ""

    monkeypatch.setattr(hosts.proc, "stream", lambda argv: FakeStream())
    part = Part(spec=HostSpec(name="b", address="192.0.2.2"), seed=1, executor=SimpleNamespace(ssh_argv=lambda a: a))
    msgs = hosts.talk(part, {"mode": "check"}, log=lambda m: seen.append(f"b: {m}"))
    assert [m["event"] for m in msgs] == ["log", "end"] and len(seen) == 1


def test_a_platform_whose_prepare_takes_seconds_says_so(monkeypatch):
    """What feeds the check's log lines above: prepare() logs a platform that took 2 s or more
    (an image import), and nothing for one that was ready at once."""
    from virtbench.experiments.benchmarks import session as sess
    from virtbench.platforms.base import Paths

    c = campaign(platforms=["native", {"name": "runc", "network": "host"}])
    s = sess.build_objects(c, Paths(Path("/nonexistent-state"), Path("/nonexistent-run")))
    clock = iter([0.0, 0.1, 10.0, 62.5])
    monkeypatch.setattr(sess, "time", SimpleNamespace(monotonic=lambda: next(clock)))
    monkeypatch.setattr(sess, "check_available", lambda *a, **k: None)
    monkeypatch.setattr(sess.images, "build", lambda *a, **k: SimpleNamespace(tag="t"))
    for p in s.platforms.values():
        monkeypatch.setattr(p, "prepare", lambda image: None)
    lines: list[str] = []
    sess.prepare(s, log=lines.append)
    assert lines == ["runc: ready in 52 s"]
