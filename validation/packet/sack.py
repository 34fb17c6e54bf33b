"""Selective acknowledgements: the receiver's SACK blocks and the sender's scoreboard, with the
bookkeeping of RFC 6675 loss recovery that `sender.py` drives.

Model
-----
- Receiver (RFC 2018): an ACK carries up to `SACK_BLOCKS` (3) blocks [start, end) of segments
  held above the cumulative ACK. The first block holds the segment that arrived last; the
  others repeat the blocks reported before, most recent first, less those the new block
  contains or the cumulative ACK has passed (Linux's tcp_sack_new_ofo_skb and
  tcp_sack_remove). Duplicates are still reported by D-SACK (`PK_DSACK`, RFC 2883), not as a
  first block.
- Sender scoreboard: one flag per ring slot (`Senders.sacked`) for every segment in [UNA, HIGH)
  that some block has covered; `SI_SACKED` counts them. Cumulative ACKs clear the flags they
  pass. SACKed data is never sent again (no reneging: the receiver never drops what it holds).
- RFC 6675 with DupThresh = `SI_REORDERING` (3, raised by D-SACK undo as in NewReno):
  IsLost(seq): DupThresh or more SACKed segments lie above seq. Recovery starts when UNA is
  lost (`SI_SACKED` >= DupThresh, the test Linux's tcp_time_to_recover makes without FACK);
  RecoveryPoint = HIGH, ssthresh = max(cwnd x loss factor, min_cwnd), cwnd = ssthresh, UNA is
  retransmitted at once. On every ACK during recovery `update_recovery` recomputes pipe (each
  unSACKed segment counts 1 unless lost, +1 if retransmitted in this recovery: RFC 6675's
  SetPipe) and NextSeg's rule 1 (the lowest lost segment not yet retransmitted); the sender
  then sends while cwnd - pipe >= 1, lost segments first, then new data (rule 2), each send
  adding 1 to pipe. Recovery ends when the cumulative ACK reaches RecoveryPoint, cwnd =
  ssthresh. Rules 3 and 4 (retransmitting segments not yet deemed lost, the rescue
  retransmission) are left out, as Linux leaves them out; a loss the scoreboard cannot see (the
  last segments of a window) waits for the RTO.
- Lost retransmissions (Linux's tcp_mark_lost_retrans, 2.6.23 to 4.3, since then RACK's
  time-ordered rule): a retransmission is lost again, and counts as a lost segment not yet
  retransmitted, once `LATER` (3) segments sent after it have been SACKed. RFC 6675 alone
  leaves it to the RTO, and while new data keeps the ACK clock going the recovery then lasts
  a whole RTOmin: in a 16-flow slow-start overshoot (validation case fluid_packet_star16)
  several flows timed out that way where NewReno, retransmitting one hole per round trip
  after the queue had drained, did not.
- After a timeout the scoreboard is kept (Linux's tcp_enter_loss without reneging): go-back-N
  from UNA skips SACKed segments, and the flight counts only the unSACKed segments sent.

Scope and limitations: segment granularity (blocks, pipe and DupThresh in segments, not bytes);
no FACK; RACK-TLP (Linux's default time-based loss detection since 4.18) where `[transport]
recovery = "linux"` (`rack.py`: it then decides what is lost, in place of DupThresh and
LATER); the cost of an ACK during recovery is linear in the window (the scans below), paid
only while holes exist.

Validation: tests/test_packet_sack.py (k losses in one window repaired in one round trip
without a timeout; the same losses without SACK take about k round trips of NewReno partial
ACKs) and the drop-tail Reno cases of validation/cases/packet.py and ns3.py (ns-3's TCP has
SACK on by default).

References: RFC 2018 (SACK option), RFC 2883 (D-SACK), RFC 6675 (SACK-based loss recovery).
"""

from __future__ import annotations

import math

from pathflow.validation.packet import rack
from pathflow.validation.packet.jit import kernel, outlined
from pathflow.validation.packet.layout import (
    PK_SACK,
    RI_SACK,
    SACK_BLOCKS,
    SF_EPISODE_START,
    SF_RESENT_LOST,
    SI_HIGH,
    SI_LOST_EDGE,
    SI_NEXT_LOST,
    SI_NXT,
    SI_PIPE,
    SI_REORDERING,
    SI_SACK,
    SI_SACKED,
    SI_UNA,
)

LATER = 3  # SACKed segments sent after a retransmission that show it lost (DupThresh's 3)

__all__ = ["advance_lost", "clear_acked", "enabled", "loss_flight", "on_blocks", "record_block",
           "skip_sacked", "trim_blocks", "update_recovery", "write_blocks"]


# --- receiver -------------------------------------------------------------------------------
@outlined  # out-of-order arrivals only
def record_block(sim, s: int, seq: int, nxt: int) -> None:
    """Segment `seq` (> `nxt`, the next in-order segment) is newly held by receiver s: its
    block becomes the first one reported, the older blocks it does not contain follow."""
    ri, have, mask = sim.receivers.i, sim.receivers.have, sim.cfg.ring - 1
    start, end = seq, seq + 1
    for k in range(SACK_BLOCKS):  # a reported block is maximal: extend by it, no scan
        if ri[s, RI_SACK + 2 * k + 1] == start:
            start = ri[s, RI_SACK + 2 * k]
        if ri[s, RI_SACK + 2 * k] == end:
            end = ri[s, RI_SACK + 2 * k + 1]
    while start - 1 > nxt and have[s, (start - 1) & mask]:  # held, but in no reported block
        start -= 1
    while end < nxt + sim.cfg.ring and have[s, end & mask]:
        end += 1
    # the older blocks, less those inside [start, end), compacted in order (block k is read
    # before slot `kept` <= k is written), then moved down one place behind the new block
    kept = 0
    for k in range(SACK_BLOCKS):
        a, b = ri[s, RI_SACK + 2 * k], ri[s, RI_SACK + 2 * k + 1]
        if b > 0 and not (a >= start and b <= end):
            ri[s, RI_SACK + 2 * kept] = a
            ri[s, RI_SACK + 2 * kept + 1] = b
            kept += 1
    kept = min(kept, SACK_BLOCKS - 1)
    for k in range(kept - 1, -1, -1):
        ri[s, RI_SACK + 2 * k + 2] = ri[s, RI_SACK + 2 * k]
        ri[s, RI_SACK + 2 * k + 3] = ri[s, RI_SACK + 2 * k + 1]
    for k in range(kept + 1, SACK_BLOCKS):
        ri[s, RI_SACK + 2 * k] = 0
        ri[s, RI_SACK + 2 * k + 1] = 0
    ri[s, RI_SACK] = start
    ri[s, RI_SACK + 1] = end


@kernel
def trim_blocks(sim, s: int, nxt: int) -> None:
    """The cumulative ACK moved to `nxt`: blocks below it are no longer reported."""
    ri = sim.receivers.i
    kept = 0
    for k in range(SACK_BLOCKS):
        a, b = ri[s, RI_SACK + 2 * k], ri[s, RI_SACK + 2 * k + 1]
        if b > nxt:
            ri[s, RI_SACK + 2 * kept] = a
            ri[s, RI_SACK + 2 * kept + 1] = b
            kept += 1
    for k in range(kept, SACK_BLOCKS):
        ri[s, RI_SACK + 2 * k] = 0
        ri[s, RI_SACK + 2 * k + 1] = 0


@kernel
def write_blocks(sim, s: int, p: int) -> None:
    """ACK packet p of receiver s carries its blocks (new packets carry none)."""
    ri, pk = sim.receivers.i, sim.packets.i
    for k in range(2 * SACK_BLOCKS):
        pk[p, PK_SACK + k] = ri[s, RI_SACK + k]


# --- sender ----------------------------------------------------------------------------------
@outlined  # ACKs that carry blocks only
def on_blocks(sim, s: int, p: int, ack: int, now: float) -> None:
    """Mark the segments that ACK p's blocks cover, above the cumulative ACK `ack`."""
    i, sacked, mask = sim.senders.i, sim.senders.sacked, sim.cfg.ring - 1
    pk = sim.packets.i
    high = i[s, SI_HIGH]
    timed = rack.enabled(sim, s)
    for k in range(SACK_BLOCKS):
        a, b = pk[p, PK_SACK + 2 * k], pk[p, PK_SACK + 2 * k + 1]
        for seq in range(max(a, ack), min(b, high)):
            if sacked[s, seq & mask] == 0:
                if timed:
                    rack.delivered(sim, s, seq, now)
                sacked[s, seq & mask] = 1
                i[s, SI_SACKED] += 1


@kernel
def clear_acked(sim, s: int, una: int, ack: int) -> None:
    """The cumulative ACK passed [una, ack): those slots leave the scoreboard."""
    i, sacked, mask = sim.senders.i, sim.senders.sacked, sim.cfg.ring - 1
    for seq in range(una, ack):
        if sacked[s, seq & mask]:
            sacked[s, seq & mask] = 0
            i[s, SI_SACKED] -= 1


@kernel
def _retransmitted(sim, s: int, seq: int) -> bool:
    """Whether `seq` was retransmitted in the current recovery (RFC 6675's HighRxt test) and
    that retransmission is not known lost: fewer than `LATER` segments sent after it have been
    SACKed (`SF_RESENT_LOST`)."""
    snd = sim.senders
    slot = seq & (sim.cfg.ring - 1)
    sent = snd.sent_at[s, slot]
    return (snd.resent[s, slot] == 1 and sent >= snd.f[s, SF_EPISODE_START]
            and sent >= snd.f[s, SF_RESENT_LOST])


@outlined  # once per ACK in SACK recovery
def update_recovery(sim, s: int) -> None:
    """RFC 6675's SetPipe and NextSeg rule 1 in one pass down from HIGH: `SI_PIPE`,
    `SI_NEXT_LOST` (-1: none) and `SI_LOST_EDGE` (unSACKed segments below it are lost)."""
    i, sacked, mask = sim.senders.i, sim.senders.sacked, sim.cfg.ring - 1
    sent_at = sim.senders.sent_at
    una, high, thresh = i[s, SI_UNA], i[s, SI_HIGH], i[s, SI_REORDERING]
    above, pipe, next_lost, edge = 0, 0, -1, una
    if rack.enabled(sim, s):  # lost: as RACK's last detection says; the edge above the highest
        for seq in range(high - 1, una - 1, -1):
            if sacked[s, seq & mask]:
                continue
            if rack.lost(sim, s, seq):
                next_lost = seq
                edge = max(edge, seq + 1)
            else:
                pipe += 1
        i[s, SI_PIPE] = pipe
        i[s, SI_NEXT_LOST] = next_lost
        i[s, SI_LOST_EDGE] = edge
        return
    latest = (-math.inf, -math.inf, -math.inf)  # send times of the 3 last sent SACKed segments
    for seq in range(high - 1, una - 1, -1):
        if sacked[s, seq & mask]:
            t = sent_at[s, seq & mask]
            if t > latest[2]:
                latest = ((t, latest[0], latest[1]) if t > latest[0] else
                          (latest[0], t, latest[1]) if t > latest[1] else
                          (latest[0], latest[1], t))
    sim.senders.f[s, SF_RESENT_LOST] = latest[LATER - 1]
    for seq in range(high - 1, una - 1, -1):
        if sacked[s, seq & mask]:
            above += 1
            if above == thresh:
                edge = seq
            continue
        lost = above >= thresh
        again = _retransmitted(sim, s, seq)
        pipe += (0 if lost else 1) + (1 if again else 0)
        if lost and not again:
            next_lost = seq
    i[s, SI_PIPE] = pipe
    i[s, SI_NEXT_LOST] = next_lost
    i[s, SI_LOST_EDGE] = edge


@kernel
def advance_lost(sim, s: int, seq: int) -> None:
    """`seq` was just retransmitted: NextSeg rule 1 moves to the next lost segment above it."""
    i, sacked, mask = sim.senders.i, sim.senders.sacked, sim.cfg.ring - 1
    i[s, SI_NEXT_LOST] = -1
    timed = rack.enabled(sim, s)
    for k in range(seq + 1, i[s, SI_LOST_EDGE]):
        if (rack.lost(sim, s, k) if timed
                else sacked[s, k & mask] == 0 and not _retransmitted(sim, s, k)):
            i[s, SI_NEXT_LOST] = k
            return


@kernel
def skip_sacked(sim, s: int) -> None:
    """Go-back-N after a timeout passes over what the receiver already holds."""
    i, sacked, mask = sim.senders.i, sim.senders.sacked, sim.cfg.ring - 1
    while i[s, SI_NXT] < i[s, SI_HIGH] and sacked[s, i[s, SI_NXT] & mask]:
        i[s, SI_NXT] += 1


@outlined  # after a timeout only
def loss_flight(sim, s: int) -> int:
    """Segments sent since the timeout and not yet acknowledged or SACKed: [UNA, NXT)
    unSACKed (Linux's packets_in_flight in the Loss state, every unSACKed segment lost)."""
    i, sacked, mask = sim.senders.i, sim.senders.sacked, sim.cfg.ring - 1
    flight = 0
    for seq in range(i[s, SI_UNA], i[s, SI_NXT]):
        if sacked[s, seq & mask] == 0:
            flight += 1
    return flight


@kernel
def enabled(sim, s: int) -> bool:
    """Whether sender s (and its receiver) use SACK: `[transport] sack`, window-based senders
    only (a RoCE queue pair, DCQCN, repairs losses without SACK)."""
    return sim.senders.i[s, SI_SACK] != 0
