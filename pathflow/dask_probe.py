"""xarray's checks for dask arrays, answered without importing dask until it is in use.

Why: xarray asks of the data of every new Variable whether it is a dask array, and to know the
type it imports `dask.array` on the first question (`xarray.namedarray.pycompat.array_type`;
0.5 s on this machine); building an index asks whether the values are a dask collection, which
imports `dask` (`xarray.namedarray.utils.is_dask_collection`; 0.17 s). Every command that makes
a Dataset paid both, though dask (installed for `pathflow sweep --workers`) is not used there.
No dask array exists before `dask.array` is imported, and no dask collection before `dask`, so
until then the answers are "no"; from then on xarray's own checks answer, as without this
module.

`defer()` puts those answers in xarray's cache of probed modules and in front of its collection
check (private names: where an xarray lacks them, nothing is changed and the imports are only
paid as before). Tested by tests/test_dask_probe.py: a Dataset with an index made without
importing dask, and dask-backed Datasets still chunked and computed, made before and after the
first Dataset.
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
        if name.startswith("_"):  # not xarray's (and no recursion before __init__ has run)
            raise AttributeError(name)
        return getattr(self._probed(), name)


def defer() -> None:
    """Answer xarray's dask checks without importing dask while it is not in use."""
    try:
        from xarray.namedarray import pycompat, utils
    except ImportError:
        return
    cache = getattr(pycompat, "_cached_duck_array_modules", None)
    probe = getattr(pycompat, "DuckArrayModule", None)
    if isinstance(cache, dict) and probe is not None and "dask" not in cache:
        cache["dask"] = _UntilImported(cache, probe)
    checks = getattr(utils, "is_dask_collection", None)
    if checks is not None and not getattr(checks, "deferred", False):

        def is_dask_collection(x: object) -> bool:
            return "dask" in sys.modules and checks(x)

        is_dask_collection.deferred = True  # type: ignore[attr-defined]
        utils.is_dask_collection = is_dask_collection
