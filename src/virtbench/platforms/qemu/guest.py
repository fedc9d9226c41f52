"""The control channel into a VM: a tiny agent in the guest, a client on the host.

The guest image has no interpreter the harness may rely on, so the agent (images/agent.py) is
a bash script the VM disk carries at /usr/local/sbin/vb-agent; the guest's init starts it
on a virtio-serial port, which QEMU exposes on the host as a unix socket. The host side is
this module run as a program, so the platform keeps building argv lists that proc.run runs:

    python -m virtbench.platforms.qemu.guest exec --socket S [--timeout T | --wait W] [--stdin]
                                             [--env K=V ...] -- argv...
        runs argv in the guest; writes its stdout/stderr to ours, exits with its status
    python -m virtbench.platforms.qemu.guest qmp --socket S COMMAND [JSON-ARGS]
        one QMP command (quit, query-status...); prints the reply as JSON

Protocol: one line each way, nothing else on the wire.

    request  Q <id> <timeout> <stdin> <nenv> <env tokens> <argv tokens>\\n
    reply    R <id> <status> <stdout> <stderr>\\n

id: 16 random hex digits. timeout: seconds (0: none); the agent runs the command under
`timeout -k 5 T`, so a timed-out command and its children die in the guest (status 124).
stdin: '-' (/dev/null), '=' (empty) or base64. nenv: number of K=V tokens that form the
command's whole environment ('-': the agent's own, which the guest init sets to EXEC_ENV).
Tokens are 'x' + the bytes with everything outside a safe set written as \\xHH, which bash
decodes with its builtin `printf %b` (a fork costs ~0.1 s under TCG emulation). status: exit
status, 128+N when killed by signal N. stdout/stderr: base64 (empty field: no output).

The agent runs one command at a time; the client holds an exclusive lock on SOCKET.lock for
the whole call, so concurrent callers queue instead of interleaving. A virtio port blocks
the guest's writes while no host client is connected, so a reply to a client that gave up is
delivered to the next client first: replies carry the request id and anything else is
skipped. When QEMU exits the socket closes and the client fails at once.

The client's own failures exit with CLIENT_ERROR (channel broken) or TIMED_OUT, with a
stderr line starting with MARK, so callers can tell them from the command's own statuses.
"""
from __future__ import annotations

import argparse
import base64
import errno
import fcntl
import json
import os
import secrets
import socket
import sys
import time
from collections.abc import Sequence

from ...images.agent import AGENT_PATH, PORT_NAME  # noqa: F401 - the protocol's names, used by callers

MARK = "virtbench-guest:"
CLIENT_ERROR = 255
TIMED_OUT = 124
GRACE = 15.0
"""Seconds the host waits beyond the guest-side timeout (which kills after TERM + 5 s)."""


class ChannelError(Exception):
    """The channel failed (no QEMU, connection closed, bad reply); not the guest command."""


class ChannelTimeout(ChannelError):
    pass


# -- framing (pure, unit tested) -----------------------------------------------------------
SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./,:=+@%^-")


def escape(arg: str | bytes) -> str:
    """One argument as a token the agent decodes with bash's builtin `printf %b` (no fork):
    'x' (so no token is empty) + the bytes, all but a safe set written as \\xHH."""
    b = arg.encode("utf-8", "surrogateescape") if isinstance(arg, str) else bytes(arg)
    if b"\0" in b:
        raise ValueError(f"an argument contains a NUL byte: {b[:40]!r}")
    return "x" + "".join(chr(c) if c in SAFE else f"\\x{c:02x}" for c in b)


def unescape(token: str) -> bytes:
    """What `printf %b` makes of a token (for tests and decode_request)."""
    if not token.startswith("x"):
        raise ValueError(f"bad token {token[:20]!r}")
    out, i, t = bytearray(), 1, token
    while i < len(t):
        if t[i] == "\\":
            if t[i + 1:i + 2] != "x" or len(t) < i + 4:
                raise ValueError(f"bad escape in {t[:40]!r}")
            out.append(int(t[i + 2:i + 4], 16))
            i += 4
        else:
            out.append(ord(t[i]))
            i += 1
    return bytes(out)


def encode_request(req_id: str, argv: Sequence[str | bytes], timeout: float | None = None,
                   stdin: bytes | None = None, env: dict[str, str] | None = None) -> bytes:
    """Q <id> <timeout> <stdin> <nenv> <env tokens...> <argv tokens...>

    timeout: seconds, 0 = none; stdin: '-' none (/dev/null), '=' empty, else base64;
    nenv: how many env tokens (K=V) follow, '-' = keep the agent's environment."""
    if not argv:
        raise ValueError("empty argv")
    if not req_id or any(c not in "0123456789abcdef" for c in req_id) or len(req_id) > 32:
        raise ValueError(f"bad request id {req_id!r}")
    t = "0" if not timeout else _seconds(timeout)
    inp = "-" if stdin is None else "=" if not stdin else base64.b64encode(stdin).decode()
    envs = [] if env is None else [f"{k}={v}" for k, v in env.items()]
    for e in envs:
        if not e.split("=", 1)[0].replace("_", "a").isalnum() or e[0].isdigit():
            raise ValueError(f"bad environment variable name in {e!r}")
    nenv = "-" if env is None else str(len(envs))
    tokens = " ".join(escape(a) for a in [*envs, *argv])
    return f"Q {req_id} {t} {inp} {nenv} {tokens}\n".encode()


def _seconds(timeout: float) -> str:
    """Timeout as the guest's `timeout` reads it: whole or fractional seconds, never 0."""
    return f"{max(timeout, 0.001):.3f}".rstrip("0").rstrip(".")


def decode_request(line: bytes) -> tuple[str, list[bytes], float, bytes | None, dict[str, str] | None]:
    """The agent's reading of a request, in Python: tests check both ends agree."""
    f = line.rstrip(b"\n").decode("ascii").split()
    if len(f) < 6 or f[0] != "Q":
        raise ValueError(f"not a request: {line[:80]!r}")
    stdin = None if f[3] == "-" else b"" if f[3] == "=" else base64.b64decode(f[3], validate=True)
    nenv = 0 if f[4] == "-" else int(f[4])
    values = [unescape(t) for t in f[5:]]
    env = None if f[4] == "-" else dict(v.decode().split("=", 1) for v in values[:nenv])
    argv = values[nenv:]
    if not argv:
        raise ValueError("no command")
    return f[1], argv, float(f[2]), stdin, env


def encode_reply(req_id: str, status: int, stdout: bytes, stderr: bytes) -> bytes:
    return (f"R {req_id} {status} ".encode() + base64.b64encode(stdout) + b" "
            + base64.b64encode(stderr) + b"\n")


def parse_reply(line: bytes, req_id: str) -> tuple[int, bytes, bytes] | None:
    """(status, stdout, stderr) if line is the reply to req_id; None for anything else
    (a stale reply to an earlier client, or the tail of one cut off by a disconnect)."""
    prefix = f"R {req_id} ".encode()
    if not line.startswith(prefix):
        return None
    parts = line.rstrip(b"\n").split(b" ")
    if len(parts) != 5:
        raise ChannelError(f"malformed reply to {req_id}: {line[:120]!r}")
    try:
        return (int(parts[2]), base64.b64decode(parts[3], validate=True),
                base64.b64decode(parts[4], validate=True))
    except ValueError as exc:
        raise ChannelError(f"malformed reply to {req_id}: {exc}") from None


# -- host side ------------------------------------------------------------------------------
class _Lock:
    """flock on SOCKET.lock: one call at a time per VM, waiting at most until deadline."""

    def __init__(self, path: str, deadline: float | None) -> None:
        self.path, self.deadline = path, deadline
        self.fd: int | None = None

    def __enter__(self) -> _Lock:
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return self
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
            if self.deadline is not None and time.monotonic() >= self.deadline:
                os.close(self.fd)
                raise ChannelTimeout("another command held the VM's channel until the deadline")
            time.sleep(0.005)

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)  # releases the flock


def call(sock_path: str, argv: Sequence[str | bytes], *, timeout: float | None = None,
         wait: float | None = None, stdin: bytes | None = None,
         env: dict[str, str] | None = None) -> tuple[int, bytes, bytes]:
    """Run argv in the guest; (status, stdout, stderr). Raises ChannelError/ChannelTimeout.

    timeout: the guest kills the command after it; the host waits GRACE longer.
    wait: only the host's patience (the guest command is not limited), e.g. until it boots."""
    limit = wait if wait is not None else None if timeout is None else timeout + GRACE
    deadline = None if limit is None else time.monotonic() + limit
    req_id = secrets.token_hex(8)
    request = encode_request(req_id, argv, timeout, stdin, env)
    with _Lock(sock_path + ".lock", deadline):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            try:
                s.connect(sock_path)
            except OSError as exc:
                raise ChannelError(f"cannot connect to the VM's agent socket {sock_path}: "
                                   f"{exc.strerror or exc} (is the VM running?)") from None
            s.sendall(request)
            buf = bytearray()
            while True:
                if deadline is not None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise ChannelTimeout(f"no reply from the guest agent within {limit:g} s")
                    s.settimeout(left)
                try:
                    chunk = s.recv(1 << 20)
                except TimeoutError:
                    continue
                if not chunk:
                    raise ChannelError("the VM closed the agent channel (guest powered off or "
                                       "crashed, or QEMU exited)")
                start = len(buf)
                buf += chunk
                if buf.find(b"\n", start) < 0:
                    continue
                while (nl := buf.find(b"\n")) >= 0:
                    line = bytes(buf[:nl + 1])
                    del buf[:nl + 1]
                    got = parse_reply(line, req_id)
                    if got is not None:
                        return got
        finally:
            s.close()


def qmp(sock_path: str, command: str, arguments: dict | None = None, timeout: float = 10.0) -> dict:
    """One QMP command; returns its "return" member (raises with QEMU's error)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(sock_path)
        f = s.makefile("rwb")

        def reply() -> dict:
            while True:
                line = f.readline()
                if not line:
                    if command == "quit":
                        return {"return": {}}
                    raise ChannelError("QMP connection closed")
                msg = json.loads(line)
                if "return" in msg or "error" in msg:
                    return msg

        greeting = json.loads(f.readline() or b"{}")
        if "QMP" not in greeting:
            raise ChannelError(f"not a QMP socket: {greeting}")
        msg: dict = {}
        for cmd, args in (("qmp_capabilities", None), (command, arguments)):
            f.write(json.dumps({"execute": cmd, **({"arguments": args} if args else {})}).encode() + b"\n")
            f.flush()
            msg = reply()
            if "error" in msg:
                raise ChannelError(f"QMP {cmd}: {msg['error'].get('desc', msg['error'])}")
        return msg.get("return", {})
    except OSError as exc:
        raise ChannelError(f"QMP {command} on {sock_path}: {exc}") from None
    finally:
        s.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m virtbench.platforms.qemu.guest")
    sub = parser.add_subparsers(dest="cmd", required=True)
    ex = sub.add_parser("exec", help="run a command in the guest")
    ex.add_argument("--socket", required=True)
    limit = ex.add_mutually_exclusive_group()
    limit.add_argument("--timeout", type=float, default=None,
                       help="seconds; the guest kills the command after it (status 124)")
    limit.add_argument("--wait", type=float, default=None,
                       help="seconds the host waits for a reply; the guest command is not limited")
    ex.add_argument("--stdin", action="store_true", help="send our stdin to the command")
    ex.add_argument("--env", action="append", default=None, metavar="K=V",
                    help="the command's whole environment (repeat); default: the agent's")
    ex.add_argument("argv", nargs=argparse.REMAINDER)
    q = sub.add_parser("qmp", help="one QMP command")
    q.add_argument("--socket", required=True)
    q.add_argument("--timeout", type=float, default=10.0)
    q.add_argument("command")
    q.add_argument("arguments", nargs="?", default=None, help="JSON object")
    args = parser.parse_args(argv)

    if args.cmd == "qmp":
        try:
            answer = qmp(args.socket, args.command, json.loads(args.arguments) if args.arguments else None,
                      args.timeout)
        except (ChannelError, ValueError) as exc:
            print(f"{MARK} {exc}", file=sys.stderr)
            return CLIENT_ERROR
        print(json.dumps(answer))
        return 0

    command = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if not command:
        parser.error("no command given")
    env = None if args.env is None else dict(e.split("=", 1) for e in args.env)
    stdin = sys.stdin.buffer.read() if args.stdin else None
    started = time.monotonic()
    try:
        status, out, err = call(args.socket, [os.fsencode(a) for a in command], timeout=args.timeout,
                                wait=args.wait, stdin=stdin, env=env)
    except ChannelTimeout as exc:
        print(f"{MARK} timed out: {exc}", file=sys.stderr)
        return TIMED_OUT
    except (ChannelError, ValueError) as exc:
        print(f"{MARK} {exc}", file=sys.stderr)
        return CLIENT_ERROR
    for stream, data in ((sys.stdout.buffer, out), (sys.stderr.buffer, err)):
        stream.write(data)
        stream.flush()
    if (status == TIMED_OUT and args.timeout is not None
            and time.monotonic() - started >= args.timeout * 0.999):
        print(f"{MARK} timed out: the guest killed the command after {args.timeout:g} s",
              file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
