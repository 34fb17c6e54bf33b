"""A scenario resolved once into SI values (`scenario.si`), numbers in and out without text."""

from __future__ import annotations

import math

import numpy as np
import pytest
import xarray as xr

from pathflow.metrics import default_warmup
from pathflow.scenario import Scenario

LEAFSPINE = {
    "topology": {"kind": "leafspine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2,
                 "link_rate": "1Gbps", "buffer": "100pkt",
                 "links": [{"tier": "leaf-spine", "link_rate": "2Gbps"},
                           {"match": "h0_*", "delay": "5us", "buffer": "64KB"}]},
    "aqm": {"kind": "ecn_step", "threshold": "20pkt"},
    "traffic": {"pattern": "permutation", "size": "1MB", "start_jitter": "1ms"},
    "transport": {"mss": "1000B"},
    "run": {"duration": "50ms", "warmup": "10ms"},
}


def test_every_quantity_resolves_to_si_units() -> None:
    si = Scenario.from_dict(LEAFSPINE).si
    assert si.transport.mss == 1000.0
    assert si.topology.link_rate == 1.25e8 and si.topology.buffer == 100 * 1000.0
    assert si.aqm.parameters["threshold"] == 20 * 1000.0 and si.aqm.marks_ecn
    assert (si.traffic.size, si.traffic.start, si.traffic.start_jitter) == (1e6, 0.0, 1e-3)
    assert si.run.duration == 0.05 and si.run.dt is None and si.run.steady_start == 0.01
    assert si.topology.link("leaf0->spine1", "leaf-spine") == (2.5e8, 1e-6, 1e5)
    assert si.topology.link("h0_1->leaf0", "host-leaf") == pytest.approx((1.25e8, 5e-6, 64e3))


def test_numbers_given_to_with_updates_are_exact_and_written_as_text() -> None:
    scenario = Scenario.from_dict(LEAFSPINE)
    dt, rate = 1e-6 / 3, 1.25e9 / 3
    updated = scenario.with_updates({"run.dt": dt, "topology.link_rate": rate,
                                     "traffic.size": math.inf})
    assert updated.si.run.dt == dt and updated.si.topology.link_rate == rate
    assert math.isinf(updated.si.traffic.size) and updated.spec.traffic.size == "inf"
    assert Scenario.from_toml(updated.to_toml()).si == updated.si  # the text is provenance


def test_the_stored_warmup_is_read_before_the_scenario_text() -> None:
    text = Scenario.from_dict(LEAFSPINE).to_toml()
    time = np.linspace(1e-3, 0.05, 50)
    ds = xr.Dataset(coords={"time": time}, attrs={"scenario": text})
    assert default_warmup(ds) == pytest.approx(0.01)  # from the TOML: results written before
    ds.attrs["warmup_s"] = 0.02
    assert default_warmup(ds) == 0.02
