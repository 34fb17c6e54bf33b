"""DCTCP fluid model.

Model
-----
Alizadeh, Javanmard and Prabhakar's fluid model (SIGMETRICS 2011), with slow start, delayed ACKs
and losses (see `models.window` for the shared terms):

    dW/dt     = W/(bR) [slow start] or 1/(bR)  -  W alpha/2 * lambda(p_mark)  -  W/2 * lambda(p_loss)
    dalpha/dt = g/R (p_mark(t-R) - alpha)
    lambda(p) = min(x(t-R) p(t-R), 1/R)

With step marking (p_mark = 1{q > K}, `models.aqm`) lambda is 1/R while marks arrive: one cut by
alpha/2 per round trip, as in the paper. alpha starts at 1 (Linux and ns-3 `DctcpAlphaOnInit`), so
the first mark halves the window.

Steady state (Alizadeh et al. SIGCOMM 2010, N synchronised flows, capacity C packets/s, base RTT,
threshold K packets): Q_max = K + N, oscillation amplitude A = 0.5 sqrt(2 N (C RTT + K)), and full
throughput when K > C RTT / 7.

Parameters
----------
g: EWMA gain, default 1/16 (Linux `dctcp_shift_g` = 4, ns-3 `TcpDctcp::DctcpShiftG`).
ack_ratio b: default 1 (Linux and ns-3's TcpDctcp, which grows through TcpLinuxReno and counts
acknowledged segments). init_cwnd 10 packets, min_cwnd 2 packets (Linux keeps DCTCP's window at
2 segments), ssthresh inf.

Scope and limitations
---------------------
alpha is a continuous EWMA rather than a once-per-window update; marks are a probability per
packet, not a bit on individual packets; no timeouts. Large incasts where the fair share is below
min_cwnd keep the floor, as Linux does; a packet-level flow could instead time out.

Validation
----------
tests/test_dctcp_hardware.py: the seed 003 star (2 flows, 100 Mb/s, K = 20) against the
hardware queue trace; tests/test_closed_forms.py: Q_max and amplitude for N in {2, 8, 32};
tests/test_ns3_agreement.py: the same star against ns-3's TcpDctcp.

References
----------
M. Alizadeh et al., "Data Center TCP (DCTCP)", SIGCOMM 2010.
M. Alizadeh, A. Javanmard, B. Prabhakar, "Analysis of DCTCP: stability, convergence, and
fairness", SIGMETRICS 2011.
"""

from __future__ import annotations

import jax.numpy as jnp

from pathflow.models import window
from pathflow.models.base import CongestionModel, ControllerParams, Signals, State


class Dctcp(CongestionModel):
    name = "dctcp"
    state_fields = ("cwnd", "alpha", "slow_start")
    reacts_to_ecn = True

    def initial_state(self, params: ControllerParams) -> State:
        ones = jnp.ones_like(params.init_cwnd)
        return {"cwnd": params.init_cwnd, "alpha": ones, "slow_start": ones}

    def derivative(self, state: State, signals: Signals, params: ControllerParams) -> State:
        mark_cuts = window.event_rate(signals.mark, signals.acked_rate, signals.rtt)
        loss_cuts = window.event_rate(signals.loss, signals.acked_rate, signals.rtt)
        cwnd = state["cwnd"]
        dcwnd = (window.increase(state, signals, params)
                 - cwnd * state["alpha"] / 2 * mark_cuts - cwnd / 2 * loss_cuts)
        dalpha = params.g / signals.rtt * (signals.mark - state["alpha"])
        return {"cwnd": dcwnd, "alpha": dalpha, "slow_start": jnp.zeros_like(dcwnd)}

    def project(self, state: State, signals: Signals, params: ControllerParams) -> State:
        congestion = jnp.maximum(signals.loss, signals.mark)
        return {
            "cwnd": window.floor_window(state["cwnd"], params),
            "alpha": jnp.clip(state["alpha"], 0.0, 1.0),
            "slow_start": window.leave_slow_start(state, congestion, params),
        }
