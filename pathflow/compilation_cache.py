"""JAX's persistent compilation cache for pathflow's programs.

Compiling a fluid run's program takes 1 to 3 s on a CPU, often longer than the run itself; the
cache keeps each compiled program on disk, so the next run of the same shapes (another seed, a
parameter changed, the same scenario tomorrow) skips it, and the solver's traced programs are
kept beside it (`solvers/traced.py`), so that such a run skips tracing and lowering too. The
command line enables it for every command; notebooks and scripts call `enable()` once, before
their first simulation.
"""

from __future__ import annotations

from pathlib import Path

import jax

__all__ = ["enable"]

# Quicker compilations are cheaper to redo than to store, but a run's small programs are not:
# on the k = 8 fat-tree the initial carry's first call takes 0.18 s compiling and 0.05 s from
# disk, and each size class of the ring's re-filing (solvers.run) compiles in 0.05 to 0.1 s,
# in every process under a 1 s threshold.
MIN_COMPILE_SECONDS = 0.05


def enable(directory: str | Path | None = None) -> Path | None:
    """Keep compiled programs in `directory` (default ~/.cache/pathflow/jax); returns it, or
    None where it cannot be created (a read-only home: runs go on without the cache)."""
    folder = Path(directory) if directory is not None else Path.home() / ".cache/pathflow/jax"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
    return folder
