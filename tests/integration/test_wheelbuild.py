"""#20: a dependency without a wheel for a host's platform is built from its sdist, here, in an
emulated chroot of the host's architecture: hdrhistogram has no aarch64 wheel on PyPI.

The build bootstraps a Debian arm64 chroot with a compiler under qemu-user: minutes on 2
cores, so integration + slow, and opt-in (VIRTBENCH_TEST_ARM=1) like the other ARM tests.
"""
from __future__ import annotations

import os
import time
import zipfile

import pytest

from hostsupport.qemu_host import OPT_IN
from virtbench.images.arch import emulation
from virtbench.remote import wheelbuild

pytestmark = [pytest.mark.integration, pytest.mark.slow]

EM_AARCH64 = 183
"""ELF e_machine of AArch64."""


def test_hdrhistogram_is_built_for_aarch64_from_its_sdist(tmp_path):
    if not os.environ.get(OPT_IN):
        pytest.skip(f"bootstraps an emulated arm64 chroot with a compiler (minutes): set {OPT_IN}=1")
    if not emulation("arm64").ok:
        pytest.skip("needs qemu-user through binfmt_misc (tools/prepare-tests)")
    logs: list[str] = []
    t0 = time.monotonic()
    [built] = wheelbuild.build_wheels(["hdrhistogram==0.10.8"], "arm64", "3.11", tmp_path, logs.append)
    first = time.monotonic() - t0
    print(f"hdrhistogram for arm64 built in {first:.0f} s")
    assert built.wheel.name.startswith("hdrhistogram-0.10.8-cp311-cp311-linux_aarch64"), built.wheel.name
    assert "emulated bookworm/arm64 chroot" in built.how and "qemu-user" in built.how
    assert built.wheel.parent.name == f"{built.sdist_sha256[:16]}-cp311-arm64"
    with zipfile.ZipFile(built.wheel) as z:
        libs = [n for n in z.namelist() if n.endswith(".so")]
        assert libs, z.namelist()
        head = z.read(libs[0])[:20]
    assert head[:4] == b"\x7fELF" and int.from_bytes(head[18:20], "little") == EM_AARCH64
    t1 = time.monotonic()
    [again] = wheelbuild.build_wheels(["hdrhistogram==0.10.8"], "arm64", "3.11", tmp_path, logs.append)
    assert again.wheel == built.wheel and "cached" in again.how
    assert time.monotonic() - t1 < 60
    assert not list(tmp_path.glob("vb-wheelbuild-*"))
