"""Priority flow control (IEEE 802.1Qbb): lossless switches that pause the links feeding them.

Model
-----
A switch counts, for each link u that feeds it (an ingress port), the bytes that arrived by u and
still wait in its egress queues: the ingress occupancy I_u. When I_u rises above Xoff the switch
pauses u's transmitter (a PAUSE frame); when it falls below Xon, u resumes. A paused transmitter
sends nothing: an upstream switch port keeps its packets queued, a host NIC holds its senders.
Pausing u stops every flow on u, also those bound for ports that are not congested
(head-of-line blocking), and u's own queue then grows until it pauses the links that feed it in
turn: congestion spreads upstream, hop by hop, to the senders. With thresholds that leave room
for what is in flight when a pause is sent, nothing is dropped.

In the fluid model (`solvers.dde`) the bytes of each subflow in each queue follow a
well-mixed queue (each subflow leaves in proportion to its share of the queue), which gives I_u
as the sum over the subflows that reach the switch by u of their bytes in the switch's queues.
Pauses flip far faster than anything else moves (a 2-packet hysteresis drains in a microsecond
at 10 Gb/s), so the fluid model keeps their time average, the part of the time u is paused:
0 while I_u <= Xoff - W, rising linearly to 1 at Xoff, W = max(Xoff - Xon, 2 C_u max(d_u, dt)).
This throttle settles where u adds bytes as fast as the switch forwards them, which is what
on-off pauses do on average; the band W at least twice the bytes u sends during a PAUSE
frame's flight d_u keeps the delayed loop damped (loop gain times delay at most 1/2), and at
least two steps' worth keeps the discrete loop stable, so that answers do not move when dt
halves. The decision reaches u's transmitter d_u later (its propagation delay); a paused host
NIC holds its senders in proportion (a paced sender sends at its rate while running).
The packet-level reference (`validation/packet/links.py`) counts the bytes packet by packet;
a PAUSE or resume reaches the upstream transmitter one propagation delay after the switch
decides it, and the packet being serialised there finishes.

Parameters (`[aqm]`, beside the discipline's own keys)
------------------------------------------------------
pfc   flag, default false.
xoff  bytes, the ingress occupancy that pauses. Default, per ingress port of a switch: the
      switch's port buffer divided by its ingress ports, less the headroom for what arrives after
      the pause is sent (2 x propagation x rate of the link, the round trip of the PAUSE frame and
      of the last bytes sent, plus 2 packets: the one in service at each end), so that every
      ingress port may fill to Xoff at once and nothing overflows.
xon   bytes, the ingress occupancy that resumes. Default: Xoff less 2 packets.
shared_buffer  bytes, default none (per-port thresholds as above). A switch whose ports share one
      buffer pool of this size sets its thresholds dynamically (the dynamic thresholds of
      Choudhury and Hahne, "Dynamic queue length thresholds for shared-memory packet switches",
      IEEE/ACM ToN 1998, which switch buffer managers apply to PFC): an ingress port pauses its
      link while its occupancy exceeds
          Xoff(t) = alpha x (B - H - Q(t)),
      B the pool, H the headroom the switch reserves for what arrives after its pauses (per
      ingress port 2 x propagation x rate + 2 packets, as above), Q(t) the bytes the switch
      holds; it resumes below Xoff(t) less 2 packets. The more the switch holds, the earlier
      every port pauses; a lone congested port may take about alpha / (1 + alpha) of the room
      per ingress port (N ports feeding one egress queue settle at Q = N alpha (B - H) /
      (1 + N alpha)). Egress admission stays per port (`topology.buffer`).
pfc_alpha  the dynamic-threshold factor alpha, default 1/8 (switches offer powers of two; a
      larger alpha lets one port take more of the pool). Only with shared_buffer.

Scope and limitations
---------------------
One traffic class: data and ACKs are paused together. Per-port egress buffers; the shared pool
sets the PFC thresholds only (a switch that also admits egress packets against the pool is not
modelled). A port re-evaluates its pause when its own bytes arrive or leave (packet level) or
every step (fluid), not when other ports' bytes move the dynamic threshold. PAUSE frames are on
and off (the longest pause quanta, refreshed, then a resume), not timed quanta that expire. In
the fluid model the round trip counts queueing as q/C: while a link is paused its queue waits
longer than that.
Cyclic buffer dependencies can deadlock a PFC network; nothing here detects it.

Validation
----------
tests/test_pfc.py, in both engines: an incast of senders that ignore congestion overflows a
small buffer without PFC and loses nothing with it, each sender paused for all but its share of
the time (conservation); Reno on drop-tail loses nothing; on a k = 4 fat-tree, pauses spread
from an incast's port to the senders' edge switches, and a victim flow whose path has no
bottleneck drops well below line rate (head-of-line blocking); the fluid answer does not move
when dt halves; with a shared buffer, 8 senders into one port settle at the closed form above
in both engines, earlier than with per-port thresholds. Validation case
`pfc_congestion_spreading` (validation/cases/lossless.py): on
that fat-tree the victim's rate and each upstream link's pause time against the packet level
(within 5 % and 0.01), the victim alone at line rate, nothing dropped.
"""

from __future__ import annotations

import jax.numpy as jnp

from pathflow.models.base import Array
from pathflow.models.parameters import Parameter

__all__ = ["PARAMETERS", "default_xoff", "dynamic_xoff", "headroom", "paused_fraction"]

PARAMETERS = (
    Parameter("pfc", "flag", False, "lossless switches: priority flow control pauses the links "
              "that feed a switch while their bytes there exceed xoff"),
    Parameter("xoff", "bytes", None, "ingress occupancy that pauses the link feeding it "
              "(default: the switch's port buffer per ingress port, less 2 x propagation x "
              "rate + 2 packets of headroom)", low=0.0, optional=True),
    Parameter("xon", "bytes", None, "ingress occupancy below which a paused link resumes "
              "(default: xoff less 2 packets)", low=0.0, optional=True),
    Parameter("shared_buffer", "bytes", None, "a switch's buffer pool shared by its ports: "
              "xoff becomes pfc_alpha x (pool - headroom - bytes the switch holds) (default: "
              "per-port thresholds)", low=0.0, inclusive=False, optional=True),
    Parameter("pfc_alpha", "1", 0.125, "dynamic-threshold factor with shared_buffer",
              low=0.0, inclusive=False),
)


def headroom(capacity: float, delay: float, packet: float) -> float:
    """Bytes an ingress port receives after its switch sends a PAUSE: the link's round trip at
    its rate and the packet in service at each end."""
    return 2.0 * delay * capacity + 2.0 * packet


def default_xoff(buffer_per_port: float, capacity: float, delay: float, packet: float) -> float:
    """Xoff of an ingress port (bytes): its share of the switch's buffer less its headroom."""
    return buffer_per_port - headroom(capacity, delay, packet)


def dynamic_xoff(alpha: Array, room: Array, held: Array) -> Array:
    """Xoff (bytes) on a shared buffer: alpha x (room - held), room the pool less the switch's
    headroom, held the bytes the switch holds; 0 once the room is taken."""
    return alpha * jnp.maximum(room - held, 0.0)


def paused_fraction(ingress: Array, xoff: Array, xon: Array, capacity: Array, delay: Array,
                    dt: Array) -> Array:
    """The part of the time each link is to be paused (the fluid model's pauses, see the module
    docstring): 0 up to Xoff - W (at least 0), rising linearly to 1 at Xoff, W = max(Xoff - Xon,
    2 C max(d, dt)); 0 where PFC never pauses the link (Xoff = inf)."""
    finite = jnp.isfinite(xoff)
    xoff, xon = jnp.where(finite, xoff, 0.0), jnp.where(finite, xon, 0.0)
    low = jnp.maximum(jnp.minimum(xon, xoff - 2.0 * capacity * jnp.maximum(delay, dt)), 0.0)
    fraction = jnp.clip((ingress - low) / jnp.maximum(xoff - low, 1e-30), 0.0, 1.0)
    return jnp.where(finite, fraction, 0.0)
