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
  weight sqrt(2 / (b T)). Of the MPTCP family (`analysis.utility`, which reads each model's
  rest law off its code): uncoupled subflows maximise Reno's utility per subflow, OLIA's
  connections Reno's utility of their total, -2 / (b T^2 y) (where a connection's paths share
  their round trip; pooled alpha = 2), and LIA and BALIA over several paths no utility at all
  (their price maps are no gradient): they have no allocation of their own. DCQCN has none
  here.

On single paths the optimum is found on the dual (Low and Lapsley 1999): link prices p >= 0, a
flow's price q_f = sum_l R_lf p_l, its demand x_f(q) = (w_f / q_f)^(1 / alpha), and the prices
minimise sum_f (w_f U(x_f) - q_f x_f) + c . p, whose gradient is c - R x(p) (L-BFGS-B on log
prices, bounded; converged when every link's load is within 1e-6 of its capacity or its price
is 0). Rates are scaled to units of the largest capacity while solving, so the numbers stay
near one. Connections that pool their paths have a dual that is not smooth (a connection's
demand jumps between its cheapest paths), so theirs is found in the primal by a barrier method
(`_barrier_maximum`): on the k = 8 fat-tree with four subflows per connection (512) the
proportionally fair allocation 7.6 times faster than SLSQP, the connections' totals within
6e-7 of a link of each other (`benchmarks/bench_pooled.py`).

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
round trip on a shared bottleneck, the fluid Reno (and LIA, Reno on single paths) on a parking
lot against its own utility optimum, pooled max-min and pooled alpha = 1 and 2 against closed
forms (with a subflow per connection, max-min against progressive filling), the barrier
method against SLSQP on random networks, and on a lot whose long connection also has a
private path the rest states and simulations of uncoupled subflows and of OLIA against their
own utilities' optima.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.optimize
import xarray as xr

from pathflow.analysis.subflow_rest import MULTIPATH
from pathflow.compile import Compiled, compile_scenario
from pathflow.metrics import jain_index, throughput
from pathflow.scenario import Scenario, ScenarioError

__all__ = ["Network", "alpha_fair", "dctcp_allocation", "fair_allocations", "fairness_of",
           "max_min", "multipath", "network_of", "olia_allocation", "own_allocation", "per_flow",
           "pooled_alpha_fair", "pooled_max_min", "reno_allocation"]


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


def pooled_alpha_fair(network: Network, connection: np.ndarray, alpha: float,
                      weight: np.ndarray | None = None) -> np.ndarray:
    """Per subflow the rates (bytes/s) maximising sum_c count_c w_c U_alpha(y_c) under the
    capacities, y_c the sum of connection c's subflows (`connection`: each subflow's connection
    index; `weight`: per subflow its connection's w_c, default 1): alpha-fairness between
    connections that may spread over all their paths, the allocation of resource pooling (Kelly
    and Voice 2005; Khalili et al. 2012 for OLIA). A subflow that crosses no link is left at 0.
    The split among a connection's equally priced paths is not unique: the one given is the
    barrier method's (`_barrier_maximum`)."""
    if not alpha > 0:
        raise ValueError(f"alpha: must be > 0, got {alpha}")
    used = network.routing * network.count[None, :]
    crossed = used.sum(axis=1)
    links, free = crossed > 0, used.any(axis=0)
    # rates in units of the smallest equal share of a link: near 1 where the solve starts
    scale = float(np.min(network.capacity[links] / crossed[links]))
    _, owner = np.unique(np.asarray(connection)[free], return_inverse=True)
    owner = owner.reshape(-1)
    members = np.bincount(owner)
    utility_weight = (np.ones(network.count.size) if weight is None
                      else np.asarray(weight, float) / np.max(weight))  # the same optimum
    weight = np.bincount(owner, (network.count * utility_weight)[free]) / members
    # subflows of one connection on the same links (ndiffports hashing two onto one path) are
    # one unknown, split evenly as the barrier would: a direction its system cannot tell less
    load = used[np.ix_(links, free)]
    _, first, twin = np.unique(np.vstack([owner, load]).T, axis=0, return_index=True,
                               return_inverse=True)
    twin = twin.reshape(-1)
    twins = np.bincount(twin)
    owner = owner[first]

    def utility(x: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        total = np.bincount(owner, x, members.size)
        value = np.log(total) if alpha == 1 else total ** (1 - alpha) / (1 - alpha)
        return (float(weight @ value), (weight * total**-alpha)[owner],
                alpha * weight * total ** (-alpha - 1))

    rates = np.zeros(network.count.size)
    shared = _barrier_maximum(utility, owner, load[:, first], network.capacity[links] / scale)
    rates[free] = (shared / twins)[twin] * scale
    return rates


def _barrier_maximum(utility: Callable[[np.ndarray], tuple[float, np.ndarray, np.ndarray]],
                     owner: np.ndarray, load: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """The x >= 0 maximising a concave utility of the connections' totals y_c (the sum of their
    x_r; `owner`: each x's connection) under load @ x <= capacity, from x = 1/2 (which must be
    strictly feasible). `utility(x)` gives its value, its gradient in x and per connection
    -U_c''(y_c) >= 0. A barrier method (Boyd and Vandenberghe, Convex Optimization, 11.3):
    Newton's method on t (-U) - sum log(slack) - sum log x, its steps scaled by x, t raised
    twentyfold until the duality gap's bound, (links + subflows) / t, is 1e-9 of the utility's
    size: a path left unused keeps a rate of about 1e-6 of a link's share (it falls as 1/t),
    the others are within 1e-10 (tests/test_fairness.py's closed forms). Its system grows
    ill-conditioned as t does (a full link's slack falls as 1/t), beyond what a Cholesky
    factorisation survives on a k = 8 fat-tree; it is solved by eigenvectors, leaving out those
    that rounding makes non-positive (the matrix is positive definite)."""
    x = np.full(owner.size, 0.5)
    constraints = capacity.size + owner.size
    same = owner[:, None] == owner[None, :]

    def barrier(t: float, x: np.ndarray) -> float:
        return -t * utility(x)[0] - np.sum(np.log(capacity - load @ x)) - np.sum(np.log(x))

    t = 1.0
    while True:
        for _ in range(50):
            value, gradient, curvature = utility(x)
            slack = capacity - load @ x
            grad = -t * gradient + load.T @ (1.0 / slack) - 1.0 / x
            scaled = load * x[None, :] / slack[:, None]
            within = t * curvature[owner] * x
            hessian = scaled.T @ scaled + np.eye(x.size) + np.where(same, np.outer(within, x), 0)
            values, vectors = np.linalg.eigh(hessian)  # x H x, H the barrier's Hessian
            kept = values > 0
            step = x * (vectors[:, kept] @ (vectors[:, kept].T @ (-grad * x) / values[kept]))
            decrement = -grad @ step
            if decrement < 1e-10:
                break
            shrink = load @ step
            with np.errstate(divide="ignore", invalid="ignore"):
                limit = min(np.min(np.where(step < 0, -x / step, np.inf)),
                            np.min(np.where(shrink > 0, slack / shrink, np.inf)))
            size, now = min(1.0, 0.99 * limit), barrier(t, x)
            while barrier(t, x + size * step) > now - 0.25 * size * decrement and size > 1e-12:
                size /= 2
            x = x + size * step
        if constraints / t < 1e-9 * (1.0 + abs(value)):
            return x
        t *= 20.0


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


def fair_allocations(compiled: Compiled) -> dict[str, np.ndarray]:
    """Per flow (connection) the rates (bytes/s) of the max-min and the proportionally fair
    allocations, connections of several subflows pooling their paths (`pooled_max_min`,
    `pooled_alpha_fair`)."""
    network, _, _ = network_of(compiled, subflows=True)
    if multipath(compiled):
        connection = np.asarray(compiled.problem.subflow_flow)
        rates = {"max_min": pooled_max_min(network, connection),
                 "proportional": pooled_alpha_fair(network, connection, 1.0)}
    else:
        rates = {"max_min": max_min(network), "proportional": alpha_fair(network, 1.0)}
    return {name: per_flow(compiled, values) for name, values in rates.items()}


def multipath(compiled: Compiled) -> bool:
    """Whether a connection of the scenario has several subflows."""
    return len(compiled.routes.subflow_flow) > len(compiled.routes.flows)


def per_flow(compiled: Compiled, rates: np.ndarray) -> np.ndarray:
    """Per flow (connection) the sum over its subflows of per-controller `rates`."""
    routes = compiled.routes
    return np.bincount(routes.subflow_flow, rates[np.asarray(compiled.controller_of)],
                       len(routes.flows))


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


def olia_allocation(network: Network, connection: np.ndarray, rtt: np.ndarray, packet: float,
                    ack_ratio: float = 1.0) -> np.ndarray:
    """OLIA's own allocation (bytes/s per subflow): the optimum of Reno's utility of each
    connection's total, -2 / (b tau_c^2 y_c) with y_c in packets/s, the connection pooling its
    paths (`analysis.utility`); `connection`: each subflow's connection; tau_c the mean of its
    subflows' round trips `rtt` (s). Exact where they are equal (equal-cost paths at their base
    round trips); where they differ OLIA rests at p_r tau_r^2 = 2 / (b y_c^2), which this
    approximates to their spread."""
    _, owner = np.unique(connection, return_inverse=True)
    owner = owner.reshape(-1)
    tau = (np.bincount(owner, rtt) / np.bincount(owner))[owner]
    in_packets = Network(network.routing, network.capacity / packet, network.count)
    return pooled_alpha_fair(in_packets, connection, 2.0, 2.0 / (ack_ratio * tau**2)) * packet


def own_allocation(network: Network, rtt: np.ndarray, scenario: Scenario,
                   connection: np.ndarray | None = None) -> np.ndarray | None:
    """The allocation (bytes/s, per column of `network`) that maximises the utility of the
    scenario's congestion control at round trips `rtt` (s, per column): Reno's, DCTCP's (on
    the ECN step or a ramp), uncoupled subflows' (Reno's per subflow) and OLIA's
    (`olia_allocation`); LIA's and BALIA's where every connection has one subflow (Reno's).
    `connection`: each column's connection (default: one each). None for the others, among
    them LIA and BALIA over several paths, whose rests maximise no utility
    (`analysis.utility`)."""
    transport = scenario.si.transport
    cc, packet = transport.cc, transport.mss
    ack_ratio = transport.parameters.get("ack_ratio")
    several = connection is not None and np.unique(connection).size < np.size(connection)
    if cc in ("reno", "uncoupled") or (cc in MULTIPATH and not several):
        return reno_allocation(network, rtt, packet, ack_ratio)
    if cc == "olia":
        assert connection is not None
        return olia_allocation(network, connection, rtt, packet, ack_ratio)
    if cc == "dctcp":
        return dctcp_allocation(network, rtt, packet, ack_ratio,
                                step=scenario.si.aqm.kind == "ecn_step")
    return None


def fairness_of(ds: xr.Dataset, scenario: Scenario, warmup: float | None = None
                ) -> xr.Dataset:
    """A simulated allocation (either engine's result `ds` of `scenario`) beside the max-min
    and proportionally fair ones (`fair_allocations`) and the congestion control's own at the
    run's mean round trips, where it has one (`own_allocation`); per flow (connection, bytes/s)
    and, for each, Jain's index and the distance from the simulated rates (mean absolute
    difference over the mean simulated rate)."""
    compiled = compile_scenario(scenario)
    simulated = throughput(ds, warmup).values
    predictions = fair_allocations(compiled)
    network, controller, _ = network_of(compiled, subflows=True)
    after = ds.time > (ds.attrs.get("warmup_s", 0.0) if warmup is None else warmup)
    rtt = np.zeros(network.count.size)
    rtt[controller] = ds.rtt.sel(time=after).mean("time").values
    own = own_allocation(network, rtt, scenario, np.asarray(compiled.problem.subflow_flow))
    if own is not None:
        predictions[scenario.si.transport.cc] = per_flow(compiled, own)
    out = xr.Dataset({"simulated": ("flow", simulated, {"units": "bytes/s"})},
                     coords={"flow": ds.flow.values})
    scale = float(np.mean(simulated)) or math.nan
    for name, rates in predictions.items():
        out[name] = ("flow", rates, {"units": "bytes/s"})
        out.attrs[f"distance_{name}"] = float(np.mean(np.abs(simulated - rates)) / scale)
    out.attrs["jain"] = jain_index(simulated)
    return out
