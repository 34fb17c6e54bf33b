"""A picture of the network: every cable drawn once, coloured by a per-link quantity (steady
utilization, or the probability that a link is a bottleneck over seeds), with the standing queues
marked at the port that holds them.

Layout: `pathflow.network_layout`.

Drawing choices:
- The two directions of a cable are one segment, coloured by the larger of their two values: a
  k = 8 fat-tree has 384 cables, and two offset segments per cable would blur into one at that
  density; the busier direction is what makes a hotspot. Which direction holds a queue is still
  visible, since a queue marker sits near the transmitting end of its link (the egress port).
- Busier cables are drawn thicker and on top of quieter ones, so that a hotspot is never hidden
  beneath idle links; a cable without a value is drawn thin and light grey.
- Lines and markers thin out, and host labels are dropped, as the network grows (a k = 8
  fat-tree has 208 nodes); tier names go on the side instead.

Like `pathflow.plots`, the figures are matplotlib `Figure` objects built without pyplot.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import xarray as xr
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection
from matplotlib.colors import Colormap, ListedColormap, Normalize
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from pathflow.metrics import default_warmup
from pathflow.network_layout import Position, kind_of, layout, natural_key, tier_rows
from pathflow.topology import Link, Network

__all__ = ["network_of", "plot_network", "plot_network_result"]

PerLink = xr.DataArray | Mapping[str, float] | Sequence[float] | np.ndarray

UTILIZATION_LABEL = "utilization (fraction of capacity, steady-window mean)"
QUEUE_AT = 0.2  # a queue marker sits this far along its link from the transmitting node
# Yellow to dark red, without the palest yellows, which vanish on white: idle links stay visible
# and a hotspot reads as hot.
HEAT = ListedColormap(colormaps["YlOrRd"](np.linspace(0.22, 1.0, 256)), name="pathflow_heat")


# --- values ----------------------------------------------------------------------------------

def _per_link(network: Network, values: PerLink, what: str) -> np.ndarray:
    """`values` as one float per link of `network`, in its order; NaN where none was given."""
    names = [link.name for link in network.links]
    if isinstance(values, xr.DataArray):
        if values.dims != ("link",):
            raise ValueError(f"{what}: a DataArray over the one dimension 'link' is needed, "
                             f"got dims {values.dims}")
        given = dict(zip((str(n) for n in values.link.values),
                         np.asarray(values.values, dtype=float), strict=True))
        return np.array([given.get(n, np.nan) for n in names], dtype=float)
    if isinstance(values, Mapping):
        return np.array([float(values.get(n, np.nan)) for n in names], dtype=float)
    array = np.asarray(values, dtype=float)
    if array.shape != (len(names),):
        raise ValueError(f"{what}: {array.shape[0] if array.ndim else 0} values for "
                         f"{len(names)} links")
    return array


def _cables(links: list[Link], values: np.ndarray) -> tuple[list[tuple[str, str]], np.ndarray]:
    """Each cable (pair of nodes) once, in the order of its first link, with the larger value of
    its two directions (NaN only where neither has one)."""
    index: dict[frozenset[str], int] = {}
    pairs: list[tuple[str, str]] = []
    best: list[float] = []
    for link, value in zip(links, values, strict=True):
        key = frozenset((link.src, link.dst))
        if key not in index:
            index[key] = len(pairs)
            pairs.append((link.src, link.dst))
            best.append(np.nan)
        i = index[key]
        if np.isfinite(value) and not value <= best[i]:  # NaN best: any value replaces it
            best[i] = float(value)
    return pairs, np.array(best, dtype=float)


# --- drawing ---------------------------------------------------------------------------------

def plot_network(network: Network, values: PerLink, path: str | Path | None = None, *,
                 label: str = UTILIZATION_LABEL, queues: PerLink | None = None,
                 min_queue: float = 1.0, title: str | None = None, cmap: str | Colormap = HEAT,
                 vmin: float = 0.0, vmax: float | None = None) -> Figure:
    """Draw `network` with each cable coloured by the larger `values` of its two directions.

    `values`: one number per directed link (a DataArray over `link`, a mapping from link name,
    or a sequence in `network.links` order); links without one are drawn grey. `label` names
    the quantity and its units on the colour bar. The colour scale runs from `vmin` to `vmax`,
    by default 1 (utilization, probability) unless a value is larger.
    `queues`: mean queue of each link in packets; those of at least `min_queue` packets are
    marked by a circle, its area in proportion, near the link's transmitting end.
    Returns the figure, and writes it to `path` when one is given.
    """
    value = _per_link(network, values, "values")
    pos = layout(network)
    pairs, cable_value = _cables(network.links, value)
    finite = cable_value[np.isfinite(cable_value)]
    top = vmax if vmax is not None else max(1.0, float(finite.max()) if finite.size else 1.0)
    norm = Normalize(vmin=vmin, vmax=top)
    colours = (colormaps[cmap] if isinstance(cmap, str) else cmap).with_extremes(bad="#d0d0d0")
    kind = kind_of(network)
    n_nodes = len(pos)
    wide = kind in ("fattree", "leafspine") and n_nodes > 60
    fig = Figure(figsize=(13, 6.5) if wide else (9, 6))
    ax = fig.add_subplot()
    thin = 0.5 if len(pairs) > 150 else 0.9 if len(pairs) > 40 else 1.4
    order = np.argsort(np.where(np.isfinite(cable_value), cable_value, -np.inf), kind="stable")
    scaled = np.nan_to_num(np.clip(norm(cable_value[order]), 0.0, 1.0), nan=0.0)
    lines = LineCollection([(pos[pairs[i][0]], pos[pairs[i][1]]) for i in order],
                           cmap=colours, norm=norm, linewidths=thin * (1.0 + 2.5 * scaled),
                           capstyle="round", zorder=1)
    lines.set_array(cable_value[order])
    ax.add_collection(lines)
    _draw_nodes(ax, network, pos)
    if queues is not None:
        _draw_queues(ax, network, pos, _per_link(network, queues, "queues"), min_queue)
    bar = fig.colorbar(lines, ax=ax, fraction=0.035, pad=0.02)
    bar.set_label(label)
    _frame(ax, network, pos, hosts_named=len(network.hosts) <= 24)
    if title:
        ax.set_title(title)
    fig.tight_layout()
    if path is not None:
        fig.savefig(Path(path), dpi=150 if wide else 120)
    return fig


def _draw_nodes(ax: Axes, network: Network, pos: dict[str, Position]) -> None:
    """Hosts as small grey dots, switches as dark squares; names where they fit."""
    hosts = set(network.hosts)
    host_names = [n for n in pos if n in hosts]
    switch_names = [n for n in pos if n not in hosts]
    many = len(pos) > 60
    for names, marker, size, colour in ((host_names, "o", 10 if many else 28, "#707070"),
                                        (switch_names, "s", 18 if many else 60, "#303030")):
        if names:
            xy = np.array([pos[n] for n in names])
            ax.scatter(xy[:, 0], xy[:, 1], s=size, marker=marker, c=colour, zorder=3,
                       linewidths=0)
    label_hosts = len(host_names) <= 24
    label_switches = len(switch_names) <= 40
    fontsize = 7 if len(pos) > 24 else 8
    # side by side in a row, more than 8 host names would overlap: turn them; in the columns of
    # a star or dumbbell, the names go beside the hosts, outwards
    upright = len(host_names) <= 8
    columns = kind_of(network) == "chain"
    middle = float(np.mean([x for x, _ in pos.values()]))
    for name, (x, y) in pos.items():
        is_host = name in hosts
        if is_host and label_hosts and columns:
            left = x < middle
            ax.annotate(name, (x, y), xytext=(-6 if left else 6, 0), textcoords="offset points",
                        ha="right" if left else "left", va="center", fontsize=fontsize, zorder=4)
        elif is_host and label_hosts:
            ax.annotate(name, (x, y), xytext=(0, -6), textcoords="offset points", ha="center",
                        va="top", fontsize=fontsize, rotation=0 if upright else 90, zorder=4)
        elif not is_host and label_switches:
            ax.annotate(name, (x, y), xytext=(0, 5), textcoords="offset points", ha="center",
                        va="bottom", fontsize=fontsize, zorder=4,
                        bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none",
                              "alpha": 0.8})


def _draw_queues(ax: Axes, network: Network, pos: dict[str, Position], packets: np.ndarray,
                 min_queue: float) -> None:
    """A circle near the transmitting end of every link whose queue is at least `min_queue`
    packets; area in proportion to the queue, with a legend of sizes."""
    shown = np.flatnonzero(np.nan_to_num(packets, nan=0.0) >= min_queue)
    if shown.size == 0:
        unit = "packet" if min_queue == 1 else "packets"
        ax.text(0.99, 0.01, f"no link queue of {min_queue:g} {unit} or more",
                transform=ax.transAxes, ha="right", va="bottom", fontsize=8, color="#505050")
        return
    largest = float(packets[shown].max())
    area = (250.0 if len(pos) <= 60 else 110.0) / largest  # points^2 per packet

    def where(i: int) -> Position:
        (x0, y0), (x1, y1) = pos[network.links[i].src], pos[network.links[i].dst]
        return (x0 + QUEUE_AT * (x1 - x0), y0 + QUEUE_AT * (y1 - y0))

    xy = np.array([where(int(i)) for i in shown])
    ax.scatter(xy[:, 0], xy[:, 1], s=np.maximum(area * packets[shown], 12.0), marker="o",
               facecolors="#2a9d8f", edgecolors="black", linewidths=0.5, alpha=0.75, zorder=5)
    steps = sorted({float(f"{v:.2g}") for v in (largest, largest / 4, largest / 16)
                    if v >= min_queue})
    handles = [Line2D([], [], ls="", marker="o", markerfacecolor="#2a9d8f",
                      markeredgecolor="black", markeredgewidth=0.5, alpha=0.75,
                      markersize=float(np.sqrt(max(area * v, 12.0))), label=f"{v:g}")
               for v in steps]
    ax.legend(handles=handles, title="mean queue (packets)", fontsize=7, title_fontsize=7,
              loc="upper left", bbox_to_anchor=(0.0, -0.02), ncols=len(handles), frameon=False,
              borderaxespad=0.0, handletextpad=0.3, columnspacing=1.2)


def _frame(ax: Axes, network: Network, pos: dict[str, Position], hosts_named: bool) -> None:
    """Limits with a margin; tier names on the y axis of a tiered layout, no axes otherwise."""
    xy = np.array(list(pos.values()))
    (x0, y0), (x1, y1) = xy.min(axis=0), xy.max(axis=0)
    mx, my = max(0.04 * (x1 - x0), 0.5), max(0.08 * (y1 - y0), 0.4)
    ax.set_xlim(x0 - mx, x1 + mx)
    below = 0.0
    if hosts_named and tier_rows(network) is not None:  # room for turned host names, ~45 points
        height = ax.figure.get_figheight() * 72 * 0.8
        below = 45 * (y1 - y0 + 2 * my) / (height - 45)
    ax.set_ylim(y0 - my - below, y1 + my)
    for spine in ax.spines.values():
        spine.set_visible(False)
    ax.set_xticks([])
    rows = tier_rows(network)
    if rows is None:
        ax.set_yticks([])
        return
    ax.set_yticks(range(len(rows)), rows)
    ax.tick_params(axis="y", length=0)
    if network.links and kind_of(network) == "fattree":
        hosts = [n for n in pos if pos[n][1] == 0.0]
        pods = sorted({int(n[1:].split("_")[0]) for n in hosts})
        if len(pods) > 1:
            for pod in pods:
                xs = [pos[n][0] for n in hosts if int(n[1:].split("_")[0]) == pod]
                ax.annotate(f"pod {pod}", (float(np.mean(xs)), 0.0),
                            xytext=(0, -40 if hosts_named else -8),
                            textcoords="offset points", ha="center", va="top", fontsize=7,
                            color="#505050")


# --- results ---------------------------------------------------------------------------------

def network_of(ds: xr.Dataset) -> Network:
    """The network a result was computed on. From the link coordinates every pathflow engine
    stores (`results.network_coords`): they hold exactly the simulated links, and need no edge
    file of a graph scenario, which the scenario names relative to a directory the result no
    longer knows. A result without them: the topology of its scenario TOML, built anew."""
    if {"link_src", "link_dst", "link_tier"} <= set(ds.coords):
        def column(name: str, default: float) -> np.ndarray:
            return (np.asarray(ds[name].values, dtype=float) if name in ds.coords
                    else np.full(ds.sizes["link"], default))

        capacity, delay, buffer = column("capacity", np.nan), column("delay", 0.0), \
            column("buffer", np.inf)
        links = [Link(str(name), str(src), str(dst), str(tier), float(c), float(d), float(b))
                 for name, src, dst, tier, c, d, b in zip(
                     ds.link.values, ds.link_src.values, ds.link_dst.values,
                     ds.link_tier.values, capacity, delay, buffer, strict=True)]
        senders = sorted({str(s) for s in ds.src.values}, key=natural_key) if "src" in ds else []
        receivers = sorted({str(d) for d in ds.dst.values}, key=natural_key) if "dst" in ds else []
        degree: dict[str, int] = {}
        for link in links:
            degree[link.src] = degree.get(link.src, 0) + 1
        listed = _listed_hosts(ds)
        hosts = listed if listed else sorted(
            {n for n, d in degree.items() if d == 1} | set(senders) | set(receivers),
            key=natural_key)
        return Network(links, hosts, senders, receivers)
    from pathflow.scenario import Scenario
    from pathflow.topology import build_network

    return build_network(Scenario.from_toml(str(ds.attrs["scenario"])))


def _listed_hosts(ds: xr.Dataset) -> list[str]:
    """`[topology] hosts` of the result's scenario (a graph's listed hosts), if any."""
    try:
        topology = tomllib.loads(str(ds.attrs.get("scenario", ""))).get("topology", {})
    except tomllib.TOMLDecodeError:
        return []
    return [str(h) for h in topology.get("hosts", [])]


def plot_network_result(ds: xr.Dataset, path: str | Path | None = None, *,
                        values: PerLink | None = None, label: str | None = None,
                        warmup: float | None = None, min_queue: float = 1.0,
                        title: str | None = None, cmap: str | Colormap = HEAT) -> Figure:
    """The network of a result (`network_of`), links coloured by their mean utilization over
    the steady window (t > `warmup`, by default `metrics.default_warmup`), or by `values` given
    instead (e.g. a per-link DataArray of the probability of being a bottleneck over seeds,
    with `label="P(bottleneck)"`); mean queues of at least `min_queue` packets marked."""
    cut = default_warmup(ds) if warmup is None else warmup
    steady = ds.sel(time=ds.time > cut)
    if steady.sizes["time"] == 0:
        steady = ds
    packet = float(ds.attrs.get("packet_bytes", 1500))
    network = network_of(ds)
    if values is None:
        values = steady.utilization.mean("time")
        label = label or UTILIZATION_LABEL
    elif label is None and isinstance(values, xr.DataArray):
        label = str(values.attrs.get("long_name") or values.name or "") or None
    queues = steady.queue.mean("time") / packet
    if title is None:
        name = ds.attrs.get("scenario_name", "")
        what = "mean utilization" if label == UTILIZATION_LABEL else label or "value"
        title = (f"{name}: links by {what}, mean queues; steady window t > {cut * 1e3:.3g} ms"
                 .lstrip(": "))
    return plot_network(network, values, path, label=label or "value", queues=queues,
                        min_queue=min_queue, title=title, cmap=cmap)
