"""The test node's layout: its names, addresses and files, all derived from its directory.

One node per directory. Everything host-visible that the node owns is named by a tag made from
the directory's path (`vbk8s<tag>`): the veth pair's host end, the kubelet's cgroup root (one
directory in each cgroup hierarchy), and the /30 of 10.234.0.0/16 that joins host and node. So
two nodes (two engineers' test sessions) never share anything, and `stop DIR` knows exactly
what to remove even when the node crashed half-way through its start.
"""
from __future__ import annotations

import dataclasses
import hashlib
import ipaddress
import json
import os
import subprocess
from pathlib import Path

K8S_VERSION = "v1.34.4"
VETH_NET = ipaddress.IPv4Network("10.234.0.0/16")
"""Host end .1 and node end .2 of one /30 per node: the host reaches the API server and sshd."""
POD_SUBNET = "10.235.0.0/24"
"""Pods' bridge network, inside the node's network namespace only (the host has no route to it)."""
SERVICE_SUBNET = "10.96.0.0/24"
"""Cluster IPs: virtual only (no kube-proxy runs); 10.96.0.1 is in the API server's certificate."""
SHADOWED = ("/run", "/var/log", "/proc", "/sys", "/dev")
"""Paths the node mounts its own over: its directory may not be below them."""
KUBELET_SYSCTLS = {  # what the kubelet sets (pkg/kubelet/cm setupKernelTunables): see Node.sysctls
    "vm/overcommit_memory": "1", "vm/panic_on_oom": "0", "kernel/panic": "10",
    "kernel/panic_on_oops": "1", "kernel/keys/root_maxkeys": "1000000",
    "kernel/keys/root_maxbytes": "25000000",
}
COMPONENTS = ("sshd", "containerd", "etcd", "kube-apiserver", "kube-controller-manager",
              "kube-scheduler", "kubelet")
"""In start order; stopped in the reverse."""


@dataclasses.dataclass(frozen=True)
class Node:
    """What `start` decided for one node; written to DIR/state/node.json's sibling config.json
    first, so the node's own init process and a later `stop` read the same values."""

    dir: str
    bin_dir: str
    tag: str
    host_ip: str
    node_ip: str

    # -- derived names ---------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return f"vbk8s-{self.tag}"

    @property
    def veth_host(self) -> str:
        return f"vbk8s{self.tag}h"

    @property
    def veth_node(self) -> str:
        return f"vbk8s{self.tag}n"

    @property
    def cgroup_root(self) -> str:
        """The kubelet's --cgroup-root: /vbk8s-<tag> in every cgroup hierarchy."""
        return f"/vbk8s-{self.tag}"

    @property
    def api_url(self) -> str:
        return f"https://{self.node_ip}:6443"

    def path(self, *parts: str) -> Path:
        return Path(self.dir, *parts)

    def log(self, component: str) -> Path:
        return self.path("log", f"{component}.log")

    @property
    def pki(self) -> Path:
        return self.path("pki")

    @property
    def etc(self) -> Path:
        return self.path("etc")

    # -- persistence -----------------------------------------------------------------------------
    def save(self) -> None:
        write_file(self.path("state", "config.json"), json.dumps(dataclasses.asdict(self), indent=1))

    @classmethod
    def load(cls, directory: Path) -> Node | None:
        try:
            return cls(**json.loads((directory / "state" / "config.json").read_text()))
        except (OSError, ValueError, TypeError):
            return None


def tag_of(directory: Path) -> str:
    return hashlib.sha256(str(directory).encode()).hexdigest()[:6]


def choose_addresses(tag: str) -> tuple[str, str]:
    """(host end, node end) of a /30 that no interface of this host uses yet."""
    used = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True,
                          check=True).stdout
    nets = list(VETH_NET.subnets(new_prefix=30))
    start = int(tag, 16) % len(nets)
    for i in range(len(nets)):
        net = nets[(start + i) % len(nets)]
        host, node = (str(net.network_address + 1), str(net.network_address + 2))
        if f" {host}/" not in used and f" {node}/" not in used:
            return host, node
    raise RuntimeError(f"no free /30 left in {VETH_NET}")


def write_file(path: Path, text: str, mode: int = 0o644) -> None:
    """Whole or not at all (a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, mode)
    tmp.rename(path)


# -- certificates --------------------------------------------------------------------------------
def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


def make_pki(node: Node) -> None:
    """A CA of the node's own and every certificate the components need (EC P-256, 30 days):
    the API server's serving one (node IP, 127.0.0.1, 10.96.0.1, kubernetes.default...), the
    kubelet's serving one, client certificates for admin (system:masters), the API server to
    the kubelet, the kubelet (system:node:NAME), controller manager and scheduler; and the
    service-account signing key."""
    d = node.pki
    d.mkdir(parents=True, exist_ok=True)
    os.chmod(d, 0o700)
    ec = ("-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256")
    _openssl("genpkey", *ec, "-out", str(d / "ca.key"))
    _openssl("req", "-x509", "-new", "-key", str(d / "ca.key"), "-days", "30", "-subj",
             f"/CN=virtbench-test-node-ca-{node.tag}", "-out", str(d / "ca.crt"),
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    _openssl("genpkey", *ec, "-out", str(d / "sa.key"))
    _openssl("pkey", "-in", str(d / "sa.key"), "-pubout", "-out", str(d / "sa.pub"))
    api_sans = [f"IP:{node.node_ip}", "IP:127.0.0.1", "IP:10.96.0.1", "DNS:localhost", "DNS:kubernetes",
                "DNS:kubernetes.default", "DNS:kubernetes.default.svc", "DNS:kubernetes.default.svc.cluster.local"]
    certs = {  # name: (subject, SANs or None for a client certificate)
        "apiserver": ("/CN=kube-apiserver", api_sans),
        "kubelet-serving": (f"/CN={node.name}", [f"IP:{node.node_ip}", f"DNS:{node.name}"]),
        "admin": ("/O=system:masters/CN=virtbench-admin", None),
        "apiserver-kubelet-client": ("/O=system:masters/CN=kube-apiserver-kubelet-client", None),
        "kubelet": (f"/O=system:nodes/CN=system:node:{node.name}", None),
        "controller-manager": ("/CN=system:kube-controller-manager", None),
        "scheduler": ("/CN=system:kube-scheduler", None),
    }
    for name, (subject, sans) in certs.items():
        ext = d / f"{name}.ext"
        usage = "serverAuth" if sans else "clientAuth"
        lines = ["basicConstraints=CA:FALSE", "keyUsage=critical,digitalSignature,keyEncipherment",
                 f"extendedKeyUsage={usage}"] + ([f"subjectAltName={','.join(sans)}"] if sans else [])
        ext.write_text("\n".join(lines) + "\n")
        _openssl("genpkey", *ec, "-out", str(d / f"{name}.key"))
        _openssl("req", "-new", "-key", str(d / f"{name}.key"), "-subj", subject, "-out", str(d / f"{name}.csr"))
        _openssl("x509", "-req", "-in", str(d / f"{name}.csr"), "-CA", str(d / "ca.crt"), "-CAkey",
                 str(d / "ca.key"), "-CAcreateserial", "-days", "30", "-extfile", str(ext),
                 "-out", str(d / f"{name}.crt"))
        ext.unlink()
        (d / f"{name}.csr").unlink()
    for key in d.glob("*.key"):
        os.chmod(key, 0o600)


def kubeconfig(node: Node, user: str, server: str) -> str:
    """A kubeconfig (JSON, which every YAML reader takes) with the certificates inline."""
    import base64

    def data(name: str) -> str:
        return base64.b64encode((node.pki / name).read_bytes()).decode()

    cluster, context = node.name, f"{user}@{node.name}"
    return json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": context, "preferences": {},
        "clusters": [{"name": cluster, "cluster": {"server": server, "certificate-authority-data": data("ca.crt")}}],
        "users": [{"name": user, "user": {"client-certificate-data": data(f"{user}.crt"),
                                           "client-key-data": data(f"{user}.key")}}],
        "contexts": [{"name": context, "context": {"cluster": cluster, "user": user}}],
    }, indent=1)
