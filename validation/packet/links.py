"""Links and their egress ports: queueing, serialisation, propagation, and host NICs.

Every directed link has an output queue at its transmitting end (output-queued switches). A
packet arriving at a port is admitted, marked or dropped by the AQM (`aqm.admit`), waits in a
FIFO, is serialised at the link rate (size / rate) and arrives at the far end `delay` seconds
after its last bit left (store-and-forward). Two events per packet and hop: EV_TX_DONE when the
port finishes serialising it (and starts the next packet), EV_ARRIVE when it reaches the next
node.

The backlog is the bytes waiting, not counting the packet being serialised (what ns-3 reports
as queue disc + device queue). Departures are counted as the bits leave: a packet in service is
credited pro rata at each sample instant, so departures never exceed the rate within an
interval and bytes in = out + waiting + dropped holds to within the packet in service.

Host NICs (a host's egress port) follow the fluid model's backpressure: they never drop and
never build a data queue. ACKs the host sends wait in the NIC's FIFO (unbounded); data is
pulled: whenever the NIC is free and holds no ACK, it asks its senders, round-robin, for their
next packet. A sender therefore emits at most at its NIC's line rate and only when the NIC is
free, like Linux's TCP small queues, and its RTT samples carry no self-inflicted host queueing.
For a host with one flow the departure times are those of an unlimited FIFO fed with window
bursts (ns-3's host queue); with several flows the NIC interleaves them packet by packet.

Priority flow control (`models.pfc`, one traffic class, data and ACKs alike): each link also
counts, as an ingress port of the switch at its far end, its bytes waiting in that switch's
egress FIFOs, by the backlog's rule (the packet in service and one that goes straight into
service are not waiting). Crossing Xoff or Xon makes the switch send a PAUSE or resume, which
takes effect at the link's transmitter one propagation delay later (EV_PFC). The switch's flag
(LI_PFC_SENT) and the transmitter's (LI_PAUSED) are kept apart because frames are in flight: a
count that crosses back and forth within that delay sends each frame once, and they arrive in
order. A paused port starts nothing new (the packet in service finishes): a switch port keeps
its FIFO, a NIC stops pulling from its senders. With PFC off Xoff and Xon are inf: nothing
pauses, and nothing is counted (`Config.pfc`).
"""

from __future__ import annotations

import numpy as np

from pathflow.validation.packet.aqm import DROP, MARK, admit
from pathflow.validation.packet.events import push_event
from pathflow.validation.packet.jit import kernel, outlined
from pathflow.validation.packet.layout import (
    CTL_DROPS,
    CTL_HOPS,
    EV_ARRIVE,
    EV_PFC,
    EV_TX_DONE,
    LF_ARRIVED,
    LF_BACKLOG,
    LF_CREDITED,
    LF_DEPARTED,
    LF_DROPPED,
    LF_IDLE_SINCE,
    LF_INGRESS,
    LF_MARKED,
    LF_PAUSE_TIME,
    LF_PAUSED_SINCE,
    LF_QMAX,
    LF_QMIN,
    LF_SWITCH_HELD,
    LF_TX_START,
    LI_BUSY,
    LI_HEAD,
    LI_IN_SERVICE,
    LI_NIC,
    LI_PAUSED,
    LI_PFC_GROUP,
    LI_PFC_SENT,
    LI_RR,
    LI_TAIL,
    LP_DELAY,
    LP_PFC_ALPHA,
    LP_PFC_ROOM,
    LP_RATE,
    LP_XOFF,
    LP_XON,
    PI_LENGTH,
    PI_START,
    PK_CE,
    PK_ECT,
    PK_HOP,
    PK_NEXT,
    PK_OWNER,
    PK_PATH,
    SF_DROPPED,
)
from pathflow.validation.packet.packets import release_packet
from pathflow.validation.packet.sender import can_send, emit

__all__ = ["enqueue", "finish_transmission", "forward", "kick_nic", "next_link", "pfc_frame",
           "start_transmission"]

_RESUME, _PAUSE = np.int64(0), np.int64(1)  # PFC frames (EV_PFC's obj: 2 x link + frame)


@kernel
def _push_back(sim, port: int, p: int) -> None:
    li, lf, pk = sim.links.i, sim.links.f, sim.packets.i
    pk[p, PK_NEXT] = -1
    if li[port, LI_HEAD] < 0:
        li[port, LI_HEAD] = p
    else:
        pk[li[port, LI_TAIL], PK_NEXT] = p
    li[port, LI_TAIL] = p
    lf[port, LF_BACKLOG] += sim.packets.size[p]
    lf[port, LF_QMAX] = max(lf[port, LF_QMAX], lf[port, LF_BACKLOG])


@kernel
def _pop_front(sim, port: int) -> int:
    li, lf = sim.links.i, sim.links.f
    p = li[port, LI_HEAD]
    if p < 0:
        return -1
    li[port, LI_HEAD] = sim.packets.i[p, PK_NEXT]
    if li[port, LI_HEAD] < 0:
        li[port, LI_TAIL] = -1
        lf[port, LF_BACKLOG] = 0.0  # no round-off residue on an empty queue
    else:
        lf[port, LF_BACKLOG] -= sim.packets.size[p]
    lf[port, LF_QMIN] = min(lf[port, LF_QMIN], lf[port, LF_BACKLOG])
    return p


@outlined
def _send_pfc(sim, link: int, frame: int, now: float) -> None:
    """The switch at the far end of `link` sends its transmitter a PAUSE or resume `frame`."""
    sim.links.i[link, LI_PFC_SENT] = frame
    push_event(sim, now + sim.links.param[link, LP_DELAY], EV_PFC, 2 * link + frame)


@kernel
def _ingress(sim, p: int, change: float, now: float) -> None:
    """Packet p starts (`change` > 0) or stops waiting in a switch's FIFO: count it against
    the link it came by, whose transmitter the switch pauses above Xoff and resumes below Xon.
    Called where switch ports queue and dequeue (`forward`, `_dequeued`) rather than in the
    FIFO operations themselves: those are inlined at a dozen places of the event loop, and the
    count there, even skipped, slowed runs without PFC by 5-10 %."""
    pk = sim.packets.i
    hop = pk[p, PK_HOP]  # >= 1: p has crossed a link to reach a switch
    link = sim.paths.links[sim.paths.i[pk[p, PK_PATH], PI_START] + hop - 1]
    lf, li, lp = sim.links.f, sim.links.i, sim.links.param
    waiting = lf[link, LF_INGRESS] + change
    lf[link, LF_INGRESS] = waiting
    xoff, xon = lp[link, LP_XOFF], lp[link, LP_XON]
    alpha = lp[link, LP_PFC_ALPHA]
    if alpha > 0.0:  # a shared buffer: the thresholds fall as the switch fills (models.pfc)
        group = li[link, LI_PFC_GROUP]
        held = lf[group, LF_SWITCH_HELD] + change
        lf[group, LF_SWITCH_HELD] = held
        resume = xoff - xon
        xoff = alpha * max(lp[link, LP_PFC_ROOM] - held, 0.0)
        xon = max(xoff - resume, 0.0)
    if li[link, LI_PFC_SENT]:
        if waiting < xon or waiting <= 0.0:  # empty: resume even where the threshold is 0
            _send_pfc(sim, link, _RESUME, now)
    elif waiting > xoff:
        _send_pfc(sim, link, _PAUSE, now)


@kernel
def _dequeued(sim, port: int, now: float) -> None:
    """PFC: the packet a switch port has just taken from its FIFO into service (if it took
    one) no longer waits there. (A NIC's FIFO holds its host's own ACKs: nothing counted.)"""
    p = sim.links.i[port, LI_IN_SERVICE]
    if p >= 0 and not sim.links.i[port, LI_NIC]:
        _ingress(sim, p, -sim.packets.size[p], now)


@kernel
def _pull(sim, nic: int, now: float) -> int:
    """A NIC asks its host's senders, round-robin, for a packet; -1 if none may send."""
    links = sim.links
    first, last = links.nic_first[nic], links.nic_first[nic + 1]
    n = last - first
    for k in range(n):
        j = (links.i[nic, LI_RR] + k) % n
        s = links.nic_senders[first + j]
        if can_send(sim, s, now):
            links.i[nic, LI_RR] = (j + 1) % n
            p = emit(sim, s, now)
            if p >= 0:
                links.f[nic, LF_ARRIVED] += sim.packets.size[p]  # enters the port as it leaves
            return p
    return -1


@kernel
def _serve(sim, port: int, p: int, now: float, gap: float) -> None:
    """Serialise packet p on the port, starting `gap` seconds from now."""
    li = sim.links.i
    li[port, LI_BUSY] = 1
    li[port, LI_IN_SERVICE] = p
    sim.links.f[port, LF_TX_START] = now + gap
    sim.links.f[port, LF_CREDITED] = 0.0
    wire = sim.packets.size[p] + sim.cfg.header_bytes
    push_event(sim, now + gap + wire / sim.links.param[port, LP_RATE], EV_TX_DONE, port)


@kernel
def start_transmission(sim, port: int, now: float) -> None:
    """The port is free: serialise its next packet (FIFO head; for a NIC, else a pulled one),
    unless PFC pauses it (then the resume calls this again)."""
    li = sim.links.i
    gap = 0.0
    p = -1 if li[port, LI_PAUSED] else _pop_front(sim, port)
    if p < 0 and li[port, LI_NIC] and not li[port, LI_PAUSED]:
        p = _pull(sim, port, now)
        if p >= 0 and sim.cfg.host_jitter > 0.0:  # host timing noise (see Config.host_jitter)
            wire = sim.packets.size[p] + sim.cfg.header_bytes
            gap = np.random.random() * sim.cfg.host_jitter * wire / sim.links.param[port, LP_RATE]
    if p < 0:
        li[port, LI_BUSY] = 0
        li[port, LI_IN_SERVICE] = -1
        sim.links.f[port, LF_IDLE_SINCE] = now
        return
    _serve(sim, port, p, now, gap)


@kernel
def finish_transmission(sim, port: int, now: float) -> None:
    """The packet in service has left the port: it propagates; the port takes the next one."""
    lf = sim.links.f
    p = sim.links.i[port, LI_IN_SERVICE]
    lf[port, LF_DEPARTED] += sim.packets.size[p] - lf[port, LF_CREDITED]
    sim.ctl[CTL_HOPS] += 1
    push_event(sim, now + sim.links.param[port, LP_DELAY], EV_ARRIVE, p)
    start_transmission(sim, port, now)
    if sim.cfg.pfc:
        _dequeued(sim, port, now)


@kernel
def enqueue(sim, port: int, p: int, now: float) -> bool:
    """Packet p arrives at a port: admission (AQM, buffer), then service or the FIFO; True if
    it waits in the FIFO."""
    links, pk = sim.links, sim.packets.i
    size = sim.packets.size[p]
    links.f[port, LF_ARRIVED] += size
    idle = links.i[port, LI_BUSY] == 0 and links.i[port, LI_HEAD] < 0
    if not links.i[port, LI_NIC]:
        verdict = admit(links, port, size, pk[p, PK_ECT], now, idle, sim.cfg.mss)
        if verdict == DROP:
            links.f[port, LF_DROPPED] += size
            sim.ctl[CTL_DROPS] += 1
            sim.senders.f[pk[p, PK_OWNER], SF_DROPPED] += 1.0
            release_packet(sim, p)
            return False
        if verdict == MARK:
            pk[p, PK_CE] = 1
            links.f[port, LF_MARKED] += size
    if idle and not links.i[port, LI_PAUSED]:
        _serve(sim, port, p, now, 0.0)  # straight into service, never counted as waiting
        return False
    _push_back(sim, port, p)
    return True


@kernel
def forward(sim, port: int, p: int, now: float) -> None:
    """Packet p reached a switch: it joins `port`, and if it waits there PFC counts it."""
    if enqueue(sim, port, p, now) and sim.cfg.pfc:
        _ingress(sim, p, sim.packets.size[p], now)


@kernel
def kick_nic(sim, nic: int, now: float) -> None:
    """A sender on this NIC may have become able to send: start the NIC if it is idle."""
    if sim.links.i[nic, LI_BUSY] == 0 and sim.links.i[nic, LI_HEAD] < 0:
        start_transmission(sim, nic, now)


@outlined
def pfc_frame(sim, link: int, pause: int, now: float) -> None:
    """A PAUSE (`pause` 1) or resume (0) frame reaches the transmitter of `link` (outlined: a
    copy of `start_transmission` in the event loop's body would slow every run)."""
    li, lf = sim.links.i, sim.links.f
    if pause:
        if not li[link, LI_PAUSED]:
            li[link, LI_PAUSED] = 1
            lf[link, LF_PAUSED_SINCE] = now
        return
    if li[link, LI_PAUSED]:
        li[link, LI_PAUSED] = 0
        lf[link, LF_PAUSE_TIME] += now - lf[link, LF_PAUSED_SINCE]
    if not li[link, LI_BUSY]:
        start_transmission(sim, link, now)  # its FIFO, or for a NIC its senders
        _dequeued(sim, link, now)


@kernel
def next_link(sim, p: int) -> int:
    """Packet p reached the far end of its current link: the next link of its path, or -1 if it
    has arrived at its destination host."""
    pk, paths = sim.packets.i, sim.paths
    hop = pk[p, PK_HOP] + 1
    path = pk[p, PK_PATH]
    if hop >= paths.i[path, PI_LENGTH]:
        return -1
    pk[p, PK_HOP] = hop
    return paths.links[paths.i[path, PI_START] + hop]
