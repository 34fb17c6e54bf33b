"""Fairness criteria and protocols' own allocations (pathflow.analysis.fairness) against closed
forms, and the fluid Reno against the optimum of its utility."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import pathflow
from pathflow import Scenario, ScenarioError
from pathflow.analysis.fairness import (
    Network,
    alpha_fair,
    dctcp_allocation,
    fairness_of,
    max_min,
    network_of,
    pooled_alpha_fair,
    pooled_max_min,
    reno_allocation,
)
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


@pytest.mark.parametrize("links", [2, 3])
def test_fluid_reno_on_a_parking_lot_is_its_utility_optimum(tmp_path: Path, links: int) -> None:
    """Kelly and Low: Reno's equilibrium maximises sum -2 / (T^2 x) under the capacities. The
    fluid Reno's rates, at its own round trips, are that optimum (found by a convex solver on
    the routing alone) within 1 %, and far from max-min and proportional fairness, which it
    is not (the long flow pays on every link)."""
    scenario = _parking_lot(tmp_path, links)
    result = fairness_of(pathflow.simulate(scenario), scenario)
    assert result.attrs["distance_reno"] < 0.01
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
    pooled, 500 Mb/s each by max-min and by proportional fairness, and drop-tail has no rest
    state, which it says; a sprayed flow (several paths for one subflow) is one line with exit
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
    (tmp_path / "spray.toml").write_text('[topology]\nkind = "fattree"\nk = 4\n'
                                         '[routing]\nmode = "spray"\n')
    refused = CliRunner().invoke(app, ["analyze", str(tmp_path / "spray.toml")])
    assert refused.exit_code == 2 and refused.output.count("\n") == 1, refused.output
    assert "routing.mode" in refused.output
