"""Flows (connections) with several subflows through the solver and the Dataset: a flow finishes
when its subflows together have delivered its bytes, and coupled models can sum over a flow."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np
import pytest

from helpers import star
from pathflow.compile import compile_scenario
from pathflow.models.base import Signals, flow_max, flow_sum
from pathflow.simulate import run_compiled


def test_flow_sums_and_maxima_group_subflows_by_flow() -> None:
    flow = jnp.array([0, 0, 1, 2, 2, 2])
    signals = Signals(*(jnp.zeros(6),) * 5, flow)
    values = jnp.array([1.0, 2.0, 5.0, 3.0, 7.0, 4.0])
    np.testing.assert_allclose(flow_sum(values, signals), [3, 3, 5, 14, 14, 14])
    np.testing.assert_allclose(flow_max(values, signals), [2, 2, 5, 7, 7, 7])


def test_a_flow_ends_when_its_subflows_together_deliver_its_bytes() -> None:
    """Two subflows of one 1 MB flow share a 1 Gb/s bottleneck: the flow ends when their sum
    reaches 1 MB (at about 8 ms, not when either alone would), and both stop together."""
    compiled = compile_scenario(star(2, rate="1Gbps", delay="5us", buffer="200pkt",
                                     duration="20ms", traffic={"size": "1MB"}))
    routes = dataclasses.replace(compiled.routes, flows=compiled.routes.flows[:1],
                                 subflow_flow=[0, 0], equal_cost=[1])
    problem = compiled.problem._replace(subflow_flow=jnp.array([0, 0], jnp.int32))
    ds = run_compiled(dataclasses.replace(compiled, routes=routes, problem=problem))
    assert ds.sizes["flow"] == 1 and ds.sizes["subflow"] == 2
    assert ds.subflow_flow.values.tolist() == [0, 0]
    done = float(ds.completion_time[0])
    assert done == pytest.approx(1e6 / 125e6, rel=0.1)  # the link's rate, both subflows busy
    delivered = float(ds.delivered.sel(time=done, method="nearest")[0])
    assert delivered == pytest.approx(1e6, rel=0.02)
    after = ds.subflow_rate.sel(time=slice(done + 1e-3, None))
    assert float(after.max()) == 0.0  # both subflows stopped with the flow
    np.testing.assert_allclose(ds.flow_rate.values[:, 0], ds.subflow_rate.sum("subflow"),
                               rtol=1e-12)
