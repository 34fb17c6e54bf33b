"""Linear stability of rest states (pathflow.analysis.stability) against the closed form of a
delayed scalar loop, the linearisation of Hollot, Misra, Towsley and Gong (2001) written out by
hand, the published DCQCN results (Zhu et al. 2016) and the fluid simulation."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import scipy.optimize
import scipy.special
import xarray as xr
from typer.testing import CliRunner

import pathflow
from pathflow import Scenario
from pathflow.analysis.equilibrium import rest_state
from pathflow.analysis.stability import (
    Linearization,
    characteristic_roots,
    linearize,
    loop_margins,
    stability,
)
from pathflow.cli import app
from pathflow.cli.console import console
from pathflow.compile import compile_scenario
from pathflow.units import format_time
from pathflow.validation.cases.dcqcn import CAPACITY, LOOP, PACKET, incast
from tests.test_fairness import _parking_lot

RED_PACKET = 1500.0


def _scalar(gain: float, delay: float) -> Linearization:
    """x'(t) = -gain x(t - delay)."""
    return Linearization(np.zeros((1, 1)), np.array([[-gain]]), np.ones((1, 1)),
                         np.array([delay]), ["x"], ["x"], np.ones(1))


@pytest.mark.parametrize(("gain", "delay"), [(1.0, 1.0), (3.0, 0.5), (0.2, 2.0)])
def test_roots_of_a_delayed_scalar_loop_are_lambert_w(gain: float, delay: float) -> None:
    """x' = -a x(t - tau) has the roots s = W_k(-a tau) / tau (Lambert W); the rightmost
    pair is the principal branch's. Stable exactly when a tau < pi / 2, and then the critical
    delay is pi / (2 a) at the crossover a (|G(j w)| = a / w = 1)."""
    lin = _scalar(gain, delay)
    exact = sorted((complex(scipy.special.lambertw(-gain * delay, k)) / delay
                    for k in range(-3, 4)), key=lambda s: -s.real)
    exact = [s for s in exact if s.imag >= 0]
    found = characteristic_roots(lin, count=3)
    np.testing.assert_allclose(found[:3], exact[:3], rtol=1e-9)
    margins = loop_margins(lin)
    assert margins.crossover == pytest.approx(gain, rel=1e-9)
    assert delay + margins.delay == pytest.approx(math.pi / (2 * gain), rel=1e-9)
    assert (found[0].real < 0) == (gain * delay < math.pi / 2)


def test_the_pade_realisation_follows_the_delay() -> None:
    """The state-space form of e^(-x)'s (4, 4) Pade approximant that seeds the roots of large
    systems: on the imaginary axis its response C (x I - A)^-1 B + D has unit gain (an
    all-pass, as e^(-j w) has) and the phase of e^(-j w) within 0.1 degree up to w = pi and
    10 degrees up to 2 pi (the accuracy `_rational` states)."""
    from pathflow.analysis.characteristic import _pade_delay

    a, b, c, d = _pade_delay(4)
    for top, degrees in ((math.pi, 0.1), (2 * math.pi, 10.0)):
        omega = np.linspace(1e-3, top, 200)
        response = np.array([(c @ np.linalg.solve(1j * w * np.eye(4) - a, b))[0, 0] + d
                             for w in omega])
        np.testing.assert_allclose(np.abs(response), 1.0, rtol=1e-12)
        error = np.degrees(np.angle(response * np.exp(1j * omega)))
        assert np.max(np.abs(error)) < degrees


def _red_star(flows: int, ack_ratio: int, delay: str, pmax: float, weight: float) -> Scenario:
    return Scenario.from_dict({
        "topology": {"kind": "star", "senders": flows, "link_rate": "100Mbps",
                     "delay": delay, "buffer": "2000pkt"},
        "aqm": {"kind": "red", "min": "20pkt", "max": "600pkt", "pmax": pmax,
                "weight": weight, "ecn": True},
        "traffic": {"flows": flows},
        "transport": {"cc": "reno", "reaction": "mean", "ack_ratio": ack_ratio,
                      "ack_size": "0B"},
        "run": {"duration": "20s"}})


def _hollot(scenario: Scenario, flows: int, ack_ratio: int) -> tuple[np.ndarray, ...]:
    """MGT's model of N Reno flows on one RED link, linearised by hand (Hollot et al. 2001,
    eq. 5, with the ACK ratio b and RED's filter kept): variables (W, q, v), delay R0.

        W' = 1/(b R) - W W(t-R) p(t-R) / (2 R(t-R)),  q' = N W P / R - C,  v' = K (q - v)

    The rest point from its own scalar equation: N W0 P / R0 = C, W0^2 p0 = 2 / b."""
    compiled = compile_scenario(scenario)
    base = float(compiled.problem.path_base_rtt[0])
    capacity = 100e6 / 8  # bytes/s
    low, high = 20 * RED_PACKET, 600 * RED_PACKET
    aqm = scenario.si.aqm
    pmax, weight = aqm.parameters["pmax"], aqm.parameters["weight"]
    slope = pmax / (high - low)  # per byte
    filter_rate = -math.log1p(-weight) * capacity / RED_PACKET  # 1/s

    def excess(queue: float) -> float:
        p = slope * (queue - low)
        return flows * math.sqrt(2 / (ack_ratio * p)) / (base + queue / capacity) \
            * RED_PACKET - capacity

    q0 = scipy.optimize.brentq(excess, low * (1 + 1e-12), high, xtol=1e-12)
    r0 = base + q0 / capacity
    p0 = slope * (q0 - low)
    w0 = math.sqrt(2 / (ack_ratio * p0))
    now = np.array([[-w0 * p0 / (2 * r0), -1 / (ack_ratio * r0**2 * capacity), 0.0],
                    [flows * RED_PACKET / r0, -1 / r0, 0.0],
                    [0.0, filter_rate, -filter_rate]])
    late = np.array([[-w0 * p0 / (2 * r0), 1 / (ack_ratio * r0**2 * capacity),
                      -w0**2 / (2 * r0) * slope],
                     [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    return now, late, r0, np.array([w0, q0, q0])


@pytest.mark.parametrize(("flows", "ack_ratio", "delay", "pmax", "weight"),
                         [(4, 1, "250us", 0.1, 0.002), (10, 2, "2.5ms", 0.1, 0.01),
                          (2, 1, "5ms", 0.5, 0.05)])
def test_reno_red_roots_match_the_linearisation_by_hand(
        flows: int, ack_ratio: int, delay: str, pmax: float, weight: float) -> None:
    """The JAX linearisation of the solver's own model and rest point against Hollot's by
    hand: the same rest point (1e-9) and the same rightmost roots (1e-6)."""
    scenario = _red_star(flows, ack_ratio, delay, pmax, weight)
    now, late, r0, rest = _hollot(scenario, flows, ack_ratio)
    lin = linearize(scenario)
    queue = lin.variables.index("queue[s0->r0]")
    assert lin.rest[queue] == pytest.approx(rest[1], rel=1e-9)
    scale = np.array([rest[0], rest[1], rest[2]])
    by_hand = Linearization(now * scale[None, :] / scale[:, None], np.eye(3),
                            late * scale[None, :] / scale[:, None], np.full(3, r0),
                            ["W", "q", "v"], ["W", "q", "v"], rest)
    expected = characteristic_roots(by_hand, count=3)
    found = characteristic_roots(lin, count=12)
    # the N flows' window differences have roots of their own; the symmetric ones match
    for root in expected:
        assert np.min(np.abs(found - root)) <= 1e-6 * abs(root)


def test_reno_red_hollot_sufficient_condition() -> None:
    """Hollot et al. (2001): the loop is stable if L (C R)^3 / (2N)^2 <= sqrt(w_g^2 / K^2 + 1),
    w_g = 0.1 min(2N / (R^2 C), 1 / R) (C in packets/s, L = pmax / (max - min) per packet, K
    RED's filter rate). A configuration that meets it is predicted stable."""
    flows, scenario = 10, _red_star(10, 1, "2.5ms", 0.02, 0.0005)
    rest = rest_state(scenario)
    r0, c = float(rest.rtt[0]), 100e6 / 8 / RED_PACKET
    slope, filter_rate = 0.02 / 580, -math.log1p(-0.0005) * c
    w_g = 0.1 * min(2 * flows / (r0**2 * c), 1 / r0)
    assert slope * (c * r0) ** 3 / (2 * flows) ** 2 <= math.sqrt(w_g**2 / filter_rate**2 + 1)
    result = stability(scenario)
    assert bool(result.stable.item())
    assert float(result.phase_margin.item()) > 0


def _dcqcn(flows: int, loop: float, ramp: str = "standard") -> Scenario:
    """The CoNEXT 2016 setting: `flows` DCQCN senders at 40 Gb/s, conext2016 parameters, a
    feedback delay of `loop` seconds (propagation: the analysis's fixed loop delay)."""
    hop = (loop - 2 * (PACKET + 64) / (CAPACITY * PACKET)) / 4
    return incast(flows, delay=f"{hop * 1e6!r}us", duration="120ms", aqm={"ramp": ramp},
                  run={"dt": "0.5us", "feedback_delay": "propagation"})


@pytest.mark.filterwarnings("ignore:aqm.pfc")
def test_dcqcn_published_verdicts_at_85us() -> None:
    """Zhu et al. (2016): with 85 us of feedback delay DCQCN is unstable for N = 10 and
    stable for N = 2 and N = 64 (its non-monotonic stability; N = 64 on the extended line,
    the paper's marking). The margins agree with the roots: at the critical delay a root sits
    on the imaginary axis at the crossover frequency."""
    verdicts = {flows: stability(_dcqcn(flows, LOOP, "extended")) for flows in (2, 10, 64)}
    assert bool(verdicts[2].stable.item()) and bool(verdicts[64].stable.item())
    assert not bool(verdicts[10].stable.item())
    assert float(verdicts[10].critical_delay.item()) < LOOP
    for flows in (2, 64):
        assert float(verdicts[flows].critical_delay.item()) > LOOP
    lin = linearize(_dcqcn(10, LOOP))
    critical = float(verdicts[10].critical_delay.item())
    at_critical = lin._replace(delay=np.full_like(lin.delay, critical))
    root = characteristic_roots(at_critical)[0]
    assert abs(root.real) <= 1e-6 * abs(root)
    assert root.imag == pytest.approx(float(verdicts[10].crossover.item()), rel=1e-6)


@pytest.mark.filterwarnings("ignore:aqm.pfc")
def test_large_systems_find_the_same_roots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                           ) -> None:
    """Where the discretised generator would be too large, the roots are seeded from the
    delay-free Pade system instead: the same rightmost roots as the generator's on DCQCN (N =
    10 at 85 us, unstable, three signals per flow) and on the Reno/RED parking lot (delays
    that differ per flow)."""
    import pathflow.analysis.characteristic as module

    for lin in (linearize(_dcqcn(10, LOOP)), linearize(_parking_lot(tmp_path, 3))):
        dense = characteristic_roots(lin, count=3)
        with monkeypatch.context() as patch:
            patch.setattr(module, "DENSE", 0)
            seeded = characteristic_roots(lin, count=3)
        assert dense.size == 3
        np.testing.assert_allclose(seeded, dense, rtol=1e-9)


def _check_loop(lin: Linearization, omegas: np.ndarray) -> int:
    """At each omega, the eigenvalues of the loci's matrix (`_Modal.loop`) are the non-zero
    eigenvalues of G(j omega) = C (j omega I - A0)^-1 B E(j omega) formed whole, within 1e-9
    of the largest, and the others of G are below that; returns the matrix's size."""
    import pathflow.analysis.characteristic as module

    n = lin.a0.shape[0]
    modal = module._Modal(lin)
    for omega in omegas:
        s = 1j * omega
        whole = np.linalg.eigvals(lin.c @ np.linalg.solve(s * np.eye(n) - lin.a0, lin.b)
                                  * np.exp(-s * lin.delay))
        core = np.linalg.eigvals(modal.loop(np.array([s]))[0])
        largest = whole[np.argsort(-np.abs(whole))]
        scale = float(np.abs(largest[0]))
        found, kept = scipy.optimize.linear_sum_assignment(
            np.abs(largest[:core.size, None] - core[None, :]))
        assert np.max(np.abs(largest[found] - core[kept])) <= 1e-9 * scale
        assert np.all(np.abs(largest[core.size:]) <= 1e-9 * scale)
    return core.size


@pytest.mark.parametrize("low", ["b", "c"])
def test_the_loci_come_from_a_matrix_of_the_loop_s_rank(low: str) -> None:
    """A loop of 6 signals through 12 states whose B (or C) has rank 4: the loci's matrix is
    4 x 4 and has G's non-zero eigenvalues (eig(XY) and eig(YX) share them)."""
    rng = np.random.default_rng(7)
    n, m, rank = 12, 6, 4
    a0 = rng.normal(size=(n, n)) - 4.0 * np.eye(n)
    thin = rng.normal(size=(n, rank)) @ rng.normal(size=(rank, m))
    full = rng.normal(size=(n, m))
    b, c = (thin, full.T) if low == "b" else (full, thin.T)
    lin = Linearization(a0, b, c, rng.uniform(1.0, 2.0, m), [f"z{i}" for i in range(n)],
                        [f"u{i}" for i in range(m)], np.ones(n))
    assert _check_loop(lin, np.array([0.01, 0.3, 1.0, 3.0, 30.0])) == rank


@pytest.mark.parametrize("cc", ["reno", "dctcp"])
def test_a_fat_tree_s_margins_and_roots_against_dense_computations(cc: str) -> None:
    """On a k = 4 fat-tree with ACKs (RED with ECN, 10 Gb/s, 2 us links; 14 signals after
    compression), the margins from loci on the grid refined where a branch near the unit
    circle moves (`_loci`) equal those of a fixed grid of 2,000 frequencies (1e-9; measured
    1e-13; from a 4-point grid left unrefined, Reno's phase margin comes out +66 degrees
    against -21), and every root found, by Newton through A0's eigendecomposition, is a root
    of T(s) = s I - A0 - B E(s) C formed whole: its smallest singular value within 1e-10 of
    its largest. The loci's matrix (r x r, r the loop's rank: DCTCP's 9 of 14 signals here)
    has the non-zero eigenvalues of G(j omega) formed whole (`_check_loop`)."""
    import pathflow.analysis.characteristic as module
    from tests.test_equilibrium import _fat_tree

    scenario = _fat_tree(cc, 1).with_updates({
        "topology.link_rate": "10Gbps", "topology.delay": "2us", "transport.ack_size": "64B"})
    lin = linearize(scenario)
    assert lin.c.shape[0] > 8
    small = module._compressed(lin)
    _check_loop(small, np.array([0.1, 1.0, 10.0]) / float(np.mean(small.delay)))
    refined, dense = loop_margins(lin), loop_margins(lin, points=2000)
    np.testing.assert_allclose(np.array(refined), np.array(dense), rtol=1e-9)
    roots = characteristic_roots(lin)
    assert roots.size == 8
    n = lin.a0.shape[0]
    for s in roots:
        t = s * np.eye(n) - lin.a0 - (lin.b * np.exp(-s * lin.delay)) @ lin.c
        values = np.linalg.svd(t, compute_uv=False)
        assert values[-1] <= 1e-10 * values[0]


@pytest.mark.filterwarnings("ignore:aqm.pfc")
def test_dcqcn_critical_delay_against_the_simulation() -> None:
    """N = 10: below the predicted critical delay (85 % of it) the simulated queue settles;
    above it (115 %) it oscillates with the predicted period near onset (within 15 %)."""
    critical = float(stability(_dcqcn(10, LOOP)).critical_delay.item())
    swings, periods = {}, {}
    for factor in (0.85, 1.15):
        ds = pathflow.simulate(_dcqcn(10, factor * critical)).sel(link="s0->r0")
        late = ds.queue.sel(time=ds.time > 0.08).values
        swings[factor] = float(np.ptp(late) / np.mean(late))
        centred = late - late.mean()
        crossings = np.flatnonzero((centred[:-1] < 0) & (centred[1:] >= 0))
        step = float(ds.time[1] - ds.time[0])
        periods[factor] = float(np.mean(np.diff(crossings))) * step if crossings.size > 2 \
            else math.nan
    assert swings[0.85] < 0.01
    assert swings[1.15] > 0.1
    predicted = float(stability(_dcqcn(10, 1.15 * critical)).period.item())
    assert periods[1.15] == pytest.approx(predicted, rel=0.15)


@pytest.mark.filterwarnings("ignore:aqm.pfc")
def test_analyze_prints_the_stability_and_refuses_step_marking(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`pathflow analyze` prints the verdict and the critical delay of the DCQCN incast (the
    analysis's own numbers, formatted); DCTCP's step marking has no rest point, said in the
    rest-state line (exit 0: the fairness table stands); in its mean form it rests on the step,
    whose rest has no linearisation, said in the stability line."""
    scenario = _dcqcn(10, LOOP)
    (tmp_path / "d.toml").write_text(scenario.to_toml())
    monkeypatch.setattr(console, "width", 160)  # one line per row, whatever the terminal
    result = CliRunner().invoke(app, ["analyze", str(tmp_path / "d.toml")])
    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if "s0->r0" in line and "│" in line)
    expected = stability(scenario)
    assert "unstable" in row
    assert format_time(float(expected.critical_delay.item())) in row
    (tmp_path / "step.toml").write_text(
        '[topology]\nkind = "star"\nsenders = 2\n[transport]\ncc = "dctcp"\n')
    step = CliRunner().invoke(app, ["analyze", str(tmp_path / "step.toml")])
    assert step.exit_code == 0 and "Linear stability" not in step.output
    assert "none derived" in step.output
    # the mean form rests on the step (a sliding mode at K), which has no linearisation
    (tmp_path / "mean.toml").write_text(
        '[topology]\nkind = "star"\nsenders = 2\n[aqm]\nkind = "ecn_step"\n'
        'threshold = "20pkt"\n[transport]\ncc = "dctcp"\nreaction = "mean"\n')
    mean = CliRunner().invoke(app, ["analyze", str(tmp_path / "mean.toml")])
    assert mean.exit_code == 0, mean.output
    assert "Rest state: none" not in mean.output
    assert "Linear stability: none derived (aqm.kind" in " ".join(mean.output.split())


def test_analyze_says_when_the_rest_state_is_approximate(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the root solver stalls, `analyze` shows the point it stopped at as approximate,
    with its residual (a stall stood in for by the residual of the exact rest made 1e-2)."""
    import pathflow.analysis.equilibrium as module

    (tmp_path / "mean.toml").write_text(
        '[topology]\nkind = "star"\nsenders = 2\n[aqm]\nkind = "ecn_step"\n'
        'threshold = "20pkt"\n[transport]\ncc = "dctcp"\nreaction = "mean"\n')
    exact = CliRunner().invoke(app, ["analyze", str(tmp_path / "mean.toml")])
    assert exact.exit_code == 0 and "approximate" not in exact.output
    solved = module.equilibrium
    monkeypatch.setattr(module, "equilibrium",
                        lambda *args: solved(*args).assign_attrs(residual=1e-2))
    stalled = CliRunner().invoke(app, ["analyze", str(tmp_path / "mean.toml")])
    assert stalled.exit_code == 0, stalled.output
    assert ("Rest state: approximate (the root solver stalled at a residual of 1.0e-02"
            in " ".join(stalled.output.split()))


def _two_stages(folder: Path) -> Scenario:
    """Four 100 Mb/s RED links, two into a middle switch (A: X1-Y, B: X2-Y) and two out of it
    (C: Y-Z1, D: Y-Z2), and one Reno flow per (first, second) pair: the links' flow sets obey
    A + B = C + D."""
    fast = "10Gbps,10us,1000pkt"
    rows = ["src,dst,link_rate,delay,buffer", "X1,Y,100Mbps,1ms,1000pkt",
            "X2,Y,100Mbps,1ms,1000pkt", "Y,Z1,100Mbps,1ms,1000pkt", "Y,Z2,100Mbps,1ms,1000pkt"]
    hosts = []
    for first in ("X1", "X2"):
        for second in ("Z1", "Z2"):
            sender, receiver = f"s{first}{second}", f"r{first}{second}"
            rows += [f"{sender},{first},{fast}", f"{receiver},{second},{fast}"]
            hosts += [sender, receiver]
    (folder / "edges.csv").write_text("\n".join(rows) + "\n")
    return Scenario.from_dict({
        "topology": {"kind": "graph", "edges": "edges.csv", "hosts": hosts},
        "aqm": {"kind": "red", "min": "20pkt", "max": "400pkt", "pmax": 0.1, "ecn": True},
        "traffic": {"pattern": "explicit", "pairs": [[i, i + 1] for i in range(0, 8, 2)]},
        "transport": {"cc": "reno", "reaction": "mean"},
        "run": {"duration": "1s"}}, base_dir=folder)


def test_a_cycle_of_flow_sets_gives_a_line_of_rest_states(tmp_path: Path) -> None:
    """With A + B = C + D in flows, shifting marking from the first stage to the second
    (p_A = p_B up, p_C = p_D down) leaves every path's signal, rate and load alone: exactly
    one neutral direction, whose zero root is kept out of the verdict (stable); a parking
    lot's flow sets are independent (none)."""
    result = stability(_two_stages(tmp_path))
    assert result.component.size == 1
    assert int(result.neutral.item()) == 1
    assert bool(result.stable.item()) and float(result.root_real.item()) < 0
    lot = stability(_parking_lot(tmp_path, 2))
    assert int(lot.neutral.max()) == 0


def _two_way(folder: Path, ack_size: str) -> Scenario:
    """One 1 Gb/s RED link each way between switches X and Y (20 us) and a Reno flow across it
    each way (a -> b, c -> d), so that each link carries one flow's data and the other's ACKs;
    10 Gb/s host links, d's 30 us long so that the two flows differ (identical flows that
    start together stay identical in the simulation, and a mode in which they move apart is
    never excited)."""
    rows = ["src,dst,link_rate,delay,buffer", "X,Y,1Gbps,20us,1000pkt",
            "a,X,10Gbps,2us,1000pkt", "d,X,10Gbps,30us,1000pkt", "b,Y,10Gbps,2us,1000pkt",
            "c,Y,10Gbps,2us,1000pkt"]
    (folder / "edges.csv").write_text("\n".join(rows) + "\n")
    return Scenario.from_dict({
        "topology": {"kind": "graph", "edges": "edges.csv", "hosts": ["a", "b", "c", "d"]},
        "aqm": {"kind": "red", "min": "20pkt", "max": "400pkt", "pmax": 0.1, "ecn": True},
        "traffic": {"pattern": "explicit", "pairs": [[0, 1], [2, 3]]},
        "transport": {"cc": "reno", "reaction": "mean", "ack_size": ack_size},
        "run": {"duration": "2s", "sample": "100us"}}, base_dir=folder)


def _swing(ds: xr.Dataset, after: float) -> float:
    """The largest standard deviation of a queue after `after` seconds over its mean (plus a
    packet, so that an empty queue has none)."""
    late = ds.queue.sel(time=ds.time > after)
    return float((late.std("time") / (late.mean("time") + 1500.0)).max())


def test_acks_in_the_reverse_queue_destabilise_a_two_way_bottleneck(tmp_path: Path) -> None:
    """Each flow's data waits in one direction's queue and its ACKs in the other's, so its
    round trip holds their sum: where one queue rises as the other falls no round trip moves,
    and the queues lose the damping their own delay gives them (an integrator in the loop).
    With 64 B ACKs the rest state is predicted unstable, at zero delay already (a root of
    A0 + B C in the right half-plane, the two queues in antiphase), and the simulation
    cycles (queues swinging by more than half their mean; measured 0.93); with ACKs of no
    size it is predicted stable, and the simulation settles (swing below 1 %; measured 4e-9)."""
    acked = _two_way(tmp_path, "64B")
    assert rest_state(acked).network.acks is not None  # the rest state has their load
    assert not bool(stability(acked).stable.all())
    lin = linearize(acked)
    # both round trips hold q_XY / C + q_YX / C, so each queue's balance answers the two
    # queues alike (the antiphase direction leaves it alone)
    queue = {name: i for i, name in enumerate(lin.variables) if name.startswith("queue[")}
    forward, back = queue["queue[X->Y]"], queue["queue[Y->X]"]
    scaled = lin.a0 / lin.rest[None, :]  # relative deviations back to bytes
    assert scaled[forward, forward] == pytest.approx(scaled[forward, back], rel=1e-9)
    assert scaled[back, back] == pytest.approx(scaled[back, forward], rel=1e-9)
    values, vectors = np.linalg.eig(lin.a0 + lin.b @ lin.c)
    k = int(np.argmax(values.real))
    assert values[k].real > 0
    first, second = vectors[[forward, back], k]
    assert abs(first) == pytest.approx(abs(second), rel=0.1)
    assert abs(np.angle(first / second)) == pytest.approx(math.pi, abs=0.1)  # antiphase
    assert _swing(pathflow.simulate(acked), 1.0) > 0.5
    bare = _two_way(tmp_path, "0B")
    assert bool(stability(bare).stable.all())
    assert _swing(pathflow.simulate(bare), 1.0) < 0.01


def test_a_k8_fat_tree_with_acks_is_predicted_unstable_and_cycles() -> None:
    """The k = 8 fat-tree permutation of Reno on RED with ECN at 10 Gb/s (`bench_analyze.py`'s
    network) with 64 B ACKs: its rest state has their load (attrs["acks"]), it is closer to the
    simulated mean rates than the rest state without that load (median error measured 1.4 %
    against 6.6 %), its rightmost root is far in the right half-plane (growth rate measured
    2,700 /s, a third of its 4,150 rad/s; without the delays the rest is already unstable,
    on a two-way pair of links in antiphase, agg5_2 <-> core2_3, as on the two-way bottleneck
    above), and the simulation cycles (the median queue that holds data swings by
    more than a fifth of its mean; measured 0.42). The cycle is large, so its period (2.9 ms)
    is not the root's (1.5 ms), as on the two-way bottleneck (23 against 15 ms)."""
    scenario = pathflow.load_scenario(
        Path(__file__).parents[1] / "examples" / "fattree_permutation.toml").with_updates({
            "topology.k": 8, "topology.link_rate": "10Gbps", "topology.delay": "2us",
            "topology.buffer": "1000pkt",
            "aqm": {"kind": "red", "min": "30pkt", "max": "300pkt", "pmax": 0.1, "ecn": True},
            "transport.cc": "reno", "transport.reaction": "mean", "run.duration": "300ms",
            "run.sample": "20us"})
    rest = rest_state(scenario)
    assert rest.network.acks is not None
    parts = stability(scenario, rest=rest)
    worst = parts.isel(component=int(np.argmax(parts.root_real.values)))
    assert float(worst.root_real) > 0.2 * float(worst.root_imag)
    ds = pathflow.simulate(scenario)
    late = ds.sel(time=ds.time > 0.1)
    rate = late.flow_rate.mean("time").values
    bare = rest_state(scenario.with_updates({"transport.ack_size": "0B"}))
    error = {name: float(np.median(np.abs(np.bincount(
        np.asarray(state.compiled.routes.subflow_flow), state.rate) / rate - 1)))
        for name, state in (("acks", rest), ("bare", bare))}
    assert error["acks"] < 0.5 * error["bare"]
    queue = late.queue
    held = queue.mean("time") > 5e3  # bytes
    assert int(held.sum()) >= 20
    assert float((queue.std("time") / queue.mean("time"))[held].median()) > 0.2
