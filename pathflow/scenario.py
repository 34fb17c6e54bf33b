"""Scenario files: the TOML vocabulary, its validation, and its values in SI units.

A scenario names a topology, a queue discipline, a traffic pattern, a transport and a routing mode,
and how long to run. Every quantity is a string with a unit; `Scenario` holds the validated text
(so that it can be written back out unchanged) and resolves it once, while validating, into SI
values (`scenario.si`, a `pathflow.resolved.Resolved`: bytes, seconds, bytes/s) that everything
downstream reads. Any error is a `ScenarioError` whose message is one line naming the field and
what is allowed.

At about 620 lines this is longer than the project's modules usually are: the section models,
their cross-field checks and the resolution into SI form one pass over one vocabulary, in the
order that decides which error a file with several gets; split, that order would live in two
places.
"""

from __future__ import annotations

import math
import tomllib
import typing
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Literal

import tomli_w
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator
from pydantic.fields import FieldInfo

from pathflow.models import pfc
from pathflow.models.aqm import QueueDiscipline
from pathflow.models.parameters import resolve_parameters
from pathflow.models.registry import (
    CONTROLS,
    DISCIPLINES,
    CongestionControl,
    multipath_controls,
)
from pathflow.resolved import (
    Resolved,
    ResolvedAqm,
    ResolvedGroup,
    ResolvedLinkOverride,
    ResolvedRouting,
    ResolvedRun,
    ResolvedTopology,
    ResolvedTraffic,
    ResolvedTransport,
)
from pathflow.units import UnitError, parse_rate, parse_size, parse_time

__all__ = ["Scenario", "ScenarioError", "load_scenario"]


class ScenarioError(ValueError):
    """A scenario that cannot be run; the message is one line naming the field."""


def _checked(parse: Any, **kwargs: Any) -> BeforeValidator:
    """Validate the unit syntax at load time; the value itself stays text until resolved."""

    def check(text: Any) -> str:
        parse(text, field="value", **kwargs)  # refuses bare numbers with a units hint
        return text

    return BeforeValidator(check)


@dataclass(frozen=True)
class _SIUnit:
    """The SI unit a quantity resolves to: `with_updates` writes a number given for it in this
    unit, which reads back as exactly that number."""

    symbol: str


Rate = Annotated[str, _checked(parse_rate), _SIUnit("B/s")]
Time = Annotated[str, _checked(parse_time), _SIUnit("s")]
Size = Annotated[str, _checked(parse_size, packet_bytes=1.0), _SIUnit("B")]
SizeOrZero = Annotated[str, _checked(parse_size, packet_bytes=1.0, allow_zero=True),
                       _SIUnit("B")]
FlowSize = Annotated[str, _checked(parse_size, packet_bytes=1.0, allow_inf=True), _SIUnit("B")]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LinkOverride(_Section):
    """`[[topology.links]]`: new rate, delay or buffer for the links whose name matches `match`
    (a glob such as "s0->r0" or "agg*->core*") or whose tier is `tier`."""

    match: str | None = None
    tier: str | None = None
    link_rate: Rate | None = None
    delay: Time | None = None
    buffer: Size | None = None

    @model_validator(mode="after")
    def _one_selector(self) -> LinkOverride:
        if (self.match is None) == (self.tier is None):
            raise ValueError("give exactly one of 'match' (a link-name glob) or 'tier'")
        return self


_TOPOLOGY_KEYS = {
    "star": {"senders"},
    "dumbbell": {"senders"},
    "fattree": {"k"},
    "leafspine": {"leaves", "spines", "hosts_per_leaf"},
    "graph": {"edges", "hosts"},
}


class Topology(_Section):
    kind: Literal["star", "dumbbell", "fattree", "leafspine", "graph"]
    senders: int | None = Field(None, ge=1, le=100_000)
    k: int | None = Field(None, ge=2, le=64)
    leaves: int | None = Field(None, ge=1)
    spines: int | None = Field(None, ge=1)
    hosts_per_leaf: int | None = Field(None, ge=1)
    edges: str | None = None
    hosts: list[str] | None = None
    nics: int = Field(1, ge=1, le=4)
    link_rate: Rate = "10Gbps"
    delay: Time = "1us"
    buffer: Size = "300KB"
    links: list[LinkOverride] = []

    @model_validator(mode="after")
    def _keys_fit_kind(self) -> Topology:
        needed = _TOPOLOGY_KEYS[self.kind] - {"hosts"}
        for key in sorted(needed):
            if getattr(self, key) is None:
                raise ValueError(f"{key!r} is required for kind = {self.kind!r}")
        for kind, keys in _TOPOLOGY_KEYS.items():
            for key in sorted(keys - _TOPOLOGY_KEYS[self.kind]):
                if getattr(self, key) is not None:
                    raise ValueError(f"{key!r} belongs to kind = {kind!r}, not {self.kind!r}")
        if self.kind == "fattree" and self.k is not None and self.k % 2:
            raise ValueError(f"'k' must be even (got {self.k})")
        if self.nics > 1:
            switches = {"fattree": (self.k or 2) // 2, "leafspine": self.leaves or 1}
            if self.kind not in switches:
                raise ValueError(f"'nics': multi-homed hosts attach to neighbouring edge or leaf "
                                 f"switches (kind = 'fattree' or 'leafspine'), not {self.kind!r}"
                                 + ("; a graph host's NICs are its links in the edge file"
                                    if self.kind == "graph" else ""))
            if self.nics > switches[self.kind]:
                where = ("edge switches per pod" if self.kind == "fattree" else "leaves")
                raise ValueError(f"'nics': {self.nics} NICs need as many {where}; this "
                                 f"{self.kind} has {switches[self.kind]}")
        return self


class _Open(BaseModel):
    """A section whose keys beyond the fixed ones are declared by a registered model (the
    congestion control's or the queue discipline's parameters); `Scenario` resolves them."""

    model_config = ConfigDict(extra="allow", frozen=True)

    def declared(self) -> dict[str, Any]:
        """The keys beyond the fixed fields, as the user wrote them."""
        return dict(self.model_extra or {})


class Aqm(_Open):
    kind: str = "droptail"


class Traffic(_Section):
    """`[traffic]`: which hosts send to which, how much and when. `groups` (`[[traffic.groups]]`)
    splits the traffic into groups, each a traffic table of its own that may also set any
    `[transport]` key but the packet size (`_groups`)."""

    pattern: Literal["incast", "permutation", "stride", "random", "explicit", "one_to_one"] = (
        "incast"
    )
    flows: int | None = Field(None, ge=1, le=1_000_000)
    size: FlowSize = "inf"
    start: Time = "0s"
    start_jitter: Time | None = None
    stride: int | None = Field(None, ge=1)
    pairs: list[tuple[int, int]] | None = None
    receiver: int | None = Field(None, ge=0)
    rounds: int = Field(1, ge=1, le=1_000_000)
    groups: list[dict[str, Any]] = []

    @model_validator(mode="after")
    def _keys_fit_pattern(self) -> Traffic:
        if self.pattern == "stride" and self.stride is None:
            raise ValueError("'stride' is required for pattern = 'stride'")
        if self.pattern == "explicit" and not self.pairs:
            raise ValueError("'pairs' (a list of [src, dst] host indices) is required for "
                             "pattern = 'explicit'")
        if self.stride is not None and self.pattern != "stride":
            raise ValueError(f"'stride' is not used by pattern = {self.pattern!r}")
        if self.pairs is not None and self.pattern != "explicit":
            raise ValueError(f"'pairs' is not used by pattern = {self.pattern!r}")
        if self.receiver is not None and self.pattern != "incast":
            raise ValueError(f"'receiver' is not used by pattern = {self.pattern!r}")
        return self


class Transport(_Open):
    cc: str = "dctcp"
    mss: Size = "1500B"
    ack_size: SizeOrZero = "64B"
    subflows: int = Field(1, ge=1, le=64)
    path_manager: Literal["ndiffports", "fullmesh"] = "ndiffports"
    # the hosts' TCP stack, one per scenario (`_STACK_KEYS`; `_stack` resolves and checks them)
    sack: bool = True
    recovery: Literal["rfc6675", "linux"] = "rfc6675"
    rto_min: Time = "200ms"
    delayed_ack_timeout: Time | None = None


class ExplicitPath(_Section):
    """`[[routing.paths]]`: one subflow of connection `flow` along `nodes` (node names, from the
    flow's source host to its destination host)."""

    flow: int = Field(ge=0)
    nodes: list[str] = Field(min_length=2)


class Routing(_Section):
    mode: Literal["shortest", "ecmp", "spray", "static", "kshortest", "hamiltonian"] = "ecmp"
    max_paths: int = Field(256, ge=1, le=4096)
    paths: list[ExplicitPath] = []
    scheme: Literal["vlan", "shared"] | None = None
    vlans: list[list[str]] | None = None

    @model_validator(mode="after")
    def _hamiltonian_keys(self) -> Routing:
        for key in ("scheme", "vlans"):
            if getattr(self, key) is not None and self.mode != "hamiltonian":
                raise ValueError(f"{key!r} is used by mode = 'hamiltonian' only")
        return self


class Run(_Section):
    duration: Time = "100ms"
    seed: int = 1
    dt: Time | None = None
    sample: Time | None = None
    warmup: Time | None = None
    precision: Literal["float64", "float32"] = "float64"
    feedback_delay: Literal["round_trip", "propagation"] = "round_trip"
    representatives: int = Field(32, ge=0, le=100_000)


class _ScenarioModel(_Section):
    name: str = "scenario"
    topology: Topology
    aqm: Aqm = Aqm()
    traffic: Traffic = Traffic()
    transport: Transport = Transport()
    routing: Routing = Routing()
    run: Run = Run()


def _error_line(error: ValidationError) -> str:
    first = error.errors()[0]
    loc = ".".join(str(part) for part in first["loc"] if not isinstance(part, int))
    kind = first["type"]
    if kind == "extra_forbidden":
        section, _, key = loc.rpartition(".")
        model = _section_model(section)
        allowed = ", ".join(model.model_fields) if model else ""
        where = f"[{section}]" if section else "the top level"
        return f"{loc}: unknown key {key!r} in {where}; allowed keys: {allowed}"
    message = first["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
    message = message.replace("value: ", "")
    if kind == "missing":
        return f"{loc}: required key is missing"
    if "input" in first and kind not in ("value_error",) and not isinstance(first["input"], dict):
        return f"{loc}: {message} (got {first['input']!r})"
    return f"{loc}: {message}" if loc else message


def _section_model(section: str) -> type[BaseModel] | None:
    model: type[BaseModel] | None = _ScenarioModel
    for part in filter(None, section.split(".")):
        field = model.model_fields.get(part) if model else None
        annotation = getattr(field, "annotation", None)
        args = getattr(annotation, "__args__", ())
        model = annotation if isinstance(annotation, type) else next(
            (arg for arg in args if isinstance(arg, type) and issubclass(arg, BaseModel)), None)
    return model


def _si_unit(field: FieldInfo) -> str | None:
    """The SI unit symbol of a quantity field (`Rate`, `Time`, `Size`, optional or not)."""
    metadata = list(field.metadata)
    for argument in typing.get_args(field.annotation):  # `Time | None` keeps it inside
        metadata += getattr(argument, "__metadata__", ())
    return next((m.symbol for m in metadata if isinstance(m, _SIUnit)), None)


# dotted key -> SI unit of every quantity a dotted update can reach ("run.dt": "s")
_SI_UNITS = {
    f"{section}.{key}": unit
    for section, field in _ScenarioModel.model_fields.items()
    if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel)
    for key, inner in field.annotation.model_fields.items()
    if (unit := _si_unit(inner)) is not None
}


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _quantity_text(value: float, unit: str) -> str:
    """A number in SI units as scenario text that reads back as exactly that number (repr
    writes the shortest text of a float that does)."""
    return "inf" if value == math.inf else f"{float(value)!r}{unit}"


def _parameters(owner: Any, given: dict[str, Any], section: str, packet_bytes: float,
                fixed: tuple[str, ...], link_rate: float) -> dict[str, Any]:
    """Resolve the parameters `owner` (a model or a queue discipline) declares, from its presets
    (read at `link_rate`, bytes/s) where it has some; one-line ScenarioError naming the key.
    `fixed` are the section's keys beside the parameters (named when a key is unknown)."""
    declared = owner.parameters
    names = [p.name for p in declared] + (["preset"] if owner.presets else [])
    for key in given:
        if key not in names:
            chooser = "kind" if section == "aqm" else "cc"
            raise ScenarioError(f"{section}.{key}: unknown key {key!r} for this {chooser}; allowed "
                                f"keys: {', '.join([*fixed, *names])}")
    try:
        values = resolve_parameters(declared, given, section, packet_bytes, owner.presets,
                                    link_rate)
        owner.check(values)
    except ValueError as error:
        message = str(error)
        raise ScenarioError(message if message.startswith(f"{section}.")
                            else f"{section}.{message}") from None
    return values


def _quantity(parse: Callable[..., float], text: str, field: str, **kwargs: Any) -> float:
    """`parse(text)` in SI units, a unit error as a ScenarioError."""
    try:
        return parse(text, field=field, **kwargs)
    except UnitError as error:
        raise ScenarioError(str(error)) from None


def _topology(topology: Topology, packet_bytes: float) -> ResolvedTopology:
    def size(text: str, field: str) -> float:
        return _quantity(parse_size, text, field, packet_bytes=packet_bytes)

    buffer = size(topology.buffer, "topology.buffer")
    overrides = []
    for i, override in enumerate(topology.links):
        where = f"topology.links[{i}]"
        overrides.append(ResolvedLinkOverride(
            match=override.match, tier=override.tier,
            link_rate=None if override.link_rate is None
            else _quantity(parse_rate, override.link_rate, f"{where}.link_rate"),
            delay=None if override.delay is None
            else _quantity(parse_time, override.delay, f"{where}.delay"),
            buffer=None if override.buffer is None else size(override.buffer, f"{where}.buffer")))
    return ResolvedTopology(
        kind=topology.kind, senders=topology.senders, k=topology.k, leaves=topology.leaves,
        spines=topology.spines, hosts_per_leaf=topology.hosts_per_leaf, edges=topology.edges,
        hosts=None if topology.hosts is None else tuple(topology.hosts), nics=topology.nics,
        link_rate=_quantity(parse_rate, topology.link_rate, "topology.link_rate"),
        delay=_quantity(parse_time, topology.delay, "topology.delay"),
        buffer=buffer, links=tuple(overrides))


def _run(run: Run, duration: float) -> ResolvedRun:
    """`[run]` resolved: the step, sample interval and warm-up positive (the warm-up may be 0)
    and shorter than the run."""
    times: dict[str, float | None] = {}
    for key in ("dt", "sample", "warmup"):
        text = getattr(run, key)
        times[key] = value = None if text is None else parse_time(text, f"run.{key}")
        if value is None:
            continue
        if key != "warmup" and value <= 0:
            raise ScenarioError(f"run.{key}: must be > 0")
        if value >= duration:
            raise ScenarioError(f"run.{key}: {text} must be shorter than run.duration "
                                f"({run.duration})")
    return ResolvedRun(duration=duration, seed=run.seed, precision=run.precision,
                       feedback_delay=run.feedback_delay,
                       representatives=run.representatives, **times)


_TRAFFIC_KEYS = tuple(key for key in Traffic.model_fields if key != "groups")
_TRANSPORT_KEYS = tuple(Transport.model_fields)
# [transport] keys that hold for the whole scenario (one packet size, one host TCP stack)
_STACK_KEYS = ("mss", "sack", "recovery", "rto_min", "delayed_ack_timeout")
RTO_MAX = 60.0  # s: RFC 6298 (2.5) allows an upper bound of at least 60 s; rto_min stays below
DELAYED_ACK_MAX = 0.5  # s: RFC 5681 (4.2): an ACK must be sent within 500 ms of a segment


def _control(cc: str, where: str) -> CongestionControl:
    if cc not in CONTROLS:
        raise ScenarioError(f"{where}.cc: {cc!r} is not allowed; allowed: "
                            f"{', '.join(map(repr, CONTROLS))}")
    return CONTROLS[cc]


def _groups(spec: _ScenarioModel) -> list[tuple[str, Traffic, Transport]]:
    """The traffic groups as (where the group is, its traffic table, its transport table):
    `[traffic]` and `[transport]` themselves without `[[traffic.groups]]` (where: ""); else
    each group's keys over theirs. A group takes every key of
    `[traffic]` and `[transport]` it does not set, except those its own cc lacks (another
    algorithm's parameters, `subflows` for a single-path cc): so `ack_ratio` in `[transport]`
    holds for every group whose cc has it, and `g` only for DCTCP groups."""
    traffic, transport = spec.traffic, spec.transport
    if not traffic.groups:
        return [("", traffic, transport)]
    common_traffic = traffic.model_dump(exclude_unset=True, exclude={"groups"})
    common_transport = transport.model_dump(exclude_unset=True)
    found = []
    for i, group in enumerate(traffic.groups):
        where = f"traffic.groups[{i}]"
        for key, why in (("mss", "one packet size per scenario; set it in [transport]"),
                         *((key, "one TCP stack per scenario; set it in [transport]")
                           for key in _STACK_KEYS if key != "mss"),
                         ("ack_size", "one ACK size per scenario; set it in [transport]"),
                         ("groups", "groups do not nest")):
            if key in group:
                raise ScenarioError(f"{where}.{key}: {why}")
        cc = group.get("cc", transport.cc)
        control = _control(cc, where)
        kept = set(_TRANSPORT_KEYS) - (set() if control.multipath else {"subflows"})
        kept |= {p.name for p in control.parameters}
        inherited = (common_transport if cc == transport.cc else
                     {k: v for k, v in common_transport.items() if k in kept})
        try:
            own_traffic = Traffic.model_validate(
                {**common_traffic, **{k: v for k, v in group.items() if k in _TRAFFIC_KEYS}})
            own_transport = Transport.model_validate(
                {**inherited, **{k: v for k, v in group.items() if k not in _TRAFFIC_KEYS}})
        except ValidationError as error:
            raise ScenarioError(f"{where}.{_error_line(error)}") from None
        found.append((where, own_traffic, own_transport))
    return found


def _traffic(traffic: Traffic, mss: float, where: str) -> ResolvedTraffic:
    def time(key: str) -> float | None:
        text = getattr(traffic, key)
        return None if text is None else _quantity(parse_time, text, f"{where}.{key}")

    size = _quantity(parse_size, traffic.size, f"{where}.size", packet_bytes=mss, allow_inf=True)
    if math.isinf(size) and traffic.size not in ("inf", "infinite"):
        raise ScenarioError(f"{where}.size: write 'inf' for a flow that never ends")
    if traffic.rounds > 1 and traffic.pattern != "incast":
        raise ScenarioError(f"{where}.rounds: barrier-synchronised rounds are a partition/"
                            f"aggregate read, pattern = 'incast' only (got pattern = "
                            f"{traffic.pattern!r}); leave rounds at 1")
    if traffic.rounds > 1 and math.isinf(size):
        raise ScenarioError(f"{where}.rounds: {traffic.rounds} rounds needs a finite "
                            f"{where}.size (the block each server sends per round)")
    return ResolvedTraffic(
        pattern=traffic.pattern, flows=traffic.flows, size=size, start=time("start") or 0.0,
        start_jitter=time("start_jitter"), stride=traffic.stride,
        pairs=None if traffic.pairs is None else tuple(map(tuple, traffic.pairs)),
        receiver=traffic.receiver, rounds=traffic.rounds)


def _transport(transport: Transport, mss: float, where: str, link_rate: float
               ) -> ResolvedTransport:
    """The transport of one group: its cc known, more than one subflow only with a multipath
    cc, the cc's parameters resolved."""
    control = _control(transport.cc, where)
    if transport.subflows > 1 and not control.multipath:
        raise ScenarioError(f"{where}.subflows: {transport.subflows} subflows need a multipath "
                            f"cc ({multipath_controls()}); {transport.cc!r} runs one subflow "
                            "per flow")
    if transport.path_manager == "fullmesh" and not control.multipath:
        raise ScenarioError(f"{where}.path_manager: fullmesh opens subflows on every address "
                            f"pair, which needs a multipath cc ({multipath_controls()}); "
                            f"{transport.cc!r} runs one subflow per flow")
    fixed = _TRANSPORT_KEYS if where == "transport" else (
        *_TRAFFIC_KEYS, *(key for key in _TRANSPORT_KEYS if key not in (*_STACK_KEYS, "ack_size")))
    values = _parameters(control.model, transport.declared(), where, mss, fixed, link_rate)
    ack_size = _quantity(parse_size, transport.ack_size, f"{where}.ack_size", packet_bytes=mss,
                         allow_zero=True)
    if ack_size > mss:
        raise ScenarioError(f"{where}.ack_size: {transport.ack_size} must not exceed "
                            "transport.mss (a pure ACK carries no data)")
    return ResolvedTransport(cc=transport.cc, mss=mss, parameters=values,
                             subflows=transport.subflows, path_manager=transport.path_manager,
                             ack_size=ack_size, **_stack(transport))


def _stack(transport: Transport) -> dict[str, Any]:
    """The host TCP stack's keys resolved: `rto_min` in (0, 60 s]; `delayed_ack_timeout` in
    (0, 500 ms], by default min(40 ms, rto_min / 5) (Linux's delayed-ACK minimum; a timer as
    long as the RTO would let a one-segment window wait for it every round trip)."""
    rto_min = _quantity(parse_time, transport.rto_min, "transport.rto_min")
    if not 0 < rto_min <= RTO_MAX:
        raise ScenarioError(f"transport.rto_min: {transport.rto_min} must be > 0 and at most "
                            f"{RTO_MAX:g}s (the RTO's upper bound)")
    text = transport.delayed_ack_timeout
    timeout = (min(0.04, rto_min / 5) if text is None
               else _quantity(parse_time, text, "transport.delayed_ack_timeout"))
    if not 0 < timeout <= DELAYED_ACK_MAX:
        raise ScenarioError(f"transport.delayed_ack_timeout: {text} must be > 0 and at most "
                            "500ms (RFC 5681)")
    if transport.recovery == "linux" and not transport.sack:
        raise ScenarioError("transport.recovery: 'linux' needs transport.sack = true (RACK-TLP "
                            "finds losses from SACK blocks)")
    return {"sack": transport.sack, "recovery": transport.recovery, "rto_min": rto_min,
            "delayed_ack_timeout": timeout}


def _red_ecn(aqm_values: dict[str, Any], groups: tuple[ResolvedGroup, ...]) -> None:
    """RED marks where the congestion controls react to ECN and drops where they do not, unless
    `[aqm] ecn` says; groups that disagree must say."""
    if aqm_values.get("ecn", 0.0) is not None:
        return
    reacts = {cc: CONTROLS[cc].ecn for cc in (group.transport.cc for group in groups)}
    if len(set(reacts.values())) > 1:
        raise ScenarioError(
            "aqm.ecn: the traffic groups disagree on ECN ("
            + ", ".join(f"{cc} {'reacts' if ecn else 'does not'}" for cc, ecn in reacts.items())
            + "); set aqm.ecn = true (mark) or false (drop)")
    aqm_values["ecn"] = float(next(iter(reacts.values())))


def _pfc(given: dict[str, Any], mss: float) -> dict[str, Any]:
    """`[aqm]`'s priority flow control keys (`models.pfc`), resolved and checked."""
    try:
        values = resolve_parameters(pfc.PARAMETERS, given, "aqm", mss)
    except ValueError as error:
        raise ScenarioError(str(error)) from None
    for key in ("xoff", "xon", "shared_buffer", "pfc_alpha"):
        if key in given and not values["pfc"]:
            raise ScenarioError(f"aqm.{key}: applies with aqm.pfc = true only")
    shared = values["shared_buffer"] is not None
    if "pfc_alpha" in given and not shared:
        raise ScenarioError("aqm.pfc_alpha: applies with aqm.shared_buffer only (per-port "
                            "thresholds are xoff and xon)")
    for key in ("xoff", "xon"):
        if shared and key in given:
            raise ScenarioError(f"aqm.{key}: with aqm.shared_buffer the thresholds follow the "
                                "switch's occupancy (pfc_alpha); leave xoff and xon unset")
    if values["xoff"] is not None and values["xon"] is not None and values["xon"] > values["xoff"]:
        raise ScenarioError(f"aqm.xon: {given['xon']} must not exceed xoff ({given['xoff']})")
    return values


def _rate_based(groups: tuple[ResolvedGroup, ...], marks: bool, kind: str, lossless: bool
                ) -> None:
    """Rate- and window-based groups are not mixed (one is refused in one line), and a
    rate-based control on a queue that never marks is warned about (it reacts to marks alone),
    as is one on switches that may drop (it does not recover losses quickly)."""
    sends = {group.transport.cc: CONTROLS[group.transport.cc].sends for group in groups}
    if len(set(sends.values())) > 1:
        listed = ", ".join(f"{cc!r} by {how}" for cc, how in sends.items())
        raise ScenarioError(f"traffic.groups: the groups send by rate and by window ({listed});"
                            " a scenario runs rate-based or window-based controls, not both")
    if "rate" in sends.values() and not marks:
        warnings.warn(f"aqm.kind = {kind!r} never marks packets and "
                      f"{', '.join(map(repr, sends))} reacts to ECN marks only: its senders "
                      "stay at line rate (use aqm.kind = 'dcqcn')", stacklevel=4)
    if "rate" in sends.values() and not lossless:
        warnings.warn(f"aqm.pfc = false: {', '.join(map(repr, sends))} expects a lossless "
                      "network; a full buffer drops packets, which its senders recover only "
                      "by timeout (set aqm.pfc = true)", stacklevel=4)


def _resolve(spec: _ScenarioModel) -> Resolved:
    """The scenario's values in SI units, checked across fields. The first problem found is
    a one-line error naming the field, found in the order a reader of the file meets them
    (the packet size first: sizes in "pkt" need it)."""
    transport, aqm = spec.transport, spec.aqm
    mss = parse_size(transport.mss, 1.0, "transport.mss")
    if mss < 64:
        raise ScenarioError("transport.mss: must be at least 64B")
    duration = parse_time(spec.run.duration, "run.duration", allow_zero=False)
    traffic = _traffic(spec.traffic, mss, "traffic")
    topology = _topology(spec.topology, mss)
    groups = tuple(ResolvedGroup(_traffic(own_traffic, mss, where or "traffic"),
                                 _transport(own_transport, mss, where or "transport",
                                            topology.link_rate), where)
                   for where, own_traffic, own_transport in _groups(spec))
    common = (groups[0].transport if not spec.traffic.groups
              else _transport(transport, mss, "transport", topology.link_rate))
    if aqm.kind not in DISCIPLINES:
        raise ScenarioError(f"aqm.kind: {aqm.kind!r} is not allowed; allowed: "
                            f"{', '.join(map(repr, DISCIPLINES))}")
    discipline = DISCIPLINES[aqm.kind]
    lossless = _pfc(aqm.declared(), mss)
    aqm_values = _parameters(discipline, {k: v for k, v in aqm.declared().items()
                                          if k not in lossless},
                             "aqm", mss, ("kind", *lossless), topology.link_rate)
    _red_ecn(aqm_values, groups)
    _rate_based(groups, discipline.marks(aqm_values), aqm.kind, bool(lossless["pfc"]))
    threshold = aqm_values.get("threshold")
    if threshold is not None and threshold >= topology.buffer:
        raise ScenarioError(f"aqm.threshold: {aqm.declared()['threshold']} must be below "
                            f"topology.buffer ({spec.topology.buffer})")
    run = _run(spec.run, duration)
    routing = spec.routing
    for group in groups:
        if routing.mode != "hamiltonian":
            continue
        for key, default in (("subflows", 1), ("path_manager", "ndiffports")):
            if getattr(group.transport, key) != default:
                raise ScenarioError(f"{group.field('transport', key)}: routing.mode = "
                                    "'hamiltonian' gives a connection one subflow per switch link "
                                    f"of its ingress switch (the host's addresses); leave {key} "
                                    f"at {default!r}")
    return Resolved(
        name=spec.name,
        topology=topology,
        aqm=ResolvedAqm(kind=aqm.kind, parameters=aqm_values,
                        marks_ecn=discipline.marks(aqm_values), pfc=bool(lossless["pfc"]),
                        xoff=lossless["xoff"], xon=lossless["xon"],
                        shared_buffer=lossless["shared_buffer"],
                        pfc_alpha=float(lossless["pfc_alpha"])),
        traffic=traffic,
        transport=common,
        routing=ResolvedRouting(mode=routing.mode, max_paths=routing.max_paths,
                                paths=tuple((p.flow, tuple(p.nodes)) for p in routing.paths),
                                scheme=routing.scheme or "vlan",
                                vlans=tuple(tuple(hosts) for hosts in routing.vlans or ())),
        run=run,
        groups=groups,
    )


class Scenario:
    """A validated scenario: `spec` is the file as parsed (text, for provenance), `si` its
    values in SI units (`pathflow.resolved`), resolved once while validating.

    Build one with `load_scenario(path)`, `Scenario.from_dict(d)` or `Scenario.from_toml(text)`;
    `scenario.with_updates({"traffic.flows": 64})` returns a modified copy (used by sweeps).
    """

    def __init__(self, spec: _ScenarioModel, base_dir: Path | None = None) -> None:
        self.spec = spec
        self.base_dir = base_dir or Path.cwd()
        self.si = _resolve(spec)

    # --- construction -----------------------------------------------------------------------
    @classmethod
    def from_dict(cls, data: dict[str, Any], base_dir: Path | None = None) -> Scenario:
        try:
            spec = _ScenarioModel.model_validate(data)
        except ValidationError as error:
            raise ScenarioError(_error_line(error)) from None
        return cls(spec, base_dir)

    @classmethod
    def from_toml(cls, text: str, base_dir: Path | None = None) -> Scenario:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            raise ScenarioError(f"not valid TOML: {error}") from None
        return cls.from_dict(data, base_dir)

    def to_dict(self) -> dict[str, Any]:
        return self.spec.model_dump(exclude_none=True, exclude_defaults=False)

    def to_toml(self) -> str:
        return tomli_w.dumps(self.spec.model_dump(exclude_none=True))

    def with_updates(self, updates: dict[str, Any]) -> Scenario:
        """Copy with dotted keys replaced, e.g. {"traffic.flows": 128, "run.seed": 3}. A
        quantity may be given as a number in SI units ({"run.dt": 2.5e-6}): its value is then
        exactly that number, and the text written for it reads back as it."""
        data = self.spec.model_dump(exclude_none=True)
        for dotted, value in updates.items():
            *sections, key = dotted.split(".")
            node = data
            for section in sections:
                node = node.setdefault(section, {})
            if value is None:
                node.pop(key, None)
            elif dotted in _SI_UNITS and _is_number(value):
                node[key] = _quantity_text(value, _SI_UNITS[dotted])
            else:
                node[key] = value
        return Scenario.from_dict(data, self.base_dir)

    def with_cc(self, cc: str) -> Scenario:
        """Copy with `[transport] cc` set to `cc`, leaving out the parameters it does not
        declare (DCQCN's preset, DCTCP's g) so that one network runs under several congestion
        controls; the parameters both declare are kept."""
        if self.spec.traffic.groups:
            raise ScenarioError("transport.cc: this scenario's traffic groups choose their own "
                                "cc; compare controls on a scenario without traffic.groups")
        model = _control(cc, "transport").model
        data = self.spec.model_dump(exclude_none=True)
        transport = data.setdefault("transport", {})
        declared = {p.name for p in model.parameters}
        for key in [key for key in transport if key not in _TRANSPORT_KEYS]:
            if key not in declared and not (key == "preset" and transport[key] in model.presets):
                del transport[key]
        transport["cc"] = cc
        return Scenario.from_dict(data, self.base_dir)

    def value_of(self, key: str) -> tuple[Any, str | None]:
        """The resolved value of a dotted key and its unit: a quantity in SI units ("bytes",
        "s", "bytes/s"; sizes and rates counted in packets converted at this scenario's packet
        size), "1" for a plain number; a count, choice or flag with no unit (None). A key that
        resolves to nothing scalar gives (None, None)."""
        section, _, name = key.partition(".")
        if section in ("aqm", "transport"):
            owner = self.discipline if section == "aqm" else self.control.model
            declared = {p.name: p for p in owner.parameters}
            resolved = self.si.aqm if section == "aqm" else self.si.transport
            if name in declared and name in resolved.parameters:
                value, unit = resolved.parameters[name], declared[name].unit
                if unit in ("packets", "packets/s") and value is not None:
                    return value * self.packet_bytes, "bytes" if unit == "packets" else "bytes/s"
                return value, unit if unit in ("1", "bytes", "s", "bytes/s") else None
        value = getattr(getattr(self.si, section, None), name, None)
        if not isinstance(value, int | float | str):
            return None, None
        unit = _SI_UNITS.get(key)
        return value, {"B": "bytes", "B/s": "bytes/s", "s": "s"}.get(unit or "")

    def __repr__(self) -> str:
        t = self.spec.topology
        return (f"Scenario({self.name!r}, {t.kind}, {self.spec.transport.cc}, "
                f"{self.spec.traffic.pattern}, duration={self.spec.run.duration})")

    # --- what callers ask for most, short ------------------------------------------------------
    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def packet_bytes(self) -> float:
        """Size of a full packet on the wire (bytes); also the unit 'pkt'."""
        return self.si.transport.mss

    @cached_property
    def control(self) -> CongestionControl:
        """The registry entry of `[transport] cc`."""
        return CONTROLS[self.si.transport.cc]

    @cached_property
    def discipline(self) -> QueueDiscipline:
        """The queue discipline of `[aqm] kind`."""
        return DISCIPLINES[self.si.aqm.kind]


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file (TOML). Raises ScenarioError (one line) on bad input."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as error:
        raise ScenarioError(f"{path}: cannot read scenario file ({error.strerror})") from None
    try:
        return Scenario.from_toml(text, base_dir=path.resolve().parent)
    except ScenarioError as error:
        raise ScenarioError(f"{path.name}: {error}") from None
