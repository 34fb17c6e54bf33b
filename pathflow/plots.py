"""Plots of results and sweeps.

The functions build matplotlib `Figure` objects without pyplot, so they neither need a screen nor
change the backend of a notebook; they return the figure (a notebook shows it) and write it to
`path` when one is given.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.colors import BoundaryNorm, ListedColormap, to_rgb
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from pathflow.metrics import hotspots
from pathflow.verdict import STATES, state_names

__all__ = ["plot_grid", "plot_run", "plot_sweep", "plot_verdict_map"]

# pathflow.verdict's states on a sweep's throughput panel
STATE_MARKERS = {"settled": "o", "oscillating": "s", "lossy": "X", "collapsed": "v",
                 "unsettled": "D"}
# and their colours on a verdict map; a point not run (NaN) in NOT_RUN
STATE_COLOURS = {"settled": "#4daf4a", "oscillating": "#ff7f00", "lossy": "#984ea3",
                 "collapsed": "#e41a1c", "unsettled": "#377eb8"}
NOT_RUN = "#d9d9d9"
ANNOTATE_CELLS = 300  # a verdict map writes each cell's share of seeds up to this many cells


def _finish(fig: Figure, path: str | Path | None) -> Figure:
    fig.tight_layout()
    if path is not None:
        fig.savefig(Path(path), dpi=120)
    return fig


def _mark_states(axes: Axes, flows: np.ndarray, values: np.ndarray, states: np.ndarray,
                 colour: str) -> set[str]:
    """Each point's state as its marker (`STATE_MARKERS`) on a line; the states drawn."""
    drawn = set()
    for state, marker in STATE_MARKERS.items():
        chosen = states == state
        if chosen.any():
            axes.plot(flows[chosen], values[chosen], marker, ms=5, color=colour, mfc="none")
            drawn.add(state)
    return drawn


def _state_key(axes: Axes, drawn: set[str]) -> None:
    """The legend's key to the state markers drawn, in grey."""
    for state in (s for s in STATE_MARKERS if s in drawn):
        axes.plot([], [], STATE_MARKERS[state], color="grey", mfc="none", label=state)


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
    top = float(ds.attrs["duration"] if "duration" in ds.attrs else ds.time[-1]) * 1e3
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
        marked |= _mark_states(rate, flows, gbps, state_names(one.state), colour)
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
    _state_key(rate, marked)
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


def _labels(ds: xr.Dataset, dim: str) -> list[str]:
    """The text the user wrote for each value of a sweep axis (`{dim}_label`), or the values."""
    if f"{dim}_label" in ds.coords:
        return [str(text) for text in ds[f"{dim}_label"].values]
    units = ds[dim].attrs.get("units", "")
    return [f"{value:g} {units}".strip() if isinstance(value, float | np.floating) else str(value)
            for value in ds[dim].values]


def _axes(ds: xr.Dataset, name: str) -> list[str]:
    """The extra axes of `ds[name]` in the user's order, a `seed` axis moved last (it is reduced:
    seeds repeat one point, they are not a parameter)."""
    axes = [dim for dim in ds[name].dims if dim != "flows"]
    return [dim for dim in axes if dim != "seed"] + [dim for dim in axes if dim == "seed"]


def _scale(name: str, units: str | None) -> tuple[float, str]:
    """(factor, unit) to show a summary in: KB for bytes (queues), us for latency, Gb/s for
    bytes/s (throughput), ms for other times; by the `units` attr, else by the name."""
    if name.startswith("latency"):
        return 1e6, "us"
    if units in ("bytes", "B") or (units is None and name.startswith(("queue", "window"))):
        return 1e-3, "KB"
    if units in ("bytes/s", "B/s") or (units is None and name.endswith(("throughput", "goodput"))):
        return 8e-9, "Gb/s"
    if units == "s" or (units is None and name.endswith(("_time", "standing", "period"))):
        return 1e3, "ms"
    return 1.0, "" if units in (None, "1") else units


def _colours(count: int) -> list[Any]:
    """Colours of `count` lines: matplotlib's cycle, viridis beyond its ten."""
    return ([f"C{i}" for i in range(count)] if count <= 10
            else list(colormaps["viridis"](np.linspace(0, 0.95, count))))


def plot_grid(ds: xr.Dataset, path: str | Path | None = None, metric: str = "queue_p99"
              ) -> Figure:
    """`metric` against the number of flows over a sweep's grid: one line (colour) per value of
    the first extra axis, named in the legend by the text the user wrote (`{dim}_label`), and one
    subplot per value of the second. Further axes, and a `seed` axis wherever it stands, are
    reduced: the line is their mean and a shaded band their min to max (the title says over
    which); an axis of one value is not a reduction. Without reduction each point carries its
    state's marker (`STATE_MARKERS`). Non-finite values (inf: not converged) are left out. The
    y axis is in KB (queues, bytes), us (latency), Gb/s (throughput, bytes/s) or ms (other
    times), as its label says."""
    data = ds[metric].transpose(..., "flows")
    factor, unit = _scale(metric, data.attrs.get("units"))
    data = data.where(np.isfinite(data)) * factor
    axes = _axes(ds, metric)
    swept = [dim for dim in axes if dim != "seed"]
    line = swept[0] if swept else None
    facet = swept[1] if len(swept) > 1 else None
    reduced = [dim for dim in axes if dim not in (line, facet) and data.sizes[dim] > 1]
    single = {dim: 0 for dim in axes if dim not in (line, facet, *reduced)}
    data = data.isel(single)
    states = ds.state.transpose(..., "flows").isel(single) if "state" in ds else None
    columns = ds.sizes[facet] if facet else 1
    fig = Figure(figsize=(min(4.5 * columns + 1, 24), 4.5))
    panels = fig.subplots(1, columns, sharey=True, squeeze=False)[0]
    lines = _labels(ds, line) if line else [""]
    flows = ds.flows.values
    marked: set[str] = set()
    for j, panel in enumerate(panels):
        for i, (label, colour) in enumerate(zip(lines, _colours(len(lines)), strict=True)):
            at = {**({line: i} if line else {}), **({facet: j} if facet else {})}
            one = data.isel(at)
            if reduced:
                panel.fill_between(flows, one.min(reduced), one.max(reduced), color=colour,
                                   alpha=0.25, lw=0)
                one = one.mean(reduced)
            panel.plot(flows, one.values, "-", color=colour, label=label or metric)
            if states is None or reduced:
                continue
            marked |= _mark_states(panel, flows, one.values, state_names(states.isel(at)),
                                   colour)
        if facet:
            panel.set_title(f"{facet}={_labels(ds, facet)[j]}", fontsize=10)
        panel.set_xlabel("flows")
    _state_key(panels[-1], marked)
    panels[0].set_ylabel(f"{metric} ({unit})" if unit else metric)
    panels[-1].legend(fontsize=7, title=line, title_fontsize=8)
    over = (f"; mean, band min to max over {', '.join(reduced)}"
            f" ({', '.join(str(data.sizes[dim]) for dim in reduced)})" if reduced else "")
    fig.suptitle(f"{ds.attrs.get('scenario_name', 'sweep')}: {metric} vs flows{over}")
    return _finish(fig, path)


def plot_verdict_map(ds: xr.Dataset, path: str | Path | None = None) -> Figure:
    """The state each point of a sweep ends in (`pathflow.verdict`: one colour per state of
    `STATES`, `STATE_COLOURS`; light grey: not run) over its grid: flows across, one row per
    combination of the other axes, named by the text the user wrote ("threshold=20pkt,
    link_rate=10Gbps"). With a `seed` axis a cell is the most common state of its seeds that ran
    (a tie goes to the state first in `STATES`) and says what share of them it is ("3/4") where
    the map has at most `ANNOTATE_CELLS` cells; a larger map hatches the cells whose seeds
    disagree instead."""
    axes = _axes(ds, "state")
    seeded = "seed" in axes
    rows = [dim for dim in axes if dim != "seed"]
    codes = ds.state.transpose(*rows, *(["seed"] if seeded else []), "flows").values
    shape = [ds.sizes[dim] for dim in rows]
    count = int(np.prod(shape))
    codes = codes.reshape(count, ds.sizes["seed"] if seeded else 1, ds.sizes["flows"])
    votes = np.stack([(codes == k).sum(axis=1) for k in range(len(STATES))])
    ran = np.isfinite(codes).sum(axis=1)
    state = np.where(ran > 0, votes.argmax(axis=0), np.nan)
    agree = votes.max(axis=0)
    names = [", ".join(f"{dim}={_labels(ds, dim)[i]}" for dim, i in zip(rows, index, strict=True))
             for index in np.ndindex(*shape)] if rows else [""]
    flows = ds.flows.values
    fig = Figure(figsize=(min(3.5 + 0.45 * flows.size + 0.06 * max(map(len, names)), 30),
                          min(1.8 + 0.3 * count, 40)))
    panel = fig.subplots()
    colours = ListedColormap([STATE_COLOURS[name] for name in STATES]).with_extremes(bad=NOT_RUN)
    panel.imshow(np.ma.masked_invalid(state), cmap=colours, aspect="auto",
                 interpolation="nearest",
                 norm=BoundaryNorm(np.arange(len(STATES) + 1) - 0.5, len(STATES)))
    panel.set_xticks(range(flows.size), [str(n) for n in flows],
                     rotation=90 if flows.size > 12 else 0)
    panel.set_yticks(range(count), names)
    panel.set_xlabel("flows")
    key = [Patch(color=STATE_COLOURS[name], label=name) for name in STATES]
    if not ran.all():
        key.append(Patch(color=NOT_RUN, label="not run"))
    if seeded and state.size <= ANNOTATE_CELLS:
        for (row, column), n in np.ndenumerate(ran):
            if n:
                dark = sum(to_rgb(STATE_COLOURS[STATES[int(state[row, column])]])) < 1.6
                panel.text(column, row, f"{agree[row, column]}/{n}", ha="center", va="center",
                           fontsize=7, color="white" if dark else "black")
    elif seeded:
        for row, column in zip(*np.nonzero((ran > 0) & (agree < ran)), strict=True):
            panel.add_patch(Rectangle((column - 0.5, row - 0.5), 1, 1, fill=False, hatch="///",
                                      lw=0, color="black"))
        key.append(Patch(facecolor="white", edgecolor="black", hatch="///",
                         label="seeds disagree"))
    panel.legend(handles=key, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
    across = (f"; most common of {ds.sizes['seed']} seeds" + (" (share of the seeds that ran)"
              if state.size <= ANNOTATE_CELLS else "")) if seeded else ""
    panel.set_title(f"{ds.attrs.get('scenario_name', 'sweep')}: verdict{across}", fontsize=10)
    return _finish(fig, path)
