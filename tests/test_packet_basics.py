"""Closed-form and structural checks of the packet-level simulator (no ns-3 needed).

- One flow on an idle path: line rate, RTT = base RTT, no queue, no loss.
- Queues never exceed their buffers; every invariant of pathflow.invariants holds.
- Drop-tail Reno saw-tooth: the buffer fills, losses recur, the queue falls back between them.
- Window growth: +1 segment per RTT with ack_ratio 1, +1/2 with ack_ratio 2 (delayed ACKs).
- PFC: an incast that overflows a drop-tail port loses nothing when the switch pauses the
  NICs instead; the bottleneck stays busy, each NIC paused 1 - 1/8 of the time.
- A finite flow completes at k RTTs of slow start + the rest at line rate + one-way latency.
- k = 4 fat-tree permutation: spraying reaches nearly full bisection, ECMP collides.
- Same seed, same result; another seed, another (random spraying).
- The Dataset has the names, dimensions and units of fluid results.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr

import pathflow
from pathflow import Scenario
from pathflow.compile import ACK_BYTES
from pathflow.invariants import report_of
from pathflow.metrics import loss_cycles, mean_network_utilization, summarize, throughput
from pathflow.validation.packet import simulate_packets

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
PACKET = 1500.0


def star(senders: int = 1, *, rate: str = "1Gbps", delay: str = "10us", buffer: str = "100pkt",
         cc: str = "reno", aqm: str = "droptail", duration: str = "20ms",
         **sections: dict[str, Any]) -> Scenario:
    data: dict[str, Any] = {
        "name": "packet-star",
        "topology": {"kind": "star", "senders": senders, "link_rate": rate, "delay": delay,
                     "buffer": buffer},
        "aqm": {"kind": aqm},
        "traffic": {"pattern": "incast", "flows": senders},
        "transport": {"cc": cc},
        "run": {"duration": duration},
    }
    for name, values in sections.items():
        data.setdefault(name, {}).update(values)
    return Scenario.from_dict(data)


def invariants(ds: xr.Dataset) -> dict[str, bool]:
    return {name: verdict.ok for name, verdict in report_of(ds).items()}


def test_single_flow_on_idle_path() -> None:
    ds = simulate_packets(star(), host_jitter=0.0)
    capacity = 1e9 / 8
    base_rtt = 2 * (2 * 10e-6 + PACKET / capacity + ACK_BYTES / capacity)
    assert float(throughput(ds, warmup=0.005)[0]) == pytest.approx(capacity, rel=1e-3)
    rtt = ds.rtt.sel(subflow=0).values
    assert np.allclose(rtt[np.isfinite(rtt)], base_rtt, rtol=1e-9)
    assert ds.attrs["packets_dropped"] == 0
    assert float(ds.queue_max.max()) <= PACKET  # at most a packet meets its predecessor


def test_host_jitter_costs_half_its_share_of_line_rate() -> None:
    ds = simulate_packets(star(), host_jitter=0.01)
    assert float(throughput(ds, warmup=0.005)[0]) == pytest.approx(1e9 / 8 / 1.005, rel=2e-3)


@pytest.fixture(scope="module")
def sawtooth() -> xr.Dataset:
    """Two Reno flows through a 50-packet drop-tail buffer, 100 Mb/s."""
    return simulate_packets(star(2, rate="100Mbps", delay="62.5us", buffer="50pkt",
                                 duration="4s"), sample_interval=1e-3)


def test_queues_stay_within_buffers_and_invariants_hold(sawtooth: xr.Dataset) -> None:
    assert np.all(sawtooth.queue_max <= sawtooth.buffer)
    assert np.all(sawtooth.queue_min >= 0)
    assert all(invariants(sawtooth).values()), invariants(sawtooth)


def test_bytes_are_conserved(sawtooth: xr.Dataset) -> None:
    interval = sawtooth.attrs["sample_interval"]
    arrived = (sawtooth.link_arrival * interval).sum("time")
    left = ((sawtooth.link_departure + sawtooth.drops) * interval).sum("time")
    assert np.all(np.abs(arrived - left - sawtooth.queue.isel(time=-1)) <= PACKET)
    delivered = sawtooth.delivered.isel(time=-1).sum()
    sent = (sawtooth.send_rate * interval).sum()
    lost = sawtooth.lost.isel(time=-1).sum() * PACKET
    assert float(delivered) <= float(sent) - 0.99 * float(lost) + 1e-6


def test_reno_sawtooth_fills_the_buffer(sawtooth: xr.Dataset) -> None:
    link = "s0->r0"
    buffer = float(sawtooth.buffer.sel(link=link))
    assert float(sawtooth.queue_max.sel(link=link).max()) >= buffer - PACKET
    cycles = loss_cycles(sawtooth, link, warmup=1.0, gap=0.05)
    assert cycles["events"].size >= 5
    assert np.all(cycles["troughs"] < buffer - 5 * PACKET)  # every loss event drains it
    rates = throughput(sawtooth, warmup=1.0).values
    assert rates.sum() == pytest.approx(100e6 / 8, rel=0.01)
    assert rates.min() > 0.3 * rates.sum()  # no lock-out


@pytest.mark.parametrize("ecn", [False, True])
def test_red_marks_or_drops_at_its_curve(ecn: bool) -> None:
    """Two Reno flows through RED (10..40 packets, pmax 0.1): ECN-capable packets are marked,
    others dropped, at the fraction pmax (avg - min) / (max - min) of the average queue."""
    scenario = star(2, rate="100Mbps", delay="62.5us", buffer="200pkt", duration="2s").with_updates(
        {"aqm.kind": "red", "aqm.min": "10pkt", "aqm.max": "40pkt", "aqm.pmax": 0.1,
         "aqm.ecn": ecn})
    ds = simulate_packets(scenario, sample_interval=1e-3)
    link = ds.sel(link="s0->r0").sel(time=ds.time > 0.5)
    signalled, silent = (link.marks, link.drops) if ecn else (link.drops, link.marks)
    assert float(silent.max()) == 0.0
    fraction = float(signalled.mean() / link.link_arrival.mean())
    average = float(link.queue.mean()) / PACKET
    assert fraction == pytest.approx(0.1 * (average - 10) / 30, rel=0.3)
    assert float(link.utilization.mean()) > 0.99


def test_dcqcn_marking_follows_its_line_on_the_instantaneous_queue() -> None:
    """Two DCTCP flows behind DCQCN's marker (Kmin 10, Kmax 40 packets, Pmax 0.1): the marked
    fraction is pmax (q - Kmin) / (Kmax - Kmin) of the queue, nothing is dropped."""
    scenario = star(2, rate="100Mbps", delay="62.5us", buffer="200pkt", duration="2s",
                    transport={"cc": "dctcp"}).with_updates(
        {"aqm.kind": "dcqcn", "aqm.kmin": "10pkt", "aqm.kmax": "40pkt", "aqm.pmax": 0.1})
    ds = simulate_packets(scenario, sample_interval=1e-3)
    link = ds.sel(link="s0->r0").sel(time=ds.time > 0.5)
    assert float(link.drops.max()) == 0.0
    queue = link.queue.values / PACKET
    expected = float(np.mean(0.1 * np.clip(queue - 10, 0, None) / 30))
    fraction = float(link.marks.mean() / link.link_arrival.mean())
    assert fraction == pytest.approx(expected, rel=0.3)
    assert float(link.utilization.mean()) > 0.99


def test_pfc_makes_an_incast_lossless() -> None:
    """Eight Reno senders into one 100-packet drop-tail port, 1 Gb/s everywhere: without PFC
    slow start overflows it; with PFC (`models.pfc`) the switch pauses the host NICs instead.
    Each of the switch's 9 ingress ports may fill to its share of the buffer (Xoff plus the
    headroom for a PAUSE's round trip), so the bottleneck, fed by 8 of them, holds at most 8/9
    of it and drops nothing; a port resumes at Xon, far above empty, so the bottleneck never
    idles. Its full rate is the NICs' busy time summed, and a NIC with window to spare is
    either busy or paused: on average paused 1 - 1/8 of the time."""
    lossy = simulate_packets(star(8))
    lossless = simulate_packets(star(8).with_updates({"aqm.pfc": True}))
    assert lossy.attrs["packets_dropped"] > 0
    assert "pause" not in lossy
    assert lossless.attrs["packets_dropped"] == 0
    assert float(lossless.drops.max()) == 0.0
    bottleneck = lossless.sel(link="s0->r0")
    assert float(bottleneck.queue_max.max()) <= 8 / 9 * float(bottleneck.buffer)
    late = lossless.sel(time=lossless.time > 0.002)  # windows have outgrown what the path holds
    utilization = float(late.utilization.sel(link="s0->r0").mean())
    assert utilization > 0.99
    nics = [f"h{i}->s0" for i in range(8)]
    pause = late.pause.sel(link=nics)
    assert np.all(pause.mean("time") > 0)
    assert float(pause.mean()) == pytest.approx(1 - utilization / 8, abs=0.02)
    assert float(lossless.pause.drop_sel(link=nics).max()) == 0.0  # ACK queues stay short
    assert lossless.pause.attrs.get("units") == "1"
    assert all(invariants(lossless).values()), invariants(lossless)


@pytest.mark.parametrize("ack_ratio", [1, 2])
def test_window_grows_one_segment_per_ack_ratio_rtts(ack_ratio: int) -> None:
    """Congestion avoidance from the start (ssthresh = 10 packets) into a 2000-packet queue
    behind a 100 Mb/s bottleneck (hosts at 1 Gb/s): cwnd grows by 1/ack_ratio per RTT."""
    scenario = star(rate="1Gbps", delay="1ms", buffer="2000pkt", duration="0.6s",
                    transport={"ack_ratio": ack_ratio, "ssthresh": "10pkt"},
                    topology={"links": [{"match": "s0->r0", "link_rate": "100Mbps"}]})
    ds = simulate_packets(scenario, sample_interval=1e-3)
    assert ds.attrs["packets_dropped"] == 0
    t = ds.time.values
    cwnd = ds.cwnd.sel(subflow=0).values / PACKET
    rtt = ds.rtt.sel(subflow=0).values
    window = (t > 0.1) & (t <= 0.6)
    rounds = float(np.sum(1e-3 / rtt[window]))
    growth = (cwnd[window][-1] - cwnd[window][0]) / rounds
    assert growth == pytest.approx(1 / ack_ratio, rel=0.05)


@pytest.mark.parametrize("packets", [100, 300, 1000])
def test_finite_flow_completion_closed_form(packets: int) -> None:
    """1 Gb/s, 250 us links (BDP 85 packets): slow start doubles the initial 10 packets each
    RTT until a window covers the path, then the rest leaves at line rate."""
    scenario = star(delay="250us", buffer="1000pkt", duration="40ms",
                    traffic={"size": f"{packets}pkt"})
    ds = simulate_packets(scenario, sample_interval=1e-4, host_jitter=0.0)
    capacity, hop = 1e9 / 8, 250e-6
    rtt = 2 * (2 * hop + PACKET / capacity + ACK_BYTES / capacity)
    bdp = rtt * capacity / PACKET
    rounds, sent, window = 0, 0, 10
    while window < bdp and sent + window < packets:
        sent, window, rounds = sent + window, 2 * window, rounds + 1
    closed = rounds * rtt + (packets - sent) * PACKET / capacity + 2 * (hop + PACKET / capacity)
    completion = float(ds.completion_time.sel(flow=0))
    assert completion == pytest.approx(closed, abs=0.1 * rtt)
    assert float(ds.delivered.isel(time=-1, flow=0)) == packets * PACKET
    assert math.isinf(float(simulate_packets(star()).completion_time[0]))  # endless flow


@pytest.fixture(scope="module")
def fattree() -> dict[str, xr.Dataset]:
    base = pathflow.load_scenario(EXAMPLES / "fattree_permutation.toml")
    return {mode: simulate_packets(base.with_updates({"routing.mode": mode,
                                                      "run.duration": "100ms"}))
            for mode in ("ecmp", "spray")}


def test_spray_reaches_nearly_full_bisection(fattree: dict[str, xr.Dataset]) -> None:
    bisection = 16 * 1e9 / 8  # 16 hosts at 1 Gb/s, full-bisection k = 4 fat-tree
    spray = float(throughput(fattree["spray"]).sum())
    ecmp = float(throughput(fattree["ecmp"]).sum())
    assert spray >= 0.9 * bisection
    assert ecmp <= 0.8 * spray  # flows hashed onto the same core links share them
    assert np.all(fattree["ecmp"].paths == 1)
    assert np.all(fattree["spray"].paths == fattree["spray"].equal_cost_paths)
    for ds in fattree.values():
        assert all(invariants(ds).values()), invariants(ds)


def test_path_bytes_count_every_data_byte_sent(fattree: dict[str, xr.Dataset]) -> None:
    """Seed 002's accounting at packet level: a flow's path bytes add up to the data bytes it
    sent (retransmissions included); spraying sends about a quarter of them on each of the 4
    inter-pod paths (a few thousand packets each: binomial spread well under 10 %), so mean
    network utilization is near 1; ECMP uses one path, 1/P."""
    for ds in fattree.values():
        sent = (ds.send_rate * float(ds.attrs["sample_interval"])).sum("time")
        np.testing.assert_allclose(ds.path_bytes.sum("path").values, sent.values, rtol=1e-9)
    spray, ecmp = fattree["spray"], fattree["ecmp"]
    inter_pod = spray.sel(flow=spray.equal_cost_paths == 4)
    shares = inter_pod.path_bytes / inter_pod.path_bytes.sum("path")
    np.testing.assert_allclose(shares.values, 0.25, atol=0.025)
    assert mean_network_utilization(spray) > 0.9
    one_path = float((1 / ecmp.equal_cost_paths).mean())
    assert mean_network_utilization(ecmp) == pytest.approx(one_path)


def test_same_seed_same_result_other_seed_other_result() -> None:
    scenario = pathflow.load_scenario(EXAMPLES / "fattree_permutation.toml").with_updates(
        {"routing.mode": "spray", "run.duration": "5ms"})
    first, again = simulate_packets(scenario), simulate_packets(scenario)
    other = simulate_packets(scenario, seed=7)
    for name in ("queue", "flow_rate", "cwnd", "rtt"):
        np.testing.assert_array_equal(first[name].values, again[name].values)
    assert not np.array_equal(first.queue.values, other.queue.values)


def test_dataset_speaks_the_fluid_vocabulary() -> None:
    scenario = star(2, cc="dctcp", duration="10ms").with_updates(
        {"aqm.kind": "ecn_step", "aqm.threshold": "20pkt"})
    packet = simulate_packets(scenario)
    fluid = pathflow.simulate(scenario)
    for name, variable in fluid.data_vars.items():
        if name in ("cwr", "credit", "dt", "stall"):
            continue  # fluid-only bookkeeping: per-window reaction, step, timer's time left
        assert name in packet, name
        assert packet[name].dims == variable.dims, name
        assert packet[name].attrs.get("units") == variable.attrs.get("units"), name
    for coord in fluid.coords:
        assert coord in packet.coords, coord
    assert packet.attrs["engine"] == "pathflow packet"
    assert summarize(packet).bottleneck == "s0->r0"
