"""build: wall time of `make -j N` compiling C code inside the instance (seeds/002).

The KVM study timed an Apache httpd build with `make -j N`. The instance has no network and
Debian ships no httpd source as a binary package, so the code base comes from the image:

- `generated` (default, quick): `files` C modules written from one fixed template plus a
  main.c and a Makefile. Every module has its own copy of sorting, a switch state machine,
  a small matrix product and hashing, so gcc -O2 does real optimisation work per file. The
  code is the same on every platform and every run; the program is linked and run once
  (`vb:check`), so a broken build cannot pass for a fast one.
- `uclibc-ng`: the real uClibc-ng C library (package uclibc-source: ~800 C files, Kbuild
  style Makefiles, no autotools), configured with `make defconfig` before the clock starts.
  It needs kernel headers in one directory; Debian splits them (asm/ lives under the
  multiarch directory), so the script links linux/, asm-generic/, mtd/ and the multiarch
  asm/ into one. 66-90 s at -j2 on the 2-core development machine (x86_64; defconfig
  follows the build machine's architecture, other architectures are untested).

Generating, unpacking and configuring happen before the clock starts; only the make step is
timed, inside the instance, with `date +%s.%N` (nanosecond resolution, no process start-up
or platform exec cost). The command is `sh -c SCRIPT sh WORKDIR CODEBASE JOBS FILES`: one
constant script, the values arrive as positional parameters and are never pasted into
shell text. A failed step shows the end of its log on stderr.
"""
from __future__ import annotations

import re
import shlex
from decimal import Decimal
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from ..errors import ParseError
from .base import Benchmark, Metric, Params, search

MAKE = 'make -j "$jobs"'
"""The timed step (the script runs it with the code base's own arguments after it)."""

_SCRIPT = r"""cd "$1" || exit 1
codebase=$2 jobs=$3 files=$4
[ "$jobs" = cpus ] && jobs=$(nproc)
fail() { echo "vb: exit status $1, end of $2:" >&2; tail -n 30 "$2" >&2; exit "$1"; }
case $codebase in
generated)
  mkdir src && cd src || exit 1
  printf '%s\n' '#include <stdlib.h>' '#include <string.h>' > vb.h
  cat > template <<'VB_TEMPLATE'
@TEMPLATE@VB_TEMPLATE
  i=0
  while [ "$i" -lt "$files" ]; do
    sed "s/NN/$i/g" template > "mod$i.c" || exit 1
    i=$((i + 1))
  done
  {
    echo '#include <stdio.h>'
    i=0
    while [ "$i" -lt "$files" ]; do echo "unsigned long vb_module_$i(unsigned);"; i=$((i + 1)); done
    echo 'int main(void)'
    echo '{'
    echo '    unsigned long sum = 0;'
    i=0
    while [ "$i" -lt "$files" ]; do echo "    sum = sum * 7UL + vb_module_$i(${i}U);"; i=$((i + 1)); done
    printf '%s\n' '    printf("vb:check %lu\n", sum);'
    echo '    return 0;'
    echo '}'
  } > main.c || exit 1
  cat > Makefile <<'VB_MAKEFILE'
CC = gcc
CFLAGS = -O2 -Wall
OBJS = $(patsubst %.c,%.o,$(wildcard mod*.c)) main.o
vbprog: $(OBJS)
@TAB@$(CC) -o $@ $(OBJS)
%.o: %.c vb.h
@TAB@$(CC) $(CFLAGS) -c -o $@ $<
VB_MAKEFILE
  set --
  ;;
uclibc-ng)
  set -- /usr/src/uClibc-ng-*.tar.xz
  if [ $# -ne 1 ] || [ ! -f "$1" ]; then echo "vb: expected one /usr/src/uClibc-ng-*.tar.xz" >&2; exit 1; fi
  tar -xJf "$1" || exit 1
  cd uClibc-ng-* || exit 1
  mkdir vb-kh || exit 1
  for d in linux asm-generic mtd; do ln -s "/usr/include/$d" "vb-kh/$d" || exit 1; done
  ln -s "/usr/include/$(gcc -print-multiarch)/asm" vb-kh/asm || exit 1
  make defconfig > ../vb-defconfig.log 2>&1 || fail $? ../vb-defconfig.log
  set -- "KERNEL_HEADERS=$PWD/vb-kh"
  ;;
*) echo "vb: unknown code base $codebase" >&2; exit 2 ;;
esac
start=$(date +%s.%N)
@MAKE@ "$@" > ../vb-build.log 2>&1
rc=$?
end=$(date +%s.%N)
if [ "$rc" -ne 0 ]; then fail "$rc" ../vb-build.log; fi
echo "vb:objects $(find . -type f \( -name '*.o' -o -name '*.os' -o -name '*.oS' \) | wc -l)"
if [ "$codebase" = generated ]; then
  ./vbprog || exit 1
elif [ -s lib/libc.a ]; then
  echo "vb:check lib/libc.a"
fi
echo "vb:build jobs=$jobs start=$start end=$end"
echo vb:done
"""
_TEMPLATE = r"""/* virtbench generated module NN: deterministic, no I/O, exercises the optimizer */
#include "vb.h"

struct rec_NN {
    unsigned a, b;
    double w;
    unsigned char tag[16];
};

static unsigned mix_NN(unsigned x)
{
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return x + NNU;
}

static void fill_NN(struct rec_NN *r, int n, unsigned seed)
{
    for (int i = 0; i < n; i++) {
        r[i].a = mix_NN(seed + (unsigned)i);
        r[i].b = mix_NN(r[i].a ^ 0x9e3779b9U);
        r[i].w = (double)(r[i].a % 1000U) / 7.0 + (double)(r[i].b % 13U);
        for (int k = 0; k < 16; k++)
            r[i].tag[k] = (unsigned char)('a' + (r[i].b >> (k % 24)) % 26U);
    }
}

static int cmp_NN(const void *x, const void *y)
{
    const struct rec_NN *p = x, *q = y;
    if (p->w != q->w)
        return p->w < q->w ? -1 : 1;
    if (p->a != q->a)
        return p->a < q->a ? -1 : 1;
    return memcmp(p->tag, q->tag, sizeof p->tag);
}

static unsigned scan_NN(const unsigned char *s, int n)
{
    unsigned st = NNU % 7U, acc = 0;
    for (int i = 0; i < n; i++) {
        switch ((st + s[i]) % 12U) {
        case 0: acc += s[i]; st = 3; break;
        case 1: acc ^= acc << 3; st = 7; break;
        case 2: acc = acc * 33U + s[i]; st = 1; break;
        case 3: acc -= s[i] * 5U; st = 11; break;
        case 4: acc = (acc >> 1) | (acc << 31); st = 2; break;
        case 5: acc += 0x1234U; st = 9; break;
        case 6: acc ^= s[i] * 0x01010101U; st = 4; break;
        case 7: acc = acc * 7U + 3U; st = 0; break;
        case 8: acc += acc >> 5; st = 10; break;
        case 9: acc ^= 0xdeadbeefU; st = 6; break;
        case 10: acc -= acc >> 7; st = 8; break;
        default: acc += (unsigned)i; st = 5; break;
        }
    }
    return acc ^ st;
}

static void matmul_NN(double *restrict c, const double *restrict a, const double *restrict b, int n)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double sum = 0.0;
            for (int k = 0; k < n; k++)
                sum += a[i * n + k] * b[k * n + j];
            c[i * n + j] = sum;
        }
}

static unsigned long hist_NN(const struct rec_NN *r, int n)
{
    unsigned long h[32] = {0}, out = 0;
    for (int i = 0; i < n; i++)
        h[(r[i].a ^ r[i].b) % 32U] += r[i].tag[i % 16];
    for (int i = 0; i < 32; i++)
        out = out * 31UL + h[i];
    return out;
}

unsigned long vb_module_NN(unsigned seed)
{
    enum { N = 48, M = 8 };
    struct rec_NN r[N];
    double a[M * M], b[M * M], c[M * M];
    unsigned long out;

    fill_NN(r, N, seed);
    qsort(r, N, sizeof r[0], cmp_NN);
    for (int i = 0; i < M * M; i++) {
        a[i] = r[i % N].w;
        b[i] = (double)(r[(i * 7) % N].b % 100U) / 10.0;
    }
    matmul_NN(c, a, b, M);
    out = hist_NN(r, N);
    out ^= scan_NN(r[0].tag, 16) + scan_NN(r[N - 1].tag, 16);
    for (int i = 0; i < M * M; i++)
        out = out * 3UL + (unsigned long)c[i];
    return out;
}
"""
_SCRIPT = _SCRIPT.replace("@TEMPLATE@", _TEMPLATE).replace("@TAB@", "\t").replace("@MAKE@", MAKE)

_TIMES = r"^vb:build jobs=(\d+) start=(\d+\.\d{9}) end=(\d+\.\d{9})$"
_OBJECTS = r"^vb:objects (\d+)$"
_CHECK = r"^vb:check (\S+)$"
_DONE = r"^vb:done$"


class BuildParams(Params):
    codebase: Literal["generated", "uclibc-ng"] = Field(
        "generated",
        description="'generated': `files` template modules (quick); 'uclibc-ng': the real "
        "uClibc-ng library, about 800 C files (the closest to the KVM study's httpd build)",
    )
    jobs: int | Literal["cpus"] = Field(
        2, description="parallel compile jobs (make -j, 1..1024), or `cpus`: the instance's CPU count (nproc: the "
                       "host's natively, the vCPUs in a VM; the KVM study's 'native with the maximum number of jobs')")

    @field_validator("jobs")
    @classmethod
    def _jobs(cls, v: int | str) -> int | str:
        if isinstance(v, int) and not 1 <= v <= 1024:
            raise ValueError("jobs must be 1..1024 or cpus")
        return v
    files: int = Field(
        100, ge=1, le=20_000,
        description="generated modules (~0.05-0.1 s of gcc -O2 each); only for 'generated'",
    )

    @model_validator(mode="after")
    def _check(self) -> BuildParams:
        if self.codebase != "generated" and "files" in self.model_fields_set:
            raise ValueError("files applies only to codebase 'generated'")
        return self


class Build(Benchmark):
    """Wall time of the make step of a C build, timed inside the instance."""

    name: ClassVar[str] = "build"
    tool: ClassVar[str] = "make"
    packages: ClassVar[tuple[str, ...]] = ("gcc", "make", "libc6-dev", "xz-utils", "uclibc-source")
    Params: ClassVar[type[Params]] = BuildParams
    description: ClassVar[str] = "make -j N: wall time of a C build (generated modules or uClibc-ng)"
    study: ClassVar[dict[str, Any]] = {"codebase": "uclibc-ng"}
    """The `full` profile: KVM study: a real C code base (httpd there; uClibc-ng here)."""
    script: ClassVar[str] = _SCRIPT

    params: BuildParams

    def metrics(self) -> list[Metric]:
        p = self.params
        what = (f"{p.files} generated C modules" if p.codebase == "generated"
                else "uClibc-ng (defconfig)")
        return [Metric("build_s", "s", False, "application",
                       f"make -j{'$(nproc)' if p.jobs == 'cpus' else p.jobs} of {what} with gcc -O2, wall time of the make step")]

    def command(self, workdir: str) -> list[str]:
        p = self.params
        files = p.files if p.codebase == "generated" else 0
        return ["sh", "-c", _SCRIPT, "sh", workdir, p.codebase, str(p.jobs), str(files)]

    def phases(self, workdir: str) -> dict[str, list[str]]:
        """The timed make as an argv, jobs filled (`cpus`: the instance's nproc, known in it only):
        what a paper's printed build line is held against."""
        jobs = "$(nproc)" if self.params.jobs == "cpus" else str(self.params.jobs)
        return {"make": [w.replace("$jobs", jobs) for w in shlex.split(MAKE)]}

    def parse(self, stdout: str, stderr: str = "", source: str = "<output>") -> dict[str, float]:
        p = self.params
        search(_DONE, stdout, self.tool, source, re.M)
        search(_CHECK, stdout, self.tool, source, re.M)
        objects = int(search(_OBJECTS, stdout, self.tool, source, re.M).group(1))
        # generated: one per module plus main.o; uClibc-ng: .o/.os/.oS (static, shared, PIE)
        expected = p.files + 1 if p.codebase == "generated" else None
        if (expected is not None and objects != expected) or objects <= 0:
            want = f"vb:objects {expected}" if expected is not None else "vb:objects > 0"
            raise ParseError(self.tool, f"{want} (got {objects})", source)
        times = search(_TIMES, stdout, self.tool, source, re.M)
        if p.jobs == "cpus" and int(times.group(1)) < 1 or p.jobs != "cpus" and int(times.group(1)) != p.jobs:
            raise ParseError(self.tool, f"vb:build jobs={p.jobs} (got {times.group(1)})", source)
        seconds = float(Decimal(times.group(3)) - Decimal(times.group(2)))
        if seconds <= 0:
            raise ParseError(self.tool, f"end after start in {times.group(0)!r}", source)
        return {"build_s": seconds}

    def version_command(self) -> list[str]:
        return ["gcc", "--version"]

    def execution_timeout(self) -> float:
        p = self.params
        if p.codebase == "uclibc-ng":
            return 7200.0  # 90 s on 2 x86 cores; slow boards and emulated VMs take far longer
        # 2 s per module and job at worst, plus writing the sources
        return 2.0 * p.files / (1 if p.jobs == "cpus" else p.jobs) + 0.05 * p.files + 300.0
