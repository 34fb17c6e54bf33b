"""Active queue management at switch egress ports: what happens to an arriving packet.

`admit` returns PASS, MARK (set CE; only for ECN-capable packets) or DROP, given the port's
backlog before the packet joins it (bytes waiting, the packet in service not counted):

- drop-tail: DROP when the packet does not fit in the buffer.
- ECN step (DCTCP): congested when the backlog exceeds K, `q > K` as in the fluid model.
  ns-3's RED-as-step marker tests "packets already in the queue disc >= K"; its device queue
  holds one more waiting packet, so with full-size packets both rules mark at the same backlog.
- RED (Floyd and Jacobson 1993): EWMA of the backlog updated on every arrival (`weight`), decayed
  over idle periods as if small packets had departed; congested with probability
  pmax (avg - min) / (max - min) between the thresholds and always above max ("non-gentle").
  Each arrival is marked independently with that probability (no count-based spacing: the
  fluid model's p; ns-3 spaces marks uniformly, see validation/ns3/__init__.py).

A congested ECN-capable packet is marked, any other congested packet dropped. The buffer limit
applies after marking (a marked packet that does not fit is dropped).

- DCQCN (Kmin, Kmax, Pmax): RED on the instantaneous backlog, congested with probability
  pmax (q - kmin) / (kmax - kmin) above Kmin and always above Kmax, or, with the extended ramp,
  with that line's probability (capped at 1) above Kmax too (`models.aqm.DcqcnMarking`).

PFC is not an admission decision but a pause state of the transmitter (`links`): with PFC the
AQM still marks, and the buffer limit still drops what headroom did not leave room for.
"""

from __future__ import annotations

import math

import numpy as np

from pathflow.validation.packet.jit import kernel
from pathflow.validation.packet.layout import (
    AQM_DCQCN,
    AQM_ECN_STEP,
    AQM_RED,
    LF_BACKLOG,
    LF_IDLE_SINCE,
    LF_RED_AVG,
    LI_AQM,
    LP_BUFFER,
    LP_EXTENDED,
    LP_RATE,
    LP_RED_MAX,
    LP_RED_MIN,
    LP_RED_PMAX,
    LP_RED_WEIGHT,
    LP_THRESHOLD,
)

__all__ = ["DROP", "MARK", "PASS", "admit"]

PASS = 0
MARK = 1
DROP = 2


@kernel
def _red_average(links, port: int, now: float, idle: bool, packet: float) -> float:
    lp, lf = links.param, links.f
    w = lp[port, LP_RED_WEIGHT]
    if idle:  # as if full-size packets had kept leaving the empty queue (Floyd's m)
        gone = (now - lf[port, LF_IDLE_SINCE]) * lp[port, LP_RATE] / packet
        lf[port, LF_RED_AVG] *= math.pow(1.0 - w, gone)
    lf[port, LF_RED_AVG] = (1.0 - w) * lf[port, LF_RED_AVG] + w * lf[port, LF_BACKLOG]
    return lf[port, LF_RED_AVG]


@kernel
def _congested(links, port: int, now: float, idle: bool, packet: float) -> bool:
    kind = links.i[port, LI_AQM]
    lp = links.param
    if kind == AQM_ECN_STEP:
        return links.f[port, LF_BACKLOG] > lp[port, LP_THRESHOLD]
    if kind == AQM_RED:
        avg = _red_average(links, port, now, idle, packet)
        low, high = lp[port, LP_RED_MIN], lp[port, LP_RED_MAX]
        if avg < low:
            return False
        if avg >= high:
            return True
        return np.random.random() < lp[port, LP_RED_PMAX] * (avg - low) / (high - low)
    if kind == AQM_DCQCN:
        backlog = links.f[port, LF_BACKLOG]
        low, high = lp[port, LP_RED_MIN], lp[port, LP_RED_MAX]
        if backlog <= low:
            return False
        line = lp[port, LP_RED_PMAX] * (backlog - low) / max(high - low, 1e-30)
        if backlog > high and lp[port, LP_EXTENDED] == 0.0:
            return True
        return np.random.random() < line
    return False


@kernel
def admit(links, port: int, size: float, ect: int, now: float, idle: bool,
          packet: float) -> int:
    """The fate of a packet of `size` bytes arriving at switch port `port` (see the module
    docstring); `idle`: the port is empty and not transmitting; `packet`: full packet size."""
    verdict = PASS
    if _congested(links, port, now, idle, packet):
        verdict = MARK if ect else DROP
    if verdict != DROP and not idle and (
            links.f[port, LF_BACKLOG] + size > links.param[port, LP_BUFFER]):
        verdict = DROP
    return verdict
