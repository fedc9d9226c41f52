"""Commands on another machine over the system's OpenSSH: an `executor.Executor`.

OpenSSH rather than a Python SSH library: it is what users' hosts already trust (their
~/.ssh/config, agents, jump hosts and known_hosts work unchanged), and it multiplexes every
command of a run over one authenticated connection (ControlMaster), which keeps the per-command
cost at a few milliseconds. Host keys are verified (StrictHostKeyChecking=yes, never added),
nothing prompts (BatchMode=yes), no credential is stored. Every ssh call goes through
`virtbench.proc`, argv lists only: the remote argv is quoted element by element (shlex.join),
so an argument reaches the remote program as exactly one argument.
"""
from __future__ import annotations

import hashlib
import os
import shlex
import stat
import tempfile
from pathlib import Path

from .. import proc
from ..errors import CommandError, InputError, VirtbenchError
from .inventory import HostSpec

SSH = "ssh"
CONNECT_TIMEOUT = 10
ALIVE_INTERVAL = 15
ALIVE_COUNT = 8
"""A silent host is given up after about ALIVE_INTERVAL * ALIVE_COUNT seconds (2 min); a host
that goes down or whose sshd dies closes the connection and is noticed at once. 15 s (5 x 3)
lost an emulated arm64 board in a CI run: its sshd fell silent while the guest wrote the
329 MiB image it had just been sent and started the agent under TCG; a Pi writing to its SD
card stalls the same way."""
PERSIST = 120
"""Seconds the shared connection outlives its last session."""
UNREACHABLE = 255
"""ssh's own exit status when the connection failed or broke (the remote command's is passed on)."""


class HostUnreachable(VirtbenchError):
    """The SSH connection to a host failed or broke mid-command."""


class SSHExecutor:
    """Runs argv lists on `spec`'s host; `open()` first (checks and starts the shared connection),
    `close()` at the end. Commands run as root: directly, or through `sudo -n` when the
    inventory's user is not root and may sudo without a password."""

    def __init__(self, spec: HostSpec, runtime_dir: Path) -> None:
        if spec.is_local:
            raise ValueError("the local host runs commands with executor.HostExecutor, not over SSH")
        self.spec = spec
        self.sudo: list[str] = []
        self.control = _control_path(runtime_dir, spec)
        self._open = False

    # -- the argv of one ssh invocation ------------------------------------------------------
    def options(self) -> list[str]:
        """`-o`/`-i` options shared by every ssh call and by scp (which spells port and user its own way)."""
        s = self.spec
        known = s.known_hosts or str(Path("~/.ssh/known_hosts").expanduser())
        opts = ["-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={known}",
                "-o", "GlobalKnownHostsFile=/dev/null", "-o", f"ConnectTimeout={CONNECT_TIMEOUT}",
                "-o", f"ServerAliveInterval={ALIVE_INTERVAL}", "-o", f"ServerAliveCountMax={ALIVE_COUNT}",
                "-o", f"ControlPath={self.control}", "-o", "LogLevel=ERROR", "-o", f"Port={s.port}",
                "-o", f"User={s.user}"]
        if s.key:
            opts += ["-i", str(Path(s.key).expanduser()), "-o", "IdentitiesOnly=yes"]
        return opts

    def ssh_argv(self, argv: list[str], *, tty: bool = False) -> list[str]:
        """The local argv that runs `argv` there (quoted for the remote shell, one word each)."""
        if not argv:
            raise ValueError("empty argv")
        # "--" before the destination: an address is never an option, and what follows is the command
        return [SSH, *self.options(), "-o", "ControlMaster=no", *(["-tt"] if tty else ["-T"]),
                "--", self.spec.address, shlex.join([*self.sudo, *map(str, argv)])]

    # -- Executor -----------------------------------------------------------------------------
    def run(self, argv: list[str], *, timeout: float | None = proc.DEFAULT_TIMEOUT,
            check: bool = True, input: str | None = None,
            detached_children: bool = False) -> proc.Result:
        """Run argv there. A broken connection raises HostUnreachable (not a tool failure)."""
        try:
            result = proc.run(self.ssh_argv(argv), timeout=timeout, check=check, input=input,
                              detached_children=detached_children)
        except CommandError as exc:
            if exc.returncode == UNREACHABLE and not self.alive():
                raise HostUnreachable(f"host {self.spec.name} ({self.spec.address}) unreachable: "
                                      f"{_tail(exc.stderr)}") from None
            raise
        if result.returncode == UNREACHABLE and not self.alive():
            raise HostUnreachable(f"host {self.spec.name} ({self.spec.address}) unreachable: {_tail(result.stderr)}")
        return result

    def spawn(self, argv: list[str]) -> proc.Background:
        """Start argv there in the background; stop() ends the ssh session, and the remote
        process with it (a pseudo-terminal, so the remote side gets SIGHUP)."""
        return _TtyBackground(self.ssh_argv(argv, tty=True))

    # -- the shared connection ----------------------------------------------------------------
    def open(self) -> None:
        """Connect once (the ControlMaster every later command reuses), and check root.

        Errors name the host and the fix: unknown or changed host key, refused key,
        unreachable address, no root and no passwordless sudo."""
        if self._open:
            return
        private_dir(self.control.parent)
        # ControlPersist bounded: if the controller dies (kill -9) the shared connection ends on
        # its own once no session uses it, and the host's sshd with it
        master = [SSH, *self.options(), "-o", "ControlMaster=yes", "-o", f"ControlPersist={PERSIST}",
                  "-f", "-N", "--", self.spec.address]
        res = proc.run(master, timeout=CONNECT_TIMEOUT + 20, check=False, detached_children=True)
        if not res.ok:
            raise connect_error(self.spec, res.stderr)
        self._open = True
        who = self.run(["id", "-u"], timeout=30, check=False)
        if who.stdout.strip() != "0":
            if self.run(["sudo", "-n", "true"], timeout=30, check=False).ok:
                self.sudo = ["sudo", "-n", "--"]
            else:
                self.close()
                raise InputError(f"host {self.spec.name}: user {self.spec.user} is not root and cannot sudo "
                                 "without a password",
                                 f"connect as root (user: root) or allow {self.spec.user} passwordless sudo there")

    def alive(self) -> bool:
        """Whether the shared connection still stands (ssh -O check)."""
        if not self._open:
            return False
        res = proc.run([SSH, *self.options(), "-O", "check", "--", self.spec.address], timeout=15, check=False)
        return res.ok

    def close(self) -> None:
        """End the shared connection (and every session on it)."""
        if self.control.exists():
            proc.run([SSH, *self.options(), "-O", "exit", "--", self.spec.address], timeout=15, check=False)
        self._open = False

    def __enter__(self) -> SSHExecutor:
        self.open()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def connect_error(spec: HostSpec, stderr: str) -> InputError:
    """ssh's complaint -> one line naming the host and what to do."""
    where = f"host {spec.name} ({spec.user}@{spec.address}:{spec.port})"
    known = spec.known_hosts or "~/.ssh/known_hosts"
    text = stderr.lower()
    if "remote host identification has changed" in text or "host key for" in text and "has changed" in text:
        return InputError(f"{where}: its host key does not match the one in {known}",
                          f"if the host was reinstalled, check its new key and replace the line "
                          f"(ssh-keygen -R '[{spec.address}]:{spec.port}' -f {known})")
    if "host key verification failed" in text or "no host key is known" in text:
        return InputError(f"{where}: its host key is not in {known}",
                          f"verify the host's key fingerprint, then add it: "
                          f"ssh-keyscan -p {spec.port} {spec.address} >> {known}")
    if "permission denied" in text:
        return InputError(f"{where}: the key was refused",
                          "install your public key in that user's ~/.ssh/authorized_keys, or set key: in the host entry")
    if "could not resolve" in text or "name or service not known" in text:
        return InputError(f"{where}: unknown host name", "fix address: in the host entry")
    return InputError(f"{where}: unreachable ({_tail(stderr) or 'ssh failed'})",
                      "check that the host is up, sshd runs and the address and port are right")


def _tail(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return " | ".join(lines[-2:])


SHORT_RUNTIME = Path("/run/virtbench")
"""Where control sockets go when the runtime directory's path is too long for a socket (root)."""


def _control_path(runtime_dir: Path, spec: HostSpec) -> Path:
    """One socket per host; short (a Unix socket path is limited to 108 bytes)."""
    digest = hashlib.sha256(f"{spec.user}@{spec.address}:{spec.port}".encode()).hexdigest()[:12]
    path = runtime_dir / "ssh" / f"{digest}.sock"
    if len(str(path)) > 100:
        base = SHORT_RUNTIME if os.geteuid() == 0 else Path(os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir())
        path = base / f"vbssh-{os.geteuid()}" / f"{digest}.sock"
    return path


def private_dir(path: Path) -> None:
    """Create `path` (mode 0700) or check that it is ours: a directory another user made first
    (in /tmp, say) or may write to could hold a socket that is not our connection."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        pass
    st = os.lstat(path)
    why = ("is not a directory" if not stat.S_ISDIR(st.st_mode) else
           f"belongs to uid {st.st_uid}, not {os.geteuid()}" if st.st_uid != os.geteuid() else
           f"has mode {stat.S_IMODE(st.st_mode):04o}, not 0700" if st.st_mode & 0o077 else "")
    if why:
        raise InputError(f"the SSH control directory {path} {why}: it is not private to this user",
                         f"remove it (rm -r {path}); virtbench creates it again, mode 0700")


class _TtyBackground(proc.Background):
    """A remote background command: its output comes through a pseudo-terminal, so line ends
    read \\r\\n; they are given back as \\n, the way the command printed them."""

    def output(self) -> tuple[str, str]:
        out, err = super().output()
        return out.replace("\r\n", "\n"), err.replace("\r\n", "\n")
