"""Plots of results and sweeps.

The functions build matplotlib `Figure` objects without pyplot, so they neither need a screen nor
change the backend of a notebook; they return the figure (a notebook shows it) and write it to
`path` when one is given.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr
from matplotlib.figure import Figure

from pathflow.metrics import hotspots
from pathflow.verdict import state_names

__all__ = ["plot_run", "plot_sweep"]

# pathflow.verdict's states on a sweep's throughput panel
STATE_MARKERS = {"settled": "o", "oscillating": "s", "lossy": "X", "collapsed": "v",
                 "unsettled": "D"}


def _finish(fig: Figure, path: str | Path | None) -> Figure:
    fig.tight_layout()
    if path is not None:
        fig.savefig(Path(path), dpi=120)
    return fig


def plot_run(ds: xr.Dataset, path: str | Path | None = None, links: int = 3, flows: int = 8
             ) -> Figure:
    """Queues of the busiest links (packets) and delivered rates of the first flows (Mb/s)."""
    packet = float(ds.attrs.get("packet_bytes", 1500))
    fig = Figure(figsize=(9, 6))
    top, bottom = fig.subplots(2, 1, sharex=True)
    for name in hotspots(ds, top=links).link.values:
        top.plot(ds.time * 1e3, ds.queue.sel(link=name) / packet, lw=0.8, label=str(name))
    top.set_ylabel("queue (packets)")
    top.legend(loc="upper right", fontsize=8)
    # A packet-level rate per sample is 0 or a whole packet: average over 10 round trips, as
    # the convergence metric does, so that a rate is visible at all.
    interval = float(ds.time[1] - ds.time[0]) if ds.time.size > 1 else 1.0
    width = max(1, round(10 * float(ds.rtt.mean()) / interval)) if "rtt" in ds else 1
    rates = ds.flow_rate.rolling(time=width, min_periods=1).mean()
    for flow in ds.flow.values[:flows]:
        bottom.plot(ds.time * 1e3, rates.sel(flow=flow) * 8e-6, lw=0.8,
                    label=f"{ds.src.values[flow]}->{ds.dst.values[flow]}")
    bottom.set_ylabel("delivered rate (Mb/s)" if width == 1 else
                      f"delivered rate (Mb/s),\nmean over {width * interval * 1e3:.3g} ms")
    bottom.set_xlabel("time (ms)")
    if ds.flow.size <= flows:
        bottom.legend(loc="upper right", fontsize=8)
    fig.suptitle(str(ds.attrs.get("scenario_name", "")))
    return _finish(fig, path)


def plot_sweep(ds: xr.Dataset, path: str | Path | None = None) -> Figure:
    """Against the number of flows, one colour per congestion control of a `cc` dimension:
    the bottleneck queue (p99 and max; the buffer where the queue comes within a factor of five
    of it, and seed 001's standing-queue size), its queueing latency (mean and p99), the
    throughput with each point's state as its marker (`STATE_MARKERS`), and the time from which
    the queue stays below the standing-queue size (x: not converged by that criterion) beside
    the time the run settled. A scenario with barrier-synchronised rounds adds a row: the
    goodput of the completed rounds (the incast experiment's goodput against servers, one flow
    each) and how many rounds completed. With predictions (`sweep --analyze`), dashed: the
    rest state's queue and the linear settling time beside the simulated ones."""
    packet = float(ds.attrs.get("packet_bytes", 1500))
    standing = float(ds.attrs.get("standing_queue", np.nan))
    # NaN rounds: the scenario has none (0: rounds, none completed)
    rounds = "rounds_completed" in ds and bool(ds.rounds_completed.notnull().any())
    fig = Figure(figsize=(11, 10.5 if rounds else 7.5))
    axes = fig.subplots(3 if rounds else 2, 2, sharex=True)
    (queue, latency), (rate, convergence) = axes[:2]
    points = [(str(cc), ds.sel(cc=cc)) for cc in ds.cc.values] if "cc" in ds.dims else [("", ds)]
    top = float(ds.time[-1]) * 1e3
    marked: set[str] = set()  # states shown
    for (label, one), colour in zip(points, [f"C{i}" for i in range(10)], strict=False):
        flows = one.flows.values
        own = f"{label}: " if label else ""
        for name, style in (("queue_p99", "-o"), ("queue_max", ":^")):
            queue.plot(flows, one[name] / 1e3, style, ms=3, color=colour,
                       label=own + name.replace("queue_", ""))
        for name, style in (("latency_mean", "-o"), ("latency_p99", "--s")):
            latency.plot(flows, one[name] * 1e6, style, ms=3, color=colour,
                         label=own + name.replace("latency_", ""))
        gbps = one.aggregate_throughput.values * 8e-9
        rate.plot(flows, gbps, "-", color=colour, label=label or "throughput")
        states = state_names(one.state)
        for state, marker in STATE_MARKERS.items():
            chosen = states == state
            if chosen.any():
                rate.plot(flows[chosen], gbps[chosen], marker, ms=5, color=colour, mfc="none")
                marked.add(state)
        below = one.below_standing.values
        convergence.plot(flows, np.where(np.isfinite(below), below * 1e3, np.nan), "-o", ms=3,
                         color=colour, label=f"{own}queue below {standing / 1e3:g} KB")
        settled = one.convergence_time.values
        convergence.plot(flows, np.where(np.isfinite(settled), settled * 1e3, np.nan), ":",
                         color=colour, label=f"{own}settled")
        if "predicted_queue" in one:  # `sweep --analyze`: the model's own prediction
            queue.plot(flows, one.predicted_queue / 1e3, "--", lw=1.2, color=colour,
                       label=f"{own}rest state (predicted)")
            settle = one.predicted_settling_time.values
            convergence.plot(flows, np.where(np.isfinite(settle), settle * 1e3, np.nan), "--d",
                             ms=3, color=colour, label=f"{own}settling (predicted, linear)")
        stuck = ~np.isfinite(below)
        if stuck.any():
            convergence.plot(flows[stuck], np.full(stuck.sum(), top), "x", color=colour,
                             label=f"{own}not converged")
        if rounds:
            axes[2][0].plot(flows, one.round_goodput.values * 8e-9, "-o", ms=3, color=colour,
                            label=label or "goodput")
            axes[2][1].plot(flows, one.rounds_completed.values, "-o", ms=3, color=colour,
                            label=label or "rounds completed")
    for state in (s for s in STATE_MARKERS if s in marked):  # the legend's key, in grey
        rate.plot([], [], STATE_MARKERS[state], color="grey", mfc="none", label=state)
    buffer = float(ds.buffer.max())
    if float(ds.queue_max.max()) > 0.2 * buffer:
        queue.axhline(buffer / 1e3, color="grey", lw=0.8, ls="--", label="buffer")
    if np.isfinite(standing):
        queue.axhline(standing / 1e3, color="black", lw=0.8, ls="-.",
                      label=f"{standing / 1e3:g} KB (seed 001 criterion)")
    queue.set_ylabel("bottleneck queue (KB)")
    secondary = queue.secondary_yaxis("right", functions=(lambda kb: kb * 1e3 / packet,
                                                          lambda p: p * packet / 1e3))
    secondary.set_ylabel("packets")
    latency.set_ylabel("queueing latency (us)")
    rate.plot(ds.flows.values, np.full(ds.flows.size, float(ds.capacity.max()) * 8e-9), "--",
              color="grey", lw=0.8, label="fastest link")
    rate.set_ylabel("throughput (Gb/s)")
    rate.set_ylim(bottom=0)
    convergence.set_ylabel("time (ms)")
    if rounds:
        goodput, completed = axes[2]
        goodput.plot(ds.flows.values, np.full(ds.flows.size, float(ds.capacity.max()) * 8e-9),
                     "--", color="grey", lw=0.8, label="fastest link")
        goodput.set_ylabel("goodput of the rounds (Gb/s)")
        goodput.set_ylim(bottom=0)
        completed.set_ylabel("rounds completed")
        completed.set_ylim(bottom=0)
    for one in axes.flat:
        one.legend(fontsize=7)
    for one in axes[-1]:
        one.set_xlabel("flows (incast: servers)" if rounds else "flows")
    fig.suptitle(f"{ds.attrs.get('scenario_name', 'sweep')}: queue, latency, throughput"
                 + (", convergence and goodput" if rounds else " and convergence") + " vs flows")
    return _finish(fig, path)
