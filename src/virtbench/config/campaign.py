"""The campaign file: declared once here, validated completely before anything starts.

Errors name the file, the field and the fix in one line (`InputError`, exit 2). Platform
options and benchmark parameters are validated by the plugin's own pydantic model, so a
plugin's author declares them in one place.
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)

from ..benchmarks.base import OnHost, PairBenchmark
from ..errors import InputError
from ..images.build import RELEASES, Mirror
from ..images.profiles import PROFILES
from ..registry import AIMS, BENCHMARKS, DEFAULT_EXPERIMENT, EXPERIMENTS, PLATFORMS, PROBES, hint
from ..remote.inventory import HostSpec, parse_hosts
from .budget import check_budget
from .entries import MAX_POINTS, PlatformEntry, _benchmark_points, _platform_entry, check_name
from .messages import first_error, locate, one_line, unknown_key

SEED_RANGE = (-(2**31), 2**31 - 1)
"""The results database stores the seed in a 32-bit integer column (PostgreSQL `integer`)."""


class ImageSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    profile: str = Field("auto", description="quick, full, or auto (smallest profile holding the tools)")
    release: str = Field("bookworm", description="Debian release of the guest image")
    mirrors: tuple[Mirror, ...] = Field((), description="apt source lines instead of the default ones (as "
                                     "`image build --mirror`): a local mirror, or a suite caught mid-sync")

    @field_validator("profile", "release")
    @classmethod
    def _known(cls, v: str, info: ValidationInfo) -> str:
        """Refused here, not after the platform probes have started instances (images/ holds the lists)."""
        known = ("auto", *PROFILES) if info.field_name == "profile" else RELEASES
        if v not in known:
            raise ValueError(f"unknown {'image profile' if info.field_name == 'profile' else 'Debian release'} "
                             f"{v!r}; {hint(v, known)}")
        return v


class Adaptive(BaseModel):
    """Repeat until every ratio to the baseline is known to +-target, within caps.

    Extra rounds run only the platforms still too imprecise (and the baseline), each logged
    with its reason. Stopping on precision (not on the result) keeps the bias small; the
    caps bound the cost whatever the noise."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    target: float = Field(0.02, gt=0, lt=1, description="wanted half-width of the ratio's 95% CI (0.02 = +-2%)")
    max_repetitions: int = Field(30, ge=2, le=10000, description="cap on measured rounds per platform")
    max_minutes: float = Field(60.0, gt=0, le=7 * 24 * 60, description="cap on the run's duration for extra rounds")
    noise_check: int = Field(
        0, ge=0, le=10, description="rounds of the baseline alone, spread through the last warm-up round, before measuring: "
        "the host's A/A noise, and the verdict rate to expect in the caps said at the start (0: none)")
    until: Literal["precise", "decided"] = Field(
        "precise", description="precise: every ratio's CI within +-target; decided: every comparison "
                               "decided (slower, faster or the same within +-target, the report's verdict), and extra "
                               "rounds run only the undecided benchmarks")
    aim: str | None = Field(
        None, description="with until: decided, also measure again the cells of what this plugin judges from them "
                          "while it is undecided (study: a study's paper values, as study 003's quick preset sets it)")

    @field_validator("aim")
    @classmethod
    def _aim(cls, v: str | None) -> str | None:
        if v is not None and v not in AIMS.known():
            raise ValueError(f"unknown adaptive aim {v!r}: {hint(v, sorted(AIMS.known()))}")
        return v

    @model_validator(mode="after")
    def _aim_needs_decided(self) -> Adaptive:
        if self.aim is not None and self.until != "decided":
            raise ValueError("adaptive.aim needs until: decided (an aim adds cells to the undecided ones)")
        return self


class BenchmarkEntry(BaseModel):
    model_config = ConfigDict(frozen=True)
    key: str
    """Unique within the campaign: the name, or name[param=value,...] when it appears twice."""
    name: str
    params: dict[str, Any] = Field(default_factory=dict)
    sweep: tuple[str, ...] = ()
    """Parameters this point took from a sweep (for sweep plots)."""
    instances: int | None = None
    """Run in this many instances of the platform at once (None: one, no totals recorded)."""


class ProbeEntry(BaseModel):
    """A probe as declared: its name and its options, validated by the probe's own model."""

    model_config = ConfigDict(frozen=True)
    name: str
    options: dict[str, Any] = Field(default_factory=dict)

    @model_serializer(mode="plain")
    def _dump(self) -> Any:
        """Stored like the file: a bare name, or a mapping with name and options."""
        return {"name": self.name, **self.options} if self.options else self.name


class Campaign(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="campaign name (letters, digits, . _ -)")
    description: str = ""
    experiment: str = Field(DEFAULT_EXPERIMENT, description=(
        "experiment kind (benchmarks, line, ...); its settings are the section of the same name"))
    baseline: str = Field("native", description="platform every other is compared with")
    repetitions: int = Field(5, ge=1, le=10000, description="measured rounds")
    warmups: int = Field(1, ge=0, le=100, description="discarded rounds before the measured ones")
    seed: int | None = Field(None, ge=SEED_RANGE[0], le=SEED_RANGE[1], description=(
        "seed of the randomized platform order (recorded): a whole number from -2147483648 to 2147483647"))
    shuffle: bool = Field(True, description="randomize platform order in each round")
    image: ImageSpec = Field(default_factory=ImageSpec)
    adaptive: Adaptive | None = Field(None, description="add rounds until ratios are precise enough")
    profile: Literal["quick", "full"] = Field(
        "quick", description="benchmark defaults: quick (seconds each) or full (the studies' durations and sizes)")
    platforms: list[PlatformEntry]
    benchmarks: list[BenchmarkEntry] = Field(default_factory=list, validate_default=True)
    probes: list[ProbeEntry] = Field(default_factory=list, description=(
        "probes beside every execution: names (energy, perf, pressure) or mappings {name: ..., options}"))
    settings: dict[str, Any] = Field(default_factory=dict, description=(
        "the experiment kind's section, validated by its model (written under the kind's name)"))
    hosts: list[HostSpec] = Field(default_factory=list, description=(
        "machines to run on: names or {name, address, port, user, key, work_dir, known_hosts}, "
        "or {inventory: PATH, group: NAME} (Ansible YAML/INI); default: this machine only"))
    parallel: bool = Field(True, description="with several hosts: measure them at the same time "
                                             "(false: one host after another)")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return check_name(v)

    @field_validator("hosts", mode="before")
    @classmethod
    def _hosts(cls, v: Any, info: ValidationInfo) -> Any:
        """Inline entries or an Ansible inventory; stored resolved, so a resumed run needs no file.
        A dynamic inventory only runs when the caller's context says the CLI user asked for it."""
        if v is None:
            return []
        return parse_hosts(v, dynamic=bool((info.context or {}).get("dynamic_inventory")))

    @model_validator(mode="before")
    @classmethod
    def _experiment_section(cls, data: Any) -> Any:
        """Move the kind's section (`line: {...}`) into `settings`, validated by the kind's model."""
        if not isinstance(data, dict):
            return data
        name = data.get("experiment", DEFAULT_EXPERIMENT)
        if not isinstance(name, str) or name not in EXPERIMENTS.names():
            raise ValueError(f"experiment: unknown kind {name!r}; {hint(str(name), EXPERIMENTS.names())}")
        kind = EXPERIMENTS.get(name)
        data = dict(data)
        data.setdefault("baseline", kind.default_baseline)
        others = [k for k in EXPERIMENTS.names() if k != name and k in data and k not in cls.model_fields]
        if others:
            raise ValueError(f"{others[0]}: a section of experiment {others[0]!r}, but experiment is {name!r}; "
                             f"set experiment: {others[0]} or remove the section")
        raw = data.pop(name, None) if name not in cls.model_fields else None
        raw = data.pop("settings", None) if raw is None else raw
        if kind.Section is None:
            if raw:
                raise ValueError(f"settings: experiment {name!r} takes no section")
            return data
        if raw is not None and not isinstance(raw, dict):
            raise ValueError(f"{name}: give a mapping of the experiment's settings")
        try:
            section = kind.Section.model_validate(raw or {})
        except ValidationError as exc:
            raise ValueError(first_error(exc, name, kind.Section)) from None
        data["settings"] = section.model_dump(mode="json")
        return data

    @field_validator("adaptive", mode="before")
    @classmethod
    def _adaptive(cls, v: Any, info: ValidationInfo) -> Any:
        """Only a kind that adds rounds by the rule takes it (it was accepted and ignored)."""
        kind = info.data.get("experiment", DEFAULT_EXPERIMENT)
        if v is not None and kind in EXPERIMENTS.names() and not EXPERIMENTS.get(kind).uses_adaptive:
            raise ValueError(f"adaptive: experiment {kind!r} does not add rounds by the adaptive rule; remove "
                             "`adaptive:` and give its repetitions")
        return v

    @field_validator("probes", mode="before")
    @classmethod
    def _probes(cls, v: Any, info: ValidationInfo) -> Any:
        """`[perf, {name: energy, meter: [...]}]`: each probe known, its options validated by
        its own model (unknown keys rejected), each named once."""
        if v is None:
            return []
        kind = info.data.get("experiment", DEFAULT_EXPERIMENT)
        if v and kind in EXPERIMENTS.names() and not EXPERIMENTS.get(kind).uses_probes:
            raise ValueError(f"probes: experiment {kind!r} does not run probes beside its measurements yet; "
                             "remove `probes:` or measure with a benchmarks campaign")
        if not isinstance(v, list):
            raise ValueError("probes: give a list, e.g. [energy, perf, pressure]")
        out, seen = [], set()
        for i, item in enumerate(v):
            if isinstance(item, ProbeEntry):
                item = item.model_dump()
            if isinstance(item, dict):
                opts = dict(item)
                name = opts.pop("name", None)
            else:
                name, opts = item, {}
            if not isinstance(name, str):
                raise ValueError(f"probes[{i}]: give a probe name or a mapping with `name:`")
            if name not in PROBES.names():
                raise ValueError(f"probes[{i}]: unknown probe {name!r}; {hint(name, PROBES.names())}")
            if name in seen:
                raise ValueError(f"probes[{i}]: probe {name!r} is listed twice")
            seen.add(name)
            model = PROBES.get(name).Options
            try:
                model.model_validate(opts)
            except ValidationError as exc:
                raise ValueError(first_error(exc, f"probes[{i}] ({name})", model)) from None
            out.append({"name": name, "options": opts})
        return out

    @model_serializer(mode="wrap")
    def _dump(self, handler: Any) -> dict[str, Any]:
        """The stored form reads like the file: the section under the kind's name."""
        out: dict[str, Any] = handler(self)
        if not out.get("probes"):
            out.pop("probes", None)
        if not out.get("hosts"):
            out.pop("hosts", None)
            out.pop("parallel", None)
        else:
            out["hosts"] = [h.model_dump(exclude_defaults=True) | {"name": h.name} for h in self.hosts]
        settings = out.pop("settings", {})
        if self.experiment == DEFAULT_EXPERIMENT:
            out.pop("experiment", None)
        elif EXPERIMENTS.get(self.experiment).Section is not None:
            out[self.experiment] = settings
        return out

    @property
    def section(self) -> Any:
        """The experiment kind's validated section (its pydantic model), or None."""
        model = EXPERIMENTS.get(self.experiment).Section
        return None if model is None else model.model_validate(self.settings)

    @field_validator("platforms", mode="before")
    @classmethod
    def _platforms(cls, value: Any, info: ValidationInfo) -> list[PlatformEntry]:
        if not isinstance(value, list) or not value:
            raise ValueError("needs a non-empty list of platforms")
        extra = EXPERIMENTS.get(info.data.get("experiment", DEFAULT_EXPERIMENT)).node_types
        entries = [_platform_entry(i, v, extra) for i, v in enumerate(value)]
        names = [e.name for e in entries]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"platform name {sorted(dup)[0]!r} used twice; give each a unique name")
        return entries

    @field_validator("benchmarks", mode="before")
    @classmethod
    def _benchmarks(cls, value: Any, info: ValidationInfo) -> list[BenchmarkEntry]:
        kind = info.data.get("experiment", DEFAULT_EXPERIMENT)
        if not EXPERIMENTS.get(kind).uses_benchmarks:
            if value:
                raise ValueError(f"benchmarks: experiment {kind!r} takes no benchmarks list; remove it")
            return []
        if not isinstance(value, list) or not value:
            raise ValueError("needs a non-empty list of benchmarks")
        full = info.data.get("profile") == "full"
        raw: list[Any] = []
        for i, v in enumerate(value):
            raw += _benchmark_points(i, v, full, room=MAX_POINTS - len(raw))
        counts: dict[str, int] = {}
        for point in raw:
            counts[point.name] = counts.get(point.name, 0) + 1
        entries = []
        for point in raw:
            key = point.key or point.name
            if point.key is None and counts[point.name] > 1:
                every = {**point.params, **({"instances": point.instances} if point.instances else {})}
                shown = {k: every[k] for k in point.sweep} or every
                if sum(1 for o in raw if o.name == point.name
                       and {k: {**o.params, "instances": o.instances}.get(k) for k in shown} == shown) > 1:
                    shown = every
                key = f"{point.name}[{','.join(f'{k}={v}' for k, v in sorted(shown.items()))}]"
            entries.append(BenchmarkEntry(key=key, name=point.name, params=point.params, sweep=point.sweep,
                                          instances=point.instances))
        keys = [e.key for e in entries]
        dup = {k for k in keys if keys.count(k) > 1}
        if dup:
            raise ValueError(f"benchmark {sorted(dup)[0]!r} listed twice with the same parameters")
        return entries

    def model_post_init(self, _: Any) -> None:
        check_budget(self)
        names = [p.name for p in self.platforms]
        kind = EXPERIMENTS.get(self.experiment)
        own = next((i for i, p in enumerate(self.platforms) if p.image is not None), None)
        if own is not None and not kind.uses_platform_images:
            raise InputError(f"platforms[{own}].image: experiment {self.experiment!r} runs every platform on the "
                             "campaign's one image (the same binaries everywhere)",
                             "remove the platform's image: and set the campaign's image: {release: ...}, "
                             "or compare images with experiment: density")
        if self.hosts and kind.across_hosts == "no":  # it ran as benchmarks with none, silently (#26)
            raise InputError(f"hosts: experiment {self.experiment!r} does not run across hosts",
                             "remove hosts: and run the campaign with `virtbench run` on the host to measure")
        kind.validate_campaign(self)
        for i, p in enumerate(self.platforms):
            if p.inside is None:
                continue
            where = f"platforms[{i}].inside"
            if p.inside not in names:
                raise InputError(f"{where}: no platform named {p.inside!r}", f"use one of {', '.join(names)}")
            outer = self.platform(p.inside)
            if outer.inside is not None or p.inside == p.name:
                raise InputError(f"{where}: {p.inside!r} is itself stacked; one level of stacking is supported")
            if outer.type not in PLATFORMS.names() or not PLATFORMS.get(outer.type).holds_inner:
                raise InputError(f"{where}: {p.inside!r} is a {outer.type} platform; only a VM can host another",
                                 "declare e.g. {name: vm, type: qemu} and use inside: vm")
            if p.type not in PLATFORMS.names() or PLATFORMS.get(p.type).kind != "container":
                raise InputError(f"{where}: only container platforms run inside a VM (got {p.type})")
        _check_network(self)
        _check_cross_host(self)
        if self.baseline in names and self.platform(self.baseline).inside is not None:
            raise InputError(f"baseline {self.baseline!r} is stacked; the baseline must be bare metal or a single layer")
        if self.baseline not in names and not (self.baseline == "" and EXPERIMENTS.get(self.experiment).default_baseline == ""):
            raise InputError(f"baseline {self.baseline!r} is not one of the campaign's platforms",
                             f"add it to platforms or set baseline to one of {', '.join(names)}")

    def platform(self, name: str) -> PlatformEntry:
        return next(p for p in self.platforms if p.name == name)



VALIDATOR_READS = {"platforms": ("experiment",), "benchmarks": ("experiment", "profile"), "adaptive": ("experiment",),
                   "probes": ("experiment",)}
"""Fields the list validators read from `info.data`, which pydantic fills in declaration order:
a field declared after its reader would silently read as its default."""


def check_field_order(model: type[BaseModel], reads: dict[str, tuple[str, ...]]) -> None:
    """Fail at import (not silently at validation) if a reader is declared before what it reads."""
    order = list(model.model_fields)
    for reader, needs in reads.items():
        late = [n for n in needs if order.index(n) > order.index(reader)]
        if late:
            raise TypeError(f"{model.__name__}.{reader} is validated with {', '.join(late)}, declared after it: "
                            "declare them first")


check_field_order(Campaign, VALIDATOR_READS)

def _check_network(campaign: Campaign) -> None:
    """Refuse a client-server benchmark whose two ends cannot reach each other on a platform:
    caught here, it is one line with the fix; at run time it was a failure in every round.

    The host end runs on this host, which a container inside a VM can neither reach nor be
    reached from (its address is on the VM's own bridge), so host placements are refused there."""
    pairs = [(b, BENCHMARKS.get(b.name).Params(**b.params)) for b in campaign.benchmarks
             if issubclass(BENCHMARKS.get(b.name), PairBenchmark)]
    for i, p in enumerate(campaign.platforms):
        if not pairs or p.type not in PLATFORMS.names():  # a node an experiment kind builds itself
            continue
        cls = PLATFORMS.get(p.type)
        for bench, params in pairs:
            client, server = getattr(params, "client", "instance"), getattr(params, "server", "peer")
            where = f"platforms[{i}] {p.name!r} with benchmark {bench.key!r} (client: {client}, server: {server})"
            if p.inside is not None and "host" in (client, server):
                raise InputError(
                    f"{where}: {p.name} runs inside the VM {p.inside!r}, and an end on the host cannot "
                    "reach the container (or be reached from it) through the VM",
                    f"use server: peer or server: instance for {p.name}, or measure host traffic on {p.inside!r} itself")
            needs: list[tuple[Literal["inbound", "to_host"], str]] = []
            if server == "peer" or (server == "instance" and client == "host"):
                needs.append(("inbound", "the other end must connect to the instance"))
            if server == "host" and client == "instance":
                needs.append(("to_host", "the instance must connect to the host"))
            for need, why in needs:
                gap = cls.network_gap(cls.Options(**p.options), need)
                if gap:
                    fix = cls.reachable_network
                    raise InputError(f"{where}: {why}, but {p.name} has {gap}",
                                     f"set network: {fix} on platform {p.name!r}, or use server: instance "
                                     "(client and server in one instance, over loopback)")


def cross_host(campaign: Campaign) -> dict[str, OnHost]:
    """Benchmark key -> where its server runs, for the pairs measured across hosts."""
    out = {}
    for b in campaign.benchmarks:
        cls = BENCHMARKS.get(b.name)
        if issubclass(cls, PairBenchmark):
            server = getattr(cls.Params(**b.params), "server", None)
            if isinstance(server, OnHost):
                out[b.key] = server
    return out


def _check_cross_host(campaign: Campaign) -> None:
    """`server: {host: NAME}`: the host exists, the client end has a host, and every platform's
    instances use their host's own address (host networking), which the other host can reach."""
    names = [h.name for h in campaign.hosts]
    for key, server in cross_host(campaign).items():
        where = f"benchmark {key!r} (server: {{host: {server.host}}})"
        if server.host not in names:
            raise InputError(f"{where}: no host {server.host!r} in the campaign's hosts",
                             f"add it to hosts:, or use one of {', '.join(names)}" if names else
                             "list the hosts under hosts: (e.g. hosts: [local, NAME])")
        clients = [n for n in names if n != server.host]
        if clients != ["local"]:
            raise InputError(f"{where}: the client end of a cross-host pair runs on the controller (local); "
                             f"hosts {', '.join(clients) or 'none'} cannot be its client",
                             "list local and the server's host under hosts:")
        entry = next(b for b in campaign.benchmarks if b.key == key)
        if getattr(BENCHMARKS.get(entry.name).Params(**entry.params), "client", "instance") != "instance":
            raise InputError(f"{where}: client: host with the server on another host", "remove client: host")
        for p in campaign.platforms:
            if p.type not in PLATFORMS.names():
                continue
            net = getattr(PLATFORMS.get(p.type).Options(**p.options), "network", "host")
            if p.inside is not None or net != "host":
                raise InputError(f"{where}: platform {p.name!r} has network {net if p.inside is None else 'inside a VM'}: "
                                 "the other host cannot reach its instance",
                                 f"set network: host on platform {p.name!r} (cross-host pairs use the hosts' own "
                                 "addresses, no published ports)")


def parse_campaign(data: Any, source: str = "<campaign>", *, dynamic_inventory: bool = False) -> Campaign:
    """Validate a campaign mapping; raise one InputError line naming source, field and fix.
    dynamic_inventory: the CLI user allowed ansible-inventory to run an inventory script/plugin."""
    if not isinstance(data, dict):
        got = "empty" if data is None else "a list" if isinstance(data, list) else "a single value"
        raise InputError(f"{source}: a campaign must be a mapping with name, platforms and benchmarks (this one is "
                         f"{got})", "write `name: ...`, `platforms: [...]` and `benchmarks: [...]` at the top level")
    odd = next((k for k in data if not isinstance(k, str)), None)
    if odd is not None or None in data:
        raise InputError(one_line(f"{source}: unknown key {odd!r}"), unknown_key(str(odd), str(odd), Campaign))
    try:
        return Campaign.model_validate(data, context={"dynamic_inventory": dynamic_inventory})
    except InputError as exc:
        raise InputError(one_line(f"{source}: {exc.message}"), exc.fix) from None
    except ValidationError as exc:
        err = exc.errors()[0]
        if err["type"] == "extra_forbidden" and len(err["loc"]) == 1:
            key = str(err["loc"][0])
            raise InputError(one_line(f"{source}: unknown key {key!r}"), unknown_key(key, key, Campaign)) from None
        if err["type"] == "value_error":
            msg = str(err.get("ctx", {}).get("error", err["msg"]))
            field = locate(Campaign, tuple(err["loc"]))[0]
            raise InputError(one_line(f"{source}: {msg if msg.startswith(field) else f'{field}: {msg}'}")) from None
        raise InputError(f"{source}: {first_error(exc, '', Campaign)}") from None
