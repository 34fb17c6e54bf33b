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

__all__ = ["plot_run", "plot_sweep"]


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
    """Bottleneck queue (mean, p99, max) and convergence time against the number of flows; the
    buffer limit is drawn when the queue comes within a factor of five of it."""
    packet = float(ds.attrs.get("packet_bytes", 1500))
    flows = ds.flows.values
    fig = Figure(figsize=(11, 4))
    left, right = fig.subplots(1, 2)
    for name, style in (("queue_mean", "-o"), ("queue_p99", "--s"), ("queue_max", ":^")):
        left.plot(flows, ds[name] / 1e3, style, ms=3, label=name.replace("queue_", ""))
    buffer = float(ds.buffer.max())
    if float(ds.queue_max.max()) > 0.2 * buffer:
        left.axhline(buffer / 1e3, color="grey", lw=0.8, ls="--", label="buffer")
    left.set_xlabel("flows")
    left.set_ylabel("bottleneck queue (KB)")
    left.legend(fontsize=8)
    secondary = left.secondary_yaxis("right", functions=(lambda kb: kb * 1e3 / packet,
                                                         lambda p: p * packet / 1e3))
    secondary.set_ylabel("packets")
    convergence = np.where(np.isfinite(ds.convergence_time), ds.convergence_time * 1e3, np.nan)
    right.plot(flows, convergence, "-o", ms=3, label="settled")
    unsettled = ~np.isfinite(ds.convergence_time.values)
    if unsettled.any():
        top = float(ds.time[-1]) * 1e3
        right.plot(flows[unsettled], np.full(unsettled.sum(), top), "x", color="red",
                   label="did not settle")
    right.set_xlabel("flows")
    right.set_ylabel("convergence time (ms)")
    right.legend(fontsize=8)
    fig.suptitle(f"{ds.attrs.get('scenario_name', 'sweep')}: queue and convergence vs flows")
    return _finish(fig, path)
