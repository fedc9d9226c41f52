"""The five studies of `seeds/` as data: what each measures, and its parts as shipped campaigns.

A part is one or more campaign files in `virtbench/campaigns/` (one run each: a campaign has
one experiment kind, and the parts of a study are of different kinds), named
`study<ID>-<part>[-<variant>]-<scale>.yaml`. `quick` keeps the paper's shape (the same
series, axes and sweeps) at the smallest settings that still measure something; `paper` uses
the paper's durations, sizes and repetition counts. What a part needs beyond the platforms
its campaign names (KVM, a second host, a PMU, a meter) is listed in `needs`: the
capability checks (studies/capabilities.py) decide it, and a part that cannot run is
skipped with the reason, never silently. `degrades` lists what runs but is missing a
measurement without the capability (dTLB misses without a PMU).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from ..config import SHIPPED
from ..errors import InputError

SCALES = ("quick", "paper")


@dataclass(frozen=True)
class PaperCommand:
    """A tool invocation as the paper printed it. `{param}` stands for what the paper left open
    and the preset fills from the benchmark's parameter of that name (the paper's `$duration`)."""

    where: str
    """The paper's figure or section that prints it."""
    benchmark: str
    """The virtbench benchmark that runs it."""
    argv: tuple[str, ...]
    note: str = ""


@dataclass(frozen=True)
class Difference:
    """A deliberate difference between the paper's setup and the part's presets: shown in
    `study report` beside the values it affects (and in the notes), held by the unit tests
    against the presets' effective argv where it adds to the paper's command."""

    what: str
    why: str
    affects: tuple[str, ...] = ()
    """Ids of the paper values (studies/paper/<id>.yaml) whose comparison it bears on."""
    adds: tuple[str, ...] = ()
    """argv words the presets add to the paper's command (output format only, e.g. `-mr`)."""
    one_host: bool = False
    """A difference only while the part ran on this host alone: not listed for a run that
    used a second host (`study run --hosts NAME`), which did as the paper did."""


@dataclass(frozen=True)
class Part:
    name: str
    title: str
    """What the part measures, with the paper's figure or table it reproduces."""
    variants: tuple[str, ...] = ("",)
    """Campaign files of the part: one per variant (e.g. host RAM sizes), each one run."""
    needs: tuple[str, ...] = ()
    """Capabilities without which the part cannot run (capabilities.CHECKS names)."""
    degrades: tuple[str, ...] = ()
    """Capabilities without which the part runs but lacks a measurement."""
    differs: str = ""
    """How the part differs from the paper here (a substitute tool, images not in Debian)."""
    command: PaperCommand | None = None
    """The paper's command of the part's workload, where the paper prints one."""
    differences: tuple[Difference, ...] = ()
    """Every deliberate difference of the presets from the paper's command and setup."""

    def campaign_stems(self, study: str, scale: str) -> list[str]:
        return [f"study{study}-{self.name}{'-' + v if v else ''}-{scale}" for v in self.variants]


@dataclass(frozen=True)
class Study:
    id: str
    title: str
    measures: str
    seed: str
    """Seed file name prefix (`seeds/<id>_*.txt`)."""
    parts: tuple[Part, ...] = field(default_factory=tuple)

    def part(self, name: str) -> Part:
        for p in self.parts:
            if p.name == name:
                return p
        raise InputError(f"study {self.id} has no part {name!r}",
                         f"use one of {', '.join(p.name for p in self.parts)} (`virtbench study list`)")

    def campaign_files(self, scale: str) -> list[Path]:
        return [SHIPPED / f"{stem}.yaml" for p in self.parts for stem in p.campaign_stems(self.id, scale)]


def _openssl_000(where: str, algorithm: str) -> PaperCommand:
    """Study 000's openssl command (Fig. 2: des-ede3, Fig. 3: aes-128-cbc)."""
    note = ("the paper's text calls des-ede3 ECB; openssl's des-ede3 speed test is DES-EDE3 in CBC mode "
            "(DES_ede3_cbc_encrypt), here as in the paper" if algorithm == "des-ede3" else "")
    return PaperCommand(where, "openssl", ("openssl", "speed", "-seconds", "{seconds}", "-bytes", "64",
                                           "-multi", "2", algorithm), note)


def _openssl_000_differences(throughput_ids: tuple[str, ...]) -> tuple[Difference, ...]:
    """How the density presets' openssl differs from the paper's (clock and interface are the paper's:
    plain `openssl speed ALG` without -evp, rates per CPU second without -elapsed)."""
    return (
        Difference("`-mr` added: machine-readable output",
                   "the same measurement; rates printed as exact bytes per second with each child's line "
                   "(checked) instead of a table rounded to 1000s of bytes", throughput_ids, ("-mr",)),
        Difference("`-seconds`: 20 s at paper scale, 2 s quick", "the paper does not state its $duration",
                   throughput_ids),
    )


def _debian10(affects: tuple[str, ...]) -> Difference:
    return Difference(
        "Debian 10 (buster, OpenSSL 1.1.1n) is played by Debian 11 bullseye (OpenSSL 1.1.1w)",
        "the image builder uses deb.debian.org, which no longer carries buster; bullseye ships the last OpenSSL "
        "1.1.1, whose plain `openssl speed aes-128-cbc` (no -evp) is software AES as buster's is", affects)


_DENSITY_IDS_000 = ("os-max-debian12", "os-max-debian10", "os-max-fedora38", "os-max-alpine318", "os-max-ubuntu2204",
                    "des-one-rpi4", "des-one-rpi5", "aes-one-rpi4", "aes-one-rpi5", "ram-max-128-rpi4",
                    "ram-max-256-rpi4", "ram-max-512-rpi4", "ram-max-128-rpi5", "ram-max-256-rpi5", "ram-max-512-rpi5",
                    "hostram-2g-rpi4", "hostram-4g-rpi4", "hostram-8g-rpi4", "hostram-2g-rpi5", "hostram-4g-rpi5",
                    "hostram-8g-rpi5")
_PROXMOX_000 = Difference(
    "LXC containers as virtbench's lxc platform makes them: privileged, without lxcfs, `cpus: 2` as a CPU quota",
    "Proxmox's defaults (unprivileged, lxcfs, `cores: 2` as a CPU set) are not applied by the presets",
    _DENSITY_IDS_000)
_BOARDS_000 = Difference(
    "the RPi 4B's and the RPi 5's values are both shown: none is chosen by this host's board",
    "the comparison does not detect the board; read the rows of the board you have",
    tuple(v for v in _DENSITY_IDS_000 if v.endswith("rpi5")))
_SOCKPERF_000 = Difference(
    "sockperf's message sizes start at 14 B where the paper's sweep starts at 8 B",
    "14 B is the smallest message sockperf sends (its header); iperf3's -l sweep starts at 8 B as the paper's",
    ("owd-claim",))

_BROUGHT = Difference(
    "Fedora 38, Alpine 3.18 and Ubuntu 22.04 run only from a brought image (`image: {rootfs: FILE}`)",
    "no image registry is used; the presets run the Debian images",
    ("os-max-fedora38", "os-max-alpine318", "os-max-ubuntu2204"))

_BOARDS_002 = Difference(
    "4 VMs run wherever this host holds them: the paper's 2 GB boards had no 4-VM points",
    "board memory (1/2/4/8 GB) is not modelled in benchmark campaigns; on a 2 GB board the 4-VM points fail",
    ("vcpu1-native", "vcpu2-share", "vcpu4-share", "build-overhead", "botan-blowfish", "botan-aes"))

_CONTROL_003 = Difference(
    "the network tests' control system is this host (or, in the VM part, a second VM on it)",
    "the presets run on one host; a second machine needs a copied campaign with `server: {host: NAME}`",
    ("t7-network-container", "t7-network-vm", "t6-network", "t5-network"))
_REST_003 = Difference(
    "the REST server is nginx serving a 70 MB file written once, fetched one at a time by wrk for `duration`; "
    "requests per second (1 / fetch time) are compared",
    "the paper's server created a random 70 MB file per request and timed the download; generating the file is "
    "not part of the fetch here", ("t6-rest", "t7-rest-container", "t5-rest", "t7-rest-vm"))

_LATENCY_004 = ("p-tail-4-none", "p-tail-4-node", "p50-16", "p50-8", "p50-1", "spikes", "core-pin")
_RATES_004 = ("ndr-8", "ndr-16", "ndr-16-over-8", "ndr-64", "tput-64")
_DIFFERENCES_004 = (
    Difference("veth pairs between namespaces/containers instead of SR-IOV VFs through two NICs; iperf 2's "
               "software timestamps instead of a hardware timestamper",
               "no SR-IOV NICs or timestamper on a test host", (*_RATES_004, *_LATENCY_004)),
    Difference("the device under test is not tuned as the paper's (RT kernel, SMT off, IRQ affinity, idle polling, "
               "performance governor, container slices on one core): neither applied nor checked",
               "the presets do not change the host's kernel or settings", (*_RATES_004, *_LATENCY_004)),
    Difference("the worst latencies over time are placed in their 100 ms interval, not at each packet's time",
               "iperf 2 reports its latency histogram per interval and keeps no per-packet log; Fig. 8's 5000 "
               "worst latencies are selected from those histograms (each 1 us bin with its packets)", ("spikes",)),
    Difference("dTLB misses and rescheduling interrupts are counted system-wide during each latency trial",
               "the paper sampled the active IRQ threads for 10 s with perf; this host's counts include "
               "every other process's", ("dtlb-64", "spikes")),
)

_POWER_001 = ("power-cpu", "power-memory", "power-tcp-client", "power-tcp-server", "power-disk", "power-udp-client-100",
              "power-udp-client-80", "power-udp-server-100", "power-udp-server-80", "power-apache-5k",
              "power-apache-25k", "power-apache-100k")
_NETWORK_POWER_001 = tuple(v for v in _POWER_001 if "tcp" in v or "udp" in v)
_APACHE_POWER_001 = ("power-apache-5k", "power-apache-25k", "power-apache-100k")
_WRK_001 = Difference(
    "nginx + wrk for 5/25/100 s at 200 connections stand in for Apache + ab with 5000/25000/100000 requests",
    "Debian's wrk has no fixed request count (it runs for a duration), so Fig. 3's execution time has no "
    "counterpart; requests per second are compared", ("apache-claim", *_APACHE_POWER_001))
_OTHER_MACHINE_001 = Difference(
    "the network tests' other machine is this host (the container against the host over Docker's bridge)",
    "the presets run on one host; the paper's second machine needs a copied campaign with `server: {host: NAME}`",
    _NETWORK_POWER_001)
_DIFFERENCES_001 = (
    Difference("sysbench CPU compared as events per second over a fixed time",
               "the paper timed a fixed amount of work (execution time); the ratio of rates is the inverse of the "
               "ratio of times, so the comparison means the same", ("cpu-time",)),
    Difference("sysbench random disk I/O compared as reads and writes per second",
               "the paper gives MB of operations performed in its fixed time: the same ratio", ("disk-read", "disk-write")),
    Difference("MariaDB stands in for MySQL (sysbench OLTP)", "Debian ships MariaDB", ("oltp-claim",)),
    _WRK_001, _OTHER_MACHINE_001)

STUDIES: tuple[Study, ...] = (
    Study(
        "000", "LXC containers on Raspberry Pi 4B/5 under Proxmox",
        "how many containers run at once (by OS image, container RAM, host RAM) with openssl speed "
        "in each; offline migration of 1..8 containers; TCP throughput (iperf3 -l sweep) and one-way "
        "delay (sockperf -m sweep) between two containers on the same node and on different nodes",
        "000",
        (
            Part("density-os-3des", "maximum containers and per-container 3DES throughput by OS image (Figs. 4, 5)",
                 differs="Debian bookworm/trixie/bullseye images (no registry here: Fedora, Alpine and Ubuntu "
                         "need a brought `rootfs:` archive); bullseye's OpenSSL 1.1.1 plays Debian 10's part",
                 command=_openssl_000("Fig. 2", "des-ede3"),
                 differences=(*_openssl_000_differences(("des-one-rpi4", "des-one-rpi5")), _debian10(("os-max-debian10",)),
                              _BROUGHT, _PROXMOX_000, _BOARDS_000)),
            Part("density-os-aes", "maximum containers and per-container AES-128-CBC throughput by OS image "
                                   "(Figs. 6, 7)", differs="as density-os-3des",
                 command=_openssl_000("Fig. 3", "aes-128-cbc"),
                 differences=(*_openssl_000_differences(("aes-one-rpi4", "aes-one-rpi5")), _debian10(()), _PROXMOX_000,
                              _BOARDS_000)),
            Part("density-ram", "maximum containers with 128/256/512 MB each (Figs. 8, 9)",
                 command=_openssl_000("Fig. 3", "aes-128-cbc"),
                 differences=(*_openssl_000_differences(()), _PROXMOX_000, _BOARDS_000)),
            Part("density-hostram", "maximum containers under 2/4/8 GB of host RAM (Figs. 10, 11)",
                 variants=("2g", "4g", "8g"),
                 differs="the host's RAM is a confining memory cgroup (`host_memory:`), not a board with less RAM",
                 command=_openssl_000("Fig. 3", "aes-128-cbc"),
                 differences=(*_openssl_000_differences(()), _PROXMOX_000, _BOARDS_000,
                              Difference("the host's RAM is a confining memory cgroup (`host_memory:`), not a board "
                                         "with less RAM", "one host plays the 2/4/8 GB boards",
                                         tuple(v for v in _DENSITY_IDS_000 if v.startswith("hostram-"))))),
            Part("migration", "offline migration time of 1, 2, 4 and 8 containers at once (Fig. 12)",
                 differs="to the second node given with --hosts NAME (over SSH, as root, host key known); "
                         "without one, to another directory of this host (storage-bound, not network-bound)",
                 differences=(Difference("containers move to another directory of this host, not to a second node",
                                         "no second host was given (--hosts NAME): the move is bound by storage, "
                                         "not by the 1 Gbit/s network the paper found limiting on the RPi 5",
                                         ("migration-claim",), one_host=True),
                              replace(_PROXMOX_000, affects=()))),
            Part("network-same", "iperf3 TCP throughput by -l size and sockperf TCP one-way delay by -m size, "
                                 "two containers on one node (Figs. 14, 15, 17, 18)",
                 differences=(_SOCKPERF_000,)),
            Part("network-different", "the same sweeps between containers on two nodes (Figs. 14, 15, 17, 18)",
                 needs=("second_host",),
                 differs="give the second node with --hosts NAME (SSH as root, host key known)",
                 differences=(_SOCKPERF_000,)),
        ),
    ),
    Study(
        "001", "Docker on a Raspberry Pi 2",
        "native against Docker: sysbench CPU, mbw memcpy/dumb/mcblock, sysbench random disk I/O, iperf TCP "
        "and UDP (80/100 Mbit/s) as client and as server, MySQL OLTP (1M/2M rows, thread sweep), a web server "
        "under 100/200/300 clients; power per test from an external meter; 15 runs, % difference to native",
        "001",
        (
            Part("suite", "Table I (performance) and Figs. 2, 3 (OLTP by threads, web server by clients)",
                 differs="nginx with wrk stands in for Apache with ab (wrk is duration-based: the 5k/25k/100k "
                         "request counts become durations); MariaDB stands in for MySQL",
                 differences=_DIFFERENCES_001),
            Part("power", "Table I power columns and Fig. 2's MySQL power: watts per test from a meter "
                          "(`--meter CMD`)", needs=("meter",),
                 differences=(
                     Difference("watts from your meter (`--meter`), else RAPL (CPU packages + DRAM) or IPMI (the BMC's "
                                "whole machine)", "the paper's external meter measured the whole Raspberry Pi 2; "
                                "compare like with like: a meter on the host's supply", _POWER_001),
                     _WRK_001, _OTHER_MACHINE_001,
                     Difference("quick scale measures the web server's power at 5 s only",
                                "25 and 100 s of load are the paper scale's (--scale paper)",
                                ("power-apache-25k", "power-apache-100k")))),
        ),
    ),
    Study(
        "002", "KVM virtual machines on ARM single-board computers",
        "1, 2 and 4 VMs at once with 192/256/512 MB and 1/2/4 vCPUs: 7-zip compression rating, dd direct "
        "read/write, CPU and memory marks (open equivalents of PassMark), a timed parallel build, Botan "
        "Blowfish and AES-256; AES support from the CPU flags",
        "002",
        (
            Part("vm-memory", "7-zip with 1 and 2 threads in 1 and 2 VMs of 192 and 256 MB (Figs. 2-5)",
                 needs=("kvm",), differences=(
                     Difference("the 1 GB boards' crash with 2 VMs of 256 MB is not reproduced",
                                "the host's memory is not confined in benchmark campaigns (only density's host_memory: "
                                "confines it): the VMs run on whatever memory this host has", ("ram-crash",)),
                     _BOARDS_002)),
            Part("vm-suite", "1, 2 and 4 VMs of 512 MB with 1/2/4 vCPUs: dd, CPU (sysbench cpu), memory (sysbench "
                             "memory read/write), build, Botan (Figs. 7-21)", needs=("kvm",),
                 differs="sysbench cpu and sysbench memory replace the proprietary PassMark marks; uClibc-ng "
                         "replaces httpd",
                 differences=(
                     Difference("sysbench cpu (events per second, 4 threads) stands in for PassMark's CPU Mark",
                                "PerformanceTest is proprietary; both count work done per second on every core given",
                                ("vcpu1-native", "vcpu2-share", "vcpu4-share")),
                     Difference("sysbench memory read and write of a 64 MiB block stand in for PassMark's Memory Read "
                                "Uncached and Memory Write (Figs. 14, 15)",
                                "PerformanceTest is proprietary; a block beyond the caches is read or written"),
                     Difference("uClibc-ng (about 800 C files) is built where the paper built Apache httpd",
                                "no httpd source package in the image; a real C code base of similar size",
                                ("build-overhead",)),
                     Difference("dd runs on this host's disk as it is: no microSD, SSD or eMMC set-up, and the SSD's "
                                "write cache is not turned off (the paper's hdparm -W 0)",
                                "the presets do not change the host's disks; set the medium up yourself before the run"),
                     _BOARDS_002)),
        ),
    ),
    Study(
        "003", "Performance losses with virtualization (LSBS)",
        "the 20-component LSBS suite (HPCC, fio x 8, ping, iperf3 TCP/reverse/UDP, Blender, SQLite, GAN "
        "training, REST server) on bare metal, containers (Docker, containerd; k0s as Kubernetes pods), VMs and "
        "containers in VMs, normalized to bare metal: Tables 5, 6, 7 and Fig. 4",
        "003",
        (
            Part("lsbs", "the suite on native, Docker, containerd and Kubernetes pods (k0s; Tables 6, 7; Fig. 3)",
                 differs="k0s is the pods of the cluster KUBECONFIG (or ~/.kube/config) names, run on its node "
                         "(left out with the reason where no cluster is given); nginx with wrk is the REST server; "
                         "a generated Blender scene and generated GAN images",
                 differences=(
                     Difference("k0s is whichever Kubernetes the user's kubeconfig names (k0s, k3s, kubeadm: pods "
                                "on containerd), its pods under the node's default runtime", "virtbench runs on "
                                "the node (the image is imported into its containerd); without a cluster Table 6 "
                                "has Docker alone", ("t6-cpu", "t6-memory", "t6-storage", "t6-network", "t6-blender",
                                                     "t6-dl", "t6-db", "t6-rest")),
                     Difference("Docker, containerd and the pods all on the host's network (the paper: Docker's bridge "
                                "and k0s's pod network)", "containerd has no bridge here (CNI is wired only by `ctr run "
                                "--cni`); one mode for all keeps Table 6 a comparison of runtimes, not of network "
                                "modes", ("t6-network", "t6-rest", "t7-network-container", "t7-rest-container",
                                          "abstract-container")),
                     _CONTROL_003, _REST_003,
                     Difference("a generated Blender scene and generated GAN training images",
                                "the Classroom scene and the paper's 322 images are not in Debian",
                                ("t6-blender", "t7-blender-container", "t6-dl", "t7-dl-container")))),
            Part("lsbs-vm", "the suite in a KVM VM and in Docker inside it (Tables 5, 7; Fig. 4)",
                 needs=("kvm",),
                 differs="QEMU/KVM is the one hypervisor here (Proxmox's); VMware, Hyper-V and XCP-ng are not "
                         "open to automation",
                 differences=(
                     Difference("QEMU/KVM is the one hypervisor (Proxmox's): Table 5 cannot rank VMware, Hyper-V and "
                                "XCP-ng", "they are not open to automation from a Linux host",
                                ("t5-cpu", "t5-memory", "t5-storage", "t5-network", "t5-blender", "t5-dl", "t5-db",
                                 "t5-rest")),
                     _CONTROL_003, _REST_003)),
        ),
    ),
    Study(
        "004", "Latency through lines of containers",
        "a line of 1..64 containers forwarding 64 B UDP in the kernel: the packet rate before loss, the "
        "latency distribution to p99.999 (HDR), worst-case latencies over time, IRQ pinning none / per "
        "NUMA node / per core, dTLB misses",
        "004",
        (
            Part("line", "NDR/PDR and HDR latency per line length and pinning (Figs. 3-8)",
                 degrades=("pmu",),
                 differs="veth pairs between namespaces/containers instead of SR-IOV VFs through two NICs, and "
                         "iperf 2 timestamps instead of a hardware timestamper",
                 differences=_DIFFERENCES_004),
        ),
    ),
)


def study(sid: str) -> Study:
    """The study with this id; unknown: one line with the ids that exist (exit 2)."""
    for s in STUDIES:
        if s.id == sid or s.id == sid.zfill(3):
            return s
    raise InputError(f"unknown study {sid!r}", f"use one of {', '.join(s.id for s in STUDIES)} "
                     "(`virtbench study list`)")


def check_scale(scale: str) -> str:
    if scale not in SCALES:
        raise InputError(f"unknown scale {scale!r}", f"use --scale {' or --scale '.join(SCALES)}")
    return scale
