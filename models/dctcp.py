"""DCTCP fluid model.

Model
-----
DCTCP's window and marking estimate (Alizadeh et al. 2010; fluid form Alizadeh, Javanmard and
Prabhakar 2011), with slow start, delayed ACKs and losses (see `models.window` for the shared
terms and the two reaction forms):

    dW/dt     = W/(bR) [slow start] or 1/(bR)
    W -> W (1 - alpha/2) on marks, W/2 on losses, at most once per round trip   (window, default)
    dW/dt    -= W alpha/2 lambda(p_mark) + W/2 lambda(p_loss)                   (mean)
    dalpha/dt = g/R (p_mark(t-R) - alpha)
    lambda(p) = min(x(t-R) p(t-R), 1/R)

With step marking (p_mark = 1{q > K}, `models.aqm`) the mean form cuts at lambda = 1/R while marks
arrive, the 2011 paper's equation. The default per-window form cuts at the first mark of a window,
as the stack does, and reproduces the 2010 sawtooth analysis. alpha starts at 1 (Linux and ns-3
`DctcpAlphaOnInit`), so the first mark halves the window.

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
packet, not a bit on individual packets. Large incasts where the fair share is below min_cwnd
keep every window at the floor, as Linux does (no growth in CWR, `models.window`); their flows may
time out (`models.timeouts`) where the buffer overflows. The window is continuous: a flow
sending 2.7 segments' worth has 2 or 3 in flight at packet level, which averages out over flows
and over a sawtooth, not for one flow at a fractional window.

Validation
----------
Validation cases (run by tests/test_validation.py): `dctcp_hardware` (validation/cases/
measured.py), the seed 003 star (2 flows, 100 Mb/s, K = 20) against the hardware queue trace;
`dctcp_sawtooth` (validation/cases/closed_forms.py), Q_max and amplitude for N in {2, 8, 32}
(window form); `dctcp_star_ns3` (validation/cases/ns3.py): the same star against ns-3's
TcpDctcp.

References
----------
M. Alizadeh et al., "Data Center TCP (DCTCP)", SIGCOMM 2010.
M. Alizadeh, A. Javanmard, B. Prabhakar, "Analysis of DCTCP: stability, convergence, and
fairness", SIGMETRICS 2011.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, NamedTuple

import jax.numpy as jnp

from pathflow.models.base import Array, Signals, State
from pathflow.models.parameters import Parameter
from pathflow.models.window import WINDOW_PARAMETERS, WindowControl, reaction_choice


class DctcpParams(NamedTuple):
    """The shared window parameters (`models.window.WindowParams`) and DCTCP's gain."""

    ack_ratio: Array
    init_cwnd: Array
    min_cwnd: Array
    ssthresh: Array
    g: Array  # EWMA gain of the marked fraction


@dataclass(frozen=True)
class Dctcp(WindowControl):
    name = "dctcp"
    parameters = (*WINDOW_PARAMETERS,
                  Parameter("g", "1", 1 / 16, "EWMA gain of the marked fraction (Linux "
                            "dctcp_shift_g = 4)", low=0.0, high=1.0, inclusive=False),
                  reaction_choice("window"))
    Params: ClassVar[type] = DctcpParams
    state_units: ClassVar[dict[str, str]] = {**WindowControl.state_units, "alpha": "1"}
    reaction: str = "window"

    def mark_factor(self, state: State, signals: Signals) -> Array:
        return 1.0 - state["alpha"] / 2

    def extra_state(self, params: DctcpParams) -> State:
        return {"alpha": jnp.ones_like(params.init_cwnd)}

    def extra_derivative(self, state: State, signals: Signals, params: DctcpParams) -> State:
        return {"alpha": params.g / signals.rtt * (signals.mark - state["alpha"])}

    def extra_project(self, state: State, signals: Signals, cut: Array) -> State:
        return {"alpha": jnp.clip(state["alpha"], 0.0, 1.0)}
