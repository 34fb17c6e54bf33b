"""The network picture: tiered and layered layouts, cables coloured by the busier direction, queue
markers at the transmitting end, the picture of a result, and `pathflow run --plot` writing it."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from matplotlib import colormaps
from matplotlib.collections import LineCollection, PathCollection
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from typer.testing import CliRunner

from helpers import TINY_TOML
from pathflow.cli import app
from pathflow.metrics import bottleneck_frequency, default_warmup
from pathflow.network_layout import layout
from pathflow.network_plot import QUEUE_AT, network_of, plot_network, plot_network_result
from pathflow.scenario import Scenario
from pathflow.simulate import simulate
from pathflow.topology import Network, build_network

Position = tuple[float, float]


def network(**topology: object) -> Network:
    return build_network(Scenario.from_dict({"name": "n", "topology": topology,
                                             "run": {"duration": "1ms"}}))


def fattree(k: int) -> Network:
    return network(kind="fattree", k=k)


def cables(fig: Figure) -> LineCollection:
    (lines,) = [c for c in fig.axes[0].collections if isinstance(c, LineCollection)]
    return lines


def segment_nodes(lines: LineCollection, pos: dict[str, Position]) -> list[frozenset[str]]:
    """The two nodes at the ends of each drawn segment, found by position."""
    at = {(round(x, 9), round(y, 9)): name for name, (x, y) in pos.items()}
    return [frozenset(at[(round(float(x), 9), round(float(y), 9))] for x, y in segment)
            for segment in lines.get_segments()]


def pod(name: str) -> int:
    return int(re.match(r"(?:h|edge|agg)(\d+)", name)[1])


def test_fattree_layout_core_agg_edge_hosts_top_down_pods_left_to_right() -> None:
    net = fattree(4)
    pos = layout(net)
    assert len(pos) == 36 and set(pos) == {n for link in net.links for n in (link.src, link.dst)}
    tiers = [[n for n in pos if n.startswith(prefix)] for prefix in ("core", "agg", "edge", "h")]
    assert [len(t) for t in tiers] == [4, 8, 8, 16]
    for upper, lower in itertools.pairwise(tiers):
        assert min(pos[n][1] for n in upper) > max(pos[n][1] for n in lower)
    in_pods = [n for n in pos if not n.startswith("core")]
    for p in range(3):  # every node of pod p lies left of every node of pod p + 1
        assert max(pos[n][0] for n in in_pods if pod(n) == p) < \
            min(pos[n][0] for n in in_pods if pod(n) == p + 1)
    for edge in tiers[2]:  # an edge switch stands over its own hosts
        xs = [pos[n][0] for n in tiers[3] if n.startswith("h" + edge[4:] + "_")]
        assert len(xs) == 2 and min(xs) <= pos[edge][0] <= max(xs)


def test_fattree_k8_every_node_placed_apart_and_stable() -> None:
    net = fattree(8)
    pos = layout(net)
    assert len(pos) == 208
    assert len({(round(x, 9), round(y, 9)) for x, y in pos.values()}) == 208
    assert layout(fattree(8)) == pos


def test_leafspine_and_dumbbell_layouts() -> None:
    pos = layout(network(kind="leafspine", leaves=3, spines=2, hosts_per_leaf=2))
    spines, leaves = ["spine0", "spine1"], ["leaf0", "leaf1", "leaf2"]
    hosts = [n for n in pos if n.startswith("h")]
    assert len(pos) == 11
    assert min(pos[s][1] for s in spines) > max(pos[n][1] for n in leaves) > \
        max(pos[h][1] for h in hosts)
    assert pos["leaf0"][0] < pos["leaf1"][0] < pos["leaf2"][0]
    pos = layout(network(kind="dumbbell", senders=3))  # left to right, as the data flows
    senders, receivers = ["h0", "h1", "h2"], ["r0", "r1", "r2"]
    assert max(pos[h][0] for h in senders) < pos["s0"][0] < pos["s1"][0] < \
        min(pos[r][0] for r in receivers)
    assert len({pos[h] for h in senders}) == 3


def test_graph_layout_rows_by_hops_from_hosts(tmp_path: Path) -> None:
    (tmp_path / "edges.csv").write_text(
        "src,dst\na,s1\nb,s1\ns1,s2\ns1,s3\ns2,s4\ns3,s4\ns2,s3\ns4,c\ns4,d\ne,s2\n")
    net = build_network(Scenario.from_dict(
        {"name": "g", "topology": {"kind": "graph", "edges": "edges.csv"},
         "run": {"duration": "1ms"}}, base_dir=tmp_path))
    pos = layout(net)
    assert set(pos) == {"a", "b", "c", "d", "e", "s1", "s2", "s3", "s4"}
    assert {pos[h][1] for h in "abcde"} == {0.0}  # the hosts (degree 1) at the bottom
    assert min(pos[s][1] for s in ("s1", "s2", "s4")) > 0  # one hop up
    assert pos["s3"][1] > max(pos[s][1] for s in ("s1", "s2", "s4"))  # two hops up
    assert len(set(pos.values())) == 9 and layout(net) == pos


def test_cable_colour_is_the_colormap_of_the_busier_direction() -> None:
    net = fattree(4)
    rng = np.random.default_rng(7)
    utilization = rng.uniform(0.0, 1.0, len(net.links))
    fig = plot_network(net, utilization, cmap="viridis")
    lines = cables(fig)
    ends = segment_nodes(lines, layout(net))
    assert len(ends) == len(net.links) // 2 == len(set(ends))  # each cable once
    expected = np.array([max(utilization[net.link_between(*sorted(pair))],
                             utilization[net.link_between(*sorted(pair, reverse=True))])
                         for pair in ends])
    np.testing.assert_allclose(lines.get_array(), expected)
    lines.update_scalarmappable()
    np.testing.assert_allclose(lines.get_edgecolor(),
                               colormaps["viridis"](Normalize(0.0, 1.0)(expected)))
    assert np.all(np.diff(lines.get_array()) >= 0)  # the busiest drawn last, on top


def test_probability_colouring_label_and_missing_links(tmp_path: Path) -> None:
    net = fattree(4)
    hot = ["agg0_0->core0_0", "core0_0->agg0_0", "edge1_1->agg1_0"]
    prob = xr.DataArray([0.25, 0.75, 1.0], dims="link", coords={"link": hot})
    fig = plot_network(net, prob, tmp_path / "p.png", label="P(bottleneck)")
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    lines = cables(fig)
    ends = segment_nodes(lines, layout(net))
    value = dict(zip(ends, lines.get_array().filled(np.nan), strict=True))
    assert value[frozenset(("agg0_0", "core0_0"))] == 0.75  # the larger direction
    assert value[frozenset(("edge1_1", "agg1_0"))] == 1.0
    assert sum(np.isfinite(v) for v in value.values()) == 2  # the rest: no value, grey
    lines.update_scalarmappable()
    grey = lines.get_edgecolor()[list(value).index(frozenset(("h0_0_0", "edge0_0")))]
    np.testing.assert_allclose(grey, lines.cmap.get_bad())
    assert [ax.get_ylabel() for ax in fig.axes][1] == "P(bottleneck)"


def test_queue_markers_sit_near_the_transmitting_end_sized_by_queue() -> None:
    net = fattree(4)
    pos = layout(net)
    queues = {"core1_1->agg3_1": 40.0, "edge2_0->h2_0_1": 10.0, "agg0_0->edge0_0": 0.5}
    fig = plot_network(net, np.zeros(len(net.links)), queues=queues, min_queue=1.0)
    markers = [c for c in fig.axes[0].collections
               if isinstance(c, PathCollection) and len(c.get_offsets()) == 2]
    assert len(markers) == 1  # the 0.5-packet queue is below min_queue
    offsets, sizes = np.asarray(markers[0].get_offsets()), markers[0].get_sizes()
    size = {}
    for name in ("core1_1->agg3_1", "edge2_0->h2_0_1"):
        src, dst = (np.array(pos[n]) for n in name.split("->"))
        (row,) = np.flatnonzero(np.all(np.isclose(offsets, src + QUEUE_AT * (dst - src)), axis=1))
        size[name] = sizes[row]
    assert size["core1_1->agg3_1"] > size["edge2_0->h2_0_1"]  # 40 packets against 10


def test_values_of_the_wrong_length_are_refused() -> None:
    with pytest.raises(ValueError, match="3 values for 96 links"):
        plot_network(fattree(4), [0.1, 0.2, 0.3])


@pytest.fixture(scope="module")
def fattree_result() -> xr.Dataset:
    text = (Path(__file__).resolve().parents[1] / "examples" / "fattree_permutation.toml"
            ).read_text().replace('"50ms"', '"2ms"')
    return simulate(Scenario.from_toml(text))


def test_result_picture_is_the_steady_mean_utilization(fattree_result: xr.Dataset) -> None:
    ds = fattree_result
    net = network_of(ds)
    rebuilt = build_network(Scenario.from_toml(ds.attrs["scenario"]))
    assert net.links == rebuilt.links and set(net.hosts) == set(rebuilt.hosts)
    fig = plot_network_result(ds)
    steady = ds.utilization.sel(time=ds.time > default_warmup(ds)).mean("time")
    lines = cables(fig)
    ends = segment_nodes(lines, layout(net))
    expected = [max(float(steady.sel(link=f"{a}->{b}")), float(steady.sel(link=f"{b}->{a}")))
                for a, b in (sorted(pair) for pair in ends)]
    np.testing.assert_allclose(lines.get_array(), expected, rtol=1e-6)
    assert max(expected) > 0.5  # a permutation keeps links busy: not a blank picture
    assert "utilization" in fig.axes[1].get_ylabel()


def test_result_coloured_by_bottleneck_probability(fattree_result: xr.Dataset) -> None:
    """What a run over seeds would draw: `bottleneck_frequency` (sorted, not in link order)."""
    ds = fattree_result
    prob = bottleneck_frequency([ds, ds.assign(utilization=ds.utilization * 0)])
    fig = plot_network_result(ds, values=prob, label="P(bottleneck)")
    lines = cables(fig)
    ends = segment_nodes(lines, layout(network_of(ds)))
    expected = [max(float(prob.sel(link=f"{a}->{b}")), float(prob.sel(link=f"{b}->{a}")))
                for a, b in (sorted(pair) for pair in ends)]
    np.testing.assert_allclose(lines.get_array(), expected)
    assert set(expected) <= {0.0, 0.5} and 0.5 in expected  # bottleneck in one run of two
    assert fig.axes[1].get_ylabel() == "P(bottleneck)"
    assert "P(bottleneck)" in fig.axes[0].get_title()


def test_cli_run_plot_writes_the_network_beside_the_time_series(tmp_path: Path) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text(TINY_TOML)
    result = CliRunner().invoke(app, ["run", str(scenario), "-q", "--plot",
                                      str(tmp_path / "out.png")])
    assert result.exit_code == 0, result.output
    for name in ("out.png", "out.network.png"):
        data = (tmp_path / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000, name
        # rich wraps a long path anywhere (pytest-xdist's are long): compare without spaces
        assert f"wrote{tmp_path / name}" in "".join(result.output.split())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.network.png", "out.png", "s.toml"]
    help_text = " ".join(CliRunner().invoke(app, ["run", "--help"]).output.split())
    assert "network.png" in help_text
