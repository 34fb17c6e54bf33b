"""Where a network settles, from each model's steady-state equations (issue 12, item 1: Reno and
DCQCN on linear marking ramps first).

Model
-----
At rest a controller's rate is a function of the congestion signal its path returns, p = 1 -
prod_l (1 - p_l), and of its round trip R = base + sum_l q_l / C_l:

- **Reno** (models/reno.py, `reaction = "mean"`: Misra, Gong and Towsley 2000) with ACK ratio b
  stops moving where its window's growth, 1 / (b R) per second, equals its cut, W^2 p / (2 R):
  W = sqrt(2 / (b p)), sending x = W / R packets/s.
- **DCQCN** (models/dcqcn.py, Zhu et al. 2016): dR_T/dt = dR_C/dt = dalpha/dt = 0 leave one
  equation between p and the current rate R_C, alpha a^2 = tau^2 R_AI R_C (c + e)(b + d) (the
  model docstring's symbols), solved for R_C within [min_rate, line_rate] for the path's p; the
  round trip does not enter.

A marking link (RED, models/aqm.py, whose average equals the queue at rest; DCQCN's marking)
marks or drops with p_l = pmax (q_l - min) / (max - min) on its ramp. The network is at rest
where every marking link is either loaded to its capacity with a queue, or has no queue and
spare capacity:

    q_l >= 0,   C_l - sum_r R_lr x_r >= 0,   q_l (C_l - sum_r R_lr x_r) = 0,

solved as a system of Fischer-Burmeister equations, phi(a, b) = a + b - sqrt(a^2 + b^2) = 0,
by least squares within 0 <= q_l <= max_l (scipy's trust-region reflective method). A flow
whose path marks nothing is held by its NIC (the solver's rule: a window that does not limit
the rate does not grow), so its rate is its NIC's rate shared with the NIC's other flows.

Scope and limitations
---------------------
Single-path flows whose loaded links mark on a ramp (RED marking or early-dropping; DCQCN's
marking). Drop-tail and the ECN step (DCTCP's marker) pin the queue at a threshold and make the
rest state a sawtooth, a limit cycle rather than a point; DCTCP and the MPTCP family follow
(issue 12). DCQCN's NIC-wide CNP capacity is left out (refused when set). A rest state beyond a
ramp's max (where RED and the standard DCQCN marking jump to 1) is reported as not found. A
rest state need not be stable: DCQCN with the cx4 parameters has one, and cycles around it
(notebook 03); the stability analysis is issue 12's next part.

Validated by tests/test_equilibrium.py: the closed form of one RED bottleneck (N flows share C:
p* = 2 / (b W*^2) with W* = C R* / N and R* = base + q*/C, q* on the ramp), the fluid
simulation's steady state on parking lots within 2 % (and the utility optimum of
`analysis.fairness` at the equilibrium's round trips: the NUM view), and DCQCN's fixed point on
one 40 Gb/s link (validation/cases/dcqcn.py's scalar root) with the simulation settling there.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import scipy.optimize
import xarray as xr

from pathflow.analysis.fairness import Network, network_of
from pathflow.compile import Compiled, compile_scenario
from pathflow.scenario import Scenario, ScenarioError

__all__ = ["RestState", "dcqcn_rest_rate", "equilibrium", "rest_state"]


def _fischer_burmeister(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a + b - np.sqrt(a * a + b * b)


RestRate = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]
"""(path signal p, round trip R (s)) per controller -> (rate in bytes/s, window in packets or
NaN for a rate-based sender)."""


class RestState(NamedTuple):
    """The rest state per solver controller (`Problem.count` flows each) and per link."""

    compiled: Compiled
    network: Network
    queue: np.ndarray  # (links,) bytes
    probability: np.ndarray  # (links,) marking or early-drop probability
    rate: np.ndarray  # (controllers,) bytes/s
    window: np.ndarray  # (controllers,) packets; NaN for a rate-based sender
    rtt: np.ndarray  # (controllers,) s
    residual: float  # the largest Fischer-Burmeister residual (0 at an exact rest state)


def equilibrium(scenario: Scenario, rest: RestState | None = None) -> xr.Dataset:
    """The rest state of `scenario` (see the module docstring): per flow its rate (bytes/s),
    window (packets; NaN for DCQCN) and round trip (s); per link its queue (bytes), marking or
    early-drop probability and load (bytes/s). attrs: `residual`, the largest
    Fischer-Burmeister residual (0 at an exact rest state). `rest`: the rest state already
    found for `scenario` (`rest_state`)."""
    rest = rest or rest_state(scenario)
    controller = np.asarray(rest.compiled.controller_of)
    names = [f"{flow.src}->{flow.dst}" for flow in rest.compiled.routes.flows]
    return xr.Dataset(
        {"rate": ("flow", rest.rate[controller], {"units": "bytes/s"}),
         "window": ("flow", rest.window[controller], {"units": "packets"}),
         "rtt": ("flow", rest.rtt[controller], {"units": "s"}),
         "queue": ("link", rest.queue, {"units": "bytes"}),
         "probability": ("link", rest.probability, {"units": "1"}),
         "load": ("link", rest.network.load(rest.rate), {"units": "bytes/s"})},
        coords={"flow": np.arange(controller.size),
                "link": [link.name for link in rest.compiled.network.links],
                "pair": ("flow", names)},
        attrs={"residual": rest.residual})


def rest_state(scenario: Scenario) -> RestState:
    """The rest state of `scenario` per solver controller (see `equilibrium`)."""
    compiled = compile_scenario(scenario)
    network, _, _ = network_of(compiled)
    problem = compiled.problem
    rest_rate = _rest_rate(scenario, problem)
    links = network.capacity.size
    low, high, pmax = _ramp(scenario, problem.aqm, links)
    routing, capacity, count = network.routing, network.capacity, network.count
    # host NICs never mark; a link that no flow crosses holds no queue, nor one downstream of
    # a link carrying the same flows at no more capacity (the upstream one holds it)
    marking = np.isfinite(low) & routing.any(axis=1) & ~_shadowed(problem, routing, capacity)
    low, high = np.where(marking, low, 0.0), np.where(marking, high, 1.0)
    assert network.base_rtt is not None
    nic = np.asarray(problem.nic)

    def state(queue: np.ndarray) -> tuple[np.ndarray, ...]:
        ramp = np.clip((queue - low) / np.where(high > low, high - low, 1.0), 0.0, 1.0)
        p_link = np.where(marking, pmax * ramp, 0.0)
        keep = np.exp(routing.T @ np.log1p(-np.minimum(p_link, 1 - 1e-15)))
        rtt = network.base_rtt + routing.T @ (queue / capacity)
        wanted, window = rest_rate(1.0 - keep, rtt)
        rate = np.minimum(wanted, _nic_share(wanted, nic, count, capacity))
        return p_link, rtt, window, rate

    def residual(scaled: np.ndarray) -> np.ndarray:
        queue = np.zeros(links)
        queue[marking] = scaled * high[marking]
        load = network.load(state(queue)[3])
        return _fischer_burmeister(scaled, (1.0 - load / capacity)[marking])

    start = np.full(int(marking.sum()), 0.5)
    try:
        found = scipy.optimize.least_squares(residual, start, bounds=(0.0, 1.0), xtol=1e-14,
                                             ftol=1e-14, gtol=1e-14, method="trf")
    except np.linalg.LinAlgError as why:
        raise ScenarioError(f"the rest state was not found: the root solver failed ({why}) on "
                            f"{start.size} loaded marking links") from None
    queue = np.zeros(links)
    queue[marking] = np.where(found.x > 1e-8, found.x, 0.0) * high[marking]  # 0: no queue
    if np.any(queue[marking] >= high[marking] * (1 - 1e-9)):
        raise ScenarioError("aqm: the rest state lies at the end of the marking ramp (a queue at "
                            "its max, where marking jumps to 1): no equilibrium on the ramp")
    p_link, rtt, window, rate = state(queue)
    return RestState(compiled, network, queue, p_link, rate, window, rtt,
                     float(np.max(np.abs(found.fun))) if found.fun.size else 0.0)


def _ramp(scenario: Scenario, aqm: Any, links: int) -> tuple[np.ndarray, ...]:
    """Per link the marking ramp's start and end (bytes) and its probability at the end."""
    kind = scenario.si.aqm.kind
    if kind == "red":
        ends = (aqm.min, aqm.max, aqm.pmax)
    elif kind == "dcqcn":
        kmin, kmax, pmax = (np.asarray(v, float) for v in (aqm.kmin, aqm.kmax, aqm.pmax))
        # the extended line goes on past kmax to 1 (the CoNEXT 2016 analysis's ramp)
        with np.errstate(invalid="ignore"):  # inf - inf at host NICs, which never mark
            end = np.where(np.asarray(aqm.extended) > 0, kmin + (kmax - kmin) / pmax, kmax)
        ends = (kmin, end, np.where(np.asarray(aqm.extended) > 0, 1.0, pmax))
    else:
        raise ScenarioError(f"aqm.kind: the equilibrium needs a marking ramp (red, dcqcn), not "
                            f"{kind!r} (drop-tail and the ECN step settle into a sawtooth, not a "
                            "point)")
    return tuple(np.asarray(v, float)[:links] for v in ends)


def _rest_rate(scenario: Scenario, problem: Any) -> RestRate:
    """The controllers' rest rate as a function of their path signal and round trip."""
    transport = scenario.si.transport
    packet = transport.mss
    if transport.cc == "reno" and transport.parameters.get("reaction") == "mean":
        ack_ratio = transport.parameters["ack_ratio"]

        def reno(p: np.ndarray, rtt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            window = np.sqrt(2.0 / (ack_ratio * np.maximum(p, 1e-300)))
            return window / rtt * packet, window

        return reno
    if transport.cc == "dcqcn":
        params = problem.params
        if np.isfinite(np.asarray(params.cnp_capacity, float)).any():
            raise ScenarioError("transport.cnp_capacity: the equilibrium leaves the NIC-wide CNP "
                                "capacity out; unset it")

        def dcqcn(p: np.ndarray, rtt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            rates = [dcqcn_rest_rate(float(q), *(float(np.asarray(v)[i]) for v in (
                params.cnp_interval, params.alpha_interval, params.stages, params.byte_counter,
                params.timer, params.rai, params.min_rate, params.line_rate)))
                for i, q in enumerate(p)]
            return np.array(rates) * packet, np.full(p.size, np.nan)

        return dcqcn
    raise ScenarioError(f"transport.cc: the equilibrium is derived for reno (reaction = 'mean') "
                        f"and dcqcn so far, not {transport.cc!r} "
                        f"(reaction {transport.parameters.get('reaction')!r})")


def dcqcn_rest_rate(p: float, tau: float, tau_alpha: float, stages: float, byte_counter: float,
                    timer: float, rai: float, min_rate: float, line_rate: float) -> float:
    """DCQCN's current rate R_C (packets/s) at rest under path signal p: the root in R_C of
    alpha a^2 = tau^2 R_AI R_C (c + e)(b + d) (models/dcqcn.py's symbols; times in s, the byte
    counter in packets, rates in packets/s), the line rate where nothing marks, clipped to
    [min_rate, line_rate]."""
    if p <= 0:
        return line_rate
    log_keep = math.log1p(-min(p, 1 - 1e-12))

    def excess(rate: float) -> float:  # cuts minus increases: grows with the rate
        a = -math.expm1(tau * rate * log_keep)
        alpha = -math.expm1(tau_alpha * rate * log_keep)
        b = _per_count(byte_counter, p, log_keep)
        d = _per_count(timer * rate, p, log_keep)
        increase = (math.exp(stages * byte_counter * log_keep) * b
                    + math.exp(stages * timer * rate * log_keep) * d)
        return alpha * a * a - tau**2 * rai * rate * increase * (b + d)

    if excess(line_rate) <= 0:
        return line_rate
    if excess(min_rate) >= 0:
        return min_rate
    return scipy.optimize.brentq(excess, min_rate, line_rate, xtol=1e-9 * line_rate,
                                 rtol=1e-13)


def _shadowed(problem: Any, routing: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Per link, whether a link before it on the path carries exactly its flows at no more
    capacity: then it never receives more than it serves (single paths)."""
    links = capacity.size
    order = np.full((links, routing.shape[1]), -1)  # each flow's hop index at each link
    for path, hops in enumerate(np.asarray(problem.path_hops)):
        real = hops[hops < links]
        order[real, np.asarray(problem.path_subflow)[path]] = np.arange(real.size)
    shadowed = np.zeros(links, bool)
    crossed = routing > 0
    _, group = np.unique(crossed, axis=0, return_inverse=True)
    for members in (np.flatnonzero(group.reshape(-1) == g) for g in np.unique(group)):
        if members.size < 2 or not crossed[members[0]].any():
            continue
        flow = np.flatnonzero(crossed[members[0]])[0]
        first = members[np.argmin(order[members, flow])]
        shadowed[members] = (members != first) & (capacity[members] >= capacity[first])
    return shadowed


def _per_count(count: float, p: float, log_keep: float) -> float:
    """p / ((1 - p)^-count - 1), written so that a large count underflows to 0 rather than
    overflowing."""
    kept = count * log_keep  # <= 0
    return p * math.exp(kept) / -math.expm1(kept)


def _nic_share(wanted: np.ndarray, nic: np.ndarray, count: np.ndarray, capacity: np.ndarray
               ) -> np.ndarray:
    """Each flow's part of its NIC when the NIC is the limit: the NIC's rate shared in
    proportion to what the flows want (the solver's rule), infinite on an unlimited NIC."""
    links = capacity.size
    demand = np.bincount(nic, weights=count * wanted, minlength=links + 1)[nic]
    nic_rate = np.append(capacity, np.inf)[nic]
    return np.where(demand > nic_rate, wanted * nic_rate / np.maximum(demand, 1e-300), np.inf)
