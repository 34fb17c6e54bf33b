"""Exchangeable flows run once (pathflow.compile._exchangeable): flows that nothing tells apart
(group, start, size, paths) share one controller counted as many; flows that may time out
(window-based controls: each times out at a moment of its own, `models.timeouts`) run as at most
`[run] representatives` per class (tests/test_timeouts.py compares them with every flow). The
reference is the same scenario with every flow run (`compile_scenario(..., exchangeable=False)`)."""

from __future__ import annotations

import warnings

import numpy as np

from pathflow import Scenario
from pathflow.compile import compile_scenario
from pathflow.simulate import run_compiled


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


RATE_BASED = {"aqm": {"kind": "dcqcn", "preset": "cx4", "pfc": True},
              "transport": {"cc": "dcqcn", "preset": "cx4", "mss": "1000B"}}


def test_what_tells_flows_apart_keeps_them_apart() -> None:
    assert _controllers(_incast(64, **RATE_BASED)) == 8  # one per sending host
    jittered = _incast(64, traffic={"pattern": "incast", "flows": 64, "start_jitter": "1ms"},
                       **RATE_BASED)
    assert _controllers(jittered) == 64
    sizes = {"groups": [{"pattern": "incast", "flows": 32, "size": "1MB"},
                        {"pattern": "incast", "flows": 32, "size": "2MB"}]}
    assert _controllers(_incast(64, traffic=sizes, **RATE_BASED)) == 16
    # window-based flows may time out, each at a moment of its own (models.timeouts)
    assert _controllers(_incast(64)) == 64
    assert _controllers(_incast(512)) == 8 * 32  # 32 representatives of each host's 64
    every = _incast(512, run={"duration": "20ms", "representatives": 0})
    assert _controllers(every) == 512
    multipath = _incast(16, transport={"cc": "lia", "subflows": 2})
    assert _controllers(multipath) == 32  # a connection's subflows keep their own


def _both(scenario: Scenario) -> tuple[object, object]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tuple(run_compiled(compile_scenario(scenario, exchangeable=flag))
                     for flag in (False, True))


def test_a_rate_based_incast_gives_the_same_result_to_round_off() -> None:
    """64 DCQCN flows from 8 hosts: every variable of every flow and link as when all 64 run."""
    every, once = _both(_incast(64, **RATE_BASED))
    for name in ("queue", "link_departure", "pause", "flow_rate", "delivered", "current_rate",
                 "alpha", "rtt"):
        scale = float(np.abs(every[name]).max())
        assert np.allclose(once[name], every[name], rtol=0, atol=1e-9 * scale), name
