"""The fluid model against closed forms

DCTCP's sawtooth analysis (Alizadeh et al. 2010; its amplitude against the packet level) and
the Reno mean-field equilibrium (Misra, Gong, Towsley 2000).
"""

from __future__ import annotations

import math

import pathflow
from pathflow import Scenario
from pathflow.compile import compile_scenario
from pathflow.validation.cases.common import PACKET, queue_figure, steady_window
from pathflow.validation.packet import simulate_packets
from pathflow.validation.registry import CaseResult, Check, case


def _star(flows: int, **sections: dict[str, object]) -> Scenario:
    data: dict[str, dict[str, object]] = {
        "topology": {"kind": "star", "senders": flows, "link_rate": "10Gbps", "delay": "20us",
                     "buffer": "2000pkt"},
        "traffic": {"pattern": "incast", "flows": flows},
    }
    for name, values in sections.items():
        data.setdefault(name, {}).update(values)
    return Scenario.from_dict(data)


K_10G = 65  # packets: Alizadeh et al.'s threshold for 10 Gb/s


@case("dctcp_sawtooth", "DCTCP steady state on one link (Alizadeh et al. 2010)", "closed form")
def dctcp_sawtooth() -> CaseResult:
    """N synchronised DCTCP flows at 10 Gb/s, K = 65 packets: Q_max = K + N (10 %, the issue's
    tolerance). The analysis's amplitude A = 0.5 sqrt(2 N (C RTT + K)) lets the windows grow
    during the reaction round trip; Linux does not (no growth in CWR, `models.window`), nor do
    the fluid model and the packet-level reference, whose troughs are deeper: A is reported
    against the analysis and claimed against the packet level within a factor of 1.5 (the fluid
    flows are exactly synchronised and cut at once; packet-level ones shrink over a round trip
    by PRR and drift apart)."""
    checks, series = [], {}
    for flows in (2, 8, 32):
        scenario = _star(flows, aqm={"kind": "ecn_step", "threshold": f"{K_10G}pkt"},
                         transport={"cc": "dctcp", "min_cwnd": "1pkt"},
                         run={"duration": "200ms"})
        bdp = 1.25e9 * float(compile_scenario(scenario).problem.path_base_rtt[0]) / PACKET
        steady = steady_window(pathflow.simulate(scenario), 0.1)
        packet = steady_window(simulate_packets(scenario), 0.1)
        q_max = float(steady.queue_max.max()) / PACKET
        amplitude = q_max - float(steady.queue_min.min()) / PACKET
        packet_amplitude = float(packet.queue_max.max() - packet.queue_min.min()) / PACKET
        checks += [
            Check(f"Q_max, N = {flows}", K_10G + flows, q_max, 0.10, "packets"),
            Check(f"amplitude against the analysis, N = {flows}",
                  0.5 * math.sqrt(2 * flows * (bdp + K_10G)), amplitude, None, "packets",
                  why="reported: the analysis grows windows during CWR; Linux does not"),
            Check(f"amplitude against the packet level, N = {flows}", packet_amplitude,
                  amplitude, 1.5, "packets", "factor",
                  why="synchronised instant cuts against PRR and drifting packet-level flows"),
            Check(f"throughput, N = {flows}", 1.25e9, float(steady.link_departure.mean()), 0.001,
                  "bytes/s", why="K > C RTT / 7: the queue never empties"),
        ]
        series[f"N = {flows}"] = steady.queue / PACKET
    return CaseResult(checks, queue_figure(series, "DCTCP at 10 Gb/s, K = 65 packets", 0.01))


@case("reno_equilibrium", "Reno mean-field equilibrium on a RED link (Misra et al. 2000)",
      "closed form")
def reno_equilibrium() -> CaseResult:
    """The MGT fluid model's equilibrium p = 2 / (b W^2) with b the ACK ratio; the mean-field
    form reaches it exactly, so the tolerance (0.1 %) only covers the finite run."""
    checks = []
    for flows, ack_ratio in ((10, 1), (4, 1), (6, 2)):
        scenario = Scenario.from_dict({
            "topology": {"kind": "star", "senders": flows, "link_rate": "100Mbps",
                         "delay": "62.5us", "buffer": "1000pkt"},
            "aqm": {"kind": "red", "min": "20pkt", "max": "400pkt", "pmax": 0.1,
                    "weight": 0.002, "ecn": True},
            "traffic": {"flows": flows},
            "transport": {"cc": "reno", "reaction": "mean", "ack_ratio": ack_ratio},
            "run": {"duration": "8s"},
        })
        ds = pathflow.simulate(scenario)
        steady = steady_window(ds, 4.0)
        window = float(steady.cwnd.mean()) / PACKET
        marked = float(steady.marks.sum() / steady.link_arrival.sum())
        checks.append(Check(f"mark fraction, N = {flows}, b = {ack_ratio}",
                            2 / (ack_ratio * window**2), marked, 0.001))
    return CaseResult(checks)
