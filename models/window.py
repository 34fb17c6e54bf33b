"""TCP window dynamics shared by the loss- and mark-based models (Reno, DCTCP).

Model
-----
A window W (packets) grows by one packet per window-increase event, and a receiver that
acknowledges every b-th segment (delayed ACKs, b = `ack_ratio`) produces W/b such events per round
trip (ns-3's NewReno counts ACKs, b = 2; Linux counts acknowledged segments, b = 1):

    slow start:           dW/dt = W / (b R)
    congestion avoidance: dW/dt = 1 / (b R)

Congestion events (a loss or an ECN echo) arrive with the acknowledgements, at the rate
x(t-R) p(t-R) where x is the sending rate in packets/s and p the fraction of packets marked or
dropped (Misra, Gong, Towsley 2000). Real stacks react at most once per window (NewReno's
recovery, DCTCP's and ECN's CWR), so the event rate is capped at 1/R:

    lambda(p) = min(x(t-R) p(t-R), 1 / R(t))

Below the cap this is exactly the MGT model (equilibrium p = 2 / (b W^2)); at the cap (DCTCP's step
marking, where p is 0 or 1) it is one reaction per round trip, as in Alizadeh et al. 2011.
A sender's own NIC never drops: the sending rate is capped at the host link's capacity (shared by
the host's flows in proportion to their windows), and a window that does not limit the rate does
not grow (RFC 7661; Linux's TCP small queues keep the host queue near empty). Slow start ends at
the first congestion signal or when W reaches ssthresh. W never falls below
`min_cwnd` (Linux keeps 2 segments; a window under one segment would stall a packet-level flow).

Scope and limitations
---------------------
No retransmission timeouts (a fluid flow never stalls), no receive-window limit, no pacing. Loss
bursts are averaged: a fluid flow loses the expected fraction, not a burst.

Validation: tests/test_closed_forms.py (Reno equilibrium p = 2/W^2 on one RED link),
tests/test_ns3_agreement.py (Reno sawtooth and DCTCP queue against ns-3).
"""

from __future__ import annotations

import jax.numpy as jnp

from pathflow.models.base import Array, ControllerParams, Signals, State


def increase(state: State, signals: Signals, params: ControllerParams) -> Array:
    """dW/dt from acknowledgements: W/(bR) in slow start, 1/(bR) in congestion avoidance;
    zero while the window does not limit the rate (the sender's NIC does)."""
    per_event = signals.window_limited / (params.ack_ratio * signals.rtt)
    return per_event * jnp.where(state["slow_start"] > 0, state["cwnd"], 1.0)


def event_rate(fraction: Array, acked_rate: Array, rtt: Array) -> Array:
    """Congestion reactions per second: x(t-R) p(t-R), at most one per round trip."""
    return jnp.minimum(acked_rate * fraction, 1.0 / rtt)


def leave_slow_start(state: State, congestion: Array, params: ControllerParams) -> Array:
    """The slow-start flag after this step: cleared by any congestion signal or by ssthresh."""
    stay = (congestion <= 0) & (state["cwnd"] < params.ssthresh)
    return jnp.where(stay, state["slow_start"], 0.0)


def floor_window(cwnd: Array, params: ControllerParams) -> Array:
    return jnp.maximum(cwnd, params.min_cwnd)
