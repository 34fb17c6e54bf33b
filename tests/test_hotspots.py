"""Hotspots across hash seeds (`pathflow.hotspots`, `pathflow run --seeds`).

The truth the bottlenecks are checked against comes from the routes alone (`build_routes` for each
seed, links counted here, not by `Routes.flows_per_link`), on k = 4 fat-trees whose links all run
at one rate, so that a flow alone on its links is held only by its own NIC:

- a link that no two flows share is never a bottleneck (it receives at most one flow's rate,
  which its sender's NIC keeps at or below the link's capacity). This holds for data alone:
  the scenarios leave ACKs out (`ack_size = "0B"`), whose load makes a host port that carries
  a line-rate flow plus its host's ACKs a bottleneck too (`tests/test_acks.py`, validation case
  `ack_port_fluid_packet`);
- a link that two or more flows share, and that is the only shared link on the path of at least
  one of them, is always one: that flow meets no other flow anywhere else, so it takes whatever
  the shared link leaves, until the link is full and its queue holds the flow back;
- a shared link whose flows all share some other link too depends on the rates the other links
  leave. Where the max-min fair allocation (water-filling over the routes, every NIC at line
  rate) loads it below 90 % of its capacity, it is not one: DCTCP shares a link about equally
  among flows of similar round trips, so its flows are held elsewhere; the rest is not judged.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from typer.testing import CliRunner

import pathflow
from pathflow.cli import app
from pathflow.hotspots import seed_hotspots, seed_list
from pathflow.metrics import default_warmup
from pathflow.routing import build_routes
from pathflow.scenario import ScenarioError
from pathflow.topology import Network, build_network

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "fattree_permutation.toml"
LINE_RATE = 1.25e8  # 1 Gb/s in bytes/s
SEEDS = 6


def permutation() -> pathflow.Scenario:
    """16 DCTCP flows, a random permutation on a k = 4 fat-tree at 1 Gb/s, ECMP, 10 ms; data
    only (see the module docstring)."""
    return pathflow.load_scenario(EXAMPLE).with_updates({"run.duration": "10ms",
                                                         "transport.ack_size": "0B"})


@pytest.fixture(scope="module")
def ecmp() -> xr.Dataset:
    return seed_hotspots(permutation(), SEEDS)


def max_min_load(paths: list[tuple[int, ...]]) -> Counter[int]:
    """Per link, the load (in line rates) of the max-min fair rates of single-path flows on
    links of one capacity: raise every unfrozen flow alike until a link fills, freeze its flows,
    repeat (Bertsekas and Gallager's water-filling)."""
    rate = np.zeros(len(paths))
    frozen = np.zeros(len(paths), bool)
    while not frozen.all():
        room: dict[int, tuple[float, int]] = {}
        for f, path in enumerate(paths):
            for link in path:
                used, active = room.get(link, (0.0, 0))
                room[link] = (used + rate[f], active) if frozen[f] else (used, active + 1)
        level = min((1.0 - used) / active for used, active in room.values() if active)
        full = {link for link, (used, active) in room.items()
                if active and (1.0 - used) / active <= level + 1e-12}
        for f, path in enumerate(paths):
            if not frozen[f]:
                rate[f] = level
                frozen[f] = bool(full.intersection(path))
    load: Counter[int] = Counter()
    for f, path in enumerate(paths):
        load.update(dict.fromkeys(path, rate[f]))
    return load


def truth(scenario: pathflow.Scenario, network: Network
          ) -> tuple[Counter[str], set[str], set[str], set[str]]:
    """From the routes of `scenario` alone: flows per link, the links two or more flows share,
    those that must be bottlenecks (the only shared link on some flow's path) and those shared
    links that cannot be (max-min fair load below 90 % of capacity)."""
    routes = build_routes(scenario, network)
    count = Counter(i for path in routes.paths for i in path)
    names = {i: network.links[i].name for i in count}
    shared = {names[i] for i, n in count.items() if n >= 2}
    must = set()
    for path in routes.paths:
        on_path = [names[i] for i in path if count[i] >= 2]
        if len(on_path) == 1:
            must.add(on_path[0])
    load = max_min_load(routes.paths)
    idle = {names[i] for i, value in load.items() if value < 0.9} & shared
    return Counter({names[i]: n for i, n in count.items()}), shared, must, idle


def test_bottlenecks_are_the_collisions_of_each_seed(ecmp: xr.Dataset) -> None:
    scenario = permutation()
    network = build_network(scenario)
    assert list(ecmp.seed.values) == list(range(1, SEEDS + 1))  # [run] seed = 1 onwards
    fabric = ~ecmp.host_link.values
    judged = undetermined = 0
    lower, upper = np.zeros(len(ecmp.link)), np.zeros(len(ecmp.link))
    for seed in ecmp.seed.values:
        count, shared, must, idle = truth(scenario.with_updates({"run.seed": int(seed)}),
                                          network)
        assert not must & idle
        one = ecmp.sel(seed=seed)
        flagged = set(map(str, one.link.values[one.bottleneck.values]))
        assert must <= flagged, f"seed {seed}: a collision that must limit a flow is not flagged"
        assert flagged <= shared, f"seed {seed}: a link no two flows share is flagged"
        assert not flagged & idle, f"seed {seed}: a link max-min fairness leaves idle is flagged"
        offered = [count.get(str(name), 0) for name in one.link.values]
        np.testing.assert_array_equal(one.offered.values, offered)
        assert float(one.max_offered) == max(n for n, f in zip(offered, fabric, strict=True) if f)
        lower += np.isin(one.link.values, list(must))
        upper += np.isin(one.link.values, list(shared))
        judged += len(must | idle)
        undetermined += len(shared - must - idle)
        if must:  # a flow held by a collision: the fabric's busiest link is full
            assert float(one.max_utilization) > 0.99
    probability = ecmp.bottleneck_probability.values
    assert np.all(lower / SEEDS <= probability) and np.all(probability <= upper / SEEDS)
    assert len(lower.nonzero()[0]) >= SEEDS and undetermined < judged  # the check has teeth
    assert np.any((probability > 0) & (probability < 1))  # the hash decides
    # a permutation: every host sends and receives one flow, its links are never hot
    assert not ecmp.bottleneck.values[:, ecmp.host_link.values].any()
    assert np.all(ecmp.aggregate_throughput.values < 16 * LINE_RATE)
    assert ecmp.queue_mean.attrs["units"] == "bytes"
    assert ecmp.aggregate_throughput.attrs["units"] == "bytes/s"
    assert not any(ecmp.violations.values)


def test_a_batch_gives_each_seed_its_own_run(ecmp: xr.Dataset) -> None:
    """Seeds run together, padded and merged into one problem, are the runs of each alone."""
    for seed in (2, 5):
        alone = pathflow.simulate(permutation().with_updates({"run.seed": seed}))
        steady = alone.sel(time=alone.time > default_warmup(alone))
        for name, series in (("utilization", steady.utilization), ("queue_mean", steady.queue)):
            np.testing.assert_allclose(ecmp[name].sel(seed=seed).values,
                                       series.mean("time").values, rtol=1e-9, atol=1e-9)


def test_spraying_is_the_same_for_every_seed() -> None:
    """Spraying over a fixed pattern: no hash, so every seed gives the same answer. Every flow
    leaves its pod (stride 4 of 16 hosts), its quarter shares on the 4 uplinks of its pod's
    aggregation switches, which run at half the line rate: exactly those 16 links are full."""
    scenario = permutation().with_updates({
        "routing.mode": "spray", "traffic.pattern": "stride", "traffic.stride": 4,
        "topology.links": [{"tier": "agg-core", "link_rate": "500Mbps"}]})
    hot = seed_hotspots(scenario, [1, 4, 9])
    probability = hot.bottleneck_probability
    assert set(np.unique(probability.values)) == {0.0, 1.0}
    uplinks = {str(name) for name, src, tier in zip(hot.link.values, hot.link_src.values,
                                                    hot.link_tier.values, strict=True)
               if tier == "agg-core" and str(src).startswith("agg")}
    assert set(map(str, hot.link.values[probability.values == 1])) == uplinks
    for name in ("utilization", "queue_mean"):
        assert (hot[name] == hot[name].isel(seed=0)).all()
    np.testing.assert_allclose(hot.aggregate_throughput.values, 16 * LINE_RATE / 2, rtol=0.01)
    np.testing.assert_array_equal(hot.max_offered.values, 1.0)  # four quarters of flows


def test_seed_lists() -> None:
    scenario = permutation().with_updates({"run.seed": 7})
    assert seed_list(scenario, 3) == [7, 8, 9]
    assert seed_list(scenario, [4, 2]) == [4, 2]
    for bad in (0, [], [1, 1]):
        with pytest.raises(ScenarioError, match="seeds"):
            seed_list(scenario, bad)


def test_cli_prints_the_hot_links(tmp_path: Path) -> None:
    scenario = tmp_path / "fattree.toml"
    scenario.write_text(permutation().to_toml())
    out, picture = tmp_path / "hot.nc", tmp_path / "hot.png"
    result = CliRunner().invoke(app, ["run", str(scenario), "--seeds", str(SEEDS), "-q",
                                      "-o", str(out), "--plot", str(picture)])
    assert result.exit_code == 0, result.output
    assert "Links most often a bottleneck" in result.output
    assert "P(bottleneck)" in result.output
    assert "Largest fabric-link load over seeds (min / median / p90 / max)" in result.output
    assert "Aggregate throughput over seeds" in result.output
    saved = xr.open_dataset(out, engine="h5netcdf")
    assert saved.sizes == {"seed": SEEDS, "link": 96}
    assert saved.bottleneck.dtype == bool
    assert picture.stat().st_size > 10_000  # the network coloured by P(bottleneck)


@pytest.mark.parametrize(("extra", "message"), [
    (["--seeds", "0"], "--seeds: must be at least 1"),
    (["--seeds", "2", "--engine", "packet"], "--seeds: applies to --engine fluid only"),
])
def test_cli_refuses_bad_seeds(tmp_path: Path, extra: list[str], message: str) -> None:
    scenario = tmp_path / "fattree.toml"
    scenario.write_text(permutation().to_toml())
    result = CliRunner().invoke(app, ["run", str(scenario), *extra])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.output
