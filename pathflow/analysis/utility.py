"""Whether a window-based control's rest states maximise a utility, read off the model's own
code (issue 12, item 1: the network utility maximisation view of Reno and the MPTCP family).

Model
-----
In the mean-field form (`reaction = "mean"`) a subflow r in congestion avoidance rests where
its window's drift, the model's own `derivative` D_r, vanishes: growth A_r / (b R_r) against
the cuts w_r (1 - f_r) x_r p_r, p_r the fraction of its packets marked or dropped, its path's
price (the sum of its links' to first order). Below the cap of one cut per round trip D_r is
affine in p_r, so with the round trips held the rest fixes every subflow's price as a function
of the rates x of its connection's subflows, the *price map*

    phi_r(x) = D_r(x, p = 0) / (-dD_r/dp_r)                      (exact: D_r is affine in p_r)

A rest that uses every subflow of each connection c is the optimum of max sum_c U_c(x_c) under
the capacities R x <= c, with p the links' prices (Kelly, Maulloo and Tan 1998), exactly where
phi_c = grad U_c: the optimum's KKT conditions. A map is a gradient on a convex set if and only
if its Jacobian d phi_r / d x_k is symmetric, so the Jacobian (by JAX, through the model's
`derivative`) decides whether the control has a utility at all (`asymmetry`). For the models
of `models.mptcp` at equal round trips tau and ACK ratio b, with y the connection's total rate:

- **Reno, uncoupled subflows**: phi_r = 2 / (b tau_r^2 x_r^2), diagonal: U = sum_r -2 / (b
  tau_r^2 x_r), Reno's utility per subflow (`reno_utility`).
- **OLIA**: phi_r = 2 / (b tau_r^2 y^2) where its eps term vanishes (the best subflows among the
  largest; at its rests eps only moves window between equally good paths): symmetric exactly
  when the connection's paths share their round trip, and then U_c = -2 / (b tau^2 y), Reno's
  utility of the connection's total (`olia_utility`): the allocation of full resource pooling
  (Kelly and Voice 2005), Pareto-optimal as Khalili et al. (2012) designed it. With round trips
  that differ the used paths rest at p_r tau_r^2 = 2 / (b y^2), which no utility of the rates
  gives (the prices weigh paths by their round trips).
- **LIA**: phi_r = 2 max_k x_k / (b tau^2 y^2 x_r): with x_1 > x_2, d phi_1 / d x_2 = -4 / (b
  tau^2 y^3) while d phi_2 / d x_1 = 2 (x_2 - x_1) / (b tau^2 x_2 y^3), equal only on the line
  x_1 = 3 x_2: no utility (Peng, Walid, Hwang and Low 2016 discuss which MPTCP designs have
  one).
- **BALIA**: asymmetric too (its increase and its decrease read alpha_r = max_k x_k / x_r); no
  utility (its authors, Peng et al., designed it for TCP-friendliness and responsiveness).

With one subflow each of them is Reno, whose utility the single-path network optimum is
(`analysis.fairness.reno_allocation`).

Scope and limitations
---------------------
Window-based models in the mean-field form (the per-window form rests in a sawtooth), in
congestion avoidance, below the cap of one cut per round trip (x_r p_r < 1 / R_r); the round
trips are held (a queue that lengthens them moves the optimum; compare at the run's own).
Prices add over a path's links to first order in p. The symmetry is a local test at the point
given: a map symmetric at one point may not be a gradient (LIA's line above); one asymmetric
anywhere is not.

Validated by tests/test_utility.py: the price maps from the models' code against the closed
forms above (uncoupled, OLIA, LIA, BALIA), the gradients of Reno's and OLIA's utilities, LIA's
Jacobian at x_1 = 2 x_2 (d phi_2 / d x_1 half of d phi_1 / d x_2), and through
tests/test_fairness.py the optimum of OLIA's and uncoupled subflows' utilities against their
fluid rest states and simulations.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from pathflow.compile import Compiled
from pathflow.models.base import Signals, State
from pathflow.models.window import WindowControl, WindowParams

__all__ = ["asymmetry", "olia_utility", "price_map", "reno_utility", "rest_asymmetry"]


def price_map(model: WindowControl, params: WindowParams, rates: jax.Array, rtt: jax.Array,
              connection: jax.Array, extra: State | None = None) -> jax.Array:
    """Per subflow the price (fraction of its packets marked) at which its window rests, at
    the subflows' `rates` (packets/s) and round trips `rtt` (s); `connection`: each subflow's
    connection index; `extra`: the model's extra state (OLIA's packets since a loss; default
    its initial state). See the module docstring."""
    size = rates.shape[0]
    window = rates * rtt
    state = {**{key: jnp.asarray(value, float) + jnp.zeros(size)
                for key, value in model.initial_state(params).items()},
             "cwnd": window, "slow_start": jnp.zeros(size), **(extra or {})}

    def drift(price: jax.Array) -> jax.Array:
        signals = Signals(rtt, price, jnp.zeros(size), rates, jnp.ones(size), connection)
        return model.derivative(state, signals, params)["cwnd"]

    # each subflow's drift reads its own price alone: one directional derivative gives them all
    at_zero, slope = jax.jvp(drift, (jnp.zeros(size),), (jnp.ones(size),))
    return at_zero / -slope


def asymmetry(model: WindowControl, params: WindowParams, rates: np.ndarray, rtt: np.ndarray,
              connection: np.ndarray, extra: State | None = None) -> float:
    """How far the price map's Jacobian J in the rates is from symmetric at `rates`: the
    largest |J_rk - J_kr| / (|J_rk| + |J_kr|) over the pairs of subflows that move each other's
    prices (0 where a utility may exist, rounding apart; 1 where one moves the other's price
    and not the reverse; see the module docstring). Arguments as `price_map`."""
    rtt, connection = jnp.asarray(rtt, float), jnp.asarray(connection)
    jacobian = np.asarray(jax.jacfwd(lambda x: price_map(model, params, x, rtt, connection,
                                                         extra))(jnp.asarray(rates, float)))
    both = np.abs(jacobian) + np.abs(jacobian.T)
    coupled = both > 1e-9 * np.max(both, initial=0.0)  # pairs that move each other
    if not coupled.any():
        return 0.0
    return float(np.max(np.abs(jacobian - jacobian.T)[coupled] / both[coupled]))


def reno_utility(rtt: jax.Array, ack_ratio: float = 1.0) -> Callable[[jax.Array], jax.Array]:
    """U(x) = sum_r -2 / (b tau_r^2 x_r), x in packets/s: Reno's, per subflow (uncoupled)."""
    return lambda rates: jnp.sum(-2.0 / (ack_ratio * rtt**2 * rates))


def olia_utility(rtt: float, ack_ratio: float = 1.0) -> Callable[[jax.Array], jax.Array]:
    """U(x) = -2 / (b tau^2 sum_r x_r), x in packets/s: Reno's of the connection's total, for
    a connection whose paths share the round trip `rtt` (s)."""
    return lambda rates: -2.0 / (ack_ratio * rtt**2 * jnp.sum(rates))


def rest_asymmetry(compiled: Compiled, rate: np.ndarray, rtt: np.ndarray) -> float:
    """`asymmetry` of a compiled scenario's window-based model at per-controller rates
    (bytes/s) and round trips (s), as `analysis.equilibrium.rest_state` gives them."""
    problem = compiled.problem
    params = jax.tree.map(jnp.asarray, problem.params)
    packets = np.asarray(rate, float) / np.asarray(problem.packet, float)
    return asymmetry(compiled.model, params, packets, rtt, np.asarray(problem.subflow_flow))
