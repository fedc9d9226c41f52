"""Shipping's choices for a host's platform (#20): which wheel is the pinned one, when the
host's Debian package stands in for numpy/scipy, and how the report says what was done."""
from __future__ import annotations

from pathlib import Path

import pytest

from virtbench.errors import InputError
from virtbench.remote import ship, wheelbuild
from virtbench.report.hosts import _shipped


def test_a_cached_wheel_counts_only_for_its_exact_version(tmp_path: Path):
    (tmp_path / "PyYAML-6.0.2-cp311-cp311-manylinux_2_17_aarch64.whl").write_bytes(b"")
    assert ship._cached_wheel(tmp_path, "PyYAML==6.0.3") is None
    (tmp_path / "pyyaml-6.0.3-cp311-cp311-manylinux_2_17_aarch64.whl").write_bytes(b"")
    assert ship._cached_wheel(tmp_path, "PyYAML==6.0.3").name.startswith("pyyaml-6.0.3")
    (tmp_path / "typing_extensions-4.16.0-py3-none-any.whl").write_bytes(b"")
    assert ship._cached_wheel(tmp_path, "typing-extensions==4.16.0") is not None


def test_the_hosts_debian_numpy_stands_in_when_new_enough():
    assert ship._system_package("numpy", "numpy==2.4.6", "armv7l", "1.24.2") == "1.24.2"
    with pytest.raises(InputError) as old:
        ship._system_package("scipy", "scipy==1.17.1", "armv7l", "1.6.0")
    assert "python3-scipy is 1.6.0" in old.value.message
    with pytest.raises(InputError) as missing:
        ship._system_package("numpy", "numpy==2.4.6", "armv7l", None)
    assert "no wheel for armv7l" in missing.value.message and "python3-numpy python3-scipy" in missing.value.fix


def test_sdist_names_match_their_pinned_version_only():
    assert wheelbuild._matches("hdrhistogram-0.10.8.tar.gz", "hdrhistogram==0.10.8")
    assert wheelbuild._matches("pyyaml-6.0.3.tar.gz", "PyYAML==6.0.3")
    assert not wheelbuild._matches("pyyaml-6.0.30.tar.gz", "PyYAML==6.0.3")
    assert not wheelbuild._matches("hdrhistogram-0.10.8-cp311-cp311-linux_aarch64.whl", "hdrhistogram==0.10.8")


def test_a_python_no_debian_release_has_is_refused_before_any_download(tmp_path: Path):
    with pytest.raises(InputError) as exc:
        wheelbuild.build_wheels(["hdrhistogram==0.10.8"], "arm64", "3.10", tmp_path)
    assert "Python 3.10" in exc.value.message
    assert not any(tmp_path.iterdir())


def test_the_wheel_cache_is_named_by_sdist_hash_arch_and_python(tmp_path: Path):
    assert wheelbuild.cache_dir(tmp_path, "ab" * 32, "armhf", "3.11").name == "abababababababab-cp311-armhf"


def test_the_report_says_what_was_built_and_what_the_host_had():
    s = ship.Shipment(sent=[{"what": "dependency wheel", "file": "x.whl", "bytes": 3 << 20}],
                      built=[{"requirement": "hdrhistogram==0.10.8", "wheel": "h.whl", "sdist_sha256": "0",
                              "how": "built"}], system={"numpy": "1.24.2"})
    text = _shipped(s.public())
    assert text.startswith("3.0 MiB in 1 files sent, 0 present")
    assert "built from sdists: hdrhistogram" in text and "the host's Debian python3-numpy 1.24.2" in text


def test_scp_takes_every_file_after_a_double_dash(monkeypatch, tmp_path: Path):
    """A file name is never an scp option (issue 25): `--` ends them before the sources."""
    import shlex

    from virtbench import proc
    from virtbench.remote.inventory import HostSpec
    from virtbench.remote.ssh import SSHExecutor

    calls: list[list[str]] = []
    monkeypatch.setattr(proc, "run", lambda argv, **_kw: calls.append(list(argv)) or proc.Result(list(argv), 0, "", "", 0))
    ex = SSHExecutor(HostSpec(name="b", address="192.0.2.5"), tmp_path)
    wheel = tmp_path / "-oProxyCommand=x.whl"
    wheel.write_bytes(b"w")
    ship.send(ex, [wheel], "/var/lib/virtbench-remote/ship", ship.Shipment(), "wheel")
    scp = next(a for a in calls if a[0] == "scp")
    remote = [shlex.split(a[-1]) for a in calls if a[0] == "ssh"]
    assert ["mkdir", "-p", "--", "/var/lib/virtbench-remote/ship"] in remote
    assert ["ls", "-1", "--", "/var/lib/virtbench-remote/ship"] in remote
    assert scp.index("--") < scp.index(str(wheel)) and scp[-1] == "root@192.0.2.5:/var/lib/virtbench-remote/ship/"
