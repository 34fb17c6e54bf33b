"""TCP window dynamics shared by the loss- and mark-based models (Reno, DCTCP).

Model
-----
A window W (packets) grows by one packet per window-increase event, and a receiver that
acknowledges every b-th segment (delayed ACKs, b = `ack_ratio`) produces W/b such events per round
trip (ns-3's NewReno counts ACKs, b = 2; Linux counts acknowledged segments, b = 1):

    slow start:           dW/dt = W / (b R)
    congestion avoidance: dW/dt = 1 / (b R)

Congestion signals (losses, ECN echoes) arrive with the acknowledgements at the rate x(t-R) p(t-R)
per second, x the sending rate in packets/s and p the fraction of packets dropped or marked. Each
reaction multiplies W by a factor f (Reno: 1/2; DCTCP: 1 - alpha/2 on marks, 1/2 on losses).
Real stacks react at most once per window (NewReno's recovery, DCTCP's and ECN's CWR state). Two
forms of that rule are offered (`[transport] reaction`):

- ``mean`` (mean field; Misra, Gong, Towsley 2000 and Alizadeh, Javanmard, Prabhakar 2011): the
  expected drift, with the event rate capped at one per round trip,

      dW/dt = increase - sum_kinds W (1 - f) lambda(p),   lambda(p) = min(x(t-R) p(t-R), 1/R)

  Below the cap this is exactly the MGT model, equilibrium p = 2 / (b W^2).
- ``window`` (per window, hybrid): signals accumulate a credit x(t-R) p(t-R) dt; when it reaches
  one packet and the flow is not in CWR, W jumps to f W and the flow ignores signals for one
  round trip (CWR). As Linux (`tcp_cong_control`: no growth while `tcp_in_cwnd_reduction`;
  `tcp_ack` handles an echo before it may raise the window), the window grows only outside CWR
  and only on ACKs that carry no signal, at (1 - p(t-R)) times the rate above; an ACK that ends
  CWR and carries an echo starts the next reduction. Under persistent marking (a large incast,
  the queue far above K) the window therefore sits at its floor, min_cwnd, exactly as the
  packet-level reference's does, and the standing queue is N min_cwnd MSS - C RTT; growing
  through CWR (as the sawtooth analysis of Alizadeh et al. 2010 assumes) put the fluid queue of
  an 80-flow 10 Gb/s incast 44 % above the packet level's. The DCTCP sawtooth keeps Q_max =
  K + N; its amplitude is larger than that analysis's 0.5 sqrt(2 N (C RTT + K)) (the windows
  rest for a round trip after each cut), as at packet level. A mean-field cut spread over the
  marking period over-reacts when few flows share the link (amplitude +31 % at N = 2).

A sender's own NIC never drops: the sending rate is capped at the host link's capacity (shared by
the host's flows in proportion to their windows), and a window that does not limit the rate does
not grow (RFC 7661; Linux's TCP small queues keep the host queue near empty). Slow start ends at
the first congestion signal or when W reaches ssthresh. W never falls below `min_cwnd` (Linux
keeps 2 segments; a window under one segment would stall a packet-level flow).

Scope and limitations
---------------------
Retransmission timeouts are the solver's (`models.timeouts`: a flow stalls for an RTO and restarts
from one segment in slow start, with ssthresh a state). No receive-window limit, no pacing. Loss
bursts are averaged: a fluid flow loses the expected fraction, not a burst. Fluid flows with equal
parameters are synchronised; packet-level flows may not be (in the ``window`` form a few identical
DCTCP flows still above K when their CWR ends all cut again, twice per cycle, where about half
the packet-level flows cut once: the sawtooth's period is 25 to 40 % longer than the packet
level's at 8 flows, its mean and swing as the packet level's).

Validation (run as tests by tests/test_validation.py): `reno_equilibrium` (p = 2/W^2 on one RED
link in ``mean`` form) and `dctcp_sawtooth` (DCTCP Q_max against the closed form, amplitude
against the packet level, ``window`` form) in validation/cases/closed_forms.py; the windows at
the floor and the standing queue N min_cwnd MSS - C RTT of a large incast, both engines, in
tests/test_window_floor.py; `reno_star_ns3` and `dctcp_star_ns3` (Reno sawtooth and DCTCP
queue against ns-3) in validation/cases/ns3.py.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from typing import ClassVar, NamedTuple

import jax.numpy as jnp

from pathflow.models.base import Array, CongestionModel, Signals, State
from pathflow.models.parameters import Parameter

__all__ = ["REACTIONS", "WINDOW_PARAMETERS", "WindowControl", "WindowParams", "reaction_choice"]

REACTIONS = ("window", "mean")


class WindowParams(NamedTuple):
    """Per-controller values of the shared window parameters (packets, or plain numbers)."""

    ack_ratio: Array  # segments acknowledged per window-increase event (delayed ACK b)
    init_cwnd: Array  # packets
    min_cwnd: Array  # packets
    ssthresh: Array  # packets (inf: slow start until the first congestion signal)


WINDOW_PARAMETERS = (
    Parameter("ack_ratio", "1", 1.0, "segments per window-increase event: 1 Linux, 2 ns-3 "
              "NewReno with delayed ACKs", low=1.0, high=64.0),
    Parameter("init_cwnd", "packets", "10pkt", "initial window (RFC 6928, Linux)", low=0.0,
              inclusive=False),
    Parameter("min_cwnd", "packets", "2pkt", "floor of the window after a reduction (Linux "
              "keeps 2 segments)", low=0.0, inclusive=False),
    Parameter("ssthresh", "packets", "inf", "slow-start threshold (inf: slow start until the "
              "first congestion signal)", low=0.0, inclusive=False, infinite=True),
)


def reaction_choice(default: str) -> Parameter:
    """The structural choice between the two reaction forms, with a model's own default."""
    return Parameter("reaction", "choice", default, "window: cut at the first signal of a "
                     "window, then ignore signals for one RTT; mean: mean-field MGT cut rate",
                     choices=REACTIONS)


def increase(state: State, signals: Signals, params: WindowParams, avoidance: Array | float
             ) -> Array:
    """dW/dt from acknowledgements: W/(bR) in slow start, `avoidance`/(bR) in congestion
    avoidance (1 for Reno: one packet per round trip; W times the per-ACK increase of a coupled
    model); zero while the window does not limit the rate (the sender's NIC does)."""
    per_event = signals.window_limited / (params.ack_ratio * signals.rtt)
    return per_event * jnp.where(state["slow_start"] > 0, state["cwnd"], avoidance)


def event_rate(fraction: Array, acked_rate: Array, rtt: Array) -> Array:
    """Mean-field congestion reactions per second: x(t-R) p(t-R), at most one per round trip."""
    return jnp.minimum(acked_rate * fraction, 1.0 / rtt)


@dataclass(frozen=True)
class WindowControl(CongestionModel):
    """A window-based TCP: growth, multiplicative reactions, slow start, floors.

    Subclasses give the reaction to a mark (`mark_factor`), their parameters (the shared
    `WINDOW_PARAMETERS` and their own, with `Params` holding the value fields) and any extra
    state of their own (`extra_state`, `extra_derivative`, `extra_project`). Coupled models
    (MPTCP) also give the congestion-avoidance growth (`avoidance`) and the reaction to a loss
    (`loss_factor`), both of which may read the other subflows of the connection through the
    signals. `reaction` is "window" or "mean" (see the module docstring)."""

    sends = "window"
    Params: ClassVar[type] = WindowParams
    state_units: ClassVar[dict[str, str]] = {"cwnd": "packets", "slow_start": "1", "cwr": "s",
                                             "credit": "packets", "ssthresh": "packets"}
    reaction: str = "window"

    @classmethod
    def check(cls, values: dict[str, float | str]) -> None:
        """Cross-parameter rules (ValueError naming the key)."""
        if values["min_cwnd"] > values["init_cwnd"]:
            raise ValueError("min_cwnd: must not exceed init_cwnd")

    @abstractmethod
    def mark_factor(self, state: State, signals: Signals) -> Array:
        """W is multiplied by this on an ECN reaction."""

    def loss_factor(self, state: State, signals: Signals) -> Array | float:
        """W is multiplied by this on a loss (Reno, DCTCP: one half)."""
        return 0.5

    def avoidance(self, state: State, signals: Signals) -> Array | float:
        """Congestion-avoidance growth per round trip (packets): W times the increase per
        window-increase event; 1 for Reno's 1/W per event."""
        return 1.0

    def extra_state(self, params: WindowParams) -> State:
        return {}

    def extra_derivative(self, state: State, signals: Signals, params: WindowParams) -> State:
        return {}

    def extra_project(self, state: State, signals: Signals, cut: Array) -> State:
        """The extra state after a step; `cut` is True where the window was just cut (per-window
        form; always False in the mean form, whose cuts are continuous)."""
        return {}

    def rate(self, state: State, rtt: Array, params: WindowParams) -> Array:
        return state["cwnd"] / rtt

    def min_window(self, params: WindowParams) -> Array:
        return params.min_cwnd

    def initial_state(self, params: WindowParams) -> State:
        zeros = jnp.zeros_like(params.init_cwnd)
        return {"cwnd": params.init_cwnd, "slow_start": jnp.ones_like(zeros), "cwr": zeros,
                "credit": zeros, "ssthresh": params.ssthresh + zeros, **self.extra_state(params)}

    def derivative(self, state: State, signals: Signals, params: WindowParams) -> State:
        cwnd = state["cwnd"]
        growth = increase(state, signals, params, self.avoidance(state, signals))
        zeros = jnp.zeros_like(cwnd)
        if self.reaction == "mean":
            cuts = (cwnd * (1.0 - self.mark_factor(state, signals))
                    * event_rate(signals.mark, signals.acked_rate, signals.rtt)
                    + cwnd * (1.0 - self.loss_factor(state, signals))
                    * event_rate(signals.loss, signals.acked_rate, signals.rtt))
            flows = {"cwnd": growth - cuts, "cwr": zeros, "credit": zeros, "ssthresh": zeros}
        else:
            congestion = 1.0 - (1.0 - signals.mark) * (1.0 - signals.loss)
            listening = state["cwr"] <= 0
            # Linux grows the window only on ACKs that carry no signal, outside CWR and
            # recovery (tcp_cong_control): under persistent marking the window stays at its floor
            opened = jnp.where(listening, growth * (1.0 - congestion), 0.0)
            flows = {"cwnd": opened, "cwr": -jnp.ones_like(cwnd), "ssthresh": zeros,
                     "credit": jnp.where(listening, signals.acked_rate * congestion, 0.0)}
        return {**flows, "slow_start": zeros, **self.extra_derivative(state, signals, params)}

    def project(self, state: State, signals: Signals, params: WindowParams) -> State:
        cwnd = state["cwnd"]
        if self.reaction == "window":
            fire = (state["credit"] >= 1.0) & (state["cwr"] <= 0)
            lost = signals.loss > 0
            factor = jnp.where(lost, self.loss_factor(state, signals),
                               self.mark_factor(state, signals))
            cwnd = jnp.where(fire, cwnd * factor, cwnd)
            cwr = jnp.where(fire, signals.rtt, jnp.maximum(state["cwr"], 0.0))
            credit = jnp.where(fire | (state["cwr"] > 0), 0.0, state["credit"])
            cut = fire
        else:
            cwr, credit = state["cwr"], state["credit"]
            cut = jnp.zeros_like(cwnd, dtype=bool)
        congestion = jnp.maximum(signals.loss, signals.mark)
        stay = (congestion <= 0) & (state["cwnd"] < state["ssthresh"])
        slow_start = jnp.where(stay, state["slow_start"], 0.0)
        return {
            # the floor holds reductions; a window restarting below it (the loss window after
            # a timeout) grows from where it is
            "cwnd": jnp.where(slow_start > 0, cwnd, jnp.maximum(cwnd, params.min_cwnd)),
            "slow_start": slow_start,
            "cwr": cwr,
            "credit": credit,
            "ssthresh": state["ssthresh"],
            **self.extra_project(state, signals, cut),
        }
