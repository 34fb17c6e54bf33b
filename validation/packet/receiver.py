"""The TCP receiver: in-order delivery, delayed ACKs and DCTCP's congestion echo.

- In-order data advances `RI_NXT` (through any out-of-order segments already held, kept in a
  ring of `ring` slots) and counts as delivered to the application. An ACK goes out every
  `delayed_ack` in-order segments, or when the delayed-ACK timer (`delack_timeout`) expires.
- Out-of-order or duplicate data, and data that fills a hole, are acknowledged at once
  (RFC 5681 section 4.2), so that the sender sees duplicate ACKs. With SACK (`sack.py`) every
  ACK carries the 3 most recent blocks of data held above the cumulative ACK (RFC 2018).
- ECN (ECN-capable flows): every ACK carries ECE = the CE bit of the last data packet; when that
  bit changes while an ACK is being delayed, the pending segments are acknowledged at once with
  the old value (DCTCP's receiver state machine, RFC 8257 section 3.2; ns-3 TcpDctcp). Classic
  ECN senders (Reno) react once per window whichever echo scheme the receiver uses.
- DCQCN's notification point: a CE-marked arrival makes the receiver send a CNP (an ACK with
  ECE, at once) unless it sent one less than `min_time_between_cnps` ago (per flow) or the
  receiving NIC has sent its `cnp_capacity` (CNPs per microsecond, shared by its flows: the
  next CNP may leave 1 / capacity after the last); no other ACK of a DCQCN flow echoes
  anything. DCQCN+'s notification point spaces a flow's CNPs by its adaptive period instead
  (`dcqcn.cnp_gap`) and writes that period into the CNP.
- Every ACK is `ack_bytes` on the wire and returns along the reverse of the path of the data
  packet that triggered it.
- MPTCP: one receiver per subflow (its own in-order delivery and ACKs). The connection's
  reassembly is simplified to a count: the connection has delivered the sum of its subflows'
  in-order bytes, and it completes when all its segments have been delivered (the last
  subflow's last segment), with no connection-level head-of-line blocking and no meta-buffer
  (receive-window) limit.
- Rounds (`rounds.py`): when in-order delivery completes a block of a flow with rounds, the
  receiver records the time and counts the flow in its group's barrier, which releases the
  group's next round once every flow has the current round's block.
"""

from __future__ import annotations

import math

import numpy as np

from pathflow.validation.packet import dcqcn, sack
from pathflow.validation.packet.cc import rate_based
from pathflow.validation.packet.events import arm_timer, cancel_timer
from pathflow.validation.packet.jit import kernel, outlined
from pathflow.validation.packet.layout import (
    ACK,
    LF_CNP_NEXT,
    PI_REVERSE,
    PI_START,
    PK_DSACK,
    PK_ECE,
    RF_COMPLETION,
    RF_DELIVERED,
    RF_LAST_CNP,
    RI_CE,
    RI_CONN_DELIVERED,
    RI_NXT,
    RI_OOO,
    RI_PATH,
    RI_PENDING,
    SF_CNP_CAPACITY,
    SI_BLOCK,
    SI_CONN_END,
    SI_CONN_FIRST,
    SI_CONN_SEGMENTS,
    SI_ECT,
    TM_DEADLINE,
)
from pathflow.validation.packet.links import enqueue
from pathflow.validation.packet.packets import new_packet
from pathflow.validation.packet.rounds import block_arrived, segment_bytes

__all__ = ["on_data", "on_delack_timer", "send_ack"]

# Arguments of `_send_ack_outlined` as numpy scalars: numba would compile the outlined
# function once per distinct plain-int constant (see layout's note on literals).
_NO_DSACK, _ECE = np.int64(0), np.int64(1)


@kernel
def _delack_timer(sim, s: int) -> int:
    return sim.senders.i.shape[0] + s


@kernel
def send_ack(sim, s: int, ece: int, dsack: int, now: float) -> None:
    """Acknowledge everything received in order so far; `dsack`: 1 + the segment that just
    arrived a second time (0: none)."""
    ri, paths = sim.receivers.i, sim.paths
    back = paths.i[ri[s, RI_PATH], PI_REVERSE]
    p = new_packet(sim, ACK, s, ri[s, RI_NXT], sim.cfg.ack_bytes, back,
                   sim.senders.i[s, SI_ECT])
    if p < 0:
        return
    sim.packets.i[p, PK_ECE] = ece
    sim.packets.i[p, PK_DSACK] = dsack
    if sack.enabled(sim, s):
        sack.write_blocks(sim, s, p)
    ri[s, RI_PENDING] = 0
    cancel_timer(sim, _delack_timer(sim, s))
    enqueue(sim, paths.links[paths.i[back, PI_START]], p, now)


@outlined
def _send_ack_outlined(sim, s: int, ece: int, dsack: int, now: float) -> None:
    """`send_ack` for the rare callers (CNPs, the delayed-ACK timer): one compiled copy that
    they call, rather than one inlined into the event loop at each of them."""
    send_ack(sim, s, ece, dsack, now)


@kernel
def _deliver(sim, s: int, seq: int, now: float) -> None:
    rf, si = sim.receivers.f, sim.senders.i
    rf[s, RF_DELIVERED] += segment_bytes(sim, s, seq)
    first = si[s, SI_CONN_FIRST]
    sim.receivers.i[first, RI_CONN_DELIVERED] += 1
    delivered = sim.receivers.i[first, RI_CONN_DELIVERED]
    if si[s, SI_BLOCK] > 0 and delivered % si[s, SI_BLOCK] == 0:
        block_arrived(sim, s, now)  # a round's block is in: the group's barrier counts it
    if delivered == si[s, SI_CONN_SEGMENTS]:
        for k in range(first, si[s, SI_CONN_END]):  # the connection's last segment
            rf[k, RF_COMPLETION] = now


@kernel
def _notify(sim, s: int, now: float) -> None:
    """DCQCN's notification point saw a CE mark for flow s: a CNP, unless the flow had one less
    than its gap ago (`dcqcn.cnp_gap`: min_time_between_cnps, or DCQCN+'s period) or the
    receiving NIC has no CNP capacity left (a CNP it cannot send now is not sent)."""
    rf, sf, paths = sim.receivers.f, sim.senders.f, sim.paths
    back = paths.i[sim.receivers.i[s, RI_PATH], PI_REVERSE]
    nic = paths.links[paths.i[back, PI_START]]
    gap = dcqcn.cnp_gap(sim, s, nic)
    if now - rf[s, RF_LAST_CNP] < gap or now < sim.links.f[nic, LF_CNP_NEXT]:
        return
    sim.links.f[nic, LF_CNP_NEXT] = now + 1.0 / sf[s, SF_CNP_CAPACITY]
    rf[s, RF_LAST_CNP] = now
    _send_ack_outlined(sim, s, _ECE, _NO_DSACK, now)


@kernel
def on_data(sim, s: int, seq: int, ce: int, path: int, now: float) -> None:
    """Data segment `seq` of sender s arrives (CE bit `ce`, over `path`)."""
    ri, have, cfg = sim.receivers.i, sim.receivers.have, sim.cfg
    ecn = sim.senders.i[s, SI_ECT] != 0
    ri[s, RI_PATH] = path
    if rate_based(sim, s):  # notification point: a CNP, or no echo at all
        ecn = False
        if ce:
            _notify(sim, s, now)
    if ecn and ce != ri[s, RI_CE]:
        if ri[s, RI_PENDING] > 0:
            send_ack(sim, s, ri[s, RI_CE], 0, now)  # acknowledge the pending data, old echo
        ri[s, RI_CE] = ce
    echo = ri[s, RI_CE] if ecn else 0
    nxt = ri[s, RI_NXT]
    mask = cfg.ring - 1
    ack_now, dsack = True, 0  # one send_ack below for the three cases (one inlined copy)
    if seq == nxt:
        filled_hole = ri[s, RI_OOO] > 0
        _deliver(sim, s, nxt, now)
        nxt += 1
        while ri[s, RI_OOO] > 0 and have[s, nxt & mask]:
            have[s, nxt & mask] = 0
            ri[s, RI_OOO] -= 1
            _deliver(sim, s, nxt, now)
            nxt += 1
        ri[s, RI_NXT] = nxt
        if filled_hole and sack.enabled(sim, s):
            sack.trim_blocks(sim, s, nxt)
        ri[s, RI_PENDING] += 1
        ack_now = filled_hole or ri[s, RI_PENDING] >= cfg.delayed_ack
        if not ack_now:
            timer = _delack_timer(sim, s)
            if sim.timers[timer, TM_DEADLINE] == math.inf:
                arm_timer(sim, timer, now + cfg.delack_timeout)
    elif seq > nxt:
        duplicate = have[s, seq & mask]
        if not duplicate:
            have[s, seq & mask] = 1
            ri[s, RI_OOO] += 1
            if sack.enabled(sim, s):
                sack.record_block(sim, s, seq, nxt)
        dsack = seq + 1 if duplicate else 0  # a duplicate ACK
    else:
        dsack = seq + 1  # a copy of data already delivered: D-SACK
    if ack_now:
        send_ack(sim, s, echo, dsack, now)


@kernel
def on_delack_timer(sim, s: int, now: float) -> None:
    ri = sim.receivers.i
    if ri[s, RI_PENDING] > 0:
        echo = ri[s, RI_CE] if sim.senders.i[s, SI_ECT] else 0
        _send_ack_outlined(sim, s, echo, _NO_DSACK, now)
