"""The SSH transport against a real sshd in a network namespace (tests/hostsupport/netns_host.py)."""
from __future__ import annotations

import time

import pytest

from hostsupport.netns_host import netns_host
from virtbench.errors import InputError
from virtbench.remote.ssh import HostUnreachable, SSHExecutor

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def nshost():
    with netns_host() as host:
        yield host


def test_runs_argv_there_verbatim_and_in_the_namespace(nshost, tmp_path):
    with SSHExecutor(nshost.spec, tmp_path) as ex:
        res = ex.run(["sh", "-c", 'printf "%s|" "$@"; ip -br -4 addr', "sh", "a b", "$HOME", "x;y"])
        assert res.stdout.startswith("a b|$HOME|x;y|")
        assert nshost.ns_ip in res.stdout  # it ran inside the namespace, not here
        assert ex.run(["false"], check=False).returncode == 1
        assert ex.run(["cat"], input="through stdin").stdout == "through stdin"


def test_spawn_stops_the_remote_process(nshost, tmp_path):
    with SSHExecutor(nshost.spec, tmp_path) as ex:
        bg = ex.spawn(["sh", "-c", "echo started; exec sleep 300"])
        deadline = time.monotonic() + 10
        while "started" not in bg.output()[0] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert nshost.pids("sleep")
        assert bg.stop().stdout == "started\n"
        deadline = time.monotonic() + 10
        while nshost.pids("sleep") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not nshost.pids("sleep")


def test_unknown_and_changed_host_keys_are_refused(nshost, tmp_path):
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    with pytest.raises(InputError) as exc:
        SSHExecutor(nshost.spec.model_copy(update={"known_hosts": str(empty)}), tmp_path).open()
    assert f"host {nshost.spec.name}" in exc.value.message and "not in" in exc.value.message
    other = tmp_path / "other_known_hosts"
    # another host's key for this address: a man in the middle, or a reinstalled host
    other.write_text(f"{nshost.ns_ip} ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHBhlgWW2EALG6qM8qAFkGHfQaEJW35AK3N2E8I1Kt3n\n")
    with pytest.raises(InputError) as exc:
        SSHExecutor(nshost.spec.model_copy(update={"known_hosts": str(other)}), tmp_path).open()
    assert "does not match" in exc.value.message


def test_unreachable_and_lost_hosts(nshost, tmp_path):
    with pytest.raises(InputError, match="unreachable"):
        SSHExecutor(nshost.spec.model_copy(update={"port": 2}), tmp_path).open()
    ex = SSHExecutor(nshost.spec, tmp_path)
    ex.open()
    try:
        nshost.kill_sshd()
        with pytest.raises(HostUnreachable, match=nshost.spec.name):
            ex.run(["true"])
    finally:
        ex.close()
        nshost.start_sshd()


def test_a_host_that_cannot_take_part_refuses_the_campaign(nshost, env, tmp_path):
    """Unreachable (wrong port) or unknown host key: one line naming the host, exit 2, no run stored."""
    import subprocess
    import sys

    import yaml

    empty = tmp_path / "known_hosts"
    empty.write_text("")
    for change, words in (({"port": 2}, "unreachable"), ({"known_hosts": str(empty)}, "host key is not in")):
        spec = nshost.spec.model_copy(update=change).model_dump(exclude_none=True)
        path = tmp_path / "c.yaml"
        path.write_text(yaml.safe_dump({"name": "refused", "hosts": ["local", spec], "platforms": ["native"],
                                        "benchmarks": ["openssl"]}))
        res = subprocess.run([sys.executable, "-m", "virtbench", "run", str(path)], env=env, capture_output=True,
                             text=True, timeout=300)
        assert res.returncode == 2, res.stdout + res.stderr
        first = res.stderr.strip().splitlines()[0]
        assert first.startswith(f"error: host {nshost.spec.name} (") and words in first, res.stderr
        runs = subprocess.run([sys.executable, "-m", "virtbench", "runs"], env=env, capture_output=True, text=True)
        assert "refused" not in runs.stdout
