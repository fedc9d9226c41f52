"""Study 002 (seeds/002_*.txt): KVM virtual machines on ARM single-board computers.

The paper prints its commands (Figs. 1, 6, 10, 16, 18): 7zr b -mmt1/-mmt2; dd with 8M blocks,
256 of them, direct I/O, reading an existing file and writing a new one; PassMark (proprietary);
`make -s -j N` of httpd; `botan speed --msec=15000 Blowfish AES-256`. Section 4: 4 identical
minimal Debian 10.13 VMs with an SSH server; Sections 5-10 give each figure's VM size.
"""
from __future__ import annotations

from ..model import Difference, PaperCommand, PaperSetting, Part, Study

BOARDS = Difference(
    "4 VMs run wherever this host holds them: the paper's 2 GB boards had no 4-VM points",
    "board memory (1/2/4/8 GB) is not modelled in benchmark campaigns; on a 2 GB board the 4-VM points fail",
    affects=("vcpu1-native", "vcpu2-share", "vcpu4-share", "build-overhead", "botan-blowfish", "botan-aes"))
GUEST = Difference(
    "the VMs run virtbench's Debian 12 (bookworm) guest image, not minimal Debian 10.13 (buster) VMs with an SSH "
    "server, and have no network interface", "the image builder uses deb.debian.org, which no longer carries "
    "buster; the guest runs virtbench's agent over virtio-serial instead of sshd",
    "newer tools in the guest (7-Zip 26, GCC 12; Botan 2.19.3 as the paper's, Debian's build of it); native runs "
    "the same binaries, so ratios compare alike", settings=("campaign.image.release",))
FRESH_VMS = Difference(
    "each VM boots fresh from a copy-on-write overlay of one disk for its execution (the second and fourth VMs "
    "just before it) and is removed after, where the paper's four installed VMs lived on",
    "an instance per unit of the run, nothing left behind", "caches start cold and a first write allocates "
    "the overlay's clusters (dd's write)")
NATIVE_COPIES = Difference(
    "native also runs 2 and 4 copies at once, and each N-VM point's ratio in the tables is to native running N "
    "copies; the CPU shares of Figs. 11-13 are judged against native running alone, as the paper's one native bar",
    "the same load on both sides shows what the VMs themselves cost; the paper's figures set every VM count "
    "beside one native run", "a table ratio near 1 at 2 and 4 VMs where the paper's figure shows about 1/2 and "
    "1/4; Botan, the build and dd are judged on the tables' ratios",
    affects=("botan-blowfish", "botan-aes", "build-overhead", "dd-read-write"))
STATISTIC = Difference(
    "each ratio is the geometric mean of the per-round ratios with a paired interval",
    "the paper averaged its runs", "the same ratio but where rounds drift or one is an outlier")
HOST = Difference(
    "this host's own disk as it is: no microSD, SSD or eMMC set-up, and an SSD's write cache is not turned off "
    "(the paper's hdparm -W 0)", "the presets do not change the host's disks; set the medium up yourself before "
    "the run", "dd's rates and the build's file work are this disk's; a write cache left on flatters writes",
    affects=("dd-read-write", "build-overhead"))
HOST_OS = Difference(
    "this host's CPU, OS, kernel and Debian's QEMU/KVM, where the paper ran Raspberry Pi OS Lite 64-bit "
    "(bullseye) on the RPi 4B and Armbian bullseye (kernel 5.19.10) on the ODROID-N2+",
    "virtbench measures the host it runs on; the boards are the paper's",
    "absolute ratings, marks and rates are this CPU's; a VM's share of native is this host's KVM's")
ROUNDS = Difference(
    "5 measured rounds after one discarded warm-up round", "the paper ran 'each experiment several times' and "
    "averaged, how many is not stated", "an interval around each value", scales=("paper",))
MICROSD = Difference(
    "the VMs' disks on this host's disk as it is, where Section 5 installed the host, KVM and the VMs on a "
    "SanDisk Extreme PRO microSD card", "the presets do not change the host's disks",
    "none expected on 7-Zip's ratings (CPU and memory bound); a VM boots faster")
SEVENZIP = Difference(
    "7zr of Debian 12's p7zip package (7-Zip 26.02 under the old name) where the paper installed p7zip 16.02",
    "Debian 12 ships no older 7-Zip; bring an image with p7zip 16.02 as `image: {rootfs: FILE}`",
    "ratings on one scale with native (same binary); absolute MIPS not comparable with the paper's")
SEVENZIP_QUICK = Difference(
    "quick: one pass (`7zr b 1`) and dictionaries up to 2^22 B (`-md22`)", "7-Zip's default runs about 40 s per "
    "thread count", "a shorter measurement, same ratings scale", adds=("1", "-md22"), scales=("quick",))

STUDY = Study(
    "002", "KVM virtual machines on ARM single-board computers",
    "1, 2 and 4 VMs at once with 192/256/512 MB and 1/2/4 vCPUs: 7-zip compression rating, dd direct "
    "read/write, CPU and memory marks (open equivalents of PassMark), a timed parallel build, Botan "
    "Blowfish and AES-256; AES support from the CPU flags",
    "002",
    (
        Part("vm-memory", "7-zip with 1 and 2 threads in 1 and 2 VMs of 192 and 256 MB (Figs. 2-5)",
             needs=("kvm",),
             commands=(PaperCommand("Fig. 1, lines 02-03", "7zip", ("7zr", "b", "-mmt{threads}"),
                                    given={"threads": [1, 2]}),),
             settings=(PaperSetting("Section 5", "platform:qemu", {"vcpus": 2, "memory": [192 << 20, 256 << 20]}),
                       PaperSetting("Section 4", "campaign", {"image.release": "buster"}),
                       PaperSetting("Section 5", "benchmark:7zip", {"instances": [1, 2]},
                                    note="natively, in 1 VM, in 2 VMs at once")),
             differences=(
                 Difference("the 1 GB boards' crash with 2 VMs of 256 MB is not reproduced",
                            "the host's memory is not confined in benchmark campaigns (only density's host_memory: "
                            "confines it): the VMs run on whatever memory this host has", affects=("ram-crash",)),
                 Difference("Figs. 2-5's 7-Zip ratings are measured and shown, only the 1 GB boards' crash is "
                            "a statement judged on this part", "the paper states no native against VM relation "
                            "for the ratings"),
                 SEVENZIP, SEVENZIP_QUICK, GUEST, BOARDS, HOST_OS, ROUNDS, MICROSD, FRESH_VMS, STATISTIC),
             duration={"quick": "about 5 min", "paper": "about 40 min"}),
        Part("vm-suite", "1, 2 and 4 VMs of 512 MB with 1/2/4 vCPUs: dd, CPU (sysbench cpu), memory (sysbench "
                         "memory read/write), build, Botan (Figs. 7-21)", needs=("kvm",),
             differs="sysbench cpu and sysbench memory replace the proprietary PassMark marks; uClibc-ng "
                     "replaces httpd",
             commands=(
                 PaperCommand("Fig. 6, line 06", "dd", ("dd", "if=/dev/zero", "of=<testFile>", "bs={bs}",
                                                        "count={count}", "oflag=direct"),
                              role="write", given={"bs": "8M", "count": 256}, fills={"<testFile>": "{write_file}"}),
                 PaperCommand("Fig. 6, line 05", "dd", ("dd", "if=<testfile>", "of=/dev/null", "bs={bs}",
                                                        "count={count}", "iflag=direct"),
                              role="read", given={"bs": "8M", "count": 256}, fills={"<testfile>": "{read_file}"},
                              note="an existing file, not the one just written: `read_file: other`; the text "
                                   "calls both files 1 GB, the command's 256 blocks of 8M are 2 GiB: the preset "
                                   "runs the command"),
                 PaperCommand("Fig. 16, line 13", "build", ("time", "make", "-s", "-j", "<numJobs>"), role="make",
                              note="httpd's, after `./configure --with-included-apr; make clean`; here "
                                   "uClibc-ng's after `make defconfig`"),
                 PaperCommand("Fig. 18, line 07", "botan", ("botan", "speed", "--msec={msec}", "Blowfish",
                                                            "AES-256"), given={"msec": 15000},
                              note="./botan of Botan 2.19.3 built from source; here Debian's botan"),
             ),
             settings=(PaperSetting("Sections 6-10", "platform:qemu", {"memory": 512 << 20, "vcpus": [1, 2, 4]},
                                    note="1, 2 and 4 vCPUs in Section 7 (CPU marks); 2 vCPUs in Sections 6, 8-10"),
                       PaperSetting("Section 4", "campaign", {"image.release": "buster"}),
                       PaperSetting("Section 6", "benchmark:dd", {"instances": [1, 2, 4], "read_file": "other"}),
                       PaperSetting("Section 9, Fig. 16", "benchmark:build", {"jobs": [2, "cpus"]},
                                    note="`time make -s -j <numJobs>`: 2 jobs, and natively every core"),
                       PaperSetting("Section 10", "benchmark:botan", {"instances": [1, 2, 4]})),
             differences=(
                 Difference("sysbench cpu (events per second, 4 threads everywhere) stands in for PassMark's CPU "
                            "Mark, which used every core given", "PerformanceTest is proprietary; 4 threads fill "
                            "the paper's 4-core board and a 4-vCPU VM", "the shares of Figs. 11-13 compare alike "
                            "up to 4 CPUs; on a host with more, native uses 4 of them (the ODROID-N2+'s 6 cores "
                            "against a 4-vCPU VM do not show)", affects=("vcpu1-native", "vcpu2-share",
                                                                         "vcpu4-share")),
                 Difference("sysbench memory read and write of a 64 MiB block stand in for PassMark's Memory Read "
                            "Uncached and Memory Write (Figs. 14, 15)",
                            "PerformanceTest is proprietary; a block beyond the caches is read or written"),
                 Difference("uClibc-ng (about 800 C files, `make -j N`) is built where the paper built Apache "
                            "httpd 2.4.54 (`make -s -j N`), timed by the clock around make, not by `time`; make's "
                            "output goes to a log instead of -s silencing it",
                            "no httpd source package in the image; a real C code base of similar size; the "
                            "log keeps the output for a failed build", "build times are uClibc-ng's; native "
                            "against a VM compares alike", affects=("build-overhead",), drops=("time", "-s")),
                 Difference("Debian's botan (2.19.3 in bookworm) with `--buf-size=1024` (Botan's default, stated)",
                            "the paper built 2.19.3 from source; the same version", adds=("--buf-size=1024",)),
                 Difference("quick: `--msec=300`", "15 s per algorithm and direction is the paper scale's",
                            scales=("quick",)),
                 Difference("every benchmark runs in the 1, 2 and 4-vCPU VMs", "the paper's dd, memory, build and "
                            "Botan figures use 2-vCPU VMs only: the extra points are extra, the paper's are there",
                            "claims judged over every point (dd's read over write, Botan's) also take the extra "
                            "points: one of them outside makes the claim differ",
                            affects=("dd-read-write", "botan-blowfish", "botan-aes")),
                 Difference("dd writes first (measured) and then reads a file written, unmeasured, in the same "
                            "execution just before, the page cache dropped", "the paper read 'an existing "
                            "testfile' first, then wrote; a fresh instance has no file of its own",
                            "the read file's blocks are freshly allocated, not aged", affects=("dd-read-write",)),
                 Difference("Figs. 14-15 (memory read and write marks) are measured and shown, no statement of "
                            "the paper is judged on them; Botan's decrypt rates are measured, its 'encrypting or "
                            "decrypting requires a similar effort' is not judged", "the paper states no native "
                            "against VM relation for them that a ratio could be held to"),
                 Difference("the paper's statements comparing boards (RPi 3B, 3B+, 4B, ODROID-N2+) and storage media "
                            "(microSD, eMMC, SSD) with each other are not listed", "a run measures one host with "
                            "its own disk: such a statement needs one run per board or medium, compared by hand"),
                 HOST, GUEST, BOARDS, HOST_OS, ROUNDS, FRESH_VMS, NATIVE_COPIES, STATISTIC),
             duration={"quick": "about 15 min", "paper": "about 3 h"}),
    ),
)
