"""Plots of results and sweeps (matplotlib, written to files; no screen needed)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import xarray as xr  # noqa: E402

from pathflow.metrics import hotspots  # noqa: E402

__all__ = ["plot_run", "plot_sweep"]


def plot_run(ds: xr.Dataset, path: str | Path, links: int = 3, flows: int = 8) -> Path:
    """Queues of the busiest links (packets) and delivered rates of the first flows (Mb/s)."""
    packet = float(ds.attrs.get("packet_bytes", 1500))
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    for name in hotspots(ds, top=links).link.values:
        top.plot(ds.time * 1e3, ds.queue.sel(link=name) / packet, lw=0.8, label=str(name))
    top.set_ylabel("queue (packets)")
    top.legend(loc="upper right", fontsize=8)
    for flow in ds.flow.values[:flows]:
        bottom.plot(ds.time * 1e3, ds.flow_rate.sel(flow=flow) * 8e-6, lw=0.8,
                    label=f"{ds.src.values[flow]}->{ds.dst.values[flow]}")
    bottom.set_ylabel("delivered rate (Mb/s)")
    bottom.set_xlabel("time (ms)")
    if ds.flow.size <= flows:
        bottom.legend(loc="upper right", fontsize=8)
    fig.suptitle(str(ds.attrs.get("scenario_name", "")))
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def plot_sweep(ds: xr.Dataset, path: str | Path) -> Path:
    """Bottleneck queue (mean, p99, max) and convergence time against the number of flows."""
    packet = float(ds.attrs.get("packet_bytes", 1500))
    flows = ds.flows.values
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for name, style in (("queue_mean", "-o"), ("queue_p99", "--s"), ("queue_max", ":^")):
        left.plot(flows, ds[name] / 1e3, style, ms=3, label=name.replace("queue_", ""))
    buffer = float(ds.buffer.max())
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
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
