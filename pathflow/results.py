"""Simulation results as an xarray Dataset with named dimensions and units (DESIGN §6).

Dimensions: `time` (s, end of each sample interval), `link` (directed links, named "a->b"),
`flow` (connections), `subflow` (the senders that own congestion state; for TCP one per flow;
`subflow_flow` says whose). Per-flow rates and bytes are sums over the flow's subflows.
Variables carry a `units` attribute. The scenario (TOML), pathflow version, dt and the invariant
report live in `attrs`. Packet-level results (ns-3, traces) use the same names, so one function
compares them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from pathflow.atomic import write_atomically
from pathflow.compile import Compiled
from pathflow.routing import Routes
from pathflow.solvers.dde import Trajectory
from pathflow.topology import Network

__all__ = ["network_coords", "trajectory_to_dataset", "write_dataset"]



def _version() -> str:
    from pathflow import __version__

    return __version__


def network_coords(network: Network, routes: Routes) -> dict[str, tuple]:
    """The `link` and `flow` coordinates that every engine's Dataset carries."""
    links, flows = network.links, routes.flows
    return {
        "link": ("link", [link.name for link in links]),
        "link_src": ("link", [link.src for link in links]),
        "link_dst": ("link", [link.dst for link in links]),
        "link_tier": ("link", [link.tier for link in links]),
        "capacity": ("link", np.array([link.capacity for link in links]), {"units": "bytes/s"}),
        "buffer": ("link", np.array([link.buffer for link in links]), {"units": "bytes"}),
        "delay": ("link", np.array([link.delay for link in links]), {"units": "s"}),
        "flow": ("flow", np.arange(len(flows))),
        "src": ("flow", [f.src for f in flows]),
        "dst": ("flow", [f.dst for f in flows]),
        "start": ("flow", np.array([f.start for f in flows]), {"units": "s"}),
        "size": ("flow", np.array([f.size for f in flows]), {"units": "bytes"}),
        "paths": ("flow", np.bincount(np.asarray(routes.path_flow), minlength=len(flows))),
        "equal_cost_paths": ("flow", np.asarray(routes.equal_cost)),
    }


def trajectory_to_dataset(compiled: Compiled, trajectory: Trajectory) -> xr.Dataset:
    """Name and label the solver's arrays (padding removed)."""
    network, routes = compiled.network, compiled.routes
    n_links, n_flows = len(network.links), len(routes.flows)
    flow_of = np.asarray(routes.subflow_flow)
    n_subflows = len(flow_of)
    interval = compiled.sample_interval
    time = interval * np.arange(1, compiled.grid.records + 1)
    links = network.links
    capacity = np.array([link.capacity for link in links])
    mss = compiled.scenario.packet_bytes

    def lk(array: np.ndarray) -> np.ndarray:
        return np.asarray(array)[:, :n_links]

    def sub(array: np.ndarray) -> np.ndarray:
        return np.asarray(array)[:, :n_subflows]

    def fl(array: np.ndarray) -> np.ndarray:
        """Per flow: the sum over its subflows."""
        total = np.zeros((array.shape[0], n_flows), dtype=float)
        np.add.at(total.T, flow_of, sub(array).T)
        return total

    t = trajectory
    variables: dict[str, Any] = {
        "queue": (("time", "link"), lk(t.queue), {"units": "bytes",
                                                  "long_name": "egress queue (instantaneous)"}),
        "queue_max": (("time", "link"), lk(t.queue_max),
                      {"units": "bytes", "long_name": "largest queue within the sample interval"}),
        "queue_min": (("time", "link"), lk(t.queue_min),
                      {"units": "bytes", "long_name": "smallest queue within the sample interval"}),
        "link_arrival": (("time", "link"), lk(t.arrival), {"units": "bytes/s"}),
        "link_departure": (("time", "link"), lk(t.departure), {"units": "bytes/s"}),
        "utilization": (("time", "link"), lk(t.departure) / capacity, {"units": "1"}),
        "drops": (("time", "link"), lk(t.drop), {"units": "bytes/s"}),
        "marks": (("time", "link"), lk(t.mark), {"units": "bytes/s"}),
        "marking": (("time", "link"),
                    np.divide(lk(t.mark), lk(t.arrival), out=np.zeros_like(lk(t.mark)),
                              where=lk(t.arrival) > 0),
                    {"units": "1", "long_name": "fraction of arriving bytes ECN-marked"}),
        "flow_rate": (("time", "flow"), fl(t.flow_rate),
                      {"units": "bytes/s", "long_name": "rate delivered to the receiver"}),
        "send_rate": (("time", "flow"), fl(t.send_rate), {"units": "bytes/s"}),
        "delivered": (("time", "flow"), fl(t.delivered), {"units": "bytes"}),
        "completion_time": (("flow",), _per_flow_first(np.asarray(t.completion)[-1], flow_of,
                                                       n_flows),
                            {"units": "s", "long_name": "time the last byte arrived (inf: never)"}),
        "subflow_rate": (("time", "subflow"), sub(t.flow_rate), {"units": "bytes/s"}),
        "rtt": (("time", "subflow"), sub(t.rtt), {"units": "s"}),
        "cwnd": (("time", "subflow"), sub(t.state["cwnd"]) * mss, {"units": "bytes"}),
        "dt": (("time",), np.asarray(t.dt, dtype=float),
               {"units": "s", "long_name": "integration step (chosen from the dynamics)"}),
    }
    for name, values in t.state.items():
        if name != "cwnd":
            variables[name] = (("time", "subflow"), sub(values),
                               {"units": compiled.model.state_units.get(name, "1")})
    coords = {
        "time": ("time", time, {"units": "s"}),
        **network_coords(network, routes),
        "cc": ("flow", [compiled.model.name] * n_flows),
        "subflow": ("subflow", np.arange(n_subflows)),
        "subflow_flow": ("subflow", flow_of),
    }
    attrs = {
        "engine": "pathflow fluid",
        "pathflow_version": _version(),
        "scenario_name": compiled.scenario.name,
        "scenario": compiled.scenario.to_toml(),
        "dt": compiled.dt,
        "sample_interval": interval,
        "packet_bytes": mss,
        "precision": compiled.scenario.spec.run.precision,
    }
    return xr.Dataset(variables, coords=coords, attrs=attrs)


def _per_flow_first(values: np.ndarray, flow_of: np.ndarray, n_flows: int) -> np.ndarray:
    """A per-subflow value that every subflow of a flow shares, per flow."""
    out = np.full(n_flows, np.nan)
    out[flow_of[::-1]] = values[: len(flow_of)][::-1]  # the first subflow's, where several
    return out


def write_dataset(dataset: xr.Dataset, path: str | Path) -> None:
    """Write a result as netCDF (h5netcdf), whole or not at all (`pathflow.atomic`); dict-valued
    attrs are stored as JSON text."""
    out = dataset.copy()
    out.attrs = {key: json.dumps(value) if isinstance(value, dict | list) else value
                 for key, value in dataset.attrs.items()}
    write_atomically(path, lambda temporary: out.to_netcdf(temporary, engine="h5netcdf"))
