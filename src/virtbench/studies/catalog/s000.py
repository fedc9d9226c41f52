"""Study 000 (seeds/000_*.txt): LXC containers on Raspberry Pi 4B/5 under Proxmox VE.

Read against the seed line by line: Section III (containers of 2 cores, 512 MB, 512 MB swap,
a 2 GB filesystem; Proxmox's LXC), Figs. 2-3 (openssl), IV.A-C (count groups, OS images,
container and board RAM), IV.D (offline migration, four storage set-ups), IV.E (Figs. 13 and
16: iperf3 and sockperf between two containers, on one node and on two).
"""
from __future__ import annotations

from dataclasses import replace

from ..model import Difference, PaperCommand, PaperSetting, Part, Study
from ..options import PAPER_COUNTS

DENSITY_IDS = ("os-max-debian12", "os-max-debian10", "os-max-fedora38", "os-max-alpine318", "os-max-ubuntu2204",
               "des-one-rpi4", "des-one-rpi5", "aes-one-rpi4", "aes-one-rpi5", "ram-max-128-rpi4",
               "ram-max-256-rpi4", "ram-max-512-rpi4", "ram-max-128-rpi5", "ram-max-256-rpi5", "ram-max-512-rpi5",
               "hostram-2g-rpi4", "hostram-4g-rpi4", "hostram-8g-rpi4", "hostram-2g-rpi5", "hostram-4g-rpi5",
               "hostram-8g-rpi5", "count-decrease")
MAX_IDS = tuple(v for v in DENSITY_IDS if "-max-" in v or v.startswith("hostram-"))
SIZES = [8, 128, 1024, 2048, 4096, 8192, 16384, 32768, 65000]
NETWORK_IDS = ("tcp-different-rpi4", "tcp-different-rpi5", "tcp-same-rpi4", "tcp-same-rpi5", "owd-claim")


def openssl(where: str, algorithm: str) -> PaperCommand:
    """Figs. 2 and 3: the command each container ran."""
    note = ("the text calls des-ede3 ECB; openssl's des-ede3 speed test is DES-EDE3 in CBC mode "
            "(DES_ede3_cbc_encrypt), here as in the paper" if algorithm == "des-ede3" else "")
    return PaperCommand(where, "openssl", ("openssl", "speed", "-seconds", "{seconds}", "-bytes", "{bytes}",
                                           "-multi", "{multi}", "{algorithm}", "> /tmp/results.txt"),
                        given={"bytes": 64, "multi": 2, "algorithm": algorithm}, note=note)


CONTAINER = PaperSetting("Section III", "platform:lxc", {"cpus": 2, "memory": 512 << 20, "swap": 512 << 20,
                                                        "disk": 2 << 30, "init": "systemd", "proxmox": True,
                                                        "network": "bridge"},
                         note="two cores, 512 MB of memory, a 512 MB swap area and a 2 GB filesystem; "
                              "Proxmox's system containers (init: the template's own), a veth on vmbr0")


COUNTS = PaperSetting("Section IV.A (Fig. 4)", "section", {"counts.groups": PAPER_COUNTS},
                      note="groups of 1-5, 10 to 50 by 5, 53, 54 and 63 containers, until the board failed")
COUNTS_FIG4 = replace(COUNTS, note="Fig. 4's groups, the only counts the paper states; Figs. 8-11's maxima (56, 55, "
                                   "6, 21) are not among them")


def proxmox(affects: tuple[str, ...]) -> Difference:
    return Difference(
        "LXC containers as virtbench's lxc platform makes them: privileged, without lxcfs, `cpus: 2` as a CPU "
        "quota", "the plain platform runs on every host; Proxmox's defaults (unprivileged, lxcfs, `cores: 2` as "
        "a set of 2 CPUs) need FUSE and an id map",
        "a quota lets a container use any CPU up to 2 CPUs' time, a CPU set pins it to 2; memory per container "
        "a little lower without lxcfs", affects=affects, settings=("platform:lxc.proxmox",), option="proxmox")


NO_NETWORK = Difference(
    "containers have no network interface (Proxmox gives each a veth on vmbr0)",
    "the workload sends nothing (a migration to another host needs it: a bridge's address is this host's); one "
    "bridge holds at most 1023 ports", "none on the rates and times; a bridge's limit of 1023 containers is not "
    "reached", settings=("platform:lxc.network",))


RAMP = Difference(
    "the count is ramped by doubling, then bisected between the last good and the failing count",
    "the exact maximum; the paper measured fixed groups (1-5, 10 to 50 by 5, 53, 54, 63)",
    "a maximum between two of the paper's groups is found exactly here, where the paper "
    "reported the group below", affects=MAX_IDS, settings=("section.counts.groups",), option="paper-counts")
RAMP_RAM = replace(
    RAMP, what=RAMP.what + "; `--option paper-counts` runs Fig. 4's groups instead",
    why="the paper states its counts for Fig. 4 only (Section IV.A); the maxima of Figs. 8-11 (56, 55, 6, 21) "
        "lie outside those groups, so it counted differently there, how is not stated",
    effect="the exact maximum here is the comparable one; with Fig. 4's groups a maximum can only be one of "
           "them (56 reads as 54, 6 as 5, 21 as 20)")
HOST = Difference(
    "this host's CPU, memory, disk, OS, kernel and Debian's LXC, where the paper ran the latest Raspberry Pi "
    "OS Lite with Proxmox VE on two Raspberry Pi 4B or two RPi 5 boards (4 cores; a SATA SSD on USB 3.0 or "
    "an NVMe SSD on PCIe Gen 3 x1 outside Section IV.D)",
    "virtbench measures the host it runs on; the boards are the paper's",
    "openssl's rates and the network sweeps are this CPU's (the values say which boards' figures "
    "they are read against); the storage matters to the migration only")


FAILURE = Difference(
    "a count fails at the first OOM kill, throughput collapse (below a quarter of the lower counts' median), "
    "starved instance or guard trip (confined free memory under 10 % of host_memory, memory pressure over "
    "40 % some or 10 % full)", "the host must survive the search; the paper ran its boards until they 'became "
    "unstable or crashed'", "maxima can be lower than the paper's: the guard stops before a crash",
    affects=MAX_IDS)
B_PER_S = Difference(
    "the paper's 'B/s' rates are read as MB/s (27.5 B/s as 27.5 MB/s)", "the seed prints B/s; openssl's table "
    "is in 1000s of bytes per second, and only MB/s fits a Cortex-A72's or A76's rates",
    affects=("des-one-rpi4", "des-one-rpi5", "aes-one-rpi4", "aes-one-rpi5"))
NOT_JUDGED = Difference(
    "the paper's statements that the OS images, the container RAM and the board's RAM changed little (Sections "
    "IV.A-C) are listed with the numbers that show them, not judged", "no bound to hold them to is stated")


def density_differences(ids: tuple[str, ...], ram: bool = False, ram_figs: bool = False) -> tuple[Difference, ...]:
    """What every density part shares (`ram_figs`: the parts of Figs. 8-11, whose counts the paper
    does not state)."""
    out: tuple[Difference, ...] = (
        Difference("`-mr` added: machine-readable output",
                   "the same measurement; rates printed as exact bytes per second with each child's line "
                   "(checked) instead of a table rounded to 1000s of bytes", affects=ids, adds=("-mr",)),
        Difference("stdout captured by virtbench, not redirected to /tmp/results.txt in the container",
                   "the same output, kept with the run instead of in a file", drops=("> /tmp/results.txt",)),
        Difference("`-seconds`: 20 s at paper scale, 2 s quick", "the paper does not state its $duration",
                   "none on a rate per CPU second beyond its precision", affects=ids),
        proxmox(DENSITY_IDS),
        RAMP_RAM if ram_figs else RAMP,
        Difference("the RPi 4B's and the RPi 5's values are both shown: none is chosen by this host's board",
                   "the comparison does not detect the board; read the rows of the board you have",
                   affects=tuple(v for v in DENSITY_IDS if v.endswith("rpi5"))),
        Difference("rates per CPU second (the paper's plain command, no -elapsed): containers sharing CPUs "
                   "do not lower them", "the paper's command measures CPU time; only contention for "
                   "caches, memory and clock frequency shows in it",
                   "the per-container rate may stay flat with the count here where the paper's fell",
                   affects=("count-decrease",)),
        NO_NETWORK, HOST, FAILURE, B_PER_S,
        Difference("containers run virtbench's minimal Debian image (mmdebstrap minbase, systemd added) where "
                   "Proxmox's Debian 12 template boots a full system (sshd, postfix, cron)",
                   "one image for every platform, built here without a registry",
                   "less memory per container: more fit here", affects=MAX_IDS),
    )
    if not ram:
        out += (Difference(
            "the 8 GB board is a confining cgroup of 8 GiB (`host_memory: 8G`) for the containers alone",
            "one host plays the board; the paper's Proxmox host and its services shared the board's 8 GB",
            "a few more containers fit here than on the board", affects=MAX_IDS, scales=("paper",)),)
    return out


DEBIAN10 = Difference(
    "Debian 10 (buster, OpenSSL 1.1.1n) is played by Debian 11 bullseye (OpenSSL 1.1.1w)",
    "the image builder uses deb.debian.org, which no longer carries buster; bullseye ships the last OpenSSL "
    "1.1.1, whose plain `openssl speed aes-128-cbc` (no -evp) is software AES as buster's is",
    "none: the same OpenSSL branch and code path", affects=("os-max-debian10",))
BROUGHT = Difference(
    "Fedora 38, Alpine 3.18 and Ubuntu 22.04 run only from a brought image (`image: {rootfs: FILE}`); "
    "Debian 13 trixie runs beside the paper's two Debian releases",
    "no image registry is used; trixie adds OpenSSL 3.5", "their rows stay unmeasured unless brought",
    affects=("os-max-fedora38", "os-max-alpine318", "os-max-ubuntu2204"))
SOCKPERF = Difference(
    "sockperf's message sizes start at 14 B where the paper's sweep starts at 8 B",
    "14 B is the smallest message sockperf sends (its header); iperf3's -l sweep starts at 8 B as the paper's",
    "the smallest point of the delay curve is 14 B", affects=("owd-claim",),
    settings=("benchmark:sockperf.msg_size",))
IPERF_FORMAT = Difference(
    "iperf3 with `-J` (JSON) instead of `-f m`, `-p 5201` (iperf3's default port) and the server with `-1`",
    "the same test; JSON keeps the exact bits per second, and a one-off server serves exactly one client",
    adds=("-J", "-p 5201", "-1"), drops=("-f m",))
ROUNDS = Difference(
    "5 measured rounds after one discarded warm-up round",
    "the paper states no repetition count for its network sweeps (one value per size in Figs. 14-18)",
    "an interval around each value; the warm-up keeps a cold first round out", scales=("paper",))
LINK = Difference(
    "the nodes are joined by whatever links this host and the one given with --hosts, where the paper's boards "
    "had 1 Gbit/s Ethernet through a Cisco Catalyst 2960X switch",
    "a host has the network it has", "the plateau of Figs. 14-15 (936 and 940 Mbit/s) is a 1 Gbit/s link's: a "
    "faster link gives a higher one, and one-way delays scale with the link",
    affects=("tcp-different-rpi4", "tcp-different-rpi5", "owd-claim"))
NATIVE_PAIR = Difference(
    "a native pair (no containers) runs beside the containers as the baseline",
    "the report's ratios need a baseline; the paper compared same-node with different-node containers only")


CURVES = Difference(
    "the sweeps' shapes (throughput rising with -l to a plateau, the delay growing with the message) and same "
    "node against different nodes are listed with the curves that show them; single points are judged",
    "the paper states the shapes in words, its numbers only at 65000 B", affects=("tcp-curve", "same-over-different"))
OWD_BOUND = Difference(
    "'substantially' is judged as at least 1.5 times", "the paper gives no number", affects=("owd-claim",))


def network_commands() -> tuple[PaperCommand, ...]:
    return (
        PaperCommand("Fig. 13, line 01", "iperf3", ("iperf3", "-s", "-f", "m"), role="server"),
        PaperCommand("Fig. 13, line 02", "iperf3", ("iperf3", "-c", "<ip-server>", "-f", "m", "-t", "{time}", "-l",
                                                    "{length}"), role="client", fills={"<ip-server>": "{server}"},
                     given={"time": 20, "length": SIZES}),
    )


SOCKPERF_SETTING = PaperSetting("Section IV.E (Fig. 16's commands are not in the seed text: its prose)",
                                "benchmark:sockperf", {"protocol": "tcp", "time": 20, "msg_size": SIZES},
                                note="TCP ping-pong, one-way delay as RTT/2, 20 s, the payload varied (its sizes "
                                     "are in Figs. 17-18 only: taken as Fig. 14's)")

STUDY = Study(
    "000", "LXC containers on Raspberry Pi 4B/5 under Proxmox",
    "how many containers run at once (by OS image, container RAM, host RAM) with openssl speed "
    "in each; offline migration of 1..8 containers; TCP throughput (iperf3 -l sweep) and one-way "
    "delay (sockperf -m sweep) between two containers on the same node and on different nodes",
    "000",
    (
        Part("density-os-3des", "maximum containers and per-container 3DES throughput by OS image (Figs. 4, 5)",
             differs="Debian bookworm/trixie/bullseye images (no registry here: Fedora, Alpine and Ubuntu "
                     "need a brought `rootfs:` archive); bullseye's OpenSSL 1.1.1 plays Debian 10's part",
             commands=(openssl("Fig. 2", "des-ede3"),),
             settings=(CONTAINER, COUNTS, PaperSetting("Section IV.A", "section", {"host_memory": 8 << 30})),
             differences=(*density_differences(("des-one-rpi4", "des-one-rpi5")), DEBIAN10, BROUGHT, NOT_JUDGED),
             options=("paper-counts", "proxmox"),
             duration={"quick": "about 4 min", "paper": "about an hour: each OS ramped until the 8 GiB cgroup fails"}),
        Part("density-os-aes", "maximum containers and per-container AES-128-CBC throughput by OS image "
                               "(Figs. 6, 7)", differs="as density-os-3des",
             commands=(openssl("Fig. 3", "aes-128-cbc"),),
             settings=(CONTAINER, COUNTS, PaperSetting("Section IV.A", "section", {"host_memory": 8 << 30})),
             differences=(*density_differences(("aes-one-rpi4", "aes-one-rpi5", "aes-factor")),
                          replace(DEBIAN10, affects=("debian10-aes",)), BROUGHT, NOT_JUDGED,
                          Difference("the AES factor is judged from one container of this part, between any host "
                                     "with AES instructions and any without", "the paper's 22 to 41 is the RPi 5 "
                                     "over the RPi 4B across Figs. 8-9's counts and RAM sizes",
                                     "hosts other than these two boards give other factors (x86 with and without "
                                     "AES-NI: about 5)", affects=("aes-factor",))),
             options=("paper-counts", "proxmox"),
             duration={"quick": "about 4 min", "paper": "about an hour: each OS ramped until the 8 GiB cgroup fails"}),
        Part("density-ram", "maximum containers with 128/256/512 MB each (Figs. 8, 9)",
             commands=(openssl("Fig. 3", "aes-128-cbc"),),
             settings=(replace(CONTAINER, values={k: v for k, v in CONTAINER.values.items() if k != "memory"}),
                       PaperSetting("Section IV.B", "platform:lxc", {"memory": [128 << 20, 256 << 20, 512 << 20]}),
                       COUNTS_FIG4, PaperSetting("Section IV.B", "section", {"host_memory": 8 << 30})),
             differences=(*density_differences((), ram=False, ram_figs=True), NOT_JUDGED),
             options=("paper-counts", "proxmox"),
             duration={"quick": "about 3 min", "paper": "about an hour"}),
        Part("density-hostram", "maximum containers under 2/4/8 GB of host RAM (Figs. 10, 11)",
             variants=("2g", "4g", "8g"),
             differs="the host's RAM is a confining memory cgroup (`host_memory:`), not a board with less RAM",
             commands=(openssl("Fig. 3", "aes-128-cbc"),),
             settings=(CONTAINER, COUNTS_FIG4, PaperSetting("Section IV.C", "section", {"host_memory": [2 << 30, 4 << 30,
                                                                                                   8 << 30]})),
             differences=(*density_differences((), ram=True, ram_figs=True), NOT_JUDGED,
                          Difference("the host's RAM is a confining memory cgroup (`host_memory:`), not a board "
                                     "with less RAM", "one host plays the 2/4/8 GB boards; the paper's Proxmox "
                                     "host used part of each board's RAM itself",
                                     "a few more containers fit here than on the board",
                                     affects=tuple(v for v in DENSITY_IDS if v.startswith("hostram-")))),
             options=("paper-counts", "proxmox"),
             duration={"quick": "about 3 min (three variants)", "paper": "about 2 hours"}),
        Part("migration", "offline migration time of 1, 2, 4 and 8 containers at once (Fig. 12)",
             differs="to the second node given with --hosts NAME (over SSH, as root, host key known); "
                     "without one, to another directory of this host (storage-bound, not network-bound)",
             settings=(CONTAINER,
                       PaperSetting("Section IV.D", "section", {"mode": "offline", "counts": [1, 2, 3, 4, 5, 6, 7, 8]},
                                    note="'migrating up to eight containers concurrently'")),
             differences=(
                 Difference("containers move to another directory of this host, not to a second node",
                            "no second host was given (--hosts NAME)",
                            "the move is bound by this host's storage, not by the network the paper found "
                            "limiting on the RPi 5", affects=("migration-claim",), one_host=True),
                 Difference("counts 1, 2, 4 and 8", "the paper's Fig. 12 goes 'up to eight' at once; its "
                            "points are not in the seed text", "none on the trend; fewer points",
                            settings=("section.counts",)),
                 Difference("one destination storage per run: the second host's container directory (or the "
                            "`to:` path here)", "the paper compared SATA over USB 2.0 and 3.0 (RPi 4B) and "
                            "NVMe on PCIe Gen 2 and 3 (RPi 5); a host has the media it has",
                            "the claim is judged only from runs whose destinations' media differ",
                            affects=("migration-claim",)),
                 Difference("moved by virtbench over SSH (copy, sync, start), not by `pct migrate`",
                            "no Proxmox cluster; both copy the container's volume over SSH",
                            "per-container overheads of Proxmox (locks, config sync) are not in the times"),
                 Difference("each container's 2 GB volume moves whole as a sparse file: its used blocks (the "
                            "image's root filesystem and 64 MiB written before the move), not its empty space",
                            "the paper's containers held a fresh Debian 12 template on a 2 GB volume (how much "
                            "of it was used is not stated)", "times scale with the bytes moved",
                            affects=("migration-claim",), scales=("paper",)),
                 Difference("quick: only what each container wrote moves (8 MiB and its overlay's changes), "
                            "neither a volume nor the image", "a short run", "far fewer bytes than the paper's",
                            affects=("migration-claim",), scales=("quick",)),
                 Difference("5 rounds of 1, 2, 4 and 8 containers",
                            "the paper states no repetition count for Fig. 12",
                            "an interval around each time", scales=("paper",)),
                 replace(LINK, affects=("migration-claim",), hosts_only=True,
                         effect="the RPi 5's times were bound by the 1 Gbit/s network: over a faster link the "
                                "destination's storage bounds them sooner"),
                 replace(proxmox(()), option="", effect="none expected on a copy's time"), NO_NETWORK, HOST,
                 Difference("only the destination's medium varies between runs; the source is this host's disk",
                            "the paper moved between two boards with the same attachment (USB 2.0, USB 3.0, PCIe "
                            "Gen 2 or Gen 3) at both ends", "a slow source is not reproduced",
                            affects=("migration-claim",)),
                 Difference("the claim's words are judged with bounds chosen here: 'negligible' within 15 %; "
                            "'a lot' at least half the ratio the media's rates predict (and 2 %)",
                            "the paper gives no numbers",
                            "the verdict depends on them", affects=("migration-claim",))),
             hosts="the containers move to that host over SSH (`to: {host: NAME}`)",
             duration={"quick": "about 2 min", "paper": "about 20 min (5 rounds of 1+2+4+8 containers)"}),
        Part("network-same", "iperf3 TCP throughput by -l size and sockperf TCP one-way delay by -m size, "
                             "two containers on one node (Figs. 14, 15, 17, 18)",
             commands=network_commands(), settings=(CONTAINER, SOCKPERF_SETTING),
             differences=(IPERF_FORMAT, SOCKPERF, NATIVE_PAIR, ROUNDS, HOST, proxmox(NETWORK_IDS), CURVES, OWD_BOUND),
             options=("proxmox",),
             duration={"quick": "about 3 min", "paper": "about 80 min (9 sizes x 2 tools x 20 s x 6 rounds, 2 platforms)"}),
        Part("network-different", "the same sweeps between containers on two nodes (Figs. 14, 15, 17, 18)",
             needs=("second_host",),
             differs="give the second node with --hosts NAME (SSH as root, host key known)",
             commands=network_commands(), settings=(CONTAINER, SOCKPERF_SETTING),
             differences=(IPERF_FORMAT, SOCKPERF, NATIVE_PAIR, ROUNDS, HOST, LINK, proxmox(NETWORK_IDS), CURVES, OWD_BOUND,
                          Difference("the containers use their node's host network (Proxmox gives each a veth on "
                                     "the node's bridge vmbr0)", "a container on a bridge of the other host has a "
                                     "private address this host cannot reach",
                                     "throughput on a 1 Gbit/s link unchanged (the link bounds it); one-way delay "
                                     "a few microseconds lower than through veth and bridge",
                                     affects=("tcp-different-rpi4", "tcp-different-rpi5", "owd-claim"),
                                     settings=("platform:lxc.network",))), options=("proxmox",),
             hosts="the second node: the servers run in a container there",
             duration={"quick": "about 3 min", "paper": "about 80 min"}),
    ),
)
