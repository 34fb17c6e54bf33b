"""The registry names every congestion control and queue discipline once, for every engine; a
new algorithm plugs in through its model module and one registry entry (docs/architecture.md,
"Adding a congestion control")."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
from aimd_model import Aimd

import pathflow
from pathflow.models import registry
from pathflow.models.registry import CONTROLS, DISCIPLINES, CongestionControl
from pathflow.scenario import Scenario, ScenarioError
from pathflow.validation.ns3.config import TCP_TYPES
from pathflow.validation.packet import layout, simulate_packets
from pathflow.vocabulary import reference

PACKET = 1500.0


def test_every_engine_knows_exactly_the_registered_algorithms() -> None:
    packet = {name for name, entry in CONTROLS.items() if entry.packet_sender is not None}
    assert set(layout.CC_CODES) == {CONTROLS[name].packet_sender for name in packet}
    assert {name: entry.ns3_type for name, entry in CONTROLS.items()
                         if entry.ns3_type is not None} == TCP_TYPES
    assert set(layout.AQM_CODES) == set(DISCIPLINES)


@pytest.mark.parametrize("name", sorted(CONTROLS))
def test_declared_defaults_resolve_within_their_ranges(name: str) -> None:
    scenario = Scenario.from_dict({"topology": {"kind": "star", "senders": 1},
                                   "transport": {"cc": name}})
    values = scenario.si.transport.parameters
    model = CONTROLS[name].model
    assert list(values) == [p.name for p in model.parameters]
    params = model.build_params(values, 3)
    assert params._fields == tuple(p.name for p in model.values())
    assert all(arr.shape == (3,) for arr in params)


@pytest.fixture
def aimd() -> Iterator[CongestionControl]:
    entry = registry.register(CongestionControl(
        "aimd_test", Aimd, "generalised AIMD (test only)", packet_sender=None, ns3_type=None,
        ecn=True))
    yield entry
    del registry.CONTROLS["aimd_test"]


def _red_star(flows: int, transport: dict[str, object]) -> Scenario:
    return Scenario.from_dict({
        "topology": {"kind": "star", "senders": flows, "link_rate": "100Mbps",
                     "delay": "62.5us", "buffer": "1000pkt"},
        "aqm": {"kind": "red", "min": "20pkt", "max": "400pkt", "pmax": 0.1, "weight": 0.002},
        "traffic": {"flows": flows},
        "transport": transport,
        "run": {"duration": "6s"},
    })


def test_a_registered_algorithm_joins_the_vocabulary(aimd: CongestionControl) -> None:
    assert "cc = 'aimd_test'" in reference() and "decrease" in reference()
    scenario = _red_star(2, {"cc": "aimd_test", "decrease": 0.7, "init_cwnd": "6pkt"})
    assert scenario.si.transport.parameters == {"increase": 1.0, "decrease": 0.7, "init_cwnd": 6.0}
    assert scenario.si.aqm.marks_ecn  # RED marks for an ECN-capable control
    with pytest.raises(ScenarioError, match=r"^transport\.g: unknown key 'g' for this cc"):
        _red_star(2, {"cc": "aimd_test", "g": 0.1})
    with pytest.raises(ScenarioError, match=r"^transport\.decrease: .* allowed: \(0, 1\]"):
        _red_star(2, {"cc": "aimd_test", "decrease": 1.5})
    with pytest.raises(ScenarioError, match="has no packet-level sender"):
        simulate_packets(scenario)


@pytest.mark.parametrize(("increase", "decrease"), [(1.0, 0.5), (2.0, 0.8)])
def test_a_registered_algorithm_reaches_its_closed_form_equilibrium(
        aimd: CongestionControl, increase: float, decrease: float) -> None:
    """p = a / ((1 - beta) W^2) on a RED link (the tests/aimd_model.py docstring)."""
    scenario = _red_star(6, {"cc": "aimd_test", "increase": increase, "decrease": decrease})
    ds = pathflow.simulate(scenario)
    steady = ds.sel(time=ds.time > 3.0, link="s0->r0")
    window = float(steady.cwnd.mean()) / PACKET
    marked = float(steady.marks.sum() / steady.link_arrival.sum())
    expected = increase / ((1 - decrease) * window**2)
    assert marked == pytest.approx(expected, rel=0.01)
    assert math.isclose(float(steady.utilization.mean()), 1.0, rel_tol=0.01)
    assert ds.cc.values.tolist() == ["aimd_test"] * 6
