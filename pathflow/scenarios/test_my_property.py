"""A property test of my own, to copy: identical flows on a star share its bottleneck fairly,
fill it, and keep every invariant, whatever the rate, delay, buffer and control drawn.

Run it with `python -m pytest examples/test_my_property.py` (hypothesis installed:
pip install "pathflow[testing]"). A failing example prints its scenario as TOML.
"""

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
