"""The SSH transport's argv and its error lines (the real connections: tests/integration/test_hosts_ssh.py)."""
from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest
from pydantic import ValidationError

from virtbench import proc
from virtbench.errors import InputError
from virtbench.executor import Executor
from virtbench.remote.inventory import HostSpec
from virtbench.remote.ssh import SSHExecutor, connect_error

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
    assert argv[-3:-1] == ["--", "192.0.2.5"] and shlex.split(argv[-1]) == ["echo", "a b", "$HOME", "x;y"]


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


# -- untrusted input (issue 25) --------------------------------------------------------------------
@pytest.mark.parametrize("field, value", [
    ("address", "-Jevil.example"), ("address", "-oProxyCommand"), ("address", "a b"), ("address", "a\nb"),
    ("key", "-oProxyCommand=x"), ("known_hosts", "/k/known /tmp/other"), ("known_hosts", "/k/k\nProxyCommand x"),
    ("work_dir", "/srv/$(reboot)"), ("work_dir", "/srv/a b"),
])
def test_values_that_would_be_options_or_shell_words_are_refused(field, value):
    with pytest.raises(ValidationError) as exc:
        HostSpec(name="b", **{field: value})
    assert value not in str(exc.value.errors()[0]["msg"])


def _recorded(monkeypatch) -> list[list[str]]:
    calls: list[list[str]] = []

    def run(argv, **_kw):
        calls.append(list(argv))
        return proc.Result(list(argv), 0, "0\n", "", 0.0)

    monkeypatch.setattr(proc, "run", run)
    return calls


def test_the_destination_follows_a_double_dash_in_every_ssh_call(monkeypatch, tmp_path):
    calls = _recorded(monkeypatch)
    ex = SSHExecutor(SPEC, tmp_path)
    ex.open()
    ex.alive()
    ex.control.touch()
    ex.close()
    assert len(calls) >= 4
    for argv in calls:
        assert argv[argv.index("192.0.2.5") - 1] == "--", argv


@pytest.mark.parametrize("owner, mode", [(65534, 0o700), (None, 0o755), (None, 0o1777)])
def test_a_control_directory_not_private_to_us_is_refused(monkeypatch, tmp_path, owner, mode):
    calls = _recorded(monkeypatch)
    (tmp_path / "ssh").mkdir()
    (tmp_path / "ssh").chmod(mode)
    if owner is not None:
        os.chown(tmp_path / "ssh", owner, owner)
    with pytest.raises(InputError) as exc:
        SSHExecutor(SPEC, tmp_path).open()
    assert "not private" in exc.value.message and not calls


def test_the_short_control_path_is_not_in_a_shared_temporary_directory(monkeypatch, tmp_path):
    import tempfile

    ex = SSHExecutor(SPEC, Path("/run/" + "x" * 120))
    assert not str(ex.control).startswith(tempfile.gettempdir() + "/")
    monkeypatch.setattr("virtbench.remote.ssh.SHORT_RUNTIME", tmp_path)
    squatted = tmp_path / f"vbssh-{os.geteuid()}"
    squatted.mkdir(mode=0o777)
    squatted.chmod(0o777)
    calls = _recorded(monkeypatch)
    with pytest.raises(InputError, match="not private"):
        SSHExecutor(SPEC, Path("/run/" + "x" * 120)).open()
    assert not calls
