"""ns-3 ground-truth runner: a short DCTCP star run must look like DCTCP, in SI units."""

from __future__ import annotations

import numpy as np
import pytest

from pathflow.validation.ns3_runner import Ns3Config, ns3_available, run_ns3

PACKET = 1500
RATE_BPS = 100e6
K = 20


def test_config_json_roundtrip_and_validation() -> None:
    cfg = Ns3Config(
        topology="dumbbell", senders=2, link_rate_bps=1e9, delay_s=1e-5, buffer_packets=100,
        aqm="red", cc="reno", flows=3, duration_s=0.1, start_times_s=(0.0, 0.01, 0.02),
    )  # fmt: skip
    assert Ns3Config.from_json(cfg.to_json()) == cfg
    assert cfg.flow_endpoints() == [("h0", "r0"), ("h1", "r1"), ("h0", "r0")]
    # 3 hops x (2 x 10 us + 1502 B + 54 B serialized at 1 Gb/s)
    assert cfg.base_rtt_s == pytest.approx(3 * (20e-6 + 1556 * 8 / 1e9))
    with pytest.raises(ValueError, match="start_times_s"):
        Ns3Config(
            topology="star", senders=1, link_rate_bps=1e9, delay_s=1e-5, buffer_packets=100,
            aqm="droptail", cc="reno", flows=2, duration_s=0.1, start_times_s=(0.0,),
        )  # fmt: skip


@pytest.mark.ns3
def test_dctcp_star_holds_queue_at_threshold() -> None:
    # find_spec rather than importorskip: importing ns-3 here would cost ~13 s and load its
    # global state into the test process, while the runner only needs it in a subprocess.
    if not ns3_available():
        pytest.skip("ns-3 Python bindings (pip package ns3) not installed")
    cfg = Ns3Config(
        topology="star", senders=2, link_rate_bps=RATE_BPS, delay_s=62.5e-6,
        buffer_packets=425, aqm="ecn_step", cc="dctcp", flows=2, duration_s=0.3,
        threshold_packets=K, packet_bytes=PACKET,
    )  # fmt: skip
    ds = run_ns3(cfg, timeout_s=600)

    assert set(ds.dims) == {"time", "link", "flow"}
    assert ds.sizes["time"] == 300 and ds.sizes["flow"] == 2
    np.testing.assert_allclose(ds.time.values[[0, -1]], [1e-3, 0.3])
    assert "s0->r0" in ds.link.values and ds.attrs["bottleneck_link"] == "s0->r0"
    assert list(ds.src.values) == ["h0", "h1"] and list(ds.dst.values) == ["r0", "r0"]
    units = {
        "queue": "bytes", "flow_rate": "bytes/s", "link_departure": "bytes/s",
        "drops": "bytes/s", "marks": "bytes/s", "cwnd": "bytes", "rtt": "s", "alpha": "1",
    }  # fmt: skip
    for name, unit in units.items():
        assert ds[name].attrs["units"] == unit, name
    assert ds.time.attrs["units"] == "s"
    assert ds.attrs["engine"] == "ns-3 3.44"
    assert Ns3Config.from_json(ds.attrs["config"]) == cfg
    assert ds.attrs["wall_time_s"] > 0

    steady = ds.sel(time=slice(0.1, None), link="s0->r0")
    queue_pkts = steady.queue.values / PACKET
    # DCTCP keeps the instantaneous queue oscillating tightly around K, never near the buffer.
    assert abs(queue_pkts.mean() - K) < 3
    assert np.percentile(queue_pkts, 1) > K / 2
    assert queue_pkts.max() < 2 * K
    assert float(steady.drops.sum()) == 0.0
    assert float(steady.marks.sum()) > 0.0

    link_bytes_per_s = RATE_BPS / 8
    goodput = float(steady.flow_rate.sum("flow").mean()) / link_bytes_per_s
    assert goodput > 0.9
    # The wire carries 1500 B IP packets in 1502 B PPP frames at full utilization.
    departure = float(steady.link_departure.mean()) / link_bytes_per_s
    assert departure == pytest.approx(PACKET / (PACKET + 2), rel=0.01)
    # The measured RTT never beats the empty-network RTT and is about base + queue / C.
    rtt = ds.rtt.values
    assert np.nanmin(rtt) >= 0.99 * ds.attrs["base_rtt_s"]
    expected = ds.attrs["base_rtt_s"] + K * PACKET / link_bytes_per_s
    assert float(steady.rtt.mean()) == pytest.approx(expected, rel=0.25)
    alpha = steady.alpha.values
    assert np.all((alpha >= 0) & (alpha <= 1))
