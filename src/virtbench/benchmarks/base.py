"""The benchmark plugin interface.

A benchmark is one small module: the Debian packages its tool needs inside the guest image,
its parameters (a pydantic model, unknown keys rejected), the argv it runs inside an
instance, and a parser that turns the tool's output into metric values. The runner owns
timing, repetition, storage and failure handling, so a benchmark never catches errors: a
parser that cannot find what it needs raises ParseError and the sample is recorded failed.
"""
from __future__ import annotations

import re
import statistics
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..errors import ParseError

Category = Literal["cpu", "memory", "storage", "network", "kernel", "application", "lifecycle"]


@dataclass(frozen=True)
class Metric:
    """A measured quantity; unit and better direction travel with every value."""

    name: str
    unit: str
    higher_is_better: bool
    category: Category
    description: str = ""
    label: str = ""
    """How a person reads the number, with `{unit}` where the (scaled) unit goes: "{unit} of CPU
    time per I/O" shows as "µs of CPU time per I/O" (report/units.py); "" shows the unit alone."""


MAX_SCRATCH = 1 << 50
"""No benchmark writes more than a pebibyte: larger is a typo, refused before any host is asked."""


class Params(BaseModel):
    """Base for benchmark parameters: strict, documented, defaults given."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def scratch_bytes(self) -> int:
        """Bytes of files one execution writes in its scratch directory (0: none to speak of):
        checked against the free space before a run starts."""
        return 0

    @model_validator(mode="after")
    def _scratch_bounded(self) -> Params:
        if self.scratch_bytes() > MAX_SCRATCH:
            raise ValueError(f"{self.scratch_bytes()} bytes of files is more than any disk holds (1P at most)")
        return self


class Benchmark(ABC):
    """One tool run inside an instance, producing one or more metrics per execution."""

    name: ClassVar[str]
    tool: ClassVar[str]
    packages: ClassVar[tuple[str, ...]]
    """Debian packages that must be in the guest image."""
    Params: ClassVar[type[BaseParams]]
    description: ClassVar[str] = ""
    study: ClassVar[dict[str, Any]] = {}
    """Parameters of the `full` profile: the studies' durations and sizes (defaults are quick)."""
    timeout: ClassVar[float] = 600.0
    """Upper bound for one execution; the runner also scales by params where needed."""

    def __init__(self, params: BaseParams) -> None:
        self.params: Any = params
        """An instance of the class's own Params (typed per plugin as `params: MyParams`)."""

    @abstractmethod
    def metrics(self) -> list[Metric]:
        """The metrics one execution yields, for these parameters."""

    @abstractmethod
    def command(self, workdir: str) -> list[str]:
        """argv run inside the instance; workdir is a fresh empty scratch directory."""

    @abstractmethod
    def parse(self, stdout: str, stderr: str = "", source: str = "<output>") -> dict[str, float]:
        """Metric name -> value. Check the run succeeded first; raise ParseError otherwise."""

    def version_command(self) -> list[str] | None:
        """argv printing the tool's version inside the instance (recorded as provenance)."""
        return None

    def execution_timeout(self) -> float:
        return self.timeout


PassEstimate = Literal["median", "best"]
"""How a benchmark that runs its workload several times in one execution (`passes`) reports it.

median: the middle pass; one disturbed pass does not move it. best: the fastest pass (the
least time, the highest rate). Other work on the machine only ever adds time to a pass
(a neighbour's time slice, its cache and memory traffic, an interrupt), so the fastest of
several passes is the cost the platform adds to every pass, with the disturbances left out
(Chen and Revels, "Robust benchmarking in noisy environments", 2016). On the 2-CPU VM
(2026-11-27, quiet) the sqlite total's round-paired ratio of docker to native varied +-2.1 %
as the best of 5 passes against +-7.0 % as the median. What the best pass cannot show is a
cost a platform adds only now and then (throttling, reclaim): the wall-clock forms and the
median measure those."""


def pass_value(values: list[float], estimate: PassEstimate, higher_is_better: bool) -> float:
    """One execution's value from its passes' values (see PassEstimate)."""
    if estimate == "median":
        return statistics.median(values)
    return max(values) if higher_is_better else min(values)


def search(pattern: str, text: str, tool: str, source: str, flags: int = 0) -> re.Match[str]:
    """re.search that raises a ParseError naming the pattern and the source when nothing matches."""
    match = re.search(pattern, text, flags)
    if match is None:
        raise ParseError(tool, pattern, source)
    return match


class OnHost(BaseModel):
    """`server: {host: NAME}`: the server end on another host of the campaign."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    host: str
    max_clock_error: float = Field(0.1, gt=0, le=1)
    """A figure timed on two clocks is refused when the hosts' clock offset (plus its
    uncertainty) exceeds this fraction of it; round-trip figures are always valid."""


class PairParams(Params):
    """Where the two ends of a client-server benchmark run.

    client: `instance` (inside the platform's instance) or `host` (the same binaries in a
    chroot on the host, outside any isolation: a load generator "outside").
    server: `peer` (a second instance of the same platform), `host`, or `instance` (the
    client's own instance, over loopback). client=host with server=host is the host-to-host
    reference, identical whatever the platform.
    """

    client: Literal["instance", "host"] = "instance"
    server: Literal["peer", "host", "instance"] | OnHost = "peer"
    """... or `{host: NAME}`: the server in an instance of the same platform on another host of a
    multi-host campaign, the client on each other host (runner/crosspair.py)."""


BaseParams = Params
"""The base as a name the classes below can use (their `Params` attribute shadows it)."""


class PairBenchmark(Benchmark):
    """A client-server benchmark; the runner places both ends, starts the server first,
    waits until it listens on `port`, runs the client, and tears the server down."""

    protocol: ClassVar[Literal["tcp", "udp"]] = "tcp"
    two_clock_metrics: ClassVar[tuple[str, ...]] = ()
    """Metrics timed with the server's clock against the client's (a true one-way delay): across
    hosts they stand only while the clocks agree. iperf3 and sockperf have none (sockperf's
    latency is RTT/2 on the client's clock)."""
    listen_timeout: ClassVar[float] = 30.0
    """How long the server may take to listen (a database initialising under emulation: more)."""

    def command(self, workdir: str) -> list[str]:  # pragma: no cover - pairs use the two below
        raise TypeError(f"{self.name} is a client-server benchmark; use server_command/client_command")

    @abstractmethod
    def port(self) -> int | None:
        """The port the server listens on (the runner polls for it with `ss`); None when the
        peer needs no listening program (ping: the peer's kernel answers)."""

    @abstractmethod
    def server_command(self, workdir: str) -> list[str]:
        """argv of the server; it runs until the client is done (the runner stops it)."""

    @abstractmethod
    def client_command(self, workdir: str, server: str) -> list[str]:
        """argv of the client, given the server's address; its output is what parse() reads."""
