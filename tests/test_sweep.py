"""Sweeps over flow counts: batching, the Dataset, the plot, and keeping finished points."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
import xarray as xr
from typer.testing import CliRunner

import pathflow
from helpers import PACKET, star
from pathflow import sweep as sweep_module
from pathflow.cli import app
from pathflow.metrics import default_warmup, queue_stats
from pathflow.scenario import ScenarioError
from pathflow.sweep import parse_flow_range, sweep_flows


def test_flow_ranges() -> None:
    assert parse_flow_range("80:2000")[:2] == [80, 160] and len(parse_flow_range("80:2000")) == 25
    assert parse_flow_range("80:2000")[-1] == 2000
    assert parse_flow_range("2:10:4") == [2, 6, 10]
    assert parse_flow_range("5") == [5]
    for bad in ("10:2", "a:b", "0:5", "1:2:3:4"):
        with pytest.raises(ScenarioError, match="--flows"):
            parse_flow_range(bad)


def small() -> pathflow.Scenario:
    return star(4, rate="1Gbps", delay="10us", buffer="300pkt",
                aqm={"kind": "ecn_step", "threshold": "30pkt"}, duration="30ms")


def test_batched_points_equal_single_runs() -> None:
    """vmap over padded problems must not change any point's physics."""
    counts = [3, 4, 7]
    swept = sweep_flows(small(), counts)
    assert list(swept.flows.values) == counts
    for n in counts:
        single = pathflow.simulate(small().with_updates({"traffic.flows": n}))
        mean = float(queue_stats(single)["mean"].sel(link="s0->r0"))
        assert float(swept.queue_mean.sel(flows=n)) == pytest.approx(mean, rel=1e-6, abs=1e-6)
    # DCTCP incast: the queue grows with the number of flows (Q_max = K + N)
    assert list(swept.queue_max.values) == sorted(swept.queue_max.values)
    assert float(swept.queue_max.sel(flows=7)) / PACKET == pytest.approx(30 + 7, rel=0.1)


def test_a_lossless_sweep_keeps_each_points_pauses() -> None:
    """Reno senders on drop-tail into one port with PFC: each point's pause time
    is its single run's (the merged run splits pauses per link, as queues)."""
    lossless = star(8, rate="1Gbps", delay="10us", buffer="60KB", cc="reno",
                    aqm={"kind": "droptail", "pfc": True}, duration="10ms")
    swept = sweep_flows(lossless, [8, 16])
    for n in (8, 16):
        single = pathflow.simulate(lossless.with_updates({"traffic.flows": n}))
        steady = single.pause.sel(time=single.time > default_warmup(single))
        assert float(swept.paused.sel(flows=n)) == pytest.approx(
            float(steady.mean("time").max()), rel=1e-6)
    assert float(swept.paused.min()) > 0.1


def test_cli_sweep_writes_dataset_and_plot(tmp_path: Path) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text(small().to_toml())
    out = tmp_path / "sweep.nc"
    result = CliRunner().invoke(app, ["sweep", str(scenario), "--flows", "2:8:3", "-o", str(out),
                                      "-q"])
    assert result.exit_code == 0, result.output
    ds = xr.open_dataset(out)
    assert list(ds.flows.values) == [2, 5, 8]
    assert ds.queue.dims == ("flows", "time", "link")
    assert ds.convergence_time.attrs["units"] == "s"
    assert out.with_suffix(".png").stat().st_size > 10_000


def test_interrupted_sweep_keeps_finished_points(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    real = sweep_module.solve_together
    calls = []

    def interrupt_second(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(sweep_module, "solve_together", interrupt_second)
    scenario = tmp_path / "s.toml"
    scenario.write_text(small().to_toml())
    out = tmp_path / "sweep.nc"
    result = CliRunner().invoke(app, ["sweep", str(scenario), "--flows", "2:9:7", "-o", str(out),
                                      "-q"])
    assert result.exit_code == 130
    assert list(xr.open_dataset(out).flows.values) == [2]  # bucket 2 done, bucket 16 interrupted


def test_a_killed_sweep_resumes_to_the_uninterrupted_result(tmp_path: Path) -> None:
    """SIGKILL a sweep (no handler runs) as soon as its first chunk is on disk; `--resume`
    finishes the rest, and the Dataset equals that of a sweep run without interruption."""
    scenario = tmp_path / "s.toml"
    scenario.write_text(small().to_toml())
    killed, whole = tmp_path / "killed.nc", tmp_path / "whole.nc"
    command = [sys.executable, "-m", "pathflow", "sweep", str(scenario), "--flows", "2:16:2",
               "-q"]
    child = subprocess.Popen([*command, "-o", str(killed)], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    while not killed.exists() and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    child.kill()
    child.wait()
    with xr.open_dataset(killed) as partial:  # whole: written atomically
        finished = list(partial.flows.values)
    assert 0 < len(finished) < 8, f"the sweep was not interrupted mid-way: {finished}"

    runner = CliRunner()
    resumed = runner.invoke(app, ["sweep", str(scenario), "--flows", "2:16:2", "-q", "-o",
                                  str(killed), "--resume"])
    assert resumed.exit_code == 0, resumed.output
    assert subprocess.run([*command, "-o", str(whole)], capture_output=True).returncode == 0
    with xr.open_dataset(killed) as a, xr.open_dataset(whole) as b:
        xr.testing.assert_identical(a.load(), b.load())
        assert list(a.flows.values) == list(range(2, 17, 2))


def test_resume_refuses_a_result_of_another_sweep(tmp_path: Path) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text(small().to_toml())
    out = tmp_path / "sweep.nc"
    runner = CliRunner()
    assert runner.invoke(app, ["sweep", str(scenario), "--flows", "3", "-q", "-o", str(out)]
                         ).exit_code == 0
    other = runner.invoke(app, ["sweep", str(scenario), "--flows", "2", "-q", "-o", str(out),
                                "--resume"])
    assert other.exit_code == 2
    assert other.output.strip().startswith("error: --resume: the saved result is a sweep of")


def test_bad_flow_range_on_the_command_line() -> None:
    result = CliRunner().invoke(app, ["sweep", "--flows", "100:10"])
    assert result.exit_code == 2 and "--flows" in result.output
