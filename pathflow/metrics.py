"""Metrics on result Datasets: throughput, fairness, queues, convergence, hotspots (DESIGN §6).

Every function takes a Dataset with the names of `pathflow.results` (fluid, ns-3 and trace
results alike) and a `warmup` (s): statistics use the steady window t > warmup. The default
warmup is the scenario's `[run] warmup`, else a quarter of the run.
"""

from __future__ import annotations

import itertools
import math
import tomllib
from dataclasses import dataclass

import numpy as np
import xarray as xr

from pathflow.invariants import Report, report_of
from pathflow.resolved import ResolvedRun, steady_start
from pathflow.units import parse_time

__all__ = [
    "HEADER_BYTES",
    "Convergence",
    "Summary",
    "below_since",
    "bottleneck_frequency",
    "convergence_time",
    "default_warmup",
    "flow_rounds",
    "group_summary",
    "hotspots",
    "jain_index",
    "loss_cycles",
    "mean_network_utilization",
    "pause_time",
    "queue_stats",
    "round_summary",
    "store_warmup",
    "summarize",
    "throughput",
    "transfer_rates",
]

HEADER_BYTES = 66.0  # B: Ethernet 14, IPv4 20, TCP 20 with the 12-byte timestamp option


def default_warmup(ds: xr.Dataset) -> float:
    """The start of a result's steady window (s): `attrs["warmup_s"]` where the engine stored it
    (`store_warmup`), else the `[run] warmup` of the scenario TOML in attrs (a result written
    before engines stored it), else a quarter of the recorded time (`resolved.steady_start`)."""
    if "warmup_s" in ds.attrs:
        return float(ds.attrs["warmup_s"])
    scenario = ds.attrs.get("scenario")
    text = tomllib.loads(scenario).get("run", {}).get("warmup") if scenario else None
    return steady_start(parse_time(text, "run.warmup") if text else None, float(ds.time[-1]))


def store_warmup(ds: xr.Dataset, run: ResolvedRun) -> None:
    """Keep the start of the steady window of the run `ds` recorded in `attrs["warmup_s"]`,
    for `default_warmup`: `[run] warmup`, else a quarter of the recorded time."""
    ds.attrs["warmup_s"] = steady_start(run.warmup, float(ds.time[-1]))


def _steady(ds: xr.Dataset, warmup: float | None) -> xr.Dataset:
    cut = default_warmup(ds) if warmup is None else warmup
    return ds.sel(time=ds.time > cut)


def throughput(ds: xr.Dataset, warmup: float | None = None) -> xr.DataArray:
    """Mean delivered rate of each flow over the steady window (bytes/s)."""
    rate = _steady(ds, warmup).flow_rate.mean("time")
    rate.attrs["units"] = "bytes/s"
    return rate


def jain_index(rates: xr.DataArray | np.ndarray) -> float:
    """Jain's fairness index (sum x)^2 / (n sum x^2): 1 when equal, 1/n when one flow has all."""
    x = np.asarray(rates, dtype=float)
    total = float(np.sum(x**2))
    return float(np.sum(x) ** 2 / (x.size * total)) if total > 0 else math.nan


def queue_stats(ds: xr.Dataset, warmup: float | None = None) -> xr.Dataset:
    """Per-link queue mean, p99 and max (bytes) over the steady window; max includes peaks
    between samples when the result records them (`queue_max`)."""
    steady = _steady(ds, warmup)
    q = steady.queue
    peak = steady.queue_max.max("time") if "queue_max" in steady else q.max("time")
    low = steady.queue_min.min("time") if "queue_min" in steady else q.min("time")
    out = xr.Dataset({
        "mean": q.mean("time"),
        "p1": q.quantile(0.01, "time").drop_vars("quantile"),
        "p99": q.quantile(0.99, "time").drop_vars("quantile"),
        "max": peak,
        "min": low,
    })
    for name in out.data_vars:
        out[name].attrs["units"] = "bytes"
    return out


def below_since(ds: xr.Dataset, link: int, threshold: float, warmup: float | None = None
                ) -> float:
    """Seed 001's convergence criterion (a queue that stays above `threshold` bytes has not
    converged; the thesis reads 200 KB at 10 Gb/s): the time (s) from which the queue of the
    `link`-th link stays at or below `threshold` to the end of the run, the end of the sample
    of its last excursion above it (0: never above); inf when it is above it after warm-up.
    Peaks between samples count where the result records them (`queue_max`)."""
    queue = ds.queue_max if "queue_max" in ds else ds.queue
    above = np.flatnonzero(queue.isel(link=link).values > threshold)
    if not above.size:
        return 0.0
    end = float(ds.time[above[-1]])
    return math.inf if end > (default_warmup(ds) if warmup is None else warmup) else end


def _moving_average(values: np.ndarray, width: int) -> np.ndarray:
    """Trailing mean over `width` samples along axis 0 (the first samples average what exists)."""
    if width <= 1:
        return values
    total = np.cumsum(values, axis=0)
    shifted = np.zeros_like(total)
    shifted[width:] = total[:-width]
    count = np.minimum(np.arange(1, len(values) + 1), width).reshape(-1, *[1] * (values.ndim - 1))
    return (total - shifted) / count


def _last_exit(series: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Index after the last sample outside [low, high], per column (0 if never outside)."""
    outside = (series < low) | (series > high)
    any_out = outside.any(axis=0)
    last = series.shape[0] - 1 - np.argmax(outside[::-1], axis=0)
    return np.where(any_out, last + 1, 0)


def _fluctuation(tail: np.ndarray) -> np.ndarray:
    """Per column, the standard deviation about the least-squares line (the trend removed)."""
    if tail.shape[0] < 3 or tail.shape[1] == 0:
        return np.zeros(tail.shape[1])
    x = np.arange(tail.shape[0], dtype=float)
    slope, intercept = np.polyfit(x, tail, 1)
    return np.std(tail - (np.outer(x, slope) + intercept), axis=0)


# eq=False: the per-flow times are an array, which has no single truth value to compare by
@dataclass(frozen=True, eq=False)
class Convergence:
    """When a run settles (`convergence_time`); times in s."""

    time: float
    """When every running flow and the judged queue settled: inf if not before the last quarter
    of the run, nan if it cannot be judged (`reason`)."""
    settled: bool
    """Settled before the last quarter of the run began."""
    flows: xr.DataArray
    """Per flow (dimension `flow`), when its rate settled; nan for a flow idle at the end."""
    link: str | None
    """The link whose queue was judged (None when the run cannot be judged and none was given)."""
    queue_time: float
    """When that queue alone settled."""
    reason: str | None
    """Why the run cannot be judged ("not enough data: ..."), None when it can."""


def convergence_time(ds: xr.Dataset, band: float = 0.1, smoothing: float | None = None,
                     queue_band_packets: float = 2.0, noise: float = 4.0,
                     link: str | None = None) -> Convergence:
    """When the run settles: the first time after which every running flow's rate stays within
    +-max(band * final mean, noise * its fluctuation) of its final mean, and the queue of `link`
    (default: the busiest link of the last quarter, ranked as by `hotspots`) within
    +-max(band * final mean, queue_band_packets packets, noise * its fluctuation) of its final
    mean. "Final" is the last quarter of the run; the fluctuation is the standard deviation of
    the smoothed series about a straight line through its last quarter.

    Rates and queue are smoothed over `smoothing` seconds first (default: 10 mean RTTs, or 10
    samples when RTTs are not recorded, but at most 5 % of the run), so that a steady limit cycle
    such as DCTCP's sawtooth counts as settled while a slow drift does not (a drift is the
    straight line, not fluctuation). The fluctuation term matters for packet-level and measured
    results, whose per-flow rates over 10 RTTs wander by more than 10 % in steady state: such a
    series settles when it enters the range it keeps (4 standard deviations: a Gaussian series
    leaves it once in about 16 000 independent samples). Fluid results fluctuate far less and
    are judged by the band alone.
    Returns a `Convergence`. A run that has not settled before its last quarter begins has time
    inf. A run that cannot be judged has time nan, settled False and the reason in `reason`
    (not enough data: fewer than `MIN_RECORDS` records, a smoothing window longer than the
    first three quarters of the run, or no flow delivering anything in the last quarter).
    """
    time = ds.time.values
    interval = float(time[1] - time[0]) if time.size > 1 else 1.0
    if smoothing is None:
        rtt = ds.rtt.values[np.isfinite(ds.rtt.values)] if "rtt" in ds else np.empty(0)
        rtts = 10 * float(rtt.mean()) if rtt.size else 10 * interval  # no ACK back: no RTT
        smoothing = min(rtts, float(time[-1]) / 20)
    width = max(1, round(smoothing / interval))
    final_from = int(0.75 * time.size)
    rates = ds.flow_rate.values
    running = rates[final_from:].mean(axis=0) > 0 if time.size else np.zeros(0, bool)
    reason = _not_judged(time.size, width, final_from, bool(running.any()))
    if reason is not None:
        return Convergence(time=math.nan, settled=False,
                           flows=_per_flow(ds, np.full(rates.shape[1], math.nan)), link=link,
                           queue_time=math.nan, reason=reason)
    smooth = _moving_average(rates[:, running], width)
    final = smooth[final_from:].mean(axis=0)
    half = np.maximum(band * final, noise * _fluctuation(smooth[final_from:]))
    flow_exit = _last_exit(smooth, final - half, final + half)
    if link is None:
        queue_mean = ds.queue.values[final_from:].mean(axis=0)
        load = (ds.utilization.values[final_from:].mean(axis=0) if "utilization" in ds
                else queue_mean)
        link = str(ds.link.values[_ranking(load, queue_mean)[0]])
    packet = float(ds.attrs.get("packet_bytes", 1500))
    queue = _moving_average(ds.queue.sel(link=link).values[:, None], width)
    q_final = queue[final_from:].mean(axis=0)
    width_q = np.maximum(np.maximum(band * q_final, queue_band_packets * packet),
                         noise * _fluctuation(queue[final_from:]))
    queue_exit = int(_last_exit(queue, q_final - width_q, q_final + width_q)[0])

    def when(index: int) -> float:
        if index >= final_from:
            return math.inf
        return float(time[index - 1]) if index > 0 else 0.0

    settle_index = max([queue_exit, *flow_exit.tolist()])
    per_flow = np.full(rates.shape[1], math.nan)
    per_flow[running] = [when(int(i)) for i in flow_exit]
    return Convergence(time=when(settle_index), settled=settle_index < final_from,
                       flows=_per_flow(ds, per_flow), link=link, queue_time=when(queue_exit),
                       reason=None)


def _per_flow(ds: xr.Dataset, seconds: np.ndarray) -> xr.DataArray:
    """Per-flow times (s), labelled by the result's flows."""
    return xr.DataArray(seconds, coords={"flow": ds.flow.values}, dims="flow",
                        attrs={"units": "s"})


MIN_RECORDS = 8  # a last quarter of two samples, and some before it


def _not_judged(records: int, width: int, final_from: int, flowing: bool) -> str | None:
    """Why convergence cannot be judged on this run ("not enough data: ..."), or None."""
    if records < MIN_RECORDS:
        return f"not enough data: {records} records, {MIN_RECORDS} needed"
    if width > final_from:
        return (f"not enough data: the smoothing window ({width} records) is longer than the "
                f"first three quarters of the run ({final_from} records)")
    if not flowing:
        return "not enough data: no flow delivered anything in the last quarter of the run"
    return None


def loss_cycles(ds: xr.Dataset, link: str, warmup: float | None = None, gap: float = 0.5
                ) -> dict[str, np.ndarray]:
    """A loss-driven sawtooth on `link`: loss events are runs of samples with drops, separated by
    at least `gap` seconds; returns the event times (s), the periods between them (s) and the
    smallest queue (bytes) between consecutive events (the troughs)."""
    steady = _steady(ds, warmup).sel(link=link)
    time = steady.time.values
    dropping = time[steady.drops.values > 0]
    if dropping.size == 0:
        return {"events": dropping, "periods": dropping, "troughs": dropping}
    starts = dropping[np.concatenate([[True], np.diff(dropping) > gap])]
    low = steady.queue_min.values if "queue_min" in steady else steady.queue.values
    troughs = np.array([low[(time > a) & (time < b)].min()
                        for a, b in itertools.pairwise(starts)])
    return {"events": starts, "periods": np.diff(starts), "troughs": troughs}


def pause_time(ds: xr.Dataset, top: int = 5) -> xr.DataArray:
    """The `top` links that priority flow control paused longest over the whole run, with the
    time paused (s), longest first; none without PFC or where nothing was paused."""
    if "pause" not in ds:
        return xr.zeros_like(ds.capacity)[:0]
    seconds = (ds.pause * ds.attrs["sample_interval"]).sum("time")
    order = np.argsort(-seconds.values, kind="stable")[:top]
    seconds = seconds.isel(link=order)
    seconds = seconds[seconds.values > 0]
    seconds.attrs = {"units": "s", "long_name": "time paused by PFC"}
    return seconds


def mean_network_utilization(ds: xr.Dataset) -> float:
    """Seed 002's path-diversity measure: per flow (1/P) sum_p b_p / max_q b_q over the P
    equal-cost paths of its host pair (b_p: `path_bytes`, the bytes on path p), averaged over
    the flows that carried bytes. 1/P for a flow on one path, 1 for an even spread over all P
    (spraying); MPTCP subflows hashed onto one path count as one. Measured records carry the
    study's own value as the variable `mean_network_utilization` (their b_p count ACKs too)."""
    carried = ds.path_bytes.sum("path")
    spread = carried / ds.path_bytes.max("path") / ds.equal_cost_paths
    return float(spread.where(carried > 0).mean())


def transfer_rates(ds: xr.Dataset, header_bytes: float = HEADER_BYTES) -> xr.Dataset:
    """Seed 002's accounting of finite transfers, per flow: `goodput`, payload bytes over the
    transfer time (the study's file size / FCT), and `throughput`, data bytes on the wire
    (`path_bytes`, retransmissions included) over the same time; the transfer time runs from
    the flow's start to its last byte's arrival (`completion_time`, inf for a flow that did
    not finish, whose rates are nan). A flow's `size` counts packets on the wire, of which
    `header_bytes` (default: Ethernet, IPv4, TCP with timestamps) are no payload; a flow with
    rounds (`[traffic] rounds`) transfers `size` per round."""
    packet = float(ds.attrs["packet_bytes"])
    if not 0 <= header_bytes < packet:
        raise ValueError(f"header_bytes: must be in [0, {packet:g}) B (the packet size), got "
                         f"{header_bytes:g}")
    elapsed = (ds.completion_time - ds.start).where(np.isfinite(ds.completion_time))
    transferred = ds["size"] * flow_rounds(ds)  # a flow with rounds sends `size` per round
    goodput = transferred * (1 - header_bytes / packet) / elapsed
    throughput = ds.path_bytes.sum("path") / elapsed
    goodput.attrs = {"units": "bytes/s", "long_name": "payload bytes / transfer time"}
    throughput.attrs = {"units": "bytes/s", "long_name": "data bytes on the wire / transfer time"}
    return xr.Dataset({"goodput": goodput, "throughput": throughput,
                       "transfer_time": elapsed.assign_attrs(units="s")})


def flow_rounds(ds: xr.Dataset) -> xr.DataArray:
    """The rounds of each flow (`[traffic] rounds`): its entries of `block_done` that are not
    nan; 1 for every flow of a result without rounds."""
    if "block_done" not in ds:
        return xr.ones_like(ds["flow"], dtype=int)
    return ds.block_done.notnull().sum("round")


def round_summary(ds: xr.Dataset) -> xr.Dataset:
    """Barrier-synchronised reads (`[traffic] rounds`), per traffic group with rounds (more
    than one) and per round, from `block_done` (flow, round) alone, so any engine's result:

    - `round_start`, `round_end` (s): a round starts when the group's previous one ended (round
      0 at its earliest flow's start) and ends at the barrier, when the last of the group's
      blocks of that round had arrived (inf: not within the run);
    - `round_time` (s): their difference (inf for a round that did not end);
    - `round_goodput` (bytes/s): the group's blocks of the round (the sum of its flows' `size`,
      wire bytes) over `round_time` (nan for a round that did not end);
    - `goodput` (per group, bytes/s): the blocks of the completed rounds over their summed round
      times, i.e. what an application reading round after round receives per second;
    - `rounds` and `rounds_completed` per group.

    Rounds beyond a group's own are nan. A result without rounds gives no groups."""
    per_flow = flow_rounds(ds).values
    group = ds.group.values if "group" in ds.coords else np.zeros(ds.sizes["flow"], dtype=int)
    chosen = [g for g in np.unique(group) if per_flow[group == g].max() > 1]
    width = ds.sizes.get("round", 0) if chosen else 0
    shape = (len(chosen), width)
    start, end = np.full(shape, math.nan), np.full(shape, math.nan)
    blocks = np.zeros(len(chosen))  # bytes of the group's blocks of one round
    rounds, done = np.zeros(len(chosen), int), np.zeros(len(chosen), int)
    for k, g in enumerate(chosen):
        mine = group == g
        n = int(per_flow[mine].max())
        end[k, :n] = ds.block_done.values[mine, :n].max(axis=0)  # inf if a block never came
        start[k, 0] = float(ds.start.values[mine].min())
        start[k, 1:n] = end[k, :n - 1]
        blocks[k] = float(ds["size"].values[mine].sum())
        rounds[k], done[k] = n, int(np.isfinite(end[k, :n]).sum())
    with np.errstate(invalid="ignore"):
        time = np.where(np.isinf(end), math.inf, end - start)
        goodput = np.where(np.isfinite(time), blocks[:, None] / time, math.nan)
    completed = np.isfinite(time)
    spent = np.where(completed, time, 0.0).sum(axis=1)
    mean = np.divide(blocks * done, spent, out=np.full(len(chosen), math.nan), where=spent > 0)
    per_round = ("group", "round")
    return xr.Dataset(
        {"round_start": (per_round, start, {"units": "s"}),
         "round_end": (per_round, end, {"units": "s"}),
         "round_time": (per_round, time, {"units": "s"}),
         "round_goodput": (per_round, goodput, {"units": "bytes/s"}),
         "goodput": ("group", mean, {"units": "bytes/s", "long_name": "blocks of the completed "
                                     "rounds / their summed round times"}),
         "rounds": ("group", rounds), "rounds_completed": ("group", done)},
        coords={"group": np.asarray(chosen, dtype=int), "round": np.arange(width)})


def group_summary(ds: xr.Dataset, warmup: float | None = None) -> xr.Dataset:
    """Per traffic group (`[[traffic.groups]]`; a result without groups is one): its
    congestion control, its flows' total steady-window throughput and their Jain index, and of
    its finite flows how many finished and their median transfer time (start to last byte)."""
    rates = throughput(ds, warmup).values
    group = ds.group.values if "group" in ds.coords else np.zeros(ds.sizes["flow"], dtype=int)
    elapsed = (ds.completion_time - ds.start).values
    finite = np.isfinite(ds["size"].values)
    rows = []
    for g in np.unique(group):
        mine = group == g
        done = elapsed[mine & finite]
        done = done[np.isfinite(done)]
        rows.append((str(ds.cc.values[np.argmax(mine)]), int(mine.sum()),
                     float(rates[mine].sum()), jain_index(rates[mine]),
                     int((mine & finite).sum()), done.size,
                     float(np.median(done)) if done.size else math.nan))
    cc, flows, total, jain, transfers, finished, median = zip(*rows, strict=True)
    return xr.Dataset(
        {"cc": ("group", list(cc)), "flows": ("group", list(flows)),
         "throughput": ("group", list(total), {"units": "bytes/s"}),
         "jain": ("group", list(jain)), "transfers": ("group", list(transfers)),
         "finished": ("group", list(finished)),
         "transfer_time_median": ("group", list(median), {"units": "s"})},
        coords={"group": np.unique(group)})


def bottleneck_frequency(runs: list[xr.Dataset], utilization: float = 0.95,
                         queue_packets: float = 1.0, warmup: float | None = None
                         ) -> xr.DataArray:
    """For each link, the fraction of runs (e.g. ECMP seeds) in which it is a bottleneck: mean
    utilization above `utilization` and a standing queue above `queue_packets` packets."""
    flags = []
    for ds in runs:
        steady = _steady(ds, warmup)
        packet = float(ds.attrs.get("packet_bytes", 1500))
        busy = (steady.utilization.mean("time") > utilization) & (
            steady.queue.mean("time") > queue_packets * packet)
        flags.append(busy.astype(float))
    frequency = xr.concat(flags, "run", join="outer", fill_value=0.0).mean("run")
    frequency.attrs["units"] = "1"
    return frequency.sortby(frequency, ascending=False)


def _ranking(utilization: np.ndarray, queue: np.ndarray) -> np.ndarray:
    """Link indices, busiest first: by utilization in whole percent, then by queue, links at 99 %
    or more counting as saturated alike. Saturated links differ by rounding (0.9999999 against
    1) or by the idle moments of a sawtooth (99.5 % on a shared link whose queue empties now and
    then, against 100 % on a link that one flow fills at line rate); among them the one holding
    the larger standing queue is the hotspot."""
    return np.lexsort((-queue, -np.minimum(np.round(100 * utilization), 99.0)))


def hotspots(ds: xr.Dataset, top: int = 5, warmup: float | None = None) -> xr.Dataset:
    """The `top` links ranked by mean utilization, then mean queue, over the steady window."""
    steady = _steady(ds, warmup)
    utilization = steady.utilization.mean("time")
    queue = steady.queue.mean("time")
    order = _ranking(utilization.values, queue.values)[:top]
    ranked = xr.Dataset({
        "utilization": utilization.isel(link=order),
        "queue_mean": queue.isel(link=order),
        "queue_p99": steady.queue.quantile(0.99, "time").drop_vars("quantile").isel(link=order),
        "drops": steady.drops.mean("time").isel(link=order),
    })
    ranked["queue_mean"].attrs["units"] = ranked["queue_p99"].attrs["units"] = "bytes"
    ranked["drops"].attrs["units"] = "bytes/s"
    return ranked


# eq=False: Datasets and DataArrays inside have no single truth value to compare by
@dataclass(frozen=True, eq=False)
class Summary:
    """What `pathflow run` prints about a result (`summarize`), over the steady window; SI units."""

    throughput: xr.DataArray
    """Mean delivered rate of each flow (bytes/s), over `flow`."""
    aggregate_throughput: float
    """Their sum (bytes/s)."""
    jain: float
    """Jain's fairness index of the flows' rates (nan when nothing was delivered)."""
    bottleneck: str
    """The busiest link (the first of `hotspots`)."""
    queues: xr.Dataset
    """Queue mean, p1, p99, max and min (bytes) of the `hotspots` links, in their order."""
    hotspots: xr.Dataset
    """The busiest links, busiest first (`hotspots`)."""
    convergence: Convergence
    """When the run settled, judged at the bottleneck's queue."""
    groups: xr.Dataset
    """Per traffic group: control, flows, throughput, Jain, finished transfers (`group_summary`)."""
    invariants: Report
    """The invariant verdicts the engine attached (empty for a result without them)."""
    paused: xr.DataArray
    """The links PFC paused longest over the whole run, with their pause time (s); empty
    without PFC (`pause_time`)."""


def summarize(ds: xr.Dataset, warmup: float | None = None, top: int = 5) -> Summary:
    """Everything the command line prints about `ds`."""
    rates = throughput(ds, warmup)
    hot = hotspots(ds, top, warmup)
    bottleneck = str(hot.link.values[0])
    return Summary(
        throughput=rates,
        aggregate_throughput=float(rates.sum()),
        jain=jain_index(rates.values),
        bottleneck=bottleneck,
        queues=queue_stats(ds, warmup).sel(link=hot.link),
        hotspots=hot,
        convergence=convergence_time(ds, link=bottleneck),
        groups=group_summary(ds, warmup),
        invariants=report_of(ds),
        paused=pause_time(ds, top),
    )
