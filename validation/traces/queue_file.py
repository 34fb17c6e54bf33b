"""A queue trace from a file of any kind that has one, told apart by content rather than by
suffix: a netCDF result with `queue` (a pathflow fluid or packet run, an ns-3 run) or a
`time,queue` CSV. A packet capture is refused: it gives rates, not a queue."""

from __future__ import annotations

import gzip
from pathlib import Path

import xarray as xr

from pathflow.validation.traces.capture_files import is_capture
from pathflow.validation.traces.files import GZIP_MAGIC, read_head, read_netcdf, trace_error
from pathflow.validation.traces.queue_csv import load_queue_trace

__all__ = ["load_queue_file"]

# netCDF-4 (HDF5) and the classic formats (CDF-1, CDF-2 and CDF-5).
_NETCDF_HEADS = (b"\x89HDF\r\n\x1a\n", b"CDF\x01", b"CDF\x02", b"CDF\x05")
_NETCDF_SUFFIXES = (".nc", ".netcdf", ".h5")
_WANTED = "a time,queue CSV (s, packets) or a netCDF result with 'queue' (pathflow, ns-3)"


def load_queue_file(path: str | Path) -> xr.Dataset:
    """A Dataset with `queue` (time, link) in bytes from `path`: a netCDF result as it was
    saved (attributes as stored), else a `time,queue` CSV (`load_queue_trace`, packets of
    1514 B). Unreadable input raises TraceError naming the file and what was expected."""
    path = Path(path)
    head = read_head(path, 8)
    if not head:
        raise trace_error(path, f"empty file (expected {_WANTED})")
    if head.startswith(GZIP_MAGIC):
        # Only captures are read compressed; peek inside to say which it is.
        try:
            with gzip.open(path, "rb") as f:
                head = f.read(8)
        except (OSError, EOFError):
            head = b""
        if not is_capture(head):
            raise trace_error(path, f"gzip-compressed; decompress it (expected {_WANTED})")
    if is_capture(head):
        # A capture's timestamps give rates, not the switch's backlog: nothing to fit to.
        raise trace_error(path, f"a packet capture gives per-flow rates (traces.load_pcap) but "
                                f"no queue; calibration needs {_WANTED}")
    if head.startswith(_NETCDF_HEADS):
        return _queue_result(path)
    if path.suffix.lower() in _NETCDF_SUFFIXES:
        raise trace_error(path, f"not a netCDF file (first bytes 0x{head[:4].hex()})")
    return load_queue_trace(path)


def _queue_result(path: Path) -> xr.Dataset:
    ds = read_netcdf(path)
    if "queue" not in ds:
        variables = ", ".join(map(str, ds.data_vars)) or "none"
        raise trace_error(path, f"no 'queue' variable (variables: {variables}); expected "
                                f"{_WANTED}")
    if set(ds.queue.dims) != {"time", "link"}:
        dims = ", ".join(map(str, ds.queue.dims))
        raise trace_error(path, f"'queue' has dimensions ({dims}); expected (time, link), one "
                                f"run (a sweep has a 'flows' dimension)")
    return ds
