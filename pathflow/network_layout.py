"""Where each node of a network sits in a picture (`pathflow.network_plot` draws it).

`layout`, deterministic so that two figures of one topology line up:
- fat-tree: rows by tier, core on top, then aggregation, edge and hosts; the pods side by side,
  left to right, with a gap between pods; an edge switch sits above its hosts.
- leaf-spine: spines on top, leaves, hosts; the hosts of a leaf grouped beneath it.
- star and dumbbell: left to right as the data flows, senders, switch(es), receivers.
- any other graph: rows by hop distance from the nearest host (hosts at the bottom), each row
  ordered by the mean position of its neighbours in the row before (barycentre sweeps, the
  Sugiyama heuristic), which untangles tree-like data-centre graphs. Plain numpy, no random seed.
  The kind is read from the links' tier labels (`pathflow.topology`), so a `Network` is enough.
"""

from __future__ import annotations

import re
from collections import deque

import numpy as np

from pathflow.topology import Network

__all__ = ["Position", "kind_of", "layout", "natural_key", "tier_rows"]

Position = tuple[float, float]
_FATTREE_TIERS = {"host-edge", "edge-agg", "agg-core"}
_LEAFSPINE_TIERS = {"host-leaf", "leaf-spine"}
_CHAIN_TIERS = {"access", "bottleneck"}  # star and dumbbell


def natural_key(name: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key: "h10" after "h9", digits compared as numbers."""
    return tuple((0, int(part)) if part.isdigit() else (1, part)
                 for part in re.split(r"(\d+)", name) if part)


def _nodes(network: Network) -> list[str]:
    return list(dict.fromkeys(n for link in network.links for n in (link.src, link.dst)))


def _neighbours(network: Network) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {n: set() for n in _nodes(network)}
    for link in network.links:
        out[link.src].add(link.dst)
        out[link.dst].add(link.src)
    return out


def _spread(groups: list[list[str]], gap: float) -> dict[str, float]:
    """x of each name: consecutive integers, with `gap` extra between groups."""
    x: dict[str, float] = {}
    at = 0.0
    for group in groups:
        for name in group:
            x[name] = at
            at += 1.0
        at += gap
    return x


def _fattree(nodes: list[str]) -> dict[str, Position] | None:
    """Rows by tier (hosts 0, edge 1, agg 2, core 3), pods left to right; None unless every
    node is named as `topology._fattree` names them."""
    parsed: dict[str, tuple[str, tuple[int, ...]]] = {}
    for name in nodes:
        match = re.fullmatch(r"(h|edge|agg|core)(\d+)_(\d+)(?:_(\d+))?", name)
        if match is None or (match[1] == "h") != (match[4] is not None):
            return None
        parsed[name] = (match[1], tuple(int(g) for g in match.groups()[1:] if g is not None))
    of = {role: sorted((n for n, (r, _) in parsed.items() if r == role), key=lambda n: parsed[n][1])
          for role in ("h", "edge", "agg", "core")}
    if not of["h"] or not of["edge"]:
        return None
    pods = sorted({parsed[h][1][0] for h in of["h"]})
    hosts_of_pod = [[h for h in of["h"] if parsed[h][1][0] == pod] for pod in pods]
    x = _spread(hosts_of_pod, gap=max(2.0, 0.5 * len(hosts_of_pod[0])))
    pos: dict[str, Position] = {h: (x[h], 0.0) for h in of["h"]}
    for edge in of["edge"]:
        below = [x[h] for h in of["h"] if parsed[h][1][:2] == parsed[edge][1]]
        pos[edge] = (float(np.mean(below)) if below else 0.0, 1.0)
    for pod in {parsed[a][1][0] for a in of["agg"]}:
        edges = sorted(pos[e][0] for e in of["edge"] if parsed[e][1][0] == pod)
        aggs = [a for a in of["agg"] if parsed[a][1][0] == pod]
        low, high = (edges[0], edges[-1]) if edges else (0.0, 0.0)
        for a, at in zip(aggs, _even(low, high, len(aggs)), strict=True):
            pos[a] = (at, 2.0)
    low, high = min(x.values()), max(x.values())
    span = high - low
    for core, at in zip(of["core"], _even(low + 0.1 * span, high - 0.1 * span, len(of["core"])),
                        strict=True):
        pos[core] = (at, 3.0)
    return pos


def _even(low: float, high: float, n: int) -> list[float]:
    """n points spread evenly over [low, high]; one point in the middle."""
    return [0.5 * (low + high)] if n == 1 else list(np.linspace(low, high, n))


def _leafspine(nodes: list[str]) -> dict[str, Position] | None:
    """Rows: hosts 0, leaves 1, spines 2; the hosts of a leaf grouped beneath it."""
    hosts = [n for n in nodes if re.fullmatch(r"h\d+_\d+", n)]
    leaves = sorted((n for n in nodes if re.fullmatch(r"leaf\d+", n)), key=natural_key)
    spines = sorted((n for n in nodes if re.fullmatch(r"spine\d+", n)), key=natural_key)
    if len(hosts) + len(leaves) + len(spines) != len(nodes) or not hosts or not leaves:
        return None
    groups = [sorted((h for h in hosts if h.split("_")[0] == f"h{leaf[4:]}"), key=natural_key)
              for leaf in leaves]
    x = _spread(groups, gap=max(1.0, 0.5 * max(len(g) for g in groups)))
    pos: dict[str, Position] = {h: (x[h], 0.0) for h in hosts}
    for leaf, group in zip(leaves, groups, strict=True):
        pos[leaf] = (float(np.mean([x[h] for h in group])) if group else 0.0, 1.0)
    xs = [p[0] for p in pos.values()]
    for spine, at in zip(spines, _even(min(xs), max(xs), len(spines)), strict=True):
        pos[spine] = (at, 2.0)
    return pos


def _layers(network: Network, sources: list[str]) -> list[list[str]]:
    """Nodes by hop distance from the nearest of `sources` (breadth-first), each layer in
    barycentre order: three sweeps, down, up, down, each placing a node at the mean position
    of its neighbours in the layer it is swept from (ties by name)."""
    neighbours = _neighbours(network)
    depth = dict.fromkeys(sources, 0)
    queue = deque(sources)
    while queue:
        node = queue.popleft()
        for other in sorted(neighbours[node], key=natural_key):
            if other not in depth:
                depth[other] = depth[node] + 1
                queue.append(other)
    lost = [n for n in neighbours if n not in depth]  # unreachable: one layer beyond the rest
    deepest = max(depth.values(), default=-1)
    depth.update(dict.fromkeys(lost, deepest + 1))
    layers = [sorted((n for n, d in depth.items() if d == level), key=natural_key)
              for level in range(max(depth.values()) + 1)]
    rank = {n: i / max(1, len(layer) - 1) for layer in layers for i, n in enumerate(layer)}
    order = list(range(1, len(layers))) + list(range(len(layers) - 2, -1, -1)) + \
        list(range(1, len(layers)))
    for step, level in enumerate(order):
        downward = step < len(layers) - 1 or step >= 2 * (len(layers) - 1)
        ref = level - 1 if downward else level + 1

        def key(node: str, ref: int = ref) -> tuple[float, tuple[tuple[int, int | str], ...]]:
            near = [rank[m] for m in neighbours[node] if depth[m] == ref]
            return (float(np.mean(near)) if near else rank[node], natural_key(node))

        layers[level].sort(key=key)
        rank.update({n: i / max(1, len(layers[level]) - 1) for i, n in enumerate(layers[level])})
    return layers


def _layered(network: Network, sources: list[str], horizontal: bool) -> dict[str, Position]:
    """Rows (or, `horizontal`, columns) by `_layers`, each spread evenly over one width. Nodes
    of one row joined by a link alternate slightly up and down, so that the link between them
    does not run straight through the nodes between."""
    layers = _layers(network, sources)
    width = max(len(layer) for layer in layers)
    neighbours = _neighbours(network)
    pos: dict[str, Position] = {}
    for level, layer in enumerate(layers):
        members = set(layer)
        stagger = any(neighbours[n] & members for n in layer)
        for i, node in enumerate(layer):
            along = (i + 0.5) * width / len(layer)
            across = level + (0.18 * (-1) ** i if stagger and len(layer) > 2 else 0.0)
            pos[node] = (float(across), float(width - along)) if horizontal else \
                (float(along), float(across))
    return pos


def kind_of(network: Network) -> str:
    tiers = {link.tier for link in network.links}
    if tiers and tiers <= _FATTREE_TIERS:
        return "fattree"
    if tiers and tiers <= _LEAFSPINE_TIERS:
        return "leafspine"
    if tiers and tiers <= _CHAIN_TIERS:
        return "chain"
    return "graph"


def layout(network: Network) -> dict[str, Position]:
    """(x, y) of every node of `network`: tiered for fat-trees and leaf-spines, left to right
    for stars and dumbbells, rows by hop distance from the hosts for any other graph (see the
    module docstring). Deterministic: the same network gives the same positions."""
    nodes = _nodes(network)
    kind = kind_of(network)
    tiered = _fattree(nodes) if kind == "fattree" else \
        _leafspine(nodes) if kind == "leafspine" else None
    if tiered is not None:
        return tiered
    if kind == "chain":
        senders = [n for n in nodes if re.fullmatch(r"h\d+", n)] or list(network.senders)
        return _layered(network, senders, horizontal=True)
    hosts = [h for h in network.hosts if h in set(nodes)] or nodes[:1]
    return _layered(network, hosts, horizontal=False)


def tier_rows(network: Network) -> list[str] | None:
    """Names of the rows of a tiered layout, bottom up, for the y axis; None otherwise."""
    nodes = _nodes(network)
    kind = kind_of(network)
    if kind == "fattree" and _fattree(nodes) is not None:
        return ["hosts", "edge", "aggregation", "core"]
    if kind == "leafspine" and _leafspine(nodes) is not None:
        return ["hosts", "leaf", "spine"]
    return None
