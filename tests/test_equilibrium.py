"""The rest state of Reno, DCTCP and DCQCN networks (pathflow.analysis.equilibrium) against
closed forms, the fluid simulation and the utility optimum."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import scipy.optimize

import pathflow
from pathflow import Scenario, ScenarioError
from pathflow.analysis.equilibrium import equilibrium, rest_state
from pathflow.analysis.fairness import network_of, reno_allocation
from pathflow.analysis.stability import stability
from pathflow.compile import compile_scenario
from pathflow.validation.cases.dcqcn import fixed_point as dcqcn_fixed_point
from pathflow.validation.cases.dcqcn import incast as dcqcn_incast
from tests.test_fairness import _parking_lot

RED = {"kind": "red", "min": "20pkt", "max": "400pkt", "pmax": 0.1, "weight": 0.002,
       "ecn": True}
PACKET = 1500.0


def _star(flows: int, ack_ratio: int) -> Scenario:
    return Scenario.from_dict({
        "topology": {"kind": "star", "senders": flows, "link_rate": "100Mbps",
                     "delay": "62.5us", "buffer": "1000pkt"},
        "aqm": RED, "traffic": {"flows": flows},
        "transport": {"cc": "reno", "reaction": "mean", "ack_ratio": ack_ratio},
        "run": {"duration": "8s"}})


@pytest.mark.parametrize(("flows", "ack_ratio"), [(4, 1), (10, 1), (6, 2)])
def test_one_red_bottleneck_closed_form(flows: int, ack_ratio: int) -> None:
    """N flows on one RED link: N W / R = C with W = sqrt(2 / (b p)), p = pmax (q - min) /
    (max - min), R = base + q / C; one equation in q, solved here on its own."""
    scenario = _star(flows, ack_ratio)
    capacity, low, high = 100e6 / 8, 20 * PACKET, 400 * PACKET
    base = float(compile_scenario(scenario).problem.path_base_rtt[0])

    def excess(queue: float) -> float:
        p = 0.1 * (queue - low) / (high - low)
        return flows * math.sqrt(2 / (ack_ratio * p)) / (base + queue / capacity) * PACKET \
            - capacity

    queue = scipy.optimize.brentq(excess, low * (1 + 1e-12), high, xtol=1e-9)
    rest = equilibrium(scenario)
    assert float(rest.queue.max()) == pytest.approx(queue, rel=1e-6)
    np.testing.assert_allclose(rest.rate, capacity / flows, rtol=1e-6)


@pytest.mark.parametrize("links", [2, 3])
def test_the_fluid_simulation_settles_at_it(tmp_path: Path, links: int) -> None:
    """On a parking lot (a long flow over every link, a short one per link) the simulated
    steady state, 10 s after 10 s, is the rest state within 2 % (rates and the loaded queues);
    and it is the optimum of Reno's utility at its own round trips within 1 % (the NUM view:
    additive prices against the product of the path's marking, which differ by p^2)."""
    scenario = _parking_lot(tmp_path, links)
    rest = equilibrium(scenario)
    assert rest.attrs["residual"] < 1e-8
    ds = pathflow.simulate(scenario)
    steady = ds.sel(time=ds.time > 10.0)
    np.testing.assert_allclose(steady.flow_rate.mean("time").values, rest.rate.values,
                               rtol=0.02)
    loaded = rest.queue.values > 0
    np.testing.assert_allclose(steady.queue.mean("time").values[loaded],
                               rest.queue.values[loaded], rtol=0.02)
    network, controller, _ = network_of(compile_scenario(scenario))
    optimum = reno_allocation(network, rest.rtt.values, PACKET)
    np.testing.assert_allclose(optimum[controller], rest.rate.values, rtol=0.01)


@pytest.mark.parametrize("links", [2, 3])
def test_dctcp_on_red_settles_at_it(tmp_path: Path, links: int) -> None:
    """DCTCP (mean form) on the RED parking lot: the cap of one cut per round trip holds at
    rest (W p >= 1), so W = 2 / (b p) with alpha = p; the simulated steady state is the rest
    state within 2 % (rates and the loaded queues)."""
    scenario = _parking_lot(tmp_path, links).with_updates(
        {"transport.cc": "dctcp", "transport.reaction": "mean"})
    rest = equilibrium(scenario)
    loaded = rest.queue.values > 0
    p = rest.probability.values[loaded]
    path = 1 - np.prod(1 - p)  # the long flow crosses every loaded link
    assert float(rest.window[0]) == pytest.approx(2 / path, rel=1e-9)
    ds = pathflow.simulate(scenario)
    steady = ds.sel(time=ds.time > 10.0)
    np.testing.assert_allclose(steady.flow_rate.mean("time").values, rest.rate.values,
                               rtol=0.02)
    np.testing.assert_allclose(steady.queue.mean("time").values[loaded],
                               rest.queue.values[loaded], rtol=0.02)


def _dctcp_star(flows: int, ack_ratio: int = 1) -> Scenario:
    return Scenario.from_dict({
        "topology": {"kind": "star", "senders": flows, "link_rate": "10Gbps", "delay": "10us",
                     "buffer": "2000pkt"},
        "aqm": {"kind": "ecn_step", "threshold": "30pkt"}, "traffic": {"flows": flows},
        "transport": {"cc": "dctcp", "reaction": "mean", "ack_ratio": ack_ratio},
        "run": {"duration": "0.5s", "warmup": "0.25s"}})


@pytest.mark.parametrize(("flows", "ack_ratio"), [(10, 1), (4, 2)])
def test_dctcp_on_the_ecn_step(flows: int, ack_ratio: int) -> None:
    """N DCTCP flows (mean form) behind the ECN step at K: the rest is the sliding mode on
    q = K with alpha* = sqrt(2 / (b W*)), W* = C (base + K / C) / N (Alizadeh, Javanmard and
    Prabhakar 2011, b = 1). The simulation circles it (a limit cycle of 10 to 20 packets):
    its mean alpha is alpha* within 2 %, and its queue swings across K."""
    scenario = _dctcp_star(flows, ack_ratio)
    rest = equilibrium(scenario)
    problem = compile_scenario(scenario).problem
    capacity, threshold = 10e9 / 8, 30 * PACKET
    base = float(problem.path_base_rtt[0])
    window = capacity * (base + threshold / capacity) / flows / PACKET
    np.testing.assert_allclose(rest.window.values, window, rtol=1e-9)
    loaded = rest.queue.values > 0
    assert rest.queue.values[loaded] == pytest.approx([threshold], rel=1e-9)
    alpha = math.sqrt(2 / (ack_ratio * window))
    assert rest.probability.values[loaded] == pytest.approx([alpha], rel=1e-9)
    ds = pathflow.simulate(scenario)
    steady = ds.sel(time=ds.time > 0.25)
    assert float(steady.alpha.mean()) == pytest.approx(alpha, rel=0.02)
    queue = steady.queue.isel(link=int(np.flatnonzero(loaded)[0]))
    assert float(queue.min()) < threshold < float(queue.max())


def test_a_large_incast_rests_with_every_window_at_its_floor() -> None:
    """320 DCTCP flows on 10 Gb/s: the fair window is under the 2-segment floor, every packet
    is marked and the queue stands at N min_cwnd MSS - C base (tests/test_window_floor.py's
    closed form); the simulation holds it."""
    scenario = _dctcp_star(320)
    rest = equilibrium(scenario)
    base = float(compile_scenario(scenario).problem.path_base_rtt[0])
    standing = 320 * 2 * PACKET - 10e9 / 8 * base
    assert float(rest.queue.max()) == pytest.approx(standing, rel=1e-6)
    assert float(rest.probability.max()) == 1.0
    np.testing.assert_allclose(rest.window.values, 2.0)
    ds = pathflow.simulate(scenario)
    steady = ds.sel(time=ds.time > 0.25)
    assert float(steady.queue.max("link").mean()) == pytest.approx(standing, rel=0.02)


def _fat_tree(cc: str, seed: int) -> Scenario:
    """A k = 4 fat-tree permutation at 1 Gb/s, RED with ECN, ECMP, the mean-field form, 6 s."""
    return pathflow.load_scenario(
        Path(__file__).parents[1] / "examples" / "fattree_permutation.toml").with_updates({
            "topology.link_rate": "1Gbps", "topology.delay": "50us",
            "topology.buffer": "1000pkt", "aqm": RED, "transport.cc": cc,
            "transport.reaction": "mean", "run.seed": seed, "run.duration": "6s",
            "run.warmup": "4s"})


@pytest.mark.parametrize("cc", ["reno", "dctcp"])
def test_a_k4_fat_tree_settles_at_it(cc: str) -> None:
    """A k = 4 fat-tree permutation (1 Gb/s, RED with ECN, ECMP; mean form), ACKs of no size
    (the equilibrium leaves their load out): every part is predicted stable, and the simulated
    steady state is the rest state within 2 % (rates and the loaded queues; measured 1e-4)."""
    scenario = _fat_tree(cc, 4).with_updates({"transport.ack_size": "0B"})
    rest = equilibrium(scenario)
    assert rest.attrs["residual"] < 1e-8
    assert bool(stability(scenario).stable.all())
    ds = pathflow.simulate(scenario)
    steady = ds.sel(time=ds.time > 4.0)
    loaded = rest.queue.values > 0
    assert loaded.sum() >= 5  # several bottlenecks, some shared by several flows
    np.testing.assert_allclose(steady.flow_rate.mean("time").values, rest.rate.values,
                               rtol=0.02)
    np.testing.assert_allclose(steady.queue.mean("time").values[loaded],
                               rest.queue.values[loaded], rtol=0.02)


@pytest.mark.parametrize(("seed", "queues"), [(2, True), (1, False)])
def test_acks_as_load_on_a_k4_fat_tree(seed: int, queues: bool) -> None:
    """The same fat-tree with 64 B ACKs (every 2nd segment): a host's link carries its ACKs
    beside the data it receives, so a flow that its NIC holds at line rate can fill the port
    towards a host whose own flow's ACKs come back through it (rates 33 % off with ACKs left
    out). DCTCP is predicted stable; the simulated steady state is the rest state within 2 %:
    rates (measured 1e-6 on seed 2, 1.2 % on seed 1) and, on seed 2, the loaded queues (1e-6).
    On seed 1 two host ports are full by a near-tie (a flow at its NIC's rate and another's
    ACKs), where the queue barely moves any rate: the simulation's 5 % lower (reported)."""
    scenario = _fat_tree("dctcp", seed)
    rest = rest_state(scenario)
    assert rest.residual < 1e-8
    assert equilibrium(scenario, rest).attrs["acks"] == "load"
    assert bool(stability(scenario, rest=rest).stable.all())
    ds = pathflow.simulate(scenario)
    steady = ds.sel(time=ds.time > 4.0)
    np.testing.assert_allclose(steady.flow_rate.mean("time").values, rest.rate, rtol=0.02)
    loaded = rest.queue > 0
    assert loaded.sum() >= 5
    if queues:
        np.testing.assert_allclose(steady.queue.mean("time").values[loaded], rest.queue[loaded],
                                   rtol=0.02)


@pytest.mark.parametrize("cc", ["reno", "dctcp"])
def test_no_link_is_overloaded_at_rest_with_acks(cc: str) -> None:
    """The capacity constraint at the rest state with ACKs, on the k = 4 fat-tree over eight
    hash seeds: every link, those without a queue too, carries at most its capacity. On
    DCTCP's seed 5 a link and the one before it carry the same data and different ACKs, and
    the queue splits between them: the later one, taken as empty, was 0.3 % over."""
    for seed in range(1, 9):
        rest = rest_state(_fat_tree(cc, seed))
        if rest.network.acks is None:
            continue  # a rest state without their load says so (the test below)
        load = rest.network.load(rest.rate)
        # a millionth: positions that close to empty are taken as empty (seed 3: 3e-8 over)
        assert np.all(load <= rest.network.capacity * (1 + 1e-6)), seed


def test_a_rest_state_not_found_with_acks_says_it_leaves_them_out(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the solve with ACKs does not converge (forced here: it returns positions off the
    rest), the rest state is the one without their load, exact, and says so: the rest state
    of the same scenario with ACKs of no size (within 0.1 %: the ACK's serialisation stays in
    the base round trip), which has none to leave out."""
    def unsettled(x: np.ndarray, marking: np.ndarray, *_: object) -> tuple[np.ndarray, ...]:
        return marking, np.full_like(x, 0.3)

    monkeypatch.setattr("pathflow.analysis.equilibrium._with_acks", unsettled)
    scenario = _fat_tree("dctcp", 1)
    rest = equilibrium(scenario)
    bare = equilibrium(scenario.with_updates({"transport.ack_size": "0B"}))
    assert (rest.attrs["acks"], bare.attrs["acks"]) == ("left out", "none")
    assert rest.attrs["residual"] < 1e-8
    np.testing.assert_allclose(rest.rate, bare.rate, rtol=1e-3)


def test_acks_make_reno_on_the_fat_tree_cycle() -> None:
    """Reno on the same fat-tree with ACKs: its rest state is predicted unstable (the ACKs'
    wait in the reverse queues lengthens the loop), and the simulation cycles: its queues swing
    by more than half their mean (measured 0.88) where with ACKs of no size they settle to
    within 10 % (0.07)."""
    scenario = _fat_tree("reno", 2)
    assert not bool(stability(scenario).stable.all())
    for ack_size, swing in (("64B", 0.5), ("0B", 0.1)):
        ds = pathflow.simulate(scenario.with_updates({"transport.ack_size": ack_size}))
        steady = ds.sel(time=ds.time > 4.0).queue
        ratio = float((steady.std("time") / (steady.mean("time") + PACKET)).max())
        assert (ratio > swing) if ack_size == "64B" else (ratio < swing)


def test_what_has_no_rest_point_is_refused() -> None:
    dctcp = _star(2, 1).with_updates({"transport.cc": "dctcp", "transport.reaction": None})
    with pytest.raises(ScenarioError, match=r"transport\.cc"):
        equilibrium(dctcp)
    droptail = _star(2, 1).with_updates({"aqm": {"kind": "droptail"}})
    with pytest.raises(ScenarioError, match=r"aqm\.kind"):
        equilibrium(droptail)


@pytest.mark.parametrize("flows", [2, 10])
def test_dcqcn_fixed_point_on_one_link(flows: int) -> None:
    """DCQCN at 40 Gb/s (conext2016): the network solver's rest state is the scalar root of
    validation/cases/dcqcn.py (p from alpha a^2 = tau^2 R_AI R_C (c + e)(b + d) at R_C = C/N,
    the queue from the marking line), solved the other way round (R_C from p, the queue from
    the link's complementarity); the simulation settles there at N = 2 (Zhu et al.: stable)."""
    scenario = dcqcn_incast(flows)
    rest, expected = equilibrium(scenario), dcqcn_fixed_point(flows)
    np.testing.assert_allclose(rest.rate.values, expected["rate"], rtol=1e-9)
    assert float(rest.queue.max()) == pytest.approx(expected["queue"], rel=1e-6)
    assert float(rest.probability.max()) == pytest.approx(expected["p"], rel=1e-6)
    if flows == 2:
        ds = pathflow.simulate(scenario)
        steady = ds.sel(time=ds.time > 0.1)
        assert float(steady.queue.max("link").mean()) == pytest.approx(
            float(rest.queue.max()), rel=0.02)
