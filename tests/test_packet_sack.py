"""SACK, the RTO floor and the delayed-ACK timer of the packet-level reference, against numbers
worked out by hand from the protocol specifications (no value taken from a run).

- A slow-start overshoot into a 20-packet drop-tail buffer loses k >= 10 segments of one window
  (every other segment while the queue is full). With SACK (RFC 6675) one recovery repairs them
  all, retransmitting exactly the k lost segments, within 4 worst-case round trips of the last
  drop and without a timeout. NewReno without SACK (RFC 6582) learns one hole per partial ACK:
  at least k - 1 base round trips, at most k + 1 worst-case ones (Fall and Floyd 1996).
- RFC 6298 (2.4): the retransmission timer never fires less than rto_min after the last ACK that
  restarted it, so a flow's in-order delivery has stalled for at least rto_min when it fires.
- RFC 1122 / 5681 delayed ACKs: an odd last segment is acknowledged when the delayed-ACK timer
  expires, so its RTT sample is the base RTT plus the timeout.
- Scenario keys: defaults, units, ranges and one-line errors; DCQCN never uses SACK.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import xarray as xr

from pathflow import Scenario
from pathflow.scenario import ScenarioError
from pathflow.validation.packet import layout as L
from pathflow.validation.packet import simulate_packets
from pathflow.validation.packet.build import Options, build

MSS = 1500.0
BOTTLENECK = 100e6 / 8  # bytes/s
DELAY = 62.5e-6  # s per link
BUFFER = 20  # packets


def star(senders: int = 1, *, access: str = "100Mbps", duration: str = "40ms",
         traffic: dict[str, Any] | None = None, **transport: Any) -> Scenario:
    return Scenario.from_dict({
        "name": "sack",
        "topology": {"kind": "star", "senders": senders, "link_rate": "100Mbps",
                     "delay": "62.5us", "buffer": f"{BUFFER}pkt",
                     "links": [{"tier": "access", "link_rate": access}]},
        "aqm": {"kind": "droptail"},
        "traffic": {"pattern": "incast", "flows": senders, **(traffic or {})},
        "transport": {"cc": "reno", **transport},
        "run": {"duration": duration},
    })


# --- one window of losses -------------------------------------------------------------------
DT = 1e-4  # s between samples
ACCESS = 1e9 / 8  # bytes/s: the host link, 10x the bottleneck
# base RTT: 4 propagation delays, a data packet serialised on both links, an ACK (64 B) too
BASE_RTT = 4 * DELAY + (MSS + 64) * (1 / ACCESS + 1 / BOTTLENECK)
WORST_RTT = BASE_RTT + BUFFER * MSS / BOTTLENECK  # behind a full buffer
# slow start keeps overshooting until 3 segments SACKed (or duplicate ACKs) above the first
# hole reach the sender: one round trip behind the full buffer and 3 more packet times
DETECTION = WORST_RTT + 3 * MSS / BOTTLENECK


def _overshoot(sack: bool) -> xr.Dataset:
    return simulate_packets(star(access="1Gbps", sack=sack), sample_interval=DT, host_jitter=0.0)


def _episode(ds: xr.Dataset) -> dict[str, float]:
    """The first burst of drops at the bottleneck (k packets, from the link's counter) and when
    the receiver had in order every byte sent before its last drop (original transmissions:
    all sent less the retransmitted)."""
    t = ds.time.values
    drops = ds.drops.sel(link="s0->r0").values * DT / MSS
    hit = np.nonzero(drops > 0)[0]
    burst = hit[t[hit] <= t[hit[0]] + DETECTION + DT]
    end = t[hit[0]] + DETECTION + DT
    after = float(drops[(t > end) & (t <= end + 3e-3)].sum())
    last = burst[-1]
    sent = np.cumsum(ds.send_rate.values[:, 0]) * DT
    original = sent[last] - float(ds.resent.values[last, 0])
    repaired = int(np.argmax(ds.delivered.values[:, 0] >= original - 1.0))
    return {"k": float(drops[burst].sum()), "after": after, "first": t[hit[0]], "last": t[last],
            "repaired": t[repaired], "resent": float(ds.resent.values[repaired, 0]) / MSS,
            "recoveries": float(ds.recoveries.values[repaired, 0]),
            "timeouts": float(ds.timeouts.values[repaired, 0])}


@pytest.fixture(scope="module")
def overshoot() -> dict[bool, dict[str, float]]:
    return {sack: _episode(_overshoot(sack)) for sack in (True, False)}


def test_the_overshoot_loses_many_segments_of_one_window(
        overshoot: dict[bool, dict[str, float]]) -> None:
    for episode in overshoot.values():
        assert episode["k"] >= 10  # the pipe holds ~24 packets; the window doubles past it
        # the burst ends when the loss is detected: one window's worth (sampled every DT)
        assert episode["last"] - episode["first"] <= DETECTION + DT
        assert episode["after"] == 0  # and is followed by no other for a while


def test_sack_repairs_a_window_of_losses_in_one_recovery(
        overshoot: dict[bool, dict[str, float]]) -> None:
    episode = overshoot[True]
    assert episode["timeouts"] == 0
    assert episode["recoveries"] == 1
    assert episode["resent"] == episode["k"]  # exactly the lost segments, none twice
    # lost segments go out one per ACK in the first round; the last holes (below the top 3
    # SACKed segments) are seen lost once new data is SACKed above them a round later; each
    # retransmission needs a round to arrive: within 4 round trips behind a full buffer
    assert episode["repaired"] - episode["last"] <= 4 * WORST_RTT


def test_newreno_repairs_one_hole_per_round_trip(
        overshoot: dict[bool, dict[str, float]]) -> None:
    episode = overshoot[False]
    k = episode["k"]
    assert episode["timeouts"] == 0
    assert episode["recoveries"] == 1
    assert episode["resent"] == k
    took = episode["repaired"] - episode["first"]
    assert (k - 1) * BASE_RTT <= took <= (k + 1) * WORST_RTT
    assert took > 2 * (overshoot[True]["repaired"] - overshoot[True]["first"])


# --- the RTO's floor --------------------------------------------------------------------------
@pytest.mark.parametrize("rto_min", [0.2, 0.01])
def test_the_retransmission_timer_never_fires_before_rto_min(rto_min: float) -> None:
    """8 Reno flows synchronise their slow-start losses on a 20-packet buffer; some lose whole
    windows and time out. A delivery that advanced the receiver's in-order data at t_d is
    acknowledged by t_d + W (W: the delayed-ACK timer, rto_min / 5 by default, plus the ACK's
    one-way trip), which restarts the timer (RFC 6298 5.3); so a timeout after t_d + W comes
    at least rto_min after t_d. Samples: the timeout in (t[j-1], t[j]], the delivery in
    (t[m-1], t[m]] with t[m] + W <= t[j-1]."""
    ds = simulate_packets(star(8, duration="400ms", rto_min=f"{rto_min * 1e3:g}ms"),
                          sample_interval=DT)
    ack_trip = 2 * DELAY + 2 * 64 / BOTTLENECK
    window = ds.attrs["delack_timeout"] + ack_trip
    t, timeouts, delivered = ds.time.values, ds.timeouts.values, ds.delivered.values
    stalls = []
    for s in range(ds.sizes["subflow"]):
        for j in np.nonzero(np.diff(timeouts[:, s]) > 0)[0] + 1:
            advances = np.nonzero(np.diff(delivered[:j, s]) > 0)[0] + 1
            advances = advances[t[advances] + window <= t[j - 1]]
            since = t[advances[-1] - 1] if len(advances) else 0.0
            stalls.append(t[j] - since)
    assert stalls, "no timeout: the scenario tests nothing"
    assert min(stalls) >= rto_min
    assert min(stalls) < rto_min + 0.05  # and the key is what sets it (200 ms vs 10 ms)


# --- the delayed-ACK timer --------------------------------------------------------------------
@pytest.mark.parametrize("timeout", [0.005, 0.02])
def test_an_odd_last_segment_waits_for_the_delayed_ack_timer(timeout: float) -> None:
    """Three segments at line rate (no queue): the receiver acknowledges the first two at once
    and the third when its timer expires, so the largest RTT sample is base RTT + timeout."""
    scenario = star(traffic={"size": f"{3 * MSS:g}B"}, duration="60ms",
                    delayed_ack_timeout=f"{timeout * 1e3:g}ms")
    ds = simulate_packets(scenario, sample_interval=1e-3, host_jitter=0.0)
    base_rtt = 4 * DELAY + 2 * (MSS + 64) / BOTTLENECK
    assert float(np.nanmax(ds.rtt.values)) == pytest.approx(base_rtt + timeout, abs=1e-9)


# --- scenario keys ----------------------------------------------------------------------------
def test_stack_defaults_follow_linux() -> None:
    stack = star().si.transport
    assert (stack.sack, stack.rto_min, stack.delayed_ack_timeout) == (True, 0.2, 0.04)
    fast = star(rto_min="1ms").si.transport  # the delayed-ACK timer follows a small RTO down
    assert (fast.rto_min, fast.delayed_ack_timeout) == pytest.approx((1e-3, 2e-4))
    given = star(rto_min="200us", delayed_ack_timeout="1ms", sack=False).si.transport
    assert given.sack is False
    assert (given.rto_min, given.delayed_ack_timeout) == pytest.approx((2e-4, 1e-3))


@pytest.mark.parametrize(("key", "value", "says"), [
    ("rto_min", "0ms", "transport.rto_min"),
    ("rto_min", "2min", "transport.rto_min"),
    ("rto_min", 200, "transport.rto_min"),
    ("delayed_ack_timeout", "1s", "transport.delayed_ack_timeout"),
    ("delayed_ack_timeout", "-1ms", "transport.delayed_ack_timeout"),
    ("sack", "sometimes", "transport.sack"),
])
def test_bad_stack_keys_are_one_line_errors(key: str, value: Any, says: str) -> None:
    with pytest.raises(ScenarioError, match=says) as error:
        star(**{key: value})
    assert "\n" not in str(error.value)


def test_traffic_groups_share_the_host_stack() -> None:
    with pytest.raises(ScenarioError, match=r"traffic.groups\[0\].rto_min: one TCP stack"):
        star(traffic={"groups": [{"flows": 1, "rto_min": "1ms"}]})


def test_packet_engine_reads_the_stack_keys() -> None:
    ds = simulate_packets(star(rto_min="1ms", sack=False, duration="2ms"))
    assert ds.attrs["sack"] == 0
    assert (ds.attrs["min_rto"], ds.attrs["delack_timeout"]) == pytest.approx((1e-3, 2e-4))


def test_dcqcn_senders_never_use_sack() -> None:
    scenario = Scenario.from_dict({
        "name": "dcqcn", "topology": {"kind": "star", "senders": 2, "link_rate": "10Gbps"},
        "aqm": {"kind": "dcqcn", "pfc": True}, "traffic": {"pattern": "incast"},
        "transport": {"cc": "dcqcn"}, "run": {"duration": "1ms"}})
    options = Options(sample_interval=0.0, min_rto=1e-3, delayed_ack=1, delack_timeout=1e-3,
                      seed=1)
    assert not build(scenario, options).sim.senders.i[:, L.SI_SACK].any()
    assert build(star(), options).sim.senders.i[:, L.SI_SACK].all()
