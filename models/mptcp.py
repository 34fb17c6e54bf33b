"""MPTCP congestion control: LIA, OLIA and BALIA coupling, and uncoupled subflows.

Model
-----
A connection (the Dataset's `flow`) sends on n subflows r, each a window-based TCP sender with
its own window w_r, round trip tau_r and path (`models.window`: slow start, delayed ACKs, one
reaction per window or the mean-field cut, the window floor). The coupling lives in congestion
avoidance, where the window grows by I_r per window-increase event (an ACK, or an acknowledged
segment with `ack_ratio` b = 1), x_r = w_r / tau_r of them per second:

    dw_r/dt = x_r I_r / b  -  w_r (1 - f_r) lambda(p_r)       lambda(p) = min(x_r(t-R) p, 1/R)

with the decrease factor f_r on a loss (or an ECN echo, which Linux treats alike). Sums and
maxima run over the subflows of one connection (`models.base.flow_sum`, `flow_max`):

- **LIA** (RFC 6356, "coupled"): I_r = min(a / w_tot, 1 / w_r),
  a = w_tot max_k(w_k / tau_k^2) / (sum_k w_k / tau_k)^2; f_r = 1/2.
- **OLIA** (Khalili et al. 2012): I_r = (w_r / tau_r^2) / (sum_k w_k / tau_k)^2 + eps_r / w_r,
  f_r = 1/2. M is the set of subflows with the largest window, B the set with the largest
  l_k / tau_k^2, l_k the packets acknowledged between losses (the larger of the interval since
  the last loss and the one before it, as the authors' Linux module keeps `mptcp_loss1..3`);
  eps_r = 1 / (n |B \\ M|) on B \\ M, -1 / (n |M|) on M when B \\ M is not empty, else 0; n is
  the number of subflows. eps moves window from the largest subflows to the best ones, so OLIA
  can be Pareto-optimal where LIA is not. In the mean-field form losses have no instants:
  l_r then follows dl/dt = x_r(t-R) - lambda(p_r) l_r, whose equilibrium x / lambda is 1 / p_r,
  the mean number of packets between losses.
- **BALIA** (Peng, Walid, Hwang, Low 2016): with x_k = w_k / tau_k and
  alpha_r = max_k x_k / x_r, I_r = x_r / (tau_r (sum_k x_k)^2) (1 + alpha_r)/2 (4 + alpha_r)/5
  and f_r = 1 - min(alpha_r, 1.5) / 2.
- **uncoupled**: every subflow a Reno (I_r = 1 / w_r, f_r = 1/2): n times one TCP's share at a
  shared bottleneck, the baseline the coupled algorithms are measured against.

With one subflow each is Reno exactly: a / w_tot = 1 / w, OLIA's first term is 1 / w and its
sets coincide (eps = 0), BALIA's alpha is 1. Slow start is per subflow and uncoupled, as in
Linux (`tcp_slow_start` below ssthresh).

Checked against the authors' Linux code (multipath-tcp.org kernel, net/mptcp/mptcp_coupled.c,
mptcp_olia.c, mptcp_balia.c): per-ACK increases as above (OLIA: `inc_num / inc_den` = eps / w +
w / (tau^2 (sum w/tau)^2); BALIA: one segment per `ai` ACKs, ai = 10 w_r (sum x)^2 /
((x_r + max x)(4 x_r + max x)), the same I_r); decreases by Reno's ssthresh (LIA, OLIA) and by
`md` = w/2 min(alpha, 1.5) (BALIA). Two details of the kernel are not modelled: BALIA's
integer alpha (`div64_u64(max_rate, rate)` floors it, so 1 <= alpha < 2 cuts by one half) and
OLIA's use of ssthresh in place of the inflated window during fast recovery.

Parameters
----------
Those of `models.window` (ack_ratio b = 1, init_cwnd 10 packets, min_cwnd 2 packets, ssthresh
inf) and its reaction form (default ``mean``, as Reno's: a connection with one subflow is Reno).
The number of subflows and their paths are `[transport] subflows` and `path_manager`.

Scope and limitations
---------------------
Loss-based (an ECN echo cuts as a loss does). No retransmission timeouts, no receive-window or
connection-level (meta) buffer limit, no scheduler: each subflow sends what its own window
allows. Fluid subflows with equal paths are synchronised; OLIA's sets then coincide exactly (a
tie), as they would in the kernel's integer arithmetic.

Validation
----------
tests/test_mptcp.py: one subflow equals Reno; RFC 6356's goals as properties over capacities,
round trips and subflow counts (improve throughput over disjoint paths; do no harm at a shared
bottleneck, where uncoupled subflows take about n shares; balance congestion away from a loaded
path), with the capacity and queue invariants. Validation cases: `olia_vs_lia` (the closed
forms of Khalili et al.'s analysis, both engines), `mptcp_subflows` (permutation throughput
against subflows on k = 4 and k = 8 fat-trees, fluid against packet level within 5 % of
optimal), `silent_network` (seed 002's Mininet measurements) and `hamiltonian_mesh` (seed 004).

References
----------
C. Raiciu, M. Handley, D. Wischik, "Coupled Congestion Control for Multipath Transport
Protocols", RFC 6356, 2011.
R. Khalili, N. Gast, M. Popovic, J.-Y. Le Boudec, "MPTCP is not Pareto-optimal: performance
issues and a possible solution", CoNEXT 2012 (IEEE/ACM ToN 2013).
Q. Peng, A. Walid, J. Hwang, S. H. Low, "Multipath TCP: analysis, design and implementation",
IEEE/ACM ToN 24(1), 2016.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import jax.numpy as jnp

from pathflow.models.base import Array, Signals, State, flow_max, flow_sum
from pathflow.models.window import (
    WINDOW_PARAMETERS,
    WindowControl,
    WindowParams,
    event_rate,
    reaction_choice,
)

__all__ = ["Balia", "Lia", "Olia", "Uncoupled"]

_PARAMETERS = (*WINDOW_PARAMETERS, reaction_choice("mean"))


@dataclass(frozen=True)
class _Multipath(WindowControl):
    """A multipath TCP: Reno's reactions unless a subclass couples them."""

    parameters = _PARAMETERS
    reaction: str = "mean"

    def mark_factor(self, state: State, signals: Signals) -> Array | float:
        return self.loss_factor(state, signals)  # Linux: an ECN echo sets ssthresh as a loss


@dataclass(frozen=True)
class Uncoupled(_Multipath):
    name = "uncoupled"


@dataclass(frozen=True)
class Lia(_Multipath):
    name = "lia"

    def avoidance(self, state: State, signals: Signals) -> Array:
        w, tau = state["cwnd"], signals.rtt
        total = flow_sum(w / tau, signals)
        # W times min(a / w_tot, 1 / W), with a / w_tot = max(w / tau^2) / (sum w / tau)^2
        return jnp.minimum(w * flow_max(w / tau**2, signals) / total**2, 1.0)


@dataclass(frozen=True)
class Olia(_Multipath):
    """`sets_width`: 0 (the default) for the sharp sets of the Linux module; a positive width
    makes membership of M and B fade over that relative distance from the largest window and
    the best quality (exp(-(max - v) / (width max))), a regularisation through which the
    analysis finds rest states that lie in sliding modes of the sharp sets (Filippov;
    `analysis.subflow_rest`)."""

    name = "olia"
    state_units: ClassVar[dict[str, str]] = {**WindowControl.state_units,
                                             "since_loss": "packets", "last_interval": "packets"}
    sets_width: float = 0.0

    def _member(self, values: Array, signals: Signals) -> Array:
        """Membership of the set of the largest `values` of each connection, 0 or 1 (sharp)
        or fading with the distance from the largest (`sets_width`)."""
        top = flow_max(values, signals)
        if self.sets_width <= 0:
            return (values >= top).astype(values.dtype)
        return jnp.exp(-(top - values) / (self.sets_width * top))

    def avoidance(self, state: State, signals: Signals) -> Array:
        w, tau = state["cwnd"], signals.rtt
        total = flow_sum(w / tau, signals)
        largest = self._member(w, signals)
        quality = jnp.maximum(state["since_loss"], state["last_interval"]) / tau**2
        best = self._member(quality, signals) * (1.0 - largest)  # B \ M
        n = flow_sum(jnp.ones_like(w), signals)
        n_best = flow_sum(best, signals)
        n_largest = flow_sum(largest, signals)
        # eps moves window from M to B \ M where B \ M is not empty (it sums to 0)
        epsilon = (best / (n * jnp.maximum(n_best, 1.0))
                   - jnp.minimum(n_best, 1.0) * largest / (n * n_largest))
        # W times the per-event increase (w / tau^2) / (sum w / tau)^2 + eps / w
        return (w / tau) ** 2 / total**2 + epsilon

    def extra_state(self, params: WindowParams) -> State:
        zeros = jnp.zeros_like(params.init_cwnd)
        return {"since_loss": zeros, "last_interval": zeros}

    def extra_derivative(self, state: State, signals: Signals, params: WindowParams) -> State:
        acked = signals.acked_rate
        if self.reaction == "mean":
            congestion = 1.0 - (1.0 - signals.mark) * (1.0 - signals.loss)
            losses = event_rate(congestion, acked, signals.rtt)
            return {"since_loss": acked - losses * state["since_loss"],
                    "last_interval": jnp.zeros_like(acked)}
        return {"since_loss": acked, "last_interval": jnp.zeros_like(acked)}

    def extra_project(self, state: State, signals: Signals, cut: Array) -> State:
        return {"since_loss": jnp.where(cut, 0.0, state["since_loss"]),
                "last_interval": jnp.where(cut, state["since_loss"], state["last_interval"])}


@dataclass(frozen=True)
class Balia(_Multipath):
    name = "balia"

    @staticmethod
    def _alpha(state: State, signals: Signals) -> tuple[Array, Array]:
        """(x_r, alpha_r = max_k x_k / x_r), rates in packets/s."""
        x = state["cwnd"] / signals.rtt
        return x, flow_max(x, signals) / x

    def avoidance(self, state: State, signals: Signals) -> Array:
        x, alpha = self._alpha(state, signals)
        share = x / flow_sum(x, signals)
        # W times x_r / (tau_r (sum x)^2) (1 + alpha)/2 (4 + alpha)/5, with W x_r / tau_r = x_r^2
        return share**2 * (1.0 + alpha) * (4.0 + alpha) / 10.0

    def loss_factor(self, state: State, signals: Signals) -> Array:
        _, alpha = self._alpha(state, signals)
        return 1.0 - jnp.minimum(alpha, 1.5) / 2.0
