"""What the case modules share: the shipped scenarios, steady windows and the queue figure."""

from __future__ import annotations

from importlib import resources

import numpy as np
import xarray as xr
from matplotlib.figure import Figure

from pathflow import Scenario
from pathflow.compile import compile_scenario

__all__ = ["PACKET", "SETTLING_SMOOTHING", "STAR_LINK", "compared_port", "queue_figure",
           "share_error", "shipped", "steady_window"]

PACKET = 1500.0  # bytes: the packet size of every case's scenarios
STAR_LINK = "s0->r0"  # the bottleneck of the star scenarios
# s: DCQCN's settling times are read over this smoothing, longer than cx4's limit cycle
# (`dcqcn.dcqcn_fluid_packet`), so that a steady cycle counts as settled
SETTLING_SMOOTHING = 2e-3


def shipped(name: str, **updates: object) -> Scenario:
    """A scenario shipped in `pathflow/scenarios/` (the `examples/` of a checkout), so that the
    cases run from an installed package, with `updates` ({"run.duration": "3s"})."""
    text = resources.files("pathflow").joinpath("scenarios", name).read_text()
    return Scenario.from_toml(text).with_updates(dict(updates))


def steady_window(ds: xr.Dataset, warmup: float, link: str = STAR_LINK) -> xr.Dataset:
    return ds.sel(time=ds.time > warmup, link=link)


def compared_port(ranked: xr.Dataset, scenario: Scenario) -> str:
    """The port where the engines are compared: the one offered the most flows (from the routes:
    where ECMP collides, a star's bottleneck), ties going to the reference's hotspot ranking
    `ranked` (`metrics.hotspots`). Not simply the reference's top hotspot: a port that one flow
    fills and other flows' ACKs overload by a fraction of a percent queues or not depending on
    the hosts' timing (the packet reference's host jitter; case `ack_port_fluid_packet`)."""
    compiled = compile_scenario(scenario)
    offered = compiled.routes.flows_per_link(compiled.network)
    return max(map(str, ranked.link.values), key=offered.__getitem__)


def share_error(rates: np.ndarray, reference: np.ndarray) -> float:
    """How differently two runs divide their aggregate among the same flows: the mean absolute
    difference of the flows' shares, relative to the mean share (0: the same division)."""
    shares, truth = rates / rates.sum(), reference / reference.sum()
    return float(np.mean(np.abs(shares - truth)) / np.mean(truth))


def queue_figure(series: dict[str, xr.DataArray], title: str, window: float | None = None
                 ) -> Figure:
    """Queues (packets) over time; with `window`, each series from its own start for that long."""
    fig = Figure(figsize=(8, 3.2))
    ax = fig.subplots()
    for label, queue in series.items():
        time = queue.time.values - float(queue.time[0]) if window else queue.time.values
        mask = time <= window if window else slice(None)
        ax.plot(time[mask], queue.values[mask], lw=0.9, label=label)
    ax.set_xlabel("time (s)" if not window else "time from the window's start (s)")
    ax.set_ylabel("queue (packets)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
