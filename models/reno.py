"""TCP Reno (NewReno) fluid model.

Model
-----
Misra, Gong and Towsley's fluid model (SIGCOMM 2000) with slow start, delayed ACKs and one
reaction per window (see `models.window` for the shared terms):

    dW/dt = W/(bR) [slow start] or 1/(bR) [congestion avoidance]  -  W/2 * lambda(p)
    lambda(p) = min(x(t-R) p(t-R), 1/R),   p = 1 - (1 - p_loss)(1 - p_mark)

W is the window in packets, R(t) = base RTT + sum over the path of q_l / C_l, x = W / R the rate
in packets/s. An ECN-capable Reno (RED with `ecn = true`) halves on marks as on losses.

Parameters
----------
ack_ratio b (default 1, Linux; 2 for ns-3 NewReno with delayed ACKs), init_cwnd (default 10
packets, RFC 6928 and Linux), min_cwnd (default 2 packets, Linux's floor after a reduction),
ssthresh (default inf: slow start until the first loss).

Scope and limitations
---------------------
No timeouts, no fast-recovery inflation, losses averaged over flows (a fluid flow sharing a full
drop-tail queue loses its share of the overflow; packet-level flows lose in bursts and may
desynchronise, which the mean-field model represents only on average).

Validation
----------
tests/test_closed_forms.py: equilibrium p = 2 / (b W^2) on a single RED link.
tests/test_ns3_agreement.py: sawtooth extent (queue max and min) on the 2-flow 100 Mb/s star
against ns-3 NewReno.

References
----------
V. Misra, W. Gong, D. Towsley, "Fluid-based analysis of a network of AQM routers supporting TCP
flows with an application to RED", SIGCOMM 2000.
"""

from __future__ import annotations

import jax.numpy as jnp

from pathflow.models import window
from pathflow.models.base import CongestionModel, ControllerParams, Signals, State


class Reno(CongestionModel):
    name = "reno"
    state_fields = ("cwnd", "slow_start")
    reacts_to_ecn = True

    def initial_state(self, params: ControllerParams) -> State:
        return {"cwnd": params.init_cwnd, "slow_start": jnp.ones_like(params.init_cwnd)}

    def derivative(self, state: State, signals: Signals, params: ControllerParams) -> State:
        congestion = 1.0 - (1.0 - signals.loss) * (1.0 - signals.mark)
        cuts = window.event_rate(congestion, signals.acked_rate, signals.rtt)
        dcwnd = window.increase(state, signals, params) - state["cwnd"] / 2 * cuts
        return {"cwnd": dcwnd, "slow_start": jnp.zeros_like(dcwnd)}

    def project(self, state: State, signals: Signals, params: ControllerParams) -> State:
        congestion = jnp.maximum(signals.loss, signals.mark)
        return {
            "cwnd": window.floor_window(state["cwnd"], params),
            "slow_start": window.leave_slow_start(state, congestion, params),
        }
