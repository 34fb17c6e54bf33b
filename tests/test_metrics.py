"""Metrics on synthetic results whose answers are known in closed form."""

from __future__ import annotations

import math

import numpy as np
import pytest
import xarray as xr

from pathflow.metrics import (
    convergence_time,
    jain_index,
    loss_cycles,
    mean_network_utilization,
    queue_stats,
    transfer_rates,
)

PACKET = 1500.0


def synthetic(rates: np.ndarray, queue: np.ndarray, time: np.ndarray) -> xr.Dataset:
    return xr.Dataset(
        {"flow_rate": (("time", "flow"), rates), "queue": (("time", "link"), queue[:, None]),
         "utilization": (("time", "link"), np.ones((time.size, 1))),
         "drops": (("time", "link"), np.zeros((time.size, 1)))},
        coords={"time": time, "link": ["a->b"], "flow": np.arange(rates.shape[1])},
        attrs={"packet_bytes": PACKET})


def test_jain_index() -> None:
    assert jain_index([5.0, 5.0, 5.0]) == pytest.approx(1.0)
    assert jain_index([1.0, 0.0]) == pytest.approx(0.5)
    assert jain_index([1.0, 0.0, 0.0, 0.0]) == pytest.approx(0.25)
    assert jain_index([1.0, 2.0]) == pytest.approx(9 / 10)


def test_convergence_of_an_exponential_approach() -> None:
    """r(t) = r_inf (1 - exp(-t / tau)) enters the +-10 % band at tau ln 10."""
    tau, time = 0.01, np.linspace(1e-4, 0.4, 4000)
    rate = 1e6 * (1 - np.exp(-time / tau))
    ds = synthetic(np.stack([rate, rate], axis=1), np.full(time.size, 50 * PACKET), time)
    result = convergence_time(ds, smoothing=1e-4)
    assert result.settled
    assert result.time == pytest.approx(tau * math.log(10), rel=0.02)


def test_a_drifting_run_does_not_settle() -> None:
    time = np.linspace(1e-3, 1.0, 1000)
    rate = 1e6 * (0.2 + time)  # still rising at the end
    ds = synthetic(rate[:, None], np.full(time.size, 10 * PACKET), time)
    result = convergence_time(ds)
    assert not result.settled and math.isinf(result.time)


def test_a_limit_cycle_settles() -> None:
    """A steady sawtooth (period 10 ms) counts as settled once smoothed over several periods."""
    time = np.linspace(1e-4, 2.0, 20000)
    queue = PACKET * (20 + 3 * ((time / 0.01) % 1.0))
    rate = np.full((time.size, 2), 6.25e6)
    ds = synthetic(rate, queue, time)
    assert convergence_time(ds, smoothing=0.05).settled


def test_queue_stats_and_loss_cycles_of_a_sawtooth() -> None:
    """Queue rising linearly from 200 to 400 packets, dropping at each peak: mean 300, troughs 200,
    period 2 s."""
    time = np.arange(1, 20001) * 1e-3
    phase = (time % 2.0) / 2.0
    queue = PACKET * (200 + 200 * phase)
    ds = synthetic(np.ones((time.size, 1)), queue, time)
    ds["drops"] = (("time", "link"), (phase > 0.999).astype(float)[:, None])
    stats = queue_stats(ds, warmup=0.0).sel(link="a->b") / PACKET
    assert float(stats["mean"]) == pytest.approx(300, rel=1e-3)
    assert float(stats["max"]) == pytest.approx(400, rel=1e-3)
    cycles = loss_cycles(ds, "a->b", warmup=1.0)
    np.testing.assert_allclose(cycles["periods"], 2.0, rtol=1e-3)
    np.testing.assert_allclose(cycles["troughs"] / PACKET, 200, rtol=1e-3)


def test_a_noisy_approach_settles_into_its_own_range() -> None:
    """The exponential approach with white noise of 5 % (a packet-level rate): no sample path
    stays within +-10 % for long, but it settles once the approach is inside the noise's own
    range, +-4 sd = +-20 %: at tau ln 5 at the earliest, and a 3.6-sd excursion at most later."""
    tau, time = 0.01, np.linspace(1e-4, 0.4, 4000)
    noise = np.random.default_rng(1).normal(0.0, 0.05, (time.size, 2))
    rate = 1e6 * ((1 - np.exp(-time / tau))[:, None] + noise)
    ds = synthetic(rate, np.full(time.size, 50 * PACKET), time)
    assert not convergence_time(ds, smoothing=1e-4, noise=0.0).settled
    result = convergence_time(ds, smoothing=1e-4)
    assert result.settled
    assert tau * math.log(5) <= result.time <= tau * math.log(50)


@pytest.mark.parametrize(("records", "delivering", "smoothing", "why"), [
    (1, True, None, "1 records, 8 needed"),
    (5, True, None, "5 records, 8 needed"),
    (100, False, None, "no flow delivered anything"),
    (100, True, 0.9, "smoothing window (90 records) is longer than the first three quarters"),
])
def test_convergence_says_not_enough_data(records: int, delivering: bool,
                                          smoothing: float | None, why: str) -> None:
    """Runs that cannot be judged (too short, nothing flowing, a smoothing window longer than
    the run) give a reason and time nan, never an exception or a verdict."""
    time = np.linspace(0.01, 1.0, records)
    rates = np.full((records, 2), 1e6 if delivering else 0.0)
    result = convergence_time(synthetic(rates, np.zeros(records), time), smoothing=smoothing)
    assert why in result.reason and result.reason.startswith("not enough data")
    assert math.isnan(result.time) and not result.settled


def test_a_judged_run_has_no_reason() -> None:
    time = np.linspace(0.01, 1.0, 100)
    result = convergence_time(synthetic(np.full((100, 1), 1e6), np.zeros(100), time))
    assert result.reason is None and result.settled and result.time == 0.0


def test_mean_network_utilization_and_transfer_rates_of_known_paths() -> None:
    """Seed 002's measure on three flows with P = 4 paths: bytes 3:1 on two paths give
    (1/4)(3 + 1)/3 = 1/3, an even spread over all four gives 1, a flow that carried nothing does
    not count; goodput is the payload over the transfer time, throughput the wire bytes."""
    ds = xr.Dataset(
        {"path_bytes": (("flow", "path"), [[3e6, 1e6, 0, 0], [1e6] * 4, [0.0] * 4]),
         "completion_time": ("flow", [2.0, 5.0, math.inf])},
        coords={"flow": [0, 1, 2], "path": np.arange(4), "equal_cost_paths": ("flow", [4] * 3),
                "start": ("flow", [1.0, 1.0, 0.0]), "size": ("flow", [3e6, 4e6, 1e6])},
        attrs={"packet_bytes": PACKET})
    assert mean_network_utilization(ds) == pytest.approx((1 / 3 + 1) / 2)
    rates = transfer_rates(ds, header_bytes=60.0)
    np.testing.assert_allclose(rates.goodput.values[:2], [3e6 * 0.96 / 1.0, 4e6 * 0.96 / 4.0])
    np.testing.assert_allclose(rates.throughput.values[:2], [4e6 / 1.0, 4e6 / 4.0])
    assert np.isnan(rates.goodput.values[2])  # never finished
    with pytest.raises(ValueError, match="header_bytes"):
        transfer_rates(ds, header_bytes=PACKET)
