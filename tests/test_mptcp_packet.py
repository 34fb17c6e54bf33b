"""MPTCP in the packet-level reference simulator (validation/packet: LIA, OLIA, BALIA and
uncoupled subflows, per-ACK coupled increase, per-loss decrease, one connection's data shared
by its subflows).

The truths are independent of the simulator's code: a one-subflow connection is Reno (the
algorithms' definitions), so its Dataset is Reno's number for number; a finite connection
delivers exactly its size, once; RFC 6356's goals (fill disjoint paths, do no harm at a shared
bottleneck, where uncoupled subflows take about n shares); and a k = 4 fat-tree permutation with
4 ECMP subflows per connection comes close to its full bisection (Raiciu et al., SIGCOMM 2011),
in the fluid model and at packet level alike.

The two-path network (as tests/test_mptcp.py): a sender A and a receiver B joined by two
disjoint paths A - a - p1 - b - B and A - a - p2 - b - B whose bottlenecks are p1 -> b and
p2 -> b; a background sender C1 enters at p1 and leaves at b towards D1, so it shares exactly
the first bottleneck with the connection.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from scipy.optimize import linprog

import pathflow
from helpers import mesh, star
from pathflow import Scenario
from pathflow.metrics import throughput
from pathflow.routing import build_routes
from pathflow.topology import build_network
from pathflow.validation.packet import simulate_packets

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
PACKET = 1500.0
MULTIPATH = ("lia", "olia", "balia", "uncoupled")
HOSTS = ["A", "B", "C1", "D1", "C2", "D2"]
VIA_P1 = ["A", "a", "p1", "b", "B"]
VIA_P2 = ["A", "a", "p2", "b", "B"]
RATE = 100e6 / 8  # bytes/s, each bottleneck of the two-path network


@pytest.mark.parametrize("cc", MULTIPATH)
def test_one_subflow_is_reno_number_for_number(cc: str) -> None:
    """Three one-subflow connections and three Reno flows on a drop-tail star with losses and a
    finite size: the same Dataset (every variable and coordinate but the cc label)."""
    def run(name: str) -> xr.Dataset:
        return simulate_packets(star(3, cc=name, aqm={"kind": "droptail"}, rate="100Mbps",
                                     buffer="30pkt", duration="300ms",
                                     traffic={"size": "600pkt"}))

    reno, mptcp = run("reno"), run(cc)
    assert int(reno.attrs["packets_dropped"]) > 0  # the decrease is exercised
    assert np.all(np.isfinite(reno.completion_time))  # and the end of a finite flow
    assert list(mptcp.cc.values) == [cc] * 3
    for name, variable in reno.data_vars.items():
        np.testing.assert_array_equal(mptcp[name].values, variable.values, err_msg=name)
    for name, coord in reno.coords.items():
        if name != "cc":
            np.testing.assert_array_equal(mptcp[name].values, coord.values, err_msg=name)
    assert mptcp.attrs["events"] == reno.attrs["events"]


def _fattree(cc: str, **updates: object) -> Scenario:
    base = pathflow.load_scenario(EXAMPLES / "fattree_permutation.toml")
    return base.with_updates({"transport.cc": cc, "transport.subflows": 4, "aqm": None,
                              "aqm.kind": "droptail", "topology.buffer": "100pkt", **updates})


def test_finite_connection_delivers_its_size_once_over_its_subflows() -> None:
    """k = 4 fat-tree permutation, 16 connections of 4 ECMP subflows and 300 packets each
    (a short last packet): each delivers exactly its size, spread over its subflows, and its
    completion time is when its delivered bytes reach the size."""
    size = 300 * PACKET - 500.0
    ds = simulate_packets(_fattree("lia", **{"traffic.size": size, "run.duration": "300ms"}),
                          sample_interval=5e-4)  # some connections wait out a 200 ms RTO
    n_flows = ds.sizes["flow"]
    assert ds.sizes["subflow"] == 4 * n_flows
    assert list(np.bincount(ds.subflow_flow.values)) == [4] * n_flows
    delivered = ds.delivered.values  # (time, flow)
    np.testing.assert_array_equal(delivered[-1], np.full(n_flows, size))
    assert np.all(np.diff(delivered, axis=0) >= 0)
    completion = ds.completion_time.values
    assert np.all(np.isfinite(completion))
    time = ds.time.values
    for f in range(n_flows):
        assert delivered[time < completion[f], f].max(initial=0.0) < size
        assert np.all(delivered[time >= completion[f], f] == size)
    per_subflow = (ds.subflow_rate * ds.attrs["sample_interval"]).sum("time").values
    np.testing.assert_allclose(np.bincount(ds.subflow_flow.values, weights=per_subflow),
                               size, rtol=1e-9)
    assert np.all(per_subflow > 0)  # every subflow carried part of its connection
    sent = ds.send_rate.sum("time").values * ds.attrs["sample_interval"]
    assert np.all(sent >= size - 1e-6)


def _two_paths(folder: Path, cc: str, pairs: list[list[int]], paths: list[tuple[int, list[str]]],
               duration: str, delay: str = "100us", buffer: str = "60pkt",
               **transport: object) -> Scenario:
    """The two-path network (module docstring): 100 Mb/s bottlenecks (`delay`, drop-tail
    `buffer`), every other link 1 Gb/s, 10 us, 60 packets."""
    fast = "1Gbps,10us,60pkt"
    slow = f"100Mbps,{delay},{buffer}"
    rows = ["src,dst,link_rate,delay,buffer", f"A,a,{fast}", f"B,b,{fast}", f"a,p1,{fast}",
            f"a,p2,{fast}", f"p1,b,{slow}", f"p2,b,{slow}",
            f"C1,p1,{fast}", f"C2,p2,{fast}", f"D1,b,{fast}", f"D2,b,{fast}"]
    (folder / "edges.csv").write_text("\n".join(rows) + "\n")
    scenario = Scenario.from_dict({
        "topology": {"kind": "graph", "edges": "edges.csv", "hosts": HOSTS},
        "aqm": {"kind": "droptail"},
        "traffic": {"pattern": "explicit", "pairs": pairs},
        "transport": {"cc": cc, **transport},
        "routing": {"mode": "shortest", "paths": [{"flow": f, "nodes": n} for f, n in paths]},
        "run": {"duration": duration},
    }, base_dir=folder)
    return scenario


@pytest.mark.parametrize("cc", ["uncoupled", "lia"])
def test_disjoint_paths_are_both_filled(tmp_path: Path, cc: str) -> None:
    """One connection, two subflows on disjoint paths (but for the hosts' access links): each
    subflow fills its own bottleneck, so the connection gets two links' worth (within 3 %)."""
    scenario = _two_paths(tmp_path, cc, [[0, 1]], [(0, VIA_P1), (0, VIA_P2)], "2s")
    network = build_network(scenario)
    routes = build_routes(scenario, network)
    assert routes.subflow_flow == [0, 0] and routes.path_subflow == [0, 1]
    first, second = (set(path) for path in routes.paths)
    # disjoint but for the hosts' own 1 Gb/s access links
    assert first & second == {network.index["A->a"], network.index["b->B"]}
    ds = simulate_packets(scenario, sample_interval=0.01)
    rate = float(throughput(ds, warmup=0.5).sel(flow=0))
    assert rate == pytest.approx(2 * RATE, rel=0.03)
    subflows = ds.subflow_rate.sel(time=ds.time > 0.5).mean("time").values
    np.testing.assert_allclose(subflows, RATE, rtol=0.03)
    assert float(ds.utilization.sel(link=["p1->b", "p2->b"], time=ds.time > 0.5).mean()) > 0.97


@pytest.mark.parametrize(("cc", "growth"), [("lia", 0.5), ("olia", 0.5), ("balia", 0.5),
                                           ("uncoupled", 2.0)])
def test_coupled_growth_per_round_trip(tmp_path: Path, cc: str, growth: float) -> None:
    """Congestion avoidance from the start (ssthresh 10 packets), no loss (2000-packet buffers
    behind 1 ms bottlenecks), two equal subflows on disjoint paths, ack_ratio 1: the
    connection's window grows by 1/n = 1/2 segment per round trip for the coupled controls
    (each subflow w I_r = w (w / tau^2) / (2 w / tau)^2 = 1/4, as LIA's, OLIA's first term
    (its eps terms sum to zero) and BALIA's at alpha = 1), by n = 2 for uncoupled subflows."""
    scenario = _two_paths(tmp_path, cc, [[0, 1]], [(0, VIA_P1), (0, VIA_P2)], "0.6s",
                          delay="1ms", buffer="2000pkt", ack_ratio=1, ssthresh="10pkt")
    ds = simulate_packets(scenario, sample_interval=1e-3)
    assert ds.attrs["packets_dropped"] == 0
    t = ds.time.values
    window = (t > 0.1) & (t <= 0.6)
    total = ds.cwnd.sum("subflow").values[window] / PACKET
    rounds = float(np.sum(1e-3 / ds.rtt.mean("subflow").values[window]))
    assert (total[-1] - total[0]) / rounds == pytest.approx(growth, rel=0.05)


def test_do_no_harm_at_a_shared_bottleneck(tmp_path: Path) -> None:
    """A 2-subflow connection and a single-path Reno (a one-subflow connection) through one
    100 Mb/s bottleneck: LIA takes about the TCP's share (within 15 %), uncoupled subflows
    about twice it (within 20 %); the bottleneck stays full."""
    pairs, paths = [[0, 1], [2, 3]], [(0, VIA_P1), (0, VIA_P1)]
    ratios = {}
    for cc in ("lia", "uncoupled"):
        ds = simulate_packets(_two_paths(tmp_path, cc, pairs, paths, "20s"),
                              sample_interval=0.01)
        connection, tcp = throughput(ds, warmup=2.0).values
        ratios[cc] = connection / tcp
        assert connection + tcp == pytest.approx(RATE, rel=0.02), cc
    assert ratios["lia"] == pytest.approx(1.0, rel=0.15), ratios
    assert ratios["uncoupled"] == pytest.approx(2.0, rel=0.20), ratios


@pytest.mark.parametrize("cc", ["olia", "balia"])
def test_coupled_controls_on_a_shared_bottleneck(tmp_path: Path, cc: str) -> None:
    """OLIA and BALIA take no more than 1.25 times the TCP's share (uncoupled: 2 times)."""
    ds = simulate_packets(_two_paths(tmp_path, cc, [[0, 1], [2, 3]],
                                     [(0, VIA_P1), (0, VIA_P1)], "20s"), sample_interval=0.01)
    connection, tcp = throughput(ds, warmup=2.0).values
    assert connection / tcp <= 1.25


def test_balance_congestion(tmp_path: Path) -> None:
    """RFC 6356 goal 3: a Reno background flow on path 1 only; the coupled connections move
    their traffic to path 2, further than uncoupled subflows (which split about 1 : 2, a
    Reno's half of path 1 against all of path 2)."""
    pairs, paths = [[0, 1], [2, 3]], [(0, VIA_P1), (0, VIA_P2)]

    def on_path_one(cc: str) -> float:
        ds = simulate_packets(_two_paths(tmp_path, cc, pairs, paths, "10s"),
                              sample_interval=0.01)
        rates = ds.subflow_rate.sel(time=ds.time > 2.0).mean("time").values
        rates = rates[ds.subflow_flow.values == 0]
        return float(rates[0] / rates.sum())

    uncoupled = on_path_one("uncoupled")
    assert uncoupled == pytest.approx(1 / 3, rel=0.1)
    for cc in ("lia", "olia", "balia"):
        assert on_path_one(cc) < 0.5 * uncoupled, cc


def _optimum(scenario: Scenario) -> float:
    """The largest aggregate throughput (bytes/s) the subflows' paths allow: a linear program
    over subflow rates under the link capacities."""
    network = build_network(scenario)
    routes = build_routes(scenario, network)
    use = np.zeros((len(network.links), len(routes.paths)))
    for p, path in enumerate(routes.paths):
        use[list(path), p] = 1.0
    capacity = np.array([link.capacity for link in network.links])
    best = linprog(-np.ones(len(routes.paths)), A_ub=use, b_ub=capacity, bounds=(0, None))
    assert best.success
    return float(-best.fun)


def test_fattree_lia_fluid_and_packet_near_the_optimum() -> None:
    """k = 4 fat-tree permutation, 4 ECMP subflows per LIA connection (1 Gb/s, 100-packet
    drop-tail buffers): against the largest aggregate the subflows' paths allow (`_optimum`, at
    most the full bisection, 16 hosts at line rate), the fluid model comes within 10 %, the
    packet level within 15 % (at packet level Reno-like subflows sharing ECMP-hashed core links
    split them less evenly than the fluid's mean field), and the two engines agree within
    10 %."""
    scenario = _fattree("lia", **{"run.duration": "500ms"})
    optimum = _optimum(scenario)
    assert optimum <= 16 * 1e9 / 8 * (1 + 1e-9)
    packet = float(throughput(simulate_packets(scenario), warmup=0.1).sum())
    fluid = float(throughput(pathflow.simulate(scenario), warmup=0.1).sum())
    assert fluid >= 0.90 * optimum, fluid / optimum
    assert packet >= 0.85 * optimum, packet / optimum
    assert packet == pytest.approx(fluid, rel=0.10)


def test_dataset_matches_the_fluid_vocabulary() -> None:
    """An OLIA star with 3 subflows per connection: the packet Dataset has the fluid one's
    variables (OLIA's loss intervals included), dimensions, units and coordinates."""
    scenario = star(2, cc="olia", aqm={"kind": "droptail"}, buffer="30pkt", duration="20ms",
                    transport={"subflows": 3})
    packet, fluid = simulate_packets(scenario), pathflow.simulate(scenario)
    for name, variable in fluid.data_vars.items():
        if name in ("cwr", "credit", "dt", "stall"):
            continue  # fluid-only bookkeeping
        assert name in packet, name
        assert packet[name].dims == variable.dims, name
        assert packet[name].attrs.get("units") == variable.attrs.get("units"), name
    for name, coord in fluid.coords.items():
        if name == "time":
            continue
        assert name in packet.coords, name
        assert np.array_equal(packet[name].values, coord.values), name
    assert packet.sizes["subflow"] == 6 and math.isinf(float(packet.completion_time[0]))


@pytest.mark.parametrize("engine", ["fluid", "packet"])
def test_kshortest_subflows_fill_two_disjoint_routes(tmp_path: Path, engine: str) -> None:
    """The mesh of `helpers.mesh` (10 Mb/s between switches, two disjoint two-hop routes from S1
    to S4): one Reno flow on the shortest path gets one route's 10 Mb/s; a LIA connection of two
    subflows under kshortest takes both routes and, alone on them, fills both: 20 Mb/s (within
    5 %, in both engines). Packet-level slow start overshoots the 200-packet buffers and ends in
    a retransmission timeout (a stall until about 3 s, its backlog delivered by 4 s), so the
    steady window starts at 4 s."""
    run = pathflow.simulate if engine == "fluid" else simulate_packets
    rates = {}
    for subflows in (1, 2):
        scenario = mesh(tmp_path, subflows, "kshortest",
                        run={"duration": "8s", "warmup": "4s"})
        rates[subflows] = float(throughput(run(scenario)).sum()) * 8
    assert rates[1] == pytest.approx(10e6, rel=0.05)
    assert rates[2] == pytest.approx(20e6, rel=0.05)
