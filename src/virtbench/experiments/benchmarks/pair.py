"""Client-server benchmarks: place both ends, start the server, wait until it listens, run the
client, stop the server.

Placement follows the studies: instance-to-instance on the same platform (`server: peer`),
instance-to-host (`server: host`), a load generator outside the instance (`client: host`),
and host-to-host as the reference (the native platform, or `client: host, server: host`).
The host end runs the image's binaries in a chroot (the native platform), so both ends use
the same tool build whatever the platform. One server per client, never shared.
"""
from __future__ import annotations

import time
from contextlib import ExitStack
from dataclasses import dataclass

from ... import proc
from ...benchmarks.base import PairBenchmark
from ...errors import CommandError, VirtbenchError
from ...images.image import Image
from ...platforms import naming
from ...platforms.background import InstanceProcess
from ...platforms.base import Instance, Paths, Platform
from ...registry import PLATFORMS

LISTEN_TIMEOUT = 30.0


@dataclass
class PairResult:
    argv: list[str]
    client: proc.Result
    server: proc.Result
    address: str


def run_pair(platform: Platform, instance: Instance, bench: PairBenchmark, workdir: str,
             image: Image, paths: Paths, timeout: float) -> PairResult:
    params = bench.params
    with ExitStack() as stack:
        def host_end() -> tuple[Platform, Instance]:
            native_cls = PLATFORMS.get("native")
            native = native_cls("host", native_cls.Options(), paths)
            inst = native.create(image, naming.derived(instance.name, "-host"), instance.run_id)
            stack.callback(native.discard, inst)
            native.start(inst)
            return native, inst

        client = (platform, instance) if params.client == "instance" else host_end()
        if params.server == "instance":
            server = (platform, instance)
            address = "127.0.0.1" if params.client == "instance" else platform.address(instance)
        elif params.server == "peer":
            peer = platform.create(image, naming.derived(instance.name, "-peer"), instance.run_id)
            stack.callback(platform.discard, peer)
            platform.start(peer)
            server = (platform, peer)
            address = platform.address(peer)
        else:
            server = client if params.client == "host" else host_end()
            address = "127.0.0.1" if params.client == "host" else platform.host_address(instance)

        for side, inst in (server, client):
            side.exec(inst, ["mkdir", "-p", workdir], timeout=60)
        splat, sinst = server
        background = splat.spawn(sinst, bench.server_command(workdir))
        argv = bench.client_command(workdir, address)
        server_result: proc.Result | None = None
        try:
            wait_listening(splat, sinst, bench, background)
            cplat, cinst = client
            result = cplat.host.run(cplat.exec_argv(cinst, argv), timeout=timeout, check=False)
        except CommandError as exc:  # the client timed out: keep what the server said too
            server_result = background.stop()
            raise CommandError(exc.argv, exc.returncode, exc.stdout,
                               f"{exc.stderr}\n--- server ({address}) exit {server_result.returncode} ---\n"
                               f"{server_result.stdout}{server_result.stderr}",
                               timed_out=exc.timed_out, timeout=timeout) from None
        finally:
            if server_result is None:
                server_result = background.stop()
        return PairResult(argv, result, server_result, address)


def wait_listening(platform: Platform, instance: Instance, bench: PairBenchmark,
                    background: InstanceProcess) -> None:
    """Poll `ss` in the server's instance until the port is open (or the server died).

    A benchmark whose peer is the kernel itself (ping) has no port: nothing to wait for."""
    port = bench.port()
    if port is None:
        if not background.alive():
            out, err = background.output()
            raise VirtbenchError(f"{bench.tool} server placeholder exited: {(err or out).strip()[-300:]}")
        return
    flag = "-t" if bench.protocol == "tcp" else "-u"
    argv = ["ss", "-H", "-l", "-n", flag, "sport", "=", f":{port}"]
    limit = getattr(bench, "listen_timeout", LISTEN_TIMEOUT)
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if not background.alive():
            out, err = background.output()
            raise VirtbenchError(f"{bench.tool} server exited before listening: {(err or out).strip()[-300:]}")
        res = platform.exec(instance, argv, timeout=10, check=False)
        if res.ok and res.stdout.strip():
            return
        time.sleep(0.05)
    raise VirtbenchError(f"{bench.tool} server not listening on port {port} after {limit:g} s")
