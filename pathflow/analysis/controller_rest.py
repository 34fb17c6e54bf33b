"""A controller's rest rate as a function of the signals its path returns and its round trip:
the part of the rest state (`analysis.equilibrium`) that each congestion control brings.

Model
-----
A controller reads the marked and the dropped fraction along its path (m = 1 - prod_l (1 - p_l)
over the path's links) and its round trip R = base + sum_l q_l / C_l. Held at those:

- **Reno and DCTCP** (models/reno.py, models/dctcp.py, `reaction = "mean"`: Misra, Gong and
  Towsley 2000; Alizadeh, Javanmard and Prabhakar 2011) with ACK ratio b stop moving where the
  window's growth, 1 / (b R) per second, equals its mean-field cuts, W c lambda(p) per kind of
  signal with lambda(p) = min(W p, 1) / R and c = 1 - the model's own reaction factor (Reno
  1/2; DCTCP alpha / 2 on a mark, alpha at rest being the mean marked fraction):
  1 / b = W sum_kinds c min(W p, 1). Reno below the cap: W = sqrt(2 / (b p)); DCTCP, whose
  cap holds at rest: W = 2 / (b p). Never below `min_cwnd`. The flow sends x = W / R.
- **DCQCN** (models/dcqcn.py, Zhu et al. 2016): at a given R_C and p the model's own
  derivative, affine in alpha, R_T and the counters since the last cut, gives the state where
  all but dR_T/dt vanish; R_C rests where that drift changes sign (`dcqcn_rest_rate`: without
  hyper increase alpha a^2 = tau^2 R_AI R_C (c + e)(b + d), the model docstring's symbols), or
  where R_T reaches the line rate, within [min_rate, line_rate] for the path's p; the round
  trip does not enter.
- **dcqcn+static** (models/dcqcn_static.py: DCQCN with its timer and additive step set from
  the incast's size): DCQCN's rest rate at the DCQCN parameters the model's own conversion
  (`DcqcnStatic.as_dcqcn`) gives its derivative.
- **DCQCN+** (models/dcqcn_plus.py, docs/dcqcn_plus.md): dm/dt = dalpha/dt = dR_T/dt =
  dR_C/dt = 0 leave R_C alpha c^2 = E^2 inc (cuts c, timer expiries E, the mean step inc at
  the mean stage m = E / c; `dcqcn_plus_rest_rate` derives it), or R_C alpha c = (line_rate -
  R_C) E where R_T rests at the line rate. c and E take the CNP period tau_c = max(cnp_interval,
  n / cnp_capacity), n the flows the receiver's NIC takes (all of them send at rest), computed
  by the model's own functions (`models.dcqcn_plus.feedback`); the round trip does not enter.

Under the ECN step the signal is the fraction theta of the time marked, during which every
packet is: 1 / b = W c theta (DCTCP: W = 2 / (b theta^2), the fixed point alpha* =
sqrt(2 / W*) of Alizadeh, Javanmard and Prabhakar 2011).

Scope and limitations
---------------------
Reno and DCTCP in their mean-field form only (the per-window form rests in a sawtooth); DCQCN
without the NIC-wide CNP capacity (refused when set, for dcqcn+static too); MPTCP's coupled
windows are not a function of their own signals (`analysis.subflow_rest`).

Validation
----------
tests/test_closed_forms.py: `dcqcn_rest_rate` at the sympy fixed point's p* (the CoNEXT 2016
parameters, 2 and 10 flows) gives C / N (1e-8). tests/test_equilibrium.py: Reno's window
against p* = 2 / (b W*^2) on one RED bottleneck. tests/test_equilibrium_dcqcn_plus.py:
`dcqcn_plus_rest_rate` against DCQCN+'s own ODE integrated to rest by scipy (1e-6; measured
1e-13) with tau_c set by cnp_interval and by n / cnp_capacity and R_T at the line rate, and
dcqcn+static's rest rate against `dcqcn_rest_rate` at the timer and step its docstring states.

References
----------
V. Misra, W.-B. Gong, D. Towsley, "Fluid-based analysis of a network of AQM routers supporting
TCP flows with an application to RED", SIGCOMM 2000.
M. Alizadeh, A. Javanmard, B. Prabhakar, "Analysis of DCTCP: stability, convergence, and
fairness", SIGMETRICS 2011.
Y. Zhu, M. Ghobadi, V. Misra, J. Padhye, "ECN or delay: lessons learnt from analysis of DCQCN
and TIMELY", CoNEXT 2016.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from pathflow.analysis.subflow_rest import MULTIPATH
from pathflow.compile import Compiled
from pathflow.models.base import Signals, receiver_sum
from pathflow.models.dcqcn import TINY, Dcqcn, DcqcnParams
from pathflow.models.dcqcn_plus import DcqcnPlusParams, feedback, increase_step
from pathflow.scenario import ScenarioError

__all__ = ["RestRate", "controller_rest_rate", "dcqcn_plus_rest_rate", "dcqcn_rest_rate"]


RestRate = Callable[[np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]
"""(marked fraction, dropped fraction, round trip R in s) per controller -> (rate in bytes/s,
window in packets or NaN for a rate-based sender); each (..., controllers), a batch of
states at once."""


def controller_rest_rate(compiled: Compiled, step: bool) -> RestRate:
    """The controllers' rest rate as a function of their path's signals and round trip;
    `step`: the links mark on the ECN step (the signal is the fraction of the time marked)."""
    model, params = compiled.model, compiled.problem.params
    packet = np.asarray(compiled.problem.packet, float)
    if model.name in ("reno", "dctcp") and getattr(model, "reaction", None) == "mean":
        ack_ratio, floor = (np.asarray(v, float) for v in (params.ack_ratio, params.min_cwnd))

        def window_based(mark: np.ndarray, loss: np.ndarray, rtt: np.ndarray
                         ) -> tuple[np.ndarray, np.ndarray]:
            # the model's own reactions at rest: DCTCP's alpha is the mean marked fraction
            state = {"cwnd": np.ones_like(mark), "alpha": mark}
            cut_mark = 1.0 - np.asarray(model.mark_factor(state, None), float)
            cut_loss = 1.0 - np.asarray(model.loss_factor(state, None), float)
            window = np.maximum(_balanced_window(mark, loss, cut_mark, cut_loss, ack_ratio,
                                                 step), floor)
            return window / rtt * packet, window

        return window_based
    if model.name in ("dcqcn", "dcqcn+static"):
        # dcqcn+static is DCQCN with the timer and additive step the incast's size sets: its
        # rest rate is DCQCN's at the parameters the model's own conversion gives its
        # derivative, so that the rest state cannot read another timer or step than the
        # simulation runs with
        used = model.as_dcqcn(params) if model.name == "dcqcn+static" else params
        if np.isfinite(np.asarray(used.cnp_capacity, float)).any():
            raise ScenarioError("transport.cnp_capacity: the equilibrium leaves the NIC-wide CNP "
                                "capacity out; unset it")

        def dcqcn(mark: np.ndarray, loss: np.ndarray, rtt: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
            return dcqcn_rest_rate(mark, used) * packet, np.full(mark.shape, np.nan)

        return _by_row(dcqcn)
    if model.name == "dcqcn+":
        sharing = _receiver_flows(compiled)

        def dcqcn_plus(mark: np.ndarray, loss: np.ndarray, rtt: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray]:
            return (dcqcn_plus_rest_rate(mark, sharing, params) * packet,
                    np.full(mark.shape, np.nan))

        return _by_row(dcqcn_plus)
    raise ScenarioError(f"transport.cc: the equilibrium is derived for reno and dctcp "
                        f"(reaction = 'mean'), dcqcn, dcqcn+, dcqcn+static and the MPTCP "
                        f"family ({', '.join(MULTIPATH)}) so far, not {model.name!r} "
                        f"(reaction {getattr(model, 'reaction', None)!r})")


def _by_row(rest_rate: RestRate) -> RestRate:
    """`rest_rate` applied to each state of a batch in turn, so that its compiled bisection
    sees one shape (one compilation), whatever the batch."""

    def rows(mark: np.ndarray, loss: np.ndarray, rtt: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray]:
        if mark.ndim <= 1:
            return rest_rate(mark, loss, rtt)
        rtt = np.broadcast_to(rtt, mark.shape)
        done = [rest_rate(*row) for row in zip(mark, loss, rtt, strict=True)]
        return np.array([rate for rate, _ in done]), np.array([window for _, window in done])

    return rows


def _balanced_window(mark: np.ndarray, loss: np.ndarray, cut_mark: np.ndarray,
                     cut_loss: np.ndarray, ack_ratio: np.ndarray, step: bool) -> np.ndarray:
    """The window W (packets) at which growth, 1 / (b R) per second, balances the mean-field
    cuts, sum over kinds of W cut lambda(p) with lambda(p) = min(W p, 1) / R (`models.window`):

        1 / b = W (cut_mark min(W m, 1) + cut_loss min(W l, 1))

    (Reno below the cap: W = sqrt(2 / (b p)), Misra, Gong and Towsley 2000). Under the ECN
    step the signal is the fraction theta of the time marked, during which lambda = 1 / R:
    1 / b = W cut theta (DCTCP, cut = alpha / 2 = theta / 2: W = 2 / (b theta^2), Alizadeh,
    Javanmard and Prabhakar 2011). inf where nothing signals."""
    target = 1.0 / ack_ratio
    with np.errstate(divide="ignore", invalid="ignore"):
        if step:
            return target / (cut_mark * mark + cut_loss * loss)
        # the right side rises with W: quadratic below the breakpoints 1/m and 1/l, linear
        # past both; its root lies in one of the three intervals
        breaks = np.sort(np.stack([1.0 / mark, 1.0 / loss]), axis=0)
        window = np.full(mark.shape, np.inf)
        for low, high in ((0.0, breaks[0]), (breaks[0], breaks[1]), (breaks[1], np.inf)):
            capped_mark, capped_loss = 1.0 / mark <= low, 1.0 / loss <= low
            square = (np.where(capped_mark, 0.0, cut_mark * mark)
                      + np.where(capped_loss, 0.0, cut_loss * loss))
            linear = np.where(capped_mark, cut_mark, 0.0) + np.where(capped_loss, cut_loss, 0.0)
            root = 2 * target / (linear + np.sqrt(linear**2 + 4 * square * target))
            window = np.where((root >= low) & (root <= high) & np.isinf(window), root, window)
        return window


def dcqcn_rest_rate(p: np.ndarray | float, params: DcqcnParams) -> np.ndarray:
    """DCQCN's current rate R_C (packets/s) at rest under path signal p, per controller (p and
    the fields of `params`, the model's, broadcast together), from the model's own derivative
    (models/dcqcn.py).

    With p held and R_C* = R_C, four of the five derivatives are affine in the other four
    variables: dalpha/dt in alpha, d(since_cut)/dt and d(sent_since_cut)/dt in themselves,
    dR_C/dt in alpha and R_T. So at any R_C one Newton step solves them exactly (alpha = 1 -
    (1-p)^(tau' R_C), the time and packets since a cut tau / a and R_C tau / a, R_T - R_C =
    R_C alpha a / (tau R_C* (b + d)) in the model docstring's symbols), and R_C rests where
    the target's drift there, dR_T/dt = I - (R_T - R_C) a / tau (I: its additive and hyper
    increase), changes sign: R_C is too fast where the drift is negative, or where R_T would
    pass the line rate, at which the model's projection holds it (then the rest is R_T =
    line_rate with dR_C/dt = 0). Found by bisection in log R_C over [min_rate, line_rate] to
    float64's precision: the line rate where nothing marks (p = 0) or R_C is never too
    fast, min_rate where it is too fast even there. The round trip does not enter; the
    NIC-wide CNP capacity is taken as unlimited (the caller refuses it set)."""
    p = np.asarray(p, float)
    shape = np.broadcast_shapes(p.shape, *(np.shape(v) for v in params))
    p = np.broadcast_to(p, shape).reshape(-1)
    flat = DcqcnParams(*(np.broadcast_to(np.asarray(v, float), shape).reshape(-1)
                         for v in params))
    rate = np.asarray(_dcqcn_bisection(jnp.asarray(p), jax.tree.map(jnp.asarray, flat)))
    return np.where(p > 0, rate, flat.line_rate).reshape(shape)


# the variables solved for at a given R_C, and the derivatives that vanish with them
_DCQCN_HELD = ("alpha", "since_cut", "sent_since_cut", "target_rate")
_DCQCN_ZERO = ("alpha", "since_cut", "sent_since_cut", "current_rate")


@jax.jit
def _dcqcn_bisection(p: jax.Array, params: DcqcnParams) -> jax.Array:
    """`dcqcn_rest_rate`'s predicate and bisection."""
    model, own = Dcqcn(), jnp.arange(p.size)

    def too_fast(rate: jax.Array) -> jax.Array:
        signals = Signals(jnp.ones_like(p), p, jnp.zeros_like(p), rate, jnp.ones_like(p), own,
                          own, jnp.ones_like(p))
        start = {**model.initial_state(params), "current_rate": rate}

        def drifts(held: jax.Array) -> jax.Array:  # (4, controllers)
            slope = model.derivative({**start, **dict(zip(_DCQCN_HELD, held, strict=True))},
                                     signals, params)
            return jnp.stack([slope[key] for key in _DCQCN_ZERO])

        y = jnp.stack([start[key] for key in _DCQCN_HELD])
        # each controller's 4 x 4 Jacobian: the derivatives along each variable in turn
        jacobian = jnp.stack([jax.jvp(drifts, (y,), (jnp.zeros_like(y).at[k].set(1.0),))[1]
                              for k in range(len(_DCQCN_HELD))], axis=-1)
        step = jnp.linalg.solve(jnp.moveaxis(jacobian, 1, 0), -drifts(y).T[..., None])
        held = dict(zip(_DCQCN_HELD, y + step[..., 0].T, strict=True))
        slope = model.derivative({**start, **held}, signals, params)
        return (slope["target_rate"] < 0) | (held["target_rate"] > params.line_rate)

    return _bisection(too_fast, params.min_rate, params.line_rate)


def dcqcn_plus_rest_rate(p: np.ndarray, sharing: np.ndarray, params: DcqcnPlusParams
                         ) -> np.ndarray:
    """DCQCN+'s current rate R_C (packets/s) at rest under path signal p, per controller, its
    receiver's NIC taking `sharing` flows (n, which sets the CNP period tau_c); `params` the
    model's, one entry per controller.

    With p held and R_C* = R_C (at rest the delayed rate is the rate), c, E and alpha's
    target are the model's own (`models.dcqcn_plus.feedback`: cuts c = a / tau_c, timer
    expiries E, K = lambda max(tau_c, 1 / R_C)), and the four derivatives vanish where

        dalpha/dt = 0:  alpha = 1 - (1-p)^(tau' R_C)
        dm/dt = 0:      m = E / c                      (so q = m / (1 + m))
        dR_C/dt = 0:    R_T - R_C = R_C alpha c / E
        dR_T/dt = 0:    (R_T - R_C) c = E inc(q, R_C)  (`models.dcqcn_plus.increase_step`)

    which leave one equation in R_C:  R_C alpha c^2 = E^2 inc. Its left side is the cuts'
    pull, the right the timer's push; the rate is too fast where the left is the larger.
    R_T is held at the line rate by the model's projection: where R_C (1 + alpha c / E)
    would pass it, the rest is R_T = line_rate with dR_C/dt = 0, R_C alpha c = (line_rate -
    R_C) E, the push on R_T (E inc > (line_rate - R_C) c) held by the bound. Either way R_C
    is where "too fast" (R_C alpha c^2 > E^2 inc, or R_C (1 + alpha c / E) > line_rate)
    starts, found by bisection in log R_C over [min_rate, line_rate] to float64's precision:
    min_rate where a flow is too fast even there (marking that holds every flow at its floor),
    line_rate where never (no marks). On DCQCN's marking at 10 and 40 Gb/s the predicate turns
    once along that range (scanned for p from 1e-5 to 0.5; the tests check the root against
    the model's own ODE integrated to rest)."""
    p, sharing = (np.asarray(v, float) for v in (p, sharing))
    params = DcqcnPlusParams(*(np.broadcast_to(np.asarray(v, float), p.shape) for v in params))
    return np.asarray(_dcqcn_plus_bisection(jnp.asarray(p), jnp.asarray(sharing),
                                            jax.tree.map(jnp.asarray, params)))


@jax.jit
def _dcqcn_plus_bisection(p: jax.Array, sharing: jax.Array, params: DcqcnPlusParams
                          ) -> jax.Array:
    """`dcqcn_plus_rest_rate`'s bisection: 64 halvings of [log min_rate, log line_rate]."""

    def too_fast(rate: jax.Array) -> jax.Array:
        cuts, alpha, expiries = feedback(rate, p, rate, sharing, params)
        stage = jnp.maximum(expiries / jnp.maximum(cuts, TINY), TINY)  # m, floored as the model
        step = increase_step(-jnp.log1p(1.0 / stage), rate, params.stages, params.rl)
        # products, not ratios: E underflows to 0 under heavy marking
        return ((rate * alpha * cuts**2 > expiries**2 * step)
                | (rate * alpha * cuts > (params.line_rate - rate) * expiries))

    return _bisection(too_fast, params.min_rate, params.line_rate)


def _bisection(too_fast: Callable[[jax.Array], jax.Array], min_rate: jax.Array,
               line_rate: jax.Array) -> jax.Array:
    """Per controller, the rate in [min_rate, line_rate] where `too_fast` turns true: 64
    halvings of [log min_rate, log line_rate]; min_rate where it is true there already, the
    line rate where it never is."""

    def halve(_: int, bounds: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        low, high = bounds
        middle = 0.5 * (low + high)
        fast = too_fast(jnp.exp(middle))
        return jnp.where(fast, low, middle), jnp.where(fast, middle, high)

    low, high = jax.lax.fori_loop(0, 64, halve, (jnp.log(min_rate), jnp.log(line_rate)))
    rate = jnp.clip(jnp.exp(0.5 * (low + high)), min_rate, line_rate)
    # the bounds themselves, exactly: exp(log(x)) need not be x
    rate = jnp.where(too_fast(min_rate), min_rate, rate)
    return jnp.where(too_fast(line_rate), rate, line_rate)


def _receiver_flows(compiled: Compiled) -> np.ndarray:
    """Per controller, the flows its receiver's NIC takes (n): every flow sends at rest,
    counted by the model's own rule (`models.base.receiver_sum` over the link each path
    ends on, the solver's receiver)."""
    problem = compiled.problem
    count = np.asarray(problem.count, float)
    links = np.asarray(problem.queues.capacity).size - 1  # the last is the padding link
    last = np.zeros(count.size, int)
    for path, hops in enumerate(np.asarray(problem.path_hops)):
        real = hops[hops < links]
        last[np.asarray(problem.path_subflow)[path]] = real[-1] if real.size else links
    receiver = jnp.asarray(np.unique(last, return_inverse=True)[1].reshape(-1))
    ones = jnp.ones(count.size)
    signals = Signals(ones, ones, ones, ones, ones, receiver, receiver, jnp.asarray(count))
    return np.asarray(receiver_sum(ones, signals))
