"""Sweeps: one scenario over many flow counts, and over any other scenario key, run together.

`sweep(scenario, flows, set=..., seeds=...)` runs every point of the grid of flow counts and
axes (`pathflow.axes`: `aqm.threshold` over 20, 40 and 65 packets, `transport.cc` over DCTCP
and Reno, hash seeds) batched (`pathflow.batch`: one compiled program per physics, network and
padded size, whichever key varies), and after every chunk gives the caller the points finished
so far, so an interrupted or failing sweep keeps them; `resume` continues one.

The result has one dimension per axis in the order given, then `flows` (`cc` for congestion
controls compared side by side; each axis' coordinate in SI units with its text beside it as
`<dim>_label`). Per point: summaries (throughput, fairness, queue statistics and queueing
latency of the bottleneck, convergence time, seed 001's standing-queue criterion, the verdict of
`pathflow.verdict`; for barrier-synchronised incast rounds, `[traffic] rounds`, the goodput over
the completed rounds and their count, NaN for a scenario without rounds) and, when asked for
(`series`), the queue and utilization time series of every link; NaN where a point has not run
yet. `pathflow.store` keeps it in a zarr store that grows point by point. In the incast pattern
the flows are spread round-robin over the senders, so a point's flow count is its number of
servers (the classic incast experiment's N) up to the scenario's senders, and beyond them several
flows share a server.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr

from pathflow import compilation_cache
from pathflow.analysis.predict import PREDICTIONS, predict
from pathflow.axes import (
    Axis,
    Dimension,
    axis,
    coordinates,
    dimensions,
    grid,
    point_scenario,
    seed_axis,
    written,
)
from pathflow.batch import (
    CHUNK_BYTES,
    Chunk,
    Progress,
    chunk_results,
    compile_together,
    pending,
    within,
)
from pathflow.cluster import run_remote
from pathflow.compile import Compiled
from pathflow.metrics import (
    below_since,
    convergence_time,
    default_warmup,
    jain_index,
    queue_stats,
    round_summary,
    throughput,
)
from pathflow.scenario import Scenario, ScenarioError
from pathflow.schema import SWEEP, build_dataset
from pathflow.verdict import bottleneck, verdict

__all__ = ["parse_flow_range", "summarize_point", "sweep", "with_predictions"]

SUMMARIES = tuple(name for name, spec in SWEEP.variables.items()
                  if not spec.dims and name not in PREDICTIONS)
STANDING_QUEUE = 200e3  # bytes: seed 001's criterion, a queue that stays above it has not converged
SERIES = ("queue", "utilization")  # per-link time series a sweep keeps of each point


def parse_flow_range(text: str, default_points: int = 25) -> list[int]:
    """'80:2000' -> 25 flow counts from 80 to 2000; '80:2000:40' -> every 40th; '64' -> [64]."""
    parts = text.split(":")
    try:
        numbers = [int(part) for part in parts]
    except ValueError:
        raise ScenarioError(f"--flows: {text!r} must be START:STOP[:STEP] with whole numbers, "
                            "e.g. 80:2000") from None
    if len(numbers) == 1:
        numbers = [numbers[0], numbers[0]]
    if len(numbers) > 3 or min(numbers) < 1 or numbers[0] > numbers[1]:
        raise ScenarioError(f"--flows: {text!r} must be START:STOP[:STEP] with 1 <= START <= STOP")
    start, stop = numbers[:2]
    if len(numbers) == 3:
        return list(range(start, stop + 1, numbers[2]))
    points = min(default_points, stop - start + 1)
    return sorted({round(x) for x in np.linspace(start, stop, points)})


def summarize_point(ds: xr.Dataset, standing_queue: float = STANDING_QUEUE
                    ) -> dict[str, float]:
    """Scalar summaries of one run: the numbers a sweep plots against flow count. The
    bottleneck is the link busiest after warm-up; its queueing latency is queue / capacity;
    `below_standing` is the time from which its queue stays at or below `standing_queue` bytes
    (`metrics.below_since`; inf: above it after warm-up, not converged by seed 001's criterion);
    `state` is the code of `verdict.verdict`'s state (`verdict.STATES`); `round_goodput` and
    `rounds_completed` are `_rounds`'."""
    rates = throughput(ds)
    stats = queue_stats(ds)
    warmup = default_warmup(ds)
    steady = ds.time > warmup
    utilization = ds.utilization.sel(time=steady).mean("time")
    link = bottleneck(ds, warmup)
    capacity = float(ds.capacity[link])
    convergence = convergence_time(ds)
    state = verdict(ds, warmup)
    return {
        "aggregate_throughput": float(rates.sum()),
        "jain": jain_index(rates.values),
        "bottleneck_utilization": float(utilization[link]),
        "queue_mean": float(stats["mean"][link]),
        "queue_p99": float(stats["p99"][link]),
        "queue_max": float(stats["max"][link]),
        "latency_mean": float(stats["mean"][link]) / capacity,
        "latency_p99": float(stats["p99"][link]) / capacity,
        "below_standing": below_since(ds, link, standing_queue, warmup),
        "convergence_time": convergence.time,
        "settled": math.nan if convergence.reason else float(convergence.settled),
        "drops": float(ds.drops.isel(link=link).mean()),
        "window_mean": float(ds.cwnd.sel(time=steady).mean()),
        "paused": float(ds.pause.sel(time=steady).mean("time").max()) if "pause" in ds else 0.0,
        "state": float(state.code),
        "queue_swing": state.swing,
        "cycle_period": state.period,
        **_rounds(ds),
    }


def _rounds(ds: xr.Dataset) -> dict[str, float]:
    """Barrier-synchronised rounds (`metrics.round_summary`): `round_goodput`, the blocks of the
    completed rounds over their summed round times (bytes/s), and `rounds_completed`. Traffic
    groups with rounds read concurrently, so their goodputs add up (those that completed none
    add nothing) and so do their rounds. NaN for both in a run without rounds (a sweep's points
    share one scenario, so its table and figure show them or not as a whole); a goodput of NaN
    beside 0 rounds completed: rounds that none completed within the run."""
    rounds = round_summary(ds)
    if not rounds.sizes["group"]:
        return {"round_goodput": math.nan, "rounds_completed": math.nan}
    goodput = rounds.goodput.values
    done = np.isfinite(goodput)
    return {"round_goodput": float(goodput[done].sum()) if done.any() else math.nan,
            "rounds_completed": float(rounds.rounds_completed.sum())}


Point = tuple[tuple[int, ...], int]  # (index along each dimension, flows)
_Finished = dict[Point, tuple[dict[str, float], xr.Dataset | None]]  # summaries, series


def sweep(scenario: Scenario, flows: str | Sequence[int], *,
          set: Mapping[str, str | Sequence[Any]] | None = None,
          seeds: int | None = None, zipped: bool = False,
          progress: Progress | None = None,
          on_chunk: Callable[[xr.Dataset], None] | None = None,
          before_run: Callable[[list[Compiled]], int | None] | None = None,
          resume: xr.Dataset | None = None,
          standing_queue: float = STANDING_QUEUE, series: bool = False,
          client: Any | None = None, chunk_bytes: float = CHUNK_BYTES,
          parallel: int = 1) -> xr.Dataset:
    """Run `scenario` at every point of the grid: the flow counts `flows` ("80:2000" or a
    list) by every value of each key of `set` ({"aqm.threshold": "20pkt,40pkt",
    "transport.cc": ["dctcp", "reno"]}; `pathflow.axes`) and, with `seeds`, hash seeds 1 to
    `seeds`. `zipped` pairs the keys of `set` (as many values each) into one dimension instead of
    crossing them. Every point is checked before any runs (ScenarioError, one line).

    `on_chunk` receives the partial result after each chunk (to save it), `progress(done,
    total)` counts points (fractions within a chunk). `before_run` sees the compiled points
    before any runs (to state the cost, or refuse by raising); it may return how many chunks to
    run at once, if fewer than `parallel` (what memory allows). `resume` is a partial result of
    the same sweep (as `on_chunk` saw it): its chunks are not run again, and the result is the
    one an uninterrupted sweep gives. `standing_queue` (bytes) is the threshold of
    `summarize_point`'s seed 001 criterion. `series` keeps each point's per-link queue and
    utilization over time beside its summaries (`SERIES`: 8 bytes per link, record and point,
    gigabytes over a grid of thousands of points; the summaries alone are kept by default).
    `client` (a dask.distributed Client, `pathflow.cluster.connect`) runs the chunks on its
    cluster, taking them as they finish; the result is the in-process one. `chunk_bytes` sizes
    the batches (`batch.chunks`: their records and feedback history; memory at the peak is
    about three times it, per chunk running). `parallel` runs that many chunks at once in this
    process, on threads: set it to the CPUs there are, as the command line does (a sweep has a
    chunk per physics and size bucket at least, so the default sweep's two controls run side by
    side on two CPUs); results are those of one at a time, bit for bit.
    `with_predictions` adds each point's prediction from the model alone (`pathflow sweep
    --analyze`)."""
    counts = parse_flow_range(flows) if isinstance(flows, str) else [int(n) for n in flows]
    dims = sweep_dimensions(set or {}, seeds, zipped)
    places = list(grid(dims))
    points = [(place, n) for place in places for n in counts]
    base = {place: point_scenario(scenario, dims, place) for place in places}
    compiled = compile_together([base[place].with_updates({"traffic.flows": n})
                                 for place, n in points])
    links = _links(compiled[:: len(counts)], dims)
    attrs = {"scenario": scenario.to_toml(), "scenario_name": scenario.name,
             "standing_queue": standing_queue, "sweep_axes": _described(dims),
             "kept": "summaries and series" if series else "summaries",
             "duration": scenario.si.run.duration}
    finished = _resumable(resume, attrs, dims, counts)
    skip = {i for i, point in enumerate(points) if point in finished}
    todo = [c for i, c in enumerate(compiled) if i not in skip]
    if before_run is not None and todo:
        parallel = min(parallel, before_run(todo) or parallel)
    coords = {**coordinates(scenario, dims), **links}
    frame: xr.Dataset | None = None
    for done in _run(compiled, pending(compiled, skip, chunk_bytes), progress, standing_queue,
                     series, client, parallel):
        for i, summary, kept in zip(done.indices, done.summaries, done.series, strict=True):
            finished[points[i]] = (summary, kept)
        frame = done.frame
        if on_chunk is not None:
            on_chunk(_combine(finished, dims, counts, coords, frame, attrs))
    if frame is None:  # every point was in `resume`
        assert resume is not None
        return resume
    return _combine(finished, dims, counts, coords, frame, attrs)


@dataclass(frozen=True)
class Measured:
    """What a sweep keeps of one chunk's points (what a worker sends back): per point its
    index among the sweep's points, its summaries and its series (None unless kept); `frame`
    holds the links, their tiers, the time axis and the run's attrs that every point shares."""

    indices: list[int]
    summaries: list[dict[str, float]]
    series: list[xr.Dataset | None]
    frame: xr.Dataset


def measure(chunk: Chunk, standing_queue: float, series: bool,
            progress: Callable[[int, int], None] | None = None) -> Measured:
    """Run one chunk (`batch.chunk_results`) and keep what a sweep keeps of its points, one
    point's Dataset at a time."""
    summaries, kept, frame = [], [], None
    for _, ds in chunk_results(chunk, progress):
        if frame is None:
            frame = xr.Dataset(coords={name: ds[name].variable
                                       for name in ("link", "link_tier", "time")},
                               attrs={key: ds.attrs[key] for key in (
                                   "engine", "pathflow_version", "dt", "sample_interval",
                                   "packet_bytes")})
        summaries.append(summarize_point(ds, standing_queue))
        kept.append(_series(ds) if series else None)
    assert frame is not None  # a chunk has a point at least
    return Measured(list(chunk.indices), summaries, kept, frame)


def _on_worker(chunk: Chunk, standing_queue: float, series: bool) -> Measured:
    """`measure` on a dask worker, keeping JAX's compiled programs on disk as the command line
    does (the workers of one machine share them)."""
    compilation_cache.enable()
    return measure(chunk, standing_queue, series)


def _run(compiled: list[Compiled], todo: Iterable[tuple[Chunk, int]],
         progress: Progress | None, standing_queue: float, series: bool, client: Any | None,
         parallel: int = 1) -> Iterator[Measured]:
    """The chunks `todo` (`batch.pending`) measured in this process, one after another or
    `parallel` at once (`_in_threads`), or on `client`'s cluster, each as it finishes;
    `progress(done, total)` counts points."""
    total = len(compiled)
    chunks = list(todo)
    done = total - sum(len(chunk.members) for chunk, _ in chunks)  # in an earlier sweep
    if client is not None:
        tasks = [(chunk, standing_queue, series) for chunk, _ in chunks]
        for measured in run_remote(client, _on_worker, tasks):
            done += len(measured.indices)
            if progress is not None:
                progress(done, total)
            yield measured
    elif parallel > 1 and len(chunks) > 1:
        yield from _in_threads(chunks, done, total, progress, standing_queue, series, parallel)
    else:
        for chunk, before in chunks:
            yield measure(chunk, standing_queue, series, within(chunk, before, total, progress))


class _Stopped(Exception):
    """Raised in a chunk's thread at its next segment once the sweep has stopped."""


def _in_threads(chunks: list[tuple[Chunk, int]], before: int, total: int,
                progress: Progress | None, standing_queue: float, series: bool, parallel: int
                ) -> Iterator[Measured]:
    """The chunks measured `parallel` at once on threads of this process, each as it finishes
    (`before` points of `total` were done in an earlier sweep).

    A compiled step loop holds no Python lock while it runs, so chunks on separate CPUs run
    side by side; each gives the same numbers as alone (its step is its own members'). If the
    sweep stops (an interrupt, an error, its caller gone), the running chunks end at their next
    segment and no other starts."""
    stopping = threading.Event()
    lock = threading.Lock()
    share = [0.0] * len(chunks)  # points of each chunk done so far

    def report(k: int, chunk: Chunk) -> Callable[[int, int], None]:
        def update(records: int, steps: int) -> None:
            if stopping.is_set():
                raise _Stopped
            with lock:
                share[k] = len(chunk.members) * records / steps
                if progress is not None:
                    progress(before + sum(share), total)
        return update

    # xarray imports dask when a Dataset is first written (for its lock) and then asks it of
    # every new Dataset: imported by one thread while another asks, a package can be seen
    # half-initialised ("module 'dask' has no attribute 'utils'"), so import it first
    import dask.base  # noqa: F401
    import distributed  # noqa: F401

    pool = ThreadPoolExecutor(parallel, thread_name_prefix="pathflow-chunk")
    futures = [pool.submit(measure, chunk, standing_queue, series, report(k, chunk))
               for k, (chunk, _) in enumerate(chunks)]
    given: set[Future[Measured]] = set()
    try:
        for future in as_completed(futures):
            given.add(future)
            yield future.result()
    except (Exception, KeyboardInterrupt):  # first give the chunks that finished
        stopping.set()
        pool.shutdown(wait=True, cancel_futures=True)
        for future in futures:
            if future not in given and not future.cancelled() and future.exception() is None:
                yield future.result()
        raise
    finally:
        stopping.set()
        pool.shutdown(wait=True, cancel_futures=True)


def sweep_dimensions(keys: Mapping[str, str | Sequence[Any]], seeds: int | None = None,
                     zipped: bool = False) -> list[Dimension]:
    """The dimensions of `sweep`'s grid beside `flows`, checked (ScenarioError, one line):
    `transport.cc` first, then the other `keys` in their order (one dimension if `zipped`),
    then the hash seeds."""
    axes = [axis(key, values) for key, values in keys.items()]
    controls = [a for a in axes if a.key == "transport.cc"]
    others = [a for a in axes if a.key != "transport.cc"]
    if zipped and len(others) < 2:
        raise ScenarioError("--zip: give at least two --set keys besides transport.cc to pair")
    groups: list[list[Axis]] = [controls, *([others] if zipped else [[a] for a in others])]
    if seeds is not None:
        groups.append([seed_axis(seeds)])
    return dimensions(groups)


def _links(compiled: Sequence[Compiled], dims: Sequence[Dimension]
           ) -> dict[str, tuple[tuple[str, ...], np.ndarray, dict[str, str]]]:
    """The `capacity`, `buffer` and `delay` coordinates of the links at each point of the grid
    beside flows (`compiled`: one point each, in `grid` order): along `link`, and along the
    axes that change them. Every point must have the same links (they
    are one dimension of the Dataset): ScenarioError naming the key that changes them."""
    names = [link.name for link in compiled[0].network.links]
    for place, c in zip(grid(dims), compiled, strict=True):
        if [link.name for link in c.network.links] != names:
            d = next(d for d, i in zip(dims, place, strict=True) if i)
            raise ScenarioError(f"--set {d.axes[0].key}: its values give networks of other "
                                "links, and a sweep's points share one link dimension; sweep "
                                "each network on its own")
    shape = tuple(len(d) for d in dims)
    out = {}
    for name in ("capacity", "buffer", "delay"):
        values = np.array([[getattr(link, name) for link in c.network.links] for c in compiled])
        values = values.reshape(*shape, -1)
        varying = [d.name for k, d in enumerate(dims)
                   if not (values == values.take([0], axis=k)).all()]
        values = values[tuple(slice(None) if d.name in varying else 0 for d in dims)]
        spec = SWEEP.coordinates[name]
        out[name] = ((*varying, "link"), values,
                     {"long_name": spec.long_name, "units": str(spec.units)})
    return out


def with_predictions(result: xr.Dataset, scenario: Scenario) -> xr.Dataset:
    """`result` (a sweep of `scenario`) with the prediction of each of its points
    (`analysis.predict`), and in attrs["prediction_notes"] why a point has none, one line per
    distinct reason."""
    dims = _dimensions_of(result)
    shape = (*(len(d) for d in dims), result.flows.size)
    values = {name: np.full(shape, math.nan) for name in PREDICTIONS}
    notes: dict[str, list[str]] = {}
    for place in grid(dims):
        at = point_scenario(scenario, dims, place)
        for j, n in enumerate(result.flows.values):
            found = predict(at.with_updates({"traffic.flows": int(n)}))
            for name, value in found.values.items():
                values[name][(*place, j)] = value
            if found.reason:
                label = " ".join([*(d.axes[0].labels[i] for d, i in zip(dims, place,
                                                                          strict=True)), str(n)])
                notes.setdefault(found.reason, []).append(label)
    predicted = build_dataset(values, {}, schema=SWEEP, stacked_by=(*(d.name for d in dims),
                                                                     "flows"))
    out = result.assign(predicted.data_vars)
    out.attrs["prediction_notes"] = "\n".join(f"{', '.join(points)}: {reason}"
                                              for reason, points in notes.items())
    return out


def _described(dims: Sequence[Dimension]) -> str:
    """The axes as a result's attrs keep them: "dim=key ..." (zipped axes joined by "+"), with
    each axis' values in the `<name>_label` coordinates."""
    return " ".join(f"{d.name}=" + "+".join(f"{name}:{a.key}"
                                            for a, name in zip(d.axes, d.names, strict=True))
                    for d in dims)


def _dimensions_of(result: xr.Dataset) -> list[Dimension]:
    """The dimensions a sweep's result was run over (from `_described` and its labels)."""
    found = []
    for entry in str(result.attrs.get("sweep_axes", "")).split():
        _, _, zipped = entry.partition("=")
        named = [part.partition(":") for part in zipped.split("+")]
        axes = tuple(written(key, [str(label) for label in result[f"{name}_label"].values])
                     for name, _, key in named)
        found.append(Dimension(axes, tuple(name for name, _, _ in named)))
    return found


_NOT_RESUMABLE = ("--resume: the saved result is a sweep of another scenario, over other keys "
                  "or other points; remove it or run without --resume")


def _resumable(resume: xr.Dataset | None, attrs: Mapping[str, object],
               dims: Sequence[Dimension], counts: list[int]) -> _Finished:
    """The points of `resume` to keep, with their summaries and series; it must be a sweep of
    this scenario over these axes and some of these points."""
    if resume is None:
        return {}
    same = all(resume.attrs.get(key, "") == value for key, value in attrs.items()
               if key != "scenario_name")
    if not same:
        raise ScenarioError(_NOT_RESUMABLE)
    kept: _Finished = {}
    indices = [{label: i for i, label in enumerate(d.axes[0].labels)} for d in dims]
    names = [*(d.name for d in dims), "flows"]
    for at in np.ndindex(*(resume.sizes[name] for name in names)):
        one = resume.isel(dict(zip(names, at, strict=True)))
        if not np.isfinite(float(one.aggregate_throughput)):  # NaN: not run yet
            continue
        place = tuple(index.get(str(one[f"{d.name}_label"].values), -1)
                      for index, d in zip(indices, dims, strict=True))
        n = int(one.flows)
        if -1 in place or n not in counts:
            raise ScenarioError(_NOT_RESUMABLE)
        # a result saved before a summary existed has none: NaN, as for a point that lacks it
        kept[place, n] = ({name: float(one[name]) if name in one else math.nan
                           for name in SUMMARIES}, _series(one) if "queue" in one else None)
    return kept


def _series(ds: xr.Dataset) -> xr.Dataset:
    """The per-link time series a sweep keeps of each point."""
    kept = ds[list(SERIES)]
    return kept.drop_vars([name for name in kept.coords if name not in ("time", "link")])


def _combine(finished: _Finished, dims: Sequence[Dimension], counts: list[int],
             coords: Mapping[str, tuple[Any, Any, dict[str, str]]], frame: xr.Dataset,
             attrs: Mapping[str, object]) -> xr.Dataset:
    """The sweep's Dataset: every point of the grid, NaN where one has not finished; `coords`
    are the axes' (`axes.coordinates`) and the links' (`_links`), `frame` what every point
    shares (`Measured.frame`)."""
    shape = (*(len(d) for d in dims), len(counts))
    column = {n: j for j, n in enumerate(counts)}
    summaries = {name: np.full(shape, math.nan) for name in SUMMARIES}
    kept_series = attrs["kept"] == "summaries and series"
    series = {name: np.full((*shape, frame.time.size, frame.link.size), math.nan)
              for name in (SERIES if kept_series else ())}
    for (place, n), (summary, kept) in finished.items():
        at = (*place, column[n])
        for name in SUMMARIES:
            summaries[name][at] = summary[name]
        for name in series:
            series[name][at] = kept[name].values if kept is not None else math.nan
    names = [d.name for d in dims]
    out = build_dataset({**summaries, **series}, {"flows": counts}, schema=SWEEP,
                        stacked_by=(*names, "flows"))
    out = out.assign_coords({name: (dim, values, own)
                             for name, (dim, values, own) in coords.items()})
    if "cc" in names:  # the declared coordinate's long name
        out.cc.attrs = {"long_name": SWEEP.coordinates["cc"].long_name}
    out = out.assign_coords({name: frame[name].variable for name in ("link", "link_tier",
                                                                      *(["time"] if series
                                                                        else []))})
    out.attrs = dict(frame.attrs)
    out.attrs.update(attrs)
    return out
