"""Pictures of a sweep over any scenario keys (issue 15): `plot_grid` and `plot_verdict_map` on
synthetic Datasets of the sweep's layout, and `plot_sweep` unchanged on (cc, flows) and (flows,)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from matplotlib.axes import Axes
from matplotlib.collections import PolyCollection
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle

import pathflow.plots as plots
from pathflow.plots import (
    NOT_RUN,
    STATE_COLOURS,
    STATE_MARKERS,
    plot_grid,
    plot_sweep,
    plot_verdict_map,
)
from pathflow.verdict import STATES

FLOWS = [2, 4, 8, 16]
# name: (values, the text the user wrote, units, scenario key)
AXES = {
    "cc": (["reno", "dctcp"], ["reno", "dctcp"], None, "cc"),
    "threshold": ([30e3, 60e3, 97.5e3], ["20pkt", "40pkt", "65pkt"], "B", "aqm.threshold"),
    "link_rate": ([1.25e9, 5e9], ["10Gbps", "40Gbps"], "B/s", "topology.link_rate"),
    "seed": ([0, 1, 2, 3], ["0", "1", "2", "3"], None, None),
}
SUMMARIES = {"aggregate_throughput": "bytes/s", "jain": "1", "queue_p99": "bytes",
             "queue_max": "bytes", "latency_mean": "s", "latency_p99": "s",
             "below_standing": "s", "convergence_time": "s", "state": "1",
             "round_goodput": "bytes/s", "rounds_completed": "1"}


def grid(*axes: str, flows: list[int] = FLOWS, states: np.ndarray | None = None
         ) -> xr.Dataset:
    """A sweep's Dataset over `axes` (names in AXES) and `flows`: summaries (*axes, flows) with
    made-up values, `states` (random codes if None), per-link series, link coords, attrs."""
    rng = np.random.default_rng(0)
    shape = (*(len(AXES[name][0]) for name in axes), len(flows))
    dims = (*axes, "flows")
    data = {name: (dims, rng.uniform(1.0, 2.0, shape), {"units": units})
            for name, units in SUMMARIES.items()}
    data["queue_p99"] = (dims, rng.uniform(1e3, 1e5, shape), {"units": "bytes"})
    data["latency_p99"] = (dims, rng.uniform(1e-6, 1e-4, shape), {"units": "s"})
    data["aggregate_throughput"] = (dims, rng.uniform(1e8, 1e9, shape), {"units": "bytes/s"})
    data["state"] = (dims, rng.integers(0, len(STATES), shape).astype(float)
                     if states is None else states, {"units": "1"})
    for name in ("round_goodput", "rounds_completed"):
        data[name] = (dims, np.full(shape, np.nan), {"units": SUMMARIES[name]})
    data["queue"] = ((*dims, "time", "link"), rng.uniform(0, 1e4, (*shape, 5, 2)),
                     {"units": "bytes"})
    coords: dict[str, object] = {"flows": flows, "time": np.linspace(0, 1e-2, 5),
                                 "link": ["a->b", "b->c"],
                                 "capacity": ("link", [1.25e9, 1.25e9]),
                                 "buffer": ("link", [2e5, 2e5])}
    for name in axes:
        values, labels, units, key = AXES[name]
        attrs = {"units": units, "long_name": key} if units else {}
        coords[name] = (name, values, attrs)
        coords[f"{name}_label"] = (name, labels)
    return xr.Dataset(data, coords, {"scenario_name": "grid", "packet_bytes": 1500,
                                     "standing_queue": 15000.0})


def solid(axes: Axes) -> list[Line2D]:
    """The lines of a panel (not the state markers or the legend's key)."""
    return [line for line in axes.lines if line.get_linestyle() == "-"]


def legend_texts(axes: Axes) -> list[str]:
    return [text.get_text() for text in axes.get_legend().get_texts()]


def test_grid_without_extra_axis_is_one_line_with_state_markers() -> None:
    states = np.array([0.0, 2.0, 2.0, np.nan])
    ds = grid(states=states)
    fig = plot_grid(ds)
    (panel,) = fig.axes
    (line,) = solid(panel)
    np.testing.assert_allclose(line.get_xdata(), FLOWS)
    np.testing.assert_allclose(line.get_ydata(), ds.queue_p99.values / 1e3)
    assert panel.get_ylabel() == "queue_p99 (KB)"
    markers = {line.get_marker(): line for line in panel.lines if line.get_linestyle() == "None"
               and len(line.get_xdata())}
    assert list(markers[STATE_MARKERS["lossy"]].get_xdata()) == [4, 8]
    assert list(markers[STATE_MARKERS["settled"]].get_xdata()) == [2]
    assert len(markers) == 2  # the point not run has no marker
    assert legend_texts(panel) == ["queue_p99", "settled", "lossy"]


def test_grid_one_axis_is_a_line_per_value_named_by_its_label() -> None:
    ds = grid("threshold")
    (panel,) = plot_grid(ds, metric="latency_p99").axes
    lines = solid(panel)
    assert [line.get_label() for line in lines] == ["20pkt", "40pkt", "65pkt"]
    assert len({line.get_color() for line in lines}) == 3
    np.testing.assert_allclose(lines[1].get_ydata(), ds.latency_p99.isel(threshold=1) * 1e6)
    assert panel.get_ylabel() == "latency_p99 (us)"
    assert panel.get_legend().get_title().get_text() == "threshold"
    assert legend_texts(panel)[:3] == ["20pkt", "40pkt", "65pkt"]


def test_grid_two_axes_facets_by_the_second() -> None:
    ds = grid("threshold", "link_rate")
    fig = plot_grid(ds, metric="aggregate_throughput")
    assert [panel.get_title() for panel in fig.axes] == ["link_rate=10Gbps", "link_rate=40Gbps"]
    for j, panel in enumerate(fig.axes):
        lines = solid(panel)
        assert len(lines) == 3
        for i, line in enumerate(lines):
            np.testing.assert_allclose(
                line.get_ydata(), ds.aggregate_throughput.isel(threshold=i, link_rate=j) * 8e-9)
    assert fig.axes[0].get_ylabel() == "aggregate_throughput (Gb/s)"
    assert "mean" not in fig.texts[0].get_text()  # nothing reduced


def test_grid_reduces_seeds_to_mean_and_band() -> None:
    ds = grid("threshold", "link_rate", "seed")
    fig = plot_grid(ds)
    assert len(fig.axes) == 2
    assert "min to max over seed (4)" in fig.texts[0].get_text()
    for j, panel in enumerate(fig.axes):
        lines = solid(panel)
        assert [line.get_label() for line in lines] == ["20pkt", "40pkt", "65pkt"]
        bands = [c for c in panel.collections if isinstance(c, PolyCollection)]
        assert len(bands) == 3
        for i, (line, band) in enumerate(zip(lines, bands, strict=True)):
            seeds = ds.queue_p99.isel(threshold=i, link_rate=j) / 1e3
            np.testing.assert_allclose(line.get_ydata(), seeds.mean("seed"))
            top = band.get_paths()[0].vertices[:, 1]
            assert top.max() == pytest.approx(float(seeds.max()))
            assert top.min() == pytest.approx(float(seeds.min()))
        # no state markers on a reduced line
        assert all(line.get_linestyle() == "-" for line in panel.lines)


def test_grid_seed_is_reduced_wherever_it_stands_and_more_axes_too() -> None:
    fig = plot_grid(grid("threshold", "seed"))
    (panel,) = fig.axes
    assert len(solid(panel)) == 3
    assert "over seed (4)" in fig.texts[0].get_text()
    fig = plot_grid(grid("cc", "threshold", "link_rate", "seed"))
    assert len(fig.axes) == 3  # a facet per threshold
    assert all(legend_texts(panel) == ["reno", "dctcp"] for panel in fig.axes[-1:])
    assert "over link_rate, seed (2, 4)" in fig.texts[0].get_text()
    (panel,) = plot_grid(grid("seed")).axes
    assert len(solid(panel)) == 1


def test_grid_leaves_out_infinite_times_and_shows_ms() -> None:
    ds = grid("threshold")
    ds["convergence_time"][0, 1] = np.inf
    (panel,) = plot_grid(ds, metric="convergence_time").axes
    values = solid(panel)[0].get_ydata()
    assert np.isnan(values[1])
    assert values[0] == pytest.approx(float(ds.convergence_time[0, 0]) * 1e3)
    assert panel.get_ylabel() == "convergence_time (ms)"


def test_grid_writes_file(tmp_path: Path) -> None:
    path = tmp_path / "grid.png"
    assert isinstance(plot_grid(grid("threshold", "link_rate", "seed"), path), Figure)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000


def image_of(fig: Figure) -> AxesImage:
    (panel,) = fig.axes
    (image,) = panel.images
    return image


def cell_colour(image: AxesImage, row: int, column: int) -> tuple[float, ...]:
    return tuple(image.to_rgba(image.get_array())[row, column])


def test_verdict_map_colours_each_point_by_its_state() -> None:
    states = np.array([[0, 1, 2, np.nan], [3, 4, 0, 1], [2, 2, 4, 3]])
    ds = grid("threshold", states=states)
    fig = plot_verdict_map(ds)
    image = image_of(fig)
    shown = image.get_array()
    np.testing.assert_array_equal(shown.mask, np.isnan(states))
    np.testing.assert_array_equal(shown.filled(-1), np.nan_to_num(states, nan=-1))
    for (row, column), code in np.ndenumerate(states):
        expected = NOT_RUN if np.isnan(code) else STATE_COLOURS[STATES[int(code)]]
        assert cell_colour(image, row, column) == pytest.approx(to_rgba(expected), abs=1 / 255)
    (panel,) = fig.axes
    assert [t.get_text() for t in panel.get_yticklabels()] == [
        "threshold=20pkt", "threshold=40pkt", "threshold=65pkt"]
    assert [t.get_text() for t in panel.get_xticklabels()] == ["2", "4", "8", "16"]
    assert legend_texts(panel) == [*STATES, "not run"]
    assert not panel.texts  # no seeds: nothing to count


def test_verdict_map_all_run_has_no_not_run_key() -> None:
    ds = grid("threshold", "link_rate")
    fig = plot_verdict_map(ds)
    (panel,) = fig.axes
    assert "not run" not in legend_texts(panel)
    rows = [t.get_text() for t in panel.get_yticklabels()]
    assert rows == ["threshold=20pkt, link_rate=10Gbps", "threshold=20pkt, link_rate=40Gbps",
                    "threshold=40pkt, link_rate=10Gbps", "threshold=40pkt, link_rate=40Gbps",
                    "threshold=65pkt, link_rate=10Gbps", "threshold=65pkt, link_rate=40Gbps"]
    expected = ds.state.values.reshape(6, len(FLOWS))
    np.testing.assert_array_equal(image_of(fig).get_array(), expected)


def seeded_states() -> tuple[np.ndarray, np.ndarray, list[str]]:
    """States (threshold 3, seed 4, flows 4), the most common of each cell (NaN: none ran) and
    the share written in each cell ("" where none ran)."""
    s, o, lo, u, n = 0.0, 1.0, 2.0, 4.0, np.nan
    cells = [  # per (threshold, flows): the four seeds
        [[s, s, s, s], [s, s, s, o], [o, o, lo, lo], [n, n, n, n]],
        [[u, u, u, s], [lo, lo, lo, lo], [s, n, n, n], [o, lo, u, u]],
        [[s, o, lo, u], [n, n, o, o], [lo, lo, lo, o], [u, u, u, u]],
    ]
    states = np.array(cells).transpose(0, 2, 1)
    mode = np.array([[s, s, o, n], [u, lo, s, u], [s, o, lo, u]])
    shares = ["4/4", "3/4", "2/4", "", "3/4", "4/4", "1/1", "2/4", "1/4", "2/2", "3/4", "4/4"]
    return states, mode, shares


def test_verdict_map_seeds_most_common_state_and_share() -> None:
    states, mode, shares = seeded_states()
    ds = grid("threshold", "seed", states=states)
    fig = plot_verdict_map(ds)
    image = image_of(fig)
    np.testing.assert_array_equal(image.get_array().filled(np.nan), mode)
    assert cell_colour(image, 0, 3) == pytest.approx(to_rgba(NOT_RUN), abs=1 / 255)
    assert cell_colour(image, 1, 0) == pytest.approx(to_rgba(STATE_COLOURS["unsettled"]),
                                                     abs=1 / 255)
    (panel,) = fig.axes
    written = {(round(t.get_position()[1]), round(t.get_position()[0])): t.get_text()
               for t in panel.texts}
    assert [written.get(divmod(i, 4), "") for i in range(12)] == shares
    assert "not run" in legend_texts(panel)
    assert "most common of 4 seeds" in panel.get_title()


def test_verdict_map_large_grid_hatches_disagreeing_cells(monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path: Path) -> None:
    monkeypatch.setattr(plots, "ANNOTATE_CELLS", 0)
    states, _, shares = seeded_states()
    path = tmp_path / "verdict.png"
    fig = plot_verdict_map(grid("threshold", "seed", states=states), path)
    (panel,) = fig.axes
    assert not panel.texts
    hatched = {(round(p.get_y() + 0.5), round(p.get_x() + 0.5)) for p in panel.patches
               if isinstance(p, Rectangle) and p.get_hatch()}
    disagree = {divmod(i, 4) for i, share in enumerate(shares)
                if share and share.split("/")[0] != share.split("/")[1]}
    assert hatched == disagree
    assert "seeds disagree" in legend_texts(panel)
    assert path.read_bytes()[:4] == b"\x89PNG" and path.stat().st_size > 5_000


def test_verdict_map_without_axes_is_one_row() -> None:
    ds = grid(states=np.array([1.0, 1.0, 3.0, 0.0]))
    image = image_of(plot_verdict_map(ds))
    np.testing.assert_array_equal(image.get_array(), [[1, 1, 3, 0]])


@pytest.mark.parametrize("axes", [(), ("cc",)])
def test_plot_sweep_unchanged_on_cc_and_flows(axes: tuple[str, ...], tmp_path: Path) -> None:
    ds = grid(*axes)
    path = tmp_path / "sweep.png"
    fig = plot_sweep(ds, path)
    assert len(fig.axes) == 4  # no rounds: two rows of two panels
    rate = fig.axes[2]
    assert rate.get_ylabel() == "throughput (Gb/s)"
    lines = [line.get_label() for line in solid(rate)]
    assert lines == (["reno", "dctcp"] if axes else ["throughput"])
    np.testing.assert_allclose(solid(rate)[-1].get_ydata(),
                               ds.aggregate_throughput.values.reshape(-1, len(FLOWS))[-1] * 8e-9)
    assert path.stat().st_size > 10_000
