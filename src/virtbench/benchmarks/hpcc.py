"""HPC Challenge: HPL, DGEMM, STREAM and RandomAccess, the HPC part of the LSBS suite (seeds/003).

hpcc reads `hpccinf.txt` from its current directory and appends to `hpccoutf.txt` there, and
an argv cannot change directory or write a file. So the command is `sh -c SCRIPT sh ARGS...`
with one constant script (`_SCRIPT`): every value travels as a positional parameter ("$1" ...)
and is never pasted into shell text, so no parameter can turn into shell syntax. The script
writes the input file, launches `mpirun ... hpcc`, and prints the summary section of
`hpccoutf.txt` (the `key=value` lines) to stdout; if hpcc stopped early, the end of the file
goes to stderr instead, so the reason is recorded with the failed sample. hpcc exits 0 even
when its tests fail (a failed allocation leaves zero rates and uninitialised garbage in the
summary), so the parser trusts only `Success=1` and positive values.

Sizing happens inside the instance, because only the instance knows its cores and memory:
the process count defaults to `nproc` (honours cpusets, counts a VM's vCPUs) and with
`memory_fraction` the HPL order N is sqrt(fraction * memory / 8), rounded down to a multiple
of NB, where memory is MemTotal capped by the cgroup limit (a container's /proc/meminfo shows
the host's memory; the limit read is the one visible at /sys/fs/cgroup, i.e. the container's
own under Docker, Podman and LXC, none for a chroot or bare metal). P x Q is the most square
factorisation of the process count.

mpirun flags: `--allow-run-as-root` (commands run as root in every instance),
`--oversubscribe` (a cgroup may grant fewer slots than processes), `--bind-to none` (the
instance's cpuset decides, the same on every platform), `--mca pml ob1 --mca btl self,vader`
(one node: shared memory only, the same transport everywhere, no probing of network
interfaces or UCX devices that differ between platforms) and
`btl_vader_single_copy_mechanism none` (CMA, process_vm_readv, needs ptrace rights that
containers drop: Docker runs print "Read -1, expected ..., errno = 1", open-mpi/ompi#4948).

BLAS: hpcc links libblas.so.3. The Debian default is the netlib reference BLAS, an order of
magnitude slower than OpenBLAS (DGEMM here: about 6 vs 80 GFLOP/s per process), so a result
would say more about the BLAS than the platform. The image gets libopenblas0-serial, which
takes over the libblas.so.3 alternative (serial: one MPI process per core, no BLAS threads).
"""
from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any, ClassVar

from pydantic import Field, model_validator

from ..errors import ParseError
from .base import Benchmark, Category, Metric, Params, search

_SCRIPT = r"""cd "$1" || exit 1
n=$2 nb=$3 np=$4 permille=$5 max_n=$6
if [ "$np" -eq 0 ]; then np=$(nproc) || exit 1; fi
if [ "$n" -eq 0 ]; then
  kib=$(sed -n 's/^MemTotal: *\([0-9]*\) kB$/\1/p' /proc/meminfo)
  mem=$((kib * 1024))
  for f in /sys/fs/cgroup/memory.max /sys/fs/cgroup/memory/memory.limit_in_bytes; do
    lim=$(cat "$f" 2>/dev/null) || continue
    case $lim in ''|*[!0-9]*) ;; *) if [ "$lim" -lt "$mem" ]; then mem=$lim; fi ;; esac
  done
  t=$((mem / 8 / 1000 * permille))
  x=$t y=$(((t + 1) / 2))
  while [ "$y" -lt "$x" ]; do x=$y y=$(((x + t / x) / 2)); done
  if [ "$x" -gt "$max_n" ]; then x=$max_n; fi
  n=$((x / nb * nb))
  if [ "$n" -lt "$nb" ]; then echo "vb: memory $mem B too small for one NB block" >&2; exit 1; fi
  echo "vb:memory bytes=$mem fraction_permille=$permille"
fi
p=1 i=1
while [ $((i * i)) -le "$np" ]; do
  if [ $((np % i)) -eq 0 ]; then p=$i; fi
  i=$((i + 1))
done
q=$((np / p))
printf '%s\n' 'HPLinpack benchmark input file' 'Innovative Computing Laboratory, University of Tennessee' \
  'HPL.out      output file name (if any)' '8            device out (6=stdout,7=stderr,file)' \
  '1            # of problems sizes (N)' "$n         Ns" '1            # of NBs' "$nb           NBs" \
  '0            PMAP process mapping (0=Row-,1=Column-major)' '1            # of process grids (P x Q)' \
  "$p            Ps" "$q            Qs" '16.0         threshold' '1            # of panel fact' \
  '2            PFACTs (0=left, 1=Crout, 2=Right)' '1            # of recursive stopping criterium' \
  '4            NBMINs (>= 1)' '1            # of panels in recursion' '2            NDIVs' \
  '1            # of recursive panel fact.' '1            RFACTs (0=left, 1=Crout, 2=Right)' \
  '1            # of broadcast' '1            BCASTs (0=1rg,1=1rM,2=2rg,3=2rM,4=Lng,5=LnM)' \
  '1            # of lookahead depth' '1            DEPTHs (>=0)' '2            SWAP (0=bin-exch,1=long,2=mix)' \
  '64           swapping threshold' '0            L1 in (0=transposed,1=no-transposed) form' \
  '0            U  in (0=transposed,1=no-transposed) form' '1            Equilibration (0=no,1=yes)' \
  '8            memory alignment in double (> 0)' \
  '##### This line (no. 32) is ignored (it serves as a separator). ######' \
  '0            Number of additional problem sizes for PTRANS' '1200 10000 30000  values of N' \
  '0            number of additional blocking sizes for PTRANS' '40 9 8 13 13 20 16 32 64  values of NB' \
  > hpccinf.txt || exit 1
rm -f hpccoutf.txt
echo "vb:hpcc n=$n nb=$nb p=$p q=$q processes=$np"
mpirun --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1 --mca btl self,vader \
  --mca btl_vader_single_copy_mechanism none -np "$np" hpcc
rc=$?
if grep -q '^End of HPC Challenge tests' hpccoutf.txt 2>/dev/null; then
  sed -n '/^Begin of Summary section/,$p' hpccoutf.txt
elif [ -f hpccoutf.txt ]; then
  tail -n 30 hpccoutf.txt >&2
fi
exit "$rc"
"""

_SETUP = r"^vb:hpcc n=(\d+) nb=(\d+) p=(\d+) q=(\d+) processes=(\d+)$"
_BEGIN = r"^Begin of Summary section\.$"
_END_SUMMARY = r"^End of Summary section\.$"
_END = r"^End of HPC Challenge tests\.$"
_KEY_VALUE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$")

# metric name -> (summary key, unit, category, factor applied to the value, what it is)
_METRICS: dict[str, tuple[str, str, Category, int, str]] = {
    "hpl_gflops": ("HPL_Tflops", "GFLOP/s", "cpu", 1000,
                   "HPL: LU solve of a dense N x N system over all processes"),
    "star_dgemm_gflops": ("StarDGEMM_Gflops", "GFLOP/s", "cpu", 1,
                          "DGEMM, every process at once, mean per process"),
    "single_dgemm_gflops": ("SingleDGEMM_Gflops", "GFLOP/s", "cpu", 1,
                            "DGEMM, one process while the others wait"),
    "star_stream_triad": ("StarSTREAM_Triad", "GB/s", "memory", 1,
                          "STREAM triad, every process at once, mean per process"),
    "single_stream_triad": ("SingleSTREAM_Triad", "GB/s", "memory", 1,
                            "STREAM triad, one process while the others wait"),
    "star_random_access_gups": ("StarRandomAccess_GUPs", "GUP/s", "memory", 1,
                                "RandomAccess, every process at once, mean per process"),
    "single_random_access_gups": ("SingleRandomAccess_GUPs", "GUP/s", "memory", 1,
                                  "RandomAccess, one process while the others wait"),
}


class HpccParams(Params):
    n: int = Field(
        2000, ge=100, le=1_000_000,
        description="HPL matrix order N (8*N^2 bytes over all processes). 2000 is a quick check: "
        "STREAM vectors then fit in a large L3 cache. LSBS: N from memory, set memory_fraction",
    )
    memory_fraction: float | None = Field(
        None, gt=0.0, le=0.9,
        description="derive N inside the instance as sqrt(fraction*memory/8), memory = MemTotal "
        "capped by the cgroup limit; excludes n. HPL practice: 0.8 (hours on big hosts, see max_n)",
    )
    max_n: int = Field(
        20000, ge=100, le=1_000_000,
        description="upper bound for a derived N (HPL needs 2/3*N^3 flops: N=20000 takes "
        "minutes at 10-50 GFLOP/s); also sizes the timeout",
    )
    nb: int = Field(192, ge=1, le=1024, description="HPL block size NB (192-256 suits OpenBLAS)")
    processes: int | None = Field(
        None, ge=1, le=1024,
        description="MPI processes; default: `nproc` inside the instance (one per usable CPU)",
    )

    @model_validator(mode="after")
    def _check(self) -> HpccParams:
        if self.memory_fraction is not None and "n" in self.model_fields_set:
            raise ValueError("give n or memory_fraction, not both")
        if self.memory_fraction is None and self.n < self.nb:
            raise ValueError(f"n ({self.n}) must be at least nb ({self.nb})")
        if self.memory_fraction is not None and self.max_n < self.nb:
            raise ValueError(f"max_n ({self.max_n}) must be at least nb ({self.nb})")
        return self


class Hpcc(Benchmark):
    """HPL, DGEMM, STREAM triad and RandomAccess from one hpcc run under mpirun."""

    name: ClassVar[str] = "hpcc"
    tool: ClassVar[str] = "hpcc"
    packages: ClassVar[tuple[str, ...]] = ("hpcc", "libopenblas0-serial")
    Params: ClassVar[type[Params]] = HpccParams
    description: ClassVar[str] = "HPC Challenge: HPL, DGEMM, STREAM triad, RandomAccess (MPI)"
    study: ClassVar[dict[str, Any]] = {"memory_fraction": 0.5}
    """The `full` profile: LSBS: problem size from memory."""
    script: ClassVar[str] = _SCRIPT

    params: HpccParams

    def metrics(self) -> list[Metric]:
        p = self.params
        size = (f"N = sqrt({p.memory_fraction:g} x memory / 8) <= {p.max_n}"
                if p.memory_fraction is not None else f"N={p.n}")
        procs = f"{p.processes} process(es)" if p.processes else "one process per CPU (nproc)"
        ctx = f"{size}, NB={p.nb}, {procs}"
        return [Metric(name, unit, True, category, f"{what}; {ctx}")
                for name, (_, unit, category, _, what) in _METRICS.items()]

    def command(self, workdir: str) -> list[str]:
        p = self.params
        derive = p.memory_fraction is not None
        return [
            "sh", "-c", _SCRIPT, "sh", workdir,
            "0" if derive else str(p.n), str(p.nb), str(p.processes or 0),
            str(round(p.memory_fraction * 1000)) if p.memory_fraction is not None else "0", str(p.max_n),
        ]

    def parse(self, stdout: str, stderr: str = "", source: str = "<output>") -> dict[str, float]:
        p = self.params
        setup = search(_SETUP, stdout, self.tool, source, re.M)
        n, nb, _, _, processes = (int(g) for g in setup.groups())
        wanted = (p.n if p.memory_fraction is None else n, p.nb, p.processes or processes)
        if (n, nb, processes) != wanted:
            expected = f"'vb:hpcc n={wanted[0]} nb={wanted[1]} ... processes={wanted[2]}'"
            raise ParseError(self.tool, f"{expected} (got {setup.group(0)!r})", source)
        search(_END, stdout, self.tool, source, re.M)
        begin = search(_BEGIN, stdout, self.tool, source, re.M)
        end = search(_END_SUMMARY, stdout[begin.end():], self.tool, source, re.M)
        summary: dict[str, str] = {}
        for line in stdout[begin.end(): begin.end() + end.start()].splitlines():
            kv = _KEY_VALUE.match(line)
            if kv:
                summary[kv.group(1)] = kv.group(2).strip()

        def value(key: str) -> Decimal:
            if key not in summary:
                raise ParseError(self.tool, f"{key}=<number> in the summary section", source)
            try:
                number = Decimal(summary[key])
            except InvalidOperation:
                number = Decimal("NaN")
            if not number.is_finite():
                raise ParseError(self.tool, f"{key}=<number> (got {summary[key]!r})", source)
            return number

        # Success=0 when any test failed its verification (HPL residual, RandomAccess errors).
        if value("Success") != 1:
            raise ParseError(self.tool, f"Success=1 (got Success={summary['Success']})", source)
        if value("CommWorldProcs") != processes:
            expected = f"CommWorldProcs={processes} (got {summary['CommWorldProcs']})"
            raise ParseError(self.tool, expected, source)
        if value("HPL_N") != n:
            raise ParseError(self.tool, f"HPL_N={n} (got {summary['HPL_N']})", source)
        result: dict[str, float] = {}
        for name, (key, _, _, factor, _) in _METRICS.items():
            number = value(key)
            # hpcc prints -1 (HPL: -1000 GFLOP/s x 1e-3) for a test that did not run.
            if number <= 0:
                raise ParseError(self.tool, f"{key}=<positive number> (got {summary[key]})", source)
            result[name] = float(number * factor)  # Decimal: 0.0730965 TFLOP/s -> 73.0965
        return result

    def version_command(self) -> list[str]:
        # hpcc has no version option; the package version is what identifies the build.
        return ["dpkg-query", "-W", "-f", "${Package} ${Version}\n", "hpcc", "libopenblas0-serial",
                "openmpi-bin"]

    def execution_timeout(self) -> float:
        p = self.params
        n = p.max_n if p.memory_fraction is not None else p.n
        # HPL: 2/3 N^3 flops at a pessimistic 0.5 GFLOP/s; RandomAccess, FFT, PTRANS and the
        # latency tests (about 40 s with N=2000 on 2 cores) scale with the memory used.
        return 600.0 + (2.0 / 3.0) * n**3 / 0.5e9 + 8.0 * n * n / 1e8
