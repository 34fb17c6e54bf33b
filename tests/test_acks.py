"""ACKs as load in the fluid model (`[transport] ack_size`, `solvers.dde`): closed forms on a
two-way dumbbell, the switch that turns them off, and batching (pad and merge relink the
reverse links).

The two-way dumbbell: hosts h0, h1 -> s0 -> s1 -> r0, r1 at 1 Gb/s. Flow B goes h1 -> r0, flow
A r0 -> h0, so s0->s1 carries B's data and A's ACKs, s1->s0 A's data and B's ACKs, and r0's
host link A's data and B's ACKs. A receiver
acknowledges every 2nd segment (Linux's delayed ACKs, ack_ratio 1); an ACK is `ACK` bytes, so a
flow delivering x bytes/s sends x * ACK / (2 * PACKET) bytes/s of ACKs back along its path. The
packet-level comparison (a port carrying a full-rate flow plus other flows' ACKs) is the
validation case `fluid_packet_ack_port`.
"""

from __future__ import annotations

import numpy as np
import pytest

import pathflow
from pathflow import Scenario
from pathflow.compile import compile_scenario
from pathflow.metrics import throughput
from pathflow.solvers.problem import merge_problems, pad_problem
from pathflow.solvers.run import solve, solve_together

PACKET = 1500.0
ACK = 100.0  # bytes: chosen here, not the default, so the closed forms follow the scenario
RATE = 1e9 / 8  # bytes/s
PER_BYTE = ACK / (2 * PACKET)  # ACK bytes per delivered data byte, every 2nd segment acknowledged
A, B = 1, 0  # flow indices: pairs are listed B first


def two_way(a_nic: str = "1Gbps", ack: str = f"{ACK:g}B", cc: str = "dctcp",
            duration: str = "0.3s", **run: str) -> Scenario:
    """The two-way dumbbell; `a_nic`: the rate of A's sending host link r0->s1."""
    return Scenario.from_dict({
        "name": "two-way",
        "topology": {"kind": "dumbbell", "senders": 2, "link_rate": "1Gbps", "delay": "5us",
                     "buffer": "200pkt", "links": [{"match": "r0->s1", "link_rate": a_nic}]},
        "aqm": {"kind": "ecn_step", "threshold": "30pkt"} if cc == "dctcp"
        else {"kind": "droptail"},
        "traffic": {"pattern": "explicit", "pairs": [[1, 2], [2, 0]]},  # h1->r0, r0->h0
        "transport": {"cc": cc, "ack_size": ack},
        "run": {"duration": duration, "sample": "100us", **run},
    })


def steady(ds, name: str, link: str) -> float:
    values = ds[name].sel(link=link)
    return float(values.sel(time=ds.time > 0.1).mean())


def test_arrivals_are_data_plus_the_reverse_flows_acks_and_the_sum_decides_the_queue() -> None:
    """A's NIC at 0.9 Gb/s: s1->s0 gets 0.9 C (A's data, less the ACKs that A's host sends
    first) and stays below capacity: no queue. s0->s1 gets B at line rate plus A's ACKs, above
    capacity: a standing queue, and B's delivered rate is what the port leaves for data."""
    ds = pathflow.simulate(two_way(a_nic="0.9Gbps"))
    rate = throughput(ds, 0.1).values
    x_a, x_b = rate[A], rate[B]
    # A's host link sends B's ACKs first: A gets the rest of its 0.9 Gb/s
    assert x_a == pytest.approx(0.9 * RATE - PER_BYTE * x_b, rel=1e-3)
    # the link back: A's data plus B's ACKs, below capacity, so no queue
    assert steady(ds, "link_arrival", "s1->s0") == pytest.approx(x_a + PER_BYTE * x_b, rel=1e-3)
    assert steady(ds, "queue", "s1->s0") == 0.0
    # the forward link: B's data plus A's ACKs exceed capacity; B gets what the ACKs leave
    assert steady(ds, "link_departure", "s0->s1") == pytest.approx(RATE, rel=1e-3)
    assert x_b == pytest.approx(RATE - PER_BYTE * x_a, rel=2e-3)
    assert steady(ds, "queue", "s0->s1") > 10 * PACKET  # DCTCP holds it near K = 30 packets
    # an ACK-only link carries exactly the ACKs of the data on its reverse
    assert steady(ds, "link_arrival", "s0->h1") == pytest.approx(PER_BYTE * x_b, rel=1e-3)


def test_acks_wait_in_the_reverse_queues_of_the_round_trip() -> None:
    """A's round trip, sample by sample, is its base RTT plus q/C of the links of its path
    (r0->s1, s1->s0, s0->h0) and of their reverse links, where its ACKs wait (s1->r0, s0->s1,
    h0->s0); B's standing queue at s0->s1 holds A's ACKs up."""
    scenario = two_way(a_nic="0.9Gbps")
    ds = pathflow.simulate(scenario)
    base = float(compile_scenario(scenario).problem.path_base_rtt[A])
    capacity = ds.capacity
    out = ["r0->s1", "s1->s0", "s0->h0"]
    back = ["s1->r0", "s0->s1", "h0->s0"]
    waited = sum(ds.queue.sel(link=name).values / float(capacity.sel(link=name))
                 for name in out + back)
    np.testing.assert_allclose(ds.rtt.isel(subflow=A).values, base + waited, rtol=1e-9,
                               atol=1e-12)
    acks_waited = ds.queue.sel(link="s0->s1").values / RATE
    assert acks_waited[ds.time.values > 0.1].mean() > 10 * PACKET / RATE


def test_zero_ack_size_leaves_acks_out() -> None:
    """`ack_size = "0B"`: links see data only and round trips the data path's queues only."""
    ds = pathflow.simulate(two_way(a_nic="0.9Gbps", ack="0B"))
    rate = throughput(ds, 0.1).values
    assert rate[A] == pytest.approx(0.9 * RATE, rel=1e-4)
    assert rate[B] == pytest.approx(RATE, rel=1e-4)
    assert steady(ds, "link_arrival", "s0->h1") == 0.0
    assert float(ds.queue.sel(link="s0->s1").max()) < PACKET  # slow start's overshoot aside
    problem = compile_scenario(two_way(ack="0B")).problem
    assert np.all(np.asarray(problem.reverse) == problem.n_links)
    assert np.all(np.asarray(problem.ack) == 0.0)


def test_segments_per_ack_follow_ack_ratio() -> None:
    """Reno with ack_ratio 3 (a receiver acknowledging every 3rd segment): a third of a segment's
    ACK per segment instead of half."""
    problem = compile_scenario(two_way(cc="reno").with_updates(
        {"transport.ack_ratio": 3})).problem
    np.testing.assert_allclose(np.asarray(problem.ack), ACK / (3 * PACKET))


def test_merged_and_padded_problems_keep_their_reverse_links() -> None:
    """Two different problems side by side (a sweep's merged batch) and a padded problem give
    each problem's own run: the reverse links are renumbered with the links."""
    first = compile_scenario(two_way(duration="20ms", dt="1us"))  # one step for both
    second = compile_scenario(two_way(a_nic="0.9Gbps", duration="20ms", dt="1us"))
    alone = [solve(c.physics, c.problem, first.grid) for c in (first, second)]
    together = solve_together(first.physics, [first.problem, second.problem], first.grid)
    for single, merged in zip(alone, together, strict=True):
        np.testing.assert_allclose(merged.queue, single.queue, rtol=1e-9, atol=1e-6)
        np.testing.assert_allclose(merged.arrival[:, :-1], single.arrival[:, :-1], rtol=1e-9)
        np.testing.assert_allclose(merged.rtt, single.rtt, rtol=1e-9)
    merged = merge_problems([first.problem, second.problem])
    links = first.problem.n_links
    assert np.asarray(merged.reverse)[links + 3] == np.asarray(second.problem.reverse)[3] + links
    problem = first.problem
    padded = pad_problem(problem, problem.n_links + 3, problem.path_hops.shape[0] + 2,
                         problem.path_hops.shape[1] + 1, problem.n_subflows + 2)
    run = solve(first.physics, padded, first.grid)
    np.testing.assert_allclose(run.queue[:, :links], alone[0].queue[:, :links], rtol=1e-9,
                               atol=1e-6)
    np.testing.assert_allclose(run.rtt[:, :problem.n_subflows], alone[0].rtt, rtol=1e-9)
