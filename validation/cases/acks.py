"""ACKs as load: the fluid model against the packet-level reference

A receiver acknowledges every 2nd segment with a 64-byte ACK (`[transport] ack_size`), 2.1 % of
the data rate, and the ACKs return along the reverse of the data's path. The fluid model adds
them to the arrivals of the reverse links and their queueing to the round trip
(`solvers/dde.py`); a port that carries a flow at line rate plus other flows' ACKs is then
offered more than its rate and queues, as at packet level. Both engines run the same scenario.

`ack_port`: a dumbbell at 1 Gb/s (5 us links, 200-packet buffers, DCTCP with K = 30 packets).
Three flows h1..h3 -> r1..r3 share s0->s1; their ACKs come back on s1->s0, where flow A, r0 ->
h0, sends at line rate (its host receives nothing, so its NIC has no ACKs to send). s1->s0 is
offered 2.1 % more than its rate: A's DCTCP holds a standing queue there that exists only
because of the ACKs (without them the fluid port is exactly full and empty). Claims: the mean
queue on s1->s0 within 20 % (the tolerance issue 11 asks for; over 5 packet-level seeds the
mean is 25.4 to 25.9 packets, so the spread is below 1 %), its p99 within 25 %, A's throughput
within 3 % (it gets what the ACKs leave: 1 - 0.021 of the line rate). The fluid mean is lower,
and since the fluid window stopped growing in CWR and on marked ACKs (as Linux's, issue 11's
whole-segment windows) it misses the 20 % (19.9 against 25.9 packets; 21.9 before): after a
mark A's fluid window is cut on consecutive round trips while the queue stays above K (a
line-rate sender whose window exceeds the bandwidth-delay product does not slow down at the
first cut), and the fluid port, without the packet level's noise of a packet or two, marks in
unbroken episodes of several round trips (8.0 % of the time against 6.4 %), so A's alpha
climbs higher (mean 0.070 against 0.056), its window cycles lower (56 against 64 packets) and
its sawtooth dips deeper (to 10 packets against 15 to 20). Known failure
(tests/test_validation.py).

The k = 4 fat-tree permutation of the fluid-versus-packet table (ECMP, DCTCP): its host ports
carrying one flow at line rate plus the ACKs of the flow their host sends (the ports of issue
11) are reported, not claimed, against the packet reference as the table runs it and without
host jitter. Such a port is offered C (1 + a (z - y)): the data's own NIC sends the ACKs of the
flow its host receives first (a y, y that flow's share of line rate), the port adds the ACKs of
the flow its host sends (a z), a = 2.1 %. On seed 1, with the packet run's rates, a (z - y) is
0.45 % at edge1_0->h1_0_0, 0.15 % at edge3_0->h3_0_1 and 0.09 % at edge1_1->h1_1_1. The packet
reference's host jitter (a random wait of up to 1 % of a packet time before each data packet,
`simulate_packets`) costs a line-rate sender 0.35 to 0.5 % of its rate, as much as that
overload: with it these ports stay nearly empty at packet level (1.4 packets and less), while
the fluid model, which has no jitter, holds 29, 29 and 6 packets there. Without jitter
(as ns-3's hosts) the packet level holds 26, 28 and 11 packets: the fluid model is within 20 %
on the first two (10 % and 5 %) and not on the third, whose overload takes the whole steady
window (0.4 s) to fill K: what it holds there is what slow start left plus a queue that drifts
by less than its own noise, which no deterministic model is held to.
"""

from __future__ import annotations

import xarray as xr
from matplotlib.figure import Figure

import pathflow
from pathflow import Scenario
from pathflow.metrics import queue_stats, throughput
from pathflow.validation.cases.common import PACKET
from pathflow.validation.cases.packet import NETWORKS
from pathflow.validation.registry import CaseResult, Check, case

__all__ = ["ack_port_scenario"]

PORT = "s1->s0"  # the port of flow A's data and the other flows' ACKs
SENDERS = 4  # dumbbell hosts per side: three ACK-sending flows and A


def ack_port_scenario(cc: str = "dctcp", duration: str = "0.5s") -> Scenario:
    """The dumbbell of the module docstring: flows h_i -> r_i (i = 1..3) and A = r0 -> h0."""
    pairs = [[i, SENDERS + i] for i in range(1, SENDERS)] + [[SENDERS, 0]]
    return Scenario.from_dict({
        "name": "ack-port",
        "topology": {"kind": "dumbbell", "senders": SENDERS, "link_rate": "1Gbps",
                     "delay": "5us", "buffer": "200pkt"},
        "aqm": {"kind": "ecn_step", "threshold": "30pkt"} if cc == "dctcp"
        else {"kind": "droptail"},
        "traffic": {"pattern": "explicit", "pairs": pairs},
        "transport": {"cc": cc},
        "run": {"duration": duration, "warmup": "0.1s", "sample": "100us", "seed": 1},
    })


def _figure(series: dict[str, xr.DataArray], title: str) -> Figure:
    fig = Figure(figsize=(8, 3.0))
    ax = fig.subplots()
    for label, queue in series.items():
        window = queue.sel(time=slice(0.3, 0.34))
        ax.plot(window.time, window / PACKET, lw=0.8, label=label)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("queue (packets)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def _host_ports(datasets: dict[str, xr.Dataset], warmup: float) -> list[str]:
    """Switch-to-host ports that queue (mean above 2 packets) in any of the runs."""
    found: set[str] = set()
    for ds in datasets.values():
        mean = queue_stats(ds, warmup)["mean"] / PACKET
        for link in map(str, mean.link.values):
            if link.split("->")[1].startswith("h") and float(mean.sel(link=link)) > 2:
                found.add(link)
    return sorted(found)


@case("ack_port_fluid_packet", "ACKs as load: a port carrying a line-rate flow and other "
      "flows' ACKs, fluid against packet level", "packet")
def ack_port_fluid_packet() -> CaseResult:
    """A dumbbell port offered a line-rate DCTCP flow plus three flows' ACKs, both engines
    (claims), and the k = 4 fat-tree's host ports loaded by ACKs (reported: the packet
    reference's host jitter exceeds their overload); see the module docstring."""
    from pathflow.validation.packet import simulate_packets

    scenario = ack_port_scenario()
    warmup = scenario.si.run.steady_start
    fluid, packet = pathflow.simulate(scenario), simulate_packets(scenario)
    unloaded = pathflow.simulate(scenario.with_updates({"transport.ack_size": "0B"}))
    stats = {name: queue_stats(ds, warmup).sel(link=PORT) / PACKET
             for name, ds in (("f", fluid), ("p", packet), ("0", unloaded))}
    flow_a = [float(throughput(ds, warmup).values[-1]) for ds in (packet, fluid)]
    checks = [
        Check(f"dumbbell: queue mean on {PORT}", float(stats["p"]["mean"]),
              float(stats["f"]["mean"]), 0.20, "packets", why="20 % (issue 11)"),
        Check(f"dumbbell: queue p99 on {PORT}", float(stats["p"]["p99"]),
              float(stats["f"]["p99"]), 0.25, "packets",
              why="25 %, as the fat-tree rows of the fluid-versus-packet table"),
        Check("dumbbell: throughput of the flow beside the ACKs", flow_a[0], flow_a[1], 0.03,
              "bytes/s", why="3 %, as the aggregate throughput of the fluid-versus-packet "
              "table"),
        Check(f"dumbbell: fluid queue mean on {PORT} without ACK load (ack_size 0B)",
              float(stats["p"]["mean"]), float(stats["0"]["mean"]), None, "packets",
              why="reported: the model before ACKs, for comparison"),
    ]

    tree = NETWORKS["fattree_ecmp"].scenario("dctcp")
    tree_warmup = tree.si.run.steady_start
    runs = {"fluid": pathflow.simulate(tree), "packet": simulate_packets(tree),
            "packet, no host jitter": simulate_packets(tree, host_jitter=0.0)}
    why = ("reported: overload 0.1 to 0.5 % of the rate, as much as the packet reference's "
           "host jitter costs (module docstring)")
    for link in _host_ports(runs, tree_warmup):
        means = {name: float(queue_stats(ds, tree_warmup)["mean"].sel(link=link)) / PACKET
                 for name, ds in runs.items()}
        for name in ("packet", "packet, no host jitter"):
            checks.append(Check(f"fat-tree: queue mean on {link} ({name})", means[name],
                                means["fluid"], None, "packets", "absolute", why))
    figure = _figure({"pathflow fluid": fluid.queue.sel(link=PORT),
                      "pathflow packet": packet.queue.sel(link=PORT),
                      "fluid without ACK load": unloaded.queue.sel(link=PORT)},
                     f"ACK-loaded port {PORT}: a line-rate DCTCP flow and three flows' ACKs")
    return CaseResult(checks, figure)
