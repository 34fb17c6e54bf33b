"""Exchangeable flows run once (pathflow.compile._exchangeable): flows that nothing tells apart
(group, start, size, paths) share one controller counted as many. The reference is the same
scenario with every flow run (`compile_scenario(..., exchangeable=False)`)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from pathflow import Scenario
from pathflow.compile import compile_scenario
from pathflow.simulate import run_compiled
from pathflow.sweep import summarize_point


def _incast(flows: int, **sections: dict[str, object]) -> Scenario:
    spec: dict[str, dict[str, object]] = {
        "topology": {"kind": "star", "senders": 8, "link_rate": "10Gbps", "delay": "5us",
                     "buffer": "5MB"},
        "aqm": {"kind": "ecn_step", "threshold": "65pkt"},
        "traffic": {"pattern": "incast", "flows": flows},
        "transport": {"cc": "dctcp"},
        "run": {"duration": "20ms"}}
    spec.update(sections)  # a section given replaces the default one
    return Scenario.from_dict(spec)


def _controllers(scenario: Scenario) -> int:
    return compile_scenario(scenario).problem.n_subflows


def test_what_tells_flows_apart_keeps_them_apart() -> None:
    assert _controllers(_incast(64)) == 8  # one per sending host
    jittered = _incast(64, traffic={"pattern": "incast", "flows": 64, "start_jitter": "1ms"})
    assert _controllers(jittered) == 64
    sizes = {"groups": [{"pattern": "incast", "flows": 32, "size": "1MB"},
                        {"pattern": "incast", "flows": 32, "size": "2MB"}]}
    assert _controllers(_incast(64, traffic=sizes)) == 16
    multipath = _incast(16, transport={"cc": "lia", "subflows": 2})
    assert _controllers(multipath) == 32  # a connection's subflows keep their own
    fattree = Scenario.from_dict({"topology": {"kind": "fattree", "k": 4},
                                  "traffic": {"pattern": "permutation"},
                                  "routing": {"mode": "ecmp"}})
    assert _controllers(fattree) == 16  # every host pair once


def _both(scenario: Scenario) -> tuple[object, object]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tuple(run_compiled(compile_scenario(scenario, exchangeable=flag))
                     for flag in (False, True))


def test_a_rate_based_incast_gives_the_same_result_to_round_off() -> None:
    """64 DCQCN flows from 8 hosts: every variable of every flow and link as when all 64 run."""
    scenario = _incast(64, aqm={"kind": "dcqcn", "preset": "cx4", "pfc": True},
                       transport={"cc": "dcqcn", "preset": "cx4", "mss": "1000B"})
    every, once = _both(scenario)
    for name in ("queue", "link_departure", "pause", "flow_rate", "delivered", "current_rate",
                 "alpha", "rtt"):
        scale = float(np.abs(every[name]).max())
        assert np.allclose(once[name], every[name], rtol=0, atol=1e-9 * scale), name


@pytest.mark.parametrize("flows", [80, 400])
def test_a_window_incast_gives_the_same_summaries(flows: int) -> None:
    """DCTCP: the sums over 8 counted controllers differ from sums over all flows in the last
    bits, and the feedback delay, a whole number of steps (ceil(RTT / dt)), turns a last-bit
    difference of the RTT into a step earlier or later now and then: trajectories part at
    slow-start exit by a step, and the summaries agree to 0.1 %."""
    every, once = (summarize_point(ds) for ds in _both(_incast(flows)))
    for key in ("aggregate_throughput", "jain", "queue_mean", "queue_p99", "queue_max"):
        assert once[key] == pytest.approx(every[key], rel=1e-3), key
