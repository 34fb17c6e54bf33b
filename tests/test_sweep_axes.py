"""Sweeps over any scenario key (`--set`, `--seeds`, `--zip`, `pathflow.sweep(set=...)`): the
axes, the Dataset they give, each point against its own run, and bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from typer.testing import CliRunner

import pathflow
from helpers import PACKET, interrupt_second_chunk, star
from pathflow.axes import axis, parse_set
from pathflow.batch import chunks, compile_together
from pathflow.cli import app
from pathflow.metrics import queue_stats
from pathflow.scenario import ScenarioError, load_scenario
from pathflow.schema import SWEEP, check_dataset
from pathflow.sweeps import sweep

FATTREE = Path(__file__).resolve().parents[1] / "examples" / "fattree_permutation.toml"


def small() -> pathflow.Scenario:
    return star(4, rate="1Gbps", delay="10us", buffer="300pkt",
                aqm={"kind": "ecn_step", "threshold": "30pkt"}, duration="30ms")


def test_values_and_ranges_in_the_keys_units() -> None:
    assert parse_set("aqm.threshold=20pkt, 40pkt").labels == ("20pkt", "40pkt")
    assert parse_set("aqm.threshold=20pkt:60pkt:20pkt").labels == ("20pkt", "40pkt", "60pkt")
    assert parse_set("run.seed=1:7:3").values == (1, 4, 7)
    assert parse_set("transport.g=0.05:0.2:0.05").labels == ("0.05", "0.1", "0.15", "0.2")
    assert parse_set("transport.g=0.0625,1e-1").values == (0.0625, 0.1)  # numbers are numbers
    assert axis("topology.link_rate", [1.25e9, "40Gbps"]).labels == ("1250000000.0", "40Gbps")
    for text, message in (("aqm.threshold", "must be KEY=V1,V2"),
                          ("threshold=20pkt", "dotted scenario key"),
                          ("traffic.flows=2,3", "--flows"),
                          ("run.duration=1ms,2ms", "one duration"),
                          ("aqm.threshold=20pkt,20pkt", "each value once"),
                          ("aqm.threshold=20pkt,", "give values"),
                          ("aqm.threshold=60pkt:20pkt:20pkt", "START <= STOP"),
                          ("aqm.threshold=20pkt:60KB:20pkt", "one unit"),
                          ("aqm.threshold=1:2", "START:STOP:STEP")):
        with pytest.raises(ScenarioError, match=message):
            parse_set(text)


def test_a_grid_of_threshold_and_seed_is_its_points_single_runs() -> None:
    """Each point of a threshold x seed x flows grid equals its scenario run alone, its
    coordinates are in SI with the text beside them, and DCTCP's peak queue follows the
    threshold, K + N packets, at every point."""
    counts = [3, 5]
    swept = pathflow.sweep(small(), counts, set={"aqm.threshold": "20pkt,40pkt"}, seeds=2,
                           series=True)
    check_dataset(swept, SWEEP)
    assert swept.queue_max.dims == ("threshold", "seed", "flows")
    assert swept.queue.dims == ("threshold", "seed", "flows", "time", "link")
    np.testing.assert_array_equal(swept.threshold, [20 * PACKET, 40 * PACKET])
    assert swept.threshold.attrs["units"] == "bytes"
    assert list(swept.threshold_label.values) == ["20pkt", "40pkt"]
    assert list(swept.seed.values) == [1, 2] and swept.seed.attrs["units"] == "1"
    for k, threshold in enumerate(("20pkt", "40pkt")):
        alone = small().with_updates({"aqm.threshold": threshold, "run.seed": 2,
                                      "traffic.flows": 5})
        mean = float(queue_stats(pathflow.simulate(alone))["mean"].sel(link="s0->r0"))
        point = swept.isel(threshold=k).sel(seed=2, flows=5)
        assert float(point.queue_mean) == pytest.approx(mean, rel=1e-6)
        for n in counts:
            peak = float(swept.queue_max.isel(threshold=k).sel(seed=1, flows=n)) / PACKET
            assert peak == pytest.approx((20, 40)[k] + n, rel=0.1)


def test_link_rates_are_a_dimension_and_so_are_their_links() -> None:
    """A link-rate axis: every point keeps its link full (throughput = the rate), and the
    Dataset's capacity varies along it where the threshold axis leaves it alone."""
    swept = sweep(small(), [4], set={"topology.link_rate": "1Gbps,4Gbps",
                                     "aqm.threshold": "20pkt,40pkt"})
    assert swept.capacity.dims == ("link_rate", "link")
    assert swept.link_rate.attrs["units"] == "bytes/s"
    np.testing.assert_allclose(swept.capacity.sel(link="s0->r0"), [1e9 / 8, 4e9 / 8])
    rates = swept.aggregate_throughput.transpose("link_rate", ...).values.reshape(2, -1)
    np.testing.assert_allclose(rates, [[1e9 / 8] * 2, [4e9 / 8] * 2], rtol=2e-3)
    check_dataset(swept, SWEEP)


def test_a_grid_at_one_flow_count_compiles_once() -> None:
    """Parameters are values, not shapes: a threshold x link-rate x seed grid at one flow count
    is one bucket, one compiled program."""
    grid = [small().with_updates({"aqm.threshold": k, "topology.link_rate": rate,
                                  "run.seed": seed, "traffic.flows": 4})
            for k in ("20pkt", "40pkt") for rate in ("1Gbps", "10Gbps") for seed in (1, 2)]
    found = list(chunks(compile_together(grid)))
    assert {(chunk.shape, chunk.members[0].physics) for chunk in found} == {
        (found[0].shape, found[0].members[0].physics)}
    assert sum(len(chunk.members) for chunk in found) == 8


def test_zipped_keys_share_one_dimension() -> None:
    swept = sweep(small(), [4], set={"aqm.threshold": "20pkt,40pkt",
                                     "topology.buffer": "200pkt,400pkt"}, zipped=True)
    assert swept.queue_max.dims == ("threshold", "flows")
    assert swept.topology_buffer_label.dims == ("threshold",)  # `buffer` is the links'
    np.testing.assert_array_equal(swept.topology_buffer, [200 * PACKET, 400 * PACKET])
    np.testing.assert_array_equal(swept.buffer.sel(link="s0->r0"), [200 * PACKET, 400 * PACKET])
    with pytest.raises(ScenarioError, match="--zip: the zipped axes must have as many"):
        sweep(small(), [4], set={"aqm.threshold": "20pkt,40pkt",
                                 "topology.buffer": "200pkt"}, zipped=True)


def test_congestion_controls_and_their_parameters() -> None:
    """`transport.cc` applies first, so a key only one control declares may be swept beside
    it where the other has it too; DCTCP's g on Reno is refused naming the key."""
    swept = sweep(small(), [4], set={"transport.cc": "dctcp,reno",
                                     "transport.init_cwnd": "2pkt,4pkt"})
    assert swept.queue_max.dims == ("cc", "init_cwnd", "flows")
    check_dataset(swept, SWEEP)
    with pytest.raises(ScenarioError, match=r"--set transport\.g=0\.1: transport\.g: unknown"):
        sweep(small(), [4], set={"transport.cc": "reno", "transport.g": "0.1"})


def test_points_must_share_their_links(tmp_path: Path) -> None:
    scenario = load_scenario(FATTREE)
    with pytest.raises(ScenarioError, match=r"--set topology\.k: its values give networks"):
        sweep(scenario, [4], set={"topology.k": "4,6"})


def test_an_interrupted_grid_resumes_to_the_uninterrupted_result(
        monkeypatch: pytest.MonkeyPatch) -> None:
    keys = {"aqm.threshold": "20pkt,40pkt"}
    whole = sweep(small(), [3, 9], set=keys, seeds=2)  # buckets of 4 and 16 flows: 2 chunks
    saved: list[xr.Dataset] = []
    with monkeypatch.context() as patch:
        interrupt_second_chunk(patch)
        with pytest.raises(KeyboardInterrupt):
            sweep(small(), [3, 9], set=keys, seeds=2, on_chunk=saved.append)
    partial = saved[-1]
    assert partial.jain.sel(flows=3).notnull().all() and partial.jain.sel(flows=9).isnull().all()
    xr.testing.assert_allclose(sweep(small(), [3, 9], set=keys, seeds=2, resume=partial), whole)
    with pytest.raises(ScenarioError, match="--resume"):
        sweep(small(), [3, 9], set={"aqm.threshold": "20pkt,60pkt"}, seeds=2, resume=partial)


def test_cli_grid_writes_the_dataset_the_map_and_the_facets(tmp_path: Path) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text(small().to_toml())
    out = tmp_path / "grid.nc"
    result = CliRunner().invoke(app, ["sweep", str(scenario), "--flows", "3:5:2", "--set",
                                      "aqm.threshold=20pkt,40pkt", "--set",
                                      "topology.link_rate=1Gbps,2Gbps", "--seeds", "2",
                                      "-o", str(out), "-q"])
    assert result.exit_code == 0, result.output
    assert "state of every point" in result.output  # 8 points beside flows: one table
    with xr.open_dataset(out) as ds:
        assert ds.queue_max.dims == ("threshold", "link_rate", "seed", "flows")
        assert ds.link_rate.attrs["units"] == "bytes/s"
    assert out.with_suffix(".png").stat().st_size > 10_000
    assert (tmp_path / "grid_verdict.png").stat().st_size > 10_000


@pytest.mark.parametrize(("arguments", "expected"), [
    (["--set", "aqm.color=red"], "aqm.color: unknown key 'color'"),
    (["--set", "aqm.threshold=-5pkt"], "--set aqm.threshold=-5pkt: aqm.threshold: '-5pkt' must"),
    (["--set", "topology.link_rate=fast"], "topology.link_rate: cannot read 'fast'"),
    (["--set", "aqm.threshold=20pkt,40pkt", "--set", "topology.buffer=1MB", "--zip"],
     "--zip: the zipped axes must have as many values each"),
    (["--set", "aqm.threshold=20pkt", "--set", "aqm.threshold=40pkt"], "set once"),
    (["--cc", "reno", "--set", "transport.cc=dctcp"], "set once"),
    (["--zip", "--set", "aqm.threshold=20pkt"], "--zip: give at least two"),
    (["--seeds", "0"], "--seeds"),
])
def test_bad_axes_are_one_line_and_exit_2(tmp_path: Path, arguments: list[str],
                                          expected: str) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text(small().to_toml())
    out = tmp_path / "grid.nc"
    result = CliRunner().invoke(app, ["sweep", str(scenario), "--flows", "3", "-o", str(out),
                                      "-q", *arguments])
    assert result.exit_code == 2, result.output
    assert expected in result.output
    assert "Traceback" not in result.output and not out.exists()
