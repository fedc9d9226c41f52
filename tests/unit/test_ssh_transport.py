"""The SSH transport's argv and its error lines (the real connections: tests/integration/test_hosts_ssh.py)."""
from __future__ import annotations

import shlex
from pathlib import Path

from virtbench.executor import Executor
from virtbench.hosts.inventory import HostSpec
from virtbench.hosts.ssh import SSHExecutor, connect_error

SPEC = HostSpec(name="b", address="192.0.2.5", port=2222, key="/k/id", known_hosts="/k/known")


def test_is_an_executor_with_verified_host_keys_and_no_prompts():
    ex = SSHExecutor(SPEC, Path("/run/vb"))
    assert isinstance(ex, Executor)
    argv = ex.ssh_argv(["echo", "a b", "$HOME", "x;y"])
    joined = " ".join(argv)
    for opt in ("BatchMode=yes", "StrictHostKeyChecking=yes", "UserKnownHostsFile=/k/known", "ControlMaster=no"):
        assert opt in joined
    assert "Port=2222" in argv and "User=root" in argv and argv[argv.index("-i") + 1] == "/k/id"
    # the remote shell splits the last word back into exactly the argv given, nothing expanded
    assert argv[-2] == "--" and shlex.split(argv[-1]) == ["echo", "a b", "$HOME", "x;y"]


def test_control_socket_per_host_and_short():
    a = SSHExecutor(SPEC, Path("/run/vb"))
    b = SSHExecutor(SPEC.model_copy(update={"address": "192.0.2.6"}), Path("/run/vb"))
    assert a.control != b.control and a.control.parent == Path("/run/vb/ssh")
    long = SSHExecutor(SPEC, Path("/run/" + "x" * 120))
    assert len(str(long.control)) <= 100


def test_connect_errors_name_host_and_fix():
    e = connect_error(SPEC, "@@@ WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED! @@@\nHost key verification failed.")
    assert "host b (root@192.0.2.5:2222)" in e.message and "does not match" in e.message
    assert "ssh-keygen -R" in (e.fix or "")
    e = connect_error(SPEC, "No ED25519 host key is known for [192.0.2.5]:2222 and you have requested strict "
                            "checking.\nHost key verification failed.")
    assert "not in /k/known" in e.message and "ssh-keyscan -p 2222 192.0.2.5" in (e.fix or "")
    assert "key was refused" in connect_error(SPEC, "root@192.0.2.5: Permission denied (publickey).").message
    e = connect_error(SPEC, "ssh: connect to host 192.0.2.5 port 2222: Connection refused")
    assert "unreachable (ssh: connect to host 192.0.2.5 port 2222: Connection refused)" in e.message
    assert e.exit_code == 2
