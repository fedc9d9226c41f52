"""Study 001 (seeds/001_*.txt): Docker on a Raspberry Pi 2 (native against Docker, power per test).

The paper prints no command line: its settings are in the prose (Section II: 15 runs averaged;
III.A: sysbench CPU and random disk I/O, mbw's three tests, iperf TCP and UDP at 100 and 80
Mbit/s as client and server against another host; III.B: MySQL with 1M and 2M rows by threads,
Apache with ab, 100/200/300 clients, 5000/25000/100000 requests).
"""
from __future__ import annotations

from ..model import Difference, PaperSetting, Part, Study

POWER = ("power-cpu", "power-memory", "power-tcp-client", "power-tcp-server", "power-disk", "power-udp-client-100",
         "power-udp-client-80", "power-udp-server-100", "power-udp-server-80", "power-apache-5k",
         "power-apache-25k", "power-apache-100k")
NETWORK_POWER = tuple(v for v in POWER if "tcp" in v or "udp" in v)
APACHE = ("apache-claim", "apache-time-claim", "power-apache-5k", "power-apache-25k", "power-apache-100k")

SETTINGS = (
    PaperSetting("Section II", "campaign", {"repetitions": 15}, note="'The results are averaged over 15 runs'"),
    PaperSetting("Section III.A", "benchmark:iperf3", {"udp_rate": ["100M", "80M"]}, select={"mode": "udp"},
                 note="UDP at two fixed rates, 100 Mbit/s (saturated, lossy) and 80 Mbit/s"),
    PaperSetting("Section III.A", "benchmark:iperf3", {"client": ["instance", "host"]},
                 note="as client and as server, the other end on another host"),
    PaperSetting("Section III.B", "benchmark:mariadb-oltp", {"table_size": [1000000, 2000000]},
                 note="'two databases with one and two million rows', concurrent threads varied"),
)
AB = PaperSetting("Section III.B, Fig. 3", "benchmark:nginx-ab",
                  {"concurrency": [100, 200, 300], "requests": [5000, 25000, 100000]},
                  note="ab: 100, 200 and 300 concurrent clients; 5000, 25000 and 100000 requests")
AB_POWER = PaperSetting("Table I", "benchmark:nginx-ab", {"concurrency": 200, "requests": [5000, 25000, 100000]},
                        note="Apache's power at 200 clients, 5000, 25000 and 100000 requests")
OTHER_MACHINE = Difference(
    "the network tests' other machine is this host: the container against the host over Docker's bridge, and "
    "native's baseline with both ends on loopback (no NIC, no bridge)", "no second host was given (--hosts NAME)",
    "throughput far above the paper's 100 Mbit/s link; Docker's ratio carries its whole veth and bridge path, where "
    "the paper's carried one more layer before the same NIC; power of both ends on one meter",
    affects=NETWORK_POWER, one_host=True)
NGINX = Difference(
    "nginx serves a 10 KiB file where the paper's Apache 2 served its page (which one is not stated); ab as in "
    "the paper, with fixed request counts", "one web server for every study (LSBS's REST server too); ab is the "
    "paper's client", "absolute requests per second differ from Apache's; native against Docker compares the "
    "same server", affects=APACHE)
IPERF = Difference(
    "iperf3 where the paper names 'Iperf' (no version); its 'bidirectional tests' run one direction at a time, "
    "the container as client and as server", "iperf3 gives JSON and one server per client; iperf 2's -d mixes both "
    "directions in one number", "none on TCP throughput; UDP at a fixed rate compares alike",
    affects=NETWORK_POWER)
ACROSS = Difference(
    "with --hosts: Docker on the host's network (pairs across hosts reach a host's own address), the web server "
    "test included; the container receiving TCP is a client receiving from the other host (iperf3 -R); UDP "
    "towards the container stays on this host; the other host runs the suite too (its rows are its own, not "
    "compared)", "cross-host pairs need host networking and start their client here; iperf3 has no reverse UDP "
    "mode here", "no bridge or NAT in Docker's path: its network and web server ratios nearer native's",
    affects=(*NETWORK_POWER, *APACHE), hosts_only=True)
AB_HERE = Difference(
    "ab runs on this host (over loopback to native, over the bridge to Docker), also with --hosts",
    "the paper's clients were other machines; one host is measured", "ab's CPU and watts count with the "
    "server's: fewer requests per second and more watts than a remote client would give, on both platforms",
    affects=APACHE)
POWER_WINDOW = Difference(
    "watts are averaged over each whole execution: sysbench's prepare and cleanup of its files, the database's "
    "initialisation and load, a server's start with the test", "the meter is read around the tool's run as a "
    "whole; the paper reports the power 'during the execution of each single test' (its window is not stated)",
    "short tests (ab at 5000 requests) weigh their set-up most: power ratios nearer 1", affects=POWER)
STATISTIC = Difference(
    "each ratio is the geometric mean of the per-round ratios of Docker to native with a paired interval",
    "the paper compares averages over its 15 runs", "the same ratio but where rounds drift or one is an outlier")
WARMUP = Difference(
    "one warm-up round, discarded, before the 15 measured rounds", "the paper averages 15 runs and states no "
    "warm-up; a first round fills caches and starts daemons", "a cold first run no longer weighs on a mean",
    scales=("paper",))
UNSTATED = Difference(
    "values the paper leaves open, chosen here: mbw copies 512 MiB arrays 10 times per test (mcblock in "
    "256 KiB blocks); sysbench CPU's largest prime 20000 (sysbench 1.0's default; 0.4's was 10000); sysbench "
    "fileio with O_DIRECT, 16 KiB requests over 128 files, 1 thread; each iperf3 test runs 20 s, UDP in 1470 B "
    "datagrams (iperf 2's default); each OLTP point runs sysbench oltp_read_write for 60 s on one table; ab "
    "fetches without keep-alive (ab's default); Docker on its default bridge network",
    "the paper gives no array size, duration or OLTP script", "absolute MiB/s, transactions/s and Mbit/s are "
    "these settings'; native against Docker compares alike", scales=("paper",))
HOST = Difference(
    "this host's CPU, memory, disk and network, where the paper measured a Raspberry Pi 2 (4 Cortex-A7 cores at "
    "900 MHz, 1 GB) over its 100 Mbit/s Ethernet", "virtbench measures the host it runs on",
    "absolute values are this host's; the UDP rates of 100 and 80 Mbit/s saturate the Pi's link but not a "
    "faster one, so the loss the paper saw at 100 Mbit/s need not appear",
    affects=("power-udp-client-100", "power-udp-server-100"))
DIFFERENCES = (
    Difference("sysbench CPU compared as events per second over 60 s with 4 threads",
               "the paper timed a fixed amount of work (execution time; threads, events and prime limit not "
               "stated); the ratio of rates is the inverse of the ratio of times",
               "the same ratio to native", affects=("cpu-time",)),
    Difference("sysbench random disk I/O compared as reads and writes per second (2 GiB, 60 s)",
               "the paper gives MB of operations performed in its fixed time (size and time not stated): the "
               "same ratio", affects=("disk-read", "disk-write")),
    Difference("MariaDB stands in for MySQL (sysbench OLTP), threads 1 to 64", "Debian ships MariaDB; the paper's "
               "thread counts are in Fig. 2 only", "none expected on native against Docker",
               affects=("oltp-claim",)),
    Difference("the MySQL claim is judged at every thread count, each within 10 %", "the paper finds 'no relevant "
               "difference ... especially for a high number of concurrent threads', which allows a gap at few",
               "a gap at 1 thread makes the claim differ here", affects=("oltp-claim",)),
    NGINX, IPERF, OTHER_MACHINE, ACROSS, AB_HERE, WARMUP, UNSTATED, HOST, STATISTIC,
    Difference("Debian 12's Docker (docker.io 20.10) on this host's kernel, running virtbench's Debian image with "
               "sysbench 1.0.20, MariaDB 10.11 and iperf3 3.12, where the paper ran Docker 1.8.0 on Hypriot's "
               "Raspbian Jessie (Linux 3.18.11; Jessie shipped sysbench 0.4.12, MySQL 5.5 and iperf 2)",
               "the Docker Debian ships; one image for native and Docker (the same binaries)",
               "Docker's own costs are those of its current version"),
)

STUDY = Study(
    "001", "Docker on a Raspberry Pi 2",
    "native against Docker: sysbench CPU, mbw memcpy/dumb/mcblock, sysbench random disk I/O, iperf TCP "
    "and UDP (80/100 Mbit/s) as client and as server, MySQL OLTP (1M/2M rows, thread sweep), Apache "
    "with ab (100/200/300 clients; 5000/25000/100000 requests); power per test from an external meter; "
    "15 runs, % difference to native",
    "001",
    (
        Part("suite", "Table I (performance) and Figs. 2, 3 (OLTP by threads, web server by requests)",
             differs="nginx (with ab, fixed request counts) stands in for Apache; MariaDB for MySQL",
             settings=(*SETTINGS, AB), differences=DIFFERENCES,
             hosts="the network tests' other machine: iperf3's other end runs there",
             duration={"quick": "about 8 min", "paper": "about 11 h (16 rounds)"}),
        Part("power", "Table I power columns and Fig. 2's MySQL power: watts per test from a meter "
                      "(`--meter CMD`)", needs=("meter",), settings=(*SETTINGS, AB_POWER),
             differences=(
                 Difference("watts from your meter (`--meter`), else RAPL (CPU packages + DRAM) or IPMI (the BMC's "
                            "whole machine)", "the paper's external meter measured the whole Raspberry Pi 2",
                            "compare like with like: a meter on the host's supply", affects=POWER),
                 NGINX, IPERF, OTHER_MACHINE, ACROSS, AB_HERE, POWER_WINDOW, WARMUP, UNSTATED, HOST, STATISTIC,
                 Difference("Fig. 2's MySQL power by threads is measured and shown, not compared",
                            "the paper gives it as a plot only, without numbers"),
                 Difference("quick scale measures the web server's power at 2000 and 5000 requests only",
                            "25000 and 100000 are the paper scale's (--scale paper)",
                            affects=("power-apache-25k", "power-apache-100k"), scales=("quick",))),
             hosts="the network tests' other machine: iperf3's other end runs there",
             duration={"quick": "about 5 min", "paper": "about 10 h (16 rounds)"}),
    ),
)
