"""JAX's persistent compilation cache for pathflow's programs.

Compiling a fluid run's program takes 1 to 3 s on a CPU, often longer than the run itself; the
cache keeps each compiled program on disk, so the next run of the same shapes (another seed, a
parameter changed, the same scenario tomorrow) skips it, and the solver's traced programs are
kept beside it (`solvers/traced.py`), so that such a run skips tracing and lowering too. The
command line enables it for every command; notebooks and scripts call `enable()` once, before
their first simulation.

Every program is kept until the folder outgrows `MAX_BYTES` (a sweep over many shapes adds a
program per shape; this machine's cache reached 550 MB in a few weeks of development): at most
once a day, `enable` removes the programs stored longest ago (file modification time; a traced
program is touched whenever it is loaded) until the folder, `traced/` included, holds at most
`MAX_BYTES`. A removed program is compiled again when next needed.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import jax

__all__ = ["MAX_BYTES", "enable", "prune"]

# Quicker compilations are cheaper to redo than to store, but a run's small programs are not:
# on the k = 8 fat-tree the initial carry's first call takes 0.18 s compiling and 0.05 s from
# disk, and each size class of the ring's re-filing (solvers.run) compiles in 0.05 to 0.1 s,
# in every process under a 1 s threshold.
MIN_COMPILE_SECONDS = 0.05
MAX_BYTES = 1 << 30  # the folder's bound (1 GiB): programs are 10 KB to 1 MB each
PRUNE_EVERY = 86400.0  # s: how often `enable` looks at the folder's size
_STAMP = ".pruned"  # its modification time: when the folder was last looked at


def enable(directory: str | Path | None = None, max_bytes: int = MAX_BYTES) -> Path | None:
    """Keep compiled programs in `directory` (default ~/.cache/pathflow/jax), at most
    `max_bytes` of them (module docstring); returns the folder, or None where it cannot be
    created (a read-only home: runs go on without the cache)."""
    folder = Path(directory) if directory is not None else Path.home() / ".cache/pathflow/jax"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        stamp = folder / _STAMP
        if not stamp.exists() or time.time() - stamp.stat().st_mtime > PRUNE_EVERY:
            stamp.touch()
            prune(folder, max_bytes)
    except OSError:
        return None
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
    return folder


def prune(folder: Path, max_bytes: int) -> int:
    """Remove the files of `folder` and its subfolders stored longest ago until at most
    `max_bytes` remain; returns the bytes removed. Files another process removes meanwhile
    are skipped."""
    files = []
    for path in folder.rglob("*"):
        try:
            info = path.stat()
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode) and path.name != _STAMP:
            files.append((info.st_mtime, info.st_size, path))
    excess = sum(size for _, size, _ in files) - max_bytes
    removed = 0
    for _, size, path in sorted(files, key=lambda item: item[0]):
        if removed >= excess:
            break
        try:
            os.remove(path)
        except OSError:
            continue
        removed += size
    return removed
