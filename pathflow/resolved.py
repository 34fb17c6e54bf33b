"""A scenario's values in SI units, resolved once: what every consumer downstream reads.

`Scenario` (pathflow.scenario) validates the text of a scenario file and resolves it into a
`Resolved` tree, `scenario.si`, with one section per TOML table. Quantities are floats in SI
units (bytes, seconds, bytes/s), counts are ints, choices are strings, and a key left unset is
`None` where nothing stands in for it. Nothing here parses text: the scenario's text stays in
`Scenario.spec` for provenance (the TOML a result carries in its attrs).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Resolved",
    "ResolvedAqm",
    "ResolvedGroup",
    "ResolvedLinkOverride",
    "ResolvedRouting",
    "ResolvedRun",
    "ResolvedTopology",
    "ResolvedTraffic",
    "ResolvedTransport",
    "steady_start",
]


def steady_start(warmup: float | None, run_length: float) -> float:
    """Start of the steady window that statistics use (s): `[run] warmup` where it is set, else
    a quarter of `run_length` (a scenario's duration, or a result's recorded time)."""
    return warmup if warmup is not None else 0.25 * run_length


@dataclass(frozen=True)
class ResolvedLinkOverride:
    """`[[topology.links]]`: the values it sets (None: left as the topology's) on the links
    whose name matches the glob `match` or whose tier is `tier` (exactly one of the two)."""

    match: str | None
    tier: str | None
    link_rate: float | None  # bytes/s
    delay: float | None  # s, one-way
    buffer: float | None  # bytes

    def selects(self, name: str, tier: str) -> bool:
        if self.tier is not None:
            return self.tier == tier
        return fnmatch.fnmatchcase(name, self.match or "")


@dataclass(frozen=True)
class ResolvedTopology:
    kind: str
    senders: int | None
    k: int | None
    leaves: int | None
    spines: int | None
    hosts_per_leaf: int | None
    edges: str | None  # the graph file as written, relative to the scenario's folder
    hosts: tuple[str, ...] | None
    nics: int  # links per host (multi-homed fat-tree and leaf-spine hosts)
    link_rate: float  # bytes/s, every link unless overridden
    delay: float  # s, one-way
    buffer: float  # bytes, per egress port
    links: tuple[ResolvedLinkOverride, ...]

    def link(self, name: str, tier: str) -> tuple[float, float, float]:
        """(capacity bytes/s, one-way delay s, buffer bytes) of a link after the overrides,
        later overrides winning."""
        rate, delay, buffer = self.link_rate, self.delay, self.buffer
        for override in self.links:
            if override.selects(name, tier):
                rate = rate if override.link_rate is None else override.link_rate
                delay = delay if override.delay is None else override.delay
                buffer = buffer if override.buffer is None else override.buffer
        return rate, delay, buffer


@dataclass(frozen=True)
class ResolvedAqm:
    kind: str
    parameters: Mapping[str, Any]  # the discipline's, resolved (bytes, plain numbers, flags)
    marks_ecn: bool  # marks (True) rather than drops (False) below the buffer limit
    pfc: bool = False  # lossless: priority flow control (`models.pfc`)
    xoff: float | None = None  # bytes; None: per ingress port (`topology.pfc_thresholds`)
    xon: float | None = None  # bytes; None: xoff less 2 packets
    shared_buffer: float | None = None  # bytes: a switch's PFC pool; None: per-port thresholds
    pfc_alpha: float = 0.125  # dynamic-threshold factor with shared_buffer


@dataclass(frozen=True)
class ResolvedTraffic:
    pattern: str
    flows: int | None
    size: float  # bytes per flow; math.inf for a flow that never ends
    start: float  # s
    start_jitter: float | None  # s
    stride: int | None
    pairs: tuple[tuple[int, int], ...] | None
    receiver: int | None
    # incast: barrier-synchronised reads; `size` is each flow's block per round, and a group's
    # next round starts when every one of its flows has delivered its block
    rounds: int = 1


@dataclass(frozen=True)
class ResolvedTransport:
    cc: str
    mss: float  # bytes: a full packet on the wire, also the unit "pkt"
    parameters: Mapping[str, Any]  # the congestion control's, in the units its model receives
    subflows: int = 1  # per connection (MPTCP); 1 for single-path TCP
    path_manager: str = "ndiffports"  # how an MPTCP connection's subflows find their paths
    # the hosts' TCP stack (rto_min and recovery also shape the fluid model's timeouts)
    sack: bool = True  # SACK with RFC 6675 recovery; False: NewReno
    recovery: str = "rfc6675"  # with SACK: "rfc6675", or "linux" (RACK-TLP and PRR)
    rto_min: float = 0.2  # s, lower bound of the retransmission timeout
    delayed_ack_timeout: float = 0.04  # s, delayed-ACK timer
    ack_size: float = 64.0  # bytes: a pure ACK on the wire; 0 leaves ACKs out of the fluid model


@dataclass(frozen=True)
class ResolvedGroup:
    """One traffic group (`[[traffic.groups]]`): its flows' traffic and transport. A scenario
    without groups is one group, `[traffic]` with `[transport]`."""

    traffic: ResolvedTraffic
    transport: ResolvedTransport
    where: str = ""  # "traffic.groups[i]"; "" for the one group of a file without groups

    def field(self, section: str, key: str) -> str:
        """The dotted name of one of the group's keys, for errors ("traffic.groups[1].flows",
        or "traffic.flows" without groups)."""
        return f"{self.where or section}.{key}"


@dataclass(frozen=True)
class ResolvedRouting:
    mode: str
    max_paths: int
    paths: tuple[tuple[int, tuple[str, ...]], ...] = ()  # (flow, node names): one subflow each
    scheme: str = "vlan"  # hamiltonian: paths per (VLAN, ingress switch, port), or "shared"
    vlans: tuple[tuple[str, ...], ...] = ()  # hamiltonian: each VLAN's hosts


@dataclass(frozen=True)
class ResolvedRun:
    duration: float  # s
    seed: int
    dt: float | None  # s; None: chosen from the round trips
    sample: float | None  # s; None: chosen from the record budget
    warmup: float | None  # s; None: a quarter of the run (`steady_start`)
    precision: str
    feedback_delay: str = "round_trip"  # or "propagation": the loop delay held at the base RTT
    representatives: int = 32  # per class of flows that may time out (`compile._exchangeable`)

    @property
    def steady_start(self) -> float:
        """Start of the steady window of this run (s): `warmup`, else a quarter of the
        duration."""
        return steady_start(self.warmup, self.duration)


@dataclass(frozen=True)
class Resolved:
    name: str
    topology: ResolvedTopology
    aqm: ResolvedAqm
    traffic: ResolvedTraffic
    transport: ResolvedTransport
    routing: ResolvedRouting
    run: ResolvedRun
    groups: tuple[ResolvedGroup, ...]  # at least one; flows are numbered group after group

    @property
    def min_cwnd_bytes(self) -> float:
        """The smallest window floor of any group (bytes; 0 where no control has one)."""
        return min(float(group.transport.parameters.get("min_cwnd", 0.0)) * group.transport.mss
                   for group in self.groups)
