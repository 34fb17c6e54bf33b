"""The packet-level simulator on the seed 003 DCTCP experiment against the hardware queue trace.

Two DCTCP flows, 100 Mb/s, K = 20 packets, 425-packet buffer (examples/dctcp_star.toml). The
hardware switch's queue stays between about 15 and 22 packets (p1 16.3, p99 21.4, mean 19.0
over ~110 s at 8 Hz). The simulator is sampled like the trace (every 0.125 s for 110 s), so the
percentiles describe distributions of comparable samples; p1 and p99 rather than min and max,
which a single sample decides.
"""

import numpy as np
import pytest

import pathflow
from helpers import PACKET
from pathflow.validation.packet import simulate_packets
from pathflow.validation.traces import load_queue_trace, reference_path

EXAMPLE = "examples/dctcp_star.toml"
TRACE_WARMUP = 10.0  # s, the trace's start-up
SIM_WARMUP = 1.0  # s


@pytest.fixture(scope="module")
def hardware() -> np.ndarray:
    trace = load_queue_trace(reference_path("hardware_dctcp_queue.csv"))
    steady = trace.sel(time=trace.time > TRACE_WARMUP)
    return steady.queue.sel(link="bottleneck").values / trace.attrs["packet_bytes"]


@pytest.fixture(scope="module")
def packet(hardware: np.ndarray) -> np.ndarray:
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    scenario = pathflow.load_scenario(root / EXAMPLE).with_updates({"run.duration": "111s"})
    ds = simulate_packets(scenario, sample_interval=0.125)
    return ds.queue.sel(link="s0->r0").sel(time=ds.time > SIM_WARMUP).values / PACKET


def test_queue_range_matches_hardware(packet: np.ndarray, hardware: np.ndarray) -> None:
    ours = np.percentile(packet, [1, 99])
    theirs = np.percentile(hardware, [1, 99])
    assert np.all(np.abs(ours - theirs) <= 2.0), (ours, theirs)
    assert ours[0] >= 13.0 and ours[1] <= 24.0  # the published 15..22 band, +-2 packets


def test_mean_queue_matches_hardware(packet: np.ndarray, hardware: np.ndarray) -> None:
    assert abs(packet.mean() - hardware.mean()) <= 1.0, (packet.mean(), hardware.mean())
