"""The TCP sender: what to send next, and what an ACK or a timeout does to the sender's state.

Segments are numbered 0, 1, 2, ... and all but a finite flow's last are `mss` bytes on the
wire. By default (`[transport] sack = true`, as Linux and ns-3) a window-based sender uses SACK
with RFC 6675 loss recovery (`sack.py`: the scoreboard, IsLost, pipe and NextSeg); with
`sack = false` it is NewReno (RFC 5681, RFC 6582) without SACK. Both carry the pieces of Linux
and ns-3 that shape queues at packet level (the loss items below describe NewReno; SACK
replaces duplicate-ACK counting, window inflation and partial-ACK retransmission by the
scoreboard, and restarts the RTO on every ACK of new data):

- Sending: while the flight `NXT - UNA` (less the segments that duplicate ACKs report as
  received, i.e. limited transmit, RFC 3042) is below cwnd, and below the receive ring
  (`ring - 1` segments, a receive-window cap).
- Growth: slow start and congestion avoidance through `cc.window_increase`, only while the
  window limits the sender (flight >= cwnd, or in slow start cwnd < 2 flight: Linux's
  tcp_is_cwnd_limited). A sender held back by its NIC does not grow its window, as in the
  fluid model.
- Loss: `SI_REORDERING` (3) duplicate ACKs trigger fast retransmit, ssthresh =
  max(cwnd * loss_factor, min_cwnd), cwnd = ssthresh + duplicates, +1 per further duplicate
  (window inflation); a partial ACK retransmits the next hole and deflates the window, the
  first one restarts the RTO (the "impatient" variant, as ns-3); the full ACK ends recovery
  with cwnd = ssthresh. ACKs that only report a duplicate segment (D-SACK) are not duplicate
  ACKs.
- Reordering (per-packet spraying): when D-SACKs show that every retransmission of a fast
  recovery was a copy of data that had arrived after all, the reduction is undone and the
  duplicate-ACK threshold is raised to the reordering seen, at most 300 (Linux's D-SACK undo
  and tcp_reordering).
- ECN: an echo on an ACK of new data in the Open state sets ssthresh = max(cwnd *
  mark_factor, min_cwnd) and enters CWR: the window shrinks to ssthresh over the round trip by
  proportional rate reduction (RFC 6937, as Linux and ns-3), with no growth and no further
  reduction until an ACK passes everything sent before the echo (ack > RECOVER: Linux's
  tcp_fastretrans_alert holds CWR until something above high_seq is acknowledged, and ns-3
  does the same), when cwnd = ssthresh; an echo on that ACK starts the next reduction at once
  (tcp_try_to_open), so under persistent marking the window stays at min_cwnd. Both details
  matter at packet level: with an immediate cut, or with an exit at ack = RECOVER, DCTCP's
  queue in the ns-3 cross-checks sat 1 to 2 packets off ns-3's.
- Timeout (RFC 6298: srtt, rttvar, RTO = max(min_rto, srtt + 4 rttvar), doubled per
  consecutive timeout, Karn's rule for samples): ssthresh = max(cwnd * loss_factor, min_cwnd)
  if it strikes in the Open state (Linux: a window already reduced in recovery or CWR, or by
  an earlier timeout, is not reduced again), cwnd = 1 segment, go-back-N from UNA (with SACK,
  skipping what the scoreboard holds). min_rto is `[transport] rto_min` (default 200 ms).
  `timeouts` and `recoveries` in the Dataset count the timeouts and fast recoveries.

A rate-based sender (DCQCN, `dcqcn.py`) has no window: it sends when its pacing allows, its
ECN echoes are CNPs to its reaction point, and losses are repaired as NewReno does without
cutting anything (never with SACK: RoCE NICs have none).

The connection is taken as established when the flow starts (no handshake); the RTT estimator
starts from the path's base RTT, the sample a handshake would have given.

Rounds (`[traffic] rounds`, `rounds.py`): a sender holds only its current round's block
(`SI_SEGMENTS` grows by a block when its group's barrier releases the next round), so it never
sends ahead of the barrier; with the round's block acknowledged it is idle (no timer) but not
done until its last round's is. A sender idle for an RTO or more restarts its window when the
next round starts (ssthresh = max(ssthresh, 3/4 cwnd), cwnd = min(cwnd, init_cwnd): Linux's
tcp_slow_start_after_idle, RFC 5681 section 4.1); a rate-based sender just resumes.

MPTCP: each subflow is one such sender, with its own sequence numbers, window, RTT estimator,
recovery and timer (`cc` couples their windows). A finite connection's segments are shared: a
subflow whose window lets it send new data takes the connection's next segment not yet given to
any subflow (`SI_CONN_UNASSIGNED`, kept in the row of the connection's first subflow), so the
subflows that the NIC serves take them in turn; when none is left it sends no new data, and it
is done when what it took is acknowledged and nothing is left to take. There is no
connection-level (data-sequence) retransmission: a segment lost on a subflow is recovered on
that subflow, as a subflow that stays up in Linux does.
"""

from __future__ import annotations

import math

import numpy as np

from pathflow.validation.packet import cc, dcqcn, rack, sack
from pathflow.validation.packet.events import arm_timer, cancel_timer, push_event
from pathflow.validation.packet.jit import kernel, outlined
from pathflow.validation.packet.layout import (
    CA_CWR,
    CA_LOSS,
    CA_OPEN,
    CA_RECOVERY,
    DATA,
    DONE,
    EV_WAKE,
    PK_SACK,
    RUNNING,
    SF_BASE_RTT,
    SF_CONN_LAST_BYTES,
    SF_CWND,
    SF_EPISODE_START,
    SF_LAST_BYTES,
    SF_LAST_SEND,
    SF_NEXT_SEND,
    SF_PRIOR_CWND,
    SF_PRIOR_SSTHRESH,
    SF_PRR_DELIVERED,
    SF_PRR_OUT,
    SF_RACK_WAIT,
    SF_RECOVER_FS,
    SF_RECOVERIES,
    SF_RESENT_BYTES,
    SF_RTO,
    SF_RTT_COUNT,
    SF_RTT_LAST,
    SF_RTT_SUM,
    SF_RTTVAR,
    SF_SENT_BYTES,
    SF_SRTT,
    SF_SSTHRESH,
    SF_TIMEOUTS,
    SI_BACKOFF,
    SI_CA,
    SI_CONN_FIRST,
    SI_CONN_UNASSIGNED,
    SI_DUPACKS,
    SI_ECT,
    SI_EPISODE_DUPACKS,
    SI_FIRST_PARTIAL,
    SI_HIGH,
    SI_NEXT_LOST,
    SI_NXT,
    SI_PATH_END,
    SI_PATH_FIRST,
    SI_PHASE,
    SI_PIPE,
    SI_PROBE,
    SI_RECOVER,
    SI_RECOVER_ACTIVE,
    SI_REORDERING,
    SI_ROUND,
    SI_ROUNDS,
    SI_RTX,
    SI_SACKED,
    SI_SEGMENTS,
    SI_TIMER_KIND,
    SI_TLP_HIGH,
    SI_UNA,
    SI_UNDO_RETRANS,
    SI_WAKE_PENDING,
    TK_PROBE,
    TK_REORDER,
    TK_RTO,
    TM_DEADLINE,
)
from pathflow.validation.packet.packets import new_packet
from pathflow.validation.packet.rounds import segment_bytes

__all__ = ["can_send", "emit", "on_ack", "on_timeout", "start_flow"]

MAX_REORDERING = 300  # Linux tcp_max_reordering


@kernel
def _update_rto(sim, s: int, sample: float) -> None:
    """RFC 6298 estimator; the timeout is not backed off after a fresh sample."""
    f = sim.senders.f
    if f[s, SF_SRTT] <= 0.0:
        f[s, SF_SRTT] = sample
        f[s, SF_RTTVAR] = sample / 2.0
    else:
        f[s, SF_RTTVAR] = 0.75 * f[s, SF_RTTVAR] + 0.25 * abs(f[s, SF_SRTT] - sample)
        f[s, SF_SRTT] = 0.875 * f[s, SF_SRTT] + 0.125 * sample
    rto = f[s, SF_SRTT] + 4.0 * f[s, SF_RTTVAR]
    f[s, SF_RTO] = min(max(rto, sim.cfg.min_rto), sim.cfg.max_rto)


@kernel
def start_flow(sim, s: int, now: float) -> None:
    f, cfg = sim.senders.f, sim.cfg
    sim.senders.i[s, SI_PHASE] = RUNNING
    f[s, SF_CWND] = cfg.init_cwnd
    f[s, SF_SSTHRESH] = cfg.ssthresh
    _update_rto(sim, s, f[s, SF_BASE_RTT])
    if cc.rate_based(sim, s):
        dcqcn.start(sim, s, now)


@kernel
def _unassigned(sim, s: int) -> int:
    """Segments of sender s's connection that no subflow has taken yet."""
    return sim.senders.i[sim.senders.i[s, SI_CONN_FIRST], SI_CONN_UNASSIGNED]


@kernel
def _take_segment(sim, s: int) -> None:
    """Subflow s takes its connection's next segment; the last one carries the connection's
    last bytes."""
    i = sim.senders.i
    first = i[s, SI_CONN_FIRST]
    i[first, SI_CONN_UNASSIGNED] -= 1
    i[s, SI_SEGMENTS] += 1
    if i[first, SI_CONN_UNASSIGNED] == 0:
        sim.senders.f[s, SF_LAST_BYTES] = sim.senders.f[s, SF_CONN_LAST_BYTES]


@kernel
def can_send(sim, s: int, now: float) -> bool:
    """Whether sender s has a segment it may put on the wire now."""
    f, i = sim.senders.f, sim.senders.i
    if i[s, SI_PHASE] != RUNNING:
        return False
    ready = f[s, SF_NEXT_SEND]
    if ready > now:  # paced (rate-based senders): ask to be woken
        if i[s, SI_WAKE_PENDING] == 0:
            i[s, SI_WAKE_PENDING] = 1
            push_event(sim, ready, EV_WAKE, s)
        return False
    if i[s, SI_RTX] >= 0:
        return True
    selective = sack.enabled(sim, s)
    sack_recovery = selective and i[s, SI_CA] == CA_RECOVERY
    if sack_recovery:  # RFC 6675: send while cwnd - pipe >= 1, lost segments first
        if f[s, SF_CWND] - i[s, SI_PIPE] < 1.0:
            return False
        if i[s, SI_NEXT_LOST] >= 0:
            return True
    nxt = i[s, SI_NXT]
    window = min(int(f[s, SF_CWND]), sim.cfg.ring - 1)
    if nxt >= i[s, SI_SEGMENTS] and _unassigned(sim, s) == 0:
        return False  # all its own data sent, and none of its connection's left to take
    if nxt - i[s, SI_UNA] >= sim.cfg.ring - 1:
        return False
    if sack_recovery:
        return True  # new data (NextSeg rule 2)
    if selective and i[s, SI_CA] == CA_LOSS:
        return sack.loss_flight(sim, s) < window
    flight = nxt - i[s, SI_UNA]
    if i[s, SI_CA] != CA_RECOVERY:
        flight -= i[s, SI_SACKED]  # limited transmit: those have left the network
    return flight < window or i[s, SI_PROBE] != 0  # or a tail loss probe beyond the window


@kernel
def _choose_path(sim, s: int) -> int:
    snd = sim.senders
    first, last = snd.i[s, SI_PATH_FIRST], snd.i[s, SI_PATH_END]
    if last - first == 1:
        return snd.paths[first]
    u = np.random.random()
    for k in range(first, last - 1):  # per-packet spraying by split weight
        if u < snd.cumweight[k]:
            return snd.paths[k]
    return snd.paths[last - 1]


@kernel
def emit(sim, s: int, now: float) -> int:
    """The next data packet of sender s (call only when `can_send`); -1 if the pool is empty."""
    f, i, cfg = sim.senders.f, sim.senders.i, sim.cfg
    seq = i[s, SI_RTX]
    sack_recovery = sack.enabled(sim, s) and i[s, SI_CA] == CA_RECOVERY
    if seq >= 0:
        i[s, SI_RTX] = -1
    elif sack_recovery and i[s, SI_NEXT_LOST] >= 0:
        seq = i[s, SI_NEXT_LOST]
    else:
        seq = i[s, SI_NXT]
        i[s, SI_NXT] = seq + 1
        if seq >= i[s, SI_SEGMENTS]:
            _take_segment(sim, s)
        if sack.enabled(sim, s):
            sack.skip_sacked(sim, s)
    size = segment_bytes(sim, s, seq)
    path = _choose_path(sim, s)
    p = new_packet(sim, DATA, s, seq, size, path, i[s, SI_ECT])
    if p < 0:
        return -1
    sim.senders.path_sent[path] += size
    slot = seq & (cfg.ring - 1)
    sim.senders.sent_at[s, slot] = now
    sim.senders.resent[s, slot] = 1 if seq < i[s, SI_HIGH] else 0
    if seq >= i[s, SI_HIGH]:
        i[s, SI_HIGH] = seq + 1
    elif i[s, SI_CA] == CA_RECOVERY and i[s, SI_UNDO_RETRANS] >= 0:
        i[s, SI_UNDO_RETRANS] += 1
    if i[s, SI_CA] == CA_CWR or sack_recovery:
        f[s, SF_PRR_OUT] += 1.0
    if sack_recovery:
        i[s, SI_PIPE] += 1
        if seq == i[s, SI_NEXT_LOST]:
            sack.advance_lost(sim, s, seq)
    f[s, SF_SENT_BYTES] += size
    f[s, SF_LAST_SEND] = now
    if sim.senders.resent[s, slot]:  # sent before: a retransmission
        f[s, SF_RESENT_BYTES] += size
    if cc.rate_based(sim, s):
        dcqcn.on_sent(sim, s, size, now)
    if sim.timers[s, TM_DEADLINE] == math.inf:  # RFC 6298 (5.1): start the timer if it is off
        _arm_rto(sim, s, now)
    if rack.enabled(sim, s):
        rack.sent(sim, s, now)
    return p


@kernel
def _arm_rto(sim, s: int, now: float) -> None:
    sim.senders.i[s, SI_TIMER_KIND] = TK_RTO
    arm_timer(sim, s, now + sim.senders.f[s, SF_RTO])


@kernel
def _rtt_sample(sim, s: int, ack: int, now: float) -> None:
    snd = sim.senders
    slot = (ack - 1) & (sim.cfg.ring - 1)
    if snd.resent[s, slot]:
        return  # Karn: ambiguous
    sample = now - snd.sent_at[s, slot]
    _update_rto(sim, s, sample)
    snd.f[s, SF_RTT_SUM] += sample
    snd.f[s, SF_RTT_COUNT] += 1.0
    snd.f[s, SF_RTT_LAST] = sample


@outlined  # once per loss episode: not worth a copy in the event loop's body
def _enter_recovery(sim, s: int, now: float) -> None:
    """Fast retransmit (RFC 6582 step 2). Coming from CWR the window was already reduced for
    this episode, so ssthresh stays (Linux: no second reduction)."""
    f, i = sim.senders.f, sim.senders.i
    cc.on_congestion(sim, s)
    f[s, SF_RECOVERIES] += 1.0
    f[s, SF_PRIOR_CWND] = f[s, SF_CWND]
    f[s, SF_PRIOR_SSTHRESH] = f[s, SF_SSTHRESH]
    if i[s, SI_CA] != CA_CWR:
        f[s, SF_SSTHRESH] = max(f[s, SF_CWND] * cc.loss_factor(sim, s), sim.cfg.min_cwnd)
        _start_prr(sim, s)  # from CWR the reduction goes on (Linux's tcp_enter_recovery)
    i[s, SI_CA] = CA_RECOVERY
    i[s, SI_RECOVER] = i[s, SI_HIGH]
    i[s, SI_RECOVER_ACTIVE] = 1
    i[s, SI_FIRST_PARTIAL] = 1
    i[s, SI_UNDO_RETRANS] = 0
    i[s, SI_EPISODE_DUPACKS] = i[s, SI_DUPACKS]
    f[s, SF_EPISODE_START] = now
    i[s, SI_RTX] = i[s, SI_UNA]
    if sack.enabled(sim, s):  # RFC 6675: cwnd = ssthresh, then send while cwnd - pipe >= 1
        f[s, SF_CWND] = f[s, SF_SSTHRESH]
        sack.update_recovery(sim, s)
        if rack.enabled(sim, s):  # the first segment RACK found lost, at once
            i[s, SI_RTX] = i[s, SI_NEXT_LOST]
    else:
        i[s, SI_SACKED] = 0
        f[s, SF_CWND] = f[s, SF_SSTHRESH] + i[s, SI_DUPACKS]


@kernel
def _retransmitted_in_episode(sim, s: int, seq: int) -> bool:
    """Whether the last transmission of `seq` was a retransmission of the current (or last)
    fast recovery, so that a D-SACK for it proves that retransmission unnecessary."""
    snd = sim.senders
    if seq < snd.i[s, SI_UNA] - sim.cfg.ring + 1 or seq >= snd.i[s, SI_HIGH]:
        return False
    slot = seq & (sim.cfg.ring - 1)
    return snd.resent[s, slot] == 1 and snd.sent_at[s, slot] >= snd.f[s, SF_EPISODE_START]


@outlined  # rare (a spurious recovery), as `_enter_recovery`
def _undo(sim, s: int) -> None:
    """Every retransmission of the last fast recovery reached the receiver as a duplicate: the
    "loss" was reordering. Restore the window and raise the duplicate-ACK threshold to the
    reordering seen (Linux's D-SACK undo and tcp_reordering, at most MAX_REORDERING)."""
    f, i = sim.senders.f, sim.senders.i
    f[s, SF_CWND] = max(f[s, SF_CWND], f[s, SF_PRIOR_CWND])
    f[s, SF_SSTHRESH] = max(f[s, SF_SSTHRESH], f[s, SF_PRIOR_SSTHRESH])
    seen = i[s, SI_EPISODE_DUPACKS] + 1
    i[s, SI_REORDERING] = min(max(i[s, SI_REORDERING], seen), MAX_REORDERING)
    i[s, SI_UNDO_RETRANS] = -1
    if i[s, SI_CA] == CA_RECOVERY or i[s, SI_CA] == CA_CWR:  # withdraw the reduction
        i[s, SI_CA] = CA_OPEN
        i[s, SI_RECOVER_ACTIVE] = 0


@kernel
def _on_dupack(sim, s: int, now: float) -> None:
    f, i = sim.senders.f, sim.senders.i
    ca = i[s, SI_CA]
    if ca == CA_LOSS:
        return  # after a timeout duplicates are ambiguous (ns-3, RFC 6582 without SACK)
    selective = sack.enabled(sim, s)
    if ca == CA_RECOVERY:
        if not selective:  # with SACK, pipe counts what has left the network
            f[s, SF_CWND] += 1.0  # window inflation: one more segment has left the network
        i[s, SI_EPISODE_DUPACKS] += 1
        return
    i[s, SI_DUPACKS] += 1
    if selective:
        return  # on_ack asks the scoreboard (IsLost(UNA)) on every ACK
    i[s, SI_SACKED] += 1
    if i[s, SI_DUPACKS] == i[s, SI_REORDERING] and _fresh(sim, s):
        _enter_recovery(sim, s, now)


@kernel
def _fresh(sim, s: int) -> bool:
    """No loss episode is still being acknowledged (RFC 6582's guard against a second
    reduction for the same losses)."""
    i = sim.senders.i
    return i[s, SI_RECOVER_ACTIVE] == 0 or i[s, SI_UNA] >= i[s, SI_RECOVER]


@kernel
def _on_ecn_echo(sim, s: int) -> None:
    """Enter CWR: the window is to shrink to ssthresh = max(cwnd * mark_factor, min_cwnd) over
    the next round trip (proportional rate reduction, `_prr`)."""
    f, i = sim.senders.f, sim.senders.i
    cc.on_congestion(sim, s)
    f[s, SF_SSTHRESH] = max(f[s, SF_CWND] * cc.mark_factor(sim, s), sim.cfg.min_cwnd)
    i[s, SI_CA] = CA_CWR
    i[s, SI_RECOVER] = i[s, SI_HIGH]
    _start_prr(sim, s)


@kernel
def _start_prr(sim, s: int) -> None:
    f, i = sim.senders.f, sim.senders.i
    f[s, SF_PRR_DELIVERED] = 0.0
    f[s, SF_PRR_OUT] = 0.0
    f[s, SF_RECOVER_FS] = i[s, SI_NXT] - i[s, SI_UNA]


@kernel
def _prr(sim, s: int, delivered: int, flight: int) -> None:
    """Proportional rate reduction (RFC 6937, as ns-3's TcpPrrRecovery and Linux's
    tcp_cwnd_reduction): while the `flight` exceeds ssthresh, send ssthresh / RecoverFS segments
    per segment delivered; below it, catch up at most as fast as data is delivered (the
    conservative bound). At least one segment when the reduction starts."""
    f = sim.senders.f
    f[s, SF_PRR_DELIVERED] += delivered
    ssthresh = f[s, SF_SSTHRESH]
    if flight > ssthresh:
        quota = f[s, SF_PRR_DELIVERED] * ssthresh / max(f[s, SF_RECOVER_FS], 1.0)
        send = math.ceil(quota - 1e-9) - f[s, SF_PRR_OUT]
    else:
        send = min(ssthresh - flight, max(f[s, SF_PRR_DELIVERED] - f[s, SF_PRR_OUT], delivered))
    if f[s, SF_PRR_OUT] == 0.0:
        send = max(send, 1.0)
    f[s, SF_CWND] = flight + max(send, 0.0)


@kernel
def on_ack(sim, s: int, ack: int, ece: int, dsack: int, p: int, now: float) -> None:
    """An ACK (packet p; cumulative: the next segment the receiver expects; `dsack`: it reports
    a duplicate segment; with SACK its blocks) reaches sender s."""
    f, i = sim.senders.f, sim.senders.i
    if i[s, SI_PHASE] != RUNNING:
        return
    if dsack and i[s, SI_UNDO_RETRANS] > 0 and _retransmitted_in_episode(sim, s, dsack - 1):
        i[s, SI_UNDO_RETRANS] -= 1
        if i[s, SI_UNDO_RETRANS] == 0:
            _undo(sim, s)
    una = i[s, SI_UNA]
    if ack < una:
        return  # stale
    acked = ack - una
    selective = sack.enabled(sim, s)
    linux = rack.enabled(sim, s)  # with SACK only
    sacked_before = i[s, SI_SACKED]
    if selective:
        if acked > 0 and linux:
            _rack_delivered(sim, s, una, ack, now)
        if acked > 0 and i[s, SI_SACKED] > 0:
            sack.clear_acked(sim, s, una, ack)
        if sim.packets.i[p, PK_SACK + 1] > 0:
            sack.on_blocks(sim, s, p, ack, now)
    cwnd = f[s, SF_CWND]
    flight = i[s, SI_NXT] - una
    limited = flight >= int(cwnd) or (cwnd < f[s, SF_SSTHRESH] and cwnd < 2 * flight)
    if i[s, SI_CA] == CA_CWR and ack > i[s, SI_RECOVER]:
        i[s, SI_CA] = CA_OPEN  # everything sent before the reduction is acknowledged (ns-3)
        f[s, SF_CWND] = f[s, SF_SSTHRESH]
    if cc.rate_based(sim, s):
        if ece:
            dcqcn.on_cnp(sim, s, now)  # every echo is a CNP (receiver.py paces them)
    elif acked > 0 and ece and i[s, SI_ECT] and i[s, SI_CA] == CA_OPEN:
        _on_ecn_echo(sim, s)
    i[s, SI_UNA] = ack
    if i[s, SI_NXT] < ack:
        i[s, SI_NXT] = ack  # go-back-N: the receiver already held these
        if selective:
            sack.skip_sacked(sim, s)
    if i[s, SI_CA] == CA_CWR:
        _prr(sim, s, max(acked, 1), i[s, SI_NXT] - i[s, SI_UNA])
    cc.on_ack(sim, s, max(acked, 1), ece, ack)
    if acked == 0:
        if i[s, SI_HIGH] > una and not dsack:  # a D-SACK reports a copy, not new data
            _on_dupack(sim, s, now)
        if selective:
            _sack_progress(sim, s, now)
            if linux:
                _recovery_prr(sim, s, i[s, SI_SACKED] - sacked_before)
                rack.arm(sim, s, now)
        return
    if linux and ack >= i[s, SI_TLP_HIGH] >= 0:
        i[s, SI_TLP_HIGH] = -1  # the probe's episode is over
    # new data acknowledged
    if not selective:
        i[s, SI_SACKED] = 0
    _rtt_sample(sim, s, ack, now)
    i[s, SI_BACKOFF] = 0
    if i[s, SI_RECOVER_ACTIVE] and ack >= i[s, SI_RECOVER]:
        i[s, SI_RECOVER_ACTIVE] = 0
    restart_rto = True
    ca = i[s, SI_CA]
    if ca == CA_RECOVERY:
        if selective and ack < i[s, SI_RECOVER]:
            pass  # the scoreboard tells what is lost (_sack_progress); RFC 6298 restart
        elif ack < i[s, SI_RECOVER]:  # partial ACK: the next hole is lost too
            i[s, SI_RTX] = ack
            f[s, SF_CWND] = max(f[s, SF_CWND] - acked + 1.0, 1.0)
            restart_rto = i[s, SI_FIRST_PARTIAL] == 1
            i[s, SI_FIRST_PARTIAL] = 0
        else:
            i[s, SI_CA] = CA_OPEN
            f[s, SF_CWND] = f[s, SF_SSTHRESH]
            i[s, SI_DUPACKS] = 0
    else:
        i[s, SI_DUPACKS] = 0
        if ca == CA_LOSS and ack >= i[s, SI_RECOVER]:
            i[s, SI_CA] = CA_OPEN
    ca = i[s, SI_CA]
    if (ca in (CA_OPEN, CA_LOSS)) and limited:
        cc.window_increase(sim, s, acked)
    if selective:
        _sack_progress(sim, s, now)
        if linux:
            _recovery_prr(sim, s, acked + i[s, SI_SACKED] - sacked_before)
    if ack >= i[s, SI_SEGMENTS] and _unassigned(sim, s) == 0 \
            and i[s, SI_ROUND] + 1 >= i[s, SI_ROUNDS]:  # else idle until its next round
        i[s, SI_PHASE] = DONE
        cancel_timer(sim, s)
        if cc.rate_based(sim, s):
            dcqcn.stop(sim, s)
    elif ack >= i[s, SI_HIGH] and i[s, SI_RTX] < 0:
        cancel_timer(sim, s)  # nothing outstanding
    else:
        if restart_rto:
            _arm_rto(sim, s, now)
        if linux:
            rack.arm(sim, s, now)


@outlined  # RACK only, once per ACK of new data
def _rack_delivered(sim, s: int, una: int, ack: int, now: float) -> None:
    """The cumulative ACK passed [una, ack): RACK learns of those not SACKed before."""
    sacked, mask = sim.senders.sacked, sim.cfg.ring - 1
    for seq in range(una, ack):
        if sacked[s, seq & mask] == 0:
            rack.delivered(sim, s, seq, now)


@outlined  # Linux's recovery only: the event loop's body stays as it was without it
def _recovery_prr(sim, s: int, delivered: int) -> None:
    """Linux's recovery (`rack.py`): in SACK recovery the window follows PRR too, cwnd = pipe
    + what PRR lets go for the segments this ACK delivered (acknowledged or SACKed)."""
    if sim.senders.i[s, SI_CA] == CA_RECOVERY and delivered > 0:
        _prr(sim, s, delivered, sim.senders.i[s, SI_PIPE])


@kernel
def _sack_progress(sim, s: int, now: float) -> None:
    """After an ACK's scoreboard update: start RFC 6675 recovery when UNA is lost (DupThresh
    segments SACKed above it), or refresh pipe and NextSeg during recovery."""
    i = sim.senders.i
    ca = i[s, SI_CA]
    if rack.enabled(sim, s):
        _rack_progress(sim, s, now)
    elif ca == CA_RECOVERY:
        sack.update_recovery(sim, s)
    elif ca in (CA_OPEN, CA_CWR) and i[s, SI_SACKED] >= i[s, SI_REORDERING] \
            and i[s, SI_HIGH] > i[s, SI_UNA] and _fresh(sim, s):
        _enter_recovery(sim, s, now)


@outlined  # Linux's recovery only, once per ACK
def _rack_progress(sim, s: int, now: float) -> None:
    """`_sack_progress` with RACK: RACK decides what is lost, and recovery starts on its first
    loss."""
    i = sim.senders.i
    ca = i[s, SI_CA]
    if i[s, SI_SACKED] == 0 and ca != CA_RECOVERY:
        sim.senders.f[s, SF_RACK_WAIT] = math.inf  # no hole: nothing awaits its window
    elif ca == CA_RECOVERY:
        rack.detect(sim, s, now)
        sack.update_recovery(sim, s)
    elif ca in (CA_OPEN, CA_CWR) and i[s, SI_HIGH] > i[s, SI_UNA] \
            and rack.detect(sim, s, now) and _fresh(sim, s):
        _enter_recovery(sim, s, now)


@outlined  # rare, as `_enter_recovery`
def on_timeout(sim, s: int, now: float) -> None:
    """The retransmission timer of sender s fired (or, with RACK-TLP, what it stands for:
    the reordering window or the probe timeout)."""
    f, i, cfg = sim.senders.f, sim.senders.i, sim.cfg
    una = i[s, SI_UNA]
    if i[s, SI_PHASE] != RUNNING or una >= i[s, SI_HIGH]:
        return
    kind = i[s, SI_TIMER_KIND]
    if kind == TK_PROBE:
        rack.on_probe_timer(sim, s, now)
        return
    if kind == TK_REORDER:
        f[s, SF_RACK_WAIT] = math.inf
        _sack_progress(sim, s, now)
        _arm_rto(sim, s, now)
        rack.arm(sim, s, now)
        return
    i[s, SI_TLP_HIGH] = -1  # RACK-TLP: a timeout ends the probe's episode and any wait
    f[s, SF_RACK_WAIT] = math.inf
    cc.on_congestion(sim, s)
    f[s, SF_TIMEOUTS] += 1.0
    if i[s, SI_CA] == CA_OPEN:
        # Linux's tcp_enter_loss: reduce from the Open state only. During recovery or CWR the
        # window was already reduced for this episode (and cwnd is inflated), and repeated
        # timeouts hold ssthresh (RFC 5681).
        f[s, SF_SSTHRESH] = max(f[s, SF_CWND] * cc.loss_factor(sim, s), cfg.min_cwnd)
    f[s, SF_CWND] = 1.0  # the loss window
    i[s, SI_CA] = CA_LOSS
    i[s, SI_UNDO_RETRANS] = -1
    if not sack.enabled(sim, s):  # with SACK the scoreboard stays (no reneging)
        i[s, SI_SACKED] = 0
    i[s, SI_RECOVER] = i[s, SI_HIGH]
    i[s, SI_RECOVER_ACTIVE] = 1
    i[s, SI_NXT] = una
    i[s, SI_RTX] = -1
    i[s, SI_DUPACKS] = 0
    i[s, SI_BACKOFF] += 1
    f[s, SF_RTO] = min(2.0 * f[s, SF_RTO], cfg.max_rto)
    _arm_rto(sim, s, now)
