"""Property tests (hypothesis, through `pathflow.testing`) over drawn networks: fairness and a
full bottleneck, the invariants under any control, relabelling, and stability of the numerics
when dt halves.

Each example is a full simulation (a compile and a run), so the example counts are small and the
search is derandomised (`simulation_settings`): CI explores the same cases every time.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import pathflow
from helpers import PACKET
from pathflow import Scenario
from pathflow.compile import compile_scenario
from pathflow.metrics import throughput
from pathflow.models.registry import CONTROLS
from pathflow.testing import (
    assert_capacity,
    assert_conservation,
    assert_fair,
    assert_queue_bounds,
    assert_utilization,
    assert_work_conservation,
    scenarios,
    simulation_settings,
)

SETTINGS = simulation_settings(max_examples=6)
ccs = st.sampled_from(["reno", "dctcp"])


@SETTINGS
@given(scenario=scenarios(topologies=("star", "dumbbell"), min_flows=2, max_flows=12))
def test_identical_flows_share_fairly_and_fill_the_link(scenario: Scenario) -> None:
    """A buffer of at least one BDP (and the initial window) per flow: Jain's index 0.99 or
    more, the bottleneck 95 % used or more, and no retransmission timeouts."""
    ds = pathflow.simulate(scenario)
    assert_fair(ds, within=0.01)
    assert_utilization(ds, at_least=0.95)
    assert float(ds.timeouts.isel(time=-1).sum()) == 0  # a BDP per flow: no timeouts


@SETTINGS
@given(scenario=scenarios(ccs=tuple(CONTROLS), max_flows=10, buffer_bdps=(0.2, 3.0)))
def test_queues_stay_in_bounds_and_links_under_capacity(scenario: Scenario) -> None:
    """Any control, buffers down to a fifth of a BDP: queues within their buffers, links
    under capacity and work-conserving, bytes conserved, and no host receiving more than the
    links into it carry."""
    ds = pathflow.simulate(scenario)
    assert_queue_bounds(ds)
    assert_capacity(ds)
    assert_work_conservation(ds)
    assert_conservation(ds)
    delivered = ds.flow_rate.mean("time")
    for host in np.unique(ds.dst.values):
        rate = float(delivered.where(ds.dst == host).sum())
        into = float(ds.capacity.where(ds.link_dst == host).sum())
        assert rate <= into * (1 + 1e-9), (f"{host} receives {rate:.6g} bytes/s, its links carry "
                                           f"{into:.6g} bytes/s")


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
@given(scenario=scenarios(topologies=("star",), min_flows=2, max_flows=8,
                          buffer_bdps=(1.0, 3.0)))
def test_results_stable_when_dt_halves(scenario: Scenario) -> None:
    coarse = compile_scenario(scenario)
    fine = scenario.with_updates({"run.dt": coarse.dt / 2, "run.sample": coarse.sample_interval})
    a, b = pathflow.simulate(scenario), pathflow.simulate(fine)
    assert float(throughput(a).sum()) == pytest.approx(float(throughput(b).sum()), rel=0.02)
    qa = float(a.queue.sel(link="s0->r0").mean()) / PACKET
    qb = float(b.queue.sel(link="s0->r0").mean()) / PACKET
    assert qa == pytest.approx(qb, rel=0.05, abs=1.0)
