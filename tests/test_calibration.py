"""Calibration (`pathflow.validation.calibration`): recovery of known parameters from noisy fluid
traces, bounds, the written scenario, the report and input errors. The fits to the hardware
DCTCP trace and to the packet-level reference (loss drop, fitted values in physical bands) are
validation cases (`validation/cases/calibration.py`), run by tests/test_validation.py.

The synthetic traces are fluid runs of a 2-flow, 100 Mb/s star (K = 20 packets unless stated)
with an extra base RTT put into the scenario as host-link delay, sampled every record of
`pathflow.simulate` and given white noise of 0.25 packet (the measurement noise of a queue
sampled at packet granularity). The truth runs at its own finest default dt, fixed (as the fit's
solver runs: calibration differentiates through a fixed-step scan), the fit at the starting
scenario's, as with a real trace, so part of the error is discretisation, not noise.
"""

from __future__ import annotations

import math
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
import xarray as xr

import pathflow
from helpers import star
from pathflow.compile import compile_scenario
from pathflow.validation.calibration import (
    CalibrationResult,
    calibrate,
    objective,
    parse_fit,
)
from pathflow.validation.calibration import loss as cl
from pathflow.validation.traces import reference_path

PACKET = 1500.0
DURATION = "0.5s"  # per evaluation: ~25 sawtooth periods after the 0.125 s warmup
FAST = {"duration": DURATION, "starts": 2, "steps": 15, "fallback_starts": 1,
        "fallback_evaluations": 40}


def noisy_trace(scenario: pathflow.Scenario, extra_rtt: float, seed: int = 0,
                **updates: object) -> xr.Dataset:
    """The queue of s0->r0 of `scenario` with `extra_rtt` more base RTT (as +extra/2 on the
    sending hosts' links) and `updates`, over 1.2 s, with N(0, 0.25 packet) noise added."""
    delay = 62.5e-6 + extra_rtt / 2
    truth = scenario.with_updates({"run.duration": "1.2s", **updates, "topology.links": [
        {"match": "h*->s0", "delay": f"{delay * 1e6:.6g}us"}]})
    fixed = compile_scenario(truth).dt  # the step the fit's solver also keeps fixed
    ds = pathflow.simulate(truth.with_updates({"run.dt": fixed}))
    queue = ds.queue.sel(link="s0->r0").values
    noise = np.random.default_rng(seed).normal(0.0, 0.25 * PACKET, queue.size)
    return xr.Dataset({"queue": (("time", "link"), (queue + noise)[:, None])},
                      coords={"time": ds.time.values, "link": ["s0->r0"]},
                      attrs={"engine": "synthetic fluid trace", "packet_bytes": PACKET})


@pytest.fixture(scope="module")
def window_trace() -> xr.Dataset:
    """The default (per-window) DCTCP star with 0.6 ms extra base RTT and K = 16 packets."""
    return noisy_trace(star(), 0.6e-3, **{"aqm.threshold": "16pkt"})


@pytest.fixture(scope="module")
def hardware_fit() -> CalibrationResult:
    scenario = pathflow.load_scenario(Path(__file__).parents[1] / "examples" / "dctcp_star.toml")
    return calibrate(scenario, reference_path("hardware_dctcp_queue.csv"),
                     ["base_rtt", "threshold"], **FAST)


def test_recovers_base_rtt_and_g_by_gradient() -> None:
    """Truth: 0.5 ms extra base RTT (1.0 ms in all) and g = 0.2; start: 0.25 ms and g = 0.12.

    The mean-field reaction form is used: in the per-window form (the DCTCP default) alpha
    settles at the marking fraction for g below ~0.08, so the steady queue does not depend on g
    at all, and above it the cycle switches between regimes, so the loss jumps (docs/validation.md,
    Calibration). Longer base RTT and larger g both deepen the troughs; the autocovariance of the
    densely sampled trace (period) separates them.

    Stated error: base RTT within 0.05 ms (5 % of the 1 ms base RTT) and g within 10 %. Over
    noise seeds 0-3 the fits land 0.022-0.025 ms high and 0.2-1.7 % low in g: a bias, as the
    truth runs at its own dt (twice the fit's), three times the reported standard deviation,
    which covers the trace's sampling noise only.
    """
    base = star(transport={"reaction": "mean"})
    trace = noisy_trace(base, 0.5e-3, **{"transport.g": 0.2})
    result = calibrate(base, trace, "base_rtt,g", initial={"base_rtt": 0.25e-3, "g": 0.12},
                       trace_warmup=0.3, **FAST)
    assert result.loss == "quantiles+acf"
    fitted = result.parameters
    assert abs(fitted["base_rtt"].value - 0.5e-3) < 0.05e-3, result.report()
    assert abs(fitted["g"].value / 0.2 - 1) < 0.10, result.report()
    assert fitted["base_rtt"].optimiser.startswith("adam")
    assert fitted["g"].optimiser.startswith("adam")
    assert result.loss_gradient < 0.05 * result.loss_before  # Adam did the bulk of the work
    for p in fitted.values():
        assert 0 < p.std < 0.1 * p.value, result.report()
    assert result.loss_after < 0.01 * result.loss_before
    assert result.gradient == "forward" and result.gradient_evaluations > 0


def test_recovers_threshold_by_the_derivative_free_fallback(window_trace: xr.Dataset) -> None:
    """Truth: 0.6 ms extra base RTT and K = 16 packets; start: 0.3 ms and K = 20 (the
    default per-window DCTCP form, queue quantiles only).

    Step marking 1{q > K} has zero derivative in K, so the gradient for K vanishes and
    Nelder-Mead must take over. Stated error: K within 0.5 packet (3 %: the queue oscillates
    just below K; over noise seeds 0-2 the fits land within 0.04 packet) and the base RTT
    within 0.1 ms (9 % of the 1.1 ms base RTT; the quantiles alone pin it less tightly than
    with the autocovariance: fits within 0.045 ms, reported sd 0.05-0.06 ms).
    """
    result = calibrate(star(), window_trace, ["base_rtt", "threshold"], loss="quantiles",
                       initial={"base_rtt": 0.3e-3}, trace_warmup=0.3, **FAST)
    assert result.fallback_reason is not None and "threshold" in result.fallback_reason
    assert result.optimiser["threshold"] == "nelder-mead"
    assert "nelder-mead" in result.optimiser["base_rtt"]
    assert abs(result.values["threshold"] - 16) < 0.5, result.report()
    assert abs(result.values["base_rtt"] - 0.6e-3) < 0.1e-3, result.report()
    assert result.loss_after < 0.01 * result.loss_before


def test_bounds_hold_when_the_optimum_lies_outside(window_trace: xr.Dataset) -> None:
    """K = 16 is below the bounds [18, 30]: the fit stops at the bound, never beyond."""
    result = calibrate(star(), window_trace, ["base_rtt", "threshold"], loss="quantiles",
                       bounds={"threshold": (18.0, 30.0)}, trace_warmup=0.3,
                       **{**FAST, "steps": 3, "fallback_evaluations": 15})
    fitted = result.parameters["threshold"]
    assert 18.0 <= fitted.value <= 30.0
    assert fitted.value < 18.5 and fitted.at_bound
    assert 0.0 <= result.values["base_rtt"] <= 2e-3


def test_written_scenario_carries_the_fit(hardware_fit: CalibrationResult, tmp_path: Path
                                          ) -> None:
    """A fit to the hardware trace (base RTT and K; what it finds is the case
    `calibration_hardware`): the written scenario, its TOML, the report and the plot."""
    result = hardware_fit
    assert result.loss == "quantiles"  # 8 Hz samples do not resolve a ~15 ms sawtooth
    assert result.optimiser["threshold"] == "nelder-mead"  # K's gradient is zero
    assert math.isfinite(result.parameters["threshold"].std)
    fitted = result.to_scenario()
    before = compile_scenario(result.scenario).problem
    after = compile_scenario(fitted).problem
    extra = result.values["base_rtt"]
    assert np.allclose(np.asarray(after.path_base_rtt), np.asarray(before.path_base_rtt) + extra,
                       rtol=0, atol=1e-12)
    assert fitted.si.aqm.parameters["threshold"] == pytest.approx(
        result.values["threshold"] * PACKET)
    path = result.write_toml(tmp_path / "fitted.toml")
    again = pathflow.load_scenario(path)
    assert again.si.aqm.parameters["threshold"] == pytest.approx(
        fitted.si.aqm.parameters["threshold"])
    assert "loss (quantiles" in path.read_text().splitlines()[1]
    text = result.report()
    assert "| threshold | pkt |" in text and "nelder-mead" in text
    result.plot(tmp_path / "fit.png")
    assert (tmp_path / "fit.png").stat().st_size > 10_000


def test_unknown_parameter_is_one_line_naming_the_allowed() -> None:
    with pytest.raises(ValueError) as caught:
        parse_fit("base_rtt,gain")
    message = str(caught.value)
    assert "\n" not in message and "'gain'" in message
    assert "base_rtt, g, threshold, ack_ratio, init_cwnd, capacity" in message
    with pytest.raises(ValueError, match="unknown calibration parameter 'rtt'"):
        calibrate(star(), reference_path("hardware_dctcp_queue.csv"), ["rtt"])


def test_bad_bounds_and_inapplicable_parameters() -> None:
    trace = reference_path("hardware_dctcp_queue.csv")
    with pytest.raises(ValueError, match="bounds of 'g': need finite lower < upper"):
        objective(star(), trace, ["g"], bounds={"g": (0.5, 0.1)})
    with pytest.raises(ValueError, match="bounds given for 'threshold', which is not fitted"):
        objective(star(), trace, ["g"], bounds={"threshold": (10, 30)})
    with pytest.raises(ValueError, match=r"starting value out of bounds: g = 0\.0625"):
        objective(star(), trace, ["g"], bounds={"g": (0.1, 0.5)})
    with pytest.raises(ValueError, match=r"'threshold' applies to aqm\.kind = 'ecn_step'"):
        objective(star(aqm={"kind": "droptail"}), trace, ["threshold"])
    with pytest.raises(ValueError, match=r"'g' applies to transport\.cc = 'dctcp'"):
        objective(star(cc="reno", aqm={"kind": "droptail"}), trace, ["g"])


def test_reparametrisation_stays_inside_the_bounds() -> None:
    lower, upper = np.array([0.0, 1 / 256]), np.array([2e-3, 0.5])
    log = np.array([False, True])
    data = cl.Data(**{**dict.fromkeys(cl.Data._fields), "lower": jnp.asarray(lower),
                      "upper": jnp.asarray(upper), "log": jnp.asarray(log)})
    for z in ([-50.0, -50.0], [50.0, 50.0], [0.3, -2.0]):
        theta = np.asarray(cl.theta_from_z(jnp.asarray(z), data))
        assert np.all((theta >= lower) & (theta <= upper))
    theta = np.array([0.7e-3, 1 / 16])
    back = cl.theta_from_z(jnp.asarray(cl.z_from_theta(theta, lower, upper, log)), data)
    assert np.allclose(np.asarray(back), theta, rtol=1e-12)


def test_model_and_trace_features_agree() -> None:
    """The traced estimators (window quantiles, FFT autocovariance) equal the trace side's."""
    rng = np.random.default_rng(3)
    series = 18 + 3 * np.sin(np.arange(600) * 2 * np.pi / 37) + rng.normal(0, 0.3, 600)
    first = 100
    lags = (1, 9, 20, 33, 50)
    features = cl.Features("quantiles", tuple(np.linspace(0.05, 0.95, 19)), lags, 1.0, 1.0, 0.0)
    expected = cl.trace_features(series[first:], None, features)
    inside = jnp.arange(series.size) >= first
    count = jnp.sum(inside)
    quantiles = cl._window_quantiles(jnp.asarray(series), inside, count,
                                     jnp.asarray(features.levels))
    centred = jnp.where(inside, series - series[first:].mean(), 0.0)
    ratio = cl._window_autocovariance(centred, count, max(lags) + 1,
                                      jnp.asarray(lags, dtype=float))
    assert np.allclose(np.asarray(quantiles), expected[:19], atol=1e-12)
    assert np.allclose(np.asarray(ratio), expected[19:], atol=1e-9)
