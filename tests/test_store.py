"""A sweep's zarr store: grown point by point, read while the sweep runs, resumed after a kill to
the Dataset of an uninterrupted sweep."""

from __future__ import annotations

import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import xarray as xr
from typer.testing import CliRunner

from helpers import star
from pathflow.cli import app
from pathflow.scenario import Scenario
from pathflow.store import DONE, create_store, finished_points, read_store, write_points
from pathflow.sweeps import sweep


def small() -> str:
    return star(4, rate="1Gbps", delay="10us", buffer="300pkt",
                aqm={"kind": "ecn_step", "threshold": "30pkt"}, duration="30ms").to_toml()


def test_points_written_one_by_one_and_only_those(tmp_path: Path) -> None:
    """A store made from a sweep with every point blanked out, then two points written: those
    two read back exactly, the others stay not run."""
    result = sweep(Scenario.from_toml(small()), [2, 3], set={"aqm.threshold": "20pkt,40pkt"},
                   series=True)
    blank = result.copy(deep=True)
    for name in blank.data_vars:
        blank[name].values[...] = math.nan
    path = tmp_path / "s.zarr"
    create_store(path, blank)
    assert finished_points(read_store(path)) == set()
    write_points(path, result, [(1, 0), (0, 1)])
    stored = read_store(path)
    assert finished_points(stored) == {(1, 0), (0, 1)}
    for threshold, flows in ((1, 0), (0, 1)):
        xr.testing.assert_identical(stored.isel(threshold=threshold, flows=flows),
                                    result.isel(threshold=threshold, flows=flows))
    assert np.isnan(stored.queue.isel(threshold=0, flows=0)).all()


def test_a_killed_zarr_sweep_read_while_running_resumes_to_the_whole(tmp_path: Path) -> None:
    """The store is read (lazily, from this process) while the sweep writes it, shows finished
    points among NaN; the sweep, killed (SIGKILL, no handler) as soon as some points are in,
    resumed with `--resume`, gives the Dataset of a sweep never interrupted."""
    scenario = tmp_path / "s.toml"
    scenario.write_text(small())
    killed, whole = tmp_path / "killed.zarr", tmp_path / "whole.zarr"
    command = [sys.executable, "-m", "pathflow", "sweep", str(scenario), "--flows", "2:16:2",
               "--set", "aqm.threshold=20pkt,40pkt", "-q"]
    child = subprocess.Popen([*command, "-o", str(killed)], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    deadline, seen = time.monotonic() + 300, 0
    while child.poll() is None and time.monotonic() < deadline and seen < 2:
        if killed.exists():
            with xr.open_zarr(killed) as running:
                seen = int(running[DONE].notnull().sum())
        time.sleep(0.02)
    child.kill()
    child.wait()
    partial = read_store(killed)
    finished = int(partial[DONE].notnull().sum())
    assert 0 < finished < 16, f"the sweep was not interrupted mid-way: {finished} of 16"

    resumed = CliRunner().invoke(app, [*command[3:], "-o", str(killed), "--resume"])
    assert resumed.exit_code == 0, resumed.output
    assert subprocess.run([*command, "-o", str(whole)], capture_output=True).returncode == 0
    xr.testing.assert_identical(read_store(killed), read_store(whole))
    assert int(read_store(killed)[DONE].notnull().sum()) == 16
