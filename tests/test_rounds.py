"""Barrier-synchronised rounds (`[traffic] rounds`, partition/aggregate reads): the scenario
keys and their errors, and the packet engine's barrier against closed forms and physics."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

import pathflow
from helpers import TINY_TOML
from pathflow import Scenario
from pathflow.cli import app
from pathflow.metrics import round_summary, transfer_rates
from pathflow.routing import build_routes
from pathflow.scenario import ScenarioError
from pathflow.schema import check_dataset
from pathflow.topology import build_network
from pathflow.validation.packet import simulate_packets

MSS = 1500.0
GBPS = 1.25e8  # bytes/s


def scenario(senders: int = 1, *, rate: str = "1Gbps", delay: str = "10us",
             buffer: str = "100pkt", size: str = "5000B", rounds: int = 3,
             duration: str = "5ms", **sections: dict[str, Any]) -> Scenario:
    data: dict[str, Any] = {
        "name": "rounds",
        "topology": {"kind": "star", "senders": senders, "link_rate": rate, "delay": delay,
                     "buffer": buffer},
        "aqm": {"kind": "droptail"},
        "traffic": {"pattern": "incast", "size": size, "rounds": rounds},
        "transport": {"cc": "reno"},
        "run": {"duration": duration, "sample": "10us"},
    }
    for name, values in sections.items():
        data.setdefault(name, {}).update(values)
    return Scenario.from_dict(data)


# --- the scenario ------------------------------------------------------------------------------

def test_rounds_resolve_into_traffic_groups_and_flows() -> None:
    plain = scenario(rounds=1)
    assert plain.si.traffic.rounds == 1
    mixed = scenario(2, traffic={"groups": [
        {"pairs": [[0, 2]], "pattern": "explicit", "rounds": 1},
        {"rounds": 4, "flows": 1}]})
    assert [g.traffic.rounds for g in mixed.si.groups] == [1, 4]
    flows = build_routes(mixed, build_network(mixed)).flows
    assert [(f.rounds, f.size, f.group) for f in flows] == [(1, 5000.0, 0), (4, 5000.0, 1)]
    updated = plain.with_updates({"traffic.rounds": 7})
    assert updated.si.traffic.rounds == 7 and "rounds = 7" in updated.to_toml()


@pytest.mark.parametrize(("traffic", "message"), [
    ({"pattern": "permutation", "rounds": 3},
     "traffic.rounds: barrier-synchronised rounds are a partition/aggregate read, pattern = "
     "'incast' only (got pattern = 'permutation'); leave rounds at 1"),
    ({"size": "inf", "rounds": 3},
     "traffic.rounds: 3 rounds needs a finite traffic.size (the block each server sends per "
     "round)"),
    ({"rounds": 0}, "traffic.rounds: Input should be greater than or equal to 1 (got 0)"),
    ({"groups": [{"rounds": 2}, {"rounds": 2, "size": "inf"}]},
     "traffic.groups[1].rounds: 2 rounds needs a finite traffic.groups[1].size"),
])
def test_rounds_errors_are_one_line_naming_the_field(traffic: dict[str, Any], message: str
                                                     ) -> None:
    with pytest.raises(ScenarioError) as error:
        scenario(4, traffic=traffic)
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


@pytest.mark.parametrize(("traffic", "field"), [
    ('pattern = "stride"\nstride = 1\nrounds = 2', "traffic.rounds"),
    ('rounds = 2', "traffic.rounds"),  # the default size is inf
])
def test_rounds_errors_exit_with_code_2(tmp_path: Path, traffic: str, field: str) -> None:
    path = tmp_path / "s.toml"
    path.write_text(TINY_TOML.replace("[transport]", f"[traffic]\n{traffic}\n[transport]"))
    result = CliRunner().invoke(app, ["run", str(path), "-q"])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and field in lines[0]


def test_the_packet_engine_refuses_rounds_over_several_subflows() -> None:
    lia = scenario(2, transport={"cc": "lia", "subflows": 2})
    with pytest.raises(ScenarioError, match=r"^traffic.rounds: the packet engine runs rounds "
                                            "with one subflow per flow"):
        simulate_packets(lia)


# --- the packet engine against closed forms ------------------------------------------------------

def test_round_times_of_a_block_that_fits_in_one_window() -> None:
    """One flow, 3 rounds of a 5000 B block (3 full segments and one of 500 B) on an idle
    1 Gb/s star (h0 -> s0 -> r0, 10 us per link). Reno starts with 10 segments of window, so
    the block leaves the NIC back to back; with no handshake a round lasts the block's
    serialisation at the NIC, one more full segment at the switch (store-and-forward: the
    last, short segment waits there for the one before it) and two propagation delays:
    4 T + T_500 + 2 d. The next round starts at that instant, with the last round's block not
    yet acknowledged: 4 + 4 segments still fit in the window of 10, so every round takes the
    same time."""
    ds = simulate_packets(scenario(), host_jitter=0.0)
    check_dataset(ds)
    full, short, d = MSS / GBPS, 500.0 / GBPS, 10e-6
    one_round = 4 * full + short + 2 * d
    assert ds.block_done.dims == ("flow", "round") and ds.block_done.attrs["units"] == "s"
    assert list(ds["round"].values) == [0, 1, 2]
    np.testing.assert_allclose(ds.block_done.values[0], one_round * np.arange(1, 4), rtol=1e-9)
    assert float(ds.completion_time[0]) == pytest.approx(3 * one_round, rel=1e-9)
    assert float(ds.delivered[-1, 0]) == 3 * 5000.0  # 3 blocks, each with its short segment
    rounds = round_summary(ds)
    np.testing.assert_allclose(rounds.round_time.values[0], one_round, rtol=1e-9)
    assert float(rounds.goodput[0]) == pytest.approx(5000.0 / one_round, rel=1e-9)
    assert int(rounds.rounds_completed[0]) == 3
    # a flow with rounds transfers its block once per round
    elapsed = 3 * one_round
    assert float(transfer_rates(ds, 0.0).goodput[0]) == pytest.approx(15000.0 / elapsed)


def test_a_first_round_longer_than_the_initial_window_takes_a_slow_start_round_trip() -> None:
    """A 16-segment block with 100 us links: the initial window of 10 segments goes out back
    to back (10 T = 120 us, less than the round trip), then the NIC waits for the first ACK.
    That ACK (the receiver acknowledges every 2nd segment) leaves when segment 1 arrives, at
    2 T + T + 2 d, and is back after 2 T_ack + 2 d (64-byte ACKs). From then on each ACK, two
    segments apart, opens 4 segments of window (2 acknowledged, 2 of slow-start growth) while
    the NIC sends 2: the other 6 segments leave back to back, and the last arrives a segment
    time (the switch) and 2 d after it left. Later rounds start with a grown window: never
    longer than the first, never shorter than the block's serialisation."""
    ds = simulate_packets(scenario(delay="100us", size="24000B", rounds=2, duration="10ms"),
                          host_jitter=0.0)
    T, ack, d = MSS / GBPS, 64.0 / GBPS, 100e-6
    first_ack = 3 * T + 2 * d + 2 * ack + 2 * d
    first_round = first_ack + (16 - 10 + 1) * T + 2 * d
    done = ds.block_done.values[0]
    assert done[0] == pytest.approx(first_round, rel=1e-9)
    second = done[1] - done[0]
    assert 17 * T + 2 * d <= second <= first_round


# --- the barrier ------------------------------------------------------------------------------

def test_no_round_starts_before_the_slowest_block_of_the_last_one_arrived() -> None:
    """Two servers, one behind a 100 Mb/s access link: in every round the fast flow's block
    arrives first and its sender must then wait. From the recorded bytes sent (cumulative, per
    10 us sample), the fast flow never has more than r + 1 blocks out before the slow flow's
    round-r block arrived, and it sends its next block right after."""
    block = 30_000.0
    ds = simulate_packets(scenario(2, size="30KB", rounds=4, duration="20ms",
                                   topology={"links": [{"match": "h1->s0",
                                                        "link_rate": "100Mbps"}]}),
                          host_jitter=0.0)
    done = ds.block_done.values  # (flow, round)
    assert np.all(np.isfinite(done))
    fast, slow = 0, 1
    assert np.all(done[fast] < done[slow])  # the fast flow waits at every barrier
    interval = float(ds.attrs["sample_interval"])
    sent = (ds.send_rate.values * interval).cumsum(axis=0)  # bytes sent by the end of a sample
    time = ds.time.values
    assert float(ds.resent.values[-1].sum()) == 0.0  # nothing sent twice: sent is blocks
    for r in range(3):
        barrier = done[:, r].max()
        assert barrier == done[slow, r]
        before = time <= barrier
        assert sent[before, fast].max() <= (r + 1) * block + 1e-6
        after = time > barrier + 2 * interval
        assert sent[after, fast].min() > (r + 1) * block  # the next round began at once
        assert done[fast, r + 1] > barrier + block / GBPS  # a whole block after the barrier
    rounds = round_summary(ds)
    np.testing.assert_allclose(rounds.round_end.values[0], done[slow])


def test_block_done_of_groups_with_and_without_rounds() -> None:
    """A group of 2 flows with 2 rounds beside a single transfer: block_done is the barrier's
    record for the first, the completion time in round 0 for the second (nan after it), and
    round_summary reports the group with rounds alone."""
    mixed = scenario(3, traffic={"groups": [
        {"pairs": [[0, 3], [1, 3]], "pattern": "explicit", "rounds": 1, "size": "60KB"},
        {"pattern": "explicit", "pairs": [[2, 3]], "rounds": 1},
        {"flows": 2, "rounds": 2, "receiver": 0}]}, duration="10ms")
    ds = simulate_packets(mixed, host_jitter=0.0)
    check_dataset(ds)
    assert ds.block_done.shape == (5, 2)
    single = ds.block_done.values[:3]
    np.testing.assert_array_equal(single[:, 0], ds.completion_time.values[:3])
    assert np.all(np.isnan(single[:, 1]))
    rounds = round_summary(ds)
    assert list(rounds.group.values) == [2] and int(rounds.rounds[0]) == 2
    ends = ds.block_done.values[3:].max(axis=0)
    np.testing.assert_allclose(rounds.round_end.values[0], ends)
    assert float(rounds.round_start[0, 1]) == ends[0]


def test_no_rounds_no_round_dimension() -> None:
    ds = simulate_packets(scenario(rounds=1), host_jitter=0.0)
    assert "block_done" not in ds and "round" not in ds.dims
    assert round_summary(ds).sizes["group"] == 0


def test_the_window_restarts_after_an_idle_rto() -> None:
    """The fast flow of the barrier test grows its window in slow start, then idles about 9 ms
    while the slow flow (50 Mb/s) delivers its block. With rto_min = 1 ms that idle time is
    several RTOs, and the next round restarts from min(cwnd, init_cwnd) = 10 segments (Linux's
    tcp_slow_start_after_idle); with 200 ms it is less than one, and the window stays."""
    def run(rto_min: str) -> tuple[float, float]:
        ds = simulate_packets(scenario(2, size="60KB", rounds=2, delay="50us",
                                       duration="30ms", transport={"rto_min": rto_min},
                                       topology={"links": [{"match": "h1->s0",
                                                            "link_rate": "50Mbps"}]}),
                              host_jitter=0.0)
        barrier = float(ds.block_done[:, 0].max())
        cwnd = ds.cwnd.sel(subflow=0) / MSS
        before = float(cwnd.sel(time=barrier, method="ffill"))
        after = float(cwnd.sel(time=barrier + 20e-6, method="bfill"))  # before any ACK
        return before, after

    before, after = run("1ms")
    assert before > 20 and after == 10.0
    before, after = run("200ms")
    assert after == before > 20


# --- incast collapse ----------------------------------------------------------------------------

def incast(servers: int, rto_min: str) -> Any:
    """The classic incast (Phanishayee et al., FAST 2008; Vasudevan et al., SIGCOMM 2009):
    `servers` senders each answer 10 barrier-synchronised reads of 256 KB through one 1 Gb/s
    switch port with 64 KB (43 packets) of drop-tail buffer; Reno with SACK."""
    ds = simulate_packets(scenario(servers, delay="25us", buffer="64KB", size="256KB",
                                   rounds=10, duration="6s", run={"sample": "1ms"},
                                   transport={"sack": True, "rto_min": rto_min}))
    return round_summary(ds)


def test_incast_collapse_and_its_cure() -> None:
    """Physics of the three runs (1 Gb/s = 125 MB/s; a round moves N x 256 KB):

    - 4 servers: their first windows (4 x 10 segments) fit in the 43-packet buffer. In the
      first round all four double their windows in slow start together and can overshoot the
      buffer by dozens of packets, so that a lost retransmission may need an RTO; from the
      second round on they start from windows that the pipe and buffer nearly hold, lose at
      most a few packets per round trip, and SACK repairs those within a round trip: every
      later round runs at close to line rate (1 MB in 8.2 ms plus a round trip).
    - 32 servers: 320 segments of first windows meet a 43-packet buffer; servers lose whole
      windows or their tails, which only the retransmission timer recovers. A round that waits
      out one RTO lasts at least rto_min = 200 ms while its 8.2 MB need 66 ms at line rate, so
      its goodput is at most 8.2 MB / 0.2 s = 0.33 Gb/s, and every round does wait.
    - 32 servers with rto_min = 200 us: the same losses cost hundreds of microseconds to a few
      milliseconds of backed-off timers instead, against the 66 ms of data: goodput stays at
      a large fraction of the link."""
    few = incast(4, "200ms")
    gbps = few.round_goodput.values[0] * 8e-9
    assert np.all(gbps[1:] >= 0.8), gbps
    many = incast(32, "200ms")
    assert np.all(many.round_time.values[0] >= 0.2)  # every round waited out an RTO
    collapsed = float(many.goodput[0]) * 8e-9
    assert collapsed < 0.4
    cured = float(incast(32, "200us").goodput[0]) * 8e-9
    assert cured > 0.5 and cured > 2 * collapsed
    assert math.isfinite(cured)


def test_run_prints_the_rounds_of_the_example() -> None:
    example = Path(__file__).resolve().parents[1] / "examples" / "incast_rounds_1g.toml"
    result = CliRunner().invoke(app, ["run", str(example), "--engine", "packet", "-q"])
    assert result.exit_code == 0, result.output
    line = next(line for line in result.output.splitlines() if line.startswith("Rounds: "))
    assert line.startswith("Rounds: 5/5 done, round time mean ") and "goodput" in line


# --- the fluid engine ---------------------------------------------------------------------------

def test_fluid_rounds_of_a_flow_without_a_window_limit_last_a_block_at_line_rate() -> None:
    """One flow whose window never limits it (init_cwnd of 2,000 segments) reads 3 blocks of
    1 MB over an idle 1 Gb/s star: the fluid model delivers at the NIC's rate and has no data
    propagation delay, so each round lasts S / C = 8 ms (to within a few steps)."""
    ds = pathflow.simulate(scenario(size="1MB", rounds=3, duration="30ms",
                                    transport={"init_cwnd": "2000pkt"}))
    check_dataset(ds)
    rounds = np.diff(np.concatenate([[0.0], ds.block_done.values[0]]))
    np.testing.assert_allclose(rounds, 1e6 / GBPS, rtol=2e-3)
    assert float(ds.completion_time[0]) == pytest.approx(3e6 / GBPS, rel=2e-3)


def test_fluid_barrier_holds_the_fast_flow() -> None:
    """The two servers of the packet-level barrier test in the fluid model: the fast flow's
    block of round r + 1 arrives no sooner than a block's time at its line rate after the slow
    flow's block of round r, and the rounds end where round_summary says."""
    block = 30_000.0
    ds = pathflow.simulate(scenario(2, size="30KB", rounds=4, duration="20ms",
                                    topology={"links": [{"match": "h1->s0",
                                                         "link_rate": "100Mbps"}]}))
    done = ds.block_done.values
    assert np.all(np.isfinite(done))
    for r in range(3):
        assert done[0, r + 1] >= done[:, r].max() + block / GBPS * (1 - 1e-3)
    np.testing.assert_allclose(round_summary(ds).round_end.values[0], done.max(axis=0))


def test_fluid_window_restarts_after_an_idle_rto() -> None:
    """The fluid model's fast flow of the packet-level restart test: with rto_min = 1 ms its
    9 ms wait at the barrier is several RTOs and its window restarts from the initial 10
    segments in slow start; with 200 ms it keeps its window."""
    def run(rto_min: str) -> tuple[float, float, float]:
        ds = pathflow.simulate(scenario(2, size="60KB", rounds=2, delay="50us", duration="30ms",
                                        transport={"rto_min": rto_min},
                                        topology={"links": [{"match": "h1->s0",
                                                             "link_rate": "50Mbps"}]}))
        barrier = float(ds.block_done[:, 0].max())
        cwnd = ds.cwnd.sel(subflow=0) / MSS
        before = float(cwnd.sel(time=barrier - 20e-6, method="ffill"))
        after = ds.sel(time=barrier + 20e-6, method="bfill")
        return before, float(after.cwnd.sel(subflow=0)) / MSS, float(after.slow_start[0])

    before, after, slow_start = run("1ms")
    # from 10 segments, and 20 us of slow start (a tenth of the round trip) since
    assert before > 20 and 10.0 <= after <= 11.5 and slow_start == 1.0
    before, after, _ = run("200ms")
    assert after == pytest.approx(before, rel=0.05) and before > 20
