"""The fluid engine's solver arrays as an xarray Dataset, named and labelled by
`pathflow.schema` (DESIGN §6).

Dimensions: `time` (s, end of each sample interval), `link` (directed links, named "a->b"),
`flow` (connections), `subflow` (the senders that own congestion state; for TCP one per flow;
`subflow_flow` says whose). Per-flow rates and bytes are sums over the flow's subflows.
The scenario (TOML), pathflow version, dt and the invariant report live in `attrs`. The other
engines and the trace loaders fill the same schema, so one function compares them.
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
from pathflow.schema import RESULT, Field, build_dataset
from pathflow.solvers.dde import Trajectory
from pathflow.topology import Network

__all__ = ["IN_PACKETS", "network_coords", "path_usage", "reported_unit", "trajectory_to_dataset",
           "write_dataset"]



# state that the models keep in packets and results report in bytes: windows, and the data
# DCQCN has sent since its last rate cut
IN_PACKETS = frozenset({"cwnd", "ssthresh", "sent_since_cut"})


def _version() -> str:
    from pathflow import __version__

    return __version__


def network_coords(network: Network, routes: Routes) -> dict[str, Any]:
    """The values of the `link` and `flow` coordinates that every pathflow engine's Dataset
    carries (labelled by `schema.build_dataset`)."""
    links, flows = network.links, routes.flows
    return {
        "link": [link.name for link in links],
        "link_src": [link.src for link in links],
        "link_dst": [link.dst for link in links],
        "link_tier": [link.tier for link in links],
        "capacity": np.array([link.capacity for link in links]),
        "buffer": np.array([link.buffer for link in links]),
        "delay": np.array([link.delay for link in links]),
        "flow": np.arange(len(flows)),
        "src": [f.src for f in flows],
        "dst": [f.dst for f in flows],
        "start": np.array([f.start for f in flows]),
        "size": np.array([f.size for f in flows]),
        "group": np.array([f.group for f in flows]),
        "paths": np.bincount(np.asarray(routes.path_flow), minlength=len(flows)),
        "equal_cost_paths": np.asarray(routes.equal_cost),
    }


def path_usage(network: Network, routes: Routes, route_bytes: np.ndarray
               ) -> tuple[dict[str, Any], np.ndarray]:
    """Bytes per network path of each flow, the seed 002 study's accounting: `route_bytes[p]` is
    what route path p (`Routes.paths`) carried; a flow's route paths that cross the same links
    (subflows hashed onto one path) add up into one slot, slots in order of first use. Returns
    the `path` and `path_links` (flow, path: link names joined by " > ", "" for an unused slot)
    coordinates and `path_bytes` (flow, path)."""
    per_flow: list[dict[tuple[int, ...], float]] = [{} for _ in routes.flows]
    for links, flow, carried in zip(routes.paths, routes.path_flow, route_bytes, strict=True):
        per_flow[flow][links] = per_flow[flow].get(links, 0.0) + float(carried)
    slots = max(len(used) for used in per_flow)
    names = np.full((len(per_flow), slots), "", dtype=object)
    carried = np.zeros((len(per_flow), slots))
    for f, used in enumerate(per_flow):
        for k, (links, value) in enumerate(used.items()):
            names[f, k] = " > ".join(network.links[i].name for i in links)
            carried[f, k] = value
    return {"path": np.arange(slots), "path_links": names}, carried


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
        """Per subflow: its controller's (exchangeable flows run once: `compile`)."""
        return np.asarray(array)[:, compiled.controller_of]

    one_each = np.array_equal(flow_of, np.arange(n_flows))  # no flow with several subflows

    def fl(array: np.ndarray) -> np.ndarray:
        """Per flow: the sum over its subflows."""
        if one_each:
            return sub(array).astype(float)
        total = np.zeros((array.shape[0], n_flows), dtype=float)
        np.add.at(total.T, flow_of, sub(array).T)
        return total

    t = trajectory
    variables: dict[str, Any] = {
        "queue": lk(t.queue),
        "queue_max": lk(t.queue_max),
        "queue_min": lk(t.queue_min),
        "link_arrival": lk(t.arrival),
        "link_departure": lk(t.departure),
        "utilization": lk(t.departure) / capacity,
        "drops": lk(t.drop),
        "marks": lk(t.mark),
        "marking": np.divide(lk(t.mark), lk(t.arrival), out=np.zeros_like(lk(t.mark)),
                             where=lk(t.arrival) > 0),
        "flow_rate": fl(t.flow_rate),
        "send_rate": fl(t.send_rate),
        "delivered": fl(t.delivered),
        "completion_time": _per_flow_first(sub(t.completion)[-1], flow_of, n_flows),
        "subflow_rate": sub(t.flow_rate),
        "rtt": sub(t.rtt),
        "dt": np.asarray(t.dt, dtype=float),
    }
    if compiled.physics.rounds > 1:
        first = np.unique(flow_of, return_index=True)[1]  # each flow's first subflow
        block = np.asarray(t.block_done[-1])[compiled.controller_of][first]
        rounds = np.asarray(compiled.problem.rounds)[compiled.controller_of][first]
        beyond = np.arange(block.shape[1])[None, :] >= rounds[:, None]
        variables["block_done"] = np.where(beyond, np.nan, block)
    if compiled.physics.timeouts:  # a stalled subflow's timer has not fired yet
        stall = sub(t.stall)
        variables.update(stall=stall, timeouts=sub(t.timeouts) - (stall > 0),
                         resent=sub(t.resent))
    if compiled.physics.pfc:
        variables["pause"] = lk(t.pause)
    # windows and rates in the model's packets -> bytes; a rate-based sender has no window
    variables["cwnd"] = np.full_like(sub(t.rtt), np.nan)
    per_packet = {name for name, unit in compiled.model.state_units.items()
                  if unit == "packets/s"} | IN_PACKETS
    variables.update({name: sub(values) * (mss if name in per_packet else 1.0)
                      for name, values in t.state.items()})
    owners = compiled.model.state_owners(compiled.problem.params)
    for name, owned in owners.items():  # a mixture's variables of some subflows only
        variables[name] = np.where(np.asarray(owned)[compiled.controller_of], variables[name],
                                   np.nan)
    # delivered bytes split over each subflow's paths by their weights (spraying's exact split)
    route_bytes = sub(t.delivered)[-1][routes.path_subflow] * np.asarray(routes.path_weight)
    path_coords, variables["path_bytes"] = path_usage(network, routes, route_bytes)
    coords = {
        "time": time,
        **network_coords(network, routes),
        **path_coords,
        "cc": [compiled.scenario.si.groups[flow.group].transport.cc for flow in routes.flows],
        "subflow": np.arange(n_subflows),
        "subflow_flow": flow_of,
    }
    if compiled.physics.rounds > 1:
        coords["round"] = np.arange(compiled.physics.rounds)
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
    return build_dataset(variables, coords, attrs, extra=_new_state(compiled.model.state_units,
                                                                    t.state))


def reported_unit(unit: str) -> str:
    """The unit a model's state variable has in results: rates in the model's packets/s are
    reported in bytes/s (and windows in bytes: `cwnd`); other units as the model has them."""
    return "bytes/s" if unit == "packets/s" else unit



def _new_state(units: dict[str, str], state: dict[str, Any]) -> dict[str, Field]:
    """Declarations for controller state the schema does not know (a newly added model's):
    a model needs no schema entry of its own. Known state must keep its declared unit."""
    extra = {}
    for name in state:
        unit = reported_unit(units.get(name, "1"))
        declared = RESULT.variables.get(name)
        if declared is None:
            extra[name] = Field(("time", "subflow"), unit, f"controller state {name!r}")
        elif name not in IN_PACKETS and declared.units != unit:
            raise ValueError(f"model state {name!r} in {unit!r}, pathflow.schema declares "
                             f"{declared.units!r}")
    return extra


def _per_flow_first(values: np.ndarray, flow_of: np.ndarray, n_flows: int) -> np.ndarray:
    """A per-subflow value that every subflow of a flow shares, per flow."""
    out = np.full(n_flows, np.nan)
    out[flow_of[::-1]] = values[: len(flow_of)][::-1]  # the first subflow's, where several
    return out


def write_dataset(dataset: xr.Dataset, path: str | Path) -> None:
    """Write a result as netCDF (h5netcdf), whole or not at all (`pathflow.atomic`); dict- or
    list-valued attrs are stored as JSON text (netCDF attributes hold only text and numbers)."""
    out = dataset.copy()
    out.attrs = {key: json.dumps(value) if isinstance(value, dict | list) else value
                 for key, value in dataset.attrs.items()}
    write_atomically(path, lambda temporary: out.to_netcdf(temporary, engine="h5netcdf"))
