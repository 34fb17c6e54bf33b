"""Sweeps: one scenario, many flow counts, run together; or several scenarios side by side.

Points are grouped into buckets of one physics (model and queue discipline) and equal padded
shape (flow counts rounded up to a power of two), so a sweep compiles one program per bucket,
not one per point (DESIGN §4). Each bucket runs in
equal chunks sized to keep memory near 1 GB, the points of a chunk merged into one problem
(`solvers.problem.merge_problems`: on a CPU this beats `jax.vmap`); after every chunk the caller
gets the points finished so far, so an interrupted or failing sweep keeps them.

The result has a `flows` dimension: per-point summaries (throughput, fairness, queue statistics and
queueing latency of the bottleneck, convergence time, seed 001's standing-queue criterion; for
barrier-synchronised incast rounds, `[traffic] rounds`, the goodput over the completed rounds and
their count, NaN for a scenario without rounds) and the queue and utilization time series of
every link. In the incast pattern the flows are spread round-robin over the senders, so a point's
flow count is its number of servers (the classic incast experiment's N) up to the scenario's
senders, and beyond them several flows share a server. Scenarios swept side by side (congestion
controls compared on one network, `Scenario.with_cc`) add a dimension in front, `cc` by default.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, replace

import numpy as np
import tomli_w
import xarray as xr

from pathflow.analysis.predict import PREDICTIONS, predict
from pathflow.compile import Compiled, compile_scenario
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
from pathflow.simulate import labelled_result
from pathflow.solvers.dde import ring_bytes
from pathflow.solvers.problem import Grid, Physics, pad_problem
from pathflow.solvers.run import solve_together
from pathflow.solvers.stepping import Stepping
from pathflow.verdict import bottleneck, verdict

__all__ = ["compile_together", "parse_flow_range", "run_together", "summarize_point",
           "sweep_flows", "with_predictions"]

Progress = Callable[[float, float], None]
_CHUNK_BYTES = 1e9
SUMMARIES = tuple(name for name, spec in SWEEP.variables.items()
                  if not spec.dims and name not in PREDICTIONS)
STANDING_QUEUE = 200e3  # bytes: seed 001's criterion, a queue that stays above it has not converged


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


def _bucket(flows: int) -> int:
    return 1 << max(0, math.ceil(math.log2(flows)))


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


def compile_together(scenarios: list[Scenario]) -> list[Compiled]:
    """Scenarios of one duration compiled onto one time axis, to be run together
    (`run_together`): the finest step of any and the coarsest record interval (which bounds the
    memory), the step free to follow the dynamics where every scenario leaves it free."""
    if len({s.si.run.duration for s in scenarios}) > 1:
        raise ScenarioError("run.duration: scenarios run together must have one duration")
    compiled = [compile_scenario(s) for s in scenarios]
    dt, sample = min(c.dt for c in compiled), max(c.sample_interval for c in compiled)
    per_record = max(1, math.ceil(sample / dt - 1e-9))
    dt = sample / per_record
    records = math.ceil(scenarios[0].si.run.duration / sample - 1e-9)
    history = max(math.ceil(c.grid.history * c.dt / dt) for c in compiled)
    grid = Grid(per_record, records, history)
    adaptive = all(c.stepping is not None for c in compiled)
    longest = min(c.stepping.longest for c in compiled) if adaptive else math.inf
    stepping = Stepping(sample, per_record, longest) if adaptive and per_record > 1 else None
    return [replace(c, grid=grid, problem=c.problem._replace(dt=np.asarray(dt, c.problem.dt.dtype)),
                    stepping=stepping) for c in compiled]


@dataclass(frozen=True)
class Chunk:
    """Points run together: every chunk of a bucket has one physics, the same padded shapes,
    time grid and batch size (the last one is filled up with copies), so a bucket compiles once.
    `indices` are the members' places in the list given to `chunks`."""

    indices: list[int]
    members: list[Compiled]
    shape: tuple[int, int, int, int]  # links, paths, hops, controllers
    grid: Grid
    batch: int


def chunks(compiled: list[Compiled]) -> Iterator[Chunk]:
    """How `run_together` runs points: buckets of one physics and size, each in equal chunks of
    about 1 GB."""
    buckets: dict[tuple[Physics, int], list[int]] = {}
    for i, c in enumerate(compiled):
        buckets.setdefault((c.physics, _bucket(c.problem.n_subflows)), []).append(i)
    seen: dict[Physics, int] = {}  # physics in the order the points bring them, sizes rising
    for physics, _ in buckets:
        seen.setdefault(physics, len(seen))
    for physics, size in sorted(buckets, key=lambda key: (seen[key[0]], key[1])):
        indices = buckets[physics, size]
        members = [compiled[i] for i in indices]
        first = members[0]
        grid = first.grid  # compile_together gave every point one grid
        shape = (first.problem.n_links,
                 _bucket(max(c.problem.path_hops.shape[0] for c in members)),
                 max(c.problem.path_hops.shape[1] for c in members), size)
        values = grid.records * (shape[0] + size) * 12  # recorded series
        per_point = 8 * values + ring_bytes(grid.history, size)
        most = max(1, int(_CHUNK_BYTES // per_point))
        batch = -(-len(members) // -(-len(members) // most))  # equal chunks: least padding
        for i in range(0, len(members), batch):
            yield Chunk(indices[i : i + batch], members[i : i + batch], shape, grid, batch)


def run_together(compiled: list[Compiled], progress: Progress | None = None,
                 skip: Collection[int] = ()
                 ) -> Iterator[list[tuple[Compiled, xr.Dataset]]]:
    """Run points from `compile_together` together: points of one physics and size bucket
    share a compiled program and run in chunks of about 1 GB, merged into one problem; each
    chunk's results are yielded as soon as it ends. `progress(done, total)` counts points.
    Chunks whose every point has its index in `skip` are not run (a resumed sweep: its points
    ran in whole chunks, and a point's result depends on the chunk it ran in, whose step the
    finest member sets)."""
    done = 0.0
    for chunk in chunks(compiled):
        n = len(chunk.members)
        if all(i in skip for i in chunk.indices):
            done += n
            continue

        def report(records: int, total: int, base: float = done, n: int = n) -> None:
            if progress is not None:
                progress(base + n * records / total, len(compiled))

        padded = [pad_problem(c.problem, *chunk.shape) for c in chunk.members]
        padded += padded[-1:] * (chunk.batch - len(padded))
        trajectories = solve_together(chunk.members[0].physics, padded, chunk.grid,
                                      progress=report, stepping=chunk.members[0].stepping)
        yield [(c, labelled_result(c, t))
               for c, t in zip(chunk.members, trajectories, strict=False)]
        done += n


Point = tuple[str, int]  # (cc label, flows); the label is "" in a sweep of one scenario
_Finished = dict[Point, tuple[dict[str, float], xr.Dataset]]  # summaries and series


def sweep_flows(scenario: Scenario | Mapping[str, Scenario], counts: list[int],
                progress: Progress | None = None,
                on_chunk: Callable[[xr.Dataset], None] | None = None,
                before_run: Callable[[list[Compiled]], None] | None = None,
                resume: xr.Dataset | None = None,
                standing_queue: float = STANDING_QUEUE) -> xr.Dataset:
    """Run `scenario` for every flow count; `on_chunk` receives the partial result after each
    chunk (to save it), `progress(done, total)` counts points (fractions within a chunk).
    `before_run` sees the compiled points before any runs (to state the cost, or refuse by
    raising). `resume` is a partial result of the same sweep (as `on_chunk` saw it): its chunks
    are not run again, and the result is the one an uninterrupted sweep gives.

    Several scenarios by label (`{"dcqcn": a, "dcqcn+": a.with_cc("dcqcn+")}`) run side by
    side on one time axis: the result has a `cc` dimension of the labels before `flows`, and a
    partial result holds NaN where a point has not run yet. `standing_queue` (bytes) is the
    threshold of `summarize_point`'s seed 001 criterion. `with_predictions` adds each point's
    prediction from the model alone (`pathflow sweep --analyze`)."""
    variants = dict(scenario) if isinstance(scenario, Mapping) else {"": scenario}
    points = [(label, n) for label in variants for n in counts]
    compiled = compile_together([variants[label].with_updates({"traffic.flows": n})
                                 for label, n in points])
    attrs = {"scenario": _provenance(variants), "scenario_name": _names(variants),
             "standing_queue": standing_queue}
    finished = _resumable(resume, attrs, points)
    skip = {i for i, point in enumerate(points) if point in finished}
    todo = [c for i, c in enumerate(compiled) if i not in skip]
    if before_run is not None and todo:
        before_run(todo)
    place = {id(c): point for c, point in zip(compiled, points, strict=True)}
    first: xr.Dataset | None = None
    for chunk in run_together(compiled, progress, skip=skip):
        for c, ds in chunk:
            finished[place[id(c)]] = (summarize_point(ds, standing_queue), _series(ds))
            first = ds if first is None else first
        if on_chunk is not None:
            on_chunk(_combine(finished, list(variants), first, attrs))
    if first is None:  # every point was in `resume`
        assert resume is not None
        return resume
    return _combine(finished, list(variants), first, attrs)


def with_predictions(result: xr.Dataset, variants: Mapping[str, Scenario]) -> xr.Dataset:
    """`result` with the prediction of each of its points (`analysis.predict`), and in
    attrs["prediction_notes"] why a point has none, one line per distinct reason."""
    labels = [str(label) for label in result.cc.values] if "cc" in result.dims else [""]
    shape = (len(labels), result.flows.size)
    values = {name: np.full(shape, math.nan) for name in PREDICTIONS}
    notes: dict[str, list[str]] = {}
    for i, label in enumerate(labels):
        for j, n in enumerate(result.flows.values):
            found = predict(variants[label].with_updates({"traffic.flows": int(n)}))
            for name, value in found.values.items():
                values[name][i, j] = value
            if found.reason:
                notes.setdefault(found.reason, []).append(f"{label} {n}".strip())
    dims = ("cc", "flows") if "cc" in result.dims else ("flows",)
    out = result.copy()
    for name, array in values.items():
        spec = SWEEP.variables[name]
        out[name] = (dims, array if "cc" in result.dims else array[0],
                     {"units": spec.units, "long_name": spec.long_name})
    out.attrs["prediction_notes"] = "\n".join(f"{', '.join(points)}: {reason}"
                                              for reason, points in notes.items())
    return out


def _provenance(variants: Mapping[str, Scenario]) -> str:
    """The scenario TOML a sweep keeps: the scenario's own, or one table per label."""
    if list(variants) == [""]:
        return variants[""].to_toml()
    return tomli_w.dumps({label: s.spec.model_dump(exclude_none=True)
                          for label, s in variants.items()})


def _names(variants: Mapping[str, Scenario]) -> str:
    return " / ".join(dict.fromkeys(s.name for s in variants.values()))


def _resumable(resume: xr.Dataset | None, attrs: Mapping[str, object], points: list[Point]
               ) -> _Finished:
    """The points of `resume` to keep, with their summaries and series; it must be a sweep of
    these scenarios over some of these points."""
    if resume is None:
        return {}
    labels = [str(label) for label in resume.cc.values] if "cc" in resume.dims else [""]
    kept: _Finished = {}
    for label in labels:
        one = resume.sel(cc=label) if label else resume
        for n in one.flows.values:
            point = one.sel(flows=n)
            if np.isfinite(float(point.aggregate_throughput)):  # NaN: not run yet
                # a result saved before a summary existed has none: NaN, as for a point
                # that lacks the quantity
                kept[label, int(n)] = ({name: float(point[name]) if name in point else math.nan
                                        for name in SUMMARIES},
                                       _series(point))
    same = all(resume.attrs.get(key) == value for key, value in attrs.items()
               if key != "scenario_name")
    if not same or not set(kept) <= set(points):
        raise ScenarioError("--resume: the saved result is a sweep of another scenario or other "
                            "flow counts; remove it or run without --resume")
    return kept


def _series(ds: xr.Dataset) -> xr.Dataset:
    """The per-link time series a sweep keeps of each point."""
    kept = ds[["queue", "utilization"]]
    return kept.drop_vars([name for name in kept.coords if name not in ("time", "link")])


def _combine(finished: _Finished, labels: list[str], first: xr.Dataset,
             attrs: Mapping[str, object]) -> xr.Dataset:
    """The sweep's Dataset of the finished points."""

    def one(label: str) -> xr.Dataset:
        counts = sorted(n for own, n in finished if own == label)
        summaries = [finished[label, n][0] for n in counts]
        data = {key: np.array([summary[key] for summary in summaries]) for key in SUMMARIES}
        series = xr.concat([finished[label, n][1] for n in counts], dim="flows", join="override")
        out = build_dataset(data, {"flows": counts}, schema=SWEEP, stacked_by="flows")
        return out.merge(series.assign_coords(flows=counts))

    present = [label for label in labels if any(own == label for own, _ in finished)]
    if present == [""]:
        out = one("")
    else:
        out = xr.concat([one(label) for label in present], dim="cc", join="outer",
                        combine_attrs="override")
        out = out.assign_coords(cc=("cc", present,
                                    {"long_name": SWEEP.coordinates["cc"].long_name}))
    out = out.assign_coords({name: first[name] for name in ("capacity", "buffer", "link_tier")})
    out.attrs = {key: first.attrs[key] for key in ("engine", "pathflow_version", "dt",
                                                   "sample_interval", "packet_bytes")}
    out.attrs.update(attrs)
    return out
