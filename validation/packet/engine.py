"""The event loop: pop the earliest event, let the network element it names handle it, repeat.

    EV_START    sender s begins: its NIC is asked to pull
    EV_TX_DONE  port l finished serialising a packet: it propagates, l takes the next one
    EV_ARRIVE   packet p reaches the far end of its link: the next port of its path, or the
                destination host (data -> receiver, ACK -> sender, then the sender's NIC)
    EV_TIMER    a protocol timer: retransmission timeout or delayed ACK
    EV_WAKE     a paced sender may emit again
    EV_PFC      a PFC PAUSE or resume frame reaches link l's transmitter (obj 2 l + 1 or 2 l):
                it stops starting packets, or starts again
    EV_ROUND    sender s's group released its next round (`rounds`): its NIC is asked to pull

Samples are written whenever simulated time passes a multiple of the sample interval, before
the first event at or after that instant runs. The loop stops at the end of the last interval,
or early with a status when the packet pool or the event heap is too small (the caller retries
with more room).
"""

from __future__ import annotations

import numpy as np

from pathflow.validation.packet import cc
from pathflow.validation.packet.events import pop_event, push_event, timer_due
from pathflow.validation.packet.jit import entry, kernel
from pathflow.validation.packet.layout import (
    ACK,
    CTL_EVENTS,
    CTL_HEAP_SIZE,
    CTL_STATUS,
    EV_ARRIVE,
    EV_PFC,
    EV_ROUND,
    EV_START,
    EV_TIMER,
    EV_TX_DONE,
    EV_WAKE,
    PK_CE,
    PK_DSACK,
    PK_ECE,
    PK_KIND,
    PK_OWNER,
    PK_PATH,
    PK_SEQ,
    SF_START,
    SI_NIC,
    SI_WAKE_PENDING,
    STATUS_OK,
)
from pathflow.validation.packet.links import (
    finish_transmission,
    forward,
    kick_nic,
    next_link,
    pfc_frame,
)
from pathflow.validation.packet.packets import release_packet
from pathflow.validation.packet.receiver import on_data, on_delack_timer
from pathflow.validation.packet.recorder import record
from pathflow.validation.packet.rounds import start_round
from pathflow.validation.packet.sender import on_ack, on_timeout, start_flow

__all__ = ["run"]


@kernel
def _arrive(sim, p: int, now: float) -> int:
    """Packet p reaches the far end of its link. An ACK returns its sender's NIC, for the event
    loop to kick before it releases the ACK (see `run`); else -1."""
    nxt = next_link(sim, p)
    if nxt >= 0:
        forward(sim, nxt, p, now)
        return -1
    pk = sim.packets.i
    s = pk[p, PK_OWNER]
    if pk[p, PK_KIND] == ACK:
        on_ack(sim, s, pk[p, PK_SEQ], pk[p, PK_ECE], pk[p, PK_DSACK], p, now)
        return sim.senders.i[s, SI_NIC]
    on_data(sim, s, pk[p, PK_SEQ], pk[p, PK_CE], pk[p, PK_PATH], now)
    release_packet(sim, p)
    return -1


@kernel
def _timer(sim, timer: int, now: float) -> int:
    """A timer event: the NIC of a sender whose timer fired (the event loop kicks it), or -1."""
    senders = sim.senders.i.shape[0]
    if not timer_due(sim, timer, now):
        return -1
    if timer < senders:
        on_timeout(sim, timer, now)
        return sim.senders.i[timer, SI_NIC]
    if timer < 2 * senders:
        on_delack_timer(sim, timer - senders, now)
        return -1
    s = timer - 2 * senders
    cc.on_timer(sim, s, now)
    return sim.senders.i[s, SI_NIC]


@entry
def run(sim) -> int:
    """Simulate until the end of the last sample interval; returns a STATUS_* code."""
    cfg, ctl = sim.cfg, sim.ctl
    np.random.seed(cfg.seed)
    for s in range(sim.senders.i.shape[0]):
        push_event(sim, sim.senders.f[s, SF_START], EV_START, s)
    k = np.int64(0)  # next sample (a numpy int: see layout's note on literals)
    boundary = cfg.interval
    while ctl[CTL_HEAP_SIZE] > 0 and ctl[CTL_STATUS] == STATUS_OK:
        t = sim.events.time[0]
        while k < cfg.records and t >= boundary:
            record(sim, k, boundary)
            k += 1
            boundary = (k + 1) * cfg.interval
        if k >= cfg.records:
            break
        now, kind, obj = pop_event(sim)
        ctl[CTL_EVENTS] += 1
        # The handlers return the NIC of a sender that may now send, kicked at one place below:
        # each kick_nic inlines start_transmission (with the sender's emit, DCQCN's pacing),
        # and one copy instead of five keeps the loop's body, and its compile time, small.
        nic = -1
        if kind == EV_TX_DONE:
            finish_transmission(sim, obj, now)
        elif kind == EV_ARRIVE:
            nic = _arrive(sim, obj, now)
        elif kind == EV_TIMER:
            nic = _timer(sim, obj, now)
        elif kind == EV_START:
            start_flow(sim, obj, now)
            nic = sim.senders.i[obj, SI_NIC]
        elif kind == EV_WAKE:
            sim.senders.i[obj, SI_WAKE_PENDING] = 0
            nic = sim.senders.i[obj, SI_NIC]
        elif kind == EV_PFC:
            pfc_frame(sim, obj >> 1, obj & 1, now)
        elif kind == EV_ROUND:
            start_round(sim, obj, now)
            nic = sim.senders.i[obj, SI_NIC]
        if nic >= 0:
            kick_nic(sim, nic, now)
            if kind == EV_ARRIVE:
                release_packet(sim, obj)  # the ACK, after the kick (the pool's order as before)
    if ctl[CTL_STATUS] != STATUS_OK:
        return ctl[CTL_STATUS]
    while k < cfg.records:
        record(sim, k, boundary)
        k += 1
        boundary = (k + 1) * cfg.interval
    return STATUS_OK
