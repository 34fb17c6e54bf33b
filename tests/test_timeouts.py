"""Retransmission timeouts in the fluid model (`models.timeouts`, the solver's timers): the
hazard against the binomial count of duplicate ACKs, and the properties issue 11 names (a flow
in timeout sends nothing, goodput never above throughput, no timeouts with a buffer of one BDP
per flow), the last also at packet level."""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
import pytest

from pathflow.compile import compile_scenario
from pathflow.models import timeouts
from pathflow.models.window import event_rate
from pathflow.scenario import Scenario
from pathflow.simulate import run_compiled, simulate


def _at_least_three(m: int, p: float) -> float:
    """P[at least 3 of m segments arrive], each lost with probability p, by enumeration."""
    return sum(math.comb(m, k) * (1 - p) ** k * p ** (m - k) for k in range(3, m + 1))


@pytest.mark.parametrize("m", [0, 1, 2, 3, 4, 7, 12, 40])
@pytest.mark.parametrize("p", [0.001, 0.05, 0.3, 0.8])
def test_repairable_is_the_binomial_tail(m: int, p: float) -> None:
    got = float(timeouts.repairable(jnp.asarray(float(m)), jnp.asarray(p)))
    assert got == pytest.approx(_at_least_three(m, p), rel=1e-9, abs=1e-12)


def test_hazard_limits() -> None:
    rtt, acked = jnp.asarray(1e-4), jnp.asarray(1e5)
    # nothing lost, nothing to repair
    assert float(timeouts.hazard(jnp.asarray(10.0), jnp.asarray(0.0), acked, rtt,
                                 jnp.asarray(jnp.inf))) == 0.0
    # a block's last two segments: every loss event needs the timer
    loss = jnp.asarray(0.01)
    tail = timeouts.hazard(jnp.asarray(10.0), loss, acked, rtt, jnp.asarray(2.0))
    assert float(tail) == pytest.approx(float(event_rate(loss, acked, rtt)))
    # a long-lived flow at the 2-segment floor: three followers, all must arrive
    floor = timeouts.hazard(jnp.asarray(2.0), loss, acked, rtt, jnp.asarray(jnp.inf))
    assert float(floor) == pytest.approx(float(event_rate(loss, acked, rtt))
                                         * (1 - 0.99 ** 3), rel=1e-6)


@pytest.mark.parametrize("cwnd", [2.0, 5.0, 10.0])
@pytest.mark.parametrize("p", [0.01, 0.2, 0.6])
def test_rack_tlp_times_out_only_if_every_follower_and_the_probe_are_lost(cwnd: float,
                                                                         p: float) -> None:
    """Linux's recovery: a loss event needs the timer only where none of the m = W + 1
    segments after it and not the tail loss probe arrive; enumerated over the loss patterns of
    those m + 1 segments (each lost with probability p)."""
    m = int(cwnd) + 1
    patterns = np.array(np.meshgrid(*[[0, 1]] * (m + 1))).reshape(m + 1, -1).T  # 1: lost
    weight = np.prod(np.where(patterns == 1, p, 1 - p), axis=1)
    unrepaired = float(weight[patterns.all(axis=1)].sum())
    rtt, sent = jnp.asarray(1e-4), jnp.asarray(1e5)
    loss = jnp.asarray(p)
    linux = timeouts.hazard(jnp.asarray(cwnd), loss, sent, rtt, jnp.asarray(jnp.inf), 1.0)
    assert float(linux) == pytest.approx(float(event_rate(loss, sent, rtt)) * unrepaired,
                                         rel=1e-6)
    # and never more often than where three SACKed segments must arrive (to rounding)
    assert float(linux) <= float(timeouts.hazard(jnp.asarray(cwnd), loss, sent, rtt,
                                                 jnp.asarray(jnp.inf))) + 1e-15


def test_rto_follows_rfc6298() -> None:
    srtt, rttvar = jnp.asarray(0.01), jnp.asarray(0.002)
    assert float(timeouts.rto(srtt, rttvar, jnp.asarray(0.2))) == pytest.approx(0.2)
    assert float(timeouts.rto(srtt, rttvar, jnp.asarray(2e-4))) == pytest.approx(0.018)


def _incast(flows: int, buffer: str, duration: str = "60ms", **transport: object) -> Scenario:
    return Scenario.from_dict({
        "name": "timeouts",
        "topology": {"kind": "star", "senders": 8, "link_rate": "1Gbps", "delay": "25us",
                     "buffer": buffer},
        "aqm": {"kind": "droptail"},
        "traffic": {"pattern": "incast", "flows": flows},
        "transport": {"cc": "reno", "rto_min": "5ms", **transport},
        "run": {"duration": duration, "seed": 3},
    })


@pytest.fixture(scope="module")
def collapsed() -> object:
    """64 Reno flows into a 32 KB port: windows of a few segments, losses, timeouts."""
    return simulate(_incast(64, "32KB"))


def test_shallow_incast_times_out(collapsed) -> None:
    assert float(collapsed.timeouts.isel(time=-1).sum()) > 0


def test_a_flow_in_timeout_sends_nothing(collapsed) -> None:
    stall = collapsed.stall.values
    sending = collapsed.send_rate.values  # one subflow per flow here
    # a stall that was under way at the start of a record interval and still at its end
    # covers the whole interval
    continued = (stall[:-1] > 0) & (stall[1:] > 0) & (stall[1:] < stall[:-1])
    assert continued.any()
    assert np.all(sending[1:][continued] == 0.0)


def test_consecutive_timeouts_back_off(collapsed) -> None:
    """RFC 6298 §5.5: a timeout that fires before the segment resent on resuming from the last
    one could be acknowledged (within a round trip of that wait's end) waits twice as long; one
    that fires later waits one RTO again. RTOmin 5 ms lies above srtt + 4 rttvar here (round
    trips of 0.2 to 0.5 ms), so every wait is 5 ms times a power of two. The stall a sample
    shows is the time left, so each wait ends at that sample's time plus its stall, and began
    less than a sample interval before the sample; gaps between one wait's end and the next
    timeout too near a round trip to tell are skipped."""
    interval = collapsed.attrs["sample_interval"]
    stall, time = collapsed.stall.values, collapsed.time.values
    rto, near, far = 5e-3, 0.1e-3, 1e-3  # s: RTOmin; surely within, surely beyond a round trip
    kinds = {"doubled": 0, "reset": 0}
    for f in range(stall.shape[1]):
        end, wait = -math.inf, 0.0
        for k in np.flatnonzero(stall[1:, f] > stall[:-1, f]) + 1:
            gap = time[k] - end  # from the last wait's end to (at most an interval after) this
            expected = 2 * wait if gap <= near else rto if gap - interval >= far else None
            # where the gap cannot tell, the wait is still a power of two of RTOmin
            wait = expected or rto * 2.0 ** round(math.log2(stall[k, f] / rto))
            if expected is not None:
                kinds["doubled" if gap <= near else "reset"] += 1
                assert expected - interval * 1.01 <= stall[k, f] <= expected, (f, time[k])
            end = time[k] + stall[k, f]
    assert kinds["doubled"] >= 20 and kinds["reset"] >= 100


def test_goodput_never_exceeds_throughput(collapsed) -> None:
    interval = collapsed.attrs["sample_interval"]
    sent = np.cumsum(collapsed.send_rate.values, axis=0) * interval
    delivered = collapsed.delivered.values
    assert np.all(delivered <= sent * (1 + 1e-9) + 1e-6)
    # what was lost was sent again: sent = delivered + resent + in flight
    resent = collapsed.resent.values
    assert np.all(resent >= 0) and float(resent[-1].sum()) > 0


@pytest.mark.parametrize("engine", ["fluid", "packet"])
def test_no_timeouts_with_a_bdp_per_flow(engine: str) -> None:
    """8 Reno flows, the port holding one bandwidth-delay product per flow: the sawtooth's
    losses come one per window at windows of tens of segments, all repaired by fast
    retransmit."""
    bdp = 1e9 / 8 * 4 * 25e-6 * 2  # bytes: 1 Gb/s times the base round trip (4 hops of 25 us)
    scenario = _incast(8, f"{8 * bdp:.0f}B", duration="200ms", sack=True)
    if engine == "fluid":
        ds = simulate(scenario)
    else:
        from pathflow.validation.packet import simulate_packets
        ds = simulate_packets(scenario)
    assert float(ds.drops.sum()) > 0  # it did lose packets
    assert float(ds.timeouts.isel(time=-1).sum()) == 0


def _timeout_statistics(scenario: Scenario) -> tuple[int, float, float]:
    """Controllers run, timeouts per flow (a stall under way counted) and the mean fraction of
    flows stalled over the run."""
    compiled = compile_scenario(scenario)
    ds = run_compiled(compiled)
    final = ds.isel(time=-1)
    per_flow = final.timeouts.values + (final.stall.values > 0)
    return (int(compiled.controller_of.max()) + 1, float(per_flow.mean()),
            float((ds.stall > 0).mean()))


def test_representatives_sample_the_timeouts_of_every_flow() -> None:
    """512 Reno flows from 8 hosts into a 64 KB port, about ten timeouts each: a class of 64
    exchangeable flows run as 8 representatives (`[run] representatives`) times out as often,
    and stalls as large a fraction, as the 512 flows each run on its own (three seeds each;
    the per-flow model's seed-to-seed spread is 0.1 %)."""
    exact, sampled = [], []
    for seed in (1, 2, 3):
        scenario = _incast(512, "64KB").with_updates({"run.seed": seed})
        exact.append(_timeout_statistics(scenario.with_updates({"run.representatives": 0})))
        sampled.append(_timeout_statistics(
            scenario.with_updates({"run.representatives": 8})))
    assert {run[0] for run in exact} == {512} and {run[0] for run in sampled} == {64}
    exact_mean, sampled_mean = np.mean(exact, axis=0), np.mean(sampled, axis=0)
    assert exact_mean[1] > 5  # the regime under test: repeated timeouts
    assert sampled_mean[1] == pytest.approx(exact_mean[1], rel=0.03)
    assert sampled_mean[2] == pytest.approx(exact_mean[2], abs=0.02)
