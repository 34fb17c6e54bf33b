"""The result vocabulary, declared once: every Dataset variable and coordinate with its
dimensions, unit and long name, a builder that labels arrays from it, and a check against it.

Every producer of results fills this one definition: the fluid engine (`pathflow.results`), the
packet-level engine (`validation/packet/dataset.py`), the ns-3 runner (`validation/ns3/dataset.py`)
and the trace loaders (`validation/traces/`); sweeps (`pathflow.sweep`) have their own table,
`SWEEP`, because a sweep point's `queue_max` or `drops` is one number, not a time series. So
`pathflow.metrics` and the comparisons between engines read one set of names.

A name is declared with the dimensions of one run. Datasets that hold several runs (a sweep's
points, the Mininet study's test records) put *stacking* dimensions in front of the declared
ones: `queue` is (time, link) in a run, (flows, time, link) in a sweep and (cc, flows, time, link)
in a sweep of several congestion controls; a per-run scalar such as the Mininet `router` is
declared with no dimensions and stacks to (record,).

Units are SI (bytes, s, bytes/s, "1" for fractions and counts), except the few counts of
packets that engines keep as such (`lost`, the fluid model's `credit`). Labels (link and host
names, protocol names) carry no unit. Where an engine measures a quantity in its own way (ns-3's
`flow_rate` is goodput, a capture's counts IP bytes), the producer says so in a `comment`
attribute; the long name stays the declared one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr

__all__ = ["ENGINE_REQUIRED", "RESULT", "SWEEP", "Field", "Schema", "SchemaError",
           "build_dataset", "check_dataset", "schema_problems"]


class SchemaError(ValueError):
    """A Dataset, or arrays on their way into one, that do not follow the declared schema."""


@dataclass(frozen=True)
class Field:
    """One declared variable or coordinate."""

    dims: tuple[str, ...]  # for one run; a stacking dimension may precede them
    units: str | None  # None: a label (text or flag), which has no unit
    long_name: str


@dataclass(frozen=True)
class Schema:
    """One kind of result Dataset: its dimensions, coordinates and variables."""

    dimensions: Mapping[str, str]  # name -> meaning
    coordinates: Mapping[str, Field]
    variables: Mapping[str, Field]
    stacking: tuple[str, ...] = ()  # dimensions that put several runs in one Dataset
    # any other dimension with a coordinate of its own may stack runs too (a sweep's axes,
    # `pathflow.axes`), described by that coordinate and by `<dimension>_label`
    open_stacking: bool = False

    def stacks(self, dim: str, ds: xr.Dataset | None = None) -> bool:
        """Whether `dim` may stack runs (in `ds`, when given: an open dimension must have its
        coordinate there)."""
        return dim in self.stacking or (self.open_stacking and dim not in self.dimensions
                                         and (ds is None or dim in ds.coords))


_LINK = ("link",)
_FLOW = ("flow",)
_SUBFLOW = ("subflow",)
_PER_LINK = ("time", "link")
_PER_FLOW = ("time", "flow")
_PER_SUBFLOW = ("time", "subflow")
_PER_RUN: tuple[str, ...] = ()  # one value per run: stacks to (record,) or (flows,)

_DIMENSIONS = {
    "time": "sample instants, each the end of its sample interval",
    "link": "directed links (switch egress ports and host NICs), named 'from->to'",
    "flow": "flows (connections)",
    "subflow": "senders that own congestion state (one per TCP flow); subflow_flow says whose",
    "path": "slots for the network paths that carried a flow's bytes",
    "round": "rounds of barrier-synchronised traffic ([traffic] rounds)",
    "record": "measured test configurations, each a run of its own (stacks runs)",
}

_COORDINATES = {
    "time": Field(("time",), "s", "end of the sample interval (rates are means over it)"),
    # links
    "link": Field(_LINK, None, "directed link (egress port) 'from->to'"),
    "link_src": Field(_LINK, None, "node the link leaves"),
    "link_dst": Field(_LINK, None, "node the link enters"),
    "link_tier": Field(_LINK, None, "tier of the link (access, bottleneck, edge, ...)"),
    "capacity": Field(_LINK, "bytes/s", "link rate"),
    "buffer": Field(_LINK, "bytes", "egress buffer"),
    "delay": Field(_LINK, "s", "one-way propagation delay"),
    # flows
    "flow": Field(_FLOW, "1", "flow index"),
    "src": Field(_FLOW, None, "sending host"),
    "dst": Field(_FLOW, None, "receiving host"),
    "start": Field(_FLOW, "s", "time the flow starts"),
    "size": Field(_FLOW, "bytes", "bytes the flow transfers (inf: long-lived)"),
    "paths": Field(_FLOW, "1", "paths the flow sends on"),
    "equal_cost_paths": Field(_FLOW, "1", "equal-cost shortest paths between the flow's hosts "
                                          "(used or not)"),
    "cc": Field(_FLOW, None, "congestion control"),
    "group": Field(_FLOW, "1", "traffic group of the flow ([[traffic.groups]] index; 0 without "
                               "groups)"),
    "ip_protocol": Field(_FLOW, None, "IP protocol of the flow's packets (tcp, udp)"),
    # subflows
    "subflow": Field(_SUBFLOW, "1", "subflow index"),
    "subflow_flow": Field(_SUBFLOW, "1", "flow the subflow belongs to"),
    # measured records (the Mininet MPTCP fat-tree study): the test configuration of a record
    "record": Field(("record",), "1", "the study's id of the test record"),
    "router": Field(_PER_RUN, None, "routing of the test (static, ecmp, ps: packet spraying)"),
    "proto": Field(_PER_RUN, None, "transport of the test's transfers (tcp, mptcp)"),
    "pmanager": Field(_PER_RUN, None, "MPTCP path manager of the test"),
    "diffports": Field(_PER_RUN, "1", "the study's diffports setting of the test"),
    "juggler": Field(_PER_RUN, None, "the study's juggler setting of the test (Juggler: "
                                     "reordering-resilient receive offload)"),
    "payloadsize": Field(_PER_RUN, None, "transfer size class of the test (query, long, ...)"),
    "run": Field(_FLOW, "1", "run of the test the transfer belongs to"),
    "path": Field(("path",), "1", "path slot"),
    "round": Field(("round",), "1", "round index"),
    "path_links": Field(("flow", "path"), None, "links along the path, joined by ' > ' (measured "
                                                "records: link ids; engines: link names; '': "
                                                "unused slot)"),
}

_VARIABLES = {
    # links
    "queue": Field(_PER_LINK, "bytes", "egress queue (instantaneous)"),
    "queue_max": Field(_PER_LINK, "bytes", "largest queue within the sample interval"),
    "queue_min": Field(_PER_LINK, "bytes", "smallest queue within the sample interval"),
    "link_arrival": Field(_PER_LINK, "bytes/s", "bytes arriving at the port per second"),
    "link_departure": Field(_PER_LINK, "bytes/s", "bytes leaving the port per second"),
    "utilization": Field(_PER_LINK, "1", "departures as a fraction of the link rate"),
    "drops": Field(_PER_LINK, "bytes/s", "bytes dropped at the port per second"),
    "marks": Field(_PER_LINK, "bytes/s", "bytes ECN-marked at the port per second"),
    "marking": Field(_PER_LINK, "1", "fraction of arriving bytes ECN-marked"),
    "pause": Field(_PER_LINK, "1", "fraction of the sample interval the link's transmitter was "
                                   "paused by priority flow control (with [aqm] pfc = true)"),
    # flows
    "flow_rate": Field(_PER_FLOW, "bytes/s", "rate delivered to the receiver"),
    "send_rate": Field(_PER_FLOW, "bytes/s", "rate the flow sends"),
    "payload_rate": Field(_PER_FLOW, "bytes/s", "TCP/UDP payload bytes per second "
                                                "(retransmissions included)"),
    "delivered": Field(_PER_FLOW, "bytes", "bytes delivered so far"),
    "completion_time": Field(_FLOW, "s", "time the last byte arrived (inf: never)"),
    "block_done": Field(("flow", "round"), "s", "time the flow's block of the round had "
                                                "arrived (inf: not within the run; NaN: beyond "
                                                "its rounds)"),
    # subflows: what a sender measures and its congestion state
    "subflow_rate": Field(_PER_SUBFLOW, "bytes/s", "rate delivered to the receiver"),
    "rtt": Field(_PER_SUBFLOW, "s", "round-trip time"),
    "cwnd": Field(_PER_SUBFLOW, "bytes", "congestion window (NaN: a rate-based sender)"),
    "ssthresh": Field(_PER_SUBFLOW, "bytes", "slow-start threshold"),
    "slow_start": Field(_PER_SUBFLOW, "1", "1 in slow start, else 0"),
    "alpha": Field(_PER_SUBFLOW, "1", "estimate of the fraction of marked packets (DCTCP) or "
                                      "of congestion (DCQCN)"),
    "current_rate": Field(_PER_SUBFLOW, "bytes/s", "rate a rate-based sender sends at (DCQCN's "
                                                   "R_C)"),
    "target_rate": Field(_PER_SUBFLOW, "bytes/s", "rate a rate-based sender recovers towards "
                                                  "(DCQCN's R_T)"),
    "stage": Field(_PER_SUBFLOW, "1", "rate-increase timer expiries since the last rate cut "
                                      "(DCQCN+; the mean field's mean, the flow's own with "
                                      "cuts = events)"),
    "since_cut": Field(_PER_SUBFLOW, "s", "time since the last rate cut (DCQCN; the mean "
                                          "field's mean, which paces its hyper increase, or "
                                          "the flow's own with cuts = events)"),
    "sent_since_cut": Field(_PER_SUBFLOW, "bytes", "data sent since the last rate cut (DCQCN; "
                                                   "the mean field's mean, or the flow's own "
                                                   "with cuts = events)"),
    "cwr": Field(_PER_SUBFLOW, "s", "time left in window reduction, when signals are ignored "
                                    "(fluid per-window reaction)"),
    "credit": Field(_PER_SUBFLOW, "packets", "congestion signals accumulated towards the next "
                                             "window reduction (fluid per-window reaction)"),
    "lost": Field(_PER_SUBFLOW, "packets", "packets of the subflow dropped so far (data and its "
                                           "ACKs)"),
    "timeouts": Field(_PER_SUBFLOW, "1", "retransmission timeouts so far (timers fired)"),
    "stall": Field(_PER_SUBFLOW, "s", "time until the retransmission timer fires, the subflow "
                                      "sending nothing (0: sending; fluid)"),
    "recoveries": Field(_PER_SUBFLOW, "1", "fast recoveries so far (packet level)"),
    "resent": Field(_PER_SUBFLOW, "bytes", "data bytes sent again so far (retransmissions, "
                                           "also in send_rate; fluid: the bytes dropped)"),
    # the run
    "dt": Field(("time",), "s", "integration step (chosen from the dynamics)"),
    # measured records: one value per transfer of a test
    "goodput": Field(_FLOW, "bytes/s", "file size / FCT"),
    "throughput": Field(_FLOW, "bytes/s", "bytes seen on the network / FCT"),
    "fct": Field(_FLOW, "s", "flow completion time: first request to last FIN"),
    "mean_network_utilization": Field(_FLOW, "1", "(1/P) sum_p b_p / max_q b_q over the P "
                                                  "shortest paths of the host pair"),
    "total_bytes": Field(_FLOW, "bytes", "bytes seen on the network"),
    "shortest_path_bytes": Field(_FLOW, "bytes", "bytes seen on the shortest paths"),
    "path_bytes": Field(("flow", "path"), "bytes", "bytes carried on each path (measured: all "
                                                   "bytes seen; fluid: data delivered; packet "
                                                   "level: data sent; 0: unused slot)"),
}  # fmt: skip

RESULT = Schema(_DIMENSIONS, _COORDINATES, _VARIABLES, stacking=("record",))
"""Runs of every engine and the traces and measurements loaded for comparison with them."""

# What every engine's result has (fluid, packet level, ns-3): what metrics and comparisons need.
# Loaders of measured traces have what their files hold.
ENGINE_REQUIRED = frozenset({
    "time", "link", "flow", "src", "dst", "subflow", "subflow_flow",
    "queue", "link_departure", "drops", "marks", "flow_rate", "cwnd", "rtt",
})

_SWEEP_SUMMARIES = {
    "aggregate_throughput": Field(_PER_RUN, "bytes/s", "sum of the flows' mean delivered rates "
                                                       "after warm-up"),
    "jain": Field(_PER_RUN, "1", "Jain's fairness index of the flows' mean delivered rates"),
    "bottleneck_utilization": Field(_PER_RUN, "1", "mean utilization of the bottleneck (the "
                                                   "busiest link of the last three quarters)"),
    "queue_mean": Field(_PER_RUN, "bytes", "mean bottleneck queue after warm-up"),
    "queue_p99": Field(_PER_RUN, "bytes", "99th percentile of the bottleneck queue after "
                                          "warm-up"),
    "queue_max": Field(_PER_RUN, "bytes", "largest bottleneck queue after warm-up"),
    "latency_mean": Field(_PER_RUN, "s", "mean queueing delay at the bottleneck after warm-up "
                                         "(queue / capacity)"),
    "latency_p99": Field(_PER_RUN, "s", "99th percentile of the queueing delay at the bottleneck "
                                        "after warm-up"),
    "below_standing": Field(_PER_RUN, "s", "time from which the bottleneck queue stays at or "
                                           "below attrs['standing_queue'] bytes (seed 001's "
                                           "criterion; inf: above it after warm-up, not "
                                           "converged)"),
    "convergence_time": Field(_PER_RUN, "s", "time the run settled (inf: not before its last "
                                             "quarter; nan: not judged)"),
    "settled": Field(_PER_RUN, "1", "1 if the run settled, 0 if not (nan: not judged)"),
    "drops": Field(_PER_RUN, "bytes/s", "mean drop rate at the bottleneck over the whole run"),
    "window_mean": Field(_PER_RUN, "bytes", "mean congestion window of the last three "
                                            "quarters"),
    "paused": Field(_PER_RUN, "1", "largest fraction of the time after warm-up that PFC held a "
                                   "link's transmitter paused (0 without PFC)"),
    "state": Field(_PER_RUN, "1", "state the run ends in: 0 settled, 1 oscillating, 2 lossy, "
                                  "3 collapsed, 4 unsettled (pathflow.verdict)"),
    "queue_swing": Field(_PER_RUN, "bytes", "peak-to-peak of the bottleneck queue after warm-up "
                                            "(5th to 95th percentile)"),
    "cycle_period": Field(_PER_RUN, "s", "period of the bottleneck queue's cycle (nan unless "
                                         "oscillating)"),
    "round_goodput": Field(_PER_RUN, "bytes/s", "goodput of barrier-synchronised rounds: the "
                                                "blocks of the completed rounds over their "
                                                "summed round times, summed over traffic groups "
                                                "(pathflow.metrics.round_summary; nan: no "
                                                "rounds, or none completed)"),
    "rounds_completed": Field(_PER_RUN, "1", "barrier-synchronised rounds completed within the "
                                             "run, summed over traffic groups (nan: no rounds)"),
}  # fmt: skip

# `pathflow sweep --analyze`: each point predicted from the model alone (pathflow.analysis.predict)
_SWEEP_PREDICTIONS = {
    "predicted_queue": Field(_PER_RUN, "bytes", "largest queue of the rest state (nan: no rest "
                                                "state derived)"),
    "predicted_stable": Field(_PER_RUN, "1", "1 if the rest state is linearly stable, 0 if not "
                                             "(nan: not derived)"),
    "predicted_settling_time": Field(_PER_RUN, "s", "time a small perturbation of the rest "
                                                    "state takes to shrink to a tenth (inf: "
                                                    "unstable; nan: not derived)"),
    "predicted_period": Field(_PER_RUN, "s", "period of the rightmost characteristic root (inf: "
                                             "not oscillatory; nan: not derived)"),
}  # fmt: skip

SWEEP = Schema(
    {**{name: _DIMENSIONS[name] for name in ("time", "link")},
     "cc": "scenarios swept side by side, by congestion control (stacks runs)",
     "flows": "sweep points, by their number of flows (stacks runs)"},
    {"cc": Field(("cc",), None, "congestion control of the sweep's points"),
     "flows": Field(("flows",), "1", "flows in the sweep point"),
     **{name: spec for name, spec in _COORDINATES.items() if spec.dims in (("time",), _LINK)}},
    {**_SWEEP_SUMMARIES, **_SWEEP_PREDICTIONS,
     **{name: _VARIABLES[name] for name in ("queue", "utilization")}},
    stacking=("cc", "flows"),
    open_stacking=True,
)
"""A sweep (`pathflow.sweeps`): per-point summaries and each point's per-link series, stacked by
`flows` and in front of it by the sweep's axes (`cc` for congestion controls side by side,
`threshold` for `aqm.threshold`, ...)."""


def build_dataset(variables: Mapping[str, Any], coords: Mapping[str, Any],
                  attrs: Mapping[str, Any] | None = None, *, schema: Schema = RESULT,
                  stacked_by: str | tuple[str, ...] | None = None,
                  comments: Mapping[str, str] | None = None,
                  extra: Mapping[str, Field] | None = None) -> xr.Dataset:
    """A Dataset of `variables` and `coords`, each given by its values alone: dimensions, unit
    and long name come from `schema`. Values with one dimension more than declared are stacked
    runs, the first dimension being `stacked_by` (one of `schema.stacking`; a tuple of them for
    as many dimensions more). `comments` add a
    `comment` attribute (how this producer measures the quantity) to the names they give;
    `extra` declares variables the schema cannot know (a new model's controller state).
    Undeclared names and values of the wrong rank raise SchemaError."""
    stacked = (stacked_by,) if isinstance(stacked_by, str) else tuple(stacked_by or ())
    for dim in stacked:
        if not schema.stacks(dim):
            raise SchemaError(f"{dim!r} does not stack runs (allowed: "
                              f"{', '.join(schema.stacking) or 'none'})")
    comments = dict(comments or {})
    unknown = sorted(set(comments) - set(variables) - set(coords))
    if unknown:
        raise SchemaError(f"comments on names not given: {', '.join(unknown)}")
    declared_variables = {**schema.variables, **(extra or {})}

    def labelled(name: str, values: Any, declared: Mapping[str, Field], kind: str) -> tuple:
        if name not in declared:
            raise SchemaError(f"{kind} {name!r} is not declared in pathflow.schema")
        spec = declared[name]
        dims = spec.dims
        rank = np.ndim(values)
        if stacked and rank == len(dims) + len(stacked):
            dims = (*stacked, *dims)
        if rank != len(dims):
            raise SchemaError(f"{kind} {name!r}: {rank} dimensions, declared "
                              f"({', '.join(spec.dims)})")
        return dims, values, _attrs(spec, comments.get(name))

    return xr.Dataset(
        {name: labelled(name, values, declared_variables, "variable")
         for name, values in variables.items()},
        coords={name: labelled(name, values, schema.coordinates, "coordinate")
                for name, values in coords.items()},
        attrs=dict(attrs or {}),
    )


def _attrs(spec: Field, comment: str | None) -> dict[str, str]:
    out = {"long_name": spec.long_name}
    if spec.units is not None:
        out["units"] = spec.units
    if comment:
        out["comment"] = comment
    return out


def schema_problems(ds: xr.Dataset, schema: Schema = RESULT, *,
                    required: Iterable[str] = (), extra: Mapping[str, Field] | None = None
                    ) -> list[str]:
    """What in `ds` departs from `schema`, one line each (none: it conforms): undeclared
    dimensions and names, dimensions, units and long names other than declared, and the
    `required` names (variables or coordinates) it lacks."""
    axes = [dim for dim in map(str, ds.dims) if dim not in schema.dimensions
            and schema.stacks(dim, ds)]  # the sweep's own, described by their coordinates
    problems = [f"dimension {dim!r} is not declared" for dim in map(str, ds.dims)
                if dim not in schema.dimensions and dim not in axes]
    stacking = (*schema.stacking, *axes)
    described = {*axes, *(f"{dim}_label" for dim in stacking)}
    declared_variables = {**schema.variables, **(extra or {})}
    named = ([("coordinate", str(n), schema.coordinates.get(str(n))) for n in ds.coords
              if str(n) not in described or str(n) in schema.coordinates]
             + [("variable", str(n), declared_variables.get(str(n))) for n in ds.data_vars])
    for kind, name, spec in named:
        if spec is None:
            problems.append(f"{kind} {name!r} is not declared")
            continue
        dims = tuple(map(str, ds[name].dims))
        if _unstacked(dims, stacking, spec.dims) != spec.dims:
            problems.append(f"{kind} {name!r} has dimensions {dims}, declared {spec.dims}")
        units = ds[name].attrs.get("units")
        if units != spec.units:
            problems.append(f"{kind} {name!r} has units {units!r}, declared {spec.units!r}")
        long_name = ds[name].attrs.get("long_name")
        if long_name != spec.long_name:
            problems.append(f"{kind} {name!r} has long name {long_name!r}, declared "
                            f"{spec.long_name!r}")
    problems += [f"required {name!r} is missing" for name in sorted(required)
                 if name not in ds.variables]
    return problems


def _unstacked(dims: tuple[str, ...], stacking: tuple[str, ...], declared: tuple[str, ...]
               ) -> tuple[str, ...]:
    """`dims` without the stacking dimensions in front of the declared ones."""
    while dims != declared and dims[:1] and dims[0] in stacking:
        dims = dims[1:]
    return dims


def check_dataset(ds: xr.Dataset, schema: Schema = RESULT, *, required: Iterable[str] = (),
                  extra: Mapping[str, Field] | None = None) -> None:
    """Raise SchemaError listing every departure of `ds` from `schema` (`schema_problems`)."""
    problems = schema_problems(ds, schema, required=required, extra=extra)
    if problems:
        engine = ds.attrs.get("engine", "a Dataset")
        raise SchemaError(f"{engine} departs from pathflow.schema: " + "; ".join(problems))
