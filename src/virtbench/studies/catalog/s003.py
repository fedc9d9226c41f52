"""Study 003 (seeds/003_*.txt): performance losses with virtualization (LSBS).

The paper prints no command line. Its settings (Sections 2-4): the 20-component suite (Table 2),
20 repetitions per batch, fresh Ubuntu 22.04 installs, Docker 20.10 (runC) and k0s 1.22
(containerd), VMs given every vCPU and all the memory with paravirtualized I/O and the
hypervisors' defaults, the network tests against a control system, three machines.
"""
from __future__ import annotations

from ..model import Difference, PaperSetting, Part, Study

T6 = ("t6-cpu", "t6-memory", "t6-storage", "t6-network", "t6-blender", "t6-dl", "t6-db", "t6-rest")
T5 = ("t5-cpu", "t5-memory", "t5-storage", "t5-network", "t5-blender", "t5-dl", "t5-db", "t5-rest")
T7_CONTAINER = tuple(f"t7-{c}-container" for c in ("cpu", "memory", "storage", "network", "blender", "dl", "db",
                                                   "rest"))
T7_VM = tuple(v.replace("container", "vm") for v in T7_CONTAINER)
NETWORK_IDS = ("t7-network-container", "t7-network-vm", "t6-network", "t5-network", "ping-claim")

SUITE = (
    PaperSetting("Section 2.2", "campaign", {"repetitions": 20, "image.release": "jammy"},
                 note="20 repetitions per batch; fresh Ubuntu 22.04 installs and images"),
    PaperSetting("Table 2", "benchmark:iperf3", {"mode": ["tcp", "tcp-reverse", "udp"]},
                 note="TCP target to control, control to target, UDP target to control"),
    PaperSetting("Section 2.1", "benchmark:nginx-wrk", {"file_size": 70_000_000},
                 note="a REST server creating a 70 MB random file per request, downloaded by the client"),
    PaperSetting("Section 2.1", "benchmark:gan", {"images": 322}),
)
CONTROL = Difference(
    "the network tests' control system is this host", "no second host was given (--hosts NAME)",
    "no physical NIC in the path: throughput far above the paper's 10 Gbit/s cards, ping well below 0.1 ms",
    affects=NETWORK_IDS, one_host=True)
REST = Difference(
    "the REST server is nginx serving a 70 MB file written once, fetched one at a time by wrk for `duration`; "
    "requests per second (1 / fetch time) are compared",
    "the paper's server created a random 70 MB file per request and timed the download; generating the file is "
    "not part of the fetch here", "the fetch alone: more sensitive to the network path, less to the CPU",
    affects=("t6-rest", "t7-rest-container", "t5-rest", "t7-rest-vm"))
GENERATED = Difference(
    "a generated Blender scene and generated GAN training images (322 of them), Debian's Blender 3.4",
    "the Classroom scene and the paper's images are not in Debian; Blender 3.3.0 neither",
    "times of another scene and network: ratios to native compare alike",
    affects=("t6-blender", "t7-blender-container", "t6-dl", "t7-dl-container", "t5-blender", "t7-blender-vm",
             "t5-dl", "t7-dl-vm"))
DEBIAN = Difference(
    "every platform runs virtbench's Debian 12 image (the paper: fresh Ubuntu 22.04 installs, and images from "
    "its Dockerfiles); a VM boots Debian 12's kernel with virtbench's minimal init, native runs on the host's",
    "one image for native, containers and VMs, so every platform runs the same binaries",
    "none on the container ratios; a VM's include its kernel's difference from the host's; absolute values are "
    "Debian 12's tools'", settings=("campaign.image.release",))
ONE_MACHINE = Difference(
    "one machine: this host's value is judged against Table 7's range over the paper's three machines, and "
    "against Tables 5 and 6, whose rows the paper averaged over the three",
    "a host is one machine; the range's ends are the paper's worst and best hardware",
    "a value inside the range agrees; outside it says how this host differs from all three; Tables 5 and 6's "
    "best of a row may be another one on this host alone", affects=(*T7_CONTAINER, *T7_VM, *T6, *T5))
WARMUP = Difference(
    "one warm-up execution, discarded, before the 20 measured repetitions", "the paper kept all 20 and "
    "inspected each batch's graph for warm-up and drift", "a cold first execution no longer weighs on a mean",
    scales=("paper",))
UNSTATED = Difference(
    "values chosen here: HPL's N from half the memory (at most 20000); fio on a 4 GiB file, 30 s per job after "
    "5 s of ramp, 4 KiB blocks for IOPS and 1 MiB for speed, depth 16, one job, reads and writes apart, libaio, "
    "direct; ping 100 echo requests; iperf3 20 s per test, UDP at a 1 Gbit/s target rate; the GAN at 64 px for "
    "20 epochs; SQLite with 600000 rows (the preset's stand-in for the paper's 48 MB); the REST fetches for 30 s",
    "the paper names the tools, not their parameters; its playbooks (its reference 18) use others: HPL N=10000, NB=128 on "
    "2x2 processes; fio on 2 GB for 60 s, 2 jobs, depth 256 (4 KiB) and 64 (64 KiB), reads and writes mixed "
    "(randrw, rw); ping -c 4; iperf3 for its default 10 s, UDP at -b 10G, TCP read on the sender's side",
    "absolute values are these settings'; ratios to native compare alike but for the storage rows (depth and "
    "mixing change what the device and its caches see) and UDP, whose ratio depends on the target rate",
    scales=("paper",))
BEST_VM = Difference(
    "Table 7's VM range is the best hypervisor's of each category (Table 5: Hyper-V for memory and the database, "
    "XCP-ng for storage, deep learning and the REST server); KVM here is Proxmox's",
    "QEMU/KVM is the one hypervisor here", "five of Table 7's eight VM rows compare KVM with another "
    "hypervisor's range: read them as context", affects=("t7-memory-vm", "t7-storage-vm", "t7-dl-vm", "t7-db-vm",
                                                         "t7-rest-vm"))
ORDER = Difference(
    "repetitions are rounds: each round runs every platform (in a random order, a new container or VM each "
    "round) and each benchmark (shuffled) once", "the paper ran 20 executions of one platform and benchmark in "
    "a batch; interleaving spreads the host's drift over every platform instead of one batch",
    "drift shows in every platform's interval, not as one batch's slope")
APP_TIME = Difference(
    "the applications are timed inside the process: Blender's render, the GAN's training loop, SQLite's "
    "statements (including building and indexing its table, an update and a delete)", "the paper's scripts (its reference 18) "
    "timed each whole run from outside (start-up, imports, data generation included; the database queried an "
    "existing 48 MB file, read only)", "less of each launch's platform cost in the ratios; the database's also "
    "weighs its writes", affects=("t6-blender", "t7-blender-container", "t5-blender", "t7-blender-vm", "t6-dl",
                                  "t7-dl-container", "t5-dl", "t7-dl-vm", "t6-db", "t7-db-container", "t5-db",
                                  "t7-db-vm"))
AGGREGATE = Difference(
    "a category is the geometric mean of its metrics' ratios, CPU from hpcc's HPL and its star and single DGEMM, "
    "memory from star and single STREAM Triad and RandomAccess; the abstract's losses are the geometric mean of "
    "every metric reported (about 50, ping's spread and iperf3's jitter among them)",
    "hpcc reports each; the paper's Table 2 takes one value of each (its scripts: single DGEMM, single "
    "RandomAccess, single STREAM Copy) and ranks by the categories' raw means",
    "a category's value weighs its components otherwise; the abstract's 5 % and 10 % are judged over more metrics "
    "than its 20", affects=(*T6, *T5, "abstract-container", "abstract-vm"))
STATISTIC = Difference(
    "each ratio is the geometric mean of the per-round ratios with a paired interval", "the paper normalized by "
    "the mean of bare metal's runs", "the same ratio but where rounds drift or one is an outlier")
VERSIONS = Difference(
    "Debian 12's Docker, containerd and runc and QEMU, and whichever Kubernetes the kubeconfig names, at this "
    "host's versions", "the paper ran Docker 20.10, k0s 1.22 and Proxmox VE 7.3's QEMU", "each runtime's costs "
    "are its current version's")
LINK = Difference(
    "with --hosts: the control system is reached over whatever links the two hosts, where the paper's machines "
    "had 10 Gbit/s NICs (HP NC523SFP, Intel X540-AT2)", "a host has the network it has",
    "network throughputs are this link's; their ratios to native compare alike", affects=NETWORK_IDS,
    hosts_only=True)

POWER_SAVE = Difference(
    "the host's firmware and power settings as they are (the paper disabled the BIOS power-save modes)",
    "the presets do not change the host's firmware or governor; the report records governor and turbo",
    "more frequency-scaling noise: wider intervals")

STUDY = Study(
    "003", "Performance losses with virtualization (LSBS)",
    "the 20-component LSBS suite (HPCC, fio x 8, ping, iperf3 TCP/reverse/UDP, Blender, SQLite, GAN "
    "training, REST server) on bare metal, containers (Docker, containerd; k0s as Kubernetes pods), VMs and "
    "containers in VMs, normalized to bare metal: Tables 5, 6, 7 and Figs. 3, 4",
    "003",
    (
        Part("lsbs", "the suite on native, Docker, containerd and Kubernetes pods (k0s; Tables 6, 7; Fig. 3)",
             differs="k0s is the pods of the cluster KUBECONFIG (or ~/.kube/config) names, run on its node (left "
                     "out with the reason where no cluster is given); nginx with wrk is the REST server; a "
                     "generated Blender scene and generated GAN images",
             settings=(*SUITE, PaperSetting("Section 3", "platform:docker", {"network": "bridge"},
                                            note="Docker's default network")),
             differences=(
                 Difference("k0s is whichever Kubernetes the user's kubeconfig names (k0s, k3s, kubeadm: pods on "
                            "containerd), its pods under the node's default runtime", "virtbench runs on the node "
                            "(the image is imported into its containerd); without a cluster Table 6 is not ranked "
                            "(the containerd platform, run by ctr, is not the paper's k0s column)",
                            "another distribution's kubelet and CNI than k0s's: the pod's own costs, not k0s's",
                            affects=T6),
                 Difference("a plain containerd platform (ctr run), not in the paper's Table 4, is measured too and "
                            "may be the best container of Table 7's rows, the abstract's 5 % and the ping claim",
                            "containerd without Kubernetes shows what the pods add; without a cluster it is the "
                            "one runtime beside Docker", "the best container may be one the paper did not run",
                            affects=(*T7_CONTAINER, "abstract-container", "ping-claim")),
                 Difference("Fig. 3's statements on the AMD machine (containers ahead of bare metal on the database "
                            "and deep learning) and on hypervisors ahead of bare metal on HPL are not judged; "
                            "HPL's 10-20 % container overhead is", "one host is one machine, and only KVM runs "
                            "here"),
                 ORDER, APP_TIME, AGGREGATE, STATISTIC, VERSIONS,
                 Difference("Docker, containerd and the pods all on the host's network (the paper: Docker's bridge "
                            "and k0s's pod network)", "containerd has no bridge here (CNI is wired only by `ctr run "
                            "--cni`); one mode for all keeps Table 6 a comparison of runtimes, not of network "
                            "modes", "no NAT or veth in the network tests: container ratios nearer 1",
                            affects=("t6-network", "t6-rest", "t7-network-container", "t7-rest-container",
                                     "abstract-container", "ping-claim"), settings=("platform:docker.network",)),
                 CONTROL, REST, GENERATED, DEBIAN, ONE_MACHINE, POWER_SAVE, WARMUP, UNSTATED, LINK,
                 Difference("with --hosts: the control system's end runs in the same platform there (Docker's "
                            "end in Docker) and the control system runs the suite too (its rows are its own)",
                            "a pair across hosts runs its server in an instance of the platform on that host",
                            "a container at both ends of Docker's network tests", affects=NETWORK_IDS,
                            hosts_only=True)),
             hosts="the control system: ping's and iperf3's other end runs there",
             duration={"quick": "at most about 18 min: 3 rounds, then more only for undecided cells and the "
                                "cells of undecided paper values until 15 min",
                       "paper": "about 4 h (21 rounds)"}),
        Part("lsbs-vm", "the suite in a KVM VM and in Docker inside it (Tables 5, 7; Figs. 3, 4)",
             needs=("kvm",),
             differs="QEMU/KVM is the one hypervisor here (Proxmox's); VMware, Hyper-V and XCP-ng are not "
                     "open to automation",
             settings=(*SUITE, PaperSetting("Section 4", "platform:qemu", {"vcpus": "host", "memory": "host",
                                                                          "cache": "none", "disk_bus": "virtio-blk"},
                                            note="'the maximum available vCPUs and memory is allocated to the VM'; "
                                                 "paravirtualized I/O (virtio-blk is the preset's choice of it); "
                                                 "Proxmox's default disk cache (none)")),
             differences=(
                 Difference("QEMU/KVM is the one hypervisor (Proxmox's): Table 5 cannot rank VMware, Hyper-V and "
                            "XCP-ng", "they are not open to automation from a Linux host", affects=T5),
                 Difference("k0s inside the VM is not run: Docker in the VM only", "k0s pods come with issue #38",
                            affects=("fig4-stack",), handled_by="#38 (branch k8s)"),
                 Difference("the VM gets every CPU of this host and 60 % of its memory (set when the part is "
                            "planned; the preset's file says 4 vCPUs and 8G)", "the rest of the memory for the "
                            "host and for the second VM the network tests use", "HPL and STREAM in the VM are "
                            "sized to 60 % of the memory native sees", settings=("platform:qemu.memory",)),
                 Difference("the network tests' other end is a second VM (or Docker in it) on this host, not the "
                            "paper's control system; the REST server runs in that second VM and its client (wrk) "
                            "in the measured one", "a container inside the VM cannot reach this host through it",
                            "the path crosses two virtual NICs and the host's bridge, and both ends are "
                            "virtualized", affects=("t7-network-vm", "t5-network", "ping-claim-vm", "t7-rest-vm",
                                                    "t5-rest")),
                 Difference("the VM runs with -cpu host on q35 with a virtio-blk disk, a qcow2 overlay on the host's "
                            "filesystem without host caching (cache=none)", "the paper's VMs had 'paravirtualized "
                            "I/O' and each hypervisor's defaults (Proxmox 7.3 on ZFS, whose caching the paper "
                            "credits for storage results above bare metal)", "storage ratios above 1 from a "
                            "host's cache cannot appear: t7-storage-vm's upper range is out of reach",
                            affects=("t7-storage-vm", "t5-storage", "file-over-perform", "proxmox-seq")),
                 Difference("Fig. 4's claim is judged on every metric of Docker in the VM, each within 10 % of "
                            "the product of its layers", "the paper showed a few platform-benchmark pairs without "
                            "a bound", "a noisy side metric (ping's spread, jitter) can make it differ",
                            affects=("fig4-stack",)),
                 BEST_VM, ORDER, APP_TIME, AGGREGATE, STATISTIC, VERSIONS,
                 REST, GENERATED, DEBIAN, ONE_MACHINE, POWER_SAVE, WARMUP, UNSTATED),
             size_to_host=("kvm",),
             duration={"quick": "about 20 min where KVM works", "paper": "about 5 h (21 rounds)"}),
    ),
)
