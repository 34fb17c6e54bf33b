"""The arrays the ns-3 child process samples -> a Dataset labelled by `pathflow.schema`, like
the other engines' (cumulative byte counters become per-interval rates). Finite flows add their
`start` and `size` (the scenario's wire bytes per round: the same segments, `size` x (packet -
52) / packet of payload in ns-3), `completion_time` and, with rounds, `block_done` (flow,
round), from which `pathflow.metrics.round_summary` reads the rounds as it does the other
engines'. With rounds, `start` is when the first round began: once every connection was up,
as pathflow's engines have no handshake."""

from __future__ import annotations

import numpy as np
import xarray as xr

from pathflow.schema import build_dataset
from pathflow.validation.ns3.config import TCP_TYPES, Ns3Config

__all__ = ["ENGINE", "to_dataset"]

ENGINE = "ns-3 3.44"


def _rate(cumulative: np.ndarray, dt: float) -> np.ndarray:
    """Per-interval average rate from cumulative counters that start at 0 at t = 0."""
    prev = np.concatenate([np.zeros_like(cumulative[:1]), cumulative[:-1]], axis=0)
    return (cumulative - prev) / dt


# name -> (key in the child's arrays, cumulative counter?, how ns-3 measures it). Per flow
# and per subflow are one thing here: every flow is one TCP connection, subflow i of flow i.
_VARIABLES: dict[str, tuple[str, bool, str]] = {
    "queue": ("queue", False, "egress backlog (queue disc + device queue), sampled"),
    "link_departure": ("tx", True, "IP bytes whose transmission finished in the interval"),
    "drops": ("drop", True, "IP bytes dropped at the port in the interval"),
    "marks": ("mark", True, "IP bytes CE-marked at the port in the interval"),
    "flow_rate": ("rx", True, "goodput: payload bytes delivered to the receiving application"),
    "cwnd": ("cwnd", False, "sender congestion window, sampled (NaN before the flow starts, 0 "
                            "until connected)"),
    "rtt": ("rtt", False, "latest completed RTT probe: new data sent -> first ACK/SACK "
                          "covering it"),
    "alpha": ("alpha", False, "DCTCP congestion estimate alpha, latest update"),
}  # fmt: skip


def to_dataset(cfg: Ns3Config, a: dict[str, np.ndarray], wall_time_s: float) -> xr.Dataset:
    """The Dataset of the run of `cfg`: `a` holds the arrays the child saved (named in
    `pathflow.validation.ns3.child`), `wall_time_s` the whole run's wall time, start-up
    included."""
    dt = cfg.sample_interval_s
    ends = cfg.flow_endpoints()
    variables: dict[str, np.ndarray] = {}
    for name, (key, cumulative, _) in _VARIABLES.items():
        if name == "alpha" and cfg.cc != "dctcp":
            continue
        values = _rate(a[key], dt) if cumulative else a[key]
        variables[name] = values.astype(np.float64)
    links = [str(x) for x in a["link_names"]]
    ends_of = [tuple(name.split("->")) for name in links]
    ports = cfg.ports()  # (from, to) -> (bits/s, s, packets), as the child built them
    capacity = np.array([ports[end][0] / 8 for end in ends_of])
    # IP bytes over the line rate: a full port reads slightly below 1 (the 2-byte PPP header)
    variables["utilization"] = variables["link_departure"] / capacity
    coords = {
        "time": a["time"],
        "link": np.array(links, dtype=object),
        "link_src": np.array([src for src, _ in ends_of], dtype=object),
        "link_dst": np.array([dst for _, dst in ends_of], dtype=object),
        "capacity": capacity,
        "delay": np.array([ports[end][1] for end in ends_of]),
        "flow": np.arange(cfg.flows),
        "src": np.array([s for s, _ in ends], dtype=object),
        "dst": np.array([d for _, d in ends], dtype=object),
        "subflow": np.arange(cfg.flows),
        "subflow_flow": np.arange(cfg.flows),
    }
    attrs = {
        "engine": ENGINE,
        "config": cfg.to_json(),
        "wall_time_s": float(wall_time_s),
        "sim_wall_time_s": float(a["sim_wall_time_s"]),
        "base_rtt_s": cfg.base_rtt_s,
        "mss_bytes": cfg.mss_bytes,
        "sample_interval_s": dt,
        "tcp": TCP_TYPES[cfg.cc] + (" (ECN, Linux's 2-segment floor)" if cfg.cc == "dctcp"
                                    else " (no ECN)") + ", Linux's PRR",
        "aqm": str(a["aqm_desc"]),
    }
    if cfg.bottleneck_link is not None:  # netCDF attributes cannot be None
        attrs["bottleneck_link"] = cfg.bottleneck_link
    if cfg.network is not None:
        attrs["routing"] = cfg.network.routing
        attrs["unrouted_packets"] = int(a.get("unrouted", 0))
    if cfg.pcap_path is not None:
        attrs["pcap"] = str(cfg.pcap_path)
    if cfg.block_bytes > 0:
        done = a["block_done"]  # (flows, rounds): inf where not within the run
        variables["completion_time"] = done[:, -1]
        if cfg.rounds > 1:
            variables["block_done"] = done
            coords["round"] = np.arange(cfg.rounds)
        # with rounds, the first one starts once every connection is up (simulation.cc)
        coords["start"] = (np.full(cfg.flows, float(a["rounds_start"])) if cfg.rounds > 1
                           else np.array(cfg.start_times_s or (0.0,) * cfg.flows))
        coords["size"] = np.full(cfg.flows, cfg.block_bytes * cfg.packet_bytes / cfg.mss_bytes)
    comments = {name: comment for name, (_, _, comment) in _VARIABLES.items() if name in variables}
    comments["utilization"] = "link_departure / capacity (IP bytes, without the PPP header)"
    return build_dataset(variables, coords, attrs, comments=comments)
