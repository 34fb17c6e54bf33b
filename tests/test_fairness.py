"""Fairness criteria and protocols' own allocations (pathflow.analysis.fairness) against closed
forms, and the fluid Reno against the optimum of its utility."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import scipy.optimize
from typer.testing import CliRunner

import pathflow
from pathflow import Scenario, ScenarioError
from pathflow.analysis.equilibrium import equilibrium, rest_state
from pathflow.analysis.fairness import (
    Network,
    alpha_fair,
    dctcp_allocation,
    fairness_of,
    max_min,
    network_of,
    own_allocation,
    per_flow,
    pooled_alpha_fair,
    pooled_max_min,
    reno_allocation,
)
from pathflow.analysis.utility import rest_asymmetry
from pathflow.cli import app
from pathflow.compile import compile_scenario

C = 10e6  # bytes/s


def parking_lot_routing(links: int) -> np.ndarray:
    """Flow 0 crosses every link; flow i (1..N) crosses link i - 1 alone."""
    routing = np.zeros((links, links + 1))
    routing[:, 0] = 1.0
    routing[np.arange(links), np.arange(1, links + 1)] = 1.0
    return routing


@pytest.mark.parametrize("links", [1, 2, 3, 5])
def test_parking_lot_closed_forms(links: int) -> None:
    """Max-min: every flow c/2. Proportional: the long flow c/(N+1), each short one N c/(N+1).
    Alpha = 2 (equal weights): x_short = sqrt(N) x_long, so x_long = c/(1 + sqrt N). Alpha =
    1/2 (DCTCP on the ECN step): x_short = N^2 x_long, so x_long = c/(1 + N^2)."""
    network = Network(parking_lot_routing(links), np.full(links, C), np.ones(links + 1))
    np.testing.assert_allclose(max_min(network), C / 2, rtol=1e-12)
    proportional = alpha_fair(network, 1.0)
    assert proportional[0] == pytest.approx(C / (links + 1), rel=1e-6)
    np.testing.assert_allclose(proportional[1:], links * C / (links + 1), rtol=1e-6)
    assert alpha_fair(network, 2.0)[0] == pytest.approx(C / (1 + math.sqrt(links)), rel=1e-6)
    assert alpha_fair(network, 0.5)[0] == pytest.approx(C / (1 + links**2), rel=1e-6)


def test_max_min_with_unequal_links_and_counts() -> None:
    """Link A (1 MB/s) carries flows 0, 1, 2; link B (10 MB/s) flows 2 and 3: flows 0..2 get
    1/3 MB/s, flow 3 the rest of B. Counts: flow 0 standing for two flows leaves 1/4 each."""
    routing = np.array([[1.0, 1.0, 1.0, 0.0], [0.0, 0.0, 1.0, 1.0]])
    capacity = np.array([1e6, 10e6])
    np.testing.assert_allclose(max_min(Network(routing, capacity, np.ones(4))),
                               [1e6 / 3, 1e6 / 3, 1e6 / 3, 10e6 - 1e6 / 3], rtol=1e-12)
    counted = max_min(Network(routing, capacity, np.array([2.0, 1.0, 1.0, 1.0])))
    np.testing.assert_allclose(counted, [0.25e6, 0.25e6, 0.25e6, 9.75e6], rtol=1e-12)


def test_pooled_max_min_against_closed_forms() -> None:
    """Max-min between connections that pool their paths. A two-link parking lot (C each)
    whose long connection also has a private path of C/2: max-min equalises the three at
    3C/4 (the long one sends C/4 across the lot), while proportional fairness keeps the long
    one on its private path alone (C/2, the one-hop ones C each): the two criteria differ.
    With one subflow per connection it is progressive filling's allocation (`max_min`),
    counts included."""
    routing = np.array([[1.0, 0.0, 1.0, 0.0], [1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 0.0, 0.0]])
    network = Network(routing, np.array([C, C, C / 2]), np.ones(4))
    connection = np.array([0, 0, 1, 2])
    fair = pooled_max_min(network, connection)
    np.testing.assert_allclose(np.bincount(connection, fair), 0.75 * C, rtol=1e-9)
    assert np.all(network.load(fair) <= network.capacity * (1 + 1e-9))
    proportional = np.bincount(connection, pooled_alpha_fair(network, connection, 1.0))
    np.testing.assert_allclose(proportional, [C / 2, C, C], rtol=1e-4)
    single = np.array([[1.0, 1.0, 1.0, 0.0], [0.0, 0.0, 1.0, 1.0]])
    for count in (np.ones(4), np.array([2.0, 1.0, 1.0, 1.0])):
        network = Network(single, np.array([1e6, 10e6]), count)
        np.testing.assert_allclose(pooled_max_min(network, np.arange(4)), max_min(network),
                                   rtol=1e-9)


def test_pooled_alpha_2_against_closed_forms() -> None:
    """The lot with a private path above, alpha = 2 (Reno's utility of each connection's
    total, OLIA's own at equal round trips): the long connection's price on the lot is the sum
    of the two one-hop ones, so 1 / y_long^2 = 2 / y_short^2 with y_long = C/2 + t across the
    lot and y_short = C - t: t = C (1 - sqrt(2) / 2) / (1 + sqrt 2), y_long = 0.6213 C, between
    proportional fairness (C/2) and max-min (3C/4). Weighted 2 : 1 for the long connection,
    w / y_long^2 = 2 / y_short^2 gives equal totals, 3C/4."""
    routing = np.array([[1.0, 0.0, 1.0, 0.0], [1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 0.0, 0.0]])
    network = Network(routing, np.array([C, C, C / 2]), np.ones(4))
    connection = np.array([0, 0, 1, 2])
    t = C * (1 - math.sqrt(2) / 2) / (1 + math.sqrt(2))
    rates = np.bincount(connection, pooled_alpha_fair(network, connection, 2.0))
    np.testing.assert_allclose(rates, [C / 2 + t, C - t, C - t], rtol=1e-6)
    weighted = pooled_alpha_fair(network, connection, 2.0, np.array([2.0, 2.0, 1.0, 1.0]))
    np.testing.assert_allclose(np.bincount(connection, weighted), 0.75 * C, rtol=1e-6)


def _pooled_utility(x: np.ndarray, connection: np.ndarray, share: np.ndarray,
                    alpha: float) -> float:
    """sum_c share_c U_alpha(y_c), y_c (in MB/s) the sum of connection c's subflows `x`."""
    total = np.bincount(connection, x / 1e6)[np.unique(connection)]
    value = np.log(total) if alpha == 1 else total ** (1 - alpha) / (1 - alpha)
    return float(share @ value)


@pytest.mark.parametrize("alpha", [1.0, 2.0])
def test_pooled_alpha_fair_is_what_a_general_solver_finds(alpha: float) -> None:
    """On 30 random networks (6 links, 8 subflows of 4 connections, each connection standing
    for 1 to 3 alike and weighted 0.2 to 1), the barrier method's allocation is feasible and
    its utility at least SLSQP's on the same problem (scipy's general constrained solver,
    started at a feasible point), less 1e-8 of its size."""
    rng = np.random.default_rng(7)
    for _ in range(30):
        routing = (rng.random((6, 8)) < 0.35).astype(float)
        routing[rng.integers(0, 6, 8), np.arange(8)] = 1.0  # every subflow crosses a link
        connection = rng.integers(0, 4, 8)
        count = rng.integers(1, 4, 4).astype(float)[connection]  # a connection's, per subflow
        network = Network(routing, rng.uniform(1e6, 1e7, 6), count)
        weight = rng.uniform(0.2, 1.0, 4)[connection]
        share = (count * weight)[np.unique(connection, return_index=True)[1]]
        used = routing * count[None, :]
        ours = pooled_alpha_fair(network, connection, alpha, weight)
        assert np.all(used @ ours <= network.capacity * (1 + 1e-9)) and np.all(ours >= 0)
        start = np.full(8, float(np.min(network.capacity / np.maximum(used.sum(1), 1))) / 2)
        general = scipy.optimize.minimize(
            lambda x, c=connection, s=share: -_pooled_utility(x, c, s, alpha), start,
            method="SLSQP", bounds=[(1e-3, None)] * 8,
            constraints=[{"type": "ineq", "fun": lambda x, u=used, n=network: n.capacity - u @ x}],
            options={"ftol": 1e-12, "maxiter": 2000}).x
        best = _pooled_utility(general, connection, share, alpha)
        assert _pooled_utility(ours, connection, share, alpha) >= best - 1e-8 * abs(best)


def _pooled_lot(folder: Path, cc: str) -> Scenario:
    """The lot with a private path as a network: two 100 Mb/s links in a row (s0 - s1 - s2),
    one-hop connections a0 -> b0 and a1 -> b1 across each, and L0 -> L1 with a subflow across
    both and one over a private 50 Mb/s link (s0 - p - s2); every path 10 ms one way (5 ms
    links; the one-hop connections' hosts 2.5 ms out), so that the round trips are nearly
    equal (queues add 1 to 2 ms; the long connection's two paths the same within 0.3 %). RED
    from 10 to 400 packets with pmax 2 %, averaged (a stable rest: `stability`); 30 s."""
    fast, out = "10Gbps,1us,1000pkt", "10Gbps,2.5ms,1000pkt"
    rows = ["src,dst,link_rate,delay,buffer", f"L0,s0,{fast}", f"L1,s2,{fast}",
            "s0,s1,100Mbps,5ms,1000pkt", "s1,s2,100Mbps,5ms,1000pkt",
            "s0,p,50Mbps,5ms,1000pkt", "p,s2,10Gbps,5ms,1000pkt",
            f"a0,s0,{out}", f"b0,s1,{out}", f"a1,s1,{out}", f"b1,s2,{out}"]
    (folder / "edges.csv").write_text("\n".join(rows) + "\n")
    return Scenario.from_dict({
        "topology": {"kind": "graph", "edges": "edges.csv",
                     "hosts": ["L0", "L1", "a0", "b0", "a1", "b1"]},
        "aqm": {"kind": "red", "min": "10pkt", "max": "400pkt", "pmax": 0.02, "weight": 0.01,
                "ecn": True},
        "traffic": {"pattern": "explicit", "pairs": [[0, 1], [2, 3], [4, 5]]},
        "transport": {"cc": cc, "reaction": "mean"},
        "routing": {"mode": "shortest",
                    "paths": [{"flow": 0, "nodes": ["L0", "s0", "s1", "s2", "L1"]},
                              {"flow": 0, "nodes": ["L0", "s0", "p", "s2", "L1"]}]},
        "run": {"duration": "30s", "warmup": "20s"}}, base_dir=folder)


@pytest.mark.parametrize(("cc", "rest_tolerance", "seconds", "simulated_tolerance"),
                         [("uncoupled", 1e-3, 30, 0.005), ("olia", 0.01, 60, 0.02)])
def test_uncoupled_and_olia_rest_at_their_utility_optimum(
        tmp_path: Path, cc: str, rest_tolerance: float, seconds: int,
        simulated_tolerance: float) -> None:
    """Both views of a multipath network agree: the rest state from the models' own equations
    (`analysis.equilibrium`) is the optimum of the control's utility (`own_allocation`, a
    convex solver on the routing alone) at the rest's round trips; uncoupled subflows that of
    Reno per subflow (measured 1e-4), OLIA's connections that of Reno of their total (measured
    0.44 %: its two paths' round trips differ by 0.3 % there, which the utility averages), and
    the simulation's mean rates are that optimum (`fairness_of`, at the run's round trips;
    measured 1e-4 and, for OLIA, 1.5 % after 40 to 60 s: its sliding mode approaches the rest
    slowly, 4 % away after 20 to 30 s). The long connection's total differs from OLIA's to
    uncoupled subflows' by half the link: the utilities are not the same."""
    scenario = _pooled_lot(tmp_path, cc).with_updates(
        {"run.duration": f"{seconds}s", "run.warmup": f"{seconds * 2 // 3}s"})
    found = rest_state(scenario)
    compiled = found.compiled
    network, _, _ = network_of(compiled, subflows=True)
    own = own_allocation(network, found.rtt, scenario, np.asarray(compiled.problem.subflow_flow))
    assert own is not None
    np.testing.assert_allclose(per_flow(compiled, own), equilibrium(scenario, found).rate,
                               rtol=rest_tolerance)
    result = fairness_of(pathflow.simulate(scenario), scenario)
    assert result.attrs[f"distance_{cc}"] < simulated_tolerance
    long = result[cc].values[0] / (100e6 / 8)
    assert long == pytest.approx({"uncoupled": 0.896, "olia": 0.594}[cc], abs=0.01)


def test_lia_and_balia_over_several_paths_have_no_allocation_of_their_own(
        tmp_path: Path) -> None:
    """LIA and BALIA on the lot with a private path: their rest states' price maps are far
    from symmetric (`analysis.utility`; measured 0.28 and 0.46, uncoupled subflows 0), so no
    utility has them as optimum and `own_allocation` gives none; with one subflow per
    connection they are Reno, whose allocation it gives."""
    for cc in ("lia", "balia"):
        scenario = _pooled_lot(tmp_path, cc)
        found = rest_state(scenario)
        assert rest_asymmetry(found.compiled, found.rate, found.rtt) > 0.1
        network, _, _ = network_of(found.compiled, subflows=True)
        connection = np.asarray(found.compiled.problem.subflow_flow)
        assert own_allocation(network, found.rtt, scenario, connection) is None
        single = scenario.with_updates({"routing.paths": []})
        network, _, _ = network_of(compile_scenario(single), subflows=True)
        np.testing.assert_array_equal(
            own_allocation(network, network.base_rtt, single),
            reno_allocation(network, network.base_rtt, 1500.0))


def test_reno_shares_in_inverse_proportion_to_the_round_trip() -> None:
    """Two Reno flows on one bottleneck: x1 / x2 = T2 / T1 (the square-root law), the link
    full."""
    network = Network(np.ones((1, 2)), np.array([1.25e9]), np.ones(2))
    rates = reno_allocation(network, np.array([100e-6, 300e-6]), packet=1500.0)
    assert rates[0] / rates[1] == pytest.approx(3.0, rel=1e-6)
    assert rates.sum() == pytest.approx(1.25e9, rel=1e-6)


def test_bad_alpha_and_multipath_are_refused() -> None:
    network = Network(np.ones((1, 1)), np.array([C]), np.ones(1))
    with pytest.raises(ValueError, match="alpha: must be > 0"):
        alpha_fair(network, 0.0)
    star = Scenario.from_dict({"topology": {"kind": "star", "senders": 2},
                               "transport": {"cc": "lia", "subflows": 2}})
    with pytest.raises(ScenarioError, match=r"transport\.subflows"):
        network_of(compile_scenario(star))


def _parking_lot(folder: Path, links: int) -> Scenario:
    """A chain of `links` 100 Mb/s, 1 ms links; a long Reno flow across all, one short flow per
    link; RED with ECN (the mean-field setting of Misra et al. 2000); 20 s, the last 10 judged."""
    fast = "10Gbps,10us,1000pkt"
    rows = ["src,dst,link_rate,delay,buffer", f"L0,S0,{fast}", f"L1,S{links},{fast}"]
    hosts, pairs = ["L0", "L1"], [[0, 1]]
    for i in range(links):
        rows += [f"S{i},S{i + 1},100Mbps,1ms,1000pkt", f"a{i},S{i},{fast}",
                 f"b{i},S{i + 1},{fast}"]
        hosts += [f"a{i}", f"b{i}"]
        pairs.append([2 + 2 * i, 3 + 2 * i])
    (folder / "edges.csv").write_text("\n".join(rows) + "\n")
    return Scenario.from_dict({
        "topology": {"kind": "graph", "edges": "edges.csv", "hosts": hosts},
        "aqm": {"kind": "red", "min": "20pkt", "max": "400pkt", "pmax": 0.1, "weight": 0.002,
                "ecn": True},
        "traffic": {"pattern": "explicit", "pairs": pairs},
        "transport": {"cc": "reno", "reaction": "mean"},
        "run": {"duration": "20s", "warmup": "10s"}}, base_dir=folder)


@pytest.mark.parametrize(("links", "cc"), [(2, "reno"), (3, "reno"), (3, "lia")])
def test_fluid_reno_on_a_parking_lot_is_its_utility_optimum(tmp_path: Path, links: int,
                                                            cc: str) -> None:
    """Kelly and Low: Reno's equilibrium maximises sum -2 / (T^2 x) under the capacities. The
    fluid Reno's rates, at its own round trips, are that optimum (found by a convex solver on
    the routing alone) within 1 %, and far from max-min and proportional fairness, which it
    is not (the long flow pays on every link). So are LIA's, whose connections on a parking
    lot have one path each (LIA is then Reno; over several paths it has no utility:
    tests/test_utility.py)."""
    scenario = _parking_lot(tmp_path, links).with_updates({"transport.cc": cc})
    result = fairness_of(pathflow.simulate(scenario), scenario)
    assert result.attrs[f"distance_{cc}"] < 0.01
    assert result.attrs["distance_proportional"] > 0.05
    assert result.attrs["distance_max_min"] > 0.3
    long, short = result.simulated.values[0], result.simulated.values[1:]
    assert long < short.min()


def test_dctcp_shares_in_inverse_proportion_to_the_round_trip() -> None:
    """Two DCTCP flows on one bottleneck: on a ramp x1 / x2 = T2 / T1 (weights 2 / (b T)); on
    the ECN step the price sqrt(2 / (b T x)) is the same for both, so T1 x1 = T2 x2 again.
    Both fill the link."""
    network = Network(np.ones((1, 2)), np.array([1.25e9]), np.ones(2))
    for step in (False, True):
        rates = dctcp_allocation(network, np.array([100e-6, 300e-6]), 1500.0, step=step)
        assert rates[0] / rates[1] == pytest.approx(3.0, rel=1e-6)
        assert rates.sum() == pytest.approx(1.25e9, rel=1e-6)


def test_fluid_dctcp_on_a_parking_lot_is_its_utility_optimum(tmp_path: Path) -> None:
    """DCTCP (mean form) on the RED parking lot: weighted proportional fairness (weights
    2 / (b T) at its own round trips) within 1 %; not Reno's allocation."""
    scenario = _parking_lot(tmp_path, 3).with_updates(
        {"transport.cc": "dctcp", "transport.reaction": "mean"})
    result = fairness_of(pathflow.simulate(scenario), scenario)
    assert result.attrs["distance_dctcp"] < 0.01
    assert result.attrs["distance_proportional"] > 0.05


def test_analyze_prints_the_predictions_and_refuses_spraying(tmp_path: Path) -> None:
    """`pathflow analyze`: the parking lot's long flow at max-min 50 Mb/s and proportional
    33.3 Mb/s (the closed forms: c/2, c/3); two MPTCP connections on a 1 Gb/s star share it
    pooled, 500 Mb/s each by max-min and by proportional fairness (and by OLIA's utility, which
    it adds for OLIA; LIA has none, which it says), and drop-tail has no rest state, which it
    says; a sprayed flow (several paths for one subflow) is one line with exit
    code 2."""
    scenario = _parking_lot(tmp_path, 2)
    (tmp_path / "lot.toml").write_text(scenario.to_toml())
    result = CliRunner().invoke(app, ["analyze", str(tmp_path / "lot.toml")])
    assert result.exit_code == 0, result.output
    long = next(line for line in result.output.splitlines() if "L0 -> L1" in line)
    assert "50 Mb/s" in long and "33.3 Mb/s" in long
    (tmp_path / "mp.toml").write_text('[topology]\nkind = "star"\nsenders = 2\n'
                                      'link_rate = "1Gbps"\n'
                                      '[transport]\ncc = "lia"\nsubflows = 2\n')
    pooled = CliRunner().invoke(app, ["analyze", str(tmp_path / "mp.toml")])
    assert pooled.exit_code == 0, pooled.output
    assert "proportional (pooled)" in pooled.output and "none derived (aqm.kind" in pooled.output
    assert "max-min (pooled)" in pooled.output
    assert sum("500 Mb/s" in line for line in pooled.output.splitlines()) == 2
    assert "LIA over several paths has no allocation of its own" in pooled.output
    (tmp_path / "olia.toml").write_text((tmp_path / "mp.toml").read_text().replace("lia", "olia"))
    olia = CliRunner().invoke(app, ["analyze", str(tmp_path / "olia.toml")])
    assert olia.exit_code == 0 and "OLIA (base RTT)" in olia.output, olia.output
    assert sum(line.count("500 Mb/s") == 3 for line in olia.output.splitlines()) == 2
    (tmp_path / "spray.toml").write_text('[topology]\nkind = "fattree"\nk = 4\n'
                                         '[routing]\nmode = "spray"\n')
    refused = CliRunner().invoke(app, ["analyze", str(tmp_path / "spray.toml")])
    assert refused.exit_code == 2 and refused.output.count("\n") == 1, refused.output
    assert "routing.mode" in refused.output
