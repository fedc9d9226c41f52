"""A resident runner in each container of a density fleet: the workload without an exec per count.

Launching a count's workload with one `docker exec` per instance cost about 70 ms of CPU each
(a quarter of it the docker CLI, the rest dockerd and the shim): at 550 containers on 2 CPUs,
40 s of every count went to launches, dockerd kept every exec's record until the container was
removed, and a kept fleet failed lower than a fresh one (2026-11-30). So each container of a
fleet gets one exec in its life, which starts this runner in it; the runner waits on a FIFO in
the container's own filesystem and, for each job the host sends, runs the synchronised wrapper
(sync.SYNCED: the same body as the exec'd wrapper) and reports the tool's exit status.

The host reaches the FIFOs and files through the runner's `/proc/PID/cwd` (one kernel, so the
containers only: not a sandbox's own kernel, a VM or a pod on another node); the tools it
starts have that directory as their working directory (every benchmark names its own work
directory). The protocol:

- `argv`: the job's arguments (`DEADLINE WORKDIR TOOL ARGS...`), each as its number of lines
  and then its lines, so that any argument (a script with newlines) arrives whole, read by the
  shell's own `read` (no fork, no eval: the arguments are never parsed as shell text);
- `go` (FIFO): the host writes the job's number once `argv` is in place; a runner busy or dead
  has no reader on it, which the host's non-blocking open sees at once (ENXIO);
- `out`, `err` (FIFOs): the tool's output, read by the host as it comes (the wrapper's VBSYNC
  marker on `err`): nothing of a job is written to the container's disk;
- `done` (FIFO): the runner writes `JOB STATUS`; the host opened every read end before sending
  `go`, so the runner never waits for a reader.

What it costs the measurement: at idle one `sh` per container (the exec'd wrapper was the same
`sh` during the workload, where the density limit is reached); during the workload the same
processes as before (the runner plays the wrapper, the tool is its child). The brake kills
what was not there at idle (the tool, its wrapper's children), so the runner survives it and
reports the kill; a runner that died or timed out is killed and replaced by the next count's
preparation.
"""
from __future__ import annotations

import errno
import os
import select
import signal
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from ... import proc
from ...errors import CommandError
from ...executor import Executor
from ...platforms import cgroups
from . import sync as density_sync

RUNNER = density_sync.SYNCED + """
d=$1
cd "$d" || exit 1
echo ready > "$d/done"
while :; do
  if ! IFS= read -r job < "$d/go"; then [ -p "$d/go" ] || exit 1; continue; fi
  set --
  while IFS= read -r k; do
    a=; i=0
    while [ "$i" -lt "$k" ]; do
      IFS= read -r l
      if [ "$i" -eq 0 ]; then a=$l; else a="$a
$l"; fi
      i=$((i + 1))
    done
    set -- "$@" "$a"
  done < "$d/argv"
  synced "$@" > "$d/out" 2> "$d/err"
  echo "$job $?" > "$d/done"
done
"""
"""sh -c RUNNER vbrunner DIR: the runner's loop (DIR holds its FIFOs and files)."""

START = density_sync._NOW + """
d=$1; runner=$2
if mkdir -p "$d" && rm -f "$d/go" "$d/done" "$d/out" "$d/err" "$d/argv" && mkfifo "$d/go" "$d/done" "$d/out" "$d/err"; then
  sh -c "$runner" vbrunner "$d" </dev/null >/dev/null 2>&1 &
  echo "runner $!"
  read -r _ < "$d/done"
else
  echo "no runner: could not make its FIFOs in $d"
fi
now
"""
"""sh -c START vbstart DIR RUNNER: start the runner in the background (its output detached, so
the exec ends at once), wait until it is ready (its `ready` on `done`: from there it is a
few instructions from waiting on `go`), and print `runner PID` (the instance's PID namespace)
and the clock (`CLOCK NS`, as the rehearsal does: this exec is the instance's rehearsal)."""

NAME = "vbrunner"
PIPES = ("out", "err", "done")
"""The FIFOs the host reads: the tool's stdout and stderr, and the job's status."""
POLL_S = 1.0
"""How often a waiting host thread checks that its runner still lives."""
READY_S = 2.0
"""How long a job waits for a live runner to reach its `go` (from `ready`, a few instructions;
longer on a host starting hundreds of them)."""


def start_argv(directory: str) -> list[str]:
    return ["sh", "-c", START, "vbstart", directory, RUNNER]


def encode(args: list[str]) -> str:
    """The `argv` file: each argument as its line count, then its lines."""
    out = []
    for a in args:
        lines = a.split("\n")
        out.append(f"{len(lines)}\n")
        out.extend(f"{ln}\n" for ln in lines)
    return "".join(out)


def started_pid(stdout: str) -> int | None:
    """The runner's PID (in the instance's namespace) from the start exec's output."""
    for line in stdout.splitlines():
        kind, _, value = line.partition(" ")
        if kind == "runner" and value.strip().isdigit():
            return int(value)
    return None


def _start_time(pid: int) -> str | None:
    """The live process's start time (ticks since boot): a PID reused by another process
    differs; None for a process gone or a zombie (killed, not yet reaped by its new parent)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] in ("Z", "X") else fields[19]


def host_pid(cgroup: str, ns_pid: int) -> int | None:
    """The host PID of the instance's process `ns_pid` (its innermost PID namespace's number),
    looked for among its memory cgroup's processes."""
    for pid in cgroups.tasks(cgroup):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        nspid = next((ln.split()[1:] for ln in status.splitlines() if ln.startswith("NSpid:")), [])
        if nspid and nspid[-1] == str(ns_pid) and NAME.encode() in cmdline[:4]:
            return pid
    return None


@dataclass
class Started:
    """What one instance's start exec gave: its clock and runner, or why not."""

    clock: density_sync.Clock | None = None
    runner: Runner | None = None
    no_runner: str | None = None
    """Why the instance runs no runner although the exec worked (its launches exec instead)."""
    failure: proc.Result | None = None
    """The exec failed: that instance's workload fails at this count (a new try at the next)."""


def start(host: Executor, argv: list[str], cgroup: str | None, timeout: float) -> Started:
    """Run the start exec (`argv`: start_argv(DIR) as the platform execs it) and find the
    runner's host PID among the instance's cgroup's processes."""
    a = time.time_ns()
    try:
        r = host.run(argv, timeout=timeout, check=False)
        if r.returncode != 0:
            raise ValueError(f"exit {r.returncode}: {r.stderr.strip()[-300:]}")
        clock = density_sync.read_clock(r.stdout, a, time.time_ns(), shared_kernel=True)
    except (CommandError, ValueError) as exc:
        return Started(failure=proc.Result(argv, 1, "", f"could not start the resident runner: {exc}", 0.0))
    pid = started_pid(r.stdout)
    found = host_pid(cgroup, pid) if pid is not None and cgroup else None
    if found is not None:
        return Started(clock, Runner(found))
    why = ((r.stdout.splitlines() or ["no output"])[0] if pid is None
           else f"its runner (PID {pid} inside) was not found among its cgroup's processes")
    return Started(clock, no_runner=why)


class Gone(Exception):
    """The runner is not there to take the job (dead, or still busy with an earlier one)."""


@dataclass
class Runner:
    """The host's handle on one container's runner."""

    pid: int
    """Host PID."""
    started: str | None = None
    jobs: int = 0

    def __post_init__(self) -> None:
        if self.started is None:
            self.started = _start_time(self.pid)

    def path(self, name: str) -> str:
        """A file of its directory, reached through the runner's own working directory (the
        runner cds there): no component the container could make a symlink is resolved on the
        way, and every open refuses anything but what it expects at the end (open_fifo; argv
        a new file), so a container cannot point the host's reads or writes at a host file."""
        return f"/proc/{self.pid}/cwd/{name}"

    def alive(self) -> bool:
        return self.started is not None and _start_time(self.pid) == self.started

    def kill(self) -> None:
        if self.alive():
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def run(self, args: list[str], timeout: float) -> proc.Result:
        """Run `synced ARGS` in the container; the result as an exec's would be. Raises Gone when
        the runner did not take the job (the caller replaces it); a job taken but not reported in
        `timeout` (or a runner that died on it) is a failed result, and the runner is killed."""
        self.jobs += 1
        job = self.jobs
        t0 = time.monotonic()
        fds: dict[str, int] = {}
        try:
            tmp = self.path("argv.tmp")
            try:  # a new file, never one the container left there (a device node: written to)
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            with os.fdopen(fd, "w") as f:
                f.write(encode(args))
            os.replace(tmp, self.path("argv"))
            for name in PIPES:  # the read ends first: the runner's opens of them then never wait
                fds[name] = open_fifo(self.path(name), os.O_RDONLY | os.O_NONBLOCK)
        except OSError as exc:
            _close(fds)
            raise Gone(f"its files: {exc}") from None
        out: dict[str, bytearray] = {name: bytearray() for name in PIPES}
        try:
            go = self._go(t0 + READY_S)
            try:
                os.write(go, f"{job}\n".encode())
            finally:
                os.close(go)
            status, why = self._wait(fds, out, job, t0 + timeout)
        finally:
            _close(fds)
        seconds = time.monotonic() - t0
        if status is None:
            self.kill()
            return proc.Result(args, 1, out["out"].decode(errors="replace"),
                               f"the resident runner (host PID {self.pid}) {why}\n" + out["err"].decode(errors="replace"),
                               seconds)
        return proc.Result(args, status, out["out"].decode(errors="replace"), out["err"].decode(errors="replace"),
                           seconds)

    def _go(self, until: float) -> int:
        """The write end of `go`, once the runner waits on it (ENXIO until then)."""
        while True:
            try:
                return open_fifo(self.path("go"), os.O_WRONLY | os.O_NONBLOCK)
            except OSError as exc:
                if exc.errno != errno.ENXIO or time.monotonic() > until or not self.alive():
                    raise Gone(f"not waiting for a job ({exc.strerror})") from None
            time.sleep(0.01)

    def _wait(self, fds: dict[str, int], out: dict[str, bytearray], job: int,
              deadline: float) -> tuple[int | None, str]:
        """Read the job's output and, on `done`, its status; (None, why) when it never came.

        The tool's output streams through FIFOs as an exec's through pipes: nothing is written
        to the container's disk (a full one is the density search's own stop to find). An end
        of `out` or `err` is the job's (their last writers closed before the last job's status
        was written); an end of `done` without the line is not: a read end opened while the
        last job's writer was still open is not shielded from that writer's close (Linux marks
        a FIFO's reader to ignore hang-ups of writers it never saw only when it opens with
        none), so it is opened again, and the runner's next write waits for that reader."""
        while True:
            poller = select.poll()
            names = {fd: name for name, fd in fds.items() if fd >= 0}
            for fd in names:
                poller.register(fd, select.POLLIN | select.POLLHUP)
            for fd, _ in poller.poll(int(POLL_S * 1000)):
                name = names[fd]
                try:
                    chunk = os.read(fd, 1 << 16)
                except BlockingIOError:
                    continue
                out[name] += chunk
                if chunk:
                    continue
                os.close(fd)
                fds[name] = -1
                if name == "done":
                    try:
                        fds[name] = open_fifo(self.path("done"), os.O_RDONLY | os.O_NONBLOCK)
                    except OSError as exc:
                        return None, f"lost its done FIFO during job {job}: {exc}"
                    out[name].clear()
            for line in out["done"].decode(errors="replace").splitlines():
                got, _, status = line.partition(" ")
                if got == str(job) and status.strip().lstrip("-").isdigit():
                    for name in ("out", "err"):
                        _drain(fds[name], out[name])
                    return int(status), ""
            if not self.alive():
                return None, f"died during job {job}"
            if time.monotonic() > deadline:
                return None, f"did not report job {job} in time"


def _drain(fd: int, buf: bytearray) -> None:
    """What is left in a FIFO whose writer has closed (or holds it open idle: stop at empty)."""
    while fd >= 0:
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return
        if not chunk:
            return
        buf += chunk


def open_fifo(path: str, flags: int) -> int:
    """Open a FIFO of the runner's directory and nothing else. The container owns that
    directory: a symlink there could name a host file, and a device node it made (mknod is in
    docker's default capabilities; only its device cgroup stops it using one) would be opened
    by the host, outside that cgroup, its data read back as output or written. O_PATH opens no
    device; the node is checked on that descriptor, and the open goes to that same inode."""
    ref = os.open(path, os.O_PATH | os.O_NOFOLLOW)
    try:
        mode = os.fstat(ref).st_mode
        if stat.S_ISLNK(mode):  # what O_NOFOLLOW says of a symlink
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)
        if not stat.S_ISFIFO(mode):
            raise OSError(errno.EINVAL, "not a FIFO", path)
        return os.open(f"/proc/self/fd/{ref}", flags)
    finally:
        os.close(ref)


def _close(fds: dict[str, int]) -> None:
    for name, fd in fds.items():
        if fd >= 0:
            os.close(fd)
            fds[name] = -1
