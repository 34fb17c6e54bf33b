"""Points run together: scenarios compiled onto one time axis and run in batches, a compiled
program per physics and padded size (DESIGN §4).

Points are grouped into buckets of one physics (model and queue discipline), one network size
and equal padded shape (flow counts rounded up to a power of two), so a sweep compiles one program
per bucket, not one per point, whichever scenario key varies between its points (parameters are
values, not shapes). Each bucket runs in equal chunks sized to keep memory near 1 GB, the points
of a chunk merged into one problem (`solvers.problem.merge_problems`: on a CPU this beats
`jax.vmap`); each chunk's results reach the caller as soon as it ends, so an interrupted or
failing sweep keeps them. Sweeps (`pathflow.sweeps`), hash-seed batches (`pathflow.hotspots`) and
the validation cases run their points through here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, replace

import numpy as np
import xarray as xr

from pathflow.compile import Compiled, compile_scenario
from pathflow.scenario import Scenario, ScenarioError
from pathflow.simulate import labelled_result
from pathflow.solvers.dde import ring_bytes
from pathflow.solvers.problem import Grid, Physics, pad_problem
from pathflow.solvers.run import solve_together
from pathflow.solvers.stepping import Stepping

__all__ = ["CHUNK_BYTES", "Chunk", "Progress", "chunk_results", "chunks", "compile_together",
           "pending", "run_chunk", "run_together", "within"]

Progress = Callable[[float, float], None]
CHUNK_BYTES = 1e9  # a chunk's recorded series and feedback history, at most (bytes)


def _bucket(flows: int) -> int:
    return 1 << max(0, math.ceil(math.log2(flows)))


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


def chunks(compiled: list[Compiled], chunk_bytes: float = CHUNK_BYTES) -> Iterator[Chunk]:
    """How `run_together` runs points: buckets of one physics, network and padded size, each in
    equal chunks whose recorded series and feedback history take about `chunk_bytes` (one
    point at least)."""
    buckets: dict[tuple[Physics, int, int], list[int]] = {}
    for i, c in enumerate(compiled):
        buckets.setdefault((c.physics, c.problem.n_links, _bucket(c.problem.n_subflows)),
                           []).append(i)
    seen: dict[Physics, int] = {}  # physics in the order the points bring them, sizes rising
    for physics, _, _ in buckets:
        seen.setdefault(physics, len(seen))
    for key in sorted(buckets, key=lambda key: (seen[key[0]], key[1], key[2])):
        indices, size = buckets[key], key[2]
        members = [compiled[i] for i in indices]
        first = members[0]
        grid = first.grid  # compile_together gave every point one grid
        shape = (first.problem.n_links,
                 _bucket(max(c.problem.path_hops.shape[0] for c in members)),
                 max(c.problem.path_hops.shape[1] for c in members), size)
        values = grid.records * (shape[0] + size) * 12  # recorded series
        per_point = 8 * values + ring_bytes(grid.history, size)
        most = max(1, int(chunk_bytes // per_point))
        batch = -(-len(members) // -(-len(members) // most))  # equal chunks: least padding
        for i in range(0, len(members), batch):
            yield Chunk(indices[i : i + batch], members[i : i + batch], shape, grid, batch)


def run_chunk(chunk: Chunk, progress: Callable[[int, int], None] | None = None
              ) -> list[tuple[Compiled, xr.Dataset]]:
    """Run one chunk's points as one merged problem; `progress(records, total)` as the solver
    reports it. A pure function of the chunk, so any process may run it (a dask worker)."""
    return list(chunk_results(chunk, progress))


def chunk_results(chunk: Chunk, progress: Callable[[int, int], None] | None = None
                  ) -> Iterator[tuple[Compiled, xr.Dataset]]:
    """`run_chunk`, each point's Dataset made as it is asked for: a caller that keeps only a
    summary of each holds one at a time (a point's Dataset has its flows' series, which the
    merged solve holds per controller: 89 MB for the 2,000 flows of the default sweep's last
    point, from 32 controllers; 1.2 GB for one control's 25 points together)."""
    padded = [pad_problem(c.problem, *chunk.shape) for c in chunk.members]
    padded += padded[-1:] * (chunk.batch - len(padded))
    trajectories = solve_together(chunk.members[0].physics, padded, chunk.grid,
                                  progress=progress, stepping=chunk.members[0].stepping)
    for compiled, trajectory in zip(chunk.members, trajectories, strict=False):
        yield compiled, labelled_result(compiled, trajectory)


def pending(compiled: list[Compiled], skip: Collection[int] = (),
            chunk_bytes: float = CHUNK_BYTES) -> Iterator[tuple[Chunk, int]]:
    """The chunks to run (`chunks`) with the number of points before each, leaving out those
    whose every point has its index in `skip` (a resumed sweep: its points ran in whole chunks,
    and a point's result depends on the chunk it ran in, whose step the finest member sets)."""
    before = 0
    for chunk in chunks(compiled, chunk_bytes):
        if not all(i in skip for i in chunk.indices):
            yield chunk, before
        before += len(chunk.members)


def run_together(compiled: list[Compiled], progress: Progress | None = None,
                 skip: Collection[int] = ()
                 ) -> Iterator[list[tuple[Compiled, xr.Dataset]]]:
    """Run points from `compile_together` together: points of one physics and size bucket
    share a compiled program and run in chunks of about 1 GB, merged into one problem; each
    chunk's results are yielded as soon as it ends. `progress(done, total)` counts points.
    Chunks whose every point has its index in `skip` are not run (`pending`)."""
    for chunk, before in pending(compiled, skip):
        yield run_chunk(chunk, within(chunk, before, len(compiled), progress))


def within(chunk: Chunk, before: int, total: int, progress: Progress | None
           ) -> Callable[[int, int], None]:
    """The solver's progress through `chunk` as points of the whole batch: `progress(done,
    total)`, `before` points done before the chunk began."""

    def report(records: int, steps: int) -> None:
        if progress is not None:
            progress(before + len(chunk.members) * records / steps, total)

    return report
