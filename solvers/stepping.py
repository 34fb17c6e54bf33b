"""Step sizes chosen from the dynamics, between record segments.

Why
---
The integrator's step must resolve the feedback delay, the round-trip time R(t) = base +
queueing. The conservative default, 1/20 of the smallest *base* round trip, is what slow start
on empty queues needs; but where queues hold the round trip up (DCTCP's queue at K, a drop-tail
buffer that an incast keeps full) R is tens to hundreds of times the base, and a step of R/20
gives the same answer in a fraction of the steps (DESIGN §4, "Step size, measured";
`benchmarks/study_dt.py`).

Rule
----
The run is recorded every T_s seconds (fixed). Between segments of records, the step for the next
segment is T_s / n with n one of the levels ceil(2^(j/4)), j = 0, 1, ... (four per octave: a
power of two would take up to twice the steps needed, 1.4 times on average), or the finest n_0,
the default step's, chosen so that

    dt <= R_min / n_R,  R_min = the smallest round trip, over the segment just run, of the
                                 controllers whose own window or rate limits what they send and
                                 whose path marked or dropped, and the current round trip of
                                 those starting in the next one;
                        n_R = 20 for window-based models, 10 for rate-based ones.

A window-based sender's rate W / R(t) answers the queue within the round trip (the ACK clock):
the loop q' = sum W / R(q) - C is the fast one, and DESIGN §4 measured 20 steps per round trip
for it. A rate-based sender's rate does not depend on R; the round trip is only the delay of its
feedback, which the ring files to the step (a signal's delay is rounded up to a whole step, at
most R / n_R late), while its own dynamics are timers of tens of microseconds (the finest step
also keeps a quarter of those, `compile`). Measured on the default sweep (seed 001's RDMA
incast, DCQCN and DCQCN+, 1 us links, 25 flow counts): at R/10 rather than R/20 every mean
queue, latency, throughput, pause time and convergence time moved by at most 1 %, the p99
queue by at most 6 % (one point of DCQCN's limit cycle; 0.4 % at the median point), every
state and cycle period unchanged, in 40 s rather than 63 s; at R/5 the means moved 2.5 %.

The step resolves the feedback delay of congestion signals, and only a controller whose path
marks or drops receives any, so only those constrain it. Controllers held back by their own NIC
(their window does not limit them, so it does not grow), finished or idle ones, and ones whose
paths send no signal (empty paths at their base round trip, and queues below the marking
threshold, such as the small ones that ACKs keep on the reverse ports: pure window growth,
which the NIC or a marking queue soon caps) do not, as long as some controller's path marks or
drops; where none does (no signal throughout the segment), every window-limited controller
counts. A step one level finer than the rule asks is kept (a round trip wavering across a level
would otherwise re-file the ring every segment); a coarser one is always refined. Slow start
on empty queues runs in the first segment, at the finest step, and so does any controller in
the segment in which it starts. The first segment is run record by record (`solvers.run`), the
rule applied after each, so that the step leaves the finest as soon as the round trips allow
rather than a 64th of the run later (on the k = 8 fat-tree's 1 s, 19 % of the steps were that
first segment's). The
step never falls below the default (n <= n_0) and never exceeds T_s or half of RED's averaging
time. n is a traced value (the number of steps in a record is a loop bound, not a shape), so one
compiled program serves every step, and the feedback ring keeps the finest step's length.

Changing the step re-files the feedback in flight: a signal due at step k of the old grid arrives
at time k dt_old and is due at step ceil(k dt_old / dt_new) of the new one (when several land on
one step the newest wins, as within a grid). Steps change only at record boundaries, where both
grids have a step. Only the ring's pending rows are read (those between the step and the newest
signal filed, a round trip or so ahead, while the ring spans the longest possible one at the
finest step), and `solvers.run` makes the new ring on the device, so that a
change costs milliseconds even where the ring is hundreds of megabytes.

Check: `pathflow run --check-dt` reruns at a fixed half default step and compares (DESIGN §6);
tests/test_stepping.py compares adaptive runs with fixed fine steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Stepping", "limiting_rtt", "refiled", "regrid"]

# steps per limiting round trip, by how a model sends (see the module docstring)
STEPS_PER_RTT: dict[str, int] = {"window": 20, "rate": 10}
LEVELS = 4  # step sizes per octave
_QUEUED = 1e-3  # a round trip this much above the base one has a queue on its path
_STAMP = 1 << 22  # solvers.dde._stamp: step numbers are filed modulo this


@dataclass(frozen=True)
class Stepping:
    """How a run may change its step: the record interval (s), the finest steps per record
    (the default step's), the longest step another time scale allows (s; RED's averaging) and
    the steps per limiting round trip (`STEPS_PER_RTT`)."""

    sample: float
    finest: int
    longest: float = math.inf
    per_rtt: int = STEPS_PER_RTT["window"]

    def choose(self, rtt: float, current: int | None = None) -> int:
        """Steps per record for the smallest limiting round trip `rtt` (s; inf: none), from
        `current` steps per record: it stays where it is at most one level finer than needed
        (a round trip that wavers across a level would otherwise re-file every segment)."""
        if not math.isfinite(rtt) or rtt <= 0:
            wanted = 1
        else:
            wanted = _level(self.sample * self.per_rtt / rtt)
        fewest = max(1, math.ceil(self.sample / self.longest - 1e-9))
        chosen = min(self.finest, max(fewest, wanted))
        if current is not None and chosen < current <= _level(chosen + 0.5):
            return current
        return chosen


def _level(steps: float) -> int:
    """The least of the levels ceil(2^(j/LEVELS)), j = 0, 1, ..., that is at least `steps`."""
    if steps <= 1:
        return 1
    j = math.ceil(math.log2(steps) * LEVELS - 1e-9)
    while math.ceil(2 ** ((j - 1) / LEVELS)) >= steps:  # round-off at a level
        j -= 1
    return math.ceil(2 ** (j / LEVELS))


def limiting_rtt(rtt: np.ndarray, send_rate: np.ndarray, nic_capacity: np.ndarray,
                 nic: np.ndarray, base_rtt: np.ndarray, start: np.ndarray, now: float,
                 until: float, nic_load: np.ndarray | None = None,
                 signalled: np.ndarray | None = None) -> float:
    """The smallest round trip (s) that constrains the step over a segment of records.

    rtt, send_rate: (records, F) of the segment just run; nic_capacity: (F,) bytes/s of each
    controller's host link; nic: (F,) its index (controllers on one host share it); base_rtt:
    (F,) s, without queueing; start: (F,) s; [now, until): the next segment's time span;
    nic_load: (records, F) bytes/s arriving at each controller's host link, the ACKs its host
    sends included (a NIC sends them first, so its senders are held at its rate less those);
    signalled: (F,) whether a link on the controller's paths marked or dropped in the segment
    (None: every controller whose round trip exceeds its base one counts as queued).
    """
    host_rate = np.zeros((send_rate.shape[0], int(nic.max()) + 1))
    np.add.at(host_rate.T, nic, send_rate.T)
    load = host_rate[:, nic] if nic_load is None else np.maximum(host_rate[:, nic], nic_load)
    held_by_nic = load >= nic_capacity * (1 - 1e-6)
    limiting = (send_rate > 0) & ~held_by_nic
    queued = limiting & (rtt > base_rtt * (1 + _QUEUED))
    if signalled is not None:
        queued &= signalled
    starting = (start >= now) & (start < until)
    candidates = [rtt[queued if queued.any() else limiting], rtt[-1, starting]]
    values = np.concatenate(candidates)
    return float(values.min()) if values.size else math.inf


def refiled(step: int, slots: np.ndarray, due: np.ndarray, old: int, new: int
            ) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The signals in flight re-filed from `old` to `new` steps per record (see the module
    docstring), sparse: the new step counter, each pending entry's new (row, column) of the
    ring and its (stamp, signals...), and the new FIFO guard. slots: (H, F, 4) [stamp,
    signals...]; due: (F,). Only the rows that can hold pending entries are read: every pending
    signal is due between the step and the newest one filed (`due`, the FIFO guard), a round
    trip or so ahead, while the ring spans the longest possible one at the finest step."""
    history = slots.shape[0]
    # the step is at a record boundary: a whole number of records of `old` steps
    new_step = step // old * new
    reach = int(np.clip(int(due.max(initial=step)) - step + 1, 0, history))
    # which slots hold a pending signal, read through at most two slices of the ring (views:
    # the rows ahead are often most of the ring, and a copy of them cost as much as the ring)
    first = step % history
    pending = np.concatenate([
        slots[lo:hi, :, 0] == ((step + ahead + np.arange(hi - lo)) % _STAMP)[:, None]
        for lo, hi, ahead in ((first, min(first + reach, history), 0),
                              (0, max(0, first + reach - history), history - first))])
    cols, rows = np.nonzero(pending.T)  # controller by controller, oldest first
    old_due = step + rows.astype(np.int64)
    # arrival at old_due * dt_old: step ceil(old_due * new / old) of the new grid, at most
    # history - 1 ahead (as dde._send_back files them)
    new_due = new_step + np.clip(-(-old_due * new // old) - new_step, 0, history - 1)
    # where several land on one step the newest wins (they are adjacent: new_due does not
    # decrease with old_due), so that every slot is filed once (a scatter's order is undefined)
    newest = np.ones(cols.shape, bool)
    newest[:-1] = (cols[1:] != cols[:-1]) | (new_due[1:] != new_due[:-1])
    rows, cols, new_due = rows[newest], cols[newest], new_due[newest]
    flat = (first + rows) % history * slots.shape[1] + cols  # np.take along one axis: 5x faster
    entries = np.take(slots.reshape(-1, slots.shape[-1]), flat, axis=0)
    entries[:, 0] = new_due % _STAMP
    new_guard = -(-due.astype(np.int64) * new // old)
    return new_step, new_due % history, cols, entries, new_guard.astype(due.dtype)


def regrid(step: int, slots: np.ndarray, due: np.ndarray, old: int, new: int
           ) -> tuple[int, np.ndarray, np.ndarray]:
    """The step counter, feedback ring and FIFO guard re-filed from `old` to `new` steps per
    record, as whole arrays (`refiled`; the solver files them on the device instead)."""
    new_step, rows, cols, entries, guard = refiled(step, slots, due, old, new)
    out = np.full(slots.shape, -1.0, dtype=slots.dtype)
    out[rows, cols] = entries
    return new_step, out, guard
