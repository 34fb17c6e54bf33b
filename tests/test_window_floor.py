"""Whole-segment windows at the floor (issue 11 item 3): a DCTCP incast whose fair share is below
two segments keeps its queue far above K, every ACK carries an echo, and Linux (no growth in
CWR or on an ACK with an echo, `models.window`) holds every window at min_cwnd. The standing
queue is then the closed form N min_cwnd MSS - C RTT, in both engines."""

from __future__ import annotations

import numpy as np
import pytest

from pathflow.compile import compile_scenario
from pathflow.scenario import Scenario
from pathflow.simulate import simulate
from pathflow.validation.packet import simulate_packets

FLOWS, MSS, RATE = 80, 1500.0, 1.25e9  # flows, bytes, bytes/s (10 Gb/s)


def _incast() -> Scenario:
    return Scenario.from_dict({
        "topology": {"kind": "star", "senders": 8, "link_rate": "10Gbps", "delay": "5us",
                     "buffer": "5MB"},
        "aqm": {"kind": "ecn_step", "threshold": "65pkt"},
        "traffic": {"pattern": "incast", "flows": FLOWS},
        "transport": {"cc": "dctcp"},
        "run": {"duration": "20ms"},
    })


@pytest.mark.parametrize("engine", ["fluid", "packet"])
def test_large_incast_holds_every_window_at_the_floor(engine: str) -> None:
    scenario = _incast()
    ds = (simulate if engine == "fluid" else simulate_packets)(scenario)
    steady = ds.sel(time=ds.time > 0.01)
    windows = steady.cwnd.values / MSS
    assert np.mean(np.isclose(windows, 2.0, atol=1e-6)) > 0.99
    base_rtt = float(np.min(compile_scenario(scenario).problem.path_base_rtt))
    standing = FLOWS * 2 * MSS - RATE * base_rtt  # bytes in flight beyond the pipe
    queue = float(steady.queue.max("link").mean())
    assert queue == pytest.approx(standing, rel=0.03)
