"""A process started in the background inside an instance (a benchmark's server), stopped for real.

The runner's client for such a process is an exec command on the host (`docker exec`,
`podman exec`, `ctr tasks exec`, `runc exec`, `lxc-attach`, a guest channel). Ending that
client does not end the process inside the container: dockerd, conmon and containerd keep an
exec'd process running when its client goes away, so a stopped nginx, sockperf, iperf3 or
mariadbd server kept running (and holding its port) until the container stopped. The process
therefore starts under a fixed wrapper that writes its pid to a file inside the instance, and
stop() signals it there, with its descendants and its process group when it leads one (an
exec'd process does on the runc-based engines; under lxc-attach it does not), and SIGKILLs
what is left after the grace period. Only then is the host
client stopped and its output collected.
"""
from __future__ import annotations

import signal
import uuid
from typing import TYPE_CHECKING

from .. import proc
from ..errors import CommandError

if TYPE_CHECKING:
    from .base import Instance, Platform

PIDFILE_DIR = "/tmp"
"""Where the wrapper keeps the pid file inside the instance (exists in every image)."""

WRAPPER = 'f=$1; shift; echo "$$" >"$f" && exec "$@"'
"""Fixed script (argv as positional arguments, nothing pasted in): record the pid, become the server."""

STOP_SCRIPT = r"""f=$1 sig=$2 ticks=$3
[ -s "$f" ] || exit 0
read -r p <"$f"
rm -f "$f"
[ -e "/proc/$p" ] || exit 0  # already gone
# The server, its descendants (by parent pid) and its process group when it leads one.
pids=" $p "
grew=1
while [ "$grew" = 1 ]; do
    grew=0
    for st in /proc/[0-9]*/stat; do
        { read -r x <"$st"; } 2>/dev/null || continue  # a builtin: no fork per process
        pid=${x%% *}
        x=${x##*) }
        set -- $x  # state ppid pgrp ...
        case $pids in *" $pid "*) continue ;; esac
        if [ "$3" = "$p" ]; then pids="$pids$pid "; grew=1; continue; fi
        case $pids in *" $2 "*) pids="$pids$pid "; grew=1 ;; esac
    done
done
alive() {  # zombies (reparented to a PID 1 that never reaps) count as gone
    for pid in $pids; do
        { read -r x <"/proc/$pid/stat"; } 2>/dev/null || continue
        x=${x##*) }
        set -- $x
        if [ "$1" != Z ]; then return 0; fi
    done
    return 1
}
settle() {  # wait up to $1 tenths of a second for them to be gone
    i=0
    while [ "$i" -lt "$1" ]; do
        alive || return 0
        sleep 0.1
        i=$((i + 1))
    done
    ! alive
}
kill -s "$sig" $pids 2>/dev/null
settle "$ticks" && exit 0
kill -s KILL $pids 2>/dev/null
settle 50
"""
"""Fixed script: signal the recorded process and its own, wait up to ticks/10 s, then SIGKILL."""


class InstanceProcess:
    """A background process inside an instance: alive(), output() and stop() like
    proc.Background, but stop() ends the process inside the instance, not only its client."""

    def __init__(self, platform: Platform, instance: Instance, argv: list[str]) -> None:
        self.platform = platform
        self.instance = instance
        self.argv = argv
        self.pidfile: str | None = None
        if platform.exec_outlives_client:
            self.pidfile = f"{PIDFILE_DIR}/virtbench-bg-{uuid.uuid4().hex[:12]}.pid"
            argv = ["sh", "-c", WRAPPER, "sh", self.pidfile, *argv]
        self.client = platform.host.spawn(platform.exec_argv(instance, argv))

    def alive(self) -> bool:
        return self.client.alive()

    def output(self) -> tuple[str, str]:
        return self.client.output()

    def stop(self, grace: float = 2.0, sig: int = signal.SIGTERM) -> proc.Result:
        """Signal the process inside the instance (best effort: the instance may already be
        gone after a crash, and cleanup removes it then), then stop the client."""
        if self.pidfile is not None:
            name = signal.Signals(sig).name.removeprefix("SIG")
            ticks = str(max(1, round(grace * 10)))
            try:
                self.platform.exec(self.instance, ["sh", "-c", STOP_SCRIPT, "sh", self.pidfile, name, ticks],
                                   timeout=grace + 30, check=False)
            except CommandError:
                pass
        return self.client.stop(grace=grace, sig=sig)
