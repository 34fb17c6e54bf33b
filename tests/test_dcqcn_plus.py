"""DCQCN+ (models/dcqcn_plus.py; docs/dcqcn_plus.md derives it): the increase step against its
stage sums, the stage count against the timer, its parameters. The two engines on incasts at
10 Gb/s are the validation case `dcqcn_plus_fluid_packet` (validation/cases/dcqcn_plus.py), run
as a test by tests/test_validation.py."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np
import pytest

import pathflow
from pathflow import Scenario
from pathflow.models.dcqcn_plus import increase_step
from pathflow.scenario import ScenarioError

PACKET = 1000.0  # bytes


def _incast(flows: int, duration: str = "100ms", warmup: str = "50ms",
            **transport: Any) -> Scenario:
    """`flows` DCQCN+ senders (at most 8 hosts) into one 10 Gb/s receiver: the seed 001
    testbed's switch (5.1 MB, PFC, DCQCN's marking), 1 KB packets."""
    return Scenario.from_dict({
        "topology": {"kind": "star", "senders": min(flows, 8), "link_rate": "10Gbps",
                     "delay": "1us", "buffer": "5.1MB"},
        "aqm": {"kind": "dcqcn", "preset": "cx4", "pfc": True},
        "traffic": {"pattern": "incast", "flows": flows},
        "transport": {"cc": "dcqcn+", "mss": f"{PACKET:g}B", **transport},
        "run": {"duration": duration, "warmup": warmup}})


@pytest.mark.parametrize("q", [0.0, 0.3, 0.9, 0.999])
@pytest.mark.parametrize("current", [2e3, 1.25e6])  # packets/s: 16 Mb/s and 10 Gb/s
def test_increase_step_is_the_mean_step_over_geometric_stages(q: float, current: float) -> None:
    """The closed form against the sum over stages S = 1, 2, ... of P(S) step(S), with
    P(S) = (1 - q) q^(S-1) and the seed 001 steps (none up to F, min(R_C/10, R_l/100) up to
    4F, min(R_C, (S - 4F) R_l/100) beyond)."""
    stages, rl = 5.0, 62_500.0  # F; R_l = 500 Mb/s in 1 KB packets/s
    s = np.arange(1, 200_001, dtype=float)
    step = np.where(s <= stages, 0.0,
                    np.where(s <= 4 * stages, min(current / 10, rl / 100),
                             np.minimum(current, (s - 4 * stages) * rl / 100)))
    expected = float(np.sum((1 - q) * q ** (s - 1) * step))
    log_q = jnp.log(jnp.asarray(max(q, 1e-300)))
    closed = float(increase_step(log_q, jnp.asarray(current), jnp.asarray(stages),
                                 jnp.asarray(rl)))
    assert closed == pytest.approx(expected, rel=1e-9, abs=1e-9)


def test_without_marks_the_stages_count_timer_periods() -> None:
    """One flow alone at line rate is never marked: its stage count grows by one per timer
    period K = lambda max(tau_c, MTU / R_C) = 3.1 x max(40 us, 1 us / 1 CNP/us, 0.8 us)
    = 124 us, so it reads t / 124 us."""
    ds = pathflow.simulate(_incast(1, duration="2ms", warmup="1ms"))
    assert float(ds.marks.max()) == 0.0
    t = ds.time.values
    assert ds.stage.isel(subflow=0).values[-1] == pytest.approx(t[-1] / 124e-6, rel=1e-3)


def test_dcqcn_plus_declares_no_byte_counter_and_refuses_one() -> None:
    with pytest.raises(ScenarioError, match=r"^transport\.byte_counter: unknown key "
                                            r"'byte_counter' for this cc; allowed keys: .*"
                                            r"timer_gain, rl, cuts$"):
        _incast(2, byte_counter="10MB")
    values = _incast(2).si.transport.parameters
    assert values["timer_gain"] == 3.1 and values["rl"] * PACKET == pytest.approx(500e6 / 8)
    assert values["cnp_interval"] == pytest.approx(40e-6)
