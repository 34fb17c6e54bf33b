"""Where a network of Reno flows settles, from the model's steady-state equations (issue 12,
item 1; Reno on RED links first).

Model
-----
The fluid Reno (models/reno.py, `reaction = "mean"`: Misra, Gong and Towsley 2000) with ACK
ratio b stops moving where its window's growth, 1 / (b R) per second, equals its cut,
W^2 p / (2 R): W = sqrt(2 / (b p)), sending x = W / R packets/s. Its path's signal is
p = 1 - prod_l (1 - p_l) over its links and its round trip R = base + sum_l q_l / C_l. A RED
link (models/aqm.py; its average equals the queue at rest) marks or drops with
p_l = pmax (q_l - min) / (max - min) between min and max. The network is at rest where every
RED link is either loaded to its capacity with a queue, or has no queue and spare capacity:

    q_l >= 0,   C_l - sum_r R_lr x_r >= 0,   q_l (C_l - sum_r R_lr x_r) = 0,

solved as a system of Fischer-Burmeister equations, phi(a, b) = a + b - sqrt(a^2 + b^2) = 0,
by least squares within 0 <= q_l <= max_l (scipy's trust-region reflective method). A flow
whose path marks nothing is held by its NIC (the solver's rule: a window that does not limit
the rate does not grow), so its rate is its NIC's rate shared with the NIC's other flows.

Scope and limitations
---------------------
Reno with `reaction = "mean"` on single-path flows whose loaded links are RED (marking or
early-dropping): the smooth case, where the fixed point exists and the mean field converges
to it. Drop-tail and the ECN step (DCTCP's marker) pin the queue at a threshold and make the
rest state a sawtooth, a limit cycle rather than a point; DCTCP, DCQCN and the MPTCP family
follow (issue 12). The classic RED jump to 1 above max is outside the ramp; a rest state
beyond max is reported as not found.

Validated by tests/test_equilibrium.py: the closed form of one RED bottleneck (N flows share C:
p* = 2 / (b W*^2) with W* = C R* / N and R* = base + q*/C, q* on the ramp), the fluid
simulation's steady state on a parking lot and a two-bottleneck network within 2 %, and the
utility optimum of `analysis.fairness` at the equilibrium's round trips (the NUM view).
"""

from __future__ import annotations

import numpy as np
import scipy.optimize
import xarray as xr

from pathflow.analysis.fairness import network_of
from pathflow.compile import compile_scenario
from pathflow.scenario import Scenario, ScenarioError

__all__ = ["equilibrium"]


def _fischer_burmeister(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a + b - np.sqrt(a * a + b * b)


def equilibrium(scenario: Scenario) -> xr.Dataset:
    """The rest state of `scenario` (see the module docstring): per flow its rate (bytes/s),
    window (packets) and round trip (s); per link its queue (bytes), marking or early-drop
    probability and load (bytes/s). attrs: `residual`, the largest Fischer-Burmeister residual
    (0 at an exact rest state)."""
    transport = scenario.si.transport
    if transport.cc != "reno" or transport.parameters.get("reaction") != "mean":
        raise ScenarioError(f"transport.cc: the equilibrium is derived for reno with reaction = "
                            f"'mean' so far, not {transport.cc!r} "
                            f"({transport.parameters.get('reaction')!r})")
    if scenario.si.aqm.kind != "red":
        raise ScenarioError(f"aqm.kind: the equilibrium needs RED's smooth marking curve, not "
                            f"{scenario.si.aqm.kind!r} (drop-tail and the ECN step settle into a "
                            "sawtooth, not a point)")
    compiled = compile_scenario(scenario)
    network, controller, names = network_of(compiled)
    problem = compiled.problem
    links = network.capacity.size
    red = problem.aqm
    low, high = (np.asarray(v, float)[:links] for v in (red.min, red.max))
    pmax = np.asarray(red.pmax, float)[:links]
    marking = np.isfinite(low)  # host NICs never mark
    low, high = np.where(marking, low, 0.0), np.where(marking, high, 1.0)
    routing, capacity, count = network.routing, network.capacity, network.count
    assert network.base_rtt is not None
    packet, ack_ratio = transport.mss, transport.parameters["ack_ratio"]
    nic = np.asarray(problem.nic)

    def state(queue: np.ndarray) -> tuple[np.ndarray, ...]:
        ramp = np.clip((queue - low) / np.where(high > low, high - low, 1.0), 0.0, 1.0)
        p_link = np.where(marking, pmax * ramp, 0.0)
        keep = np.exp(routing.T @ np.log1p(-np.minimum(p_link, 1 - 1e-15)))
        p_path = 1.0 - keep
        rtt = network.base_rtt + routing.T @ (queue / capacity)
        window = np.sqrt(2.0 / (ack_ratio * np.maximum(p_path, 1e-300)))
        wanted = window / rtt * packet
        rate = np.minimum(wanted, _nic_share(wanted, nic, count, capacity))
        return p_link, rtt, window, rate

    def residual(scaled: np.ndarray) -> np.ndarray:
        queue = np.zeros(links)
        queue[marking] = scaled * high[marking]
        load = routing @ (count * state(queue)[3])
        return _fischer_burmeister(scaled, (1.0 - load / capacity)[marking])

    start = np.full(int(marking.sum()), 0.5)
    found = scipy.optimize.least_squares(residual, start, bounds=(0.0, 1.0), xtol=1e-14,
                                         ftol=1e-14, gtol=1e-14, method="trf")
    queue = np.zeros(links)
    queue[marking] = np.where(found.x > 1e-8, found.x, 0.0) * high[marking]  # 0: no queue
    p_link, rtt, window, rate = state(queue)
    out = xr.Dataset(
        {"rate": ("flow", rate[controller], {"units": "bytes/s"}),
         "window": ("flow", window[controller], {"units": "packets"}),
         "rtt": ("flow", rtt[controller], {"units": "s"}),
         "queue": ("link", queue, {"units": "bytes"}),
         "probability": ("link", p_link, {"units": "1"}),
         "load": ("link", routing @ (count * rate), {"units": "bytes/s"})},
        coords={"flow": np.arange(controller.size),
                "link": [link.name for link in compiled.network.links],
                "pair": ("flow", names)},
        attrs={"residual": float(np.max(np.abs(found.fun))) if found.fun.size else 0.0})
    if np.any(queue[marking] >= high[marking] * (1 - 1e-9)):
        raise ScenarioError("aqm.max: the rest state lies beyond RED's ramp (a queue at max, "
                            "where marking jumps to 1): no equilibrium on the ramp")
    return out


def _nic_share(wanted: np.ndarray, nic: np.ndarray, count: np.ndarray, capacity: np.ndarray
               ) -> np.ndarray:
    """Each flow's part of its NIC when the NIC is the limit: the NIC's rate shared in
    proportion to what the flows want (the solver's rule), infinite on an unlimited NIC."""
    links = capacity.size
    demand = np.bincount(nic, weights=count * wanted, minlength=links + 1)[nic]
    nic_rate = np.append(capacity, np.inf)[nic]
    return np.where(demand > nic_rate, wanted * nic_rate / np.maximum(demand, 1e-300), np.inf)
