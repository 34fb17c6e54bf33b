"""The state a run ends in, in words a person can act on (issue 11, the sweep's verdict).

`convergence_time` says *when* rates and queue stay inside the range they end in; a steady limit
cycle, a buffer that overflows all the time and a link left idle by stalled senders all pass
that test. The verdict names them apart, from the bottleneck (the link busiest after warm-up)
over the time after warm-up:

- ``collapsed``: the bottleneck carries less than half of its capacity while it drops packets.
  A window-based sender that loses packets and leaves the link idle is stalled (a retransmission
  timeout); the goodput collapse of an incast. An idle link without losses (too few senders, or
  rate-based senders held at their floor) is not a collapse.
- ``lossy``: the bottleneck drops packets in at least half of the records: a standing overflow,
  not the occasional loss of a sawtooth.
- ``oscillating``: the bottleneck queue repeats a cycle to the end of the run: the
  autocorrelation of the queue (trend removed) has a peak of at least 0.5 at a lag of at most
  half the window (the period), the swing (5th to 95th percentile of the queue; of the records'
  peaks and troughs where the result keeps them) is at least 4 packets and 10 % of the mean
  queue, and the second half of the window swings at least half as much as the first (the cycle
  does not die out). A packet-level queue's noise has no such peak.
- ``settled``: none of the above, a queue that swings less than that, and
  `metrics.convergence_time` finds the run settled; where it settles after the warm-up, the
  swing is that of the queue from then on (a start-up that ends late is not a swing).
- ``unsettled``: none of the above: flows still in a retransmission timeout when the run ends
  (fluid results, `stall`: they come back after it), a queue that swings as much without
  repeating a cycle within the window (a cycle longer than half of it, such as a Reno sawtooth
  of seconds, or noise), or a run not settled before its last quarter (a drift, a slow
  recovery, or a run too short to judge; `RunState.reason` says which).

The thresholds are choices, not physics: half the capacity is the usual line between a loaded
link and a collapsed one (the incast literature plots goodput against its collapse to a
fraction of the link); half the records separates a standing overflow from a sawtooth's losses
(DCTCP and Reno lose in a few records per cycle). Validated by tests/test_verdict.py:
synthetic queues with a known period and swing, DCTCP's sawtooth against its closed-form
amplitude (Alizadeh et al. 2010) and the packet-level reference's period, DCQCN's limit cycle in
both engines, and a standing overflow where the window floor demands one. ``collapsed`` is
checked on synthetic results only: long-lived flows do not collapse in the packet-level
reference either (the flows not in a timeout take the link); the barrier-synchronised incast of
issue 11 will check it against a real collapse.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import xarray as xr

from pathflow.metrics import convergence_time, default_warmup

__all__ = ["STATES", "RunState", "bottleneck", "state_names", "state_runs", "verdict"]

STATES = ("settled", "oscillating", "lossy", "collapsed", "unsettled")
"""The states, in the order of their codes in a sweep's `state` (0..4)."""

COLLAPSE_UTILIZATION = 0.5
LOSSY_RECORDS = 0.5
CYCLE_CORRELATION = 0.5
CYCLE_PACKETS = 4.0
CYCLE_RELATIVE = 0.1


@dataclass(frozen=True)
class RunState:
    """The state of a run (one of `STATES`) with what it rests on."""

    state: str
    link: str
    """The bottleneck judged."""
    utilization: float
    """Its mean utilization after warm-up."""
    swing: float
    """Peak-to-peak of its queue after warm-up (bytes; 5th to 95th percentile)."""
    period: float
    """Period of the queue's cycle (s; nan unless oscillating)."""
    reason: str
    """One line: why this state."""

    @property
    def code(self) -> int:
        return STATES.index(self.state)


def bottleneck(ds: xr.Dataset, warmup: float | None = None) -> int:
    """Index of the link busiest after warm-up (mean utilization)."""
    after = ds.time > (default_warmup(ds) if warmup is None else warmup)
    return int(np.argmax(ds.utilization.sel(time=after).mean("time").values))


def _cycle(queue: np.ndarray) -> tuple[float, float]:
    """(period in records, autocorrelation there) of `queue`: the first peak of its
    autocorrelation (trend removed) after the first zero crossing, at a lag of at most half its
    length; (nan, 0) if there is none."""
    if queue.size < 8:
        return math.nan, 0.0
    x = np.arange(queue.size, dtype=float)
    detrended = queue - np.polyval(np.polyfit(x, queue, 1), x)
    if float(np.dot(detrended, detrended)) <= 0:
        return math.nan, 0.0
    spectrum = np.fft.rfft(detrended, n=2 * queue.size)
    acf = np.fft.irfft(spectrum * np.conj(spectrum))[: queue.size // 2 + 1]
    acf = acf / acf[0] * queue.size / (queue.size - np.arange(acf.size))  # unbiased
    negative = np.flatnonzero(acf < 0)
    if not negative.size:
        return math.nan, 0.0
    back = np.flatnonzero(acf[negative[0]:] >= 0)  # the next lobe: one period on
    if not back.size:
        return math.nan, 0.0
    lobe = negative[0] + back[0]
    ends = np.flatnonzero(acf[lobe:] < 0)
    lag = lobe + int(np.argmax(acf[lobe: lobe + ends[0] if ends.size else acf.size]))
    return float(lag), float(acf[lag])


def verdict(ds: xr.Dataset, warmup: float | None = None) -> RunState:
    """The state `ds` (a result of either engine) ends in; see the module docstring."""
    warmup = default_warmup(ds) if warmup is None else warmup
    after = ds.time.values > warmup
    link = bottleneck(ds, warmup)
    name = str(ds.link.values[link])
    at = ds.isel(link=link, time=np.flatnonzero(after))
    utilization = float(at.utilization.mean())
    packet = float(ds.attrs.get("packet_bytes", 1500))
    queue = at.queue.values.astype(float)
    high = at.queue_max.values if "queue_max" in at else queue
    low = at.queue_min.values if "queue_min" in at else queue
    swing = float(np.percentile(high, 95) - np.percentile(low, 5)) if queue.size else 0.0
    dropping = at.drops.values > 0

    def out(state: str, reason: str, period: float = math.nan) -> RunState:
        return RunState(state, name, utilization, swing, period, reason)

    if dropping.any() and utilization < COLLAPSE_UTILIZATION:
        return out("collapsed", f"{name} carries {utilization:.0%} of its capacity while it "
                                "drops packets: senders stalled")
    if dropping.size and dropping.mean() >= LOSSY_RECORDS:
        return out("lossy", f"{name} drops packets in {dropping.mean():.0%} of the records after "
                            "warm-up: a standing overflow")

    def swings(peak_to_peak: float, mean: float) -> bool:
        return peak_to_peak >= max(CYCLE_PACKETS * packet, CYCLE_RELATIVE * mean)

    swinging = queue.size > 0 and swings(swing, float(queue.mean()))
    lag, correlation = _cycle(queue)
    half = queue.size // 2
    first, second = (float(np.ptp(part)) if part.size else 0.0
                     for part in (queue[:half], queue[half:]))
    if swinging and correlation >= CYCLE_CORRELATION and second >= 0.5 * first:
        interval = float(ds.time[1] - ds.time[0])
        return out("oscillating", f"{name}'s queue repeats every {lag * interval * 1e3:.3g} ms, "
                                  f"swinging {swing / 1e3:.3g} KB", lag * interval)
    stalled = int((ds.stall.values[-1] > 0).sum()) if "stall" in ds else 0
    if stalled:
        return out("unsettled", f"{stalled} flow(s) sit out a retransmission timeout at the end "
                                "of the run: they send again after it")
    convergence = convergence_time(ds)
    if swinging and convergence.settled and convergence.time > warmup:
        # the end of the start-up fell after the warm-up: judge the queue after it
        calm = queue[ds.time.values[after] >= convergence.time]
        swinging = calm.size == 0 or swings(
            float(np.percentile(calm, 95) - np.percentile(calm, 5)), float(calm.mean()))
    if swinging:
        return out("unsettled", f"{name}'s queue swings {swing / 1e3:.3g} KB without a cycle "
                                "that repeats within the time after warm-up")
    if convergence.settled:
        return out("settled", f"rates and queue in their final range from "
                              f"{convergence.time * 1e3:.3g} ms")
    return out("unsettled", convergence.reason or "still moving in the last quarter of the run")


def state_names(codes: xr.DataArray | np.ndarray) -> np.ndarray:
    """A sweep's `state` codes as names ("" where a point has not run: NaN)."""
    values = np.asarray(codes, dtype=float)
    names = np.array([*STATES, ""], dtype=object)
    return names[np.where(np.isfinite(values), values, len(STATES)).astype(int)]


def state_runs(flows: np.ndarray, codes: np.ndarray) -> str:
    """A sweep's states along its flow counts in one line, naming where the state changes:
    "oscillating at every N from 80 to 2000 flows", or "settled at 80 to 640 flows, lossy at 720
    to 2000; changes at 720 flows". Points not run yet are left out."""
    names = state_names(codes)
    points = [(int(n), str(s)) for n, s in zip(flows, names, strict=True) if s]
    if not points:
        return "no point has run"
    runs: list[list[int | str]] = []
    for n, name in points:
        if runs and runs[-1][0] == name:
            runs[-1][2] = n
        else:
            runs.append([name, n, n])

    def span(low: int | str, high: int | str) -> str:
        return f"{low} flows" if low == high else f"{low} to {high} flows"

    if len(runs) == 1:
        return f"{runs[0][0]} at every N from {span(*runs[0][1:])}"
    changes = ", ".join(str(run[1]) for run in runs[1:])
    return (", ".join(f"{run[0]} at {span(*run[1:])}" for run in runs)
            + f"; changes at {changes} flows")
