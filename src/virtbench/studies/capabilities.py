"""What this host can run of a study: the same checks `doctor`, the quick campaign and the
probes use, asked once per capability and cached for one command.

- kvm: a KVM guest boots here (experiments.benchmarks.quick.kvm_guest: decided by booting, never assumed);
- second_host: several hosts were given (`--hosts`) and this version can drive them;
- pmu: perf reads hardware counters (the perf probe's own check);
- meter: an energy source works here: the meter given with `study run --meter` (tried once, as
  the energy probe tries it), else the energy probe's own check (RAPL or IPMI);
- platform types: each plugin's probe (platforms.availability.availability_of).
"""
from __future__ import annotations

import importlib.util
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..platforms.availability import availability_of
from ..platforms.base import Availability, Paths
from ..registry import PLATFORMS, PROBES

MULTI_HOST_FIX = "several hosts arrive with `virtbench` multi-host support (issue #15); run this part there"


def hosts_supported() -> bool:
    """Whether this version has the several-hosts support (`virtbench.remote`) at all."""
    return importlib.util.find_spec("virtbench.remote") is not None


def parse_host_names(values: Sequence[str]) -> list[str]:
    """`--hosts` values checked by the campaign's own host rules (one line, exit 2, if bad)."""
    if not values:
        return []
    if not hosts_supported():
        raise InputError("--hosts: this version of virtbench runs on one host only", MULTI_HOST_FIX)
    from ..remote.inventory import parse_hosts

    try:
        return [h.name for h in parse_hosts(list(values))]
    except ValueError as exc:
        raise InputError(f"--hosts: {exc}", "give host names or addresses, e.g. --hosts pi5-b") from None


def inventory_specs(names: Sequence[str], inventory: str | None) -> dict[str, dict[str, Any]]:
    """`--hosts` names looked up in `--inventory FILE` (an Ansible inventory, read as data): how to
    reach each (address, port, user, key, known_hosts, work_dir), for the planned campaigns'
    `hosts:`. Without an inventory a name is an address reached with OpenSSH's defaults."""
    if inventory is None:
        return {}
    if not names:
        raise InputError("--inventory: no host named", "name the inventory's host with --hosts NAME")
    from ..remote.inventory import read_inventory

    specs = {h.name: h for h in read_inventory(Path(inventory).expanduser(), "all")}
    for name in names:
        if name not in specs:
            raise InputError(f"--hosts {name}: not a host of the inventory {inventory}",
                             f"name one of its hosts ({', '.join(sorted(specs)) or 'none'}) or add it there")
    return {n: specs[n].model_dump(mode="json", exclude_none=True) for n in names}


METER_EXAMPLE = "e.g. --meter '/usr/local/bin/my-meter --port /dev/ttyUSB0' (it prints the current watts)"


def parse_meter(text: str | None) -> list[str]:
    """`--meter CMD` as an argv list (split like a shell would, never run by one), checked as the
    energy probe's `meter:` option is; one line, exit 2, if bad."""
    if text is None:
        return []
    from pydantic import ValidationError

    from ..probes.energy import EnergyOptions

    try:
        argv = shlex.split(text)
        EnergyOptions(meter=argv)
    except (ValueError, ValidationError) as exc:
        why = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
        raise InputError(f"--meter {text!r}: {why}", f"give the meter's command, {METER_EXAMPLE}") from None
    return argv


@dataclass
class Capabilities:
    paths: Paths
    hosts: Sequence[str] = ()
    log: Callable[[str], None] = lambda _m: None
    meter: Sequence[str] = ()
    """The user's meter command (`study run --meter`): the parts that measure power use it."""
    specs: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    """How to reach hosts named in `hosts` (`study run --inventory`); a host not here is reached by
    its name with OpenSSH's defaults."""
    _cache: dict[str, Availability] = field(default_factory=dict)

    def check(self, name: str) -> Availability:
        if name not in self._cache:
            self._cache[name] = getattr(self, f"_{name}")()
        return self._cache[name]

    def platforms(self, types: Sequence[str]) -> dict[str, Availability]:
        """Each platform type's verdict, probing only types not asked yet."""
        todo = [t for t in dict.fromkeys(types) if f"platform:{t}" not in self._cache and t in PLATFORMS.names()]
        for t, verdict in availability_of(todo, self.paths, self.log).items():
            self._cache[f"platform:{t}"] = verdict
        return {t: self._cache[f"platform:{t}"] for t in types if f"platform:{t}" in self._cache}

    def _kvm(self) -> Availability:
        from ..experiments.benchmarks.quick import kvm_guest

        guest, why = kvm_guest(self.paths)
        if guest:
            return Availability(True, "a KVM guest boots here")
        assert why is not None
        return Availability(False, why["reason"].removeprefix("no VM: "), why["fix"])

    def _second_host(self) -> Availability:
        if not hosts_supported():
            return Availability(False, "this version of virtbench runs on one host only", MULTI_HOST_FIX)
        remote = [h for h in self.hosts if h not in ("local", "localhost")]
        if not remote:
            return Availability(False, "none given", "give one with --hosts NAME (its address or inventory name)")
        return Availability(True, f"second host {remote[0]}")

    def _pmu(self) -> Availability:
        perf = PROBES.get("perf").available()
        if perf.available and perf.reason.startswith("hardware"):
            return Availability(True, "perf reads hardware counters")
        reason = perf.reason.split("; ", 1)[-1] if perf.available else perf.reason
        return Availability(False, reason, perf.fix or "run on bare metal or a VM with a virtual PMU")

    def _meter(self) -> Availability:
        if self.meter:
            from ..probes.energy import Energy, EnergyOptions

            try:  # once, as the energy probe does before a run (and with the same message)
                Energy(EnergyOptions(meter=list(self.meter))).check()
            except InputError as exc:
                return Availability(False, exc.message.removeprefix(f"probes: energy meter {list(self.meter)!r}: "),
                                    exc.fix or "")
            return Availability(True, f"the meter given with --meter ({shlex.join(self.meter)})")
        energy = PROBES.get("energy").available()
        if energy.available:
            return Availability(True, energy.reason)
        return Availability(False, f"no power meter here ({energy.reason})",
                            f"give yours with --meter CMD, {METER_EXAMPLE}")
