"""The seed 003 DCTCP experiment against the hardware switch's queue trace.

Two DCTCP flows, 100 Mb/s, K = 20 packets, 425-packet buffer, ~0.5 ms base RTT (Heller 2013,
section 5.1). The hardware queue stays between about 15 and 22 packets (mean 19.0 after start-up).
"""

import pytest

import pathflow
from helpers import PACKET, star
from pathflow.metrics import queue_stats, throughput
from pathflow.validation.traces import load_queue_trace, reference_path

WARMUP = 0.5  # s: slow start and the first marks are over well before this


@pytest.fixture(scope="module")
def fluid() -> object:
    return pathflow.simulate(star(duration="3s"))


@pytest.fixture(scope="module")
def hardware() -> object:
    return load_queue_trace(reference_path("hardware_dctcp_queue.csv"))


def test_queue_stays_in_band(fluid: object) -> None:
    stats = queue_stats(fluid, warmup=WARMUP).sel(link="s0->r0")
    assert float(stats["min"]) / PACKET >= 13
    assert float(stats["max"]) / PACKET <= 24


def test_mean_queue_matches_hardware(fluid: object, hardware: object) -> None:
    fluid_mean = float(queue_stats(fluid, warmup=WARMUP)["mean"].sel(link="s0->r0")) / PACKET
    hardware_mean = float(queue_stats(hardware, warmup=10.0)["mean"].sel(link="bottleneck")
                          ) / hardware.attrs["packet_bytes"]
    assert abs(fluid_mean - hardware_mean) <= 2.0, (fluid_mean, hardware_mean)


def test_full_throughput(fluid: object) -> None:
    total = float(throughput(fluid, warmup=WARMUP).sum())
    assert total >= 0.99 * 12.5e6
    assert total <= 12.5e6 * (1 + 1e-9)


def test_hardware_trace_is_the_published_one(hardware: object) -> None:
    """Guards the copied data: the thesis reports a queue between about 15 and 22 packets."""
    stats = queue_stats(hardware, warmup=10.0).sel(link="bottleneck") / 1514
    assert float(stats["min"]) >= 15 and float(stats["max"]) <= 22.1
