"""TCP Reno (NewReno) fluid model.

Model
-----
Misra, Gong and Towsley's fluid model (SIGCOMM 2000) with slow start, delayed ACKs and one
reaction per window (see `models.window` for the shared terms and the two reaction forms):

    dW/dt = W/(bR) [slow start] or 1/(bR) [congestion avoidance]  -  W/2 * lambda(p)   (mean)
    W -> W/2 at most once per round trip, when signals arrive                         (window)
    lambda(p) = min(x(t-R) p(t-R), 1/R)

W is the window in packets, R(t) = base RTT + sum over the path of q_l / C_l, x = W / R the rate
in packets/s, p the loss (or, for an ECN-capable Reno behind RED with `ecn = true`, mark)
fraction. The default reaction is ``mean``: its equilibrium p = 2 / (b W^2) is MGT's, and it
represents desynchronised packet-level flows sharing a drop-tail queue on average.

Parameters
----------
ack_ratio b (default 1, Linux; 2 for ns-3 NewReno with delayed ACKs), init_cwnd (default 10
packets, RFC 6928 and Linux), min_cwnd (default 2 packets, Linux's floor after a reduction),
ssthresh (default inf: slow start until the first loss).

Scope and limitations
---------------------
Timeouts as `models.timeouts` models them; no fast-recovery inflation; losses averaged over
flows (a fluid flow sharing a full drop-tail queue loses its share of the overflow;
packet-level flows lose in bursts and may desynchronise, which the mean-field model represents
only on average).

Validation
----------
Validation cases (run by tests/test_validation.py): `reno_equilibrium` (validation/cases/
closed_forms.py), p = 2 / (b W^2) on a single RED link (mean form); `reno_star_ns3`
(validation/cases/ns3.py), the sawtooth (mean queue, troughs, maximum) on the 2-flow 100 Mb/s
star against ns-3 NewReno.

References
----------
V. Misra, W. Gong, D. Towsley, "Fluid-based analysis of a network of AQM routers supporting TCP
flows with an application to RED", SIGCOMM 2000.
"""

from __future__ import annotations

from dataclasses import dataclass

from pathflow.models.base import Array, Signals, State
from pathflow.models.window import WINDOW_PARAMETERS, WindowControl, reaction_choice


@dataclass(frozen=True)
class Reno(WindowControl):
    name = "reno"
    parameters = (*WINDOW_PARAMETERS, reaction_choice("mean"))
    reaction: str = "mean"

    def mark_factor(self, state: State, signals: Signals) -> Array:
        return 0.5 + 0.0 * state["cwnd"]
