"""Barrier-synchronised rounds (`[traffic] rounds`): partition/aggregate reads, as in cluster
storage and web search, where a client asks every server of a group for a block and asks for
the next blocks only when it holds all of them.

A flow of a group with R rounds has R blocks of `size` bytes, B segments each, numbered one
after another (round r is segments r B .. (r + 1) B - 1; the last segment of every block
carries the block's last bytes). Its sender holds only the current round's segments
(`SI_SEGMENTS` = (round + 1) B), so it never sends ahead of the barrier, and between rounds it is
idle with nothing outstanding (no timer, not done). The barrier lives at the receivers: when a
flow's in-order delivery completes a block, `block_arrived` records the time
(`Receivers.block_done[flow, round]`) and counts the flow in its group (`RI_ROUND_DONE`, in the
row of the group's first sender); when every flow of the group has the round's block, the next
round is released for all of them at that instant, one `EV_ROUND` event per sender, which
`start_round` handles and the event loop follows with a NIC kick, as for a flow's start.

The next round starts at the barrier instant at the sender itself: the client's request for it
is not modelled (no request packet, no one-way delay before the servers answer), as the fluid
model does, so both engines agree on the round boundaries. A sender that has been idle for at
least one RTO restarts its window as Linux does with tcp_slow_start_after_idle = 1 (RFC 5681
section 4.1's restart window, RFC 2861): ssthresh = max(ssthresh, 3/4 cwnd) (Linux's
tcp_current_ssthresh, so that slow start regains most of the old window in a few round trips)
and cwnd = min(cwnd, init_cwnd); idle is measured from the sender's last data packet, as Linux's
lsndtime. Linux also halves cwnd once per further RTO of idleness before taking that floor; the
halvings are left out, since after an idle period of one or two RTOs they differ from the floor
by at most one halving and the fluid model takes the floor alone. Rate-based senders (DCQCN)
just resume: a RoCE NIC has no window, and its rate timers ran on while it was idle.

Rounds need one subflow per flow (`build` refuses MPTCP connections with rounds): a subflow's
segment numbers are its own, so it could not tell where the connection's blocks end.
"""

from __future__ import annotations

from pathflow.validation.packet.cc import rate_based
from pathflow.validation.packet.events import push_event
from pathflow.validation.packet.jit import kernel, outlined
from pathflow.validation.packet.layout import (
    EV_ROUND,
    RI_CONN_DELIVERED,
    RI_ROUND_DONE,
    SF_CWND,
    SF_LAST_BYTES,
    SF_LAST_SEND,
    SF_RTO,
    SF_SSTHRESH,
    SI_BLOCK,
    SI_CONN_FIRST,
    SI_FLOW,
    SI_GROUP_END,
    SI_GROUP_FIRST,
    SI_GROUP_FLOWS,
    SI_ROUND,
    SI_ROUNDS,
    SI_SEGMENTS,
)

__all__ = ["block_arrived", "segment_bytes", "start_round"]


@kernel
def segment_bytes(sim, s: int, seq: int) -> float:
    """Wire bytes of segment `seq` of sender s: `mss`, but the last of a block (with rounds) or
    of its data (without) carries the last bytes."""
    i = sim.senders.i
    block = i[s, SI_BLOCK]
    last = seq % block == block - 1 if block > 0 else seq == i[s, SI_SEGMENTS] - 1
    return sim.senders.f[s, SF_LAST_BYTES] if last else sim.cfg.mss


@outlined  # once per block: not worth a copy in the event loop's body
def block_arrived(sim, s: int, now: float) -> None:
    """Sender s's connection has just had a whole block delivered in order: record when, and
    release the group's next round if this was the last block of the round to arrive."""
    si, ri = sim.senders.i, sim.receivers.i
    r = ri[si[s, SI_CONN_FIRST], RI_CONN_DELIVERED] // si[s, SI_BLOCK] - 1
    sim.receivers.block_done[si[s, SI_FLOW], r] = now
    g = si[s, SI_GROUP_FIRST]
    ri[g, RI_ROUND_DONE] += 1
    if ri[g, RI_ROUND_DONE] < si[g, SI_GROUP_FLOWS]:
        return
    ri[g, RI_ROUND_DONE] = 0
    if r + 1 >= si[s, SI_ROUNDS]:
        return  # the group's last round: its flows are done
    for k in range(g, si[g, SI_GROUP_END]):
        push_event(sim, now, EV_ROUND, k)


@outlined  # once per round and sender
def start_round(sim, s: int, now: float) -> None:
    """Sender s may send its next round's block (the event loop then kicks its NIC); a window
    idle for an RTO or more restarts (see the module docstring)."""
    f, i = sim.senders.f, sim.senders.i
    i[s, SI_ROUND] += 1
    i[s, SI_SEGMENTS] += i[s, SI_BLOCK]
    if not rate_based(sim, s) and now - f[s, SF_LAST_SEND] >= f[s, SF_RTO]:
        f[s, SF_SSTHRESH] = max(f[s, SF_SSTHRESH], 0.75 * f[s, SF_CWND])
        f[s, SF_CWND] = min(f[s, SF_CWND], sim.cfg.init_cwnd)
