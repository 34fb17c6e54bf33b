"""Calibration against a table of per-N summaries (`validation/calibration/table.py`, issue 10):
recovery of a known CNP capacity and latency offset from a table the model itself wrote, the
fitted scenario, and bad input through `pathflow calibrate` (one line, exit code 2, before any
sweep). The fit to the seed 001 testbed is the validation case `dcqcn_testbed`."""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner, Result

from pathflow import Scenario
from pathflow.cli import app
from pathflow.scenario import ScenarioError
from pathflow.validation.calibration.table import (
    apply_values,
    calibrate_table,
    is_table,
    load_table,
    model_summaries,
)
from pathflow.validation.traces import reference_path

ROOT = Path(__file__).resolve().parents[1]
INCAST = ROOT / "pathflow" / "scenarios" / "dcqcn_incast.toml"
DCTCP_STAR = ROOT / "examples" / "dctcp_star.toml"
TESTBED = reference_path("dcqcn_testbed/dcqcn_default_params.csv")
FLOWS = [64, 128, 256]  # a sweep of 20 ms takes 2 to 3 s
OFFSET = 20e-6  # s: the latency's fixed part written into the synthetic table
runner = CliRunner()


def small_incast() -> Scenario:
    return Scenario.from_toml(INCAST.read_text()).with_updates(
        {"run.duration": "20ms", "run.warmup": "10ms"})


def write_table(path: Path, flows: list[int], queue_max: np.ndarray, latency: np.ndarray
                ) -> None:
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["flows", "queue_max_bytes", "latency_us", "note"])
        for row in zip(flows, queue_max, latency * 1e6, ["x"] * len(flows), strict=True):
            writer.writerow(row)


def one_line_error(result: Result, pattern: str) -> None:
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert lines[0].startswith("error: ") and re.search(pattern, lines[0]), lines[0]


def test_recovers_cnp_capacity_and_offset(tmp_path: Path) -> None:
    """A table written by the model at cnp_capacity 0.6 per us (the queue of 256 flows grows to
    2.9 MB, that of 64 stays near 250 KB) and a 20 us latency offset: the fit from 1 per us
    finds both."""
    scenario = small_incast()
    model = model_summaries(apply_values(scenario, {"cnp_capacity": 0.6}), FLOWS)
    latency = OFFSET + model["queue_mean"] / model["capacity"]
    table = tmp_path / "table.csv"
    write_table(table, FLOWS, model["queue_max"], latency)
    assert is_table(table)
    fit = calibrate_table(scenario, table, ["cnp_capacity"], initial={"cnp_capacity": 1.0},
                          bounds={"cnp_capacity": (0.2, 2.0)}, max_evaluations=14)
    assert fit.values["cnp_capacity"] == pytest.approx(0.6, rel=0.1)
    assert fit.loss_after < 0.01 < fit.loss_before
    assert fit.offset == pytest.approx(OFFSET, rel=0.1)
    assert fit.fitted_scenario.si.transport.parameters["cnp_capacity"] == pytest.approx(
        fit.values["cnp_capacity"])
    assert fit.evaluations <= 14


def test_scenario_keys_and_prediction_switch() -> None:
    """kmin/kmax/pmax land in [aqm], kmin > kmax is refused by the scenario, and the switch to
    dcqcn+static drops the cx4 preset it does not have."""
    scenario = small_incast()
    fitted = apply_values(scenario, {"kmin": 10e3, "kmax": 300e3, "pmax": 0.05})
    aqm = fitted.si.aqm.parameters
    assert (aqm["kmin"], aqm["kmax"], aqm["pmax"]) == (10e3, 300e3, 0.05)
    with pytest.raises(ScenarioError, match="kmin"):
        apply_values(scenario, {"kmin": 300e3, "kmax": 10e3})
    switched = scenario.with_cc("dcqcn+static")
    assert switched.si.transport.cc == "dcqcn+static"
    assert "preset" not in switched.spec.transport.declared()


def test_testbed_tables_load() -> None:
    table = load_table(TESTBED)
    assert table.flows.tolist() == list(range(80, 721, 80))
    assert set(table.targets) == {"max_buffer_after_5s_bytes", "avg_latency_us"}
    assert table.targets["avg_latency_us"][0] == pytest.approx(24.84875e-6)
    assert table.targets["max_buffer_after_5s_bytes"][-1] == 5.1e6


@pytest.mark.parametrize(("content", "extra", "pattern"), [
    ("n,queue_max_bytes\n80,1000\n", [], r"no 'flows' column"),
    ("flows,queue_max_bytes\n80,0\n", [], r"queue_max_bytes must be > 0"),
    ("flows,queue_max_bytes\n80,1000\n", ["--targets", "queue_p99"],
     r"unknown target column 'queue_p99'"),
    ("flows,queue_max_bytes\n80,1000\n", ["--targets", "latency_us"], r"no column 'latency_us'"),
    ("flows,queue_max_bytes\n80,1000\n", ["--link", "s0->r0"], r"--link: applies to a queue"),
    ("flows,queue_max_bytes\n80,1000\n", ["--max-evaluations", "0"], r"--max-evaluations"),
    ("flows,queue_max_bytes\n80,1000\n", ["--bounds", "kmax=50KB"], r"--bounds: expected"),
    ("flows,queue_max_bytes\n80,1000\n", ["--predict-cc", "nope", "--predict", "PATH"],
     r"transport.cc: 'nope' is not allowed"),
])
def test_bad_tables_and_options(tmp_path: Path, content: str, extra: list[str],
                                pattern: str) -> None:
    table = tmp_path / "table.csv"
    table.write_text(content)
    extra = [str(table) if item == "PATH" else item for item in extra]
    result = runner.invoke(app, ["calibrate", str(INCAST), str(table), "--fit", "kmax",
                                 "-o", str(tmp_path / "out.toml"), *extra])
    one_line_error(result, pattern)


@pytest.mark.parametrize(("scenario", "fit", "pattern"), [
    (DCTCP_STAR, "kmax", r"'kmax' applies to aqm.kind = 'dcqcn', not 'ecn_step'"),
    (DCTCP_STAR, "cnp_capacity", r"'cnp_capacity' applies to the DCQCN transports"),
    (INCAST, "g", r"--fit: unknown table calibration parameter 'g'"),
    (INCAST, "kmax,kmax", r"listed twice"),
])
def test_parameter_not_applicable(tmp_path: Path, scenario: Path, fit: str,
                                  pattern: str) -> None:
    result = runner.invoke(app, ["calibrate", str(scenario), str(TESTBED), "--fit", fit,
                                 "-o", str(tmp_path / "out.toml")])
    one_line_error(result, pattern)


def test_table_options_refused_for_a_trace(tmp_path: Path) -> None:
    trace = reference_path("hardware_dctcp_queue.csv")
    assert not is_table(trace)
    result = runner.invoke(app, ["calibrate", str(DCTCP_STAR), str(trace), "--fit", "g",
                                 "--max-evaluations", "3", "--predict", str(TESTBED),
                                 "-o", str(tmp_path / "out.toml")])
    one_line_error(result, r"--predict: applies to a table")


def test_latency_offset_profile() -> None:
    from pathflow.validation.calibration.table import best_offset

    queueing = np.array([1e-6, 10e-6, 100e-6])
    assert best_offset(queueing + 7e-6, queueing) == pytest.approx(7e-6, rel=1e-3)
    assert math.isclose(best_offset(queueing, queueing), 0.0, abs_tol=1e-9)


def test_command_fits_a_table_and_predicts(tmp_path: Path) -> None:
    """`pathflow calibrate SCENARIO TABLE` with a budget of two sweeps: the fitted scenario, the
    plot, the report with the per-row errors and the prediction with another transport."""
    scenario = small_incast()
    model = model_summaries(apply_values(scenario, {"cnp_capacity": 0.6}), FLOWS)
    table = tmp_path / "table.csv"
    write_table(table, FLOWS, model["queue_max"], OFFSET + model["queue_mean"] / 1.25e9)
    toml = tmp_path / "incast.toml"
    toml.write_text(scenario.to_toml())
    out = tmp_path / "fitted.toml"
    result = runner.invoke(app, ["calibrate", str(toml), str(table), "--fit", "cnp_capacity",
                                 "--initial", "cnp_capacity=1", "--max-evaluations", "2",
                                 "--predict", str(table), "--predict-cc", "dcqcn+static",
                                 "-o", str(out), "--report", str(tmp_path / "fit.md"), "-q"])
    assert result.exit_code == 0, result.output
    assert "rms log-error" in result.output
    assert "Prediction of table.csv (transport.cc = dcqcn+static)" in result.output
    fitted = Scenario.from_toml(out.read_text())
    assert fitted.si.transport.cc == "dcqcn"
    assert math.isfinite(fitted.si.transport.parameters["cnp_capacity"])
    assert out.with_suffix(".png").stat().st_size > 0
    assert "latency =" in (tmp_path / "fit.md").read_text()


def test_kmin_above_kmax_refused_before_any_sweep(tmp_path: Path) -> None:
    result = runner.invoke(app, ["calibrate", str(INCAST), str(TESTBED), "--fit", "kmin,kmax",
                                 "--initial", "kmin=150KB", "--initial", "kmax=100KB",
                                 "-o", str(tmp_path / "out.toml"), "-q"])
    one_line_error(result, r"aqm.kmin: must not exceed kmax")
