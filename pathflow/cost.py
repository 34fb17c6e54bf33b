"""The cost of a fluid run or a sweep, estimated before it runs: steps, memory and wall time.

A compiled run (`pathflow.compile.Compiled`) fixes everything its cost depends on: the number of
steps and records of its time grid, the length of its feedback history, and the sizes of its
arrays (links L, controllers F, path-hop entries P x H). `estimate` turns these into a `Cost`;
`estimate_sweep` does the same for the points of a sweep; `check_memory` refuses what cannot fit;
`describe` is the one line the command prints before it starts.

Memory (bytes, at the peak of the run, itemsize 8 in float64 and 4 in float32):

- recorded values: records x ((L + 1) x 7 + F x (7 + S)) x itemsize, with S the model's state
  variables (six for the window models): seven series per link (queue, its max and min,
  arrivals, departures, drops, marks), seven per controller (delivered and sending rate, RTT,
  bytes delivered, and the retransmission timer, timeouts and bytes resent) and the state. The
  solver keeps them three times at its peak: the segments as computed, their concatenation and
  the trimmed copy; the labelled Dataset then shares them.
- the feedback ring buffer: history x F x 4 float32 (`solvers.dde.ring_bytes`), updated in place
  (the carry is donated). Where the step follows the dynamics, each change of step re-files the
  signals in flight through the host (`solvers.stepping.refiled`): about 80 bytes per signal,
  at most one signal per 16-byte slot, counted as one ring more (measured on the default
  sweep's DCQCN batch: a million signals, 74 MB, beside its 92 MB ring).
- the labelled Dataset, where it has more subflows than the solver has controllers (classes of
  exchangeable flows, `[run] representatives`): each subflow's series of its own, records x
  (subflows - F) x (7 + S) x 8 bytes (89 MB for the default sweep's 2,000 flows from 32
  controllers). A sweep makes one point's Dataset at a time.
- the problem's arrays, and per-step temporaries of XLA of about 32 arrays the size of the path
  hops, links and controllers (gathers, cumulative products, segment sums).
- 250 MB for compiling and running the XLA program; a sweep running batches side by side holds a
  program per batch.
- `--check-dt` also runs at dt / 2: the first result is kept while the second (twice the history,
  twice the steps) runs.

Measured (float64, a 2-core machine, 2026-11-29, each run in a fresh process,
`benchmarks/bench_memory.py`): the figures there, growth of the process against the estimate.
Before that (2026-11, smaller programs: without timeouts and rate-based senders) a 2-flow 2 ms
run grew the process by 138 MB, 1,000 flows with 2,667 records by 899 MB, 4,000 flows with a
458 MB ring buffer by 768 MB.

Wall time: the steps times the cost of one step, plus a fixed cost of compiling the program.
Where the step follows the dynamics (`solvers.stepping`) the number of steps is only known as
the run goes: the estimate then counts the finest step throughout, an upper bound, and says so.
One step gathers over path hops, sums over links and updates every controller, so

    seconds per step = a + b x (path-hop entries) + c x (links + 1) + d x controllers

fitted (non-negative least squares on relative error) to nine runs of the solver on one CPU,
timed after the first segment (which holds the compilation): N:1 DCTCP stars at 10 Gb/s with
2, 80, 1,000 and 4,000 flows, and k = 4, 8 and 12 fat-tree permutations under ECMP and spraying
(4 to 11,532 path-hop entries, 6 to 2,592 links). Fitted: a = 5.2 us, b = 0.019 us per path-hop
entry, c = 0 (links cost nothing measurable beyond the path hops that cross them), d = 0.081 us
per controller; the runs were 0.64 to 1.33 times the fit. Compiling costs about 2 s for a run.
A sweep runs chunks of points padded to a power of two of subflows and merged into one problem
(see `pathflow.batch`): each chunk costs one run of the merged size. The estimate is good to a
factor of about 2 to 3 on this machine; a faster or busier CPU shifts it, and the progress lines
(which time the real run) correct it as the run goes.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import jax
import numpy as np

from pathflow.scenario import ScenarioError
from pathflow.solvers.dde import ring_bytes
from pathflow.units import format_bytes, format_time

if TYPE_CHECKING:
    from pathflow.compile import Compiled

__all__ = [
    "CONFIRM_SECONDS",
    "Cost",
    "available_memory",
    "check_memory",
    "describe",
    "duration",
    "estimate",
    "estimate_sweep",
    "step_seconds",
    "usable_cpus",
]

CONFIRM_SECONDS = 3600.0  # above this, the command line asks before it starts

# seconds per step = a + b * path-hop entries + c * (links + 1) + d * controllers (see above)
STEP_BASE = 5.2e-6
STEP_PER_HOP = 1.9e-8
STEP_PER_LINK = 0.0
STEP_PER_CONTROLLER = 8.1e-8
COMPILE_SECONDS = 1.0  # compiling one run's program (2 s cold, 0.3 s from the persistent cache)

_LINK_SERIES = 7  # recorded per link: queue, queue max, queue min, arrival, departure, drop, mark
# recorded per controller: delivered rate, sending rate, RTT, delivered, timer, timeouts, resent
_CONTROLLER_SERIES = 7
_RECORD_COPIES = 3  # the solver's segments, their concatenation and the trimmed copy
_SCRATCH_ARRAYS = 32  # XLA's per-step temporaries, in arrays of the problem's sizes
_RUNTIME_BYTES = 250e6  # compiling and running one XLA program (`benchmarks/bench_memory.py`)
# state variables of the window models (cwnd, slow start, cwr, credit, ssthresh, alpha)
_DEFAULT_STATE = 6
_MIN_RECORDS = 500  # fewer records than this say little; below it, the network is too large


@dataclass(frozen=True)
class Cost:
    """What a run (or a sweep) will take. Bytes are at the peak; `seconds` is an estimate good to
    a factor of 2 to 3. For a sweep, `steps` and `records` are per point."""

    steps: int
    records: int
    dt: float  # s
    sample_interval: float  # s
    history: int  # steps of the feedback ring buffer
    record_bytes: float  # recorded values, with the solver's copies
    history_bytes: float  # the feedback ring buffer (twice, where the step follows the dynamics)
    other_bytes: float  # problem arrays, XLA temporaries, the runtime, kept results
    seconds: float
    points: int = 1  # runs in a sweep
    links: int = 0
    controllers: int = 0
    adaptive: bool = False  # the step follows the dynamics: steps and seconds are upper bounds
    programs: int = 1  # programs to compile (a sweep: one per physics, network and batch shape)

    @property
    def memory(self) -> float:
        return self.record_bytes + self.history_bytes + self.other_bytes


def step_seconds(path_hops: int, links: int, controllers: int) -> float:
    """Wall time of one solver step on one CPU (the fit in the module docstring)."""
    return (STEP_BASE + STEP_PER_HOP * path_hops + STEP_PER_LINK * links
            + STEP_PER_CONTROLLER * controllers)


def _itemsize(compiled: Compiled) -> int:
    return int(np.dtype(getattr(compiled.problem.dt, "dtype", np.float64)).itemsize)


def _state_variables(compiled: Compiled) -> int:
    """The model's state variables per controller (shapes only, nothing is computed)."""
    try:
        shapes = jax.eval_shape(compiled.model.initial_state, compiled.problem.params)
        return max(1, len(jax.tree.leaves(shapes)))
    except Exception:  # a model whose initial state needs more than its parameters
        return _DEFAULT_STATE


def _sizes(compiled: Compiled) -> tuple[int, int, int, int]:
    """Path-hop entries, links (with the padding link), paths, controllers."""
    problem = compiled.problem
    hops = np.shape(problem.path_hops)
    return int(np.prod(hops)), int(problem.n_links) + 1, int(hops[0]), int(problem.n_subflows)


def _problem_bytes(compiled: Compiled) -> float:
    return float(sum(getattr(leaf, "nbytes", 0) for leaf in jax.tree.leaves(compiled.problem)))


def _per_record(links: int, controllers: int, state: int, itemsize: int) -> float:
    return (links * _LINK_SERIES + controllers * (_CONTROLLER_SERIES + state)) * itemsize


def _expanded_bytes(compiled: Compiled, state: int) -> float:
    """The labelled Dataset's series beyond the solver's: those of the subflows that the solver
    ran as one controller (float64)."""
    extra = len(compiled.controller_of) - _sizes(compiled)[3]
    return compiled.grid.records * max(0, extra) * (_CONTROLLER_SERIES + state) * 8.0


def _ring_peak(compiled: Compiled, controllers: int) -> float:
    """The feedback ring, and where the step follows the dynamics as much again for the
    signals in flight re-filed through the host at a change of step (module docstring)."""
    ring = ring_bytes(compiled.grid.history, controllers)
    return 2 * ring if compiled.stepping is not None else ring


def estimate(compiled: Compiled, check_dt: bool = False) -> Cost:
    """The cost of running one compiled scenario (with `check_dt`, also at dt / 2)."""
    grid, itemsize = compiled.grid, _itemsize(compiled)
    path_hops, links, _, controllers = _sizes(compiled)
    state = _state_variables(compiled)
    recorded = grid.records * _per_record(links, controllers, state, itemsize)
    ring = _ring_peak(compiled, controllers)
    scratch = _SCRATCH_ARRAYS * (path_hops + links + controllers) * itemsize
    other = (_problem_bytes(compiled) + scratch + _RUNTIME_BYTES
             + _expanded_bytes(compiled, state))
    seconds = COMPILE_SECONDS + grid.steps * step_seconds(path_hops, links, controllers)
    record_bytes = _RECORD_COPIES * recorded
    if check_dt:  # the finer run: same records, twice the history and the steps
        ring *= 2
        other += recorded  # the first result, kept while the finer one runs
        seconds += COMPILE_SECONDS + 2 * grid.steps * step_seconds(path_hops, links, controllers)
    return Cost(steps=grid.steps * (3 if check_dt else 1), records=grid.records,
                dt=compiled.dt, sample_interval=compiled.sample_interval, history=grid.history,
                record_bytes=record_bytes, history_bytes=ring, other_bytes=other,
                seconds=seconds, links=links - 1, controllers=controllers,
                adaptive=compiled.stepping is not None)


def estimate_sweep(points: Sequence[Compiled], series: bool = True,
                   chunk_bytes: float | None = None, parallel: int = 1) -> Cost:
    """The cost of a sweep over points from `pathflow.batch.compile_together`, run as
    `pathflow.batch.run_together` plans it: buckets of one padded size, in equal chunks (of
    `chunk_bytes`, `batch.CHUNK_BYTES` by default) whose points are merged into one problem
    (each chunk costs one run of the merged size), `parallel` chunks at once (the wall time is
    that of the busiest CPU, each taking the next chunk as it is free; the memory that of the
    largest chunks together, each with its program, its re-filing and one point's Dataset).
    `series`: each point's per-link queue and utilization are kept (the sweep's `--keep
    series`; a run of hash seeds keeps them)."""
    from pathflow.batch import CHUNK_BYTES, chunks

    if not points:
        raise ValueError("a sweep needs at least one point")
    first = points[0]
    grid, itemsize = first.grid, _itemsize(first)
    state = _state_variables(first)
    busy, peaks, shapes = [0.0] * max(1, parallel), [], set()
    for chunk in chunks(list(points), CHUNK_BYTES if chunk_bytes is None else chunk_bytes):
        links, paths, hops, size = chunk.shape
        merged = (chunk.batch * links + 1, chunk.batch * paths * hops, chunk.batch * size)
        program = (chunk.members[0].physics, *chunk.shape, chunk.batch)
        seconds = grid.steps * step_seconds(merged[1], merged[0], merged[2])
        if program not in shapes:  # a new program to compile
            shapes.add(program)
            seconds += COMPILE_SECONDS
        busy[busy.index(min(busy))] += seconds
        recorded = grid.records * _per_record(merged[0], merged[2], state, itemsize)
        beside = _RUNTIME_BYTES + max(_expanded_bytes(c, state) for c in chunk.members)
        peaks.append((_RECORD_COPIES * recorded, _ring_peak(chunk.members[0], merged[2]),
                      beside))
    together = sorted(peaks, key=sum, reverse=True)[: len(busy)]
    kept = sum(2 * grid.records * _sizes(c)[1] * 2 * 8 for c in points) if series else 0
    other = (max(_problem_bytes(c) for c in points) * len(points) + kept
             + sum(p[2] for p in together))
    return Cost(steps=grid.steps, records=grid.records, dt=first.dt,
                sample_interval=first.sample_interval, history=first.grid.history,
                record_bytes=sum(p[0] for p in together),
                history_bytes=sum(p[1] for p in together), other_bytes=other,
                seconds=max(busy), points=len(points), links=int(first.problem.n_links),
                controllers=max(_sizes(c)[3] for c in points),
                adaptive=first.stepping is not None, programs=len(shapes))


def duration(seconds: float) -> str:
    """A wall time for people: '32 s', '14 min', '3.2 h', '58 days'."""
    if not math.isfinite(seconds):
        return "forever"
    if seconds < 100:
        return format_time(seconds)
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:,.0f} days"


def describe(cost: Cost) -> str:
    """One line: '1,081,082 steps of 925 ns, 2,000 records, ~310 MB, ~32 s estimated', or with
    a step that follows the dynamics 'at most 1,081,082 steps of 925 ns or more, ...'."""
    steps = f"{cost.steps:,} steps of {format_time(cost.dt)}"
    if cost.adaptive:
        steps = f"at most {steps} or more"
    records = f"{cost.records:,} records"
    if cost.points > 1:
        steps = f"{cost.points} points x {steps}"
        records += f" each, {cost.programs} program{'s' * (cost.programs > 1)} to compile"
    time = f"at most ~{duration(cost.seconds)}" if cost.adaptive else f"~{duration(cost.seconds)}"
    return f"{steps}, {records}, ~{format_bytes(cost.memory)}, {time} estimated"


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity, where the system has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def available_memory() -> float:
    """Memory this process may still take (bytes): MemAvailable, and the cgroup's limit less its
    usage where a container sets one."""
    available = math.inf
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                available = float(line.split()[1]) * 1024
                break
    if not math.isfinite(available):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            available = float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES"))
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        used = Path("/sys/fs/cgroup/memory.current").read_text().strip()
        if limit != "max":
            available = min(available, float(limit) - float(used))
    except (OSError, ValueError):
        pass
    return available


def check_memory(cost: Cost, limit: float, what: str = "the run", limit_name: str = "available"
                 ) -> None:
    """Raise `ScenarioError` (one line: what to change and what would fit) when `cost` needs more
    than `limit` bytes."""
    if cost.memory <= limit:
        return
    need, have = format_bytes(cost.memory), format_bytes(max(limit, 0.0))
    head = f"{what} needs ~{need} of memory but {have} is {limit_name}"
    room = limit - cost.other_bytes
    if room <= 0:
        raise ScenarioError(f"{head}: the program, its runtime and the network's arrays alone "
                            f"take ~{format_bytes(cost.other_bytes)}")
    if cost.history_bytes >= cost.record_bytes and cost.history_bytes > 0:
        part = (f"the feedback history ({cost.history:,} steps, the longest round trip at "
                f"run.dt = {format_time(cost.dt)}) takes ~{format_bytes(cost.history_bytes)}")
        if room > cost.record_bytes:
            fits = cost.dt * cost.history_bytes / (room - cost.record_bytes)
            advice = f"a run.dt of at least {format_time(fits)} would fit"
        else:
            advice = "make run.dt larger or the switch buffers smaller"
        raise ScenarioError(f"{head}: {part}; {advice}")
    part = (f"{cost.records:,} records (one every {format_time(cost.sample_interval)}) take "
            f"~{format_bytes(cost.record_bytes)}")
    available_for_records = room - cost.history_bytes
    if available_for_records > 0 and cost.records > _MIN_RECORDS:
        fits = cost.sample_interval * cost.record_bytes / available_for_records
        advice = (f"a run.sample of at least {format_time(fits)} (or a shorter run.duration) "
                  "would fit")
    else:
        advice = (f"the network ({cost.links:,} links, {cost.controllers:,} distinct senders) "
                  "is too large for this memory; use fewer flows or a smaller topology")
    raise ScenarioError(f"{head}: {part}; {advice}")
