"""Seed 004's Hamiltonian-path routing (`routing.mode = "hamiltonian"`, pathflow.hamiltonian) on
the thesis's Topology 1, checked by brute force: every subflow leaves its ingress switch by its
own link, follows a Hamiltonian path of the switches and leaves it at the destination's switch;
the paths in use are the thesis's 22 (VLAN-specific) and its link counts fall in its range."""

from __future__ import annotations

import itertools
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import networkx as nx
import pytest

from pathflow.hamiltonian import HamiltonianRoutes
from pathflow.routing import build_routes
from pathflow.scenario import Scenario, ScenarioError
from pathflow.topology import build_network
from pathflow.validation.cases.mesh import ATTACHED, LOADS, SWITCH_EDGES, scenario


def _built(scheme: str, load: str = "high", seed: int = 1) -> tuple[Any, Any, Any]:
    with tempfile.TemporaryDirectory() as folder:
        built = scenario(scheme, load, seed, Path(folder))
        network = build_network(built)
        return built, network, build_routes(built, network)


@pytest.mark.parametrize("scheme", ["VS", "NVS"])
def test_subflows_follow_hamiltonian_prefixes(scheme: str) -> None:
    _, network, routes = _built(scheme)
    switches = nx.Graph(SWITCH_EDGES)
    for flow_index, flow in enumerate(routes.flows):
        subflows = [s for s, f in enumerate(routes.subflow_flow) if f == flow_index]
        ingress, egress = ATTACHED[flow.src], ATTACHED[flow.dst]
        neighbours = sorted(switches[ingress])
        assert len(subflows) == len(neighbours)  # one per address: the ingress switch's links
        for k, subflow in enumerate(subflows):
            (path,) = [p for p, s in zip(routes.paths, routes.path_subflow, strict=True)
                       if s == subflow]
            nodes = [network.links[path[0]].src] + [network.links[i].dst for i in path]
            hops = nodes[1:-1]
            assert (nodes[0], nodes[-1]) == (flow.src, flow.dst)
            assert hops[0] == ingress and hops[-1] == egress
            assert len(set(hops)) == len(hops)  # a simple path
            assert egress not in hops[:-1]  # left at the first switch of the destination
            if ingress != egress:
                assert hops[1] == neighbours[k]  # subflow k leaves by the k-th link
            # it extends to a Hamiltonian path of the switches
            rest = set(switches) - set(hops)
            assert any(nx.is_path(switches, hops + list(order))
                       for order in itertools.permutations(rest))


def test_reno_takes_the_first_address() -> None:
    with tempfile.TemporaryDirectory() as folder:
        base = scenario("NVS", "low", 1, Path(folder))
        reno = base.with_updates({"transport.cc": "reno"})
        routes = build_routes(reno, build_network(reno))
    assert routes.subflow_flow == list(range(len(LOADS["low"])))


@pytest.mark.parametrize(("scheme", "keys"), [("VS", 22), ("NVS", 14)])
def test_the_thesis_paths_and_their_balance(scheme: str, keys: int) -> None:
    """VLAN-specific paths: one per (VLAN, ingress switch, port) of the hosts, the 22 that the
    thesis's link counts (sum 88, four links each) imply; with the balancing, every link
    carries 10 to 15 of them, the thesis's range (its Table 3.3), whatever the draw."""
    for seed in range(1, 9):
        built, network, _ = _built(scheme, seed=seed)
        routes = HamiltonianRoutes(network, built.si.routing, seed)
        assert len(routes.paths) == keys
        counts = Counter(frozenset(pair) for walk in routes.paths.values()
                         for pair in itertools.pairwise(walk))
        assert sum(counts.values()) == 4 * keys
        if scheme == "VS":
            assert min(counts.values()) >= 10 and max(counts.values()) <= 15, counts


def _graph(tmp_path: Path, edges: list[str], routing: dict[str, Any],
           transport: dict[str, Any] | None = None) -> Scenario:
    (tmp_path / "edges.csv").write_text("src,dst\n" + "\n".join(edges) + "\n")
    return Scenario.from_dict({
        "topology": {"kind": "graph", "edges": "edges.csv"},
        "traffic": {"pattern": "explicit", "pairs": [[0, 1]]},
        "transport": transport or {"cc": "balia"}, "routing": routing}, base_dir=tmp_path)


def test_bad_hamiltonian_input_is_one_line(tmp_path: Path) -> None:
    ring = ["a,S1", "b,S3", "S1,S2", "S2,S3", "S3,S1"]
    with pytest.raises(ScenarioError, match=r"^routing: 'vlans' is used by mode = "
                                            r"'hamiltonian' only$"):
        _graph(tmp_path, ring, {"mode": "ecmp", "vlans": [["a"]]})
    with pytest.raises(ScenarioError, match=r"^transport\.subflows: routing\.mode = "
                                            r"'hamiltonian' gives a connection one subflow"):
        _graph(tmp_path, ring, {"mode": "hamiltonian"}, {"cc": "balia", "subflows": 2})
    with pytest.raises(ScenarioError, match=r"^transport\.path_manager: routing\.mode = "
                                            r"'hamiltonian' .* leave path_manager at 'ndiffports'"):
        _graph(tmp_path, ring, {"mode": "hamiltonian"}, {"cc": "balia",
                                                         "path_manager": "fullmesh"})
    cases = [
        (ring, {"mode": "hamiltonian", "vlans": [["a", "zz"]]},
         r"^routing\.vlans\[0\]: 'zz' is not a host of this topology$"),
        (ring, {"mode": "hamiltonian", "vlans": [["a"], ["a"]]},
         r"^routing\.vlans\[1\]: 'a' is already in routing\.vlans\[0\]$"),
        (["a,S1", "b,S2", "c,S3", "S0,S1", "S0,S2", "S0,S3"], {"mode": "hamiltonian"},
         r"^routing\.mode: no Hamiltonian path of the switches starts S1 -> S0"),
    ]
    for edges, routing, message in cases:
        scenario_ = _graph(tmp_path, edges, routing)
        with pytest.raises(ScenarioError, match=message):
            build_routes(scenario_, build_network(scenario_))
    fattree = Scenario.from_dict({"topology": {"kind": "fattree", "k": 6},  # bipartite: none
                                  "transport": {"cc": "lia"}, "routing": {"mode": "hamiltonian"}})
    with pytest.raises(ScenarioError, match=r"^routing\.mode: no Hamiltonian path of the "
                                            r"switches starting edge0_0 -> agg0_0 found in "
                                            r"200,000 steps of search"):
        build_routes(fattree, build_network(fattree))
    (tmp_path / "edges.csv").write_text("src,dst\na,S1\na,S2\nb,S2\nS1,S2\n")
    two_nics = Scenario.from_dict({
        "topology": {"kind": "graph", "edges": "edges.csv", "hosts": ["a", "b"]},
        "traffic": {"pattern": "explicit", "pairs": [[0, 1]]},
        "transport": {"cc": "balia"}, "routing": {"mode": "hamiltonian"}}, base_dir=tmp_path)
    with pytest.raises(ScenarioError, match=r"^routing\.mode: hamiltonian needs every host on "
                                            r"one switch by one link; a has several$"):
        build_routes(two_nics, build_network(two_nics))


def test_one_switch_has_nothing_to_balance() -> None:
    """A star (one switch) has no switch link: every path is the switch alone (found by the
    fuzz test, where the balancing divided by zero links)."""
    star = Scenario.from_dict({"topology": {"kind": "star", "senders": 2},
                               "routing": {"mode": "hamiltonian"}})
    routes = build_routes(star, build_network(star))
    assert [len(path) for path in routes.paths] == [2, 2]
