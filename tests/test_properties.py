"""Property tests (hypothesis) over random stars: fairness, bounds, utilisation, relabelling,
and stability of the numerics when dt halves.

Each example is a full simulation (a compile and a run), so the example counts are small and the
search is derandomised: CI explores the same cases every time.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pathflow
from helpers import PACKET, star
from pathflow import Scenario
from pathflow.compile import compile_scenario
from pathflow.metrics import jain_index, throughput

SETTINGS = settings(max_examples=6, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])

rates = st.sampled_from(["10Mbps", "100Mbps", "1Gbps", "10Gbps"])
delays = st.sampled_from(["2us", "10us", "50us", "200us"])
ccs = st.sampled_from(["reno", "dctcp"])


def bdp_packets(scenario: Scenario) -> float:
    compiled = compile_scenario(scenario)
    link = compiled.network.links[compiled.network.link_between("s0", "r0")]
    return link.capacity * float(compiled.problem.path_base_rtt[0]) / PACKET


def random_star(flows: int, rate: str, delay: str, cc: str, buffer_bdps: float) -> Scenario:
    probe = star(flows, rate=rate, delay=delay, buffer="1000pkt", cc=cc)
    bdp = bdp_packets(probe)
    # each flow's share of the buffer holds its initial window (10 segments) and at least one
    # BDP: with a few segments per flow, losses need the retransmission timer (models.timeouts)
    # and identical flows part ways
    buffer = flows * max(12.0, buffer_bdps * bdp)
    aqm = ({"kind": "ecn_step", "threshold": f"{max(2.0, bdp / 2):.3f}pkt"} if cc == "dctcp"
           else {"kind": "droptail"})
    run_time = max(0.05, 400 * float(compile_scenario(probe).problem.path_base_rtt[0]))
    return star(flows, rate=rate, delay=delay, buffer=f"{buffer:.3f}pkt", cc=cc, aqm=aqm,
                duration=f"{run_time:.6f}s")


@SETTINGS
@given(flows=st.integers(2, 12), rate=rates, delay=delays, cc=ccs,
       buffer_bdps=st.floats(1.0, 4.0))
def test_identical_flows_share_fairly_and_fill_the_link(flows: int, rate: str, delay: str,
                                                        cc: str, buffer_bdps: float) -> None:
    scenario = random_star(flows, rate, delay, cc, buffer_bdps)
    ds = pathflow.simulate(scenario)
    rates_ = throughput(ds)
    capacity = float(ds.capacity.sel(link="s0->r0"))
    assert jain_index(rates_.values) >= 0.99
    assert float(rates_.sum()) >= 0.95 * capacity  # buffer >= one BDP
    assert float(ds.timeouts.isel(time=-1).sum()) == 0  # a BDP per flow: no timeouts


@SETTINGS
@given(flows=st.integers(1, 10), rate=rates, delay=delays, cc=ccs,
       buffer_bdps=st.floats(0.2, 3.0))
def test_queues_stay_in_bounds_and_links_under_capacity(flows: int, rate: str, delay: str,
                                                        cc: str, buffer_bdps: float) -> None:
    ds = pathflow.simulate(random_star(flows, rate, delay, cc, buffer_bdps))
    slack = 1e-9 * ds.buffer
    assert bool((ds.queue_min >= -slack).all())
    assert bool((ds.queue_max <= ds.buffer + slack).all())
    assert bool((ds.link_departure <= ds.capacity * (1 + 1e-9)).all())
    delivered = float(ds.flow_rate.sum("flow").mean())
    assert delivered <= float(ds.capacity.sel(link="s0->r0")) * (1 + 1e-9)


def leafspine(pairs: list[list[int]], cc: str) -> Scenario:
    return Scenario.from_dict({
        "topology": {"kind": "leafspine", "leaves": 3, "spines": 2, "hosts_per_leaf": 3,
                     "link_rate": "1Gbps", "delay": "5us", "buffer": "150pkt"},
        "aqm": {"kind": "ecn_step", "threshold": "20pkt"} if cc == "dctcp" else {},
        "traffic": {"pattern": "explicit", "pairs": pairs},
        "transport": {"cc": cc},
        "routing": {"mode": "spray"},
        "run": {"duration": "30ms"},
    })


@SETTINGS
@given(pairs=st.lists(st.tuples(st.integers(0, 8), st.integers(0, 8)).filter(
    lambda p: p[0] != p[1]), min_size=2, max_size=6), cc=ccs, data=st.data())
def test_relabelling_flows_permutes_results(pairs: list[tuple[int, int]], cc: str,
                                            data: st.DataObject) -> None:
    order = data.draw(st.permutations(range(len(pairs))))
    original = pathflow.simulate(leafspine([list(p) for p in pairs], cc))
    relabelled = pathflow.simulate(leafspine([list(pairs[i]) for i in order], cc))
    np.testing.assert_allclose(relabelled.flow_rate.values, original.flow_rate.values[:, order],
                               rtol=1e-7, atol=1e-3)
    np.testing.assert_allclose(relabelled.queue.values, original.queue.values, rtol=1e-7,
                               atol=1e-3)


@SETTINGS
@given(flows=st.integers(2, 8), rate=rates, delay=delays, cc=ccs,
       buffer_bdps=st.floats(1.0, 3.0))
def test_results_stable_when_dt_halves(flows: int, rate: str, delay: str, cc: str,
                                       buffer_bdps: float) -> None:
    scenario = random_star(flows, rate, delay, cc, buffer_bdps)
    coarse = compile_scenario(scenario)
    fine = scenario.with_updates({"run.dt": coarse.dt / 2, "run.sample": coarse.sample_interval})
    a, b = pathflow.simulate(scenario), pathflow.simulate(fine)
    assert float(throughput(a).sum()) == pytest.approx(float(throughput(b).sum()), rel=0.02)
    qa = float(a.queue.sel(link="s0->r0").mean()) / PACKET
    qb = float(b.queue.sel(link="s0->r0").mean()) / PACKET
    assert qa == pytest.approx(qb, rel=0.05, abs=1.0)
