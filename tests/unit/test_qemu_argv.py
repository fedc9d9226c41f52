"""The qemu platform without booting anything: its command line, options, label, exec argv,
and the control channel's framing, including the real bash agent driven through a pty."""
from __future__ import annotations

import os
import pty
import subprocess
import sys
import tty
from dataclasses import replace
from pathlib import Path

import pytest
from pydantic import ValidationError

from virtbench.errors import InputError
from virtbench.images import vmdisk
from virtbench.images.agent import AGENT_SCRIPT
from virtbench.platforms.base import EXEC_ENV, Instance, Paths
from virtbench.platforms.qemu import guest
from virtbench.platforms.qemu.argv import FW_CFG_LABEL, VMSpec, kernel_cmdline, mac_address, qemu_argv
from virtbench.platforms.qemu.options import QemuOptions
from virtbench.platforms.qemu.platform import Qemu


def spec(tmp_path: Path = Path("/s"), accel="tcg", arch="x86_64", **options) -> VMSpec:
    d = tmp_path
    return VMSpec(name="vb-r1-vm-r0", run_id="r1", accel=accel, options=QemuOptions(**options),
                  kernel=d / "vmlinuz", initrd=d / "initrd.img", overlay=d / "disk.qcow2",
                  agent_socket=d / "agent.sock", qmp_socket=d / "qmp.sock", pidfile=d / "qemu.pid",
                  serial_log=d / "serial.log", arch=arch,
                  tap="vbtap" if options.get("network") == "bridge" else None,
                  address="10.237.0.7/24" if options.get("network") == "bridge" else None)


def opt(argv: list[str], flag: str) -> list[str]:
    """Every value given to flag."""
    return [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == flag]


# -- the QEMU command line ------------------------------------------------------------------
def test_defaults_tcg():
    argv = qemu_argv(spec())
    assert argv[0] == "qemu-system-x86_64"
    assert opt(argv, "-accel") == ["tcg,thread=multi"]
    assert opt(argv, "-cpu") == ["max"]
    assert opt(argv, "-smp") == ["2"]
    assert opt(argv, "-m") == ["1024M"]
    assert opt(argv, "-machine") == ["q35"]
    assert opt(argv, "-drive") == ["file=/s/disk.qcow2,format=qcow2,if=none,id=vbdisk,cache=none,aio=threads"]
    assert "virtio-blk-pci,drive=vbdisk" in opt(argv, "-device")
    assert not opt(argv, "-netdev")
    assert {"-nodefaults", "-no-user-config", "-no-reboot", "-daemonize"} <= set(argv)
    assert opt(argv, "-pidfile") == ["/s/qemu.pid"]
    assert opt(argv, "-serial") == ["file:/s/serial.log"]
    assert opt(argv, "-fw_cfg") == [f"name={FW_CFG_LABEL},string=r1"]
    assert opt(argv, "-kernel") == ["/s/vmlinuz"] and opt(argv, "-initrd") == ["/s/initrd.img"]
    assert "socket,id=vbagent,path=/s/agent.sock,server=on,wait=off" in opt(argv, "-chardev")
    assert f"virtserialport,bus=vbserial.0,chardev=vbagent,name={guest.PORT_NAME}" in opt(argv, "-device")
    assert opt(argv, "-qmp") == ["unix:/s/qmp.sock,server=on,wait=off"]


def test_kvm_uses_host_cpu():
    argv = qemu_argv(spec(accel="kvm"))
    assert opt(argv, "-accel") == ["kvm"]
    assert opt(argv, "-cpu") == ["host"]


def test_explicit_cpu_model_wins_over_accel_default():
    assert opt(qemu_argv(spec(accel="kvm", cpu="Skylake-Server,-hle")), "-cpu") == ["Skylake-Server,-hle"]
    assert opt(qemu_argv(spec(cpu="qemu64")), "-cpu") == ["qemu64"]


@pytest.mark.parametrize("cache", ["none", "writeback", "writethrough", "unsafe", "directsync"])
def test_cache_modes(cache):
    drive = opt(qemu_argv(spec(cache=cache)), "-drive")[0]
    assert f",cache={cache}," in drive


def test_aio_native_needs_direct_io():
    assert ",aio=native" in opt(qemu_argv(spec(aio="native", cache="directsync")), "-drive")[0]
    with pytest.raises(ValidationError, match="aio=native"):
        QemuOptions(aio="native", cache="writeback")


def test_virtio_scsi_bus():
    devices = opt(qemu_argv(spec(disk_bus="virtio-scsi")), "-device")
    assert "virtio-scsi-pci,id=vbscsi" in devices
    assert "scsi-hd,drive=vbdisk,bus=vbscsi.0" in devices
    assert "virtio-blk-pci,drive=vbdisk" not in devices


def test_vcpus_and_memory():
    argv = qemu_argv(spec(vcpus=4, memory="512MiB"))
    assert opt(argv, "-smp") == ["4"]
    assert opt(argv, "-m") == ["512M"]
    assert opt(qemu_argv(spec(memory="2GiB")), "-m") == ["2048M"]
    assert opt(qemu_argv(spec(memory="512M")), "-m") == ["512M"]


def test_memory_and_vcpu_bounds():
    with pytest.raises(ValidationError, match="128M"):
        QemuOptions(memory="64M")
    with pytest.raises(ValidationError):
        QemuOptions(vcpus=0)


def test_option_values_cannot_inject_arguments():
    for bad in ("max -device foo", "max\n", ""):
        with pytest.raises(ValidationError):
            QemuOptions(cpu=bad)
    with pytest.raises(ValidationError):
        QemuOptions(machine="q35,accel=kvm -x")
    with pytest.raises(ValidationError):
        QemuOptions(network="host")  # a VM has no "host network" mode


def test_network_modes():
    user = qemu_argv(spec(network="user"))
    assert opt(user, "-netdev") == ["user,id=vbnet,restrict=on"]
    assert f"virtio-net-pci,netdev=vbnet,mac={mac_address('vb-r1-vm-r0')}" in opt(user, "-device")
    bridge = qemu_argv(spec(network="bridge"))
    assert opt(bridge, "-netdev") == ["tap,id=vbnet,ifname=vbtap,script=no,downscript=no"]
    assert "virtio-net-pci,netdev=vbnet,mac=02:76:0a:ed:00:07" in opt(bridge, "-device")  # follows the address
    assert "vb.net=10.237.0.7/24" in kernel_cmdline(spec(network="bridge"))
    assert "vb.net=none" in kernel_cmdline(spec())
    assert "vb.net=user" in kernel_cmdline(spec(network="user"))


def test_cpuset_pins_the_whole_qemu_process():
    argv = qemu_argv(spec(cpuset="0-1"))
    assert argv[:4] == ["taskset", "-c", "0-1", "qemu-system-x86_64"]


def test_kernel_command_line():
    line = kernel_cmdline(spec())
    assert f"init={vmdisk.INIT_PATH}" in line
    assert f"root=LABEL={vmdisk.DISK_LABEL}" in line
    assert "console=ttyS0" in line and "panic=-1" in line and "vb.hostname=vb-r1-vm-r0" in line
    assert "console=ttyAMA0" in kernel_cmdline(spec(arch="aarch64"))


def test_aarch64():
    argv = qemu_argv(spec(arch="aarch64"))
    assert argv[0] == "qemu-system-aarch64"
    assert opt(argv, "-machine") == ["virt,gic-version=max"]
    assert opt(qemu_argv(spec(arch="aarch64", accel="kvm")), "-machine") == ["virt,gic-version=host"]


def test_armhf_boots_qemu_system_arm_virt_on_the_pl011_console():
    argv = qemu_argv(spec(arch="armv7l"))
    assert argv[0] == "qemu-system-arm" and opt(argv, "-machine") == ["virt"]
    assert "console=ttyAMA0" in kernel_cmdline(spec(arch="armv7l"))


def test_the_guest_knows_its_accelerator_and_extra_kernel_arguments(tmp_path):
    assert "vb.accel=tcg" in kernel_cmdline(spec()) and "vb.accel=kvm" in kernel_cmdline(spec(accel="kvm"))
    line = kernel_cmdline(replace(spec(), kernel_args=("cgroup_disable=memory",)))
    assert line.endswith(" cgroup_disable=memory")


def test_user_network_forwards_a_loopback_port_to_the_guest():
    argv = qemu_argv(replace(spec(network="user"), forwards=((2222, 22),)))
    assert opt(argv, "-netdev") == ["user,id=vbnet,restrict=on,hostfwd=tcp:127.0.0.1:2222-:22"]


def test_kvm_is_never_tried_for_another_architecture(tmp_path):
    from virtbench.platforms.base import Paths
    from virtbench.platforms.qemu import accel

    other = "aarch64" if accel.HOST_ARCH != "aarch64" else "x86_64"
    verdict = accel.accel_verdict(Paths(tmp_path / "s", tmp_path / "r"), arch=other)
    assert not verdict.kvm and "own architecture" in verdict.reason


def test_paths_with_commas_are_refused():
    with pytest.raises(InputError, match="comma"):
        qemu_argv(spec(tmp_path=Path("/a,b")))


def test_mac_address_is_stable_and_local():
    assert mac_address("x") == mac_address("x") != mac_address("y")
    assert mac_address("x").startswith("52:54:00:")


# -- platform identity and exec argv (no probing: accel=tcg is explicit) ------------------
def platform(**options) -> Qemu:
    return Qemu("vm", QemuOptions(accel="tcg", **options), Paths(Path("/st"), Path("/rt")))


def test_label_names_accelerator_and_vcpus():
    assert platform().label() == "qemu(tcg,2 vcpu)"
    assert platform(vcpus=4, memory="2GiB", cache="writeback").label() == \
        "qemu(tcg,4 vcpu,memory=2048MiB,cache=writeback)"


def test_describe_records_accelerator():
    d = platform().describe()
    assert d["accel_used"] == "tcg" and d["cpu_model"] == "max" and d["type"] == "qemu"
    assert d["kind"] == "vm"


def test_exec_argv_is_pure_and_carries_env_and_timeout():
    p = platform()
    inst = Instance("vb-x", "vm", "r1", {"agent": "/rt/qemu/abc/agent.sock"})
    argv = p.exec_argv(inst, ["fio", "--name=t", "a b"], timeout=30)
    assert argv[:4] == [sys.executable, "-m", "virtbench.platforms.qemu.guest", "exec"]
    assert argv[argv.index("--socket") + 1] == "/rt/qemu/abc/agent.sock"
    assert argv[argv.index("--timeout") + 1] == "30"
    assert argv[argv.index("--") + 1:] == ["fio", "--name=t", "a b"]
    envs = [argv[i + 1] for i, a in enumerate(argv) if a == "--env"]
    assert envs == [f"{k}={v}" for k, v in EXEC_ENV.items()]
    assert "--timeout" not in p.exec_argv(inst, ["true"])


# -- channel framing --------------------------------------------------------------------------
ODD = ["", " ", "a b", "tab\there", "new\nline", "back\\slash", "\\x41", "quote'\"", "$HOME",
       "*", "ünïcødé", "%b %s", "-", "=", "x", "\x01\x7f"]


def test_request_round_trip():
    line = guest.encode_request("00ff", ["printf", *ODD], timeout=2.5, stdin=b"\x00\xffdata",
                                env={"PATH": "/bin", "A_B": "x y"})
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert all(32 < c < 127 or c in b" \n" for c in line)  # plain ASCII on the wire
    req_id, argv, timeout, stdin, env = guest.decode_request(line)
    assert req_id == "00ff" and timeout == 2.5 and stdin == b"\x00\xffdata"
    assert argv == [a.encode() for a in ["printf", *ODD]]
    assert env == {"PATH": "/bin", "A_B": "x y"}


def test_request_defaults_and_errors():
    _, argv, timeout, stdin, env = guest.decode_request(guest.encode_request("1", [b"\xff"]))
    assert argv == [b"\xff"] and timeout == 0 and stdin is None and env is None
    assert guest.decode_request(guest.encode_request("1", ["cat"], stdin=b""))[3] == b""
    with pytest.raises(ValueError, match="NUL"):
        guest.encode_request("1", ["a\0b"])
    with pytest.raises(ValueError):
        guest.encode_request("1", [])
    with pytest.raises(ValueError):
        guest.encode_request("XY", ["true"])
    with pytest.raises(ValueError):
        guest.encode_request("1", ["true"], env={"A B": "1"})


def test_reply_parsing_skips_other_requests():
    reply = guest.encode_reply("abc", 3, b"\x00out\xff", b"err\n")
    assert guest.parse_reply(reply, "abc") == (3, b"\x00out\xff", b"err\n")
    assert guest.parse_reply(reply, "abd") is None  # stale reply to an earlier client
    assert guest.parse_reply(b"QUJD R abc 0  \n", "abc") is None  # tail of a cut-off reply
    assert guest.parse_reply(b"R abc 0  \n", "abc") == (0, b"", b"")
    with pytest.raises(guest.ChannelError):
        guest.parse_reply(b"R abc 0 !!! x\n", "abc")


def test_client_reports_missing_vm(tmp_path, capsys):
    assert guest.main(["exec", "--socket", str(tmp_path / "none.sock"), "--", "true"]) == guest.CLIENT_ERROR
    assert guest.MARK in capsys.readouterr().err


# -- the real agent (bash) on a pty instead of a virtio port --------------------------------
class Agent:
    def __init__(self, tmp_path: Path) -> None:
        self.master, self.slave = pty.openpty()
        slave = self.slave  # kept open: the master would read EIO until the agent opens it
        tty.setraw(slave)  # no echo, no line editing: bytes pass as on a virtio port
        script = tmp_path / "vb-agent"
        script.write_text(AGENT_SCRIPT)
        self.proc = subprocess.Popen(["bash", str(script), os.ttyname(slave), str(tmp_path / "work")],
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        self.buf = b""

    def call(self, argv, **kw) -> tuple[int, bytes, bytes]:
        req_id = os.urandom(4).hex()
        os.write(self.master, guest.encode_request(req_id, argv, **kw))
        while True:
            while b"\n" not in self.buf:
                self.buf += os.read(self.master, 1 << 16)
            line, self.buf = self.buf.split(b"\n", 1)
            got = guest.parse_reply(line + b"\n", req_id)
            if got is not None:
                return got

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()
        os.close(self.master)
        os.close(self.slave)


@pytest.fixture
def agent(tmp_path):
    a = Agent(tmp_path)
    yield a
    a.close()


def test_agent_status_and_streams(agent):
    assert agent.call(["sh", "-c", "echo out; echo err >&2; exit 3"]) == (3, b"out\n", b"err\n")
    assert agent.call(["true"]) == (0, b"", b"")
    status, _, err = agent.call(["/nonexistent/cmd"])
    assert status == 127 and b"nonexistent" in err


def test_agent_passes_arguments_byte_exact(agent):
    args = [a.encode() for a in ODD] + [bytes(range(1, 256)).replace(b"\n", b"")]
    status, out, _ = agent.call(["printf", "%s\\0", *args])
    assert status == 0
    assert out.split(b"\0")[:-1] == args


def test_agent_binary_and_large_output(agent, tmp_path):
    blob = os.urandom(3 << 20)
    (tmp_path / "blob").write_bytes(blob)
    assert agent.call(["cat", str(tmp_path / "blob")]) == (0, blob, b"")
    assert agent.call(["cat"], stdin=b"\x00\x01\xff" * 1000)[1] == b"\x00\x01\xff" * 1000


def test_agent_environment(agent):
    status, out, _ = agent.call(["/usr/bin/env"], env={"PATH": "/bin", "X": "a b"})
    assert status == 0 and sorted(out.splitlines()) == [b"PATH=/bin", b"X=a b"]
    status, out, _ = agent.call(["/usr/bin/env"])
    assert out.decode().splitlines() == sorted(f"{k}={v}" for k, v in EXEC_ENV.items())


def test_agent_timeout_kills_the_command(agent):
    import time

    t0 = time.monotonic()
    status, _, _ = agent.call(["sh", "-c", "sleep 30; echo late"], timeout=0.5)
    assert status == guest.TIMED_OUT and time.monotonic() - t0 < 10
    assert agent.call(["echo", "next"]) == (0, b"next\n", b"")


def test_agent_survives_malformed_requests(agent):
    os.write(agent.master, b"garbage line\nQ 12 x - - xtrue\n")  # no id: skipped; bad timeout
    while b"\n" not in agent.buf:
        agent.buf += os.read(agent.master, 1 << 16)
    line, agent.buf = agent.buf.split(b"\n", 1)
    status, _, err = guest.parse_reply(line + b"\n", "12")
    assert status == 255 and b"malformed" in err
    assert agent.call(["echo", "ok"]) == (0, b"ok\n", b"")


def test_agent_default_env_matches_exec_env():
    wanted = " ".join(f"{k}={v}" for k, v in EXEC_ENV.items())
    assert f"export {wanted}" in AGENT_SCRIPT
