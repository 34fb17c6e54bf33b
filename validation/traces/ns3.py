"""Saved ns-3 results (netCDF from `run_ns3` / `simulate_ns3`), checked to be ns-3's and with
the attributes that were stored as JSON text decoded again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import xarray as xr

from pathflow.validation.traces.files import read_head, read_netcdf, trace_error

__all__ = ["load_ns3"]

# Attributes that are JSON text by design (Ns3Config.from_json reads it) and stay text.
_JSON_TEXT_ATTRS = frozenset({"config"})


def load_ns3(path: str | Path) -> xr.Dataset:
    """A saved ns-3 result (netCDF written by `Dataset.to_netcdf` or
    `pathflow.results.write_dataset` from `run_ns3` / `simulate_ns3`), loaded into memory.

    Returns the Dataset as the runner made it (`pathflow.schema`): `queue` (bytes),
    `link_departure`, `drops`, `marks` (bytes/s) over (time, link), `flow_rate` (bytes/s) over
    (time, flow), `cwnd` (bytes), `rtt` (s), `alpha` over (time, subflow), with its attrs
    (results saved before the schema have cwnd, rtt and alpha on `flow`). Attributes that
    `write_dataset` stored as JSON text because they were dicts or lists become dicts and
    lists again; `config` stays the JSON text that `Ns3Config.from_json` reads.
    """
    path = Path(path)
    head = read_head(path, 8)
    if not head:
        raise trace_error(path, "empty file (expected a netCDF ns-3 result)")
    if not (head.startswith(b"\x89HDF\r\n\x1a\n") or head.startswith(b"CDF")):
        raise trace_error(path, f"not a netCDF file (first bytes 0x{head[:4].hex()})")
    ds = read_netcdf(path)
    engine = ds.attrs.get("engine")
    if engine is None:
        raise trace_error(path, "no 'engine' attribute: not a saved pathflow / ns-3 result")
    if not str(engine).startswith("ns-3"):
        raise trace_error(path, f"engine is {engine!r}, not ns-3")
    missing = [name for name in ("flow_rate", "link_departure", "queue") if name not in ds]
    if "time" not in ds.dims or missing:
        raise trace_error(path, f"not an ns-3 result: missing {', '.join(missing) or 'time'}")
    ds.attrs = {key: _decode_attr(key, value) for key, value in ds.attrs.items()}
    return ds


def _decode_attr(key: str, value: Any) -> Any:
    if key in _JSON_TEXT_ATTRS or not isinstance(value, str) or value[:1] not in "{[":
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value  # text that merely starts with a bracket (a TOML table header, say)
