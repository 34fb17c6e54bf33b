"""k = 4 fat-tree permutations: packet spraying against per-flow ECMP hashing (seeds 000/002).

With a permutation every host sends and receives one flow, so only the fabric can be contended:
ECMP hashes some flows onto the same aggregation or core link (collisions) while spraying spreads
each flow over all (k/2)^2 equal-cost paths and reaches the full bisection bandwidth. The
scenarios carry data alone (`ack_size = "0B"`): ACKs would also load the host ports, which then
queue where a line-rate flow meets its receiver's ACKs (`tests/test_acks.py`).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import pathflow
from helpers import PACKET
from pathflow.compile import compile_scenario
from pathflow.metrics import (
    bottleneck_frequency,
    hotspots,
    mean_network_utilization,
    summarize,
    throughput,
)

SCENARIO = Path(__file__).resolve().parents[1] / "examples" / "fattree_permutation.toml"
SEEDS = range(1, 6)
LINE_RATE = 1.25e8  # 1 Gb/s in bytes/s


def run(mode: str, seed: int) -> tuple[object, object]:
    scenario = pathflow.load_scenario(SCENARIO).with_updates(
        {"routing.mode": mode, "run.seed": seed, "run.duration": "40ms",
         "transport.ack_size": "0B"})
    return pathflow.simulate(scenario), compile_scenario(scenario)


@pytest.fixture(scope="module")
def runs() -> dict[str, list[tuple[object, object]]]:
    return {mode: [run(mode, seed) for seed in SEEDS] for mode in ("ecmp", "spray")}


def aggregate(ds: object) -> float:
    return float(throughput(ds).sum())


def test_spray_beats_ecmp_on_average(runs: dict) -> None:
    spray = np.mean([aggregate(ds) for ds, _ in runs["spray"]])
    ecmp = np.mean([aggregate(ds) for ds, _ in runs["ecmp"]])
    assert spray >= 0.98 * 16 * LINE_RATE  # full bisection: every host at line rate
    assert ecmp < 0.95 * spray


def flows_per_link(compiled: object) -> Counter:
    return compiled.routes.flows_per_link(compiled.network)


def test_ecmp_collisions_are_the_hotspots(runs: dict) -> None:
    """Standing queues form only on links that ECMP gave to two or more flows, every seed with a
    collision has one, and the hotspot ranking lists exactly those links first."""
    for ds, compiled in runs["ecmp"]:
        collided = {name for name, n in flows_per_link(compiled).items() if n >= 2}
        hot = hotspots(ds, top=len(ds.link))
        queued = {str(name) for name, q in zip(hot.link.values, hot.queue_mean.values,
                                               strict=True) if q > PACKET}
        assert queued <= collided, "a queue formed on a link that no two flows share"
        assert bool(queued) == bool(collided)
        assert {str(name) for name in hot.link.values[: len(queued)]} == queued
        assert all(float(hot.utilization.sel(link=name)) > 0.99 for name in queued)
        summary = summarize(ds)  # what `pathflow run` prints: convergence judged at the hotspot
        assert summary.convergence.link == summary.bottleneck == str(hot.link.values[0])


def test_bottlenecks_across_seeds_and_path_diversity(runs: dict) -> None:
    """Across ECMP seeds the bottleneck links are fabric links that two flows share in that seed;
    spraying has none. Seed 002's mean network utilization: 1 for spraying, 1/P for ECMP."""
    ecmp = [ds for ds, _ in runs["ecmp"]]
    frequency = bottleneck_frequency(ecmp)
    shared = Counter()
    for _, compiled in runs["ecmp"]:
        shared.update(name for name, n in flows_per_link(compiled).items() if n >= 2)
    for link, share in zip(frequency.link.values, frequency.values, strict=True):
        assert share <= shared[str(link)] / len(ecmp) + 1e-12
    assert float(frequency.max()) > 0
    assert float(bottleneck_frequency([ds for ds, _ in runs["spray"]]).max()) == 0
    assert mean_network_utilization(runs["spray"][0][0]) == pytest.approx(1.0)
    ecmp_mnu = mean_network_utilization(ecmp[0])
    equal_cost = ecmp[0].equal_cost_paths.values
    assert ecmp_mnu == pytest.approx(float((1 / equal_cost).mean()))
    assert ecmp_mnu < 0.5


def test_path_bytes_follow_the_subflows_routes() -> None:
    """MPTCP (LIA, 4 subflows hashed by ECMP): every byte a flow delivered is on one of its
    paths, subflows hashed onto one path share its slot, and the slots a flow uses are the
    distinct paths of its subflows' routes; mean network utilization recomputed from them."""
    scenario = pathflow.load_scenario(SCENARIO).with_updates(
        {"transport.cc": "lia", "transport.subflows": 4, "run.duration": "20ms"})
    ds, compiled = pathflow.simulate(scenario), compile_scenario(scenario)
    np.testing.assert_allclose(ds.path_bytes.sum("path").values,
                               ds.delivered.isel(time=-1).values, rtol=1e-9)
    routes = compiled.routes
    distinct = [len({p for p, f in zip(routes.paths, routes.path_flow, strict=True) if f == flow})
                for flow in range(len(routes.flows))]
    used = (ds.path_bytes > 0).sum("path").values
    np.testing.assert_array_equal(used, distinct)
    spread = ds.path_bytes.sum("path") / ds.path_bytes.max("path") / ds.equal_cost_paths
    assert mean_network_utilization(ds) == pytest.approx(float(spread.mean()))
    assert 1 / 4 <= mean_network_utilization(ds) < 1
