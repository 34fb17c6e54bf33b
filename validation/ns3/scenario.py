"""The same scenario in ns-3: translate a pathflow `Scenario` into an `Ns3Config` and run it.

Supported: every topology pathflow builds (star, dumbbell, fat-tree, leaf-spine, graph), with
per-link overrides, every traffic pattern, every routing mode, drop-tail, ECN-step (RED as a
step marker) and RED queues, TCP NewReno (`cc = "reno"`) and DCTCP, long-lived flows, finite
ones (`[traffic] size`) and barrier-synchronised rounds of them (`[traffic] rounds`). Refused
with a ScenarioError that names the field: several traffic groups, Linux's recovery, and a
cable whose two directions have different delays (an ns-3 point-to-point channel has one
delay).

How a scenario maps:
- A star or dumbbell with uniform links whose flows are the runner's own (star: `h{i % N} ->
  r0`; dumbbell: `h{i % N} -> r{i % N}`) runs on the runner's built-in star or dumbbell, exactly
  as before networks existed (same ns-3 objects, same results).
- Anything else runs as `topology = "network"`: pathflow's nodes, links (rate, delay, buffer per
  port) and flows, with pathflow's link names, and each flow on pathflow's path(s)
  (`build_routes`): `ecmp`, `shortest` and `static` give one path per flow, which ns-3 follows
  exactly in both directions (per-flow tables, not per-destination routes, so flows to one host
  may differ; see `pathflow.validation.ns3`); `spray` gives the equal-cost paths with equal
  weights, which ns-3 sprays per packet and per hop with pathflow's per-path shares.
  `spray="random_ecmp"` hands spraying to ns-3's own per-packet random ECMP instead
  (`Ipv4GlobalRouting`), the same split on a fat-tree or leaf-spine, not on irregular graphs.

The result uses the names and units of `pathflow.results`; its `queue` and `link_departure` count
IP bytes (full packets, as the fluid model does), `flow_rate` counts payload (goodput): multiply
by packet / (packet - 52) to compare with fluid delivered bytes.

Modelling notes for a fair comparison: ns-3's NewReno grows by one segment per ACK and acknowledges
every second segment, so its fluid counterpart has `ack_ratio = 2`; ns-3's DCTCP grows through
TcpLinuxReno, one segment per window whatever the ACK ratio (`ack_ratio = 1`).
"""

from __future__ import annotations

import math
from typing import Any, Literal

import xarray as xr

from pathflow.metrics import store_warmup
from pathflow.routing import Routes, build_routes
from pathflow.scenario import Scenario, ScenarioError
from pathflow.topology import Network, build_network
from pathflow.validation.ns3.config import (
    TCP_IP_HEADER_BYTES,
    Ns3Cable,
    Ns3Config,
    Ns3Network,
    Ns3Path,
)
from pathflow.validation.ns3.run import run_ns3

__all__ = ["ns3_config", "simulate_ns3"]

Spray = Literal["paths", "random_ecmp"]


def ns3_config(scenario: Scenario, sample_interval: float = 1e-3,
               spray: Spray = "paths") -> Ns3Config:
    """The ns-3 configuration of `scenario` (see the module docstring for the mapping).

    spray: how ns-3 spreads a `spray` scenario's packets: "paths" (pathflow's paths and
    weights, per-hop weighted choice) or "random_ecmp" (ns-3's per-packet random ECMP).
    """
    si = scenario.si
    if len(si.groups) > 1:
        raise ScenarioError("traffic.groups: the ns-3 runner runs one traffic table with one "
                            "congestion control; run groups with the fluid or packet engine")
    if scenario.control.ns3_type is None:
        raise ScenarioError(f"transport.cc: {si.transport.cc!r} has no ns-3 counterpart")
    if si.transport.recovery == "linux":
        raise ScenarioError("transport.recovery: ns-3's TCP has no RACK-TLP; run it with "
                            "recovery = 'rfc6675'")
    if spray not in ("paths", "random_ecmp"):
        raise ValueError(f"spray must be 'paths' or 'random_ecmp', got {spray!r}")
    network = build_network(scenario)
    routes = build_routes(scenario, network)
    first = network.links[0]
    packet = si.transport.mss
    aqm = si.aqm.parameters
    common: dict[str, Any] = dict(
        link_rate_bps=first.capacity * 8,
        delay_s=first.delay,
        buffer_packets=_packets(first.buffer, packet, first.name),
        aqm=si.aqm.kind,
        cc=si.transport.cc,
        flows=len(routes.flows),
        duration_s=si.run.duration,
        threshold_packets=aqm.get("threshold", 20 * packet) / packet,
        red_min_packets=aqm.get("min", 5 * packet) / packet,
        red_max_packets=aqm.get("max", 15 * packet) / packet,
        red_pmax=aqm.get("pmax", 0.1),
        red_weight=aqm.get("weight", 0.002),
        packet_bytes=round(packet),
        start_times_s=tuple(flow.start for flow in routes.flows),
        sample_interval_s=sample_interval,
        seed=max(1, si.run.seed),
        dctcp_g=si.transport.parameters.get("g", 1 / 16),
        initial_cwnd_packets=round(si.transport.parameters["init_cwnd"]),
        min_rto_s=si.transport.rto_min,
        delayed_ack_timeout_s=si.transport.delayed_ack_timeout,
        sack=si.transport.sack,
        # the same segments as the scenario's wire bytes: their payload (ns-3 counts payload)
        block_bytes=(0 if math.isinf(si.traffic.size)
                     else math.ceil(si.traffic.size * (packet - TCP_IP_HEADER_BYTES) / packet)),
        rounds=si.traffic.rounds,
    )
    topo = si.topology
    if topo.kind in ("star", "dumbbell") and not topo.links:
        classic = Ns3Config(topology=topo.kind, senders=topo.senders or 1, **common)
        if classic.flow_endpoints() == [(f.src, f.dst) for f in routes.flows]:
            return classic
    mode = "random_ecmp" if si.routing.mode == "spray" and spray == "random_ecmp" else "paths"
    graph = _network(network, routes, packet, common, mode)
    return Ns3Config(topology="network", network=graph,
                     senders=len({f.src for f in routes.flows}), **common)


def _packets(buffer_bytes: float, packet: float, link: str) -> int:
    count = round(buffer_bytes / packet)
    if count < 1:
        raise ScenarioError(f"topology.buffer: link {link} holds less than one packet "
                            f"({buffer_bytes:g} B); ns-3 queues count whole packets")
    return count


def _network(network: Network, routes: Routes, packet: float, defaults: dict[str, Any],
             routing: Literal["paths", "random_ecmp"]) -> Ns3Network:
    """pathflow's links as ns-3 cables (values equal to the config defaults left None, so
    that the JSON shows only what differs), its flows and their paths as node lists."""
    links = {(link.src, link.dst): link for link in network.links}
    nodes: dict[str, None] = {}  # insertion-ordered set: nodes in order of first mention
    cables: list[Ns3Cable] = []
    done: set[frozenset[str]] = set()
    for link in network.links:
        nodes.setdefault(link.src)
        nodes.setdefault(link.dst)
        if frozenset((link.src, link.dst)) in done:
            continue  # the cable was made from its other direction
        done.add(frozenset((link.src, link.dst)))
        back = links.get((link.dst, link.src))
        if back is None:
            raise ScenarioError(f"topology: link {link.name} has no reverse direction; ns-3 "
                                "cables are full-duplex")
        if not math.isclose(link.delay, back.delay, rel_tol=1e-12, abs_tol=1e-15):
            raise ScenarioError(f"topology.links: {link.name} has delay {link.delay:g} s and "
                                f"{back.name} {back.delay:g} s; an ns-3 point-to-point cable "
                                "has one delay for both directions")

        def value(x: float, default: float) -> float | None:
            return None if x == default else x

        cables.append(Ns3Cable(
            a=link.src, b=link.dst,
            rate_ab_bps=value(link.capacity * 8, defaults["link_rate_bps"]),
            rate_ba_bps=value(back.capacity * 8, defaults["link_rate_bps"]),
            delay_s=value(link.delay, defaults["delay_s"]),
            buffer_ab_packets=_optional_int(value(_packets(link.buffer, packet, link.name),
                                                  defaults["buffer_packets"])),
            buffer_ba_packets=_optional_int(value(_packets(back.buffer, packet, back.name),
                                                  defaults["buffer_packets"])),
        ))  # fmt: skip
    paths = tuple(
        Ns3Path(flow=flow, weight=weight,
                nodes=(network.links[path[0]].src, *(network.links[i].dst for i in path)))
        for path, flow, weight in zip(routes.paths, routes.path_flow, routes.path_weight,
                                      strict=True)
    )  # fmt: skip
    return Ns3Network(nodes=tuple(nodes), hosts=tuple(network.hosts), cables=tuple(cables),
                      flows=tuple((f.src, f.dst) for f in routes.flows), paths=paths,
                      routing=routing)


def _optional_int(x: float | None) -> int | None:
    return None if x is None else int(x)


def simulate_ns3(scenario: Scenario, sample_interval: float = 1e-3,
                 timeout_s: float | None = None, spray: Spray = "paths") -> xr.Dataset:
    """Run `scenario` in ns-3 (in a subprocess) and return its Dataset."""
    ds = run_ns3(ns3_config(scenario, sample_interval, spray=spray), timeout_s=timeout_s)
    ds.attrs["scenario"] = scenario.to_toml()
    ds.attrs.setdefault("packet_bytes", scenario.si.transport.mss)
    store_warmup(ds, scenario.si.run)
    return ds
