"""Fairness of an allocation, and the allocations that fairness criteria and protocols predict
(issue 12, item 3).

Model
-----
A network is its routing matrix R (links x flows: the part of a flow's rate that crosses a
link; 1 on each link of a single path) and its capacities c (bytes/s). An allocation is a rate
x_f per flow (bytes/s) with R x <= c. Three predictions:

- **Max-min fairness**: progressive filling (Bertsekas and Gallager, *Data Networks*, 6.5.2):
  every unfrozen flow's rate rises together until a link fills; its flows freeze; repeat. Exact.
- **Alpha-fairness** (Mo and Walrand 2000): the x maximising sum_f w_f U_alpha(x_f) subject to
  R x <= c, with U_1 = log x (proportional fairness, Kelly 1997) and U_alpha = x^(1 - alpha) /
  (1 - alpha); alpha -> infinity is max-min.
- **A protocol's own allocation**, the optimum of its utility (Kelly, Maulloo and Tan 1998; Low
  2003). Reno, whose loss rate p settles at 2 / (b x^2 T^2) (x in packets/s, T the round trip,
  b the ACK ratio; the mean-field square-root law), maximises U(x) = -2 / (b T^2 x): alpha = 2
  with weight 2 / (b T^2). DCTCP in mean-field form rests at W = 2 / (b p) on a marking ramp
  (`analysis.equilibrium`): p = 2 / (b T x), weighted proportional fairness, U(x) = 2 / (b T)
  log x; on the ECN step its price is the marked fraction, sqrt(2 / (b T x)): alpha = 1/2 with
  weight sqrt(2 / (b T)). DCQCN and the MPTCP family follow in later work (issue 12).

The optimum is found on the dual (Low and Lapsley 1999): link prices p >= 0, a flow's price
q_f = sum_l R_lf p_l, its demand x_f(q) = (w_f / q_f)^(1 / alpha), and the prices minimise
sum_f (w_f U(x_f) - q_f x_f) + c . p, whose gradient is c - R x(p) (L-BFGS-B on log prices,
bounded; converged when every link's load is within 1e-6 of its capacity or its price is 0).
Rates are scaled to units of the largest capacity while solving, so the numbers stay near one.

Scope and limitations
---------------------
Single-path flows, but for `pooled_alpha_fair` and `pooled_max_min`: connections of several
subflows (MPTCP), each on one path, that may spread their rate over all their paths (resource
pooling; validated on the two-path network of tests/test_equilibrium_mptcp.py against its
closed form, where OLIA's rest state meets it and LIA's does not, and on a parking lot whose
long connection has a private path, where max-min and proportional fairness differ).
Spraying (several paths per subflow) is refused. Flows that the solver runs once for many
(`Problem.count`) count that many times. The protocol's allocation takes the round trips
as given (`rtt`, s, per flow; default the base round trips): a queue adds to them, so compare
with a simulation at its own mean round trips (`fairness_of`). Reno's law holds in the mean
field, where losses are a probability; drop-tail sawtooths meet it only on average.

Validated by tests/test_fairness.py: the parking lot's closed forms (max-min c/2; proportional
c/(N+1) and Nc/(N+1); alpha = 2, c/(1 + sqrt N)), Reno's rates in inverse proportion to the
round trip on a shared bottleneck, the fluid Reno on a parking lot against its own utility
optimum, and pooled max-min against closed forms and, with a subflow per connection, against
progressive filling.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import scipy.optimize
import xarray as xr

from pathflow.compile import Compiled, compile_scenario
from pathflow.metrics import jain_index, throughput
from pathflow.scenario import Scenario, ScenarioError

__all__ = ["Network", "alpha_fair", "dctcp_allocation", "fairness_of", "max_min", "network_of",
           "own_allocation", "pooled_allocations", "pooled_alpha_fair", "pooled_max_min",
           "reno_allocation"]


@dataclass(frozen=True)
class Network:
    """What an allocation is judged on: routing (links x flows), capacities (bytes/s), and per
    flow the number of identical flows it stands for and its base round trip (s; nan where
    not known); for the rest state (`analysis.equilibrium`), the ACKs' load too. The
    allocations of this module judge data alone."""

    routing: np.ndarray
    capacity: np.ndarray
    count: np.ndarray
    base_rtt: np.ndarray | None = None
    # ACKs as load (`network_of(..., acks=True)`): links x flows, the ACK bytes that cross each
    # link per data byte a flow delivers (its ACK ratio on the reverse of each hop); None: none
    acks: np.ndarray | None = None

    def load(self, rates: np.ndarray) -> np.ndarray:
        """Bytes/s each link carries at per-flow `rates`: data, and ACKs where `acks` is set."""
        return self.routing @ (self.count * rates) + self.ack_load(rates)

    def ack_load(self, rates: np.ndarray) -> np.ndarray:
        """Bytes/s of ACKs each link carries at per-flow `rates` (0 without `acks`)."""
        if self.acks is None:
            return np.zeros((*np.shape(rates)[:-1], self.capacity.size))
        return (self.count * rates) @ self.acks.T

    @functools.cached_property
    def waits(self) -> np.ndarray:
        """(links, flows): the part of a flow that waits in each link's queue on its round trip,
        data out and ACKs back (R_lr, and 1 on the reverse links its ACKs cross)."""
        return self.routing if self.acks is None else self.routing + (self.acks > 0)


def network_of(compiled: Compiled, subflows: bool = False, acks: bool = False
               ) -> tuple[Network, np.ndarray, list[str]]:
    """A compiled scenario's network over the solver's controllers, each flow's controller,
    and each flow's "src->dst". `subflows`: a connection may have several subflows (a column
    each; the caller reads `problem.subflow_flow`), each still on one path. `acks`: with the
    ACK load of the solver's model (`Network.acks`: `Problem.ack` bytes per data byte on each
    hop's `Problem.reverse`; none where the scenario's ACKs have no size)."""
    problem = compiled.problem
    controllers = np.asarray(problem.count).size
    owner = np.asarray(problem.path_subflow)
    per_flow = np.bincount(np.asarray(problem.subflow_flow), minlength=controllers)
    if np.bincount(owner, minlength=controllers).max() > 1:
        raise ScenarioError("routing.mode: a subflow spread over several paths (spraying) is "
                            "not analysed; route each subflow on one path (ecmp, shortest, "
                            "explicit, kshortest)")
    if per_flow.max() > 1 and not subflows:
        raise ScenarioError("transport.subflows: the allocations of connections with several "
                            "subflows (MPTCP) are not derived yet; analyse one subflow per flow")
    capacity = np.asarray(problem.queues.capacity, dtype=float)
    links = capacity.size - 1  # the last is the solver's padding link
    routing = np.zeros((links, controllers))
    back = np.zeros((links, controllers))
    reverse = np.asarray(problem.reverse)
    for path, hops in enumerate(np.asarray(problem.path_hops)):
        real = hops[hops < links]
        weight = float(np.asarray(problem.path_weight)[path])
        routing[real, owner[path]] += weight
        returning = reverse[real]
        back[returning[returning < links], owner[path]] += weight
    base_rtt = np.full(controllers, np.nan)
    base_rtt[owner] = np.asarray(problem.path_base_rtt, dtype=float)
    back *= np.asarray(problem.ack, dtype=float)  # ACK bytes per delivered data byte
    network = Network(routing, capacity[:links], np.asarray(problem.count, dtype=float),
                      base_rtt, back if acks and back.any() else None)
    names = [f"{flow.src}->{flow.dst}" for flow in compiled.routes.flows]
    return network, np.asarray(compiled.controller_of), names


def max_min(network: Network) -> np.ndarray:
    """The max-min fair rates (bytes/s) by progressive filling."""
    routing, capacity, count = network.routing, network.capacity, network.count
    rates = np.zeros(count.size)
    frozen = ~routing.any(axis=0)  # a flow crossing no link is unconstrained: left at 0
    spare = capacity.astype(float).copy()
    while not frozen.all():
        growing = np.where(frozen, 0.0, count)
        per_unit = routing @ growing  # load added per unit of common increase
        active = per_unit > 0
        step = float(np.min(spare[active] / per_unit[active]))
        rates[~frozen] += step
        spare -= step * per_unit
        full = active & (spare <= 1e-12 * capacity)
        frozen |= routing[full].any(axis=0)
    return rates


def alpha_fair(network: Network, alpha: float, weight: np.ndarray | None = None
               ) -> np.ndarray:
    """The rates (bytes/s) maximising sum_f count_f w_f U_alpha(x_f) under the capacities
    (alpha > 0; 1: proportional fairness)."""
    if not alpha > 0:
        raise ValueError(f"alpha: must be > 0, got {alpha}")
    weight = np.ones(network.count.size) if weight is None else np.asarray(weight, float)
    scale = float(network.capacity.max())
    routing, capacity, count = network.routing, network.capacity / scale, network.count
    used = routing.any(axis=0)
    w = weight * scale ** (alpha - 1)  # the same optimum in units of `scale`

    def demand(log_price: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        price = routing.T @ np.exp(log_price)
        return price, np.where(used, (w / np.maximum(price, 1e-300)) ** (1 / alpha), 0.0)

    def dual(log_price: np.ndarray) -> tuple[float, np.ndarray]:
        price, rates = demand(log_price)
        utility = (w * np.log(np.maximum(rates, 1e-300)) if alpha == 1
                   else w * rates ** (1 - alpha) / (1 - alpha))
        value = float(np.sum(count * np.where(used, utility - price * rates, 0.0))
                      + capacity @ np.exp(log_price))
        gradient = (capacity - routing @ (count * rates)) * np.exp(log_price)
        return value, gradient

    start = np.zeros(capacity.size)
    found = scipy.optimize.minimize(dual, start, jac=True, method="L-BFGS-B",
                                    bounds=[(-60.0, 60.0)] * capacity.size,
                                    options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 5000})
    return demand(found.x)[1] * scale


def pooled_alpha_fair(network: Network, connection: np.ndarray, alpha: float) -> np.ndarray:
    """Per subflow the rates (bytes/s) maximising sum_c count_c U_alpha(y_c) under the
    capacities, y_c the sum of connection c's subflows (`connection`: each subflow's connection
    index): alpha-fairness between connections that may spread over all their paths, the
    allocation of resource pooling (Kelly and Voice 2005; Khalili et al. 2012 for OLIA). The
    split among a connection's equally priced paths is not unique: one optimum is given. Solved
    in the primal by SLSQP (a network of up to a few hundred subflows)."""
    if not alpha > 0:
        raise ValueError(f"alpha: must be > 0, got {alpha}")
    scale = float(network.capacity.max())
    routing, capacity, count = network.routing, network.capacity / scale, network.count
    connections, owner = np.unique(connection, return_inverse=True)
    owner = owner.reshape(-1)
    weight = np.bincount(owner, count, connections.size) / np.bincount(owner, None,
                                                                       connections.size)

    def objective(x: np.ndarray) -> tuple[float, np.ndarray]:
        total = np.maximum(np.bincount(owner, x, connections.size), 1e-12)
        utility = (np.log(total) if alpha == 1 else total ** (1 - alpha) / (1 - alpha))
        marginal = weight * total ** -alpha
        return -float(weight @ utility), -marginal[owner]

    used = routing * count[None, :]
    start = np.full(count.size, float(np.min(capacity / np.maximum(used.sum(axis=1), 1e-300)))
                    / 2)
    found = scipy.optimize.minimize(
        objective, start, jac=True, method="SLSQP", bounds=[(0.0, None)] * count.size,
        constraints=[{"type": "ineq", "fun": lambda x: capacity - used @ x,
                      "jac": lambda _: -used}],
        options={"ftol": 1e-14, "maxiter": 1000})
    return found.x * scale


def pooled_max_min(network: Network, connection: np.ndarray) -> np.ndarray:
    """Per subflow the rates (bytes/s) of the max-min fair allocation between connections that
    may spread over all their paths (`connection`: each subflow's connection index): the
    connections' totals y_c lexicographically largest, smallest first (Nace and Pioro 2008,
    max-min fairness with splittable demands). Each round solves the linear program max t
    subject to y_c >= t for the connections still free, y_c >= their level for the frozen
    ones, and the capacities; a free connection whose constraint has a positive dual price
    cannot exceed t (Nace and Pioro's blocking test), so it freezes at t, and every round
    freezes at least one (the duals sum to 1). One subflow per connection gives `max_min`.
    The split among a connection's paths is not unique: one is given."""
    scale = float(network.capacity.max())
    routing, capacity, count = network.routing, network.capacity / scale, network.count
    connections, owner = np.unique(connection, return_inverse=True)
    owner = owner.reshape(-1)
    subflows, size = count.size, connections.size
    member = np.zeros((size, subflows))
    member[owner, np.arange(subflows)] = 1.0  # y = member @ x
    free = member @ routing.any(axis=0) > 0  # a connection that crosses no link gets 0
    level = np.zeros(size)
    x = np.zeros(subflows)
    loads = np.hstack([routing * count[None, :], np.zeros((capacity.size, 1))])
    while free.any():
        # z = (x, t), maximise t: t - y_c <= 0 for the free, -y_c <= -level_c for the frozen
        floors = np.hstack([-member, free[:, None].astype(float)])
        found = scipy.optimize.linprog(
            np.append(np.zeros(subflows), -1.0), A_ub=np.vstack([loads, floors]),
            b_ub=np.concatenate([capacity, np.where(free, 0.0, -level)]),
            bounds=[(0.0, None)] * (subflows + 1), method="highs")
        if found.status != 0:
            raise ScenarioError(f"the max-min allocation was not found ({found.message})")
        x, t = found.x[:subflows], found.x[-1]
        price = -found.ineqlin.marginals[capacity.size:]
        blocked = free & (price > 1e-9)
        level[blocked] = t
        free &= ~blocked
    return x * scale


def pooled_allocations(compiled: Compiled) -> dict[str, np.ndarray] | None:
    """Per flow (connection) of a scenario whose connections have several subflows, the rates
    (bytes/s) of the max-min and proportionally fair allocations with each connection pooling
    its paths (`pooled_max_min`, `pooled_alpha_fair`); None where every connection has one
    subflow."""
    routes = compiled.routes
    if len(routes.subflow_flow) == len(routes.flows):
        return None
    network, _, _ = network_of(compiled, subflows=True)
    connection = np.asarray(compiled.problem.subflow_flow)
    controller = np.asarray(compiled.controller_of)
    return {name: np.bincount(routes.subflow_flow, rates[controller], len(routes.flows))
            for name, rates in (("max_min", pooled_max_min(network, connection)),
                                ("proportional", pooled_alpha_fair(network, connection, 1.0)))}


def reno_allocation(network: Network, rtt: np.ndarray, packet: float,
                    ack_ratio: float = 1.0) -> np.ndarray:
    """Reno's own allocation (bytes/s): the optimum of U(x) = -2 / (b T^2 x), x in packets/s,
    per flow round trip `rtt` (s) and ACK ratio b."""
    weight = 2.0 / (ack_ratio * np.asarray(rtt, float) ** 2)
    in_packets = Network(network.routing, network.capacity / packet, network.count)
    return alpha_fair(in_packets, 2.0, weight) * packet


def dctcp_allocation(network: Network, rtt: np.ndarray, packet: float,
                     ack_ratio: float = 1.0, step: bool = False) -> np.ndarray:
    """DCTCP's own allocation (bytes/s), mean-field form. On a marking ramp its rest law W =
    2 / (b p) is p = 2 / (b T x): weighted proportional fairness, U(x) = 2 / (b T) log x. On the
    ECN step, alpha = sqrt(2 / (b W)) is the price: U(x) = 2 sqrt(2 x / (b T)), alpha-fairness
    with alpha = 1/2 and weight sqrt(2 / (b T)). x in packets/s, T the round trip `rtt` (s)."""
    rtt = np.asarray(rtt, float)
    in_packets = Network(network.routing, network.capacity / packet, network.count)
    if step:
        return alpha_fair(in_packets, 0.5, np.sqrt(2.0 / (ack_ratio * rtt))) * packet
    return alpha_fair(in_packets, 1.0, 2.0 / (ack_ratio * rtt)) * packet


def own_allocation(network: Network, rtt: np.ndarray, scenario: Scenario) -> np.ndarray | None:
    """The allocation (bytes/s) that the scenario's congestion control maximises the utility
    of at round trips `rtt` (s): Reno's or DCTCP's (on the ECN step or a ramp); None for the
    others."""
    transport = scenario.si.transport
    ack_ratio = transport.parameters.get("ack_ratio")
    if transport.cc == "reno":
        return reno_allocation(network, rtt, transport.mss, ack_ratio)
    if transport.cc == "dctcp":
        return dctcp_allocation(network, rtt, transport.mss, ack_ratio,
                                step=scenario.si.aqm.kind == "ecn_step")
    return None


def fairness_of(ds: xr.Dataset, scenario: Scenario, warmup: float | None = None
                ) -> xr.Dataset:
    """A simulated allocation (either engine's result `ds` of `scenario`) beside the max-min
    and proportionally fair ones (connections of several subflows pooling their paths:
    `pooled_allocations`) and, for Reno and DCTCP, their own at the run's mean round trips;
    per flow (bytes/s) and, for each, Jain's index and the distance from the simulated rates
    (mean absolute difference over the mean simulated rate)."""
    compiled = compile_scenario(scenario)
    simulated = throughput(ds, warmup).values
    predictions = pooled_allocations(compiled)
    if predictions is None:
        network, controller, _ = network_of(compiled)
        predictions = {"max_min": max_min(network)[controller],
                       "proportional": alpha_fair(network, 1.0)[controller]}
        after = ds.time > (ds.attrs.get("warmup_s", 0.0) if warmup is None else warmup)
        rtt = np.zeros(network.count.size)
        rtt[controller[ds.subflow_flow.values]] = ds.rtt.sel(time=after).mean("time").values
        own = own_allocation(network, rtt, scenario)
        if own is not None:
            predictions[scenario.si.transport.cc] = own[controller]
    out = xr.Dataset({"simulated": ("flow", simulated, {"units": "bytes/s"})},
                     coords={"flow": ds.flow.values})
    scale = float(np.mean(simulated)) or math.nan
    for name, rates in predictions.items():
        out[name] = ("flow", rates, {"units": "bytes/s"})
        out.attrs[f"distance_{name}"] = float(np.mean(np.abs(simulated - rates)) / scale)
    out.attrs["jain"] = jain_index(simulated)
    return out
