"""The packet pool: records are taken from and returned to a free list (no allocation per packet).

A pool that runs dry sets the run status to STATUS_OUT_OF_PACKETS and returns -1; the event loop
then stops and `simulate_packets` reruns the (deterministic) simulation with a larger pool.
"""

from __future__ import annotations

from pathflow.validation.packet.jit import kernel
from pathflow.validation.packet.layout import (
    CTL_FREE,
    CTL_STATUS,
    PK_CE,
    PK_DSACK,
    PK_ECE,
    PK_ECT,
    PK_HOP,
    PK_KIND,
    PK_NEXT,
    PK_OWNER,
    PK_PATH,
    PK_SACK,
    PK_SEQ,
    STATUS_OUT_OF_PACKETS,
)

__all__ = ["new_packet", "release_packet"]


@kernel
def new_packet(sim, kind: int, owner: int, seq: int, size: float, path: int, ect: int) -> int:
    """A fresh packet at hop 0 of `path`, or -1 when the pool is exhausted."""
    pk, ctl = sim.packets.i, sim.ctl
    p = ctl[CTL_FREE]
    if p < 0:
        ctl[CTL_STATUS] = STATUS_OUT_OF_PACKETS
        return -1
    ctl[CTL_FREE] = pk[p, PK_NEXT]
    pk[p, PK_KIND] = kind
    pk[p, PK_OWNER] = owner
    pk[p, PK_SEQ] = seq
    pk[p, PK_PATH] = path
    pk[p, PK_HOP] = 0
    pk[p, PK_ECT] = ect
    pk[p, PK_CE] = 0
    pk[p, PK_ECE] = 0
    pk[p, PK_DSACK] = 0
    pk[p, PK_SACK + 1] = 0  # no SACK block (the others are read only behind a first one)
    pk[p, PK_NEXT] = -1
    sim.packets.size[p] = size
    return p


@kernel
def release_packet(sim, p: int) -> None:
    sim.packets.i[p, PK_NEXT] = sim.ctl[CTL_FREE]
    sim.ctl[CTL_FREE] = p
