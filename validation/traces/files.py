"""Reading trace files: the error every loader raises, a file's first bytes, a netCDF file
loaded into memory, and the reference files shipped with pathflow."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import xarray as xr

__all__ = ["GZIP_MAGIC", "TraceError", "read_head", "read_netcdf", "reference_path",
           "trace_error"]

GZIP_MAGIC = b"\x1f\x8b"


class TraceError(ValueError):
    """A trace file that cannot be read; the message names the file and the problem."""


def trace_error(path: Path | str, problem: object) -> TraceError:
    """`TraceError` "path: problem" on one line, whatever the underlying library printed (the
    command line shows it as is)."""
    text = " ".join(str(problem).split())
    return TraceError(f"{path}: {text}")


def reference_path(name: str) -> Path:
    """Path of a reference file shipped with pathflow (e.g. 'hardware_dctcp_queue.csv')."""
    path = Path(str(resources.files("pathflow.validation").joinpath("data", name)))
    if not path.exists():
        raise TraceError(f"{name}: no such reference file in {path.parent}")
    return path


def read_head(path: Path, size: int) -> bytes:
    """The first `size` bytes (fewer for a short file, none for an empty one); a missing or
    unreadable file raises TraceError."""
    try:
        with path.open("rb") as f:
            return f.read(size)
    except FileNotFoundError:
        raise trace_error(path, "no such file") from None
    except IsADirectoryError:
        raise trace_error(path, "is a directory, not a file") from None
    except OSError as error:
        raise trace_error(path, f"cannot read ({error.strerror or error})") from None


def read_netcdf(path: Path) -> xr.Dataset:
    """A netCDF file loaded into memory (the file is closed again), attributes as stored."""
    try:
        with xr.open_dataset(path) as opened:
            return opened.load()
    except Exception as error:  # the netCDF back ends raise many types; all mean "unreadable"
        raise trace_error(path, f"cannot read netCDF ({type(error).__name__}: {error})"
                          ) from None
