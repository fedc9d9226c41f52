"""Every configuration file of the node and the command line of each component.

Paths as the components see them inside the node's mount namespace: /run is the node's own
tmpfs, /run/containerd, /var/lib/{containerd,kubelet,etcd} and /var/log are bound from the
node's directory (see inner.setup_mounts); the rest of the filesystem is the host's, read-mostly.
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from .layout import POD_SUBNET, SERVICE_SUBNET, Node, kubeconfig, write_file

CONTAINERD_SOCKET = "/run/containerd/containerd.sock"
CNI_BIN = "/usr/lib/cni"
RUNC = "/usr/sbin/runc"
RUNSC = "/usr/bin/runsc"


def _toml_str(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def containerd_toml(node: Node, pause_image: str, runsc: bool) -> str:
    etc = node.etc
    lines = [
        "version = 2",
        'root = "/var/lib/containerd"',
        'state = "/run/containerd"',
        "oom_score = 0",
        # plugins that would touch the host or need what is absent here
        'disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",'
        ' "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs",'
        ' "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]',
        "[grpc]", f"  address = {_toml_str(CONTAINERD_SOCKET)}",
        "[ttrpc]", f"  address = {_toml_str(CONTAINERD_SOCKET + '.ttrpc')}",
        "[metrics]", '  address = ""',
        # the default, /opt/containerd, would be made on the host
        '[plugins."io.containerd.internal.v1.opt"]', f"  path = {_toml_str(str(node.path('data', 'opt')))}",
        '[plugins."io.containerd.grpc.v1.cri"]',
        f"  sandbox_image = {_toml_str(pause_image)}",
        # no CAP_SYS_RESOURCE here: without this, sandbox creation fails ("can't get final
        # child's PID from pipe") when runc lowers a process's oom_score_adj below its parent's
        "  restrict_oom_score_adj = true",
        "  disable_apparmor = true",
        "  enable_selinux = false",
        '  stream_server_address = "127.0.0.1"',
        '[plugins."io.containerd.grpc.v1.cri".cni]',
        f"  bin_dir = {_toml_str(CNI_BIN)}",
        f"  conf_dir = {_toml_str(str(etc / 'cni'))}",
        '[plugins."io.containerd.grpc.v1.cri".containerd]',
        '  default_runtime_name = "runc"',
        '  snapshotter = "overlayfs"',
        '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]',
        '  runtime_type = "io.containerd.runc.v2"',
        '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]',
        f"  BinaryName = {_toml_str(RUNC)}",
        "  SystemdCgroup = false",
    ]
    if runsc:
        lines += [
            '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runsc]',
            '  runtime_type = "io.containerd.runsc.v1"',
            '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runsc.options]',
            '  TypeUrl = "io.containerd.runsc.v1.options"',
            f"  ConfigPath = {_toml_str(str(etc / 'runsc.toml'))}",
        ]
    return "\n".join(lines) + "\n"


def runsc_binary(node: Node) -> str:
    """runsc built with the shim from the same gVisor module (build-kubernetes), else Debian's.
    Debian 12's runsc (20221219) takes every network namespace for the root one on kernels that
    namespace net.core.rmem_default (it tests that file; 6.18 has it in every namespace) and
    refuses to start a pod's sandbox: "cannot run with network enabled in root network namespace"."""
    built = Path(node.bin_dir, "bin", "runsc")
    return str(built) if built.is_file() else RUNSC


def runsc_toml(node: Node) -> str:
    """The shim's options: runsc_binary, on ptrace (its kvm platform hangs here, like every
    nested KVM guest), logs in the shim's bundle."""
    return "\n".join([
        f"binary_name = {_toml_str(runsc_binary(node))}",
        "[runsc_config]",
        '  platform = "ptrace"',
        "",
    ])


def cni_conflist() -> str:
    return json.dumps({
        "cniVersion": "0.4.0", "name": "vbk8s",
        "plugins": [{
            "type": "bridge", "bridge": "cni0", "isGateway": True, "ipMasq": False, "hairpinMode": True,
            "ipam": {"type": "host-local", "ranges": [[{"subnet": POD_SUBNET}]],
                     "routes": [{"dst": "0.0.0.0/0"}]},
        }],
    }, indent=1)


def kubelet_config(node: Node) -> str:
    pki = node.pki
    return json.dumps({
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        "address": node.node_ip, "port": 10250, "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1", "healthzPort": 10248,
        "tlsCertFile": str(pki / "kubelet-serving.crt"), "tlsPrivateKeyFile": str(pki / "kubelet-serving.key"),
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": False},
                           "x509": {"clientCAFile": str(pki / "ca.crt")}},
        # only holders of a certificate from the node's own CA get past authentication
        "authorization": {"mode": "AlwaysAllow"},
        "containerRuntimeEndpoint": f"unix://{CONTAINERD_SOCKET}",
        "cgroupDriver": "cgroupfs", "cgroupRoot": node.cgroup_root, "cgroupsPerQOS": True,
        "enforceNodeAllocatable": ["pods"],
        "failCgroupV1": False,  # these machines are cgroup v1; 1.35+ refuse it by default
        "failSwapOn": False, "protectKernelDefaults": False,
        "resolvConf": str(node.etc / "resolv.conf"),
        "clusterDomain": "cluster.local",
        # images are imported, never pulled: image GC would delete an imported image between runs
        "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
        # the node's disk is the host's: at 5 % (12.6 GB of a 252 GB disk whose caches and images
        # filled it to 8.4 GB free during a fresh CI run) the kubelet tainted the node with
        # disk-pressure and every test pod stayed Pending; memory stays guarded for density
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
        "serializeImagePulls": False, "rotateCertificates": False, "serverTLSBootstrap": False,
        "kernelMemcgNotification": False, "containerLogMaxSize": "10Mi",
    }, indent=1)


def sshd_config(node: Node) -> str:
    ssh = node.path("ssh")
    return "\n".join([
        f"ListenAddress {node.node_ip}", "Port 22", f"HostKey {ssh / 'host_key'}",
        f"PidFile {node.path('run', 'sshd.pid')}", f"AuthorizedKeysFile {ssh / 'authorized_keys'}",
        "PermitRootLogin prohibit-password", "PasswordAuthentication no", "KbdInteractiveAuthentication no",
        "UsePAM no", "StrictModes no", "MaxSessions 64", "MaxStartups 64", "ClientAliveInterval 5",
        "ClientAliveCountMax 3", "Subsystem sftp /usr/lib/openssh/sftp-server", "",
    ])


def make_ssh_keys(node: Node) -> None:
    ssh = node.path("ssh")
    ssh.mkdir(parents=True, exist_ok=True)
    os.chmod(ssh, 0o700)
    for key in ("host_key", "client_key"):
        for old in (ssh / key, ssh / f"{key}.pub"):
            old.unlink(missing_ok=True)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"virtbench-{node.name}-{key}",
                        "-f", str(ssh / key)], check=True, capture_output=True, timeout=30)
    (ssh / "authorized_keys").write_text((ssh / "client_key.pub").read_text())
    kind, key = (ssh / "host_key.pub").read_text().split()[:2]
    (ssh / "known_hosts").write_text(f"{node.node_ip} {kind} {key}\n")


def write_all(node: Node, pause_image: str, runsc: bool) -> None:
    etc = node.etc
    write_file(etc / "containerd.toml", containerd_toml(node, pause_image, runsc))
    write_file(etc / "runsc.toml", runsc_toml(node))
    write_file(etc / "cni" / "10-vbk8s.conflist", cni_conflist())
    write_file(etc / "kubelet.json", kubelet_config(node))
    # pods resolve nothing: their DNS queries stay on their own loopback, never leave the node
    write_file(etc / "resolv.conf", "nameserver 127.0.0.1\noptions ndots:1\n")
    write_file(etc / "sshd_config", sshd_config(node))
    local = "https://127.0.0.1:6443"
    for user in ("kubelet", "controller-manager", "scheduler", "admin"):
        write_file(etc / f"{user}.kubeconfig", kubeconfig(node, user, local), 0o600)
    write_file(node.path("kubeconfig"), kubeconfig(node, "admin", node.api_url), 0o600)


def argv(node: Node, component: str) -> list[str]:
    """The command line of one component, as the node's init process starts it."""
    pki, etc, bin_dir = node.pki, node.etc, Path(node.bin_dir, "bin")
    kc = {u: str(etc / f"{u}.kubeconfig") for u in ("kubelet", "controller-manager", "scheduler")}
    if component == "sshd":
        return ["/usr/sbin/sshd", "-D", "-e", "-f", str(etc / "sshd_config")]
    if component == "containerd":
        return ["/usr/bin/containerd", "--config", str(etc / "containerd.toml")]
    if component == "etcd":
        peer, client = "http://127.0.0.1:2380", "http://127.0.0.1:2379"
        return [str(bin_dir / "etcd"), f"--name={node.name}", "--data-dir=/var/lib/etcd",
                f"--listen-client-urls={client}", f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster={node.name}={peer}", "--listen-metrics-urls=http://127.0.0.1:2381"]
    if component == "kube-apiserver":
        return [str(bin_dir / "kube-apiserver"), f"--advertise-address={node.node_ip}",
                "--bind-address=0.0.0.0", "--secure-port=6443", "--etcd-servers=http://127.0.0.1:2379",
                f"--client-ca-file={pki / 'ca.crt'}",
                f"--tls-cert-file={pki / 'apiserver.crt'}", f"--tls-private-key-file={pki / 'apiserver.key'}",
                f"--kubelet-client-certificate={pki / 'apiserver-kubelet-client.crt'}",
                f"--kubelet-client-key={pki / 'apiserver-kubelet-client.key'}",
                f"--kubelet-certificate-authority={pki / 'ca.crt'}",
                # pod logs time out on the node's host name otherwise
                "--kubelet-preferred-address-types=InternalIP,Hostname",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={pki / 'sa.pub'}",
                f"--service-account-signing-key-file={pki / 'sa.key'}",
                f"--service-cluster-ip-range={SERVICE_SUBNET}",
                "--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
                "--allow-privileged=true", "--profiling=false", "--event-ttl=1h",
                # Debian's etcd 3.4.23 sends no progress notifications: the watch cache could not
                # confirm it was current and watches ended at once in an ERROR ("Too large
                # resource version"; recorded here). Without the cache, watches read etcd itself.
                "--watch-cache=false"]
    if component == "kube-controller-manager":
        c = kc["controller-manager"]
        return [str(bin_dir / "kube-controller-manager"), f"--kubeconfig={c}",
                f"--authentication-kubeconfig={c}", f"--authorization-kubeconfig={c}",
                "--bind-address=127.0.0.1", "--secure-port=10257", "--leader-elect=false",
                f"--service-account-private-key-file={pki / 'sa.key'}", f"--root-ca-file={pki / 'ca.crt'}",
                "--use-service-account-credentials=true", "--profiling=false"]
    if component == "kube-scheduler":
        c = kc["scheduler"]
        return [str(bin_dir / "kube-scheduler"), f"--kubeconfig={c}", f"--authentication-kubeconfig={c}",
                f"--authorization-kubeconfig={c}", "--bind-address=127.0.0.1", "--secure-port=10259",
                "--leader-elect=false", "--profiling=false"]
    if component == "kubelet":
        return [str(bin_dir / "kubelet"), f"--config={etc / 'kubelet.json'}", f"--kubeconfig={kc['kubelet']}",
                f"--hostname-override={node.name}", f"--node-ip={node.node_ip}", "--root-dir=/var/lib/kubelet"]
    raise ValueError(component)
