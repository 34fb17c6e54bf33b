"""Congestion control: the small per-algorithm hooks the TCP sender calls, selected by a cc code.

The sender (`sender.py`) owns the TCP machinery every window-based algorithm shares: sequence
numbers, loss detection, NewReno recovery, retransmission timeouts, the CWR episode after an ECN
echo. It asks this module six questions, each dispatched on the sender's `SI_CC` code:

- `on_ack(sim, s, acked, ece, ack)`: bookkeeping on every ACK (DCTCP's marked-byte fraction and
  its once-per-window alpha update);
- `window_increase(sim, s, acked)`: growth of cwnd on an ACK in the Open state;
- `mark_factor(sim, s)`: multiplicative decrease on an ECN echo (once per window);
- `loss_factor(sim, s)`: multiplicative decrease on a loss (fast retransmit or timeout);
- `on_congestion(sim, s)`: the sender enters Recovery, Loss or CWR (Linux's set_state hook;
  OLIA's loss-interval bookkeeping);
- `on_timer(sim, s, now)`: algorithm timers (none for Reno, DCTCP and MPTCP; DCQCN's alpha
  and rate-increase timers).

Adding an algorithm is adding its functions and a branch per question. DCQCN's and DCQCN+'s
rate-based reaction point (`dcqcn.py`) paces by `SF_NEXT_SEND` instead of a window:
`rate_based` tells the sender, which then hands it CNPs (ECN echoes) and the packets it sends,
and never cuts a window for it (loss and mark factors 1).

Window growth follows the fluid model's `ack_ratio` b (segments per window-increase event):
b = 1 grows by the segments each ACK acknowledges (Linux, ns-3 TcpLinuxReno: +1 segment per
RTT in congestion avoidance); b equal to the delayed-ACK count grows once per ACK (ns-3
TcpNewReno: +1/b per RTT); any other b grows by acknowledged segments / b.

MPTCP (`models.mptcp`, whose docstring derives the rules; checked against the authors' Linux
module, multipath-tcp.org mptcp_coupled.c, mptcp_olia.c, mptcp_balia.c). Each subflow is a
sender of its own (own window, RTT estimator, NewReno recovery and RTO); slow start is per
subflow and Reno's. In congestion avoidance a window-increase event adds I_r segments instead of
Reno's 1 / w_r, with sums and maxima over the connection's subflows (rows `SI_CONN_FIRST:
SI_CONN_END`) that are sending (phase RUNNING), each with its smoothed RTT tau_k (`SF_SRTT`, the
base RTT before the first sample) and its window w_k:

- LIA (RFC 6356): I_r = min(max_k(w_k / tau_k^2) / (sum_k w_k / tau_k)^2, 1 / w_r), i.e.
  min(a / w_tot, 1 / w_r); halves on a loss.
- OLIA (Khalili et al.): I_r = (w_r / tau_r^2) / (sum_k w_k / tau_k)^2 + eps_r / w_r, halves.
  M: the subflows with the largest window; B: those with the largest l_k / tau_k^2, l_k =
  max(segments acknowledged since the last loss event, segments acknowledged between the two
  before) (Linux's mptcp_loss1..3, moved on entering Recovery, Loss or CWR unless nothing was
  acknowledged since the last event or a timeout is being retried: `on_congestion`);
  eps_r = 1 / (n |B \\ M|) on B \\ M, -1 / (n |M|) on M when B \\ M is not empty, else 0. A
  negative increase stops at the window floor `min_cwnd`.
- BALIA (Peng et al.): x_k = w_k / tau_k, alpha_r = max_k x_k / x_r, I_r = x_r / (tau_r
  (sum_k x_k)^2) (1 + alpha_r)/2 (4 + alpha_r)/5; a loss cuts by 1 - min(alpha_r, 1.5) / 2.
- uncoupled: every subflow a Reno.

An ECN echo cuts as a loss does (Linux sets ssthresh alike). A connection of one subflow takes
Reno's code path, so it is Reno bit for bit.

Simplified against Linux: windows and rates in floating point (Linux keeps integer windows and
scaled integer counters; BALIA's alpha is floored there, continuous here, as in the fluid
model), except that OLIA's set M compares whole segments of window (Linux's integer cwnd; a
fractional comparison would make M a single subflow almost always). Another subflow's window
counts as its ssthresh while it is in fast recovery (our NewReno inflates cwnd there; Linux's
OLIA reads ssthresh in recovery, and Linux's PRR never inflates). Every subflow counts from the
connection's start (no handshake, no path manager delays). Growth events follow `ack_ratio` as
Reno's do (Linux's coupled modules count one event per ACK, i.e. b = the delayed-ACK count).
"""

from __future__ import annotations

from pathflow.validation.packet import dcqcn
from pathflow.validation.packet.jit import kernel, outlined
from pathflow.validation.packet.layout import (
    CA_RECOVERY,
    CC_BALIA,
    CC_DCQCN,
    CC_DCQCN_PLUS,
    CC_DCTCP,
    CC_LIA,
    CC_OLIA,
    GROW_PER_ACK,
    GROW_PER_SEGMENT,
    RUNNING,
    SF_ACKED,
    SF_ACKED_ECE,
    SF_ALPHA,
    SF_BASE_RTT,
    SF_CWND,
    SF_SRTT,
    SF_SSTHRESH,
    SI_ALPHA_SEQ,
    SI_BACKOFF,
    SI_CA,
    SI_CC,
    SI_CONN_END,
    SI_CONN_FIRST,
    SI_NXT,
    SI_OLIA_LOSS1,
    SI_OLIA_LOSS2,
    SI_PHASE,
    SI_UNA,
)

__all__ = ["loss_factor", "mark_factor", "on_ack", "on_congestion", "on_timer", "rate_based",
           "window_increase"]


# --- Reno (RFC 5681 growth, halving) ----------------------------------------------------------
@kernel
def _grow(sim, s: int, acked: int, coupled: bool) -> None:
    """Slow start below ssthresh (+1 per event), then congestion avoidance: +1/cwnd per event
    (Reno), or MPTCP's coupled increase `_coupled_increase` per event when `coupled`; an event
    is an acknowledged segment, an ACK, or segments / b (see the module docstring)."""
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
    if not coupled:
        f[s, SF_CWND] = cwnd + events / cwnd
        return
    increase = _coupled_increase(sim, s, cwnd)
    grown = cwnd + events * increase
    if increase < 0.0:  # OLIA moving window off its largest subflows: not below the floor
        grown = max(grown, min(cwnd, cfg.min_cwnd))
    f[s, SF_CWND] = grown


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


# --- MPTCP (models.mptcp; see the module docstring) ---------------------------------------------
@kernel
def _rtt(sim, k: int) -> float:
    """Smoothed RTT of sender k, its base RTT before the first sample."""
    srtt = sim.senders.f[k, SF_SRTT]
    return srtt if srtt > 0.0 else sim.senders.f[k, SF_BASE_RTT]


@kernel
def _window(sim, k: int) -> float:
    """Window of subflow k as its siblings see it: ssthresh during fast recovery (NewReno's
    inflated cwnd is not a sending rate), else cwnd."""
    f = sim.senders.f
    if sim.senders.i[k, SI_CA] == CA_RECOVERY:
        return f[k, SF_SSTHRESH]
    return f[k, SF_CWND]


@kernel
def _counts(sim, s: int, k: int) -> bool:
    """Whether subflow k enters subflow s's sums: sending, and s itself always."""
    return k == s or sim.senders.i[k, SI_PHASE] == RUNNING


@kernel
def _single(sim, s: int) -> bool:
    i = sim.senders.i
    return i[s, SI_CONN_END] - i[s, SI_CONN_FIRST] == 1


@kernel
def _olia_interval(sim, k: int) -> float:
    """OLIA's l_k: segments acknowledged since the last loss event or between the two before,
    the larger (Linux: max(mptcp_loss3 - mptcp_loss2, mptcp_loss2 - mptcp_loss1))."""
    i = sim.senders.i
    loss2 = i[k, SI_OLIA_LOSS2]
    return float(max(i[k, SI_UNA] - loss2, loss2 - i[k, SI_OLIA_LOSS1]))


@kernel
def _olia_epsilon(sim, s: int, w_r: float) -> float:
    """OLIA's eps_r (module docstring): M by whole segments of window, B by l_k / tau_k^2."""
    i = sim.senders.i
    first, end = i[s, SI_CONN_FIRST], i[s, SI_CONN_END]
    largest, best = -1.0, -1.0
    for k in range(first, end):
        if _counts(sim, s, k):
            w = w_r if k == s else _window(sim, k)
            largest = max(largest, float(int(w)))
            tau = _rtt(sim, k)
            best = max(best, _olia_interval(sim, k) / (tau * tau))
    n, n_largest, n_best = 0, 0, 0
    mine_largest, mine_best = False, False
    for k in range(first, end):
        if not _counts(sim, s, k):
            continue
        n += 1
        w = w_r if k == s else _window(sim, k)
        tau = _rtt(sim, k)
        in_m = float(int(w)) == largest
        in_b = not in_m and _olia_interval(sim, k) / (tau * tau) == best
        n_largest += 1 if in_m else 0
        n_best += 1 if in_b else 0
        if k == s:
            mine_largest, mine_best = in_m, in_b
    if n_best == 0:
        return 0.0
    if mine_best:
        return 1.0 / (n * n_best)
    if mine_largest:
        return -1.0 / (n * n_largest)
    return 0.0


@outlined
def _coupled_increase(sim, s: int, w_r: float) -> float:
    """I_r, the window increase per event in congestion avoidance of subflow s (window w_r) of a
    LIA, OLIA or BALIA connection (module docstring)."""
    i = sim.senders.i
    code = i[s, SI_CC]
    tau_r = _rtt(sim, s)
    total, best_w, best_x = 0.0, 0.0, 0.0  # sum w/tau, max w/tau^2, max w/tau
    for k in range(i[s, SI_CONN_FIRST], i[s, SI_CONN_END]):
        if _counts(sim, s, k):
            w = w_r if k == s else _window(sim, k)
            tau = _rtt(sim, k)
            total += w / tau
            best_w = max(best_w, w / (tau * tau))
            best_x = max(best_x, w / tau)
    if code == CC_LIA:
        return min(best_w / (total * total), 1.0 / w_r)
    if code == CC_OLIA:
        return (w_r / (tau_r * tau_r)) / (total * total) + _olia_epsilon(sim, s, w_r) / w_r
    # BALIA
    x_r = w_r / tau_r
    alpha = best_x / x_r
    return x_r / (tau_r * total * total) * (1.0 + alpha) / 2.0 * (4.0 + alpha) / 5.0


@outlined
def _balia_factor(sim, s: int) -> float:
    """BALIA's decrease factor 1 - min(alpha_r, 1.5) / 2, alpha_r = max_k x_k / x_r."""
    i = sim.senders.i
    x_r = sim.senders.f[s, SF_CWND] / _rtt(sim, s)
    best = x_r
    for k in range(i[s, SI_CONN_FIRST], i[s, SI_CONN_END]):
        if k != s and _counts(sim, s, k):
            best = max(best, _window(sim, k) / _rtt(sim, k))
    return 1.0 - min(best / x_r, 1.5) / 2.0


# --- dispatch -----------------------------------------------------------------------------------
@kernel
def rate_based(sim, s: int) -> bool:
    """Whether sender s paces at a rate of its own (DCQCN, DCQCN+) rather than by a window."""
    return sim.senders.i[s, SI_CC] in (CC_DCQCN, CC_DCQCN_PLUS)


@kernel
def on_ack(sim, s: int, acked: int, ece: int, ack: int) -> None:
    if sim.senders.i[s, SI_CC] == CC_DCTCP:
        dctcp_on_ack(sim, s, acked, ece, ack)


@kernel
def window_increase(sim, s: int, acked: int) -> None:
    code = sim.senders.i[s, SI_CC]
    if rate_based(sim, s):
        sim.senders.f[s, SF_CWND] = float(sim.cfg.ring)  # no window (a timeout set it to 1)
        return
    coupled = code in (CC_LIA, CC_OLIA, CC_BALIA) and not _single(sim, s)
    _grow(sim, s, acked, coupled)  # Reno, DCTCP and uncoupled subflows grow alike


@kernel
def loss_factor(sim, s: int) -> float:
    if sim.senders.i[s, SI_CC] == CC_BALIA and not _single(sim, s):
        return _balia_factor(sim, s)
    if rate_based(sim, s):
        return 1.0  # its rate reacts to CNPs only
    return 0.5  # Reno, DCTCP (Linux's dctcp_react_to_loss), LIA, OLIA, uncoupled halve


@kernel
def mark_factor(sim, s: int) -> float:
    code = sim.senders.i[s, SI_CC]
    if code == CC_DCTCP:
        return 1.0 - sim.senders.f[s, SF_ALPHA] / 2.0
    if rate_based(sim, s):
        return 1.0
    if code == CC_BALIA:
        return loss_factor(sim, s)  # Linux: an ECN echo sets ssthresh as a loss does
    return 0.5  # RFC 3168: an ECN echo is treated as a loss


@kernel
def on_congestion(sim, s: int) -> None:
    """Sender s enters Recovery, Loss or CWR (called before its state changes). OLIA: the loss
    intervals move on (Linux's mptcp_olia_set_state: not when nothing was acknowledged since
    the last event, nor on a repeated timeout)."""
    i = sim.senders.i
    moved = i[s, SI_UNA] != i[s, SI_OLIA_LOSS2] and i[s, SI_BACKOFF] == 0
    if i[s, SI_CC] == CC_OLIA and moved:
        i[s, SI_OLIA_LOSS1] = i[s, SI_OLIA_LOSS2]
        i[s, SI_OLIA_LOSS2] = i[s, SI_UNA]


@kernel
def on_timer(sim, s: int, now: float) -> None:
    """Algorithm timers: DCQCN's (and DCQCN+'s) alpha and rate-increase timers."""
    if rate_based(sim, s):
        dcqcn.on_timer(sim, s, now)
