"""DCQCN's reaction point at packet level: a rate-limited sender driven by CNPs and two timers.

The algorithm of Zhu et al. (SIGCOMM 2015) as ConnectX NICs run it, with the fluid model's
parameters (`models/dcqcn.py`, per sender in `SF_*` columns):

- Pacing: a data packet of `size` bytes leaves at least size / R_C after the previous one (a
  token bucket of one packet: a sender the NIC held back may catch up by one packet, no more),
  with R_C as it is when the packet may leave: a rate change reschedules the next packet.
  There is no window (cwnd stays at the ring size); losses are still repaired by the TCP
  machinery of `sender.py`, which never cuts the rate.
- CNP (an ACK with ECE from the notification point, `receiver.py`: at most one per
  `min_time_between_cnps` per flow, on a CE-marked arrival): the alpha period remembers it, and
  unless the rate was cut less than `cnp_interval` ago (ConnectX's rate_reduce_monitor_period),
  R_T = R_C, R_C = R_C (1 - alpha/2), and the byte counter, the timer and both stage counts
  restart.
- Alpha: every `alpha_interval`, alpha = (1 - g) alpha + g if a CNP arrived in the period, else
  (1 - g) alpha (ConnectX's rule; the fluid model's dalpha/dt is its mean).
- Rate increase: an expiry of the byte counter (every `byte_counter` bytes sent) or of the timer
  (every `timer` seconds) adds one to its stage count; while both counts are below F (fast
  recovery) R_C = (R_T + R_C)/2; otherwise R_T += R_AI first (additive increase), or R_T +=
  R_HAI once both counts are past F (hyper increase: ConnectX's rule as Google's isekai RoCE
  simulator models it, one R_HAI per expiry).
- R_C and R_T stay within [min_rate, line rate]; a flow starts at line rate with alpha = 1.

Differences from the fluid model, by construction: the notification point's interval restarts at
each CNP (a renewal, where the fluid a = 1 - (1-p)^(tau R_C) counts marks in fixed windows), and
fast recovery ends when either counter passes F, where the fluid model treats the two counters
apart.

DCQCN+ (`models/dcqcn_plus.py`, seed 001 section 4.3) is the same sender with three changes:

- Its notification point (`cnp_gap`, called by `receiver.py`) sends a flow at most one CNP
  per tau_c = max(cnp_interval, n / cnp_capacity), n the DCQCN+ flows its NIC receives now
  (`LF_FLOWS_IN`, counted from their start to their last acknowledgement), and the CNP carries
  tau_c (the sender reads it from the receiver's row as the CNP arrives).
- No byte counter; the rate-increase timer is K = lambda max(tau_c, MTU / R_C), rearmed after
  every expiry and cut with the current R_C.
- Expiry S since the last cut: S <= F fast recovery; F < S <= 4F raises R_T by
  min(R_C / 10, R_l / 100); S > 4F by min(R_C, (S - 4F) R_l / 100) (hyper); then R_C moves
  halfway to R_T.
"""

from __future__ import annotations

import math

from pathflow.validation.packet.events import arm_timer, push_event
from pathflow.validation.packet.jit import kernel, outlined
from pathflow.validation.packet.layout import (
    CC_DCQCN_PLUS,
    EV_WAKE,
    LF_FLOWS_IN,
    PI_REVERSE,
    PI_START,
    RF_CNP_PERIOD,
    RUNNING,
    SF_ALPHA,
    SF_ALPHA_DUE,
    SF_ALPHA_INTERVAL,
    SF_BYTE_COUNTER,
    SF_BYTES_SENT,
    SF_CNP_CAPACITY,
    SF_CNP_GAP,
    SF_CNP_INTERVAL,
    SF_CNP_PERIOD,
    SF_CNP_SEEN,
    SF_CWND,
    SF_G,
    SF_INCREASE_DUE,
    SF_LAST_CUT,
    SF_LINE_RATE,
    SF_MIN_RATE,
    SF_NEXT_SEND,
    SF_PACE_BYTES,
    SF_PACE_FROM,
    SF_RAI,
    SF_RC,
    SF_RHAI,
    SF_RL,
    SF_RT,
    SF_STAGES,
    SF_TIMER,
    SF_TIMER_GAIN,
    SI_CC,
    SI_PATH_FIRST,
    SI_PHASE,
    SI_STAGE_BYTES,
    SI_STAGE_TIMER,
    SI_WAKE_PENDING,
)

__all__ = ["cnp_gap", "on_cnp", "on_sent", "on_timer", "start", "stop"]


@kernel
def _timer_id(sim, s: int) -> int:
    return 2 * sim.senders.i.shape[0] + s  # the cc timers (layout.Sim.timers)


@kernel
def _rearm(sim, s: int) -> None:
    f = sim.senders.f
    arm_timer(sim, _timer_id(sim, s), min(f[s, SF_ALPHA_DUE], f[s, SF_INCREASE_DUE]))


@kernel
def _bounded(sim, s: int, rate: float) -> float:
    f = sim.senders.f
    return min(max(rate, f[s, SF_MIN_RATE]), f[s, SF_LINE_RATE])


@kernel
def _plus(sim, s: int) -> bool:
    return sim.senders.i[s, SI_CC] == CC_DCQCN_PLUS


@kernel
def _increase_period(sim, s: int) -> float:
    """DCQCN's fixed timer T; DCQCN+'s K = lambda max(tau_c, MTU / R_C)."""
    f = sim.senders.f
    if _plus(sim, s):
        return f[s, SF_TIMER_GAIN] * max(f[s, SF_CNP_PERIOD], sim.cfg.mss / f[s, SF_RC])
    return f[s, SF_TIMER]


@kernel
def _receiver_nic(sim, s: int) -> int:
    """The egress link of sender s's receiving host (where its CNPs leave)."""
    paths = sim.paths
    back = paths.i[sim.senders.paths[sim.senders.i[s, SI_PATH_FIRST]], PI_REVERSE]
    return paths.links[paths.i[back, PI_START]]


@kernel
def cnp_gap(sim, s: int, nic: int) -> float:
    """The notification point's least time between flow s's CNPs (its NIC: `nic`). DCQCN's
    min_time_between_cnps; DCQCN+'s period tau_c, the NIC's CNP capacity shared alike by the
    DCQCN+ flows it receives now, never below `cnp_interval`, which the CNP carries (written
    to the receiver's row)."""
    f = sim.senders.f
    if not _plus(sim, s):
        return f[s, SF_CNP_GAP]
    period = max(f[s, SF_CNP_INTERVAL], sim.links.f[nic, LF_FLOWS_IN] / f[s, SF_CNP_CAPACITY])
    sim.receivers.f[s, RF_CNP_PERIOD] = period
    return period


@outlined  # once per flow (outlined: kept out of the event loop's body and compile time)
def start(sim, s: int, now: float) -> None:
    f = sim.senders.f
    f[s, SF_CWND] = float(sim.cfg.ring)  # no window: the ring bounds what is in flight
    f[s, SF_RC] = f[s, SF_LINE_RATE]
    f[s, SF_RT] = f[s, SF_LINE_RATE]
    f[s, SF_ALPHA] = 1.0
    f[s, SF_LAST_CUT] = -math.inf
    f[s, SF_NEXT_SEND] = now
    f[s, SF_PACE_FROM] = now
    f[s, SF_PACE_BYTES] = 0.0
    f[s, SF_ALPHA_DUE] = now + f[s, SF_ALPHA_INTERVAL]
    if _plus(sim, s):
        f[s, SF_CNP_PERIOD] = f[s, SF_CNP_INTERVAL]  # until a CNP tells the incast's scale
        sim.links.f[_receiver_nic(sim, s), LF_FLOWS_IN] += 1.0
    f[s, SF_INCREASE_DUE] = now + _increase_period(sim, s)
    _rearm(sim, s)


@kernel
def stop(sim, s: int) -> None:
    """Sender s has everything acknowledged: DCQCN+'s notification point no longer counts it."""
    if _plus(sim, s):
        sim.links.f[_receiver_nic(sim, s), LF_FLOWS_IN] -= 1.0


@kernel
def _increase(sim, s: int, stage: int, now: float) -> None:
    """One expiry of the byte counter or the timer (its count at column `stage`)."""
    f, i = sim.senders.f, sim.senders.i
    i[s, stage] += 1
    if _plus(sim, s):
        past = i[s, SI_STAGE_TIMER] - f[s, SF_STAGES]  # expiries past fast recovery
        step = 0.0
        if past > 3.0 * f[s, SF_STAGES]:  # S > 4F: hyper increase
            step = min(f[s, SF_RC], (past - 3.0 * f[s, SF_STAGES]) * f[s, SF_RL] / 100.0)
        elif past > 0.0:  # F < S <= 4F: additive
            step = min(f[s, SF_RC] / 10.0, f[s, SF_RL] / 100.0)
        f[s, SF_RT] = _bounded(sim, s, f[s, SF_RT] + step)
    elif min(i[s, SI_STAGE_TIMER], i[s, SI_STAGE_BYTES]) > f[s, SF_STAGES]:  # hyper
        f[s, SF_RT] = _bounded(sim, s, f[s, SF_RT] + f[s, SF_RHAI])
    elif max(i[s, SI_STAGE_TIMER], i[s, SI_STAGE_BYTES]) >= f[s, SF_STAGES]:  # additive
        f[s, SF_RT] = _bounded(sim, s, f[s, SF_RT] + f[s, SF_RAI])
    f[s, SF_RC] = _bounded(sim, s, (f[s, SF_RT] + f[s, SF_RC]) / 2.0)
    _repace(sim, s, now)


@kernel
def _repace(sim, s: int, now: float) -> None:
    """The current rate changed: the next packet may leave PACE_BYTES / R_C after PACE_FROM,
    at once where that is earlier than planned (a NIC's rate limiter applies a new rate
    immediately; a sender cut to a low rate must not wait out that rate's long gap)."""
    f, i = sim.senders.f, sim.senders.i
    planned = f[s, SF_NEXT_SEND]
    f[s, SF_NEXT_SEND] = f[s, SF_PACE_FROM] + f[s, SF_PACE_BYTES] / f[s, SF_RC]
    if f[s, SF_NEXT_SEND] < planned and planned > now:
        i[s, SI_WAKE_PENDING] = 1
        push_event(sim, max(f[s, SF_NEXT_SEND], now), EV_WAKE, s)


@kernel
def on_sent(sim, s: int, size: float, now: float) -> None:
    """A data packet of `size` bytes left: pace the next one, count bytes."""
    f = sim.senders.f
    gap = size / f[s, SF_RC]
    f[s, SF_PACE_FROM] = max(f[s, SF_NEXT_SEND], now - gap)
    f[s, SF_PACE_BYTES] = size
    f[s, SF_NEXT_SEND] = f[s, SF_PACE_FROM] + gap
    f[s, SF_BYTES_SENT] += size
    if f[s, SF_BYTES_SENT] >= f[s, SF_BYTE_COUNTER]:
        f[s, SF_BYTES_SENT] -= f[s, SF_BYTE_COUNTER]
        _increase(sim, s, SI_STAGE_BYTES, now)


@outlined  # at most one per cnp gap and flow, as `start`
def on_cnp(sim, s: int, now: float) -> None:
    """A CNP: the alpha period remembers it; the rate is cut unless it was less than
    `cnp_interval` ago (ConnectX's rate_reduce_monitor_period)."""
    f, i = sim.senders.f, sim.senders.i
    f[s, SF_CNP_SEEN] = 1.0
    if _plus(sim, s):
        f[s, SF_CNP_PERIOD] = sim.receivers.f[s, RF_CNP_PERIOD]  # the period the CNP carries
    if now - f[s, SF_LAST_CUT] < f[s, SF_CNP_INTERVAL]:
        return
    f[s, SF_LAST_CUT] = now
    f[s, SF_RT] = f[s, SF_RC]
    f[s, SF_RC] = _bounded(sim, s, f[s, SF_RC] * (1.0 - f[s, SF_ALPHA] / 2.0))
    _repace(sim, s, now)
    f[s, SF_BYTES_SENT] = 0.0
    i[s, SI_STAGE_TIMER] = 0
    i[s, SI_STAGE_BYTES] = 0
    f[s, SF_INCREASE_DUE] = now + _increase_period(sim, s)
    _rearm(sim, s)


@outlined  # every few tens of microseconds per flow, as `start`
def on_timer(sim, s: int, now: float) -> None:
    """The alpha period or the rate-increase timer ended (both stop with the flow)."""
    f = sim.senders.f
    if sim.senders.i[s, SI_PHASE] != RUNNING:
        return
    if f[s, SF_ALPHA_DUE] <= now:
        g = f[s, SF_G]
        f[s, SF_ALPHA] = (1.0 - g) * f[s, SF_ALPHA] + g * f[s, SF_CNP_SEEN]
        f[s, SF_CNP_SEEN] = 0.0
        f[s, SF_ALPHA_DUE] += f[s, SF_ALPHA_INTERVAL]
    if f[s, SF_INCREASE_DUE] <= now:
        _increase(sim, s, SI_STAGE_TIMER, now)
        f[s, SF_INCREASE_DUE] += _increase_period(sim, s)  # DCQCN+: with the new R_C
    _rearm(sim, s)
