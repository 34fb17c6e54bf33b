"""Topology and routing against the closed-form structure of the networks."""

import itertools
from pathlib import Path

import numpy as np
import pytest

from helpers import mesh, star
from pathflow import Scenario
from pathflow.compile import compile_scenario
from pathflow.routing import build_routes, equal_cost_paths
from pathflow.topology import build_network


def fattree(k: int, **traffic: object) -> Scenario:
    return Scenario.from_dict({"topology": {"kind": "fattree", "k": k},
                               "traffic": {"pattern": "permutation", **traffic}})


@pytest.mark.parametrize("k", [4, 6, 8, 16])
def test_fattree_sizes(k: int) -> None:
    """Al-Fares et al.: k^3/4 hosts, 5k^2/4 switches, 3k^3/4 cables (two links each)."""
    network = build_network(fattree(k))
    nodes = {link.src for link in network.links}
    assert len(network.hosts) == k**3 // 4
    assert len(nodes) - len(network.hosts) == 5 * k * k // 4
    assert len(network.links) == 2 * 3 * k**3 // 4


def test_fattree_equal_cost_paths() -> None:
    """Inter-pod pairs have (k/2)^2 shortest paths of 6 hops, intra-pod k/2 of 4, same edge 1."""
    k = 8
    network = build_network(fattree(k))
    assert len(equal_cost_paths(network, "h0_0_0", "h3_1_2")) == (k // 2) ** 2
    assert {len(p) for p in equal_cost_paths(network, "h0_0_0", "h3_1_2")} == {6}
    assert len(equal_cost_paths(network, "h0_0_0", "h0_2_1")) == k // 2
    assert equal_cost_paths(network, "h0_0_0", "h0_0_1") == [
        (network.link_between("h0_0_0", "edge0_0"), network.link_between("edge0_0", "h0_0_1"))]


def test_every_path_is_a_connected_walk() -> None:
    network = build_network(fattree(4))
    for path in equal_cost_paths(network, "h0_0_0", "h2_1_1"):
        hops = [network.links[i] for i in path]
        assert hops[0].src == "h0_0_0" and hops[-1].dst == "h2_1_1"
        assert all(a.dst == b.src for a, b in itertools.pairwise(hops))


def test_fattree_k16_compiles() -> None:
    compiled = compile_scenario(fattree(16).with_updates({"routing.mode": "spray"}))
    assert len(compiled.routes.flows) == 1024
    assert compiled.problem.path_hops.shape[1] == 6


def test_leafspine_paths_equal_spines() -> None:
    scenario = Scenario.from_dict({"topology": {"kind": "leafspine", "leaves": 4, "spines": 3,
                                                "hosts_per_leaf": 2}})
    network = build_network(scenario)
    assert len(network.hosts) == 8
    assert len(equal_cost_paths(network, "h0_0", "h3_1")) == 3


def test_permutation_is_a_derangement() -> None:
    routes = build_routes(fattree(4), build_network(fattree(4)))
    sources = [f.src for f in routes.flows]
    destinations = [f.dst for f in routes.flows]
    assert sorted(sources) == sorted(destinations)
    assert all(s != d for s, d in zip(sources, destinations, strict=True))


def test_spray_splits_equally_and_ecmp_picks_one() -> None:
    spray = compile_scenario(fattree(4).with_updates({"routing.mode": "spray"})).routes
    ecmp = compile_scenario(fattree(4)).routes
    assert len(ecmp.paths) == len(ecmp.flows)
    for flow in range(len(spray.flows)):
        weights = [w for w, f in zip(spray.path_weight, spray.path_flow, strict=True) if f == flow]
        assert sum(weights) == pytest.approx(1.0)
        assert len(set(weights)) == 1


def test_flows_per_link_counts_each_flow_by_its_share() -> None:
    """A sprayed k = 4 permutation: a host link is offered its one flow whole (four quarter
    paths), and an inter-pod flow crosses the (k/2)^2 = 4 cores with a quarter on each."""
    compiled = compile_scenario(fattree(4).with_updates({"routing.mode": "spray"}))
    offered = compiled.routes.flows_per_link(compiled.network)
    assert all(offered[f"{host}->edge{host[1:4]}"] == 1 for host in compiled.network.hosts)
    inter_pod = sum(flow.src[1] != flow.dst[1] for flow in compiled.routes.flows)
    to_core = [name for name in offered if name.startswith("agg") and "->core" in name]
    assert all(offered[name] * 4 == int(offered[name] * 4) for name in to_core)
    assert sum(offered[name] for name in to_core) == inter_pod > 0


def test_static_routing_shares_one_tree_per_destination() -> None:
    """Every switch picks one next hop per destination: two flows to one host merge."""
    scenario = fattree(4, pattern="explicit", pairs=[[0, 15], [4, 15], [8, 15]])
    routes = compile_scenario(scenario.with_updates({"routing.mode": "static"})).routes
    network = build_network(scenario)
    next_hop: dict[str, str] = {}
    for path in routes.paths:
        for index in path:
            link = network.links[index]
            assert next_hop.setdefault(link.src, link.dst) == link.dst


def test_star_incast_round_robin() -> None:
    routes = compile_scenario(star(3, flows=7)).routes
    assert [f.src for f in routes.flows] == ["h0", "h1", "h2", "h0", "h1", "h2", "h0"]
    assert {f.dst for f in routes.flows} == {"r0"}


def test_base_rtt_of_the_seed_003_star() -> None:
    """Propagation 4 x 62.5 us + a 1500 B packet serialised twice at 100 Mb/s (120 us each) +
    a 64 B ACK twice (5.12 us each) = 0.50024 ms."""
    compiled = compile_scenario(star())
    assert float(compiled.problem.path_base_rtt[0]) == pytest.approx(
        4 * 62.5e-6 + 2 * 1500 * 8 / 100e6 + 2 * 64 * 8 / 100e6)


def test_ecmp_hashes_subflows_like_independent_uniform_draws() -> None:
    """ndiffports under ECMP: each of a connection's 4 subflows picks one of the 4 inter-pod
    paths of a k = 4 fat-tree as an independent uniform draw would, so the number of distinct
    paths a connection uses follows the occupancy distribution of 4 balls in 4 bins (1, 2, 3, 4
    paths with probabilities 4, 84, 144, 24 in 256); chi-square at the 0.1 % level."""
    from scipy.stats import chisquare

    scenario = Scenario.from_dict({
        "topology": {"kind": "fattree", "k": 4},
        "traffic": {"pattern": "random", "flows": 1200},
        "transport": {"cc": "lia", "subflows": 4},
        "routing": {"mode": "ecmp"},
    })
    routes = build_routes(scenario, build_network(scenario))
    used: dict[int, set[tuple[int, ...]]] = {}
    for path, flow in zip(routes.paths, routes.path_flow, strict=True):
        used.setdefault(flow, set()).add(path)
    counts = np.bincount([len(used[f]) for f in range(len(routes.flows))
                          if routes.equal_cost[f] == 4], minlength=5)[1:]
    expected = np.array([4, 84, 144, 24]) / 256 * counts.sum()
    assert counts.sum() > 500
    assert chisquare(counts, expected).pvalue > 1e-3, (counts, expected)


def test_ecmp_choices_of_two_flows_are_independent_across_seeds() -> None:
    """Hotspots across seeds (`pathflow run --seeds`) need each seed to re-draw every flow's
    path independently: over 400 seeds, the joint choices of two flows of a k = 4 permutation
    between pods are uniform over the 4 x 4 pairs (chi-square at the 0.1 % level). CRC-32 keys
    that differ only in the seed gave 4 of the 16 pairs."""
    from scipy.stats import chisquare

    base = Scenario.from_dict({"topology": {"kind": "fattree", "k": 4},
                               "traffic": {"pattern": "explicit", "pairs": [[0, 5], [1, 9]]},
                               "routing": {"mode": "ecmp"}})
    network = build_network(base)
    joint = np.zeros((4, 4), int)
    for seed in range(1, 401):
        routes = build_routes(base.with_updates({"run.seed": seed}), network)
        first, second = (equal_cost_paths(network, f.src, f.dst).index(path)
                         for f, path in zip(routes.flows, routes.paths, strict=True))
        joint[first, second] += 1
    assert chisquare(joint.ravel()).pvalue > 1e-3, joint


def test_kshortest_gives_subflow_i_the_ith_shortest_loopless_path(tmp_path: Path) -> None:
    """Against brute force: every loopless walk from A to B over the mesh's links, ordered by
    hop count and then by node names; subflow i of a 6-subflow connection takes walk i mod 4
    (the mesh has four). A single-path flow under kshortest routes as under shortest."""
    scenario = mesh(tmp_path, 6, "kshortest")
    network = build_network(scenario)
    links = {(link.src, link.dst): i for i, link in enumerate(network.links)}
    walks = []
    switches = ["S1", "S2", "S3", "S4"]
    for size in range(1, len(switches) + 1):
        for middle in itertools.permutations(switches, size):
            nodes = ["A", *middle, "B"]
            if all(pair in links for pair in itertools.pairwise(nodes)):
                walks.append(nodes)
    walks.sort(key=lambda nodes: (len(nodes), nodes))
    assert len(walks) == 4
    expected = [tuple(links[pair] for pair in itertools.pairwise(walks[i % 4])) for i in range(6)]
    assert build_routes(scenario, network).paths == expected
    for src, dst in (("h0_0_0", "h3_1_1"), ("h1_0_1", "h1_1_0")):
        fat = Scenario.from_dict({"topology": {"kind": "fattree", "k": 4}, "traffic": {
            "pattern": "explicit", "pairs": [[0, 1]]}})
        hosts = build_network(fat).hosts
        pair = {"traffic.pairs": [[hosts.index(src), hosts.index(dst)]]}
        by_mode = {mode: build_routes(fat.with_updates({**pair, "routing.mode": mode}),
                                      build_network(fat)).paths for mode in ("kshortest",
                                                                             "shortest")}
        assert by_mode["kshortest"] == by_mode["shortest"]
