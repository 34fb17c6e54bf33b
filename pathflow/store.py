"""A sweep's zarr store, grown point by point while the sweep runs.

The store is laid out as the sweep's whole Dataset (`pathflow.sweeps`): every point of the grid
is there from the start, NaN until it has run, so `xarray.open_zarr(path)` reads it lazily at
any moment, from another process too, and sees the points finished so far. Each point's values
lie in chunks of their own (one point along every axis and `flows`; a point's series whole), so
writing one point touches no other, and nothing is rewritten as the sweep grows.

A point is written in two steps, its `aggregate_throughput` last: that value is the mark a
resumed sweep reads to tell a finished point (`sweeps._resumable`), so a sweep killed while
writing leaves a point either finished or not run, never half written. The store itself is
created whole or not at all (written beside the target, then renamed into place), replacing an
earlier store of the same name only once the new one, which holds every point the earlier one
gave a resumed sweep, is complete.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import xarray as xr

__all__ = ["DONE", "create_store", "finished_points", "read_store", "write_points"]

DONE = "aggregate_throughput"  # written last: a point whose value is finite has finished
_FORMAT = 2  # zarr's format 2: consolidated metadata and text coordinates in its spec


def create_store(path: str | Path, result: xr.Dataset) -> None:
    """Write `result` (a sweep's Dataset, NaN where points have not run) as the store at
    `path`, replacing what is there once the new store is complete."""
    path = Path(path)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.partial")
    shutil.rmtree(temporary, ignore_errors=True)
    axes = _point_dims(result)
    encoding = {name: {"chunks": tuple(1 if dim in axes else result.sizes[dim]
                                       for dim in result[name].dims)}
                for name in result.data_vars}
    try:
        result.to_zarr(temporary, mode="w", encoding=encoding, consolidated=True,
                       zarr_format=_FORMAT)
        earlier = path.with_name(f".{path.name}.{os.getpid()}.earlier")
        if path.exists():
            os.replace(path, earlier)
        os.replace(temporary, path)
        shutil.rmtree(earlier, ignore_errors=True)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)


def write_points(path: str | Path, result: xr.Dataset, points: Iterable[tuple[int, ...]]
                 ) -> None:
    """Write the `points` of `result` (indices along its point dimensions: the axes, then
    `flows`) into the store at `path`, created from a Dataset of the same layout."""
    dims = _point_dims(result)
    values = result.drop_vars(list(result.coords))
    for point in points:
        region = {dim: slice(i, i + 1) for dim, i in zip(dims, point, strict=True)}
        one = values.isel(region)
        rest = [name for name in one.data_vars if name != DONE]
        one[rest].to_zarr(path, region=region, zarr_format=_FORMAT)
        one[[DONE]].to_zarr(path, region=region, zarr_format=_FORMAT)


def finished_points(result: xr.Dataset) -> set[tuple[int, ...]]:
    """The points of a sweep's Dataset that have finished (indices as `write_points` takes)."""
    done = result[DONE].transpose(*_point_dims(result)).values
    return {tuple(int(i) for i in index) for index in np.argwhere(np.isfinite(done))}


def read_store(path: str | Path) -> xr.Dataset:
    """The store at `path`, loaded (without dask: its default scheduler may be a cluster's)."""
    with xr.open_zarr(path, consolidated=True, chunks=None) as stored:
        return stored.load()


def _point_dims(result: xr.Dataset) -> tuple[str, ...]:
    """The dimensions that count points: those of the done mark (the axes, then `flows`)."""
    return tuple(map(str, result[DONE].dims))
