"""Steps chosen from the dynamics (solvers/stepping.py): the rule, the re-filing of signals in
flight, and adaptive runs against fixed fine steps."""

from __future__ import annotations

import math

import numpy as np
import pytest

import pathflow
from helpers import PACKET, star
from pathflow.compile import compile_scenario
from pathflow.metrics import throughput
from pathflow.solvers.stepping import Stepping, limiting_rtt, regrid


def test_choose_takes_a_twentieth_of_the_round_trip_in_quarter_octaves() -> None:
    rule = Stepping(sample=1e-3, finest=100, longest=0.5e-3)
    assert rule.choose(1e-3) == 20  # 20 steps per round trip of one record: a level, ceil(2^4.25)
    assert rule.choose(1e-3 * 20 / 21) == 23  # the next level up, ceil(2^4.5)
    assert rule.choose(20e-3) == 2  # one step per record wanted, RED allows no longer than 0.5
    assert rule.choose(1e-6) == 100  # never finer than the default step
    assert rule.choose(math.inf) == 2


def test_choose_keeps_a_step_one_level_finer_than_needed() -> None:
    """A round trip wavering across a level does not re-file the ring every segment."""
    rule = Stepping(sample=1e-3, finest=1000)
    assert rule.choose(1e-3 * 20 / 64) == 64
    assert rule.choose(1e-3 * 20 / 64, current=77) == 77  # one level finer: kept
    assert rule.choose(1e-3 * 20 / 64, current=91) == 64  # two levels finer: coarsened
    assert rule.choose(1e-3 * 20 / 70, current=64) == 77  # too coarse: always refined


def test_only_signalled_controllers_count_as_queued() -> None:
    """A queue that neither marks nor drops (an ACK-loaded port below K) sends no signal to
    resolve, so the short round trips through it do not limit the step."""
    rtt = np.array([[1e-3, 1e-4]])
    send = np.array([[10.0, 10.0]])
    base = np.array([5e-5, 5e-5])
    args = (np.full(2, 100.0), np.arange(2), base, np.zeros(2), 1.0, 2.0)
    assert limiting_rtt(rtt, send, *args) == 1e-4
    assert limiting_rtt(rtt, send, *args, signalled=np.array([True, False])) == 1e-3
    # none signalled: every window-limited controller counts
    assert limiting_rtt(rtt, send, *args, signalled=np.zeros(2, bool)) == 1e-4


def test_nic_held_idle_and_unqueued_senders_do_not_limit_the_step() -> None:
    rtt = np.array([[1e-3, 5e-5, 2e-3, 7e-5, 3e-5]])
    capacity = np.full(5, 100.0)
    nic = np.arange(5)
    send = np.array([[50.0, 100.0, 20.0, 0.0, 10.0]])  # 1 fills its NIC, 3 is idle
    base = np.array([1e-4, 1e-5, 1e-4, 7e-5, 3e-5])  # 4 is on an empty path
    start = np.array([0.0, 0.0, 0.0, 5.0, 0.0])
    assert limiting_rtt(rtt, send, capacity, nic, base, start, 1.0, 2.0) == 1e-3
    assert limiting_rtt(rtt, send, capacity, nic, base, start, 4.0, 6.0) == 7e-5  # 3 starts
    # no queue anywhere: every window-limited sender counts, the empty path's too
    assert limiting_rtt(rtt, send, capacity, nic, rtt[0], start, 1.0, 2.0) == 3e-5


def test_regrid_files_each_signal_at_its_arrival_time() -> None:
    """A signal due at old step k arrives at k dt_old: new step ceil(k dt_old / dt_new)."""
    history, old, new = 16, 8, 2  # dt grows 4 times; the step is at record 3 (step 24)
    slots = np.full((history, 2, 4), -1.0)
    for controller, due, value in ((0, 25, 0.1), (0, 27, 0.2), (1, 24, 0.3), (1, 31, 0.4)):
        slots[due % history, controller] = (due, value, 0.0, value)
    step, out, guard = regrid(24, slots, np.array([27, 31]), old, new)
    assert step == 6
    filed = {(c, int(out[r, c, 0])): out[r, c, 1] for r in range(history) for c in range(2)
             if out[r, c, 0] >= 0}
    # 25 and 27 both land on new step 7: the newer (0.2) wins; 24 -> 6, 31 -> 8
    assert filed == {(0, 7): 0.2, (1, 6): 0.3, (1, 8): 0.4}
    np.testing.assert_array_equal(guard, [7, 8])
    back_step, back, _ = regrid(step, out, guard, new, old)  # finer again: exact
    assert back_step == 24
    assert {(c, int(back[r, c, 0])) for r in range(history) for c in range(2)
            if back[r, c, 0] >= 0} == {(0, 28), (1, 24), (1, 32)}


def test_regrid_on_the_device_matches_numpy() -> None:
    """solvers.run re-files the ring in place on the device from the pending rows only."""
    import jax.numpy as jnp

    from pathflow.solvers import run
    from pathflow.solvers.dde import Carry, Feedback

    rng = np.random.default_rng(7)
    history, controllers, old, new, step = 512, 6, 40, 13, 40 * 9
    slots = np.full((history, controllers, 4), -1.0, np.float32)
    due = np.zeros(controllers, np.int64)
    for sent in range(step - 700, step):  # past turns of the ring leave stale entries
        due = np.maximum(sent + rng.integers(1, 60, controllers), due)
        slots[due % history, np.arange(controllers)] = np.stack(
            [due, rng.random(controllers), rng.random(controllers), rng.random(controllers)], 1)
    expected_step, expected, expected_due = regrid(step, slots, due.astype(np.int32), old, new)
    carry = Carry(**dict.fromkeys(Carry._fields))._replace(
        step=jnp.asarray(step, jnp.int32), pause_views=jnp.zeros((0, 3)),
        pause_times=jnp.zeros(0),
        feedback=Feedback(jnp.asarray(slots), jnp.asarray(due, jnp.int32), None))
    out = run._regrid(carry, old, new)
    assert int(out.step) == expected_step
    np.testing.assert_array_equal(np.asarray(out.feedback.slots), expected)
    np.testing.assert_array_equal(np.asarray(out.feedback.due), expected_due)


@pytest.mark.parametrize(("senders", "rate", "threshold"), [(8, "10Gbps", "65pkt"),
                                                            (2, "1Gbps", "20pkt")])
def test_adaptive_steps_agree_with_fixed_fine_steps(senders: int, rate: str,
                                                    threshold: str) -> None:
    scenario = star(senders, rate=rate, delay="5us", buffer="400pkt", duration="60ms",
                    aqm={"kind": "ecn_step", "threshold": threshold}, run={"sample": "20us"})
    compiled = compile_scenario(scenario)
    assert compiled.stepping is not None
    fine = scenario.with_updates({"run.dt": compiled.dt / 2,
                                  "run.sample": compiled.sample_interval})
    adaptive, fixed = pathflow.simulate(scenario), pathflow.simulate(fine)
    assert float(adaptive.dt.max()) >= 2 * compiled.dt  # the queue let the step grow
    steady = {"time": slice(0.02, None), "link": "s0->r0"}
    for ds in (adaptive, fixed):
        assert float(throughput(ds).sum()) == pytest.approx(float(ds.capacity.sel(link="s0->r0")),
                                                            rel=0.01)
    q_adaptive = float(adaptive.queue.sel(**steady).mean()) / PACKET
    q_fixed = float(fixed.queue.sel(**steady).mean()) / PACKET
    assert q_adaptive == pytest.approx(q_fixed, rel=0.03, abs=1.0)
    peak_adaptive = float(adaptive.queue_max.sel(**steady).max()) / PACKET
    peak_fixed = float(fixed.queue_max.sel(**steady).max()) / PACKET
    assert peak_adaptive == pytest.approx(peak_fixed, rel=0.05, abs=1.0)
