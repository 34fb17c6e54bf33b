"""Sweeps: one scenario, many flow counts, run together.

Points are grouped into buckets of equal padded shape (flow counts rounded up to a power of two),
so a sweep compiles one program per bucket, not one per point (DESIGN §4). Each bucket runs in
equal chunks sized to keep memory near 1 GB, the points of a chunk merged into one problem
(`solvers.problem.merge_problems`: on a CPU this beats `jax.vmap`); after every chunk the caller
gets the points finished so far, so an interrupted or failing sweep keeps them.

The result has a `flows` dimension: per-point summaries (throughput, fairness, queue statistics of
the bottleneck, convergence time) and the queue and utilization time series of every link.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace

import numpy as np
import xarray as xr

from pathflow.compile import Compiled, compile_scenario
from pathflow.metrics import (
    convergence_time,
    default_warmup,
    jain_index,
    queue_stats,
    throughput,
)
from pathflow.scenario import Scenario, ScenarioError
from pathflow.schema import SWEEP, build_dataset
from pathflow.simulate import labelled_result
from pathflow.solvers.dde import ring_bytes
from pathflow.solvers.problem import Grid, pad_problem
from pathflow.solvers.run import solve_together
from pathflow.solvers.stepping import Stepping

__all__ = ["compile_together", "parse_flow_range", "run_together", "summarize_point",
           "sweep_flows"]

Progress = Callable[[float, float], None]
_CHUNK_BYTES = 1e9


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


def summarize_point(ds: xr.Dataset) -> dict[str, float]:
    """Scalar summaries of one run: the numbers a sweep plots against flow count."""
    rates = throughput(ds)
    stats = queue_stats(ds)
    steady = ds.time > default_warmup(ds)
    utilization = ds.utilization.sel(time=steady).mean("time")
    link = int(np.argmax(utilization.values))
    convergence = convergence_time(ds)
    return {
        "aggregate_throughput": float(rates.sum()),
        "jain": jain_index(rates.values),
        "bottleneck_utilization": float(utilization[link]),
        "queue_mean": float(stats["mean"][link]),
        "queue_p99": float(stats["p99"][link]),
        "queue_max": float(stats["max"][link]),
        "convergence_time": convergence.time,
        "settled": math.nan if convergence.reason else float(convergence.settled),
        "drops": float(ds.drops.isel(link=link).mean()),
        "window_mean": float(ds.cwnd.sel(time=steady).mean()),
        "paused": float(ds.pause.sel(time=steady).mean("time").max()) if "pause" in ds else 0.0,
    }


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
    """Points run together: every chunk of a bucket has the same padded shapes, time grid and
    batch size (the last one is filled up with copies), so a bucket compiles once."""

    members: list[Compiled]
    shape: tuple[int, int, int, int]  # links, paths, hops, controllers
    grid: Grid
    batch: int


def chunks(compiled: list[Compiled]) -> Iterator[Chunk]:
    """How `run_together` runs points: size buckets, each in equal chunks of about 1 GB."""
    buckets: dict[int, list[Compiled]] = {}
    for c in compiled:
        buckets.setdefault(_bucket(c.problem.n_subflows), []).append(c)
    for size, members in sorted(buckets.items()):
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
            yield Chunk(members[i : i + batch], shape, grid, batch)


def run_together(compiled: list[Compiled], progress: Progress | None = None,
                 skip: AbstractSet[int] = frozenset()
                 ) -> Iterator[list[tuple[Compiled, xr.Dataset]]]:
    """Run points from `compile_together` together: points of one size bucket share a compiled
    program and run in chunks of about 1 GB, merged into one problem; each chunk's results are
    yielded as soon as it ends. `progress(done, total)` counts points. Chunks whose every point
    has a flow count in `skip` are not run (a resumed sweep: its points ran in whole chunks,
    and a point's result depends on the chunk it ran in, whose step the finest member sets)."""
    done = 0.0
    for chunk in chunks(compiled):
        n = len(chunk.members)
        if all(len(c.routes.flows) in skip for c in chunk.members):
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


def sweep_flows(scenario: Scenario, counts: list[int], progress: Progress | None = None,
                on_chunk: Callable[[xr.Dataset], None] | None = None,
                before_run: Callable[[list[Compiled]], None] | None = None,
                resume: xr.Dataset | None = None) -> xr.Dataset:
    """Run `scenario` for every flow count; `on_chunk` receives the partial result after each
    chunk (to save it), `progress(done, total)` counts points (fractions within a chunk).
    `before_run` sees the compiled points before any runs (to state the cost, or refuse by
    raising). `resume` is a partial result of the same sweep (as `on_chunk` saw it): its chunks
    are not run again, and the result is the one an uninterrupted sweep gives."""
    compiled = compile_together([scenario.with_updates({"traffic.flows": n}) for n in counts])
    kept = _resumable(resume, scenario, counts)
    todo = [c for c in compiled if len(c.routes.flows) not in kept]
    if before_run is not None and todo:
        before_run(todo)
    finished: list[tuple[int, dict[str, float], xr.Dataset]] = []
    first: xr.Dataset | None = None
    for chunk in run_together(compiled, progress, skip=kept):
        for c, ds in chunk:
            finished.append((len(c.routes.flows), summarize_point(ds), _series(ds)))
            first = ds if first is None else first
        if on_chunk is not None:
            on_chunk(_combine(finished, scenario, first, resume))
    return _combine(finished, scenario, first, resume)


def _resumable(resume: xr.Dataset | None, scenario: Scenario, counts: list[int]) -> set[int]:
    """The flow counts of `resume` to keep; it must be a sweep of this scenario over some of
    these counts."""
    if resume is None:
        return set()
    kept = {int(n) for n in resume.flows.values} if "flows" in resume.dims else set()
    if resume.attrs.get("scenario") != scenario.to_toml() or not kept <= set(counts):
        raise ScenarioError("--resume: the saved result is a sweep of another scenario or other "
                            "flow counts; remove it or run without --resume")
    return kept


def _series(ds: xr.Dataset) -> xr.Dataset:
    """The per-link time series a sweep keeps of each point."""
    kept = ds[["queue", "utilization"]]
    return kept.drop_vars([name for name in kept.coords if name not in ("time", "link")])


def _combine(finished: list[tuple[int, dict[str, float], xr.Dataset]], scenario: Scenario,
             first: xr.Dataset | None, resume: xr.Dataset | None = None) -> xr.Dataset:
    """The sweep's Dataset of the points run now and those of a resumed result."""
    if resume is not None and resume.sizes.get("flows", 0):
        if first is None:
            return resume
        ran = _combine(finished, scenario, first)
        fresh = ran.drop_sel(flows=[n for n in ran.flows.values if n in resume.flows.values])
        return xr.concat([resume, fresh], "flows", join="override",
                         combine_attrs="override").sortby("flows")
    finished = sorted(finished, key=lambda item: item[0])
    counts = [n for n, _, _ in finished]
    data = {key: np.array([summary[key] for _, summary, _ in finished]) for key in finished[0][1]}
    stacked = xr.concat([series for _, _, series in finished], dim="flows", join="override")
    out = build_dataset(data, {"flows": counts}, schema=SWEEP, stacked_by="flows")
    out = out.merge(stacked.assign_coords(flows=counts))
    out = out.assign_coords({name: first[name] for name in ("capacity", "buffer", "link_tier")})
    out.attrs = {key: first.attrs[key] for key in ("engine", "pathflow_version", "dt",
                                                   "sample_interval", "packet_bytes")}
    out.attrs["scenario"] = scenario.to_toml()
    out.attrs["scenario_name"] = scenario.name
    return out
