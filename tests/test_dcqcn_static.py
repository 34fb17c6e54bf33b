"""DCQCN+static (models/dcqcn_static.py): the testbed's rule for the timer and the additive
step, and both engines running it as DCQCN with those values. Fluid against packet level on an
80:1 incast: validation case `dcqcn_plus_fluid_packet`, run by tests/test_validation.py."""

from __future__ import annotations

import numpy as np
import pytest

from pathflow import Scenario
from pathflow.compile import compile_scenario
from pathflow.models.dcqcn_static import DcqcnStatic
from pathflow.validation.packet import layout as L
from pathflow.validation.packet.build import Options, build

PACKET = 1000.0  # bytes


def _incast(flows: int, **transport: object) -> Scenario:
    return Scenario.from_dict({
        "topology": {"kind": "star", "senders": 8, "link_rate": "10Gbps", "delay": "1us",
                     "buffer": "5.1MB"},
        "aqm": {"kind": "dcqcn", "preset": "cx4", "pfc": True},
        "traffic": {"pattern": "incast", "flows": flows},
        "transport": {"cc": "dcqcn+static", "mss": f"{PACKET:g}B", **transport},
        "run": {"duration": "1ms"}})


# seed 001, section 6.3: timer 3.1 x flownum us and step 256 / flownum Mb/s, as integers
TESTBED = [(80, 248e-6, 3e6), (160, 496e-6, 2e6), (240, 744e-6, 1e6), (720, 2232e-6, 1e6)]


@pytest.mark.parametrize(("flows", "timer", "step"), TESTBED)
def test_both_engines_derive_the_testbeds_timer_and_step(flows: int, timer: float,
                                                         step: float) -> None:
    """flownum defaults to the flows the receiver takes; 256 / 720 Mb/s rounds to 0, taken as
    the NIC's least step, 1 Mb/s."""
    scenario = _incast(flows)
    params = DcqcnStatic.as_dcqcn(compile_scenario(scenario).problem.params)
    assert np.allclose(params.timer, timer) and np.allclose(params.rai * PACKET, step / 8)
    assert np.allclose(params.cnp_interval, 40e-6)
    options = Options(sample_interval=0.0, min_rto=1e-3, delayed_ack=1, delack_timeout=1e-3,
                      seed=1)
    senders = build(scenario, options).sim.senders.f
    assert np.allclose(senders[:, L.SF_TIMER], timer)
    assert np.allclose(senders[:, L.SF_RAI], step / 8)
    assert np.allclose(senders[:, L.SF_CNP_INTERVAL], 40e-6)


def test_an_explicit_flownum_overrides_the_count() -> None:
    params = DcqcnStatic.as_dcqcn(compile_scenario(_incast(16, flownum=80)).problem.params)
    assert np.allclose(params.timer, 248e-6) and np.allclose(params.rai * PACKET, 3e6 / 8)
