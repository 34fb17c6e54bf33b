"""DCQCN's cuts drawn per flow (`[transport] cuts = "events"`, models/dcqcn.py,
models/dcqcn_plus.py): the cut rate against the notification process it stands for, and flows
that cut at moments of their own. Against the packet level: the validation case
`dcqcn_fluid_packet` (8:1 and 64:1 incasts) and, below, the default sweep's incast."""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pathflow import Scenario
from pathflow.compile import compile_scenario
from pathflow.models.base import Signals
from pathflow.models.dcqcn import Dcqcn
from pathflow.simulate import simulate
from pathflow.sweeps import summarize_point
from pathflow.validation.cases.dcqcn import incast, ten_gig_incast
from pathflow.verdict import STATES

EXAMPLE = Path(__file__).parents[1] / "pathflow" / "scenarios" / "dcqcn_incast.toml"


def _packet_gaps(mark: float, rate: float, dead: float, cuts: int, rng: np.random.Generator
                 ) -> np.ndarray:
    """Times between cuts of a flow whose packets arrive every 1/rate, each marked with
    probability `mark`: a cut at the first marked packet at least `dead` after the last cut
    (which came with a packet), by simulation."""
    spacing = 1.0 / rate
    first = np.ceil(dead / spacing - 1e-12)  # packets up to the first one past the dead time
    extra = rng.geometric(mark, cuts) - 1  # unmarked packets before the marked one
    return (first + extra) * spacing


def _fluid_gap_moments(model: Dcqcn, state: dict, signals: Signals, params: object,
                       longest: float, spacing: float) -> tuple[float, float]:
    """Mean and standard deviation of the time between the model's cuts, from its cut rate
    h(s) at each time s since the last cut: survival S(s) = exp(-int_0^s h)."""
    since = np.arange(0.0, longest, spacing)
    one = jnp.ones(since.size)
    many = jax.tree.map(lambda x: jnp.broadcast_to(x, since.shape), (signals, params))
    hazard = np.asarray(model.event_rate({**{k: v[0] * one for k, v in state.items()},
                                          "since_cut": jnp.asarray(since)}, *many))
    survival = np.exp(-np.concatenate([[0.0], np.cumsum(hazard[:-1] * spacing)]))
    mean = float(np.sum(survival) * spacing)
    second = float(np.sum(2 * since * survival) * spacing)
    return mean, float(np.sqrt(max(second - mean**2, 0.0)))


@pytest.mark.parametrize(("mark", "rate", "dead"), [
    (1.0, 1.5625e5, 4e-6),  # 1.25 Gb/s in 1 KB packets, cx4's 4 us: a cut every packet time
    (0.3, 1.5625e5, 4e-6),
    (0.02, 1e6, 50e-6),  # conext2016's 50 us at 8 Gb/s
    (0.5, 2e4, 50e-6),  # slower than the dead time: one packet in two, from the next one on
    (1.0, 1e3, 4e-6),  # a flow of 1,280 sharing 10 Gb/s: every packet marked, one a ms
])
def test_the_cuts_are_the_renewal_of_marked_packets(mark: float, rate: float,
                                                    dead: float) -> None:
    """The time between cuts has the mean of the packet-level notification process it stands
    for, and its spread with an exponential count of unmarked packets in place of the
    geometric one: sqrt(1 - p) of the packet level's (none when every packet is marked)."""
    model = Dcqcn(cuts="events")
    params = Dcqcn.Params(*(jnp.array([value]) for value in (
        1e7, 1e2, dead, 0.0, np.inf, 55e-6, 1 / 256, 5.0, 32.767, 300e-6, 625.0, 6250.0)))
    one = jnp.ones(1)
    signals = Signals(one, mark * one, 0 * one, rate * one, one, jnp.zeros(1, jnp.int32),
                      jnp.zeros(1, jnp.int32), one)
    state = {"current_rate": rate * one, "target_rate": rate * one, "alpha": 0.5 * one,
             "sent_since_cut": 0 * one}
    gaps = _packet_gaps(mark, rate, dead, 400_000, np.random.default_rng(1))
    mean, spread = _fluid_gap_moments(model, state, signals, params,
                                      longest=dead + 40 / (mark * rate), spacing=1e-3 / rate)
    assert mean == pytest.approx(gaps.mean(), rel=0.01)
    assert spread == pytest.approx(np.sqrt(1 - mark) * gaps.std(), rel=0.02, abs=0.01 / rate)


def test_flows_cut_at_moments_of_their_own() -> None:
    """A 64:1 incast from 8 hosts: the mean field runs the 8 flows of a host once (they stay
    identical); with events every flow runs as a controller of its own, and their rates part
    where the marking is a probability (the start, marking every packet, cuts them alike)."""
    scenario = ten_gig_incast(64, "cx4").with_updates({"run.duration": "60ms",
                                                       "run.warmup": "10ms"})
    events = scenario.with_updates({"transport.cuts": "events"})
    assert compile_scenario(scenario).problem.start.shape[0] == 8
    assert compile_scenario(events).problem.start.shape[0] == 64
    ds = simulate(events)
    rates = ds.current_rate.isel(time=-1).values
    assert np.unique(np.round(rates, 3)).size > 32
    assert float(ds.since_cut.isel(time=-1).max()) < 10e-3  # each cut since the warm-up


@pytest.mark.parametrize("flows", [80, 1280])
def test_the_default_sweeps_incast_against_the_packet_level(flows: int) -> None:
    """`pathflow sweep` with no scenario (examples/dcqcn_incast.toml, 200 ms, with each flow's
    cuts drawn: `cli.sweep.DEFAULT_FORM`, a host's flows as 4 sample paths), DCQCN: the fluid
    point carries what the packet level carries (3 %), holds its mean queue (20 %) and ends in
    the same state: at 80 flows a limit cycle that empties the queue, at 1,280 a buffer that
    PFC keeps full, every flow at its share of the NICs' round robin. The mean field's
    synchronised flows idle the link (measured 2026-11-29: 6.7 and 7.9 Gb/s against 8.6 and
    10 Gb/s, queues of 25 and 135 KB against 57 KB and 5 MB, oscillating at 1,280)."""
    from pathflow.cli.sweep import default_sweep_scenario
    from pathflow.sweeps import sweep
    from pathflow.validation.packet import simulate_packets

    scenario = Scenario.from_toml(EXAMPLE.read_text()).with_updates({"traffic.flows": flows})
    reference = summarize_point(simulate_packets(scenario))
    fluid = sweep(default_sweep_scenario().with_cc("dcqcn"), [flows]).isel(flows=0)
    assert float(fluid.aggregate_throughput) == pytest.approx(
        reference["aggregate_throughput"], rel=0.03)
    assert float(fluid.queue_mean) == pytest.approx(reference["queue_mean"], rel=0.20)
    assert STATES[int(fluid.state)] == STATES[int(reference["state"])]
    assert float(fluid.jain) == pytest.approx(reference["jain"], abs=0.01)


def test_the_analyses_are_of_the_mean_field() -> None:
    """The rest state and its stability are those of the mean field: asked of the events form
    (whose derivative between its jumps has no cut term to balance), they say so in one line,
    and the mean field of the same scenario has one (`dcqcn_fixed_point`'s 10 flows on 40 Gb/s:
    each at C/N)."""
    from pathflow.analysis.equilibrium import rest_state
    from pathflow.analysis.predict import predict
    from pathflow.analysis.stability import stability
    from pathflow.scenario import ScenarioError

    scenario = incast(10)
    events = scenario.with_updates({"transport.cuts": "events"})
    for analysis in (rest_state, stability):
        with pytest.raises(ScenarioError, match=r"transport\.cuts: .* mean field"):
            analysis(events)
    assert predict(events).reason.startswith("transport.cuts")
    assert rest_state(scenario).rate == pytest.approx(40e9 / 8 / 10, rel=1e-6)  # bytes/s
