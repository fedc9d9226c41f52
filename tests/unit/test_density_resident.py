"""The density fleet's resident runner (experiments/density/resident.py), run for real by Debian's
`sh` (dash) and busybox's, on this host as the "container": jobs arrive whole (arguments with
newlines, empty ones), their status, output and VBSYNC marker come back, a killed tool reads
as a kill, a hung job ends at its bound with the runner killed, and a fleet launches its
counts through the runners with one exec per instance in its life."""
from __future__ import annotations

import os
import shutil
import stat
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from virtbench import proc
from virtbench.executor import HostExecutor
from virtbench.experiments.density import fleet as fleet_module
from virtbench.experiments.density import resident, sync
from virtbench.platforms.base import Instance

SHELLS = ["dash", "busybox"]


@pytest.fixture(params=SHELLS)
def shell_path(request, tmp_path, monkeypatch) -> str:
    """PATH whose `sh` (and, for busybox, `date` without %N) is the shell under test."""
    if shutil.which(request.param) is None:
        pytest.skip(f"{request.param} is not installed")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    target = shutil.which(request.param)
    (bin_dir / "sh").symlink_to(target)
    if request.param == "busybox":
        (bin_dir / "date").symlink_to(target)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    return request.param


def _start(directory: Path) -> resident.Runner:
    r = proc.run(resident.start_argv(str(directory)), timeout=30)
    pid = resident.started_pid(r.stdout)
    assert pid is not None, r.stdout
    sync.read_clock(r.stdout, time.time_ns(), time.time_ns(), shared_kernel=True)
    return resident.Runner(pid)  # this host's PID namespace: the same number


def test_jobs_arrive_whole_and_report_status_output_and_marker(shell_path, tmp_path):
    runner = _start(tmp_path / "runner")
    try:
        deadline = time.time_ns() + 300_000_000
        work = tmp_path / "work"
        r = runner.run([str(deadline), str(work), "sh", "-c", "echo out; printf 'multi\\nline\\n' >&2; exit 3"], 30)
        assert (r.returncode, r.stdout) == (3, "out\n") and work.is_dir()
        assert sync.strip_marker(r.stderr) == "multi\nline\n"
        marker = sync.parse_marker(r.stderr)
        assert marker is not None and marker.deadline == deadline
        if shell_path == "dash":  # busybox's date has no %N: its clock is /proc/uptime's centiseconds
            assert marker.start >= deadline and r.seconds >= 0.2
        args = ["a b", "", "x\n", "\ny\n\n", "$(false)", "'\"*"]
        r = runner.run(["0", "", "printf", "%s|", *args], 30)
        assert r.returncode == 0 and r.stdout == "".join(f"{a}|" for a in args)
        assert runner.run(["0", "", "false"], 30).returncode == 1
        big = runner.run(["0", "", "sh", "-c", "head -c 300000 /dev/zero | tr '\\0' x; "
                                            "{ head -c 200000 /dev/zero | tr '\\0' y; echo; } >&2"], 30)
        assert big.stdout == "x" * 300000 and sync.strip_marker(big.stderr) == "y" * 200000 + "\n"  # > a pipe's buffer
    finally:
        runner.kill()


def test_a_killed_tool_reads_as_a_kill_and_the_runner_takes_the_next_job(shell_path, tmp_path):
    runner = _start(tmp_path / "runner")
    marker = f"30.{os.getpid()}{SHELLS.index(shell_path)}"  # a duration no other process sleeps
    try:
        def kill_the_tool() -> None:
            time.sleep(0.5)
            proc.run(["pkill", "-KILL", "-f", f"^sleep {marker}$"], check=False)

        t = threading.Thread(target=kill_the_tool)
        t.start()
        r = runner.run(["0", "", "sleep", marker], 60)
        t.join()
        assert r.returncode == 137 and r.seconds < 20
        assert runner.run(["0", "", "true"], 30).returncode == 0
    finally:
        runner.kill()


def test_a_hung_job_ends_at_its_bound_and_a_dead_runner_takes_no_job(tmp_path):
    runner = _start(tmp_path / "runner")
    try:
        r = runner.run(["0", "", "sleep", f"20.{os.getpid()}"], 1.5)
        assert r.returncode == 1 and "did not report job 1 in time" in r.stderr and r.seconds < 5
        for _ in range(50):  # killed: a zombie until its new parent reaps it
            if not runner.alive():
                break
            time.sleep(0.05)
        assert not runner.alive()
        with pytest.raises(resident.Gone):
            runner.run(["0", "", "true"], 5)
    finally:
        runner.kill()
        proc.run(["pkill", "-f", f"^sleep 20.{os.getpid()}$"], check=False)


def test_a_fleet_launches_through_its_runners_with_one_exec_per_instance(tmp_path, monkeypatch):
    """The fleet on this host's kernel: each instance's one exec starts its runner; counts after
    it launch no exec at all, a new instance gets its own, and a runner that died is replaced."""
    execs: list[list[str]] = []

    class Host(HostExecutor):
        def run(self, argv, **kw):
            execs.append(argv)
            return super().run(argv[1:], **kw)  # the "instance" is this host

    pids = lambda cgroup: [int(p) for p in os.listdir("/proc") if p.isdigit()]  # noqa: E731
    monkeypatch.setattr(resident.cgroups, "tasks", pids)
    plat = SimpleNamespace(kind="container", pod=False, host=Host(),
                           exec_argv=lambda inst, argv: [inst.name, *argv])
    fleet = fleet_module.Fleet(plat, None, "r", "p", None)  # type: ignore[arg-type]
    fleet.runner_dir = str(tmp_path / "runners")
    fleet.members = [fleet_module.Member(Instance(f"vb-{i}", "docker", "r", {}), "cg") for i in range(3)]
    assert fleet.resident
    try:
        clocks, failed, estimate = fleet._prepare(str(tmp_path / "w"))
        assert len(execs) == 3 and failed == {} and all(m.runner is not None for m in fleet.members)
        assert clocks == [sync.Clock("realtime", 0)] * 3 and estimate > 0
        results, overlap = fleet._launch(["sh", "-c", 'test -d "$0"', str(tmp_path / "w")], str(tmp_path / "w"),
                                         clocks, failed, 1.0, 30.0, [])
        assert [r.returncode for _, r in results] == [0] * 3 and overlap.reported == 3 and overlap.late == 0
        assert len(execs) == 3 and overlap.warnings == []

        fleet.members.append(fleet_module.Member(Instance("vb-3", "docker", "r", {}), "cg"))
        dead = fleet.members[0].runner
        dead.kill()
        time.sleep(0.3)
        execs.clear()
        clocks, failed, _ = fleet._prepare(str(tmp_path / "w"))
        assert sorted(a[0] for a in execs) == ["vb-0", "vb-3"] and fleet.members[0].runner is not dead
        results, overlap = fleet._launch(["true"], "", clocks, failed, 1.0, 30.0, [])
        assert [r.returncode for _, r in results] == [0] * 4 and len(execs) == 2
    finally:
        for m in fleet.members:
            if m.runner:
                m.runner.kill()


def test_a_platform_of_another_kernel_or_host_gets_no_runners():
    local = HostExecutor()
    for kind, pod, host in (("vm", False, local), ("sandbox", False, local), ("container", True, local),
                            ("container", False, SimpleNamespace(run=None))):
        plat = SimpleNamespace(kind=kind, pod=pod, host=host)
        assert not fleet_module.Fleet(plat, None, "r", "p", None).resident  # type: ignore[arg-type]
    assert resident.encode(["a\nb", ""]) == "2\na\nb\n1\n\n"


def test_a_symlink_in_the_runner_s_directory_never_points_the_host_at_a_host_file(tmp_path):
    """A container that replaces its runner's files (or directory) with symlinks must not make
    the host read a host file back as output or write the job over one."""
    secret = tmp_path / "secret"
    secret.write_text("host secret\n")
    directory = tmp_path / "runner"
    runner = _start(directory)
    try:
        (directory / "out").unlink()
        (directory / "out").symlink_to(secret)
        with pytest.raises(resident.Gone, match="Too many levels of symbolic links"):
            runner.run(["0", "", "true"], 10)
        (directory / "argv.tmp").symlink_to(secret)
        with pytest.raises(resident.Gone):
            runner.run(["0", "", "true"], 10)
        assert secret.read_text() == "host secret\n"
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        directory.rename(tmp_path / "moved")
        directory.symlink_to(elsewhere)  # the path now leads elsewhere; the runner's cwd does not
        assert Path(runner.path("done")).resolve().parent == tmp_path / "moved"
    finally:
        runner.kill()


def test_a_device_node_or_file_in_place_of_a_fifo_is_never_opened_by_the_host(tmp_path):
    """A container may mknod (docker's default capabilities); only its device cgroup stops it
    using the node. The host, outside that cgroup, must open none: a node where a FIFO was (or
    a plain file) is refused, and argv is always a new file, never one left there."""
    directory = tmp_path / "runner"
    runner = _start(directory)
    try:
        (directory / "err").unlink()
        (directory / "err").write_text("not the job's\n")
        with pytest.raises(resident.Gone, match="not a FIFO"):
            runner.run(["0", "", "true"], 10)
        if os.geteuid() == 0:
            (directory / "err").unlink()
            os.mknod(directory / "err", 0o600 | stat.S_IFCHR, os.makedev(1, 5))  # /dev/zero: endless output
            with pytest.raises(resident.Gone, match="not a FIFO"):
                runner.run(["0", "", "true"], 10)
            os.mknod(directory / "argv.tmp", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
            (directory / "err").unlink()
            os.mkfifo(directory / "err")
            r = runner.run(["0", "", "true"], 10)  # the node at argv.tmp replaced by a new file
            assert r.returncode == 0 and (directory / "argv").is_file()
            assert not (directory / "argv.tmp").exists()
    finally:
        runner.kill()
