"""Study 004 (seeds/004_*.txt): latency through lines of containers.

The paper prints no command line. Its settings (Sections III-IV): 64 B UDP from MoonGen, one
flow through a line of up to 64 LXC system containers, one RX/TX queue per interface, the
rate raised by about 1 kpkt/s every 20 s, latency at the highest loss-free rate and at
17.3 kpkt/s, each experiment at least 3 times (the run with the highest worst case shown),
the 5000 worst latencies over time, IRQ pinning none / per NUMA node / per core, dTLB misses
sampled with perf for 10 s; a tuned DuT (RT kernel, SMT off, irqaffinity=0, idle polling,
performance governor, container slices on core 0).
"""
from __future__ import annotations

from ..model import Difference, PaperSetting, Part, Study

LATENCY = ("p-tail-4-none", "p-tail-4-node", "p50-16", "p50-8", "p50-1", "spikes", "core-pin")
RATES = ("ndr-8", "ndr-16", "ndr-16-over-8", "ndr-64", "tput-64", "pin-rate")
PINNED = ("ndr-8", "ndr-16", "ndr-16-over-8", "ndr-64", "tput-64", "dtlb-64", "pin-rate", "p-tail-4-node", "p50-16",
          "p50-8", "p50-1", "spikes", "core-pin")
"""The values read from lines pinned per NUMA node or per core (all but p-tail-4-none)."""

SETTINGS = (
    PaperSetting("Section IV.B", "campaign", {"repetitions": 3}, note="'repeated a minimum of three times'"),
    PaperSetting("Sections III.A, IV", "section", {
        "payload": 18, "pinning": ["none", "node", "core"],
        "search.method": "steps", "search.step": 1000, "search.seconds": 20, "latency_rates": ["max", 17300],
        "worst.count": 5000, "worst.rate": 17300},
        note="64 B frames (18 B of UDP payload), lines 'up to 64', +1 kpkt/s every 20 s, latency at the maximum "
             "rate and at 17.3 kpkt/s, the 5000 worst latencies"),
    PaperSetting("Section III.B", "platform:lxc", {"init": "systemd"},
                 note="each container runs journald, a DHCP client, sshd and dbus"),
)
DIFFERENCES = (
    Difference("veth pairs between namespaces/containers instead of SR-IOV VFs through two NICs; iperf 2's "
               "software timestamps instead of a hardware timestamper", "no SR-IOV NICs or timestamper on a "
               "test host", "no wire, no NIC batching: rates higher and latencies lower than the paper's on "
               "short lines; the generator and receiver share the CPUs with the line", affects=(*RATES, *LATENCY)),
    Difference("the 18 B of UDP payload carry iperf 2's own header (sequence number, send time), where "
               "MoonGen's 64 B frames carried its",
               "iperf 2 times each packet from the send time it writes into the packet (18 B hold it)",
               "none on the packet size: the same 64 B frames"),
    Difference("the device under test is not tuned as the paper's (RT kernel, SMT off, IRQ affinity to core 0, "
               "idle polling, performance governor, container slices on one core, energy-saving states, RCU "
               "callbacks offloaded, logging off): neither applied nor checked",
               "the presets do not change the host's kernel or settings", "more scheduling noise: tail latencies "
               "and spikes higher", affects=(*RATES, *LATENCY)),
    Difference("containers run no init (the paper's ran journald, a DHCP client, sshd and dbus)",
               "64 systemd containers would add their boot to every line; the forwarding is the kernel's either "
               "way", "less background CPU time: fewer rescheduling interrupts, fewer spikes",
               affects=("spikes", "core-pin"), settings=("platform:lxc.init",)),
    Difference("pinning `node` puts the forwarding on the CPUs of NUMA node 0, `core` each hop on its own CPU "
               "round robin over this host's CPUs", "the paper pinned the NICs' IRQs to the NIC's NUMA node (4 "
               "nodes, 8 cores each) or one core per IRQ; on veth the receive work is steered (RPS), and a host "
               "with one NUMA node has no remote memory", "on one NUMA node `node` equals `none` but for the "
               "steering; the one flow's packets hash to one CPU per hop, where the paper's IRQ handlers spread "
               "over 8 or 31 cores; `core` is limited by this host's CPUs, not 8 per node", affects=PINNED),
    Difference("per-core pinning runs on every line, round robin over this host's CPUs beyond them; core-pin is "
               "judged on lines up to 8 nodes", "the paper could pin per core up to 8 nodes only; the longer "
               "lines show what overcommitting does", "on a host with fewer CPUs than a line's nodes even the "
               "judged lines share CPUs", affects=("core-pin",)),
    Difference("the rate steps start at 1000 pkt/s and are traced 50 steps past the first loss; NDR and PDR "
               "are the last rates before the first loss (PDR: below 0.5 % loss, this tool's bound), each step "
               "a fresh iperf session", "the paper's start rate and end are not stated, nor its 'nearly "
               "loss-free'; it raised one stream's rate 'over time constantly'", "on a line with the paper's "
               "lossy window below a loss-free one (64 nodes: loss at 17.3-50 kpkt/s, none at 50-55) the rate "
               "here is the window's start, about 4 times the paper's lower, and the maximum-rate latency is "
               "taken there; no queue carries over from one step to the next", affects=RATES),
    Difference("a longer line that forwards faster than a shorter one is measured again, and its rate replaced "
               "by the new one on every surface", "a rate rising with length is taken for a disturbed "
               "measurement", "the paper's even lines forwarding faster than odd ones (NUMA) would be "
               "re-measured, not kept as found", affects=RATES),
    Difference("spikes are judged as a worst case at least 5 times the p99.9 on any line at 17.3 kpkt/s, the "
               "rounds pooled", "the paper's sizes (5.2 ms on 4 nodes, 60 ms on 64), 64 nodes spiking in every "
               "repeat, no spikes at the maximum rate and the rescheduling interrupts behind them have no bound "
               "to hold a measurement to", "a spike anywhere agrees; its size and cause are shown, not judged",
               affects=("spikes",)),
    Difference("latencies in 1 us bins (iperf 2's histograms), where the paper's timestamper resolved 1.25 ns",
               "iperf 2's finest bin", "medians of a few microseconds are coarse", affects=LATENCY),
    Difference("3 repetitions of every line", "the paper repeated each at least three times (the 4-node line at "
               "17.3 kpkt/s six times: 'the other five repeats')", "rare spikes are less likely to be caught",
               affects=("spikes",)),
    Difference("the paper's lower latency of containers than of VMs (Section V) is not reproduced",
               "the line runs containers and namespaces, not VMs"),
    Difference("the 49 us median is compared with one container at the maximum rate, pinned per node",
               "the paper gives no length, rate or pinning for it ('for a single host')", affects=("p50-1",)),
    Difference("dTLB misses as a share of dTLB loads, against Section IV.A's 13 %", "the conclusion says 'around "
               "12 %' and neither names a denominator", affects=("dtlb-64",)),
    Difference("Debian 12's LXC 5.0 on this host's kernel where the paper ran LXC 4.0.6 on Debian 10 with RT "
               "patches", "the LXC Debian ships", "kernel forwarding cost of a newer, non-RT kernel",
               affects=(*RATES, *LATENCY)),
    Difference("each node routes the sink's address to its right neighbour (a plain route), where the paper's "
               "nodes chose the next hop by policy routing on the UDP destination port over VLAN-tagged VFs",
               "one flow needs one route; veth pairs need no VLAN tags", "a policy-rule lookup less per hop: "
               "a little less forwarding cost per node", affects=(*RATES, *LATENCY)),
    Difference("lines of 1, 2, 4, 8, 16, 32 and 64 containers: even lengths but 1, where the paper measured "
               "lines 'up to 64' with odd lengths among them (its Fig. 2 draws 3)", "the powers of two span 1 to 64 "
               "in 7 lines; the paper lists no lengths", "its finding that even lines forward faster than odd ones "
               "(NUMA: the egress NIC's node) is not reproduced, nor could it be on a host with one NUMA node"),
    Difference("a line of bare network namespaces (`netns`) runs beside the LXC line as the baseline",
               "the forwarding cost without containers; the paper measured LXC lines only",
               "none on the LXC values compared with the paper's"),
    Difference("each latency value is the mean over the 3 rounds with its interval (the latency table also shows "
               "the round with the highest worst case)", "the paper repeated each experiment at least three times "
               "and shows the run with the highest worst-case latency",
               "medians and tails lower than the paper's pick of the worst run where rounds differ",
               affects=("p-tail-4-none", "p-tail-4-node", "p50-16", "p50-8", "p50-1", "core-pin")),
    Difference("the worst latencies over time are placed in their 100 ms interval, not at each packet's time",
               "iperf 2 reports its latency histogram per interval and keeps no per-packet log; Fig. 8's 5000 "
               "worst latencies are selected from those histograms (each 1 us bin with its packets)",
               affects=("spikes",)),
    Difference("dTLB misses and rescheduling interrupts are counted system-wide during each latency trial",
               "the paper sampled the active IRQ threads for 10 s with perf; this host's counts include "
               "every other process's", "a higher share than the forwarding threads' own", affects=("dtlb-64",
                                                                                                    "spikes")),
)

STUDY = Study(
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
             settings=SETTINGS, differences=DIFFERENCES,
             duration={"quick": "about 6 min", "paper": "days: 7 lengths x 3 pinnings x 3 rounds of 20 s steps"}),
    ),
)
