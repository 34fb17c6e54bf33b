"""Traffic patterns and routing: which flows exist and which paths carry them.

`build_routes` turns a scenario and its network into flows (connections: source, destination,
start, size), their subflows (the senders that own congestion state; one per TCP flow,
`[transport] subflows` for an MPTCP connection, each routed on its own as ndiffports does) and,
for each subflow, a set of paths with fixed split weights:

- ``shortest``: one shortest path (the first in name order), the same for every flow of a pair.
- ``ecmp``: one of the equal-cost shortest paths, picked by a seeded per-subflow hash, so that two
  flows (or two subflows) of one pair may take different paths and unrelated ones may collide
  (as switches do).
- ``spray``: every equal-cost path with an equal share (per-packet spraying in the fluid limit),
  for each subflow.
- ``static``: every switch picks one next hop per destination among its equal-cost ones (seeded),
  as the seed 002 study's "static" routers do; all flows to one destination share that tree.
- ``kshortest``: subflow i of a connection takes the i-th of the `routing.max_paths` shortest
  loopless paths of its host pair (by hop count, ties in name order, round-robin when the pair
  has fewer), so the subflows of an MPTCP connection spread over longer paths too, on any graph;
  a single-path flow takes the shortest.
- ``hamiltonian``: seed 004's scheme (`pathflow.hamiltonian`): a multipath connection has one
  subflow per switch link of its source's ingress switch, each along a Hamiltonian path of the
  switches up to the destination's switch, paths shared per switch or per VLAN.

`[[routing.paths]]` names paths explicitly, node by node: each entry is one subflow of its flow,
which then has exactly those subflows (the seed 004 study's Hamiltonian-path subflows, or any
hand-made multipath layout).

Equal-cost paths are enumerated on the directed link graph: a breadth-first search from the
destination gives each node's hop distance, and the paths are the walks that lower it by one at
every hop (at most `routing.max_paths` per pair, in name order).
"""

from __future__ import annotations

import hashlib
import itertools
from collections import Counter, deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import networkx as nx
import numpy as np

from pathflow.hamiltonian import HamiltonianRoutes
from pathflow.models.registry import CONTROLS, multipath_controls
from pathflow.resolved import ResolvedGroup
from pathflow.scenario import Scenario, ScenarioError
from pathflow.topology import Network

__all__ = ["Flow", "Routes", "build_routes", "equal_cost_paths"]


@dataclass(frozen=True)
class Flow:
    """One flow, i.e. one connection (the Dataset's `flow`). SI units; size is math.inf for a
    flow that never ends. With `rounds` > 1 (`[traffic] rounds`, incast) the flow sends `size`
    bytes per round, `rounds` times: round r + 1 of every flow of its group starts when the
    last of them has delivered its round-r block (a barrier), so it transfers rounds x size."""

    src: str
    dst: str
    start: float
    size: float  # bytes; per round with rounds > 1 (the block)
    group: int = 0  # its traffic group (`[[traffic.groups]]`), 0 without groups
    rounds: int = 1  # barrier-synchronised rounds of its group (1: one transfer of `size`)


@dataclass(frozen=True)
class Routes:
    """Flows, their subflows and the subflows' paths, in one vocabulary used by every engine:
    subflow s belongs to flow `subflow_flow[s]`; path p belongs to subflow `path_subflow[p]`,
    carries the share `path_weight[p]` of its rate and crosses the links `paths[p]` (indices
    into Network.links). Paths are grouped by subflow and subflows by flow. `equal_cost[f]`
    counts the shortest paths of flow f's host pair (used or not)."""

    flows: list[Flow]
    paths: list[tuple[int, ...]]
    path_subflow: list[int]
    path_weight: list[float]
    subflow_flow: list[int]
    equal_cost: list[int]  # per flow: how many equal-cost shortest paths its pair has

    @property
    def path_flow(self) -> list[int]:
        """The flow of each path."""
        return [self.subflow_flow[s] for s in self.path_subflow]

    def receiver_flows(self) -> list[int]:
        """Per subflow, how many flows its flow's destination host receives."""
        received = Counter(flow.dst for flow in self.flows)
        return [received[self.flows[f].dst] for f in self.subflow_flow]

    def flows_per_link(self, network: Network) -> Counter[str]:
        """How many flows each link (by name) is offered, from the routes alone: a flow counts with
        the share of it that its paths across the link carry (1 under single-path routing, so
        that ECMP's collisions are the links offered 2 or more)."""
        offered: Counter[str] = Counter()
        for path, flow_share in zip(self.paths, self.path_weight, strict=True):
            offered.update({network.links[i].name: flow_share for i in path})
        return Counter({name: round(value, 9) for name, value in offered.items()})


def _stable_hash(*parts: object) -> int:
    """A hash of `parts` that is the same in every process and uniform in every bit. Not CRC-32:
    it is linear, so keys that differ in one field (a connection's subflows) land on related
    residues (all four subflows of a k = 4 fat-tree connection split 3 + 1, always)."""
    digest = hashlib.blake2b("|".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


class _Through(Mapping[str, int]):
    """Hop distances to a host reached only through `via`'s node: one more than to it."""

    def __init__(self, via: Mapping[str, int], host: str) -> None:
        self.via, self.host = via, host

    def __getitem__(self, node: str) -> int:
        return 0 if node == self.host else self.via[node] + 1

    def __contains__(self, node: object) -> bool:
        return node == self.host or node in self.via

    def get(self, node: str, default: int | None = None) -> int | None:  # type: ignore[override]
        if node == self.host:
            return 0
        hops = self.via.get(node)
        return default if hops is None else hops + 1

    def __iter__(self) -> Iterator[str]:
        return iter(self.via)

    def __len__(self) -> int:
        return len(self.via)


class _PathFinder:
    """Equal-cost shortest paths between hosts, with per-destination distances cached."""

    def __init__(self, network: Network, max_paths: int) -> None:
        self.network = network
        self.max_paths = max_paths
        self.hosts = set(network.hosts)  # never a transit node (a multi-homed host is no switch)
        self.out: dict[str, list[tuple[str, int]]] = {}
        self.into: dict[str, list[str]] = {}
        for i, link in enumerate(network.links):
            self.out.setdefault(link.src, []).append((link.dst, i))
            self.into.setdefault(link.dst, []).append(link.src)
        for hops in self.out.values():
            hops.sort()
        self._distance: dict[str, Mapping[str, int]] = {}
        self._count: dict[str, dict[str, int]] = {}
        self._shortest: dict[tuple[str, str, int], list[tuple[int, ...]]] = {}
        self._digraph: nx.DiGraph | None = None

    def distance_to(self, dst: str) -> Mapping[str, int]:
        known = self._distance.get(dst)
        if known is not None:
            return known
        into = self.into.get(dst, [])
        if len(into) == 1 and into[0] != dst:  # every path ends u -> dst: share u's search
            self._distance[dst] = _Through(self.distance_to(into[0]), dst)
            return self._distance[dst]
        dist = {dst: 0}
        queue = deque([dst])
        while queue:
            node = queue.popleft()
            for prev in self.into.get(node, []):
                if prev not in dist:
                    dist[prev] = dist[node] + 1
                    if prev not in self.hosts:
                        queue.append(prev)
        self._distance[dst] = dist
        return dist

    def next_hops(self, node: str, dst: str) -> list[tuple[str, int]]:
        dist = self.distance_to(dst)
        return [(n, i) for n, i in self.out.get(node, [])
                if dist.get(n, -1) == dist[node] - 1 and (n == dst or n not in self.hosts)]

    def paths(self, src: str, dst: str) -> list[tuple[int, ...]]:
        if src not in self.distance_to(dst):
            raise ScenarioError(f"routing: no path from {src} to {dst}")
        found: list[tuple[int, ...]] = []
        stack: list[tuple[str, tuple[int, ...]]] = [(src, ())]
        while stack and len(found) < self.max_paths:
            node, walk = stack.pop()
            if node == dst:
                found.append(walk)
                continue
            for nxt, link in reversed(self.next_hops(node, dst)):  # name order after pop
                stack.append((nxt, (*walk, link)))
        return found

    def count(self, node: str, dst: str) -> int:
        """How many shortest paths lead from node to dst (memoised per destination)."""
        into = self.into.get(dst, [])
        if node != dst and len(into) == 1 and into[0] != dst:  # as many as to u, for u -> dst
            return self.count(node, into[0])
        counts = self._count.setdefault(dst, {dst: 1})
        if node not in counts:
            pending = [node]
            while pending:  # iterative post-order: a long path does not hit the recursion limit
                current = pending[-1]
                missing = [n for n, _ in self.next_hops(current, dst) if n not in counts]
                if missing:
                    pending += missing
                    continue
                pending.pop()
                counts[current] = sum(counts[n] for n, _ in self.next_hops(current, dst))
        return counts[node]

    def path(self, src: str, dst: str, index: int) -> tuple[int, ...]:
        """The `index`-th shortest path in name order (as `paths` lists them), without listing
        the others: at each node, skip the next hops whose paths all come before it."""
        if src not in self.distance_to(dst):
            raise ScenarioError(f"routing: no path from {src} to {dst}")
        node, walk = src, ()
        while node != dst:
            for nxt, link in self.next_hops(node, dst):
                below = self.count(nxt, dst)
                if index < below:
                    node, walk = nxt, (*walk, link)
                    break
                index -= below
        return walk

    def k_shortest(self, src: str, dst: str, k: int) -> list[tuple[int, ...]]:
        """The `k` shortest loopless paths from src to dst by hop count (Yen's algorithm, as
        networkx's `shortest_simple_paths`), ties in name order, through no other host; fewer
        where the graph has fewer. Memoised per pair."""
        key = (src, dst, k)
        if key not in self._shortest:
            if src not in self.distance_to(dst):
                raise ScenarioError(f"routing: no path from {src} to {dst}")
            graph = self._graph()
            others = set(self.network.hosts) - {src, dst}
            candidates: list[list[str]] = []
            for nodes in nx.shortest_simple_paths(graph, src, dst):
                if len(candidates) >= k and len(nodes) > len(candidates[k - 1]):
                    break  # every tie of the k-th path is in
                if others.isdisjoint(nodes[1:-1]):
                    candidates.append(nodes)
                    candidates.sort(key=lambda walk: (len(walk), walk))
            self._shortest[key] = [
                tuple(graph.edges[a, b]["link"] for a, b in itertools.pairwise(nodes))
                for nodes in candidates[:k]]
        return self._shortest[key]

    def _graph(self) -> nx.DiGraph:
        if self._digraph is None:
            self._digraph = nx.DiGraph()
            for i, link in enumerate(self.network.links):
                self._digraph.add_edge(link.src, link.dst, link=i)
        return self._digraph

    def static_path(self, src: str, dst: str, seed: int) -> tuple[int, ...]:
        node, walk = src, ()
        while node != dst:
            options = self.next_hops(node, dst)
            nxt, link = options[_stable_hash(seed, node, dst) % len(options)]
            node, walk = nxt, (*walk, link)
        return walk


def equal_cost_paths(network: Network, src: str, dst: str, max_paths: int = 256
                     ) -> list[tuple[int, ...]]:
    """All shortest paths (as link-index tuples) from host src to host dst."""
    return _PathFinder(network, max_paths).paths(src, dst)


def _derangement(n: int, rng: np.random.Generator) -> np.ndarray:
    while True:  # expected e tries
        perm = rng.permutation(n)
        if n < 2 or not np.any(perm == np.arange(n)):
            return perm


def _pairs(group: ResolvedGroup, network: Network, rng: np.random.Generator
           ) -> list[tuple[str, str]]:
    """(source, destination) hosts of every flow of a group; a host never sends to itself."""
    pattern, field = group.traffic.pattern, group.field("traffic", "pattern")
    if len(network.hosts) < 2:
        raise ScenarioError(f"{field}: {pattern} needs two hosts; this topology has one")
    pairs = _pattern_pairs(group, network, rng)
    to_self = next((src for src, dst in pairs if src == dst), None)
    if to_self is not None:  # one_to_one where senders are also receivers (fat-tree, leaf-spine)
        raise ScenarioError(f"{field}: {pattern} would make {to_self} send to itself on "
                            "this topology; use permutation, stride or random")
    if not pairs:
        raise ScenarioError(f"{field}: {pattern} gives no flows on this topology")
    return pairs


def _pattern_pairs(group: ResolvedGroup, network: Network, rng: np.random.Generator
                   ) -> list[tuple[str, str]]:
    traffic = group.traffic
    hosts = network.hosts
    n = len(hosts)
    if traffic.pattern == "incast":
        index = traffic.receiver or 0
        if index >= len(network.receivers):
            count = len(network.receivers)
            raise ScenarioError(f"{group.field('traffic', 'receiver')}: {index} is out of range; "
                                f"this topology has {count} receivers (0..{count - 1})")
        receiver = network.receivers[index]
        senders = [h for h in network.senders if h != receiver]
        count = traffic.flows or len(senders)
        return [(senders[i % len(senders)], receiver) for i in range(count)]
    if traffic.pattern == "one_to_one":
        count = traffic.flows or len(network.senders)
        return [(network.senders[i % len(network.senders)],
                 network.receivers[i % len(network.receivers)]) for i in range(count)]
    if traffic.pattern == "explicit":
        pairs = []
        for src, dst in traffic.pairs or []:
            if not (0 <= src < n and 0 <= dst < n) or src == dst:
                raise ScenarioError(f"{group.field('traffic', 'pairs')}: [{src}, {dst}] must be "
                                    f"two different host indices in 0..{n - 1}")
            pairs.append((hosts[src], hosts[dst]))
        count = traffic.flows or len(pairs)
        return [pairs[i % len(pairs)] for i in range(count)]
    count = traffic.flows or n
    if traffic.pattern == "permutation":
        perm = _derangement(n, rng)
        return [(hosts[i % n], hosts[perm[i % n]]) for i in range(count)]
    if traffic.pattern == "stride":
        stride = traffic.stride or 1
        if stride % n == 0:
            raise ScenarioError(f"{group.field('traffic', 'stride')}: {stride} is a multiple of "
                                f"the {n} hosts; every host would send to itself")
        return [(hosts[i % n], hosts[(i + stride) % n]) for i in range(count)]
    src = rng.integers(0, n, count)
    dst = (src + rng.integers(1, n, count)) % n  # never src itself
    return [(hosts[a], hosts[b]) for a, b in zip(src, dst, strict=True)]


def _flows(scenario: Scenario, network: Network) -> list[Flow]:
    """The flows of every traffic group, group after group (one random stream for all, so a
    file without groups draws as it always has)."""
    rng = np.random.default_rng(scenario.si.run.seed)
    flows = []
    for index, group in enumerate(scenario.si.groups):
        traffic = group.traffic
        pairs = _pairs(group, network, rng)
        starts = traffic.start + (traffic.start_jitter or 0) * rng.random(len(pairs))
        if float(starts.max()) >= scenario.si.run.duration:
            raise ScenarioError(f"{group.field('traffic', 'start')}: every flow must start "
                                "before run.duration ends")
        flows += [Flow(s, d, float(t0), traffic.size, index, traffic.rounds)
                  for (s, d), t0 in zip(pairs, starts, strict=True)]
    return flows


def build_routes(scenario: Scenario, network: Network) -> Routes:
    """Flows of the scenario's traffic groups and their paths under its routing mode."""
    routing, seed, groups = scenario.si.routing, scenario.si.run.seed, scenario.si.groups
    flows = _flows(scenario, network)
    finder = _PathFinder(network, routing.max_paths)
    hamiltonian = (HamiltonianRoutes(network, routing, seed) if routing.mode == "hamiltonian"
                   else None)
    paths: list[tuple[int, ...]] = []
    path_subflow: list[int] = []
    path_weight: list[float] = []
    equal_cost: list[int] = []
    subflow_flow: list[int] = []
    explicit = _explicit_paths(network, flows, routing.paths, groups)
    for index, flow in enumerate(flows):
        transport = groups[flow.group].transport
        subflows = transport.subflows
        if hamiltonian is not None and CONTROLS[transport.cc].multipath:
            subflows = hamiltonian.subflows(flow.src)
        if flow.src not in finder.distance_to(flow.dst):
            raise ScenarioError(f"routing: no path from {flow.src} to {flow.dst}")
        options = min(finder.count(flow.src, flow.dst), routing.max_paths)
        equal_cost.append(options)
        given = explicit.get(index)
        if given is not None:
            chosen_paths = [[path] for path in given]
        elif hamiltonian is not None:
            chosen_paths = [[hamiltonian.path(flow.src, flow.dst, k)] for k in range(subflows)]
        elif transport.path_manager == "fullmesh":
            chosen_paths = _fullmesh(finder, routing.mode, flow, index, subflows, seed,
                                     groups[flow.group])
        else:
            key = (seed, index)
            chosen_paths = [_subflow_paths(finder, routing.mode, (flow.src, flow.dst),
                                           key if k == 0 else (*key, k), (k, subflows), options,
                                           seed) for k in range(subflows)]
        for chosen in chosen_paths:
            paths += chosen
            path_subflow += [len(subflow_flow)] * len(chosen)
            path_weight += [1.0 / len(chosen)] * len(chosen)
            subflow_flow.append(index)
    return Routes(flows, paths, path_subflow, path_weight, subflow_flow, equal_cost)


def _explicit_paths(network: Network, flows: list[Flow],
                    given: tuple[tuple[int, tuple[str, ...]], ...],
                    groups: tuple[ResolvedGroup, ...]) -> dict[int, list[tuple[int, ...]]]:
    """`[[routing.paths]]` as link-index paths per flow, in file order (one subflow each);
    ScenarioError naming the entry when a path does not fit its flow or the network, or a
    single-path flow is given several."""
    found: dict[int, list[tuple[int, ...]]] = {}
    for i, (index, nodes) in enumerate(given):
        where = f"routing.paths[{i}]"
        if index >= len(flows):
            raise ScenarioError(f"{where}.flow: {index} is out of range; the traffic has "
                                f"{len(flows)} flows (0..{len(flows) - 1})")
        flow = flows[index]
        if (nodes[0], nodes[-1]) != (flow.src, flow.dst):
            raise ScenarioError(f"{where}.nodes: runs {nodes[0]} -> {nodes[-1]}, but flow {index} "
                                f"runs {flow.src} -> {flow.dst}")
        links = []
        for a, b in itertools.pairwise(nodes):
            link = network.index.get(f"{a}->{b}")
            if link is None:
                raise ScenarioError(f"{where}.nodes: no link {a} -> {b} in the topology")
            links.append(link)
        if len(set(nodes)) < len(nodes):
            raise ScenarioError(f"{where}.nodes: visits a node twice (a path has no loops)")
        found.setdefault(index, []).append(tuple(links))
    for index, paths in sorted(found.items()):
        cc = groups[flows[index].group].transport.cc
        if len(paths) > 1 and not CONTROLS[cc].multipath:
            raise ScenarioError(f"routing.paths: flow {index} is given {len(paths)} paths "
                                f"(subflows), which need a multipath cc "
                                f"({multipath_controls()}); {cc!r} runs one subflow per flow")
    return found


def _subflow_paths(finder: _PathFinder, mode: str, ends: tuple[str, str], key: tuple[object, ...],
                   subflow_of: tuple[int, int], options: int, seed: int
                   ) -> list[tuple[int, ...]]:
    """The paths of one subflow between the nodes `ends` (ndiffports: every subflow on the
    flow's host pair, routed on its own); `subflow_of` is (this subflow, the connection's
    subflows). ECMP hashes `key` (a flow's first subflow is hashed as a single-path flow is, so
    that one subflow routes as TCP does); k-shortest gives subflow i the i-th path; the other
    modes give every subflow the same paths."""
    (src, dst), (subflow, subflows) = ends, subflow_of
    if mode == "static":
        return [finder.static_path(src, dst, seed)]
    if mode == "spray":
        return finder.paths(src, dst)
    if mode == "kshortest":
        ranked = finder.k_shortest(src, dst, min(subflows, finder.max_paths))
        return [ranked[subflow % len(ranked)]]
    if mode == "ecmp":
        return [finder.path(src, dst, _stable_hash(*key, src, dst) % options)]
    return [finder.path(src, dst, 0)]


def _fullmesh(finder: _PathFinder, mode: str, flow: Flow, index: int, subflows: int, seed: int,
              group: ResolvedGroup) -> list[list[tuple[int, ...]]]:
    """Fullmesh: `subflows` subflows on every (source NIC, destination NIC) pair, each out of
    its NIC, routed by `mode` between the two NICs' switches and into its destination NIC."""
    network = finder.network
    out = [link for _, link in finder.out.get(flow.src, [])]
    into = [network.link_between(node, flow.dst) for node in sorted(finder.into[flow.dst])]
    if len(out) * len(into) == 1:
        raise ScenarioError(f"{group.field('transport', 'path_manager')}: fullmesh needs "
                            f"multi-homed hosts ([topology] nics = 2, or graph hosts with several "
                            f"links); flow {index} runs {flow.src} -> {flow.dst}, one NIC each")
    found = []
    for pair, (first, last) in enumerate(itertools.product(out, into)):
        ends = (network.links[first].dst, network.links[last].src)
        options = min(finder.count(*ends), finder.max_paths)
        for k in range(subflows):
            inner = _subflow_paths(finder, mode, ends, (seed, index, "fullmesh", pair, k),
                                   (k, subflows), options, seed)
            found.append([(first, *path, last) for path in inner])
    return found
