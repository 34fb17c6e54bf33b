"""The sympy closed forms of single-bottleneck rest states (pathflow.analysis.closed_forms)
against independent truth: the network equilibrium solver, DCQCN's scalar rest rate, the fluid
simulation and direct integrations of the delay-free mean-field equations."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.integrate
import sympy as sp

import pathflow
from pathflow.analysis import closed_forms
from pathflow.analysis.controller_rest import dcqcn_rest_rate
from pathflow.analysis.equilibrium import equilibrium
from pathflow.compile import compile_scenario
from pathflow.models.dcqcn import DcqcnParams
from pathflow.validation.cases.dcqcn import CAPACITY as DCQCN_CAPACITY
from pathflow.validation.cases.dcqcn import CONEXT
from pathflow.validation.cases.dcqcn import incast as dcqcn_incast
from tests.helpers import star

PACKET = 1500.0
CAPACITY = 100e6 / 8 / PACKET  # packets/s: the 100 Mb/s stars below
RED = {"kind": "red", "min": "20pkt", "max": "400pkt", "pmax": 0.1, "ecn": True}
RED_PACKETS = {"q_min": 20, "q_max": 400, "p_max": 0.1}


def _base_rtt(scenario: pathflow.Scenario) -> float:
    return float(compile_scenario(scenario).problem.path_base_rtt[0])


def _steady(scenario: pathflow.Scenario, after: float) -> dict[str, float]:
    """The simulated steady state after `after` s: bottleneck queue (packets) and marking, mean
    window (packets), DCTCP's alpha where there is one, and the mean flow rate (packets/s)."""
    ds = pathflow.simulate(scenario)
    steady = ds.sel(time=ds.time > after, link="s0->r0")
    values = {"q": float(steady.queue.mean()) / PACKET, "p": float(steady.marking.mean()),
              "w": float(steady.cwnd.mean()) / PACKET,
              "rate": float(steady.flow_rate.mean()) / PACKET}
    if "alpha" in steady and not np.isnan(steady.alpha).all():
        values["alpha"] = float(steady.alpha.mean())
    return values


@pytest.mark.parametrize(("flows", "ack_ratio"), [(4, 1), (10, 1), (6, 2)])
def test_reno_on_red_is_the_equilibrium_solvers(flows: int, ack_ratio: int) -> None:
    """The cubic's root on the ramp and p* = 2/(b W*^2) against `analysis.equilibrium`, which
    solves the link's complementarity by least squares: 1e-6."""
    scenario = star(flows, aqm=RED, cc="reno", buffer="1000pkt",
                    transport={"reaction": "mean", "ack_ratio": ack_ratio})
    form = closed_forms.reno_red().numeric(C=CAPACITY, T=_base_rtt(scenario), N=flows,
                                           b=ack_ratio, **RED_PACKETS)
    rest = equilibrium(scenario)
    assert float(rest.queue.max()) / PACKET == pytest.approx(form["q"], rel=1e-6)
    assert float(rest.probability.max()) == pytest.approx(form["p"], rel=1e-6)
    np.testing.assert_allclose(rest.window, form["W"], rtol=1e-6)
    np.testing.assert_allclose(rest.rtt, form["R"], rtol=1e-6)
    np.testing.assert_allclose(rest.rate / PACKET, CAPACITY / flows, rtol=1e-6)


def _dcqcn_values(flows: int, scale_rai: float = 1.0) -> dict[str, float]:
    """The conext2016 parameters (validation/cases/dcqcn.py) in packets of 1 KB and seconds."""
    c = CONEXT
    return {"C": DCQCN_CAPACITY, "N": flows, "tau": c["tau"], "tau_p": c["tau_alpha"],
            "F": c["stages"], "B": c["byte_counter"], "T": c["timer"],
            "R_AI": c["rai"] * scale_rai, "K_min": c["kmin"] / 1e3, "K_max": c["kmax"] / 1e3,
            "P_max": c["pmax"]}


@pytest.mark.parametrize("flows", [2, 10])
def test_dcqcn_is_the_equilibrium_solvers(flows: int) -> None:
    """p* (the root in (0, 1) of the balance at R_C = C/N) and q* on the marking line against
    `analysis.equilibrium` on one 40 Gb/s link (1e-6), and `dcqcn_rest_rate`, which solves the
    same balance for R_C given p, returns C/N at p*."""
    values = _dcqcn_values(flows)
    form = closed_forms.dcqcn().numeric(**values)
    rest = equilibrium(dcqcn_incast(flows))
    assert float(rest.probability.max()) == pytest.approx(form["p"], rel=1e-6)
    assert float(rest.queue.max()) / 1e3 == pytest.approx(form["q"], rel=1e-6)
    np.testing.assert_allclose(rest.rate / 1e3, form["R_C"], rtol=1e-6)
    params = DcqcnParams(
        line_rate=DCQCN_CAPACITY, min_rate=1e6 / 8 / 1e3, cnp_interval=values["tau"],
        min_time_between_cnps=values["tau"], cnp_capacity=math.inf,
        alpha_interval=values["tau_p"], g=1 / 256, stages=values["F"], byte_counter=values["B"],
        timer=values["T"], rai=values["R_AI"], rhai=values["R_AI"])  # conext2016: R_HAI = R_AI
    rate = float(dcqcn_rest_rate(form["p"], params))
    assert rate == pytest.approx(DCQCN_CAPACITY / flows, rel=1e-8)
    assert form["R_C"] < form["R_T"] and 0 < form["alpha"] < 1


def test_dcqcn_cube_root_is_the_leading_order() -> None:
    """The leading-order solution is the published cbrt(R_AI N^2/(tau' C^2) (1/B + N/(T C))^2)
    (tau' where the paper puts it). Against the exact root it is first order in p*: the
    expansion drops terms of relative size F T R_C p*, tau R_C p* and, on the small 1/B term,
    F B p*; with R_AI scaled down to make p* about 1e-5 the cube root is within 1 % and the
    error falls about tenfold with p* (at the conext2016 values it is 19 % and 30 % high at
    N = 2 and 10, where F B p* is about 40)."""
    C, N, R_AI, tau_p, B, T = sp.symbols("C N R_AI tau_p B T", positive=True)
    published = sp.cbrt(R_AI * N**2 / (tau_p * C**2) * (1 / B + N / (T * C)) ** 2)
    derived = closed_forms.dcqcn_small_p().solution[sp.Symbol("p", positive=True)]
    assert sp.simplify(derived / published) == 1
    for flows in (2, 10):
        errors = []
        for scale in (1e-6, 1e-9):
            values = _dcqcn_values(flows, scale)
            exact = closed_forms.dcqcn(extended=True).numeric(**values)["p"]
            approximate = closed_forms.dcqcn_small_p().numeric(**values)["p"]
            errors.append(approximate / exact - 1)
        assert 0 < errors[1] < errors[0] / 5 and errors[0] < 0.01


def test_dctcp_step_is_the_sliding_mode() -> None:
    """N flows behind the ECN step, delay-free mean-field equations integrated here (explicit
    Euler, 5 us steps, the queue projected onto q >= 0): over the last 0.3 s of 1 s the mean
    queue is K, the marked fraction and alpha are theta* = sqrt(2/(b W*)) within 1e-3 (observed
    1e-4: the chattering of 5 us steps; the fluid simulation, whose feedback comes a round trip
    late, cycles around K instead)."""
    flows, ack_ratio, threshold, base, gain = 8, 1, 40.0, 500e-6, 1 / 16
    form = closed_forms.dctcp_step().numeric(C=CAPACITY, T=base, N=flows, b=ack_ratio,
                                             K=threshold)
    dt, steps = 5e-6, 200_000
    queue, window, alpha, sums, count = 0.0, 1.0, 1.0, np.zeros(4), 0
    for step in range(steps):
        rtt = base + queue / CAPACITY
        marked = float(queue > threshold)
        window += dt * (1 / (ack_ratio * rtt) - window * alpha / 2 * marked / rtt)
        alpha += dt * gain / rtt * (marked - alpha)
        queue = max(queue + dt * (flows * window / rtt - CAPACITY), 0.0)
        if step >= steps * 7 // 10:
            sums += (queue, marked, alpha, window)
            count += 1
    mean_queue, marked, mean_alpha, mean_window = sums / count
    assert mean_queue == pytest.approx(form["q"], rel=1e-3)
    assert marked == pytest.approx(form["theta"], rel=1e-3)
    assert mean_alpha == pytest.approx(form["alpha"], rel=1e-3)
    assert mean_window == pytest.approx(form["W"], rel=1e-3)


@pytest.mark.parametrize(("flows", "ack_ratio"), [(2, 1), (4, 1), (2, 4)])
def test_dctcp_ramp_is_where_the_simulation_settles(flows: int, ack_ratio: int) -> None:
    """DCTCP (mean reaction) behind RED marking with pmax 0.5: the simulation settles (within
    1e-5 of constant) at the closed form's queue, marking, alpha and window, W* p* = 2/b for
    b = 1 and sqrt(2/b) for b = 4 (the other branch); 0.1 % (observed a few 1e-6)."""
    scenario = star(flows, aqm={"kind": "red", "min": "10pkt", "max": "100pkt", "pmax": 0.5,
                                "ecn": True},
                    buffer="1000pkt", duration="4s",
                    transport={"reaction": "mean", "ack_ratio": ack_ratio})
    form = closed_forms.dctcp_ramp().numeric(C=CAPACITY, T=_base_rtt(scenario), N=flows,
                                             b=ack_ratio, q_min=10, q_max=100, p_max=0.5)
    product = 2 / ack_ratio if ack_ratio <= 2 else np.sqrt(2 / ack_ratio)
    assert form["W"] * form["p"] == pytest.approx(product, rel=1e-12)
    steady = _steady(scenario, 2.0)
    for name in ("q", "p", "alpha"):
        assert steady[name] == pytest.approx(form[name], rel=1e-3), name
    assert steady["w"] == pytest.approx(form["W"], rel=1e-3)
    assert steady["rate"] == pytest.approx(CAPACITY / flows, rel=1e-3)


def test_lia_on_red_is_where_the_simulation_settles() -> None:
    """Two LIA connections of two subflows each through one RED link, as models/mptcp.py grows
    (on every packet sent, ``acked_only=False``): each connection takes one Reno flow's share,
    p* = 2/(b w_tot^2), each subflow half; the simulation settles there within 1e-3."""
    scenario = star(2, aqm=RED, cc="lia", buffer="1000pkt", duration="8s",
                    transport={"reaction": "mean", "subflows": 2})
    form = closed_forms.lia_red(acked_only=False).numeric(
        C=CAPACITY, T=_base_rtt(scenario), N=2, n=2, b=1, **RED_PACKETS)
    steady = _steady(scenario, 4.0)
    assert steady["q"] == pytest.approx(form["q"], rel=1e-3)
    assert steady["p"] == pytest.approx(form["p"], rel=1e-3)
    assert steady["w"] == pytest.approx(form["w_r"], rel=1e-3)
    assert steady["rate"] == pytest.approx(CAPACITY / 2, rel=1e-3)
    reno = closed_forms.reno_red().numeric(C=CAPACITY, T=_base_rtt(scenario), N=2, b=1,
                                           **RED_PACKETS)
    assert form["q"] == pytest.approx(reno["q"], rel=1e-12)


@pytest.mark.parametrize("subflows", [2, 3])
def test_lia_with_the_acknowledged_fraction_against_its_equations(subflows: int) -> None:
    """DESIGN §5's LIA, increase (1 - p) I_r, cut p w_r/2 at most once per round trip: N = 2
    connections, subflows started unequal, the queue on a RED ramp (delay-free, RED's average =
    the queue), integrated by scipy for 60 s: every subflow at w_tot/n and w_tot, q and p at
    the closed form's (1e-4), p* = 2/(2 + b w_tot^2), not Reno's 2/(b W^2)."""
    flows, base, ack_ratio = 2, 500e-6, 1
    form = closed_forms.lia_red().numeric(C=CAPACITY, T=base, N=flows, n=subflows,
                                          b=ack_ratio, **RED_PACKETS)
    low, high, top = RED_PACKETS["q_min"], RED_PACKETS["q_max"], RED_PACKETS["p_max"]

    def derivative(_: float, state: np.ndarray) -> np.ndarray:
        windows, queue = state[:-1], max(state[-1], 0.0)
        rtt = base + queue / CAPACITY
        p = top * min(max((queue - low) / (high - low), 0.0), 1.0)
        total = windows.sum()
        coupling = total * windows.max() / total**2
        increase = np.minimum(coupling / total, 1 / windows)
        cut = windows / 2 * np.minimum(windows * p, 1.0) / rtt
        grow = windows / rtt * (1 - p) * increase / ack_ratio - cut
        arrivals = flows * total / rtt - CAPACITY
        return np.append(grow, arrivals if queue > 0 or arrivals > 0 else 0.0)

    start = np.append(np.linspace(1.0, 20.0, subflows), 0.0)
    end = scipy.integrate.solve_ivp(derivative, (0.0, 60.0), start, method="LSODA",
                                    rtol=1e-10, atol=1e-10).y[:, -1]
    np.testing.assert_allclose(end[:-1], form["w_r"], rtol=1e-4)
    assert end[-1] == pytest.approx(form["q"], rel=1e-4)
    assert form["p"] == pytest.approx(2 / (2 + ack_ratio * form["W"] ** 2), rel=1e-12)


def test_scope_is_checked() -> None:
    """A rest state off the ramp, or past a condition of the form, is refused."""
    with pytest.raises(ValueError, match="roots in q"):
        closed_forms.reno_red().numeric(C=CAPACITY, T=500e-6, N=200, b=1, **RED_PACKETS)
    with pytest.raises(ValueError, match="theta"):
        closed_forms.dctcp_step().numeric(C=CAPACITY, T=500e-6, N=100, b=1, K=1)
    with pytest.raises(ValueError, match="P_max"):
        closed_forms.dcqcn().numeric(**_dcqcn_values(64))
    with pytest.raises(TypeError, match="missing"):
        closed_forms.dcqcn_small_p().numeric(C=1.0)
