"""`pathflow.testing`: each assertion passes on a real simulation and fails, naming the link or
flow, the time and the numbers, on the same result edited to break what it asserts; the
strategies draw scenarios that run for every topology and congestion control, with parameters
inside their declared ranges; the example a user copies runs, and is the one the module
documents."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr
from hypothesis import given

import pathflow
import pathflow.testing
from helpers import star
from pathflow.compile import compile_scenario
from pathflow.models.registry import CONTROLS
from pathflow.testing import (
    TOPOLOGIES,
    assert_capacity,
    assert_conservation,
    assert_converges,
    assert_fair,
    assert_invariants,
    assert_queue_bounds,
    assert_utilization,
    assert_work_conservation,
    networks,
    scenarios,
    simulation_settings,
    transport_parameters,
)

EXAMPLE = Path(__file__).parent.parent / "examples" / "test_my_property.py"
BOTTLENECK = "s0->r0"


@pytest.fixture(scope="module")
def result() -> xr.Dataset:
    """Two DCTCP flows through a 1 Gb/s star for 20 ms: equal shares, a full bottleneck with a
    standing queue from the first record on, every invariant holding. Recorded every 50 us:
    work conservation allows one packet per record, which at a finer interval than a packet's
    12 us exceeds the capacity itself."""
    return pathflow.simulate(star(2, rate="1Gbps", delay="10us", buffer="100pkt",
                                  duration="20ms", run={"sample": "50us"}))


def record(ds: xr.Dataset, at: float) -> float:
    """The time (s) of the record nearest `at`."""
    return float(ds.time.values[int(np.argmin(np.abs(ds.time.values - at)))])


def edited(ds: xr.Dataset, name: str, link: str, at: float, value: float) -> xr.Dataset:
    """A copy of `ds` whose `name` on `link` at the record nearest `at` (s) is `value`; the
    run's stored report (all hold) is kept, so a failure comes from the data."""
    out = ds.copy(deep=True)
    out[name].loc[{"link": link, "time": record(ds, at)}] = value
    return out


def when(ds: xr.Dataset, at: float) -> str:
    """The record nearest `at` as a verdict writes it, as a pattern."""
    return re.escape(f"t = {record(ds, at):.6g} s")


def test_every_invariant_assertion_passes_on_a_real_run(result: xr.Dataset) -> None:
    assert_invariants(result)
    assert_queue_bounds(result)
    assert_capacity(result)
    assert_conservation(result)
    assert_work_conservation(result)


def test_queue_bounds_fail_on_a_queue_above_its_buffer(result: xr.Dataset) -> None:
    buffer = float(result.buffer.sel(link=BOTTLENECK))
    broken = edited(result, "queue_max", BOTTLENECK, 0.012, buffer + 3000)
    with pytest.raises(AssertionError, match=r"^invariant queue_bounds violated: queue outside "
                       rf"\[0, B\]: link s0->r0 at {when(result, 0.012)} by 3e\+03 bytes \(lowest "
                       r"[\d.e+]+ bytes, highest 153000 bytes, buffer 150000 bytes\)$"):
        assert_queue_bounds(broken)
    assert_invariants(broken)  # the run's own report was made before the edit
    below = edited(result, "queue_min", BOTTLENECK, 0.012, -3000)
    with pytest.raises(AssertionError, match=r"queue_bounds.*s0->r0.*lowest -3000 bytes"):
        assert_queue_bounds(below)


def test_queue_bounds_hold_a_bound_of_ones_own_after_a_time(result: xr.Dataset) -> None:
    """DCTCP's standing queue sits near K = 20 packets: it stays below 30 after the start-up
    but not below 5."""
    assert_queue_bounds(result, at_most=30 * 1500, after=0.005)
    with pytest.raises(AssertionError, match=r"^queue of link s0->r0 at t = [\d.]+ ms holds "
                       r"[\d.]+ KB \([\d.]+ pkt\), above the bound 7\.5 KB \(5 pkt\) after 5 ms$"):
        assert_queue_bounds(result, at_most=5 * 1500, after=0.005)


def test_capacity_fails_on_departures_above_capacity(result: xr.Dataset) -> None:
    capacity = float(result.capacity.sel(link=BOTTLENECK))
    broken = edited(result, "link_departure", BOTTLENECK, 0.01, 1.1 * capacity)
    with pytest.raises(AssertionError, match=r"^invariant capacity violated: departures above "
                       rf"capacity: link s0->r0 at {when(result, 0.01)} by 1\.25e\+07 bytes/s "
                       r"\(departures 1\.375e\+08 bytes/s, capacity 1\.25e\+08 bytes/s\)$"):
        assert_capacity(broken)


def test_conservation_fails_on_bytes_from_nowhere(result: xr.Dataset) -> None:
    """Ten packets more arrive in one record than the link departed, queued or dropped."""
    interval = float(result.attrs["sample_interval"])
    at = 0.01
    index = int(np.argmin(np.abs(result.time.values - at)))
    arrival = float(result.link_arrival.sel(link=BOTTLENECK).isel(time=index))
    broken = edited(result, "link_arrival", BOTTLENECK, at, arrival + 10 * 1500 / interval)
    with pytest.raises(AssertionError, match=r"^invariant byte_conservation violated: bytes in "
                       r"!= out \+ queued \+ dropped: link s0->r0 at t = [\d.]+ s by "
                       r"1\.35e\+04 bytes \(in [\d.e+]+ bytes, out \+ queued \+ dropped "
                       r"[\d.e+]+ bytes\)$"):
        assert_conservation(broken)


def test_work_conservation_fails_on_a_busy_link_left_idle(result: xr.Dataset) -> None:
    capacity = float(result.capacity.sel(link=BOTTLENECK))
    broken = edited(result, "link_departure", BOTTLENECK, 0.01, 0.5 * capacity)
    with pytest.raises(AssertionError, match=r"^invariant work_conservation violated: link idle "
                       rf"while its queue held data: link s0->r0 at {when(result, 0.01)} .*"
                       r"departures 6\.25e\+07 bytes/s, capacity 1\.25e\+08 bytes/s\)$"):
        assert_work_conservation(broken)


def test_invariants_fail_on_the_runs_own_report(result: xr.Dataset) -> None:
    report = json.loads(result.attrs["invariants"])
    report["floors"] = {"ok": False, "detail": "window below its floor: subflow 1 at t = 0.01 s"}
    report["capacity"] = {"ok": False, "detail": "departures above capacity: link s0->r0"}
    broken = result.assign_attrs(invariants=json.dumps(report))
    with pytest.raises(AssertionError, match=r"^invariant capacity violated \(run's report\): "
                       r"departures above capacity: link s0->r0 \(and 1 more: floors\)$"):
        assert_invariants(broken)
    assert_invariants(broken, names=["queue_bounds", "byte_conservation"])
    with pytest.raises(AssertionError, match=r"^invariant floors violated"):
        assert_invariants(broken, names=["floors"])
    bare = result.copy()
    bare.attrs = {key: value for key, value in result.attrs.items() if key != "invariants"}
    with pytest.raises(AssertionError, match="no invariant report"):
        assert_invariants(bare)
    with pytest.raises(ValueError, match="unknown invariant 'fairness'"):
        assert_invariants(result, names=["fairness"])


def test_utilization_of_the_bottleneck_and_of_a_half_used_link(result: xr.Dataset) -> None:
    assert_utilization(result, at_least=0.99)  # the busiest: s0->r0, full
    assert_utilization(result, at_least=0.99, link=BOTTLENECK)
    with pytest.raises(AssertionError, match=r"^link h0->s0 carries 49\.\d+% of its 1 Gb/s "
                       r"\(49\d Mb/s\) on average after 5\.01 ms, below 95\.00%$"):
        assert_utilization(result, at_least=0.95, link="h0->s0")
    with pytest.raises(ValueError, match="link 'x->y' is not in the result"):
        assert_utilization(result, at_least=0.5, link="x->y")


def test_fairness_by_jain_and_by_allocation(result: xr.Dataset) -> None:
    """Two flows at 250 Mb/s each hold every criterion; halving one's rate breaks them, and
    the message names that flow."""
    for criterion in ("jain", "max_min", "proportional"):
        assert_fair(result, within=0.01, criterion=criterion)
    broken = result.copy(deep=True)
    broken["flow_rate"].loc[{"flow": 0}] = broken.flow_rate.sel(flow=0) * 0.5
    with pytest.raises(AssertionError, match=r"^Jain's index 0\.9000 of 2 flows is below 0\.9900: "
                       r"flow 0 \(h0->r0\) gets 250 Mb/s, flow 1 \(h1->r0\) 500 Mb/s "
                       r"\(mean 375 Mb/s\)$"):
        assert_fair(broken, within=0.01)
    with pytest.raises(AssertionError, match=r"^flow 0 \(h0->r0\) gets 250 Mb/s, 50\.0% off its "
                       r"max_min share 500 Mb/s \(tolerance 5\.0%\)$"):
        assert_fair(broken, within=0.05, criterion="max_min")
    with pytest.raises(ValueError, match="criterion 'reno' is not known for this run"):
        assert_fair(result, within=0.05, criterion="reno")


def test_convergence_within_a_time(result: xr.Dataset) -> None:
    """The star settles when its queue does (about 6.5 ms); a flow whose rate dips for 2 ms
    settles after its dip; a flow whose rate climbs through the last 40 % of the run does not
    settle; four records cannot be judged."""
    assert_converges(result, within=0.01)
    with pytest.raises(AssertionError, match=r"^not settled within 1 ms: the queue of link "
                       r"s0->r0 settles at [\d.]+ ms$"):
        assert_converges(result, within=0.001)
    end = float(result.time[-1])

    def reshaped(factor: xr.DataArray) -> xr.Dataset:
        out = result.copy(deep=True)
        out["flow_rate"].loc[{"flow": 1}] = factor * result.flow_rate.sel(flow=1)
        return out

    dip = xr.where((result.time > 0.6 * end) & (result.time < 0.7 * end), 0.5, 1.0)
    with pytest.raises(AssertionError, match=r"^not settled within 10 ms: flow 1 \(h1->r0\) "
                       r"settles at 14\.\d+ ms \(its rate within 10% of its final mean\)$"):
        assert_converges(reshaped(dip), within=0.01)
    climb = 1 + ((result.time - 0.6 * end) / (0.4 * end)).clip(0, 1)
    with pytest.raises(AssertionError, match=r"^not settled within 10 ms: flow 1 \(h1->r0\) does "
                       r"not settle before the last quarter of the run"):
        assert_converges(reshaped(climb), within=0.01)
    with pytest.raises(AssertionError, match=r"^convergence cannot be judged: not enough data"):
        assert_converges(result.isel(time=slice(0, 4)), within=1.0)


def test_the_example_a_user_copies_runs_and_is_the_documented_one() -> None:
    source = EXAMPLE.read_text()
    code = source[source.index("from hypothesis import given"):]
    documented = inspect.cleandoc(pathflow.testing.__doc__ or "").splitlines()
    assert code.strip() in "\n".join(line.removeprefix("    ") for line in documented)
    spec = importlib.util.spec_from_file_location("test_my_property", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.test_identical_flows_share_the_bottleneck()


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_every_topology_draws_runnable_scenarios(topology: str) -> None:
    """Any control on each kind of network, at most 4 flows: the fluid engine runs it and
    every invariant holds."""
    @simulation_settings(max_examples=2)
    @given(scenarios(topologies=(topology,), ccs=tuple(CONTROLS), max_flows=3,
                     round_trips=50, min_duration=0.0))
    def runs(scenario: pathflow.Scenario) -> None:
        assert_invariants(pathflow.simulate(scenario))

    runs()


@pytest.mark.parametrize("cc", list(CONTROLS))
def test_every_control_draws_runnable_scenarios_with_drawn_parameters(cc: str) -> None:
    @simulation_settings(max_examples=2)
    @given(scenarios(ccs=(cc,), max_flows=3, round_trips=50, min_duration=0.0,
                     parameter_spread=2.0))
    def runs(scenario: pathflow.Scenario) -> None:
        assert scenario.si.transport.cc == cc
        assert_invariants(pathflow.simulate(scenario))

    runs()


def _resolved(cc: str, drawn: dict[str, Any], link_rate: float) -> dict[str, Any]:
    """What a star with these keys resolves each parameter to (in its model's units)."""
    return dict(pathflow.Scenario.from_dict({
        "topology": {"kind": "star", "senders": 1, "link_rate": f"{link_rate * 8}bps"},
        "transport": {"cc": cc, **drawn}}).si.transport.parameters)


@pytest.mark.filterwarnings("ignore:aqm:UserWarning")  # _resolved's star has no ECN marking
@pytest.mark.parametrize("cc", list(CONTROLS))
def test_parameters_stay_in_their_declared_ranges(cc: str) -> None:
    """Without a spread every parameter is its default; with a spread of 4 every value is
    within a factor 4 of its default (or its preset's value), or at a declared bound."""
    link_rate = 1.25e9
    declared = {p.name: p for p in CONTROLS[cc].parameters}

    @simulation_settings(max_examples=25)
    @given(transport_parameters(cc, spread=1.0),
           transport_parameters(cc, spread=4.0, link_rate=link_rate))
    def within(defaults: dict[str, Any], drawn: dict[str, Any]) -> None:
        assert defaults == {}
        assert set(drawn) <= {*declared, "preset"}
        base = _resolved(cc, {"preset": drawn["preset"]} if "preset" in drawn else {},
                         link_rate)
        for name, value in _resolved(cc, drawn, link_rate).items():
            parameter = declared[name]
            if value is None or isinstance(value, str) or parameter.unit == "flag":
                continue
            assert parameter.low <= value <= parameter.high, name
            at_bound = value in (parameter.low, parameter.high)
            assert at_bound or base[name] / 4.001 <= value <= base[name] * 4.001, name

    within()


@simulation_settings(max_examples=10)
@given(scenario=scenarios(topologies=TOPOLOGIES, ccs=tuple(CONTROLS)))
def test_buffers_thresholds_and_durations_follow_the_round_trips(scenario: pathflow.Scenario
                                                                 ) -> None:
    """A buffer of 1 to 4 BDPs per subflow, at least the initial window plus two packets; a
    threshold below the buffer; 400 round trips, at least 50 ms."""
    compiled = compile_scenario(scenario)
    rtt = float(np.max(np.asarray(compiled.problem.path_base_rtt)))
    si = scenario.si
    packet = si.transport.mss
    subflows = len(compiled.routes.subflow_flow)
    bdp = si.topology.link_rate * rtt / packet
    floor = si.transport.parameters.get("init_cwnd", 10.0) + 2
    per_subflow = si.topology.buffer / packet / subflows
    assert max(floor, bdp) * (1 - 1e-3) <= per_subflow <= max(floor, 4 * bdp) * (1 + 1e-3)
    for key in ("threshold", "kmin", "kmax"):
        if key in si.aqm.parameters:
            assert si.aqm.parameters[key] < si.topology.buffer
    assert si.run.duration == pytest.approx(max(0.05, 400 * rtt), rel=1e-5)


def test_networks_and_scenarios_refuse_what_they_cannot_draw() -> None:
    with pytest.raises(ValueError, match="unknown topology 'ring'"):
        networks(("ring",))
    with pytest.raises(ValueError, match="min_flows <= max_flows"):
        networks(min_flows=3, max_flows=2)
    with pytest.raises(ValueError, match="a parking lot has at least 2 flows"):
        networks(("parking_lot",), max_flows=1)
    with pytest.raises(ValueError, match="unknown congestion control 'cubic'"):
        scenarios(ccs=("cubic",))
    with pytest.raises(ValueError, match="spread: must be >= 1"):
        transport_parameters("reno", spread=0.5)


@simulation_settings(max_examples=10)
@given(sections=networks(("star", "parking_lot"), max_flows=1))
def test_a_parking_lot_is_left_out_where_flows_are_too_few(sections: dict[str, Any]) -> None:
    assert sections["topology"]["kind"] == "star"


def test_the_assertions_work_without_hypothesis(monkeypatch: pytest.MonkeyPatch) -> None:
    """hypothesis is a test dependency: without it the assertions import and the strategies
    say what to install."""
    monkeypatch.setattr(pathflow, "testing", pathflow.testing)  # the import below rebinds it
    monkeypatch.setitem(sys.modules, "hypothesis", None)
    monkeypatch.delitem(sys.modules, "pathflow.testing.strategies")
    monkeypatch.delitem(sys.modules, "pathflow.testing")
    fresh = importlib.import_module("pathflow.testing")
    assert callable(fresh.assert_capacity)
    with pytest.raises(ImportError, match=r"pip install 'pathflow\[testing\]'"):
        fresh.scenarios  # noqa: B018
