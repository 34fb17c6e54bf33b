"""Running the integrator: in segments (for progress and early stopping), single or batched.

`solve` is what the rest of pathflow calls. It compiles one program per (model, grid, shapes) and
advances the scan a segment of records at a time, so a progress callback can report and a long run
can be interrupted without losing the records already computed. With `batched=True` the problem
carries a leading batch axis and the program is `jax.vmap`-ed over it.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

import jax
import numpy as np

from pathflow.models.base import CongestionModel
from pathflow.solvers.dde import Trajectory, initial_carry, run_records
from pathflow.solvers.problem import Grid, Problem

__all__ = ["solve"]

Progress = Callable[[int, int], None]


@lru_cache(maxsize=32)
def _compiled(model: CongestionModel, grid: Grid, records: int, batched: bool
              ) -> tuple[Callable, Callable]:
    def start(problem: Problem):  # type: ignore[no-untyped-def]
        return initial_carry(model, problem, grid)

    def advance(problem: Problem, carry):  # type: ignore[no-untyped-def]
        return run_records(model, problem, grid, carry, records)

    if batched:
        start, advance = jax.vmap(start), jax.vmap(advance)
    return jax.jit(start), jax.jit(advance, donate_argnums=1)  # the carry is updated in place


def solve(model: CongestionModel, problem: Problem, grid: Grid, *, batched: bool = False,
          progress: Progress | None = None, segments: int = 20) -> Trajectory:
    """Integrate and return the trajectory as numpy arrays (time axis after any batch axis)."""
    per_segment = max(1, -(-grid.records // max(1, segments)))
    start, advance = _compiled(model, grid, per_segment, batched)
    carry = start(problem)
    pieces: list[Trajectory] = []
    done = 0
    while done < grid.records:
        carry, piece = advance(problem, carry)
        pieces.append(jax.tree.map(np.asarray, piece))
        done += per_segment
        if progress is not None:
            progress(min(done, grid.records), grid.records)
    axis = 1 if batched else 0
    joined = jax.tree.map(lambda *parts: np.concatenate(parts, axis=axis), *pieces)
    return jax.tree.map(lambda a: np.take(a, np.arange(grid.records), axis=axis), joined)
