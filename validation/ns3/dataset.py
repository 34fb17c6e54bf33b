"""The arrays the ns-3 child process samples -> a Dataset with the names and units of
`pathflow.results` (cumulative byte counters become per-interval rates)."""

from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr

from pathflow.validation.ns3.config import TCP_TYPES, Ns3Config

__all__ = ["ENGINE", "to_dataset"]

ENGINE = "ns-3 3.44"


def _rate(cumulative: np.ndarray, dt: float) -> np.ndarray:
    """Per-interval average rate from cumulative counters that start at 0 at t = 0."""
    prev = np.concatenate([np.zeros_like(cumulative[:1]), cumulative[:-1]], axis=0)
    return (cumulative - prev) / dt


# name -> (dims, key in the child's arrays, cumulative counter?, units, long_name)
_VARIABLES: dict[str, tuple[tuple[str, str], str, bool, str, str]] = {
    "queue": (
        ("time", "link"), "queue", False, "bytes",
        "egress backlog (queue disc + device queue), sampled",
    ),
    "link_departure": (
        ("time", "link"), "tx", True, "bytes/s",
        "IP bytes whose transmission finished in the interval, per second",
    ),
    "drops": (
        ("time", "link"), "drop", True, "bytes/s",
        "IP bytes dropped at the port in the interval, per second",
    ),
    "marks": (
        ("time", "link"), "mark", True, "bytes/s",
        "IP bytes CE-marked at the port in the interval, per second",
    ),
    "flow_rate": (
        ("time", "flow"), "rx", True, "bytes/s",
        "goodput: payload bytes delivered to the receiving application, per second",
    ),
    "cwnd": (
        ("time", "flow"), "cwnd", False, "bytes",
        "sender congestion window, sampled (NaN before the flow starts, 0 until connected)",
    ),
    "rtt": (
        ("time", "flow"), "rtt", False, "s",
        "latest completed RTT probe: new data sent -> first ACK/SACK covering it",
    ),
    "alpha": (
        ("time", "flow"), "alpha", False, "1",
        "DCTCP congestion estimate alpha, latest update",
    ),
}  # fmt: skip


def to_dataset(cfg: Ns3Config, a: dict[str, np.ndarray], wall_time_s: float) -> xr.Dataset:
    """The Dataset of the run of `cfg`: `a` holds the arrays the child saved (named in
    `pathflow.validation.ns3.child`), `wall_time_s` the whole run's wall time, start-up
    included."""
    dt = cfg.sample_interval_s
    ends = cfg.flow_endpoints()
    data_vars: dict[str, Any] = {}
    for name, (dims, key, cumulative, units, desc) in _VARIABLES.items():
        if name == "alpha" and cfg.cc != "dctcp":
            continue
        values = _rate(a[key], dt) if cumulative else a[key]
        data_vars[name] = (dims, values.astype(np.float64), {"units": units, "long_name": desc})
    coords = {
        "time": (
            "time",
            a["time"],
            {"units": "s", "long_name": "sample instant; rates average over the preceding step"},
        ),
        "link": (
            "link",
            np.array([str(x) for x in a["link_names"]], dtype=object),
            {"units": "1", "long_name": "egress port 'from->to'"},
        ),
        "flow": ("flow", np.arange(cfg.flows), {"units": "1", "long_name": "flow index"}),
        "src": (
            "flow",
            np.array([s for s, _ in ends], dtype=object),
            {"units": "1", "long_name": "sending host"},
        ),
        "dst": (
            "flow",
            np.array([d for _, d in ends], dtype=object),
            {"units": "1", "long_name": "receiving host"},
        ),
    }
    attrs = {
        "engine": ENGINE,
        "config": cfg.to_json(),
        "wall_time_s": float(wall_time_s),
        "sim_wall_time_s": float(a["sim_wall_time_s"]),
        "base_rtt_s": cfg.base_rtt_s,
        "mss_bytes": cfg.mss_bytes,
        "sample_interval_s": dt,
        "tcp": TCP_TYPES[cfg.cc] + (" (ECN)" if cfg.cc == "dctcp" else " (no ECN)"),
        "aqm": str(a["aqm_desc"]),
    }
    if cfg.bottleneck_link is not None:  # netCDF attributes cannot be None
        attrs["bottleneck_link"] = cfg.bottleneck_link
    if cfg.network is not None:
        attrs["routing"] = cfg.network.routing
        attrs["unrouted_packets"] = int(a.get("unrouted", 0))
    if cfg.pcap_path is not None:
        attrs["pcap"] = str(cfg.pcap_path)
    return xr.Dataset(data_vars=data_vars, coords=coords, attrs=attrs)
