"""Seed 004's routing: MPTCP subflows over Hamiltonian paths from the ingress switch (`[routing]
mode = "hamiltonian"`; Jerome 2017, "Load-balancing in local and metro-area networks with MPTCP
and OpenFlow", sections 3.3 and 3.4).

Scheme
------
A host's ingress switch I has d links to other switches, and the host has d addresses: subflow k
(address k) leaves I by its k-th switch link (neighbours in name order) and then follows a
Hamiltonian path of the switch graph, I, that neighbour, then every other switch exactly once. At
the first switch on the path that the destination host is attached to, the subflow leaves the path
for the host (the thesis's higher-priority rules on the destination address), so it is routed
along a prefix of its path; a Hamiltonian path reaches every switch, so every destination is
reached. A single-path flow uses the host's first address (k = 0).

Paths are keyed by (ingress switch, port), shared by every host on the switch
(`routing.scheme = "shared"`, the thesis's NVS), or by (VLAN, ingress switch, port), so that hosts
of different VLANs on one switch get paths of their own (`"vlan"`, the thesis's VS;
`routing.vlans` lists the VLANs' hosts, unlisted hosts share one default VLAN). Each key in use
(every host's ingress switch and ports, under its VLAN) gets one of its candidate paths at random,
seeded by `[run] seed`; then, as the thesis balances them, while a switch link carries a number of
paths outside [ceil(mu - sigma), floor(mu + sigma)] (mean and standard deviation of the first
draw's per-link counts), one path across the most overloaded link (or, for an underloaded one,
one not across it) is drawn again, for at most `_ROUNDS` rounds; the assignment with the least
excess seen is kept.

Limits
------
Candidates are enumerated depth first in name order, at most `_CANDIDATES` per (ingress switch,
neighbour) and within `_SEARCH` steps, so on large meshes the random choice is among the first
ones found, and a graph whose Hamiltonian paths the search does not reach is refused. Hosts must
attach to one switch by one link. The thesis does not say how the server's packets (ACKs)
return: here they take the reverse of the data path.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Iterator, Sequence

import numpy as np

from pathflow.resolved import ResolvedRouting
from pathflow.scenario import ScenarioError
from pathflow.topology import Network

__all__ = ["HamiltonianRoutes"]

_CANDIDATES = 64  # Hamiltonian paths kept per (ingress switch, neighbour)
_ROUNDS = 1000  # balancing rounds at most
_SEARCH = 200_000  # partial paths the depth-first search may visit per (switch, neighbour)

Key = tuple[int, str, int]  # (VLAN, ingress switch, port); VLAN -1 under the shared scheme


class HamiltonianRoutes:
    """The Hamiltonian path of every key in use, chosen and balanced once per network."""

    def __init__(self, network: Network, routing: ResolvedRouting, seed: int) -> None:
        self.network = network
        hosts = set(network.hosts)
        self.neighbours: dict[str, list[str]] = {}
        self.ingress: dict[str, str] = {}
        for link in network.links:
            if link.src in hosts:
                if link.src in self.ingress:
                    raise ScenarioError(f"routing.mode: hamiltonian needs every host on one switch "
                                        f"by one link; {link.src} has several")
                self.ingress[link.src] = link.dst
            elif link.dst not in hosts:
                self.neighbours.setdefault(link.src, []).append(link.dst)
        for names in self.neighbours.values():
            names.sort()
        self.vlan = _vlans(routing, hosts)
        self.shared = routing.scheme == "shared"
        keys = sorted({self._key(host, port) for host in network.hosts
                       for port in range(len(self.neighbours.get(self.ingress[host], [])))})
        self.candidates = {key: self._candidates(key[1], key[2]) for key in keys}
        self.paths = _balanced(self.candidates, np.random.default_rng(seed))

    def _key(self, host: str, port: int) -> Key:
        return (-1 if self.shared else self.vlan.get(host, -1), self.ingress[host], port)

    def subflows(self, host: str) -> int:
        """The host's addresses: its ingress switch's links to other switches."""
        return max(1, len(self.neighbours.get(self.ingress[host], [])))

    def path(self, src: str, dst: str, subflow: int) -> tuple[int, ...]:
        """Subflow `subflow` of src -> dst as link indices: along its key's Hamiltonian path to
        the first switch dst is attached to."""
        ingress, egress = self.ingress[src], self.ingress[dst]
        nodes = [src, ingress]
        if ingress != egress:
            key = self._key(src, subflow % self.subflows(src))
            walk = self.paths[key]
            nodes += walk[1: walk.index(egress) + 1]
        nodes.append(dst)
        return tuple(self.network.link_between(a, b) for a, b in itertools.pairwise(nodes))

    def _candidates(self, ingress: str, port: int) -> list[tuple[str, ...]]:
        """Hamiltonian paths of the switch graph from `ingress` through its `port`-th
        neighbour (at most `_CANDIDATES`, depth first in name order)."""
        switches = len(self.neighbours)
        first = self.neighbours[ingress][port]
        found = list(_walks((ingress, first), self.neighbours, switches, _CANDIDATES))
        if not found:
            raise ScenarioError(f"routing.mode: no Hamiltonian path of the switches starts "
                                f"{ingress} -> {first}; the hamiltonian scheme needs one for "
                                "every link of an ingress switch")
        return found


def _walks(start: tuple[str, ...], neighbours: dict[str, list[str]], length: int,
           limit: int) -> Iterator[tuple[str, ...]]:
    """Simple paths extending `start` to `length` nodes, depth first, at most `limit`; the
    search stops after `_SEARCH` partial paths (finding a Hamiltonian path is NP-hard, and on a
    graph that has none, such as a fat-tree's, whose tiers make it bipartite with unequal
    sides, the search would not end)."""
    stack = [start]
    found = 0
    for _ in range(_SEARCH):
        if not stack or found == limit:
            return
        walk = stack.pop()
        if len(walk) == length:
            found += 1
            yield walk
            continue
        for node in reversed(neighbours.get(walk[-1], [])):  # name order after pop
            if node not in walk:
                stack.append((*walk, node))
    if not found:
        raise ScenarioError(f"routing.mode: no Hamiltonian path of the switches starting "
                            f"{' -> '.join(start)} found in {_SEARCH:,} steps of search; the "
                            "hamiltonian scheme is for meshes of a few tens of switches")


def _vlans(routing: ResolvedRouting, hosts: set[str]) -> dict[str, int]:
    """Each listed host's VLAN (its list's index); a one-line error for an unknown host or a
    host listed twice."""
    vlan: dict[str, int] = {}
    for index, members in enumerate(routing.vlans):
        for host in members:
            if host not in hosts:
                raise ScenarioError(f"routing.vlans[{index}]: {host!r} is not a host of this "
                                    "topology")
            if host in vlan:
                raise ScenarioError(f"routing.vlans[{index}]: {host!r} is already in "
                                    f"routing.vlans[{vlan[host]}]")
            vlan[host] = index
    return vlan


def _links(walk: Sequence[str]) -> Iterator[frozenset[str]]:
    return (frozenset(pair) for pair in itertools.pairwise(walk))


def _balanced(candidates: dict[Key, list[tuple[str, ...]]], rng: np.random.Generator
              ) -> dict[Key, tuple[str, ...]]:
    """A path per key: random, then redrawn until every switch link carries a number of paths
    within one standard deviation of the mean (see the module docstring)."""
    keys = list(candidates)
    choice = {key: int(rng.integers(len(candidates[key]))) for key in keys}
    every = {link for paths in candidates.values() for walk in paths for link in _links(walk)}

    def counts() -> Counter[frozenset[str]]:
        tally = Counter(dict.fromkeys(every, 0))
        for key in keys:
            tally.update(_links(candidates[key][choice[key]]))
        return tally

    tally = counts()
    if not tally:  # one switch: no switch link to balance
        return {key: candidates[key][index] for key, index in choice.items()}
    values = np.array(list(tally.values()), dtype=float)
    low = math.ceil(values.mean() - values.std())
    high = math.floor(values.mean() + values.std())

    def excess(tally: Counter[frozenset[str]]) -> int:
        return sum(max(low - c, 0, c - high) for c in tally.values())

    best, best_excess = dict(choice), excess(tally)
    for _ in range(_ROUNDS):
        if best_excess == 0:
            break
        link = max(sorted(tally, key=sorted), key=lambda e: max(low - tally[e], tally[e] - high))
        over = tally[link] > high
        movable = [key for key in keys if len(candidates[key]) > 1
                   and (link in set(_links(candidates[key][choice[key]]))) == over]
        if not movable:
            break
        key = movable[int(rng.integers(len(movable)))]
        choice[key] = int(rng.integers(len(candidates[key])))
        tally = counts()
        if excess(tally) < best_excess:
            best, best_excess = dict(choice), excess(tally)
    return {key: candidates[key][index] for key, index in best.items()}
