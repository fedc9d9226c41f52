"""Where commands run: the one typed interface between platforms/runner and a machine.

A platform never starts a process itself: it builds argv lists and hands them to the
Executor it was constructed with. On this host that is HostExecutor (virtbench.proc); inside
an outer instance (a container in a VM) it is platforms.base.InstanceExecutor; a remote host
gets an SSH executor implementing the same two methods. Neutral module (imports only proc),
so every layer can name the type.
"""
from __future__ import annotations

from typing import Protocol, runtime_checkable

from . import proc
from .errors import UnavailableError


@runtime_checkable
class Executor(Protocol):
    """Runs argv lists somewhere; every implementation ends in proc.run/proc.spawn on this host."""

    def run(self, argv: list[str], *, timeout: float | None = ..., check: bool = ...,
            input: str | None = ..., detached_children: bool = ...) -> proc.Result:
        """Run argv to completion; with check, a non-zero exit raises CommandError."""
        ...

    def spawn(self, argv: list[str]) -> proc.Background:
        """Start argv in the background; the caller must stop() it."""
        ...


class HostExecutor:
    """Runs commands on this host."""

    def run(self, argv: list[str], *, timeout: float | None = proc.DEFAULT_TIMEOUT,
            check: bool = True, input: str | None = None,
            detached_children: bool = False) -> proc.Result:
        return proc.run(argv, timeout=timeout, check=check, input=input,
                        detached_children=detached_children)

    def spawn(self, argv: list[str]) -> proc.Background:
        return proc.spawn(argv)


class Outside:
    """The executor of a stacked platform while no instance of its outer platform is up: its
    commands are refused, so nothing (a provenance query, say) silently asks the host's runtime."""

    def __init__(self, inner: str, outer: str) -> None:
        self.inner, self.outer = inner, outer

    def _refuse(self) -> UnavailableError:
        return UnavailableError(f"{self.inner} runs inside the instances of {self.outer}: its runtime is "
                                "only reachable while one of its instances is up (during a unit of the run)")

    def run(self, argv: list[str], *, timeout: float | None = proc.DEFAULT_TIMEOUT,
            check: bool = True, input: str | None = None,
            detached_children: bool = False) -> proc.Result:
        raise self._refuse()

    def spawn(self, argv: list[str]) -> proc.Background:
        raise self._refuse()
