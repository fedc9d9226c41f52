"""nginx + ab: a fixed number of requests at a fixed concurrency, the Apache test of the
Docker-on-Pi study (seeds/001: ApacheBench with 100/200/300 concurrent clients and 5000,
25000 and 100000 requests; Fig. 3 plots requests per second and the execution time against
the number of requests).

Server: nginx_wrk's server script (the same fixed script, values as positional arguments),
serving `file_size` random bytes. Client: `ab -n REQUESTS -c CONCURRENCY URL` (ApacheBench
2.3, package apache2-utils), without keep-alive unless `keepalive` (ab's own default, as the
paper's command line is not printed). ab runs on the host by default, the server in the
instance: the load generator outside, as the paper's clients were.

ab output: "Time taken for tests:   1.234 seconds" (the execution time), "Requests per second:
... [#/sec] (mean)", "Complete requests:", "Failed requests:" (with a breakdown line when
non-zero), "Non-2xx responses:" only when some, and the table "Percentage of the requests
served within a certain time (ms)" (whole milliseconds). ab exits non-zero on a connection
failure ("apr_socket_connect(): Connection refused (111)"); a run whose completed requests
are not the asked number is a failed sample.
"""
from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from ..errors import ParseError
from .base import Metric, PairBenchmark, PairParams, Params, search
from .nginx_wrk import MAX_TOTAL_BYTES, SERVER_SCRIPT

_NUM = r"([0-9]+(?:\.[0-9]+)?)"
_COMPLETE = r"^Complete requests:\s+([0-9]+)\s*$"
_FAILED = r"^Failed requests:\s+([0-9]+)\s*$"
_NON_2XX = r"^Non-2xx responses:\s+([0-9]+)\s*$"
_TAKEN = rf"^Time taken for tests:\s+{_NUM} seconds\s*$"
_RPS = rf"^Requests per second:\s+{_NUM} \[#/sec\] \(mean\)\s*$"
_TRANSFER = rf"^Transfer rate:\s+{_NUM} \[Kbytes/sec\] received\s*$"
_PCT = r"^\s*{p}%\s+([0-9]+)(?: \(longest request\))?\s*$"
PERCENTILES = (50, 90, 99, 100)


class NginxAbParams(PairParams):
    client: Literal["instance", "host"] = Field("host", description="ab runs outside the instance by default")
    server: Literal["peer", "host", "instance"] = Field("instance", description="nginx in the instance by default")
    requests: int = Field(5000, ge=1, le=10_000_000, description="requests in all (-n); study 001: 5000/25000/100000")
    concurrency: int = Field(100, ge=1, le=20000, description="requests at once (-c); study 001: 100/200/300")
    keepalive: bool = Field(False, description="HTTP keep-alive (-k); ab's default is a connection per request")
    file_size: int = Field(10240, ge=0, le=MAX_TOTAL_BYTES, description="bytes of the served file")
    workers: int | Literal["auto"] = Field("auto", description="nginx worker_processes")
    port: int = Field(8080, ge=1, le=65535, description="nginx listen port")

    @model_validator(mode="after")
    def _check(self) -> NginxAbParams:
        if self.concurrency > self.requests:
            raise ValueError("concurrency must be <= requests (ab: 'Cannot use concurrency level greater than "
                             "total number of requests')")
        if isinstance(self.workers, int) and not 1 <= self.workers <= 1024:
            raise ValueError("workers must be 1..1024 or 'auto'")
        return self


class NginxAb(PairBenchmark):
    """Execution time and requests per second of ab's fixed number of requests against nginx."""

    name: ClassVar[str] = "nginx-ab"
    tool: ClassVar[str] = "ab"
    packages: ClassVar[tuple[str, ...]] = ("nginx", "apache2-utils")
    Params: ClassVar[type[Params]] = NginxAbParams
    description: ClassVar[str] = "nginx static file under ab: execution time of N requests, requests/s"
    study: ClassVar[dict[str, Any]] = {"requests": 25000, "concurrency": 200}
    """The `full` profile: Docker-on-Pi study: 200 clients, 5000/25000/100000 requests."""

    params: NginxAbParams

    def metrics(self) -> list[Metric]:
        p = self.params
        ctx = f"{p.requests} requests, {p.concurrency} at once, {p.file_size} B file" + (", keep-alive" * p.keepalive)
        return [
            Metric("time_taken_s", "s", False, "network", f"ab's time taken for all requests, {ctx}",
                   label="{unit} for all requests"),
            Metric("requests_per_second", "requests/s", True, "network", f"completed requests / time taken, {ctx}"),
            Metric("transfer", "KiB/s", True, "network", f"bytes received / time taken, {ctx}"),
            *(Metric(f"latency_p{q}", "ms", False, "network",
                     f"{'longest' if q == 100 else f'{q}th percentile'} request time (whole ms), {ctx}")
              for q in PERCENTILES),
            Metric("failed_requests", "count", False, "network", f"requests ab counted failed, {ctx}"),
        ]

    def port(self) -> int:
        return self.params.port

    def server_command(self, workdir: str) -> list[str]:
        p = self.params
        return ["sh", "-c", SERVER_SCRIPT, "sh", workdir, str(p.port), "1", str(p.file_size), str(p.workers)]

    def client_command(self, workdir: str, server: str) -> list[str]:
        p = self.params
        host = f"[{server}]" if ":" in server else server
        return ["ab", *(["-k"] if p.keepalive else []), "-n", str(p.requests), "-c", str(p.concurrency),
                f"http://{host}:{p.port}/file-0"]

    def parse(self, stdout: str, stderr: str = "", source: str = "<output>") -> dict[str, float]:
        def grab(pattern: str) -> re.Match[str]:
            return search(pattern, stdout, self.tool, source, re.M)

        complete = int(grab(_COMPLETE).group(1))
        if complete != self.params.requests:
            raise ParseError(self.tool, f"'Complete requests: {self.params.requests}' (got {complete})", source)
        values = {
            "time_taken_s": float(grab(_TAKEN).group(1)),
            "requests_per_second": float(grab(_RPS).group(1)),
            "transfer": float(grab(_TRANSFER).group(1)),
            "failed_requests": float(grab(_FAILED).group(1)),
        }
        non2xx = re.search(_NON_2XX, stdout, re.M)
        if non2xx and int(non2xx.group(1)):
            raise ParseError(self.tool, f"no 'Non-2xx responses' (found {non2xx.group(0).strip()!r})", source)
        for q in PERCENTILES:
            values[f"latency_p{q}"] = float(grab(_PCT.format(p=q)).group(1))
        if values["time_taken_s"] <= 0:
            raise ParseError(self.tool, "a positive 'Time taken for tests'", source)
        return values

    def version_command(self) -> list[str]:
        return ["sh", "-c", "ab -V | head -n 1; nginx -v 2>&1"]

    def execution_timeout(self) -> float:
        # a slow board serves a few hundred requests a second; ab's own socket timeout is 30 s
        return self.params.requests / 200.0 + 120.0
