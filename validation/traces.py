"""Loading measured traces into Datasets with the names and units of simulation results.

`load_queue_trace` reads a `time,queue` CSV (seconds, packets) such as the DCTCP queue traces of
seed 003 and returns a Dataset with `queue` (time, link) in bytes, so that the metrics of
`pathflow.metrics` apply unchanged. `reference_path` finds the copies shipped in
`pathflow/validation/data/` (see its README for provenance).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import numpy as np
import xarray as xr

__all__ = ["TraceError", "load_queue_trace", "reference_path"]


class TraceError(ValueError):
    """A trace file that cannot be read; the message names the file and the problem."""


def reference_path(name: str) -> Path:
    """Path of a reference file shipped with pathflow (e.g. 'hardware_dctcp_queue.csv')."""
    path = Path(str(resources.files("pathflow.validation").joinpath("data", name)))
    if not path.exists():
        raise TraceError(f"{name}: no such reference file in {path.parent}")
    return path


def load_queue_trace(path: str | Path, packet_bytes: float = 1514.0, link: str = "bottleneck",
                     source: str | None = None) -> xr.Dataset:
    """A queue trace CSV (`time,queue`: seconds, packets) as a Dataset; `queue` in bytes
    (packets * packet_bytes, attrs["packet_bytes"] keeps the factor)."""
    path = Path(path)
    try:
        data = np.loadtxt(path, delimiter=",", ndmin=2)
    except (OSError, ValueError) as error:
        raise TraceError(f"{path}: not a time,queue CSV of numbers ({error})") from None
    if data.size == 0:
        raise TraceError(f"{path}: empty trace")
    if data.shape[1] != 2:
        raise TraceError(f"{path}: expected 2 columns (time in s, queue in packets), "
                         f"got {data.shape[1]}")
    time, queue = data[:, 0], data[:, 1]
    if np.any(np.diff(time) <= 0):
        raise TraceError(f"{path}: times must increase")
    return xr.Dataset(
        {"queue": (("time", "link"), (queue * packet_bytes)[:, None], {"units": "bytes"})},
        coords={"time": ("time", time, {"units": "s"}), "link": [link]},
        attrs={"engine": source or f"trace {path.name}", "packet_bytes": packet_bytes},
    )
