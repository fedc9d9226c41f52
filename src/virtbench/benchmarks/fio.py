"""fio: the eight storage measurements of LSBS (seeds/003) in one invocation.

Sequential and random, read and write, each once for bandwidth (large blocks) and once for
IOPS (small blocks). The eight jobs are separated by stonewall so they run one after
another and never compete; they share one file so the scratch space needed is `size`, not
eight times it. O_DIRECT keeps the guest's page cache out of the numbers.

`measure: cpu` reports each job's CPU time per I/O instead of its rate: the platform's own
storage path (syscalls, overlay or bind mount, block layer) in CPU, which the disk's speed and
other work on a shared disk do not move. On this development VM at load 5-7, the rate of a
1 s random-read job varied 20-30 % natively, its CPU time per I/O 2-4 %. A VM's device
emulation runs outside the guest and shows in the rate, not in the guest's CPU time: a
campaign comparing VMs' disks measures `throughput` (or `both`), with runtime long enough.

`passes: N` reads each job in N intervals of its runtime (fio's `--status-interval`: a cumulative
report every runtime/N, whose differences are one interval's I/Os and CPU time) and reports one
value over them (`pass_estimate`, as sqlite's passes). One job, no restarts: splitting the
runtime into N jobs instead cost fio about 0.3 s between jobs (20 jobs of 100 ms ran 8.2 s
against 2.3 s). Natively on the 2-CPU VM (2026-11-27, quiet, 16 executions each), the CPU
time per I/O of the best of 20 100 ms passes varied 2.4 % over executions, the best of 4 0.5 s
passes 5.1 %: the host's disturbances last up to a second, and short passes find the time
between them. The quick campaign reports the best of 20.
"""
from __future__ import annotations

import json
import re
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from ..errors import ParseError
from .base import Benchmark, Metric, Params, PassEstimate, pass_value

# (job / metric name, fio rw, which block size, direction read by the parser)
_JOBS: tuple[tuple[str, str, str, str], ...] = (
    ("seq_read_bw", "read", "bandwidth", "read"),
    ("seq_write_bw", "write", "bandwidth", "write"),
    ("rand_read_bw", "randread", "bandwidth", "read"),
    ("rand_write_bw", "randwrite", "bandwidth", "write"),
    ("seq_read_iops", "read", "iops", "read"),
    ("seq_write_iops", "write", "iops", "write"),
    ("rand_read_iops", "randread", "iops", "read"),
    ("rand_write_iops", "randwrite", "iops", "write"),
)
JobName = Literal["seq_read_bw", "seq_write_bw", "rand_read_bw", "rand_write_bw",
                  "seq_read_iops", "seq_write_iops", "rand_read_iops", "rand_write_iops"]
_SIZE = r"^[1-9][0-9]*[kKmMgGtT]?$"
_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
_FILENAME = "virtbench.fio"


def fio_json(stdout: str, source: str) -> Any:
    """fio's JSON document. fio prints some warnings ("fio: ENOSPC on laying out file") on
    stdout around the JSON, so decode from the first line that opens an object and ignore
    what follows."""
    start = re.search(r"^\{", stdout, re.M)
    if start is None:
        raise ParseError("fio", r"^\{ (a JSON document)", source)
    try:
        return json.JSONDecoder().raw_decode(stdout, start.start())[0]
    except json.JSONDecodeError as exc:
        raise ParseError("fio", f"valid JSON ({exc})", source) from None


STALE = 10
"""An interval whose CPU time per I/O is under a tenth of its job's did not get its CPU time yet
(fio prints the CPU time as a share of the runtime to 6 digits, so a repeated reading differs
by rounding, not by zero)."""


def fio_json_all(stdout: str, source: str) -> list[Any]:
    """Every JSON document fio printed, in order: with --status-interval one per interval, then the
    whole run's. Text between them (fio's warnings) is skipped as fio_json does."""
    docs, pos, decoder = [], 0, json.JSONDecoder()
    for start in re.finditer(r"^\{", stdout, re.M):
        if start.start() < pos:
            continue
        try:
            doc, pos = decoder.raw_decode(stdout, start.start())
        except json.JSONDecodeError as exc:
            raise ParseError("fio", f"valid JSON ({exc})", source) from None
        if isinstance(doc, dict):
            docs.append(doc)
    if not docs:
        raise ParseError("fio", r"^\{ (a JSON document)", source)
    return docs


def size_bytes(text: str) -> int:
    """fio's size suffixes are powers of two by default (kb_base=1024)."""
    match = re.fullmatch(r"([0-9]+)([kKmMgGtT]?)", text)
    if match is None:
        raise ValueError(f"not a fio size: {text!r}")
    return int(match.group(1)) * _UNITS[match.group(2).lower()]


def _cpu_per_io(job: dict[str, Any], direction: str, name: str, source: str) -> float:
    """CPU microseconds per I/O: fio's usr_cpu + sys_cpu (per cent of the job's runtime, from
    getrusage of the job's thread) times job_runtime (ms), over the I/Os done."""
    try:
        cpu = (float(job["usr_cpu"]) + float(job["sys_cpu"])) / 100 * float(job["job_runtime"]) * 1000
        ios = float(job[direction]["total_ios"])
    except (KeyError, TypeError, ValueError):
        raise ParseError("fio", f"jobs[{name}] usr_cpu, sys_cpu, job_runtime and {direction}.total_ios",
                         source) from None
    if ios <= 0 or cpu <= 0:
        raise ParseError("fio", f"jobs[{name}] with CPU time and I/Os done (cpu {cpu:g} us, {ios:g} I/Os)", source)
    return cpu / ios


class FioParams(Params):
    size: str = Field("256M", pattern=_SIZE, description="test file size (fio syntax: 256M, 4G)")
    bs_bandwidth: str = Field("1M", pattern=_SIZE, description="block size of the bandwidth jobs")
    bs_iops: str = Field("4k", pattern=_SIZE, description="block size of the IOPS jobs")
    iodepth: int = Field(16, ge=1, le=1024, description="outstanding I/Os per job")
    runtime: int = Field(5, ge=1, le=3600, description="measured seconds per job (time_based)")
    passes: int = Field(1, ge=1, le=50, description="intervals each job's runtime is read in (at least "
                        "100 ms each, fio's --status-interval), reported as one value (pass_estimate)")
    pass_estimate: PassEstimate = Field(
        "median", description="with several passes, each metric's median pass or its best (the fastest: "
        "other work only adds time, so the best pass is the platform's own cost; the quick campaign's choice)")
    ramp_time: int = Field(1, ge=0, le=600, description="seconds per job run before measuring")
    direct: bool = Field(True, description="O_DIRECT, bypassing the page cache")
    ioengine: Literal["libaio", "io_uring", "psync"] = Field(
        "libaio", description="fio ioengine; psync ignores iodepth"
    )
    cpus_allowed: str | None = Field(
        None, pattern=r"^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$",
        description="the CPUs fio runs on (fio's cpus_allowed: 0,2-3), the same on every platform. Where one "
        "CPU serves all of the disk's interrupts and the kernel has no IRQ time accounting, an I/O's "
        "completion is charged to whatever runs on that CPU: fio kept off it measures its own path only "
        "(the quick campaign's choice, from host.disk_irq_cpus)")
    jobs: tuple[JobName, ...] | None = Field(
        None, min_length=1,
        description="which of the eight jobs to run (None: all; the quick campaign runs the stablest)")

    measure: Literal["throughput", "cpu", "both"] = Field(
        "throughput", description="per job its bandwidth or IOPS, and/or its CPU time per I/O (us): "
        "the platform's storage path (syscall, filesystem, overlay, block layer) in CPU, which the "
        "disk's own speed and other work on a shared disk do not move")

    def scratch_bytes(self) -> int:
        return size_bytes(self.size)  # one file all jobs share

    @model_validator(mode="after")
    def _pass_length(self) -> FioParams:
        if self.runtime * 1000 // self.passes < 100:
            raise ValueError(f"runtime {self.runtime} s split into {self.passes} passes is under 100 ms "
                             "a pass (fix: fewer passes or a longer runtime)")
        return self

    def pass_ms(self) -> int:
        """Each pass's length: fio's status interval."""
        return self.runtime * 1000 // self.passes

    @field_validator("jobs")
    @classmethod
    def _unique(cls, v: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if v is not None and len(set(v)) != len(v):
            raise ValueError("a job is listed twice")
        return v


class Fio(Benchmark):
    """Sequential/random read/write bandwidth and IOPS on the instance's scratch storage."""

    name: ClassVar[str] = "fio"
    tool: ClassVar[str] = "fio"
    packages: ClassVar[tuple[str, ...]] = ("fio",)
    Params: ClassVar[type[Params]] = FioParams
    description: ClassVar[str] = "fio: seq/rand x read/write x bandwidth/IOPS (LSBS storage set)"
    study: ClassVar[dict[str, Any]] = {"size": "4G", "runtime": 30, "ramp_time": 5}
    """The `full` profile: LSBS: files larger than caches, longer runs."""

    params: FioParams

    def _jobs(self) -> list[tuple[str, str, str, str]]:
        return [j for j in _JOBS if self.params.jobs is None or j[0] in self.params.jobs]

    def metrics(self) -> list[Metric]:
        p = self.params
        out = []
        for job, rw, kind, _ in self._jobs():
            bs = p.bs_bandwidth if kind == "bandwidth" else p.bs_iops
            what = f"{rw}, bs={bs}, iodepth={p.iodepth}, direct={int(p.direct)}"
            if p.passes > 1:
                what += f", {'median' if p.pass_estimate == 'median' else 'best'} of {p.passes} {p.pass_ms()} ms intervals"
            if p.measure != "cpu" and kind == "bandwidth":
                out.append(Metric(job, "MiB/s", True, "storage", f"bandwidth, {what}"))
            elif p.measure != "cpu":
                out.append(Metric(job, "IOPS", True, "storage", f"operations per second, {what}"))
            if p.measure != "throughput":
                out.append(Metric(f"{job}_cpu", "us", False, "storage",
                                  f"CPU time (user + sys) per I/O, {what}", label="{unit} of CPU per I/O"))
        return out

    def command(self, workdir: str) -> list[str]:
        p = self.params
        # Options before the first --name are global; those after apply to that job only.
        argv = [
            "fio", "--output-format=json", "--eta=never",
            f"--directory={workdir}", f"--filename={_FILENAME}",
            f"--ioengine={p.ioengine}", f"--direct={int(p.direct)}",
            f"--size={p.size}", f"--iodepth={p.iodepth}",
            "--time_based=1", f"--runtime={p.runtime}", f"--ramp_time={p.ramp_time}",
        ]
        if p.passes > 1:
            argv.append(f"--status-interval={p.pass_ms()}ms")
        if p.cpus_allowed is not None:
            argv.append(f"--cpus_allowed={p.cpus_allowed}")
        for job, rw, kind, _ in self._jobs():
            bs = p.bs_bandwidth if kind == "bandwidth" else p.bs_iops
            argv += [f"--name={job}", f"--rw={rw}", f"--bs={bs}", "--stonewall"]
        return argv

    def parse(self, stdout: str, stderr: str = "", source: str = "<output>") -> dict[str, float]:
        docs = fio_json_all(stdout, source)
        jobs = {j.get("jobname"): j for j in docs[-1].get("jobs", [])}  # the last: the whole run's
        result: dict[str, float] = {}
        how = self.params.pass_estimate
        for job, _, kind, direction in self._jobs():
            data = jobs.get(job)
            if data is None:
                raise ParseError(self.tool, f"a job named {job!r} in jobs[]", source)
            if data.get("error", 1) != 0:
                raise ParseError(self.tool, f"jobs[{job}].error == 0 (got {data.get('error')})", source)
            stats = data.get(direction, {})
            value = stats.get("bw_bytes", 0) / 2**20 if kind == "bandwidth" else stats.get("iops")
            if not value or value <= 0:
                raise ParseError(self.tool, f"jobs[{job}].{direction} with I/O done", source)
            if self.params.passes == 1:
                rates = [float(value)]
                cpus = [_cpu_per_io(data, direction, job, source)] if self.params.measure != "throughput" else []
            else:
                rates, cpus = self._passes(docs, job, kind, direction, source)
            if self.params.measure != "cpu":
                result[job] = pass_value(rates, how, True)
            if self.params.measure != "throughput":
                result[f"{job}_cpu"] = pass_value(cpus, how, False)
        return result

    def _passes(self, docs: list[Any], job: str, kind: str, direction: str, source: str
                ) -> tuple[list[float], list[float]]:
        """Each interval's rate and CPU time per I/O: the differences of consecutive cumulative
        reports. An interval under half the status interval (the job's first moments, fio's timer
        late) or without I/O or CPU time yet is merged into the next (the job's last moments are
        left out); fewer than half the passes is an error. (Under load a job can answer fio's
        request for its CPU time late, so one report carries none of an interval's CPU time and
        the next twice: merging keeps each interval's I/Os and CPU time together.)"""
        points = []
        for doc in docs:
            data = next((j for j in doc.get("jobs", []) if j.get("jobname") == job), None)
            if data is not None:
                stats = data.get(direction, {})
                cpu_us = (float(data.get("usr_cpu", 0)) + float(data.get("sys_cpu", 0))) / 100 \
                    * float(data.get("job_runtime", 0)) * 1000
                points.append((float(data.get("job_runtime", 0)), float(stats.get("total_ios", 0)),
                               float(stats.get("io_bytes", 0)), cpu_us))
        # fio restarts a job's counters when it starts measuring (after laying out the file, after
        # ramp_time): only the reports from the last restart on are the measured runtime
        restarts = [i for i in range(1, len(points)) if points[i][0] < points[i - 1][0]]
        points = points[restarts[-1]:] if restarts else points
        need = max(1, self.params.passes // 2)
        if len(points) < 2 or points[-1][1] <= points[0][1]:
            raise ParseError(self.tool, f"at least {need} interval reports of job {job!r} with I/O "
                             "(--status-interval)", source)
        whole = (points[-1][3] - points[0][3]) / (points[-1][1] - points[0][1])  # CPU us per I/O over the job
        rates, cpus = [], []
        t0, n0, b0, c0 = points[0]
        for t1, n1, b1, c1 in points[1:]:
            if t1 - t0 < self.params.pass_ms() / 2 or n1 <= n0:
                continue  # too short: the next report closes it
            if self.params.measure != "throughput" and (c1 - c0) / (n1 - n0) < whole / STALE:
                continue  # the job had not yet updated its CPU time (fio asks, the job answers late): merged with the next
            seconds = (t1 - t0) / 1000
            rates.append((b1 - b0) / 2**20 / seconds if kind == "bandwidth" else (n1 - n0) / seconds)
            cpus.append((c1 - c0) / (n1 - n0))
            t0, n0, b0, c0 = t1, n1, b1, c1
        if len(rates) < need:
            raise ParseError(self.tool, f"at least {need} interval reports of job {job!r} (--status-interval), "
                             f"found {len(rates)}", source)
        return rates, cpus

    def version_command(self) -> list[str]:
        return ["fio", "--version"]

    def execution_timeout(self) -> float:
        p = self.params
        # Laying out the file is not part of runtime; allow it at a slow 20 MiB/s.
        expected = len(self._jobs()) * (p.runtime + p.ramp_time) + size_bytes(p.size) / (20 * 2**20)
        return 4.0 * expected + 60.0
