"""Congestion control: the small per-algorithm hooks the TCP sender calls, selected by a cc code.

The sender (`sender.py`) owns the TCP machinery every window-based algorithm shares: sequence
numbers, loss detection, NewReno recovery, retransmission timeouts, the CWR episode after an ECN
echo. It asks this module five questions, each dispatched on the sender's `SI_CC` code:

- `on_ack(sim, s, acked, ece, ack)`: bookkeeping on every ACK (DCTCP's marked-byte fraction and
  its once-per-window alpha update);
- `window_increase(sim, s, acked)`: growth of cwnd on an ACK in the Open state;
- `mark_factor(sim, s)`: multiplicative decrease on an ECN echo (once per window);
- `loss_factor(sim, s)`: multiplicative decrease on a loss (fast retransmit or timeout);
- `on_timer(sim, s, now)`: algorithm timers (none for Reno and DCTCP).

Adding an algorithm is adding its functions and a branch per question. MPTCP's coupled increase
(LIA, OLIA, BALIA) reads the other subflows of its flow (`SI_FLOW`) in
`window_increase`;
DCQCN's rate-based reaction point uses `on_timer` and `SF_NEXT_SEND` (pacing) instead of a window.

Window growth follows the fluid model's `ack_ratio` b (segments per window-increase event):
b = 1 grows by the segments each ACK acknowledges (Linux, ns-3 TcpLinuxReno: +1 segment per
RTT in congestion avoidance); b equal to the delayed-ACK count grows once per ACK (ns-3
TcpNewReno: +1/b per RTT); any other b grows by acknowledged segments / b.
"""

from __future__ import annotations

from pathflow.validation.packet.jit import kernel
from pathflow.validation.packet.layout import (
    CC_DCTCP,
    GROW_PER_ACK,
    GROW_PER_SEGMENT,
    SF_ACKED,
    SF_ACKED_ECE,
    SF_ALPHA,
    SF_CWND,
    SF_SSTHRESH,
    SI_ALPHA_SEQ,
    SI_CC,
    SI_NXT,
    SI_UNA,
)

__all__ = ["loss_factor", "mark_factor", "on_ack", "on_timer", "window_increase"]


# --- Reno (RFC 5681 growth, halving) ----------------------------------------------------------
@kernel
def reno_increase(sim, s: int, acked: int) -> None:
    """Slow start below ssthresh (+1 per event), then congestion avoidance (+1/cwnd per event);
    an event is an acknowledged segment, an ACK, or segments / b (see the module docstring)."""
    cfg, f = sim.cfg, sim.senders.f
    if cfg.growth == GROW_PER_SEGMENT:
        events = float(acked)
    elif cfg.growth == GROW_PER_ACK:
        events = 1.0
    else:
        events = acked / cfg.ack_ratio
    cwnd, ssthresh = f[s, SF_CWND], f[s, SF_SSTHRESH]
    if cwnd < ssthresh:  # slow start; what exceeds ssthresh counts as congestion avoidance
        grown = cwnd + events
        if grown <= ssthresh:
            f[s, SF_CWND] = grown
            return
        events = grown - ssthresh
        cwnd = ssthresh
    f[s, SF_CWND] = cwnd + events / cwnd


# --- DCTCP (Alizadeh et al. 2010; RFC 8257) ---------------------------------------------------
@kernel
def dctcp_on_ack(sim, s: int, acked: int, ece: int, ack: int) -> None:
    """Count acknowledged and ECN-echoed segments; once per window of data (when UNA passes the
    sequence that was next to send at the previous update) alpha <- (1-g) alpha + g F."""
    f, i = sim.senders.f, sim.senders.i
    f[s, SF_ACKED] += acked
    if ece:
        f[s, SF_ACKED_ECE] += acked
    if i[s, SI_ALPHA_SEQ] < 0:
        i[s, SI_ALPHA_SEQ] = i[s, SI_NXT]
    if i[s, SI_UNA] >= i[s, SI_ALPHA_SEQ]:
        fraction = f[s, SF_ACKED_ECE] / f[s, SF_ACKED] if f[s, SF_ACKED] > 0 else 0.0
        g = sim.cfg.g
        f[s, SF_ALPHA] = (1.0 - g) * f[s, SF_ALPHA] + g * fraction
        f[s, SF_ACKED] = 0.0
        f[s, SF_ACKED_ECE] = 0.0
        i[s, SI_ALPHA_SEQ] = i[s, SI_NXT]


# --- dispatch -----------------------------------------------------------------------------------
@kernel
def on_ack(sim, s: int, acked: int, ece: int, ack: int) -> None:
    if sim.senders.i[s, SI_CC] == CC_DCTCP:
        dctcp_on_ack(sim, s, acked, ece, ack)


@kernel
def window_increase(sim, s: int, acked: int) -> None:
    reno_increase(sim, s, acked)  # Reno and DCTCP grow alike


@kernel
def mark_factor(sim, s: int) -> float:
    if sim.senders.i[s, SI_CC] == CC_DCTCP:
        return 1.0 - sim.senders.f[s, SF_ALPHA] / 2.0
    return 0.5  # RFC 3168: an ECN echo is treated as a loss


@kernel
def loss_factor(sim, s: int) -> float:
    return 0.5  # Reno and DCTCP (Linux's dctcp_react_to_loss) halve on a loss


@kernel
def on_timer(sim, s: int, now: float) -> None:
    """Algorithm timers (DCQCN's alpha and rate-increase timers will live here)."""
    return
