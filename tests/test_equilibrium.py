"""The rest state of Reno and DCQCN networks (pathflow.analysis.equilibrium) against closed
forms, the fluid simulation and the utility optimum."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import scipy.optimize

import pathflow
from pathflow import Scenario, ScenarioError
from pathflow.analysis.equilibrium import equilibrium
from pathflow.analysis.fairness import network_of, reno_allocation
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
