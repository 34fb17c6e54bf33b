"""Sampling: at the end of every interval, write the interval's statistics and reset them.

Per link: the backlog at the sample instant and its extremes within the interval, the bytes
that arrived, departed (pro rata for the packet in service), were dropped or marked, and the
fraction of the interval its transmitter was paused by PFC (a pause still on counted up to the
sample instant, the rest in the next interval).
Per sender: cwnd and ssthresh (bytes), the mean RTT sample of the interval (the last one if the
interval had none), alpha, cumulative bytes delivered in order and sent, and OLIA's loss
intervals (segments acknowledged since the last loss event, and between the two before).
"""

from __future__ import annotations

from pathflow.validation.packet.jit import outlined
from pathflow.validation.packet.layout import (
    LF_ARRIVED,
    LF_BACKLOG,
    LF_CREDITED,
    LF_DEPARTED,
    LF_DROPPED,
    LF_MARKED,
    LF_PAUSE_TIME,
    LF_PAUSED_SINCE,
    LF_QMAX,
    LF_QMIN,
    LF_TX_START,
    LI_BUSY,
    LI_IN_SERVICE,
    LI_PAUSED,
    LP_RATE,
    RF_DELIVERED,
    RL_ARRIVAL,
    RL_DEPARTURE,
    RL_DROP,
    RL_MARK,
    RL_PAUSE,
    RL_QUEUE,
    RL_QUEUE_MAX,
    RL_QUEUE_MIN,
    RS_ALPHA,
    RS_CWND,
    RS_DELIVERED,
    RS_DROPPED,
    RS_LAST_INTERVAL,
    RS_RC,
    RS_RECOVERIES,
    RS_RESENT,
    RS_RT,
    RS_RTT,
    RS_SENT,
    RS_SINCE_LOSS,
    RS_SSTHRESH,
    RS_TIMEOUTS,
    SF_ALPHA,
    SF_CWND,
    SF_DROPPED,
    SF_RC,
    SF_RECOVERIES,
    SF_RESENT_BYTES,
    SF_RT,
    SF_RTT_COUNT,
    SF_RTT_LAST,
    SF_RTT_SUM,
    SF_SENT_BYTES,
    SF_SSTHRESH,
    SF_TIMEOUTS,
    SI_OLIA_LOSS1,
    SI_OLIA_LOSS2,
    SI_UNA,
)

__all__ = ["record"]


@outlined  # once per sample interval: cheap as a call; two inlined copies cost compile time
def record(sim, k: int, now: float) -> None:
    """Write sample k (the interval ending at `now`) and start the next interval."""
    lf, li, cfg = sim.links.f, sim.links.i, sim.cfg
    out = sim.recorder.links[k]
    scale = 1.0 / cfg.interval
    for port in range(lf.shape[0]):
        if li[port, LI_BUSY]:  # credit the bits of the packet in service sent so far
            size = sim.packets.size[li[port, LI_IN_SERVICE]]
            wire = size + cfg.header_bytes  # departures count packet bytes, not framing
            rate = sim.links.param[port, LP_RATE]
            sent = min(max(now - lf[port, LF_TX_START], 0.0) * rate, wire)
            # A hair ahead (1e-8 of an interval's bytes): a packet that started at the sample
            # instant then never counts as a whole packet neither departed nor queued, which
            # round-off would otherwise turn into a byte-conservation "violation".
            done = min(sent * size / wire + 1e-8 * rate * cfg.interval, size)
            lf[port, LF_DEPARTED] += done - lf[port, LF_CREDITED]
            lf[port, LF_CREDITED] = done
        q = lf[port, LF_BACKLOG]
        out[port, RL_QUEUE] = q
        out[port, RL_QUEUE_MIN] = min(lf[port, LF_QMIN], q)
        out[port, RL_QUEUE_MAX] = max(lf[port, LF_QMAX], q)
        out[port, RL_ARRIVAL] = lf[port, LF_ARRIVED] * scale
        out[port, RL_DEPARTURE] = lf[port, LF_DEPARTED] * scale
        out[port, RL_DROP] = lf[port, LF_DROPPED] * scale
        out[port, RL_MARK] = lf[port, LF_MARKED] * scale
        if li[port, LI_PAUSED]:  # split a pause that spans the sample instant
            lf[port, LF_PAUSE_TIME] += now - lf[port, LF_PAUSED_SINCE]
            lf[port, LF_PAUSED_SINCE] = now
        out[port, RL_PAUSE] = lf[port, LF_PAUSE_TIME] * scale
        lf[port, LF_ARRIVED] = 0.0
        lf[port, LF_DEPARTED] = 0.0
        lf[port, LF_DROPPED] = 0.0
        lf[port, LF_MARKED] = 0.0
        lf[port, LF_PAUSE_TIME] = 0.0
        lf[port, LF_QMIN] = q
        lf[port, LF_QMAX] = q
    sf, si = sim.senders.f, sim.senders.i
    out = sim.recorder.senders[k]
    for s in range(sf.shape[0]):
        out[s, RS_CWND] = sf[s, SF_CWND] * cfg.mss
        out[s, RS_SSTHRESH] = sf[s, SF_SSTHRESH] * cfg.mss
        out[s, RS_ALPHA] = sf[s, SF_ALPHA]
        out[s, RS_RC] = sf[s, SF_RC]
        out[s, RS_RT] = sf[s, SF_RT]
        if sf[s, SF_RTT_COUNT] > 0:
            out[s, RS_RTT] = sf[s, SF_RTT_SUM] / sf[s, SF_RTT_COUNT]
        else:
            out[s, RS_RTT] = sf[s, SF_RTT_LAST]
        sf[s, SF_RTT_SUM] = 0.0
        sf[s, SF_RTT_COUNT] = 0.0
        out[s, RS_DELIVERED] = sim.receivers.f[s, RF_DELIVERED]
        out[s, RS_SENT] = sf[s, SF_SENT_BYTES]
        out[s, RS_DROPPED] = sf[s, SF_DROPPED]
        out[s, RS_TIMEOUTS] = sf[s, SF_TIMEOUTS]
        out[s, RS_RECOVERIES] = sf[s, SF_RECOVERIES]
        out[s, RS_RESENT] = sf[s, SF_RESENT_BYTES]
        out[s, RS_SINCE_LOSS] = si[s, SI_UNA] - si[s, SI_OLIA_LOSS2]
        out[s, RS_LAST_INTERVAL] = si[s, SI_OLIA_LOSS2] - si[s, SI_OLIA_LOSS1]
