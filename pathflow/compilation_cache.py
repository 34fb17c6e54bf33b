"""JAX's persistent compilation cache for pathflow's programs.

Compiling a fluid run's program takes 1 to 3 s on a CPU, often longer than the run itself; the
cache keeps each compiled program on disk, so the next run of the same shapes (another seed, a
parameter changed, the same scenario tomorrow) skips it. The command line enables it for every
command; notebooks and scripts call `enable()` once, before their first simulation.
"""

from __future__ import annotations

from pathlib import Path

import jax

__all__ = ["enable"]

# Quicker compilations are cheaper to redo than to store; a run's small programs are not: the
# initial carry's compiles in 0.2 to 0.5 s and each size class of the ring's re-filing in 0.05 s
# (solvers.run), in every process, a quarter of a cached k = 8 fat-tree run end to end, while
# loading one from disk takes milliseconds.
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
