"""The simulator's samples as an xarray Dataset labelled by `pathflow.schema`, like fluid
results, so that `pathflow.metrics` and comparisons apply unchanged.

Byte counts are wire bytes of full packets (mss-sized data packets, 64-byte ACKs), as the fluid
model counts them; `flow_rate` is the rate of in-order delivery to the receiving application.

Flows are connections, subflows are senders: a flow's `delivered`, `flow_rate` and `send_rate`
sum its subflows' (MPTCP's reassembly counted without head-of-line blocking, see `receiver`),
`subflow_rate`, `cwnd`, `rtt` are per subflow, and `completion_time` is when the connection's
last segment was delivered. With `[traffic] rounds` (`rounds`), `block_done` (flow, round) is
when each flow's block of each round was delivered, the barrier's record. OLIA connections add
its loss intervals `since_loss` and `last_interval` (packets), as the fluid model's state.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import xarray as xr

from pathflow.results import network_coords, path_usage
from pathflow.schema import Field, build_dataset
from pathflow.validation.packet import layout as L
from pathflow.validation.packet.build import Built

__all__ = ["to_dataset"]

# How the packet level measures what the schema names, where it says more than the long name.
_COMMENTS = {
    "queue": "bytes waiting; the packet being transmitted not counted",
    "rtt": "mean RTT sample in the interval (else the last)",
}


def _rate(cumulative: np.ndarray, interval: float) -> np.ndarray:
    previous = np.concatenate([np.zeros_like(cumulative[:1]), cumulative[:-1]])
    return (cumulative - previous) / interval


def to_dataset(built: Built, extra_attrs: dict[str, Any]) -> xr.Dataset:
    from pathflow import __version__

    sim, network, routes, scenario = built.sim, built.network, built.routes, built.scenario
    opts = built.options
    interval = opts.sample_interval
    links, flows = network.links, routes.flows
    n_flows = len(flows)
    time = interval * np.arange(1, sim.cfg.records + 1)
    capacity = np.array([link.capacity for link in links])
    rl, rs = sim.recorder.links, sim.recorder.senders
    si = sim.senders.i
    flow_of = si[:, L.SI_FLOW]
    # per flow (connection): the sum over its senders (subflows); one sender per flow for TCP
    delivered = np.zeros((len(time), n_flows))
    np.add.at(delivered.T, flow_of, rs[:, :, L.RS_DELIVERED].T)
    sent = np.zeros_like(delivered)
    np.add.at(sent.T, flow_of, rs[:, :, L.RS_SENT].T)
    completion = np.full(n_flows, -math.inf)
    np.maximum.at(completion, flow_of, sim.receivers.f[:, L.RF_COMPLETION])
    arrival, marks = rl[:, :, L.RL_ARRIVAL], rl[:, :, L.RL_MARK]
    marking = np.divide(marks, arrival, out=np.zeros_like(marks), where=arrival > 0)
    cwnd, ssthresh = rs[:, :, L.RS_CWND], rs[:, :, L.RS_SSTHRESH]
    variables: dict[str, Any] = {
        "queue": rl[:, :, L.RL_QUEUE],
        "queue_max": rl[:, :, L.RL_QUEUE_MAX],
        "queue_min": rl[:, :, L.RL_QUEUE_MIN],
        "link_arrival": arrival,
        "link_departure": rl[:, :, L.RL_DEPARTURE],
        "utilization": rl[:, :, L.RL_DEPARTURE] / capacity,
        "drops": rl[:, :, L.RL_DROP],
        "marks": marks,
        "marking": marking,
        "flow_rate": _rate(delivered, interval),
        "send_rate": _rate(sent, interval),
        "delivered": delivered,
        "completion_time": np.where(np.isfinite(completion), completion, math.inf),
        "subflow_rate": _rate(rs[:, :, L.RS_DELIVERED], interval),
        "rtt": rs[:, :, L.RS_RTT],
        "cwnd": cwnd,
        "ssthresh": ssthresh,
        "slow_start": (cwnd < ssthresh).astype(np.float64),
        "lost": rs[:, :, L.RS_DROPPED],
    }
    rounds = np.array([flow.rounds for flow in flows])
    if rounds.max() > 1:  # barrier-synchronised reads: when each flow's block of each round
        block_done = sim.receivers.block_done.copy()  # arrived (inf: not within the run)
        once = rounds == 1  # a flow of one round: its block is the whole flow
        block_done[once, 0] = variables["completion_time"][once]
        block_done[np.arange(rounds.max()) >= rounds[:, None]] = math.nan  # beyond its rounds
        variables["block_done"] = block_done
    if scenario.si.aqm.pfc:  # as the fluid results: only where something may pause
        variables["pause"] = rl[:, :, L.RL_PAUSE]
    is_dctcp = si[:, L.SI_CC] == L.CC_DCTCP
    is_dcqcn = np.isin(si[:, L.SI_CC], (L.CC_DCQCN, L.CC_DCQCN_PLUS))  # rate-based
    if np.any(is_dctcp | is_dcqcn):
        variables["alpha"] = np.where(is_dctcp | is_dcqcn, rs[:, :, L.RS_ALPHA], np.nan)
    if np.any(is_dcqcn):  # a rate-based sender: its rates, and no window
        variables["current_rate"] = np.where(is_dcqcn, rs[:, :, L.RS_RC], np.nan)
        variables["target_rate"] = np.where(is_dcqcn, rs[:, :, L.RS_RT], np.nan)
        for name in ("cwnd", "ssthresh", "slow_start"):
            variables[name] = np.where(is_dcqcn, np.nan, variables[name])
    extra: dict[str, Field] = {}
    # loss repair (pathflow.schema): window-based senders and DCQCN's repairs alike
    variables["timeouts"] = rs[:, :, L.RS_TIMEOUTS]
    variables["recoveries"] = rs[:, :, L.RS_RECOVERIES]
    variables["resent"] = rs[:, :, L.RS_RESENT]
    is_olia = si[:, L.SI_CC] == L.CC_OLIA
    if np.any(is_olia):
        for name, column, meaning in (
                ("since_loss", L.RS_SINCE_LOSS, "OLIA: packets acknowledged since the last loss"),
                ("last_interval", L.RS_LAST_INTERVAL,
                 "OLIA: packets acknowledged between the two losses before")):
            variables[name] = np.where(is_olia, rs[:, :, column], np.nan)
            extra[name] = Field(("time", "subflow"), "packets", meaning)
    cc_names = {code: name for name, code in L.CC_CODES.items()}
    n_sub = si.shape[0]
    path_coords, variables["path_bytes"] = path_usage(network, routes, sim.senders.path_sent)
    coords = {
        "time": time,
        **network_coords(network, routes),
        **path_coords,
        "cc": [cc_names[int(si[np.argmax(flow_of == f), L.SI_CC])] for f in range(n_flows)],
        "subflow": np.arange(n_sub),
        "subflow_flow": flow_of.copy(),
    }
    if "block_done" in variables:
        coords["round"] = np.arange(rounds.max())
    attrs = {
        "engine": "pathflow packet",
        "pathflow_version": __version__,
        "scenario_name": scenario.name,
        "scenario": scenario.to_toml(),
        "dt": interval,
        "sample_interval": interval,
        "packet_bytes": scenario.packet_bytes,
        "ack_bytes": sim.cfg.ack_bytes,
        "precision": "float64",
        "seed": opts.seed,
        "min_rto": opts.min_rto,
        "delayed_ack": opts.delayed_ack,
        "delack_timeout": opts.delack_timeout,
        "sack": int(opts.sack),
        "recovery": opts.recovery if opts.sack else "newreno",
        "window_growth": {L.GROW_PER_SEGMENT: "per acknowledged segment",
                          L.GROW_PER_ACK: "once per ACK",
                          L.GROW_FRACTIONAL: "acknowledged segments / ack_ratio"}[built.growth],
        "events": int(sim.ctl[L.CTL_EVENTS]),
        "packet_hops": int(sim.ctl[L.CTL_HOPS]),
        "packets_dropped": int(sim.ctl[L.CTL_DROPS]),
        "window_cap_segments": sim.cfg.ring - 1,
        **extra_attrs,
    }
    return build_dataset(variables, coords, attrs, comments=_COMMENTS, extra=extra)
