"""The same scenario in ns-3: translate a pathflow `Scenario` into an `Ns3Config` and run it.

Supported: star and dumbbell topologies with uniform links (no `[[topology.links]]` overrides),
drop-tail, ECN-step (RED as a step marker) and RED queues, TCP NewReno (`cc = "reno"`) and
DCTCP, incast and one-to-one traffic, long-lived flows. Anything else raises a ScenarioError that
names the field. The result uses the names and units of `pathflow.results`; its `queue` and
`link_departure` count IP bytes (full packets, as the fluid model does), `flow_rate` counts
payload (goodput): multiply by packet / (packet - 52) to compare with fluid delivered bytes.

Modelling notes for a fair comparison: ns-3's NewReno grows by one segment per ACK and acknowledges
every second segment, so its fluid counterpart has `ack_ratio = 2`; ns-3's DCTCP grows through
TcpLinuxReno, one segment per window whatever the ACK ratio (`ack_ratio = 1`).
"""

from __future__ import annotations

import math

import xarray as xr

from pathflow.routing import build_routes
from pathflow.scenario import Scenario, ScenarioError
from pathflow.topology import build_network
from pathflow.validation.ns3_runner import Ns3Config, run_ns3

__all__ = ["ns3_config", "simulate_ns3"]


def ns3_config(scenario: Scenario, sample_interval: float = 1e-3) -> Ns3Config:
    """The ns-3 configuration of `scenario` (see the module docstring for what is supported)."""
    spec = scenario.spec
    topo = spec.topology
    if topo.kind not in ("star", "dumbbell"):
        raise ScenarioError(f"topology.kind: the ns-3 runner builds 'star' and 'dumbbell', "
                            f"not {topo.kind!r}")
    if topo.links:
        raise ScenarioError("topology.links: the ns-3 runner needs uniform links (no overrides)")
    if spec.traffic.pattern not in ("incast", "one_to_one"):
        raise ScenarioError("traffic.pattern: the ns-3 runner supports 'incast' (star) and "
                            "'one_to_one' (dumbbell)")
    if not math.isinf(scenario.flow_size):
        raise ScenarioError("traffic.size: the ns-3 runner runs long-lived flows ('inf')")
    network = build_network(scenario)
    routes = build_routes(scenario, network)
    link = network.links[0]
    packet = scenario.packet_bytes
    aqm = scenario.aqm_si
    return Ns3Config(
        topology=topo.kind,
        senders=topo.senders or 1,
        link_rate_bps=link.capacity * 8,
        delay_s=link.delay,
        buffer_packets=round(link.buffer / packet),
        aqm=spec.aqm.kind,
        cc=spec.transport.cc,
        flows=len(routes.flows),
        duration_s=scenario.duration,
        threshold_packets=aqm.get("threshold", 20 * packet) / packet,
        red_min_packets=aqm.get("min", 5 * packet) / packet,
        red_max_packets=aqm.get("max", 15 * packet) / packet,
        red_pmax=aqm["pmax"],
        red_weight=aqm["weight"],
        packet_bytes=round(packet),
        start_times_s=tuple(flow.start for flow in routes.flows),
        sample_interval_s=sample_interval,
        seed=max(1, spec.run.seed),
        dctcp_g=spec.transport.g,
        initial_cwnd_packets=round(scenario.size(spec.transport.init_cwnd, "transport.init_cwnd")
                                   / packet),
    )


def simulate_ns3(scenario: Scenario, sample_interval: float = 1e-3,
                 timeout_s: float | None = None) -> xr.Dataset:
    """Run `scenario` in ns-3 (in a subprocess) and return its Dataset."""
    ds = run_ns3(ns3_config(scenario, sample_interval), timeout_s=timeout_s)
    ds.attrs["scenario"] = scenario.to_toml()
    ds.attrs.setdefault("packet_bytes", scenario.packet_bytes)
    return ds
