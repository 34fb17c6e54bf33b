"""Running the integrator: in segments (for progress and early stopping), single or batched.

`solve` is what the rest of pathflow calls. It compiles one program per (physics, grid, shapes) and
advances the scan a segment of records at a time, so a progress callback can report and a long run
can be interrupted without losing the records already computed, and so that the step can follow
the dynamics between segments (`solvers.stepping`). With `batched=True` the problem carries a
leading batch axis and the program is `jax.vmap`-ed over it.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

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
from pathflow.solvers.stepping import Stepping, limiting_rtt, regrid

__all__ = ["solve", "solve_together"]

Progress = Callable[[int, int], None]
_ADAPTIVE_SEGMENTS = 64


@lru_cache(maxsize=32)
def _compiled(physics: Physics, grid: Grid, records: int, batched: bool
              ) -> tuple[Callable, Callable]:
    def start(problem: Problem):  # type: ignore[no-untyped-def]
        return initial_carry(physics, problem, grid)

    def advance(problem: Problem, carry, steps):  # type: ignore[no-untyped-def]
        return run_records(physics, problem, grid, carry, records, steps)

    if batched:
        start, advance = jax.vmap(start), jax.vmap(advance, in_axes=(0, 0, None))
    return jax.jit(start), jax.jit(advance, donate_argnums=1)  # the carry is updated in place


def solve(physics: Physics, problem: Problem, grid: Grid, *, batched: bool = False,
          progress: Progress | None = None, segments: int = 20,
          stepping: Stepping | None = None) -> Trajectory:
    """Integrate and return the trajectory as numpy arrays (time axis after any batch axis).

    With `stepping`, the step is chosen from the dynamics between segments (`solvers.stepping`),
    starting from `grid`'s (the finest); a batch shares one step, its finest point's."""
    if stepping is not None:  # follow the dynamics in more, shorter segments
        segments = max(segments, _ADAPTIVE_SEGMENTS)
    per_segment = max(1, -(-grid.records // max(1, segments)))
    start, advance = _compiled(physics, grid, per_segment, batched)
    carry = start(problem)
    steps_per_record = grid.steps_per_record
    pieces: list[Trajectory] = []
    done = 0
    while done < grid.records:
        steps = None
        if stepping is not None:
            steps = np.int32(steps_per_record)
            dt = stepping.sample / steps_per_record
            problem = problem._replace(dt=np.full(np.shape(problem.dt), dt,
                                                  np.asarray(problem.dt).dtype))
        carry, piece = advance(problem, carry, steps)
        pieces.append(jax.tree.map(np.asarray, piece))
        done += per_segment
        if progress is not None:
            progress(min(done, grid.records), grid.records)
        if stepping is not None and done < grid.records:
            now = done * stepping.sample
            chosen = stepping.choose(_limiting_rtt(pieces[-1], problem, now,
                                                   now + per_segment * stepping.sample, batched))
            if chosen != steps_per_record:
                carry = _regrid(carry, steps_per_record, chosen)
                steps_per_record = chosen
    axis = 1 if batched else 0
    joined = jax.tree.map(lambda *parts: np.concatenate(parts, axis=axis), *pieces)
    return jax.tree.map(lambda a: np.take(a, np.arange(grid.records), axis=axis), joined)


def _limiting_rtt(piece: Trajectory, problem: Problem, now: float, until: float,
                  batched: bool) -> float:
    """`stepping.limiting_rtt` over every point of a batch (the smallest)."""
    capacity = np.asarray(problem.queues.capacity)
    nic, start = np.asarray(problem.nic), np.asarray(problem.start)
    owner, weight = np.asarray(problem.path_subflow), np.asarray(problem.path_weight)
    base = np.asarray(problem.path_base_rtt)
    if not batched:
        return limiting_rtt(piece.rtt, piece.send_rate, capacity[nic], nic,
                            _subflow_base_rtt(owner, weight, base, nic.shape[0]), start, now,
                            until)
    return min(limiting_rtt(piece.rtt[b], piece.send_rate[b], capacity[b][nic[b]], nic[b],
                            _subflow_base_rtt(owner[b], weight[b], base[b], nic.shape[1]),
                            start[b], now, until)
               for b in range(nic.shape[0]))


def _subflow_base_rtt(owner: np.ndarray, weight: np.ndarray, base: np.ndarray,
                      subflows: int) -> np.ndarray:
    """Each subflow's split-weighted base round trip (s), as the solver averages its paths
    (inf for a padding subflow, which has none)."""
    total = np.bincount(owner, weights=weight, minlength=subflows)
    mean = np.bincount(owner, weights=weight * base, minlength=subflows) / np.maximum(total,
                                                                                      1e-300)
    return np.where(total > 0, mean, np.inf)


def _regrid(carry: Carry, old: int, new: int) -> Carry:
    """The carry with its step counter and feedback ring on the new grid (a batch shares its
    step)."""
    step = np.asarray(carry.step)
    stepped, slots, due = regrid(int(step.flat[0]), np.asarray(carry.feedback.slots),
                                 np.asarray(carry.feedback.due), old, new)
    feedback = carry.feedback._replace(slots=jnp.asarray(slots), due=jnp.asarray(due))
    return carry._replace(step=jnp.full_like(carry.step, stepped), feedback=feedback)


def solve_together(physics: Physics, problems: list[Problem], grid: Grid, *,
                   progress: Progress | None = None, stepping: Stepping | None = None
                   ) -> list[Trajectory]:
    """Problems of one time step solved as one (`solvers.problem.merge_problems`: disjoint
    copies side by side), each problem's trajectory returned; the step, where it follows the
    dynamics, is the one the finest of them needs."""
    merged = solve(physics, merge_problems(problems), grid, progress=progress,
                   stepping=stepping)
    links = [name for name, array in zip(Trajectory._fields, merged, strict=True)
             if name.startswith("queue") or name in ("arrival", "departure", "drop", "mark")]
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
        else:
            parts = split_subflows(value, problems)
        for piece, part in zip(pieces, parts, strict=True):
            piece[name] = part
    return [Trajectory(**piece) for piece in pieces]  # type: ignore[arg-type]
