"""Sweeps on a dask.distributed cluster: the Dataset of the in-process sweep, every point once
when a worker dies mid-sweep, and one-line errors for a scheduler that cannot be reached."""

from __future__ import annotations

import contextlib
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import xarray as xr
from typer.testing import CliRunner

from helpers import star
from pathflow import cluster, sweeps
from pathflow.cli import app
from pathflow.scenario import Scenario
from pathflow.store import read_store
from pathflow.sweeps import sweep

KEYS = {"aqm.threshold": "20pkt,40pkt"}


def small(duration: str = "30ms") -> Scenario:
    return star(4, rate="1Gbps", delay="10us", buffer="300pkt",
                aqm={"kind": "ecn_step", "threshold": "30pkt"}, duration=duration)


def test_a_grid_on_two_workers_is_the_in_process_grid(tmp_path: Path) -> None:
    """`pathflow sweep --workers 2` writes the store of the in-process sweep."""
    scenario = tmp_path / "s.toml"
    scenario.write_text(small().to_toml())
    out = tmp_path / "grid.zarr"
    result = CliRunner().invoke(app, ["sweep", str(scenario), "--flows", "3:9:6", "--set",
                                      "aqm.threshold=20pkt,40pkt", "--seeds", "2", "--workers",
                                      "2", "-o", str(out), "-q"])
    assert result.exit_code == 0, result.output
    alone = sweep(Scenario.from_toml(scenario.read_text()), [3, 9], set=KEYS, seeds=2)
    xr.testing.assert_identical(read_store(out), alone)


def test_a_worker_killed_mid_sweep_loses_and_repeats_no_point(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Six chunks (flow counts in six size buckets) on two workers; when the first result
    arrives, a worker with chunks still to run exits hard. Its chunks run again elsewhere:
    every point reaches the sweep exactly once, and the Dataset is the in-process one."""
    counts = [2, 3, 5, 9, 17, 33]
    scenario = small("60ms")
    received: Counter[int] = Counter()
    real = sweeps.run_remote

    def counted(*args: Any) -> Any:
        for measured in real(*args):
            received.update(measured.indices)
            yield measured

    monkeypatch.setattr(sweeps, "run_remote", counted)
    killed: list[str] = []
    with cluster.connect(workers=2) as client:

        def kill_a_busy_worker(_: xr.Dataset) -> None:
            busy = [worker for worker, tasks in client.processing().items() if tasks]
            if not killed and busy:
                killed.append(busy[0])
                with contextlib.suppress(Exception):  # the worker dies before it answers
                    client.run(os._exit, 1, workers=busy[:1])

        distributed = sweep(scenario, counts, set=KEYS, client=client,
                            on_chunk=kill_a_busy_worker)
    assert killed, "no worker had a chunk left to run when the first one finished"
    assert sorted(received) == list(range(2 * len(counts)))
    assert set(received.values()) == {1}
    monkeypatch.undo()
    xr.testing.assert_identical(distributed, sweep(scenario, counts, set=KEYS))


@pytest.mark.parametrize(("address", "expected"), [
    ("tcp://127.0.0.1:9", "--scheduler: cannot reach 'tcp://127.0.0.1:9' within 1 s"),
    ("nonsense", "--scheduler: 'nonsense' is not an address such as tcp://HOST:PORT"),
])
def test_an_unreachable_scheduler_is_one_line_and_keeps_the_store(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, address: str, expected: str) -> None:
    monkeypatch.setattr(cluster, "CONNECT_SECONDS", 1.0)
    scenario = tmp_path / "s.toml"
    scenario.write_text(small().to_toml())
    out = tmp_path / "s.zarr"
    runner = CliRunner()
    first = runner.invoke(app, ["sweep", str(scenario), "--flows", "3", "-o", str(out), "-q"])
    assert first.exit_code == 0, first.output
    before = sorted(path.name for path in out.rglob("*"))
    result = runner.invoke(app, ["sweep", str(scenario), "--flows", "3", "-o", str(out), "-q",
                                 "--resume", "--scheduler", address])
    assert result.exit_code == 2, result.output
    assert result.output.strip().startswith(f"error: {expected}")
    assert len(result.output.strip().splitlines()) == 1
    assert sorted(path.name for path in out.rglob("*")) == before
