"""Property testing of congestion control with pathflow: hypothesis strategies that draw
scenarios, and assertions of the invariants and properties a result should keep (issue 12).

A property test draws scenarios, simulates each and asserts what must hold for all of them.
This one (`examples/test_my_property.py`, run by the project's suite as it stands) is a start
to copy::

    from hypothesis import given

    import pathflow
    from pathflow.testing import (
        assert_capacity,
        assert_conservation,
        assert_fair,
        assert_queue_bounds,
        assert_utilization,
        scenarios,
        simulation_settings,
    )


    @simulation_settings(max_examples=4)
    @given(scenarios(topologies=("star",), ccs=("reno", "dctcp"), min_flows=2, max_flows=4))
    def test_identical_flows_share_the_bottleneck(scenario: pathflow.Scenario) -> None:
        ds = pathflow.simulate(scenario)
        assert_queue_bounds(ds)  # 0 <= queue <= buffer on every link, at every record
        assert_capacity(ds)  # no link departs faster than its capacity
        assert_conservation(ds)  # bytes in = out + queued + dropped, per link
        assert_fair(ds, within=0.01)  # Jain's index of the flows' throughput >= 0.99
        assert_utilization(ds, at_least=0.95)  # the busiest link >= 95 % used (buffer >= 1 BDP)

Strategies (`pathflow.testing.strategies`; they need hypothesis, the `testing` extra):

- `scenarios(...)`: runnable `pathflow.Scenario`s: stars, dumbbells, parking lots (and on
  request leaf-spine, fat-tree), 1 to 4 flows, any registered congestion control with the queue
  discipline it reacts to, rates, delays, buffers in BDPs and durations in round trips;
  parameters at their defaults or drawn within their declared ranges (`parameter_spread`);
- `networks(...)`, `transport_parameters(cc, ...)`: the parts, as scenario sections;
- `simulation_settings(max_examples)`: few examples, no deadline, the same every run, no
  shrinking unless asked (`shrink=True`: a simulation per step).

Assertions (`pathflow.testing.assertions`; each raises `AssertionError` with one line naming the
link or flow, the time and the numbers with their units):

- invariants, judged again on the data: `assert_queue_bounds` (0 <= q <= B; optionally a bound
  of your own after a time), `assert_capacity`, `assert_conservation` (bytes per link),
  `assert_work_conservation`; `assert_invariants`: the run's own report, all of them;
- properties: `assert_utilization(ds, at_least)`, `assert_fair(ds, within, criterion=...)`
  (Jain's index, or each flow within a tolerance of its max-min, proportional or Reno share),
  `assert_converges(ds, within)` (settled within a time, e.g. a predicted one).

Scope: results of either engine (`pathflow.simulate`, `--engine packet`); the allocations of
`assert_fair` are for single-path flows. Strategies are kept cheap (every example is a
simulation: a few small networks, short runs); widen them through their arguments.

Validated by tests/test_testing.py: each assertion passes on a real simulation and fails, naming
the offender, on the same result edited to break its invariant; the strategies draw runnable
scenarios for every topology and congestion control; the example above runs as a test. The
project's own property tests (tests/test_properties.py, tests/test_mptcp.py) are written with
this module.
"""

from __future__ import annotations

from typing import Any

from pathflow.testing.assertions import (
    Criterion,
    assert_capacity,
    assert_conservation,
    assert_converges,
    assert_fair,
    assert_invariants,
    assert_queue_bounds,
    assert_utilization,
    assert_work_conservation,
)

_STRATEGIES = ("DEFAULT_TOPOLOGIES", "TOPOLOGIES", "networks", "scenarios",
               "simulation_settings", "transport_parameters")

__all__ = ["Criterion", "assert_capacity", "assert_conservation", "assert_converges",
           "assert_fair", "assert_invariants", "assert_queue_bounds", "assert_utilization",
           "assert_work_conservation", *_STRATEGIES]


def __getattr__(name: str) -> Any:
    # the strategies import hypothesis, a test dependency: the assertions work without it
    if name in _STRATEGIES:
        from pathflow.testing import strategies

        return getattr(strategies, name)
    raise AttributeError(f"module 'pathflow.testing' has no attribute {name!r}")
