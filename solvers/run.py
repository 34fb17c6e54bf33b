"""Running the integrator: in segments (for progress and early stopping), alone or together.

`solve` is what the rest of pathflow calls. It compiles one program per (physics, grid, shapes)
(traced once per machine where the persistent compilation cache is on, `solvers.traced`) and
advances the scan a segment of records at a time, so a progress callback can report and a long run
can be interrupted without losing the records already computed, and so that the step can follow
the dynamics between segments (`solvers.stepping`). `solve_together` runs a batch as one merged
problem (`solvers.problem.merge_problems`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache, partial

import jax
import jax.numpy as jnp
import numpy as np

from pathflow.solvers.dde import Carry, Trajectory, initial_carry, run_records
from pathflow.solvers.problem import (
    Grid,
    Physics,
    Problem,
    merge_problems,
    split_links,
    split_subflows,
)
from pathflow.solvers.stepping import Stepping, limiting_rtt, refiled
from pathflow.solvers.traced import cached

__all__ = ["solve", "solve_together"]

Progress = Callable[[int, int], None]
_ADAPTIVE_SEGMENTS = 64

# XLA's CPU options for the step loop. A step is some 60 small kernels (a few hundred values
# each); by default XLA hands independent ones to other threads, which costs more than it wins
# at this size. With the first two, on two CPUs (a notebook or script: the command line pins
# itself to one, `cli.console.setup_jax`) the k = 8 fat-tree's loop runs 19 % faster, on one CPU
# 3 %; vectors of 512 bits where the CPU has them (AVX-512; a hint, which a CPU without them
# ignores) take 5 % off the 100 Gb/s fat-tree's step and up to 3 % off others; every result
# bit for bit the same (benchmarks/README.md, "XLA options"; `bench_xla_options.py`).
LOOP_OPTIONS: dict[str, bool | int] = {"xla_cpu_copy_insertion_use_region_analysis": True,
                                       "xla_cpu_enable_concurrency_optimized_scheduler": False,
                                       "xla_cpu_prefer_vector_width": 512}


@lru_cache(maxsize=1)
def _loop_options() -> dict[str, bool | int]:
    """`LOOP_OPTIONS` where the backend is a CPU whose XLA knows them, else none (an XLA
    refuses an option it does not know)."""
    if jax.default_backend() != "cpu":
        return {}
    try:
        jax.jit(lambda x: x, compiler_options=LOOP_OPTIONS).lower(0.0).compile()
    except jax.errors.JaxRuntimeError:
        return {}
    return LOOP_OPTIONS


@lru_cache(maxsize=32)
def _compiled(physics: Physics, grid: Grid, records: int) -> tuple[Callable, Callable]:
    def start(problem: Problem):  # type: ignore[no-untyped-def]
        return initial_carry(physics, problem, grid)

    def advance(problem: Problem, carry, steps, active):  # type: ignore[no-untyped-def]
        return run_records(physics, problem, grid, carry, records, steps, active)

    # the carry is updated in place; both programs are traced once per machine (`traced`)
    static = (physics, grid, records)
    return (cached("start", static, start),
            cached("advance", static, advance, donate=1, options=_loop_options()))


def solve(physics: Physics, problem: Problem, grid: Grid, *, progress: Progress | None = None,
          segments: int = 20, stepping: Stepping | None = None) -> Trajectory:
    """Integrate and return the trajectory as numpy arrays (time first).

    With `stepping`, the step is chosen from the dynamics between segments (`solvers.stepping`),
    starting from `grid`'s (the finest)."""
    if stepping is not None:  # follow the dynamics in more, shorter segments
        segments = max(segments, _ADAPTIVE_SEGMENTS)
        limit = _step_limit(problem)
    per_segment = max(1, -(-grid.records // max(1, segments)))
    start, advance = _compiled(physics, grid, per_segment)
    carry = start(problem)
    steps_per_record = grid.steps_per_record
    pieces: list[Trajectory] = []
    done = 0
    while done < grid.records:
        steps = active = None
        count = per_segment
        if stepping is not None:
            steps = np.int32(steps_per_record)
            dt = stepping.sample / steps_per_record
            problem = problem._replace(dt=np.asarray(dt, np.asarray(problem.dt).dtype))
            # the first segment record by record: the step leaves the finest (slow start's)
            # as soon as the dynamics allow, not a 64th of the run later
            count = 1 if done < per_segment else per_segment
            active = np.int32(count)
        carry, piece = advance(problem, carry, steps, active)
        pieces.append(jax.tree.map(lambda a, n=count: _records_run(a, n), piece))
        done += count
        if progress is not None:
            progress(min(done, grid.records), grid.records)
        if stepping is not None and done < grid.records:
            now, following = done * stepping.sample, 1 if done < per_segment else per_segment
            chosen = stepping.choose(limit(pieces[-1], now, now + following * stepping.sample),
                                     steps_per_record)
            if chosen != steps_per_record:
                carry = _regrid(carry, steps_per_record, chosen)
                steps_per_record = chosen
    joined = jax.tree.map(lambda *parts: np.concatenate(parts), *pieces)
    return jax.tree.map(lambda a: a[: grid.records], joined)


def _records_run(array: jax.Array, count: int) -> np.ndarray:
    """A segment's first `count` records on the host: a copy where that is part of the segment
    (a view would keep the whole segment's array alive), the array itself where it is all."""
    host = np.asarray(array)
    return host if count >= host.shape[0] else host[:count].copy()


def _step_limit(problem: Problem) -> Callable[[Trajectory, float, float], float]:
    """`stepping.limiting_rtt` of a segment's records, with what it needs of the problem
    (each subflow's NIC and its capacity, its split-weighted base round trip, its start)."""
    nic = np.asarray(problem.nic)
    capacity = np.asarray(problem.queues.capacity)[nic]
    owner, weight = np.asarray(problem.path_subflow), np.asarray(problem.path_weight)
    total = np.bincount(owner, weights=weight, minlength=nic.shape[0])
    weighted = np.bincount(owner, weights=weight * np.asarray(problem.path_base_rtt),
                           minlength=nic.shape[0])
    base = np.where(total > 0, weighted / np.maximum(total, 1e-300), np.inf)  # inf: padding
    start, count = np.asarray(problem.start), np.asarray(problem.count)
    # the (controller, link) pairs of its paths' hops, to tell which controllers a mark or a
    # drop reached
    hop_link = np.concatenate([np.asarray(a) for a in problem.hop_link], axis=1)
    hop_share = np.concatenate([np.asarray(a) for a in problem.hop_share], axis=1)
    on_path = hop_share > 0
    pair_controller = np.nonzero(on_path)[0]
    pair_link = hop_link[on_path]

    def limit(piece: Trajectory, now: float, until: float) -> float:
        congested = (piece.mark.max(axis=0) > 0) | (piece.drop.max(axis=0) > 0)
        signalled = np.bincount(pair_controller, weights=congested[pair_link],
                                minlength=nic.shape[0]) > 0
        # a controller's rate times the identical subflows it runs for: what its NIC carries
        return limiting_rtt(piece.rtt, piece.send_rate * count, capacity, nic, base, start,
                            now, until, nic_load=piece.arrival[:, nic],  # ACKs included
                            signalled=signalled)

    return limit


def _regrid(carry: Carry, old: int, new: int) -> Carry:
    """The carry with its step counter, feedback ring and PFC decisions on the new grid (the
    decisions keep their times; their ring turns so that it still starts, oldest first, at
    the step counter). Only the ring's pending rows are read to the host (`stepping.refiled`);
    the ring is re-filed in place on the device, so nothing of its size is copied."""
    step = np.asarray(carry.step)
    stepped, rows, cols, entries, due = refiled(int(step), np.asarray(carry.feedback.slots),
                                                np.asarray(carry.feedback.due), old, new)
    # padded to a power of two (one compiled program per size class, each loaded once per
    # process: 12 ms), at least 8,192 entries, as many as a k = 8 fat-tree has pending (a
    # dropped row costs next to nothing); row H drops the padding
    size = 1 << max(13, (len(rows) - 1).bit_length())
    history = carry.feedback.slots.shape[0]
    pad = size - len(rows)
    slots = _refile(carry.feedback.slots, np.pad(rows, (0, pad), constant_values=history),
                    np.pad(cols, (0, pad)), np.pad(entries, ((0, pad), (0, 0))))
    feedback = carry.feedback._replace(slots=slots, due=jax.device_put(due))
    turn = stepped - int(step)
    # numpy, put on the device as is: jnp.roll compiles anew for every shift, and a jnp.asarray
    # of a Python number or with a dtype compiles a conversion in every fresh process
    return carry._replace(step=jax.device_put(np.asarray(stepped, carry.step.dtype)),
                          feedback=feedback,
                          pause_views=jax.device_put(np.roll(carry.pause_views, turn, axis=0)),
                          pause_times=jax.device_put(np.roll(carry.pause_times, turn, axis=0)))


@partial(jax.jit, donate_argnums=0)
def _refile(slots: jax.Array, rows: jax.Array, cols: jax.Array, entries: jax.Array
            ) -> jax.Array:
    """The ring emptied and the re-filed entries (each slot at most once) written, in the
    donated ring's memory: a fresh ring of hundreds of megabytes costs its page faults (0.5 s
    against 0.1 s on the k = 16 MPTCP case's 607 MB), so the fill reads the old one (no stamp
    is NaN) rather than ignoring it."""
    empty = jnp.where(jnp.isnan(slots), slots, -1.0)
    return empty.at[rows, cols].set(entries.astype(slots.dtype), mode="drop")


def solve_together(physics: Physics, problems: list[Problem], grid: Grid, *,
                   progress: Progress | None = None, stepping: Stepping | None = None
                   ) -> list[Trajectory]:
    """Problems of one time step solved as one (`solvers.problem.merge_problems`: disjoint
    copies side by side), each problem's trajectory returned; the step, where it follows the
    dynamics, is the one the finest of them needs."""
    merged = solve(physics, merge_problems(problems), grid, progress=progress,
                   stepping=stepping)
    links = [name for name, array in zip(Trajectory._fields, merged, strict=True)
             if name.startswith("queue")
             or name in ("arrival", "departure", "drop", "mark", "pause")]
    pieces: list[dict[str, object]] = [{} for _ in problems]
    for name in Trajectory._fields:
        value = getattr(merged, name)
        if name == "dt":
            parts = [value] * len(problems)
        elif name == "state":
            per_key = {key: split_subflows(v, problems) for key, v in value.items()}
            parts = [{key: per_key[key][i] for key in value} for i in range(len(problems))]
        elif name in links:
            parts = split_links(value, problems)
        elif name == "block_done":  # (..., F, rounds): the flows are not the last axis
            parts = [np.moveaxis(part, -1, -2) for part in
                     split_subflows(np.moveaxis(np.asarray(value), -2, -1), problems)]
        else:
            parts = split_subflows(value, problems)
        for piece, part in zip(pieces, parts, strict=True):
            piece[name] = part
    return [Trajectory(**piece) for piece in pieces]  # type: ignore[arg-type]
