"""Kernel-interface benchmarks (syscall, context-switch, fork-exec, page-fault, file-metadata):
parsers against outputs recorded inside the bookworm guest image, natively and under gVisor
(runsc, ptrace platform), failures recorded from the real tools, commands and parameters."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from pydantic import ValidationError

from virtbench.benchmarks.context_switch import ContextSwitch, ContextSwitchParams
from virtbench.benchmarks.file_metadata import FileMetadata, FileMetadataParams
from virtbench.benchmarks.fork_exec import ForkExec, ForkExecParams
from virtbench.benchmarks.page_fault import PAGES_PER_BOGO_OP, PageFault, PageFaultParams
from virtbench.benchmarks.syscall import Syscall, SyscallParams
from virtbench.errors import ParseError
from virtbench.registry import BENCHMARKS

DATA = Path(__file__).resolve().parent.parent / "data"


def read(name: str) -> str:
    return (DATA / name).read_text()


def test_registered_in_kernel_category() -> None:
    for name in ("syscall", "context-switch", "fork-exec", "page-fault", "file-metadata"):
        cls = BENCHMARKS.get(name)
        assert all(m.category == "kernel" for m in cls(cls.Params()).metrics())


# -- syscall --------------------------------------------------------------------------------------
RELEASES = ("", "_trixie")
"""Debian 12 (no suffix) and 13 recordings; each file pair is native and under gVisor."""


def per_op(text: str) -> float:
    """usecs/op read independently of the parser."""
    return float(next(line.split()[0] for line in text.splitlines() if line.strip().endswith("usecs/op")))


@pytest.mark.parametrize(("name", "ns"), [("syscall_basic_300000.txt", 198.7),
                                          ("syscall_basic_300000_runsc-ptrace.txt", 24280.7)])
def test_syscall_recorded(name: str, ns: float) -> None:
    assert Syscall(SyscallParams()).parse(read(f"perf/{name}"), "", name) == {"syscall_ns": pytest.approx(ns)}


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("sandbox", ["", "_runsc-ptrace"])
def test_perf_recorded_per_release(release: str, sandbox: str) -> None:
    text = read(f"perf/syscall_basic_300000{release}{sandbox}.txt")
    assert Syscall(SyscallParams()).parse(text) == {"syscall_ns": pytest.approx(per_op(text) * 1000)}
    text = read(f"perf/sched_pipe_20000_pinned{release}{sandbox}.txt")
    assert ContextSwitch(ContextSwitchParams()).parse(text) == {"switch_us": pytest.approx(per_op(text) / 2)}


def test_syscall_total_time_is_truncated() -> None:
    # 20000 x 0.3964 us = 7.93 ms, printed as "Total time: 0.007 [sec]"
    text = read("perf/syscall_basic_20000_truncated_total.txt")
    assert Syscall(SyscallParams(calls=20000)).parse(text) == {"syscall_ns": pytest.approx(396.4)}


def test_syscall_sandbox_many_times_native() -> None:
    b = Syscall(SyscallParams())
    native = b.parse(read("perf/syscall_basic_300000.txt"))["syscall_ns"]
    runsc = b.parse(read("perf/syscall_basic_300000_runsc-ptrace.txt"))["syscall_ns"]
    assert runsc / native > 50


def test_syscall_failures() -> None:
    text = read("perf/syscall_basic_300000.txt")
    with pytest.raises(ParseError, match=r"300000 operations executed \(got 1000\)"):
        Syscall(SyscallParams()).parse(text.replace("300000 getppid", "1000 getppid"))
    with pytest.raises(ParseError, match="Total time near"):
        Syscall(SyscallParams()).parse(text.replace("Total time: 0.059", "Total time: 0.062"))
    with pytest.raises(ParseError, match="usecs/op"):
        Syscall(SyscallParams()).parse(text[: text.index("0.198700")])
    with pytest.raises(ParseError, match="Executed"):
        Syscall(SyscallParams()).parse("", "perf: 'bench' is not a perf-command", "empty")
    # Debian 11's linux-perf installs perf_5.10 only: no `perf` in the image, exit 127
    with pytest.raises(ParseError, match="Executed"):
        Syscall(SyscallParams()).parse(read("perf/fail_noperf_bullseye.txt"), read("perf/fail_noperf_bullseye.stderr.txt"))


def test_syscall_command_and_timeout() -> None:
    b = Syscall(SyscallParams(calls=5000))
    assert b.command("/w") == ["perf", "bench", "syscall", "basic", "--loop", "5000"]
    assert b.metrics()[0].unit == "ns" and not b.metrics()[0].higher_is_better
    assert b.execution_timeout() > 5000 * 100e-6
    with pytest.raises(ValidationError):
        SyscallParams(calls=10)
    with pytest.raises(ValidationError):
        SyscallParams(loops=1000)  # an unknown option


# -- context-switch -------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "loops", "pin", "us"), [
    ("sched_pipe_20000_pinned.txt", 20000, True, 12.241350 / 2),
    ("sched_pipe_20000_pinned_runsc-ptrace.txt", 20000, True, 275.222650 / 2),
    ("sched_pipe_2000_pinned_cpu1.txt", 2000, True, 20.066 / 2),
    ("sched_pipe_2000_unpinned.txt", 2000, False, 17.549 / 2),
])
def test_context_switch_recorded(name: str, loops: int, pin: bool, us: float) -> None:
    b = ContextSwitch(ContextSwitchParams(loops=loops, pin=pin))
    assert b.parse(read(f"perf/{name}"), "", name) == {"switch_us": pytest.approx(us)}


def test_context_switch_pin_checked() -> None:
    with pytest.raises(ParseError, match="CPU number"):
        ContextSwitch(ContextSwitchParams(loops=2000)).parse(read("perf/sched_pipe_2000_unpinned.txt"))
    with pytest.raises(ParseError, match="vb:cpu"):
        ContextSwitch(ContextSwitchParams(loops=2000)).parse("taskset: failed to get pid 1's affinity\n")


def test_context_switch_script_pins_first_allowed_cpu() -> None:
    """The constant script's CPU choice, with a stub `perf` standing in only for the print."""
    argv = ContextSwitch(ContextSwitchParams(loops=100)).command("/w")
    script = argv[2].replace("exec taskset -c \"$cpu\" perf bench sched pipe --loop \"$loops\"",
                             "exec taskset -c \"$cpu\" sh -c 'taskset -pc $$'")
    out = subprocess.run(["taskset", "-c", "1", "sh", "-c", script, *argv[3:]], capture_output=True,
                         text=True, timeout=30, check=True).stdout
    assert out.splitlines()[0] == "vb:cpu=1" and out.rstrip().endswith(": 1")
    assert argv[3:] == ["sh", "100", "pin"]
    assert ContextSwitch(ContextSwitchParams(pin=False)).command("/w")[-1] == "any"


# -- fork-exec ------------------------------------------------------------------------------------
def _rate(text: str) -> float:
    times = json.loads(text[text.index("vb:json") + 8:])["results"][0]["times"]
    return len(times) / sum(times)


@pytest.mark.parametrize(("name", "runs"), [("true_runs300_warmup20.txt", 300),
                                            ("true_runs300_warmup20_runsc-ptrace.txt", 300),
                                            ("true_runs300_warmup20_trixie.txt", 300),
                                            ("true_runs300_warmup20_trixie_runsc-ptrace.txt", 300),
                                            ("true_runs20_warmup2.txt", 20)])
def test_fork_exec_recorded(name: str, runs: int) -> None:
    text = read(f"hyperfine/{name}")
    got = ForkExec(ForkExecParams(runs=runs)).parse(text, "", name)["spawns_per_s"]
    assert got == pytest.approx(_rate(text))
    assert 10 < got < 100_000


def test_fork_exec_failures() -> None:
    text = read("hyperfine/fail_false_runs20.txt")
    with pytest.raises(ParseError, match="vb:json"):
        ForkExec(ForkExecParams(runs=20)).parse(text, read("hyperfine/fail_false_runs20.stderr.txt"))
    good = read("hyperfine/true_runs20_warmup2.txt")
    with pytest.raises(ParseError, match="300 timed runs"):
        ForkExec(ForkExecParams()).parse(good)
    with pytest.raises(ParseError, match="results"):
        ForkExec(ForkExecParams(runs=20)).parse(good[: good.index('"times"')])
    with pytest.raises(ParseError, match="exit code 0"):
        ForkExec(ForkExecParams(runs=20)).parse(good.replace('"exit_codes": [\n        0', '"exit_codes": [\n        1'))


# -- page-fault -----------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "size", "rounds"), [("vm_write64_64M_8rounds.txt", 64, 8),
                                                      ("vm_write64_64M_8rounds_runsc-ptrace.txt", 64, 8),
                                                      ("vm_write64_64M_8rounds_trixie.txt", 64, 8),
                                                      ("vm_write64_64M_8rounds_trixie_runsc-ptrace.txt", 64, 8),
                                                      ("vm_write64_64M_8rounds_bullseye.txt", 64, 8),
                                                      ("vm_write64_4M_2rounds.txt", 4, 2)])
def test_page_fault_recorded(name: str, size: int, rounds: int) -> None:
    text = read(f"stress-ng/{name}")
    wall = float(text.split("wall-clock-time: ")[1].split()[0])
    got = PageFault(PageFaultParams(size=size, rounds=rounds)).parse(text, "", name)["faults_per_s"]
    assert got == pytest.approx(size * rounds * PAGES_PER_BOGO_OP / wall)
    assert f"bogo-ops: {size * rounds}\n" in text


def test_page_fault_failures() -> None:
    with pytest.raises(ParseError, match="vb:yaml"):
        PageFault(PageFaultParams(size=4, rounds=1)).parse(read("stress-ng/fail_nodir.txt"))
    text = read("stress-ng/vm_write64_4M_2rounds.txt")
    with pytest.raises(ParseError, match=r"bogo-ops: 16 \(got 8\)"):
        PageFault(PageFaultParams(size=4, rounds=4)).parse(text)
    with pytest.raises(ParseError, match="successful run completed"):
        PageFault(PageFaultParams(size=4, rounds=2)).parse(text.replace("successful run completed", "x"))


def test_page_fault_command() -> None:
    argv = PageFault(PageFaultParams(size=16, rounds=3)).command("/w")
    assert argv[:2] == ["sh", "-c"] and argv[3:] == ["sh", "/w", "16", "48"]
    assert "--vm-madvise nohugepage" in argv[2] and "--vm-keep" not in argv[2]


# -- file-metadata --------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["filemeta_2000files_50loops.txt", "filemeta_2000files_50loops_runsc-ptrace.txt",
                                  "filemeta_2000files_50loops_trixie.txt",
                                  "filemeta_2000files_50loops_trixie_runsc-ptrace.txt",
                                  "filemeta_2000files_50loops_bullseye.txt"])
def test_file_metadata_recorded(name: str) -> None:
    text = read(f"fio/{name}")
    jobs = {j["jobname"]: j for j in json.loads(text)["jobs"]}
    got = FileMetadata(FileMetadataParams()).parse(text, "", name)
    assert got == {"create_per_s": jobs["create"]["read"]["iops"], "stat_per_s": jobs["stat"]["read"]["iops"]}
    assert jobs["stat"]["read"]["total_ios"] == 2000 * 50


def test_file_metadata_failures() -> None:
    with pytest.raises(ParseError, match="JSON"):
        FileMetadata(FileMetadataParams(files=10, loops=1)).parse(read("fio/filemeta_fail_nodir.txt"),
                                                                  read("fio/filemeta_fail_nodir.stderr.txt"))
    text = read("fio/filemeta_2000files_50loops.txt")
    with pytest.raises(ParseError, match=r"total_ios == 200000 \(got 100000\)"):
        FileMetadata(FileMetadataParams(loops=100)).parse(text)
    with pytest.raises(ParseError, match="error == 0"):
        FileMetadata(FileMetadataParams()).parse(text.replace('"error" : 0', '"error" : 28', 1))
