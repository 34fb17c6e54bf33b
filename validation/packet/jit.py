"""The one numba decorator every simulator function uses.

`kernel` is `numba.njit` with the on-disk cache, numpy's error model (no ZeroDivisionError
branches) and numba's reference counting switched off (`_nrt=False`). The simulator passes its
state as tuples of preallocated arrays; with reference counting on, every call between two
compiled functions increments and decrements the count of every array in its arguments (two
atomic operations per array), which made a call cost about 1 us and the simulator ~50x slower
and its compile ~5x longer. Nothing here allocates arrays inside compiled code, so the counts are
not needed; the arrays live as long as the Python `Sim` that holds them.

Cache caveat (numba's, not ours): a cached function is recompiled when its own file changes, not
when a function it calls in another file does. `refresh_cache` (called on import of the package)
drops this package's cache files whenever any of its sources changed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from numba import njit

__all__ = ["entry", "kernel", "outlined", "refresh_cache"]

_OPTIONS: dict[str, Any] = {"cache": True, "error_model": "numpy", "_nrt": False}
_OUTLINED: dict[str, Any] = {**_OPTIONS, "no_cpython_wrapper": True, "no_cfunc_wrapper": True}
_INTERNAL: dict[str, Any] = {**_OUTLINED, "inline": "always"}


def kernel(function: Callable[..., Any]) -> Any:
    """Compile `function` as a simulator kernel, callable from other kernels only (no Python
    wrapper: unboxing the simulator state is most of the compile time of a wrapper)."""
    return njit(**_INTERNAL)(function)


def outlined(function: Callable[..., Any]) -> Any:
    """Compile `function` as a kernel that other kernels call rather than inline: for branches
    with loops that few runs take (MPTCP's coupling) and for what runs far less often than once
    per packet (timeouts, loss recovery, DCQCN's timers and CNPs, samples), alone or as one copy
    that several such call sites share. Inlined, each call site adds a copy to the event loop's
    one compiled body, and numba's compile time grows faster than that body: the cold compile
    fell from about four minutes to about 75 s when these were outlined and the NIC kicks
    gathered in one place (`engine.run`). A call is not free, though (it passes every array of
    the state): keep what runs per packet or per event inlined."""
    return njit(**_OUTLINED)(function)


def entry(function: Callable[..., Any]) -> Any:
    """Compile `function` as a kernel that Python calls (the event loop)."""
    return njit(**_OPTIONS)(function)


def _cache_dirs(package: Path) -> list[Path]:
    from numba.core import config
    from numba.core.caching import _CacheLocator
    from numba.misc.appdirs import AppDirs

    sub = _CacheLocator.get_suitable_cache_subpath(str(package / "engine.py"))
    dirs = [package / "__pycache__",
            Path(AppDirs(appname="numba", appauthor=False).user_cache_dir) / sub]
    if config.CACHE_DIR:
        dirs.append(Path(config.CACHE_DIR) / sub)
    return dirs


def refresh_cache() -> None:
    """Delete this package's numba cache files if any of its sources changed since they were
    written (numba only checks the file that defines each function)."""
    package = Path(__file__).resolve().parent
    sources = sorted(package.glob("*.py"))
    digest = hashlib.sha256()
    for source in sources:
        digest.update(source.name.encode() + b"\0" + source.read_bytes())
    stamp_text = digest.hexdigest()
    for directory in _cache_dirs(package):
        stamp = directory / "pathflow-packet-sources.sha256"
        try:
            if stamp.exists() and stamp.read_text() == stamp_text:
                continue
            # Stamp a folder before numba first writes there: without a stamp the next process
            # could not tell fresh cache files from stale ones and would drop them.
            directory.mkdir(parents=True, exist_ok=True)
            for source in sources:
                for pattern in (f"{source.stem}.*.nbi", f"{source.stem}.*.nbc"):
                    for stale in directory.glob(pattern):
                        stale.unlink(missing_ok=True)
            stamp.write_text(stamp_text)
        except OSError:
            continue  # a read-only cache location: numba will not write there either
