"""nginx + wrk: a static-file HTTP server under load, the "REST server" application of LSBS
(seeds/003: a load generator outside the instance fetches a file) and the Apache/ab test
of the Docker-on-Pi study (seeds/001: 100/200/300 concurrent clients).

Server: a fixed shell script, values passed as positional arguments (never pasted into the
script text), writes `files` files of `file_size` random bytes (head -c /dev/urandom) and a
minimal nginx.conf into the workdir, then execs `nginx -g 'daemon off;'` in the foreground.
The config keeps nginx's defaults except: no access log (disk writes would be measured),
sendfile on, keep-alive connections are not recycled (keepalive_requests 1000000; nginx's
default 1000 would make wrk reconnect), `user root` so workers can read the workdir
whatever the permissions of its parents (a throwaway server on the benchmark network).
Client: `wrk --latency` fetching /file-0 for `duration` seconds over `connections` kept-open
connections. By default the client runs on the host and the server in the instance: a load
generator outside the instance, as LSBS describes.

wrk output units (wrk 4.1 units.c): times as us/ms/s (and m/h from 51 s up), converted to
ms; transfer sizes binary (KB = KiB, MB = MiB, GB = GiB), converted to MiB/s. wrk's latency
figures include its own rough coordinated-omission correction (stats_correct); for
rate-controlled, fully corrected latencies use wrk2. Requests slower than `timeout` are not
in the latency histogram; they count as socket timeout errors.

Failures: wrk exits 0 even when nothing was served (server gone: "Socket errors: connect N"
and "0 requests in"); the parser fails a sample with zero requests. "Non-2xx or 3xx
responses: N" counts status >= 400 only (wrk's label is misleading); that line and
"Socket errors" appear only when non-zero, and are recorded as metrics (0 when absent).
"""
from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from ..errors import ParseError
from .base import Metric, PairBenchmark, PairParams, Params, search

SERVER_SCRIPT = r"""set -eu
dir=$1 port=$2 files=$3 size=$4 workers=$5
mkdir -p "$dir/www" "$dir/tmp"
i=0
while [ "$i" -lt "$files" ]; do
    head -c "$size" /dev/urandom > "$dir/www/file-$i"
    i=$((i + 1))
done
cat > "$dir/nginx.conf" <<EOF
user root;
worker_processes $workers;
pid "$dir/nginx.pid";
error_log stderr;
events {
    worker_connections 4096;
}
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
    default_type application/octet-stream;
    client_body_temp_path "$dir/tmp";
    server {
        listen $port;
        root "$dir/www";
    }
}
EOF
# -e (errors before the configuration is read) exists from nginx 1.19.5; bullseye has 1.18
set --
if nginx -h 2>&1 | grep -q -- '-e filename'; then set -- -e stderr; fi
exec nginx "$@" -p "$dir" -c "$dir/nginx.conf" -g 'daemon off;'
"""

_NUM = r"([0-9]+(?:\.[0-9]+)?)"
_TIME = rf"{_NUM}(us|ms|s|m|h)"
_TO_MS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3, "h": 3600e3}
_BINARY = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4, "P": 1024**5}
_RUNNING = r"^Running .* test @ (\S+)\s*$"
_REQUESTS = rf"^\s*([0-9]+) requests in {_TIME}, {_NUM}([KMGTP]?)B read\s*$"
_RPS = rf"^Requests/sec:\s*{_NUM}\s*$"
_TRANSFER = rf"^Transfer/sec:\s*{_NUM}([KMGTP]?)B\s*$"
_LATENCY = rf"^\s*Latency\s+{_TIME}\s+{_TIME}\s+{_TIME}\s+"
_DIST = r"^\s*{p}%\s+" + _TIME + r"\s*$"
_SOCKET_ERRORS = r"^\s*Socket errors: connect ([0-9]+), read ([0-9]+), write ([0-9]+), timeout ([0-9]+)\s*$"
_NON_2XX = r"^\s*Non-2xx or 3xx responses: ([0-9]+)\s*$"
PERCENTILES = (50, 75, 90, 99)

MAX_TOTAL_BYTES = 4 * 1024**3


class NginxWrkParams(PairParams):
    client: Literal["instance", "host"] = Field("host", description="wrk runs outside the instance by default")
    server: Literal["peer", "host", "instance"] = Field("instance", description="nginx in the instance by default")
    connections: int = Field(10, ge=1, le=1000, description="connections kept open (-c); study: 100/200/300")
    threads: int = Field(2, ge=1, le=256, description="wrk threads (-t); at most `connections`")
    duration: int = Field(5, ge=1, le=3600, description="seconds of load (-d)")
    timeout: int = Field(2, ge=1, le=600, description="seconds before a request counts as a timeout (--timeout)")
    file_size: int = Field(
        65536, ge=0, le=MAX_TOTAL_BYTES,
        description="bytes of the served file (LSBS REST test: a 70 MB file, e.g. 70000000)",
    )
    files: int = Field(1, ge=1, le=10000, description="files written (file-0 … ); wrk fetches file-0")
    workers: int | Literal["auto"] = Field("auto", description="nginx worker_processes")
    port: int = Field(8080, ge=1, le=65535, description="nginx listen port")

    @model_validator(mode="after")
    def _check(self) -> NginxWrkParams:
        if self.threads > self.connections:
            raise ValueError("threads must be <= connections (wrk: 'number of connections must be >= threads')")
        if self.files * self.file_size > MAX_TOTAL_BYTES:
            raise ValueError(f"files * file_size exceeds {MAX_TOTAL_BYTES} bytes")
        if isinstance(self.workers, int) and not 1 <= self.workers <= 1024:
            raise ValueError("workers must be 1..1024 or 'auto'")
        return self


class NginxWrk(PairBenchmark):
    """Requests per second, transfer rate and latency percentiles of wrk against nginx."""

    name: ClassVar[str] = "nginx-wrk"
    tool: ClassVar[str] = "wrk"
    packages: ClassVar[tuple[str, ...]] = ("nginx", "wrk")
    Params: ClassVar[type[Params]] = NginxWrkParams
    description: ClassVar[str] = "nginx static file under wrk load: requests/s, MiB/s, latency percentiles"
    study: ClassVar[dict[str, Any]] = {"connections": 100, "duration": 30}
    """The `full` profile: Docker-on-Pi study: 100/200/300 clients."""

    params: NginxWrkParams

    def metrics(self) -> list[Metric]:
        p = self.params
        ctx = f"{p.file_size} B file, {p.connections} connections, {p.threads} threads, {p.duration} s"

        def lat(name: str, label: str) -> Metric:
            return Metric(name, "ms", False, "network", f"{label} request latency, {ctx}")

        return [
            Metric("requests_per_second", "requests/s", True, "network", f"completed requests / run time, {ctx}"),
            Metric("transfer", "MiB/s", True, "network", f"bytes read / run time (3 significant digits), {ctx}"),
            lat("latency_avg", "mean"),
            *(lat(f"latency_p{q}", f"{q}th percentile") for q in PERCENTILES),
            lat("latency_max", "largest"),
            Metric("socket_errors", "count", False, "network", f"connect+read+write+timeout errors, {ctx}"),
            Metric("http_errors", "count", False, "network", f"responses with status >= 400, {ctx}"),
        ]

    def port(self) -> int:
        return self.params.port

    def server_command(self, workdir: str) -> list[str]:
        p = self.params
        return ["sh", "-c", SERVER_SCRIPT, "sh", workdir, str(p.port), str(p.files), str(p.file_size),
                str(p.workers)]

    def url(self, server: str) -> str:
        host = f"[{server}]" if ":" in server else server
        return f"http://{host}:{self.params.port}/file-0"

    def client_command(self, workdir: str, server: str) -> list[str]:
        p = self.params
        return ["wrk", "-t", str(p.threads), "-c", str(p.connections), "-d", f"{p.duration}s",
                "--timeout", f"{p.timeout}s", "--latency", self.url(server)]

    def parse(self, stdout: str, stderr: str = "", source: str = "<output>") -> dict[str, float]:
        def grab(pattern: str) -> re.Match[str]:
            return search(pattern, stdout, self.tool, source, re.M)

        grab(_RUNNING)
        done = grab(_REQUESTS)
        if int(done.group(1)) == 0:
            raise ParseError(self.tool, f"at least one completed request (got {done.group(0).strip()!r})", source)
        latency = grab(_LATENCY)
        values = {
            "requests_per_second": float(grab(_RPS).group(1)),
            "transfer": _mib(grab(_TRANSFER)),
            "latency_avg": _ms(latency.group(1), latency.group(2)),
            "latency_max": _ms(latency.group(5), latency.group(6)),
        }
        for q in PERCENTILES:
            m = grab(_DIST.format(p=q))
            values[f"latency_p{q}"] = _ms(m.group(1), m.group(2))
        errors = re.search(_SOCKET_ERRORS, stdout, re.M)
        values["socket_errors"] = float(sum(int(g) for g in errors.groups())) if errors else 0.0
        status = re.search(_NON_2XX, stdout, re.M)
        values["http_errors"] = float(status.group(1)) if status else 0.0
        return values

    def version_command(self) -> list[str]:
        # `wrk -v` prints its version, then the usage, and exits 1.
        return ["sh", "-c", "wrk -v | head -n 1; nginx -v 2>&1"]

    def execution_timeout(self) -> float:
        return 2.0 * self.params.duration + self.params.timeout + 60.0


def _ms(value: str, unit: str) -> float:
    return float(value) * _TO_MS[unit]


def _mib(match: re.Match[str]) -> float:
    return float(match.group(1)) * _BINARY[match.group(2)] / 1024**2
