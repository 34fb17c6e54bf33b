"""The event queue (a binary min-heap over preallocated arrays) and lazily cancelled timers.

Events are ordered by time, then by insertion order, so that simultaneous events run first-in
first-out and a run is deterministic. A heap that runs out of room sets the run status to
STATUS_OUT_OF_EVENTS (the event loop stops and the caller retries with more room) instead of
failing inside numba.

Timers (retransmission, delayed ACK, later DCQCN's rate timers) are re-armed far more often than
they fire: a sender restarts its RTO on every ACK. Pushing an event per re-arm would fill the
heap with stale entries, so each timer keeps one standing event (`TM_PENDING`) and its true
`TM_DEADLINE`. When the standing event pops before the deadline (the timer was pushed back) it
is re-pushed at the deadline; when the deadline moved earlier, a new event is pushed and the old
one is recognised as stale by its time.
"""

from __future__ import annotations

import math

from pathflow.validation.packet.jit import kernel
from pathflow.validation.packet.layout import (
    CTL_HEAP_SIZE,
    CTL_ORDER,
    CTL_STATUS,
    EV_TIMER,
    HE_KIND,
    HE_OBJ,
    HE_ORDER,
    N_HE,
    STATUS_OUT_OF_EVENTS,
    TM_DEADLINE,
    TM_PENDING,
)

__all__ = ["arm_timer", "cancel_timer", "pop_event", "push_event", "timer_due"]


@kernel
def push_event(sim, time: float, kind: int, obj: int) -> None:
    """Schedule (kind, obj) at `time`."""
    ev, ctl = sim.events, sim.ctl
    n = ctl[CTL_HEAP_SIZE]
    if n >= ev.time.size:
        ctl[CTL_STATUS] = STATUS_OUT_OF_EVENTS
        return
    order = ctl[CTL_ORDER]
    ctl[CTL_ORDER] = order + 1
    i = n
    while i > 0:  # sift up
        parent = (i - 1) >> 1
        t = ev.time[parent]
        if t < time or (t == time and ev.i[parent, HE_ORDER] < order):
            break
        ev.time[i] = t
        for c in range(N_HE):
            ev.i[i, c] = ev.i[parent, c]
        i = parent
    ev.time[i] = time
    ev.i[i, HE_ORDER] = order
    ev.i[i, HE_KIND] = kind
    ev.i[i, HE_OBJ] = obj
    ctl[CTL_HEAP_SIZE] = n + 1


@kernel
def pop_event(sim) -> tuple[float, int, int]:
    """Remove and return the earliest event as (time, kind, obj). The heap must not be empty."""
    ev, ctl = sim.events, sim.ctl
    time, kind, obj = ev.time[0], ev.i[0, HE_KIND], ev.i[0, HE_OBJ]
    n = ctl[CTL_HEAP_SIZE] - 1
    ctl[CTL_HEAP_SIZE] = n
    if n > 0:  # move the last entry to the root and sift it down
        t, o = ev.time[n], ev.i[n, HE_ORDER]
        k, b = ev.i[n, HE_KIND], ev.i[n, HE_OBJ]
        i = 0
        while True:
            child = 2 * i + 1
            if child >= n:
                break
            right = child + 1
            if right < n and (ev.time[right] < ev.time[child] or (
                    ev.time[right] == ev.time[child]
                    and ev.i[right, HE_ORDER] < ev.i[child, HE_ORDER])):
                child = right
            if t < ev.time[child] or (t == ev.time[child] and o < ev.i[child, HE_ORDER]):
                break
            ev.time[i] = ev.time[child]
            for c in range(N_HE):
                ev.i[i, c] = ev.i[child, c]
            i = child
        ev.time[i] = t
        ev.i[i, HE_ORDER] = o
        ev.i[i, HE_KIND] = k
        ev.i[i, HE_OBJ] = b
    return time, kind, obj


@kernel
def arm_timer(sim, timer: int, deadline: float) -> None:
    """(Re)start `timer` to fire at `deadline`."""
    tm = sim.timers
    tm[timer, TM_DEADLINE] = deadline
    if deadline < tm[timer, TM_PENDING]:
        tm[timer, TM_PENDING] = deadline
        push_event(sim, deadline, EV_TIMER, timer)


@kernel
def cancel_timer(sim, timer: int) -> None:
    sim.timers[timer, TM_DEADLINE] = math.inf


@kernel
def timer_due(sim, timer: int, now: float) -> bool:
    """Called when an EV_TIMER event for `timer` pops at `now`: True if the timer fires now.
    Stale events return False; an event that came before a postponed deadline is re-pushed."""
    tm = sim.timers
    if now != tm[timer, TM_PENDING]:
        return False  # superseded by an earlier event for the same timer
    tm[timer, TM_PENDING] = math.inf
    deadline = tm[timer, TM_DEADLINE]
    if deadline <= now:
        tm[timer, TM_DEADLINE] = math.inf
        return True
    if deadline < math.inf:
        tm[timer, TM_PENDING] = deadline
        push_event(sim, deadline, EV_TIMER, timer)
    return False
