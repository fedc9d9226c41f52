"""The test Kubernetes node's configuration (tools/kubernetes/knode): what keeps it off the host.

Each check is one of the obstacles of REFERENCE.md section 5 or a promise of the tool's header;
the node itself is started by tests/integration/test_k8s_node.py.
"""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "kubernetes"))

from knode import configs, outer  # noqa: E402
from knode.layout import VETH_NET, Node, choose_addresses, make_pki, tag_of  # noqa: E402


@pytest.fixture
def node(tmp_path) -> Node:
    return Node(dir=str(tmp_path / "n"), bin_dir="/var/cache/virtbench/kubernetes/v1.34.4-x", tag=tag_of(tmp_path),
                host_ip="10.234.3.1", node_ip="10.234.3.2")


def test_names_fit_and_addresses_are_a_free_private_pair(tmp_path, node):
    assert len(node.veth_host) <= 15 and len(node.veth_node) <= 15  # IFNAMSIZ
    host, inside = choose_addresses(tag_of(tmp_path))
    assert choose_addresses(tag_of(tmp_path)) == (host, inside)  # the same directory, the same pair
    import ipaddress

    h, n = ipaddress.ip_address(host), ipaddress.ip_address(inside)
    assert h in VETH_NET and n == h + 1 and int(h) % 4 == 1
    used = subprocess.run(["ip", "-o", "-4", "addr"], capture_output=True, text=True).stdout
    assert f" {host}/" not in used


def test_containerd_is_its_own_and_keeps_off_the_host(node):
    conf = tomllib.loads(configs.containerd_toml(node, "localhost/virtbench/pause:1.0", runsc=False))
    cri = conf["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["restrict_oom_score_adj"] is True  # no CAP_SYS_RESOURCE here
    assert cri["sandbox_image"] == "localhost/virtbench/pause:1.0"
    assert conf["plugins"]["io.containerd.internal.v1.opt"]["path"].startswith(node.dir)  # not /opt/containerd
    assert cri["cni"]["conf_dir"].startswith(node.dir)
    assert "runsc" not in cri["containerd"]["runtimes"]
    with_runsc = tomllib.loads(configs.containerd_toml(node, "p:1", runsc=True))
    runsc = with_runsc["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]["runsc"]
    assert runsc["runtime_type"] == "io.containerd.runsc.v1"
    shim = tomllib.loads(configs.runsc_toml(node))
    assert shim["binary_name"] == "/usr/bin/runsc" and shim["runsc_config"]["platform"] == "ptrace"
    node = dataclasses.replace(node, bin_dir=str(Path(node.dir) / "build"))  # the build's own runsc
    built = Path(node.bin_dir, "bin", "runsc")
    built.parent.mkdir(parents=True)
    built.write_text("")
    assert tomllib.loads(configs.runsc_toml(node))["binary_name"] == str(built)


def test_kubelet_uses_its_own_cgroup_root_and_files(node):
    conf = json.loads(configs.kubelet_config(node))
    assert conf["cgroupRoot"] == node.cgroup_root == f"/vbk8s-{node.tag}"
    assert conf["failCgroupV1"] is False and conf["cgroupDriver"] == "cgroupfs"
    assert conf["resolvConf"].startswith(node.dir)
    assert conf["address"] == node.node_ip and conf["readOnlyPort"] == 0
    assert conf["authentication"]["anonymous"]["enabled"] is False
    assert conf["imageGCHighThresholdPercent"] == 100  # imported images are never collected
    cni = json.loads(configs.cni_conflist())["plugins"][0]
    assert cni["ipMasq"] is False  # no iptables rule anywhere


def test_components_listen_inside_the_node_only(node):
    api = configs.argv(node, "kube-apiserver")
    assert "--kubelet-preferred-address-types=InternalIP,Hostname" in api
    assert f"--advertise-address={node.node_ip}" in api
    for component in ("kube-controller-manager", "kube-scheduler"):
        assert "--bind-address=127.0.0.1" in configs.argv(node, component)
    assert "--listen-client-urls=http://127.0.0.1:2379" in configs.argv(node, "etcd")
    kubelet = configs.argv(node, "kubelet")
    assert f"--hostname-override={node.name}" in kubelet and f"--node-ip={node.node_ip}" in kubelet
    assert f"ListenAddress {node.node_ip}" in configs.sshd_config(node)


def test_certificates_name_what_clients_connect_to(node):
    make_pki(node)
    text = subprocess.run(["openssl", "x509", "-noout", "-text", "-in", str(node.pki / "apiserver.crt")],
                          capture_output=True, text=True, check=True).stdout
    for san in (f"IP Address:{node.node_ip}", "IP Address:127.0.0.1", "DNS:kubernetes.default.svc"):
        assert san in text
    subject = subprocess.run(["openssl", "x509", "-noout", "-subject", "-in", str(node.pki / "kubelet.crt")],
                             capture_output=True, text=True, check=True).stdout
    assert f"CN = system:node:{node.name}" in subject and "O = system:nodes" in subject
    for name in ("apiserver", "kubelet-serving", "admin", "kubelet", "scheduler"):
        subprocess.run(["openssl", "verify", "-CAfile", str(node.pki / "ca.crt"), str(node.pki / f"{name}.crt")],
                       capture_output=True, check=True)


@pytest.mark.parametrize("bad", ["/run/k8s", "/var/log/node", "/proc/x", "/dev/shm/n"])
def test_a_directory_the_node_mounts_over_is_refused(bad):
    with pytest.raises(outer.InputError, match="mounts its own"):
        outer.check_dir(Path(bad))
