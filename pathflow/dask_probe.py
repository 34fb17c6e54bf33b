"""xarray's check for dask arrays, answered without importing dask.array until it is in use.

Why: xarray asks of the data of every new Variable whether it is a dask array, and to know the
type it imports `dask.array` on the first question (`xarray.namedarray.pycompat.array_type`),
which costs 0.5 s on this machine (beside 0.15 s for `dask.base`, which xarray's index
building imports anyway): paid by every command that makes a Dataset, though dask (installed for
`pathflow sweep --workers`) is not used there. No dask array can exist before `dask.array` is
imported, so until then the answer is "no"; from then on xarray's own probe answers, as without
this module.

`defer()` puts that answer in xarray's cache of probed modules (a private name: where an xarray
lacks it, nothing is changed and the import is only paid as before). Tested by
tests/test_dask_probe.py: a Dataset made without importing dask.array, and dask-backed
Datasets still chunked and computed, made before and after the first Dataset.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["defer"]


class _UntilImported:
    """xarray's `DuckArrayModule("dask")`, probed only once `dask.array` is imported or any
    property but the array type is asked for."""

    def __init__(self, cache: dict[str, Any], probe: Any) -> None:
        self._cache, self._probe = cache, probe

    @property
    def type(self) -> tuple[type, ...]:
        if "dask.array" not in sys.modules:
            return ()
        return self._probed().type

    def _probed(self) -> Any:
        probed = self._probe("dask")
        self._cache["dask"] = probed
        return probed

    def __getattr__(self, name: str) -> Any:  # available, version, module
        return getattr(self._probed(), name)


def defer() -> None:
    """Answer xarray's dask probe without importing dask.array while it is not in use."""
    try:
        from xarray.namedarray import pycompat
    except ImportError:
        return
    cache = getattr(pycompat, "_cached_duck_array_modules", None)
    probe = getattr(pycompat, "DuckArrayModule", None)
    if isinstance(cache, dict) and probe is not None and "dask" not in cache:
        cache["dask"] = _UntilImported(cache, probe)
