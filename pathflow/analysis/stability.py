"""Linear stability of a network's rest state: characteristic roots, margins, and the time to
settle (issue 12, item 2).

Model
-----
The fluid model is a delay-differential system. Its variables z are the state of every
controller that a congestion signal holds (the model's state variables that move: Reno's
window, DCQCN's current and target rates and alpha), and the queue (bytes) of every link that
holds one at rest, with RED's moving average beside it. A controller reads three signals one
loop delay late, u_i(t) = g_i(z(t - D_i)): the marked and the dropped fraction along its path,
1 - prod_l (1 - p_l(v_l)), and its own sending rate (the rate whose acknowledgements arrive);
everything else it reads now (its round trip R_i = base_i + sum_l q_l / C_l). So

    dz/dt = F(z(t), u(t)),   u_i(t) = g_i(z(t - D_i)),

with F the model's own `derivative` and `rate` (`models`), the discipline's `congestion` and
`average` (`models.aqm`) and the queue's balance dq_l/dt = (1 - d_l) sum_i R_li n_i x_i - C_l
(n_i the flows a controller stands for, d_l the early-drop probability): the functions the
solver integrates, differentiated here by JAX, so that the two cannot disagree. D_i is the
rest round trip (`run.feedback_delay = "round_trip"`) or its propagation part
("propagation"), held constant: the delay's own dependence on the queue is left out, as in
every fluid-model stability analysis (Hollot, Misra, Towsley and Gong 2001; Zhu et al. 2016).
Around the rest point z* (the root of F(z, g(z)) = 0, polished by Newton from
`analysis.equilibrium`'s rest state) the linear system is

    dz/dt = A0 z(t) + sum_c B_c C_c z(t - D_c),   A0 = dF/dz, B = dF/du, C = dg/dz,

with characteristic matrix T(s) = s I - A0 - B E(s) C, E(s) = diag(exp(-s D_c)). Its roots
(`analysis.characteristic`, as are the margins below) are found by the pseudospectral
discretisation of the system's infinitesimal generator on Chebyshev nodes over [-max D, 0]
(Breda, Maset and Vermiglio 2005; for large networks, where
that matrix would be too big, the eigenvalues of the delay-free system with every delay
replaced by its order-4 Pade approximant instead), then polished by Newton on det T(s) = 0
(step 1 / trace(T^-1 T')). The rest state is stable when every root has a negative
real part; the rightmost root s = -sigma + j omega gives the decay time 1 / sigma, the time to
settle within 10 % of a perturbation, ln(10) / sigma, and the period 2 pi / omega of the
oscillation. A rightmost root with a positive real part predicts that the rest state is left
for a limit cycle (its period near 2 pi / omega at the crossing).

Margins break the loop at the delayed signals: G(s) = C (s I - A0)^-1 B E(s), the closed loop
being det(I - G(s)) = 0. For each eigenvalue (characteristic locus) lambda(j omega) of G:

- where |lambda| = 1 (the crossover omega_c), the phase margin phi = arg lambda in (-180, 180]
  degrees: an extra delay phi / omega_c in every signal puts a root on the imaginary axis, so
  the delay margin is phi / omega_c and, where a component's signals share one delay D, the
  critical delay is D + phi / omega_c;
- where lambda is real and positive, the gain margin 1 / lambda: the factor on the loop gain
  that puts a root at j omega.

Each is the smallest over the loci. For one bottleneck (N identical flows) the margins are the
classical single-loop ones. The network is split into its connected parts (the variables that
act on each other); each part has its own roots and margins.

Scope and limitations
---------------------
What `analysis.equilibrium` covers on ramps: single-path flows of Reno and DCTCP (reaction =
"mean"), DCQCN and DCQCN+, and MPTCP's LIA, BALIA and uncoupled subflows, on RED or DCQCN
marking ramps (OLIA is refused: its rest lies where its sets switch, a sliding mode with no
linearisation; tests/test_equilibrium_mptcp.py checks the verdicts on two paths). Step marking
(DCTCP's ECN step, drop-tail's full buffer) has no derivative at its threshold (infinite gain):
its rest state is the centre of a limit cycle (`analysis.equilibrium` finds it on the ECN step),
refused here with the reason. ACKs are load and wait in the queues' balances and the round trips
as in the equilibrium (where it has them: its attrs["acks"]). On a link carrying one flow's
data and another's ACKs, and its reverse the other way round, each flow's round trip holds the
sum of the two queues: where one rises as the other falls no round trip moves, the queues
lose the damping their own delay gives them, and with Reno on RED the rest can be unstable at
zero delay (a two-way bottleneck; the k = 8 fat-tree's permutation, whose cycle is large:
its period is not the rightmost root's). Flows that their NIC holds are
constant sources (with ACKs, the room their NIC leaves them moves with the other flows' ACKs:
left out). With ACKs the verdict can miss a cycle: on the k = 4 fat-tree (DCTCP on RED,
1 Gb/s, 64 B ACKs, eight hash seeds) it says stable on five, where the simulation settles on
three and cycles on two (seeds 5 and 7; with ACKs of no size all five settle). On both the
queues that swing most are a two-way pair (a link and its reverse, each with one side's data
and the other's ACKs; see above): on seed 7 one of them is full at rest with no queue (a
neutral queue, left out here); on seed 5 both hold a queue and the rightmost root is barely
damped (-2.7 /s at 2.1 rad/s), so the simulation's cycle, reached from its start-up, may be
one that coexists with a locally stable rest. Links without a queue at rest stay empty under
small perturbations and are left out, as is the thinning of a flow by losses upstream of a
bottleneck (second order in the drop probability).
Linear: it predicts local stability, the settling of small perturbations, and the onset of
oscillation; not the amplitude of a limit cycle nor the start-up transient.

Validation
----------
tests/test_equilibrium.py: with ACKs on a k = 4 fat-tree, DCTCP predicted stable where the
simulation settles, Reno unstable where it cycles. tests/test_stability.py: Reno on RED against
the linearisation of Hollot, Misra, Towsley and Gong (2001) written out by hand (roots to
1e-6), their sufficient stability condition, and the simulation on either side of the
predicted critical gain; DCQCN with the conext2016 parameters at
85 us (Zhu et al. 2016: unstable for N = 10, stable for N = 2 and 64) and its critical delay
against the simulation; roots against margins (at the critical delay a root sits at j omega_c);
a two-way bottleneck (Reno on RED) with 64 B ACKs predicted unstable, at zero delay already
(its queues in antiphase), and the simulation cycling, with ACKs of no size stable and the
simulation settling; the k = 8 fat-tree permutation of Reno on RED at 10 Gb/s with ACKs
predicted unstable far from onset and the simulation cycling; on a k = 4 fat-tree with ACKs,
the margins from the refined loci against a fixed grid of 2,000 frequencies and every root
against T(s) formed whole (singular). tests/test_traced.py: the linearisation's program kept
on disk per network.
tests/test_equilibrium_dcqcn_plus.py: DCQCN+ verdicts against the simulation (2 and 4 flows at
40 Gb/s stable and settling; 2 flows at 10 Gb/s unstable and cycling with the predicted period
within 15 %), and the rightmost root's decay rate against that of the simulated flows' rate
difference (5 %). Flows with equal parameters and paths that start together stay identical in
the simulation, so the modes in which they move apart (the `_by_symmetry` differences) are not
excited there; they may hold the rightmost root (DCQCN+ at 40 Gb/s: -20 1/s, where the flows'
sum and the queue settle at -85 1/s).

References
----------
C. V. Hollot, V. Misra, D. Towsley, W. Gong, "On designing improved controllers for AQM routers
supporting TCP flows", INFOCOM 2001 (and "A control theoretic analysis of RED", INFOCOM 2001).
Y. Zhu, M. Ghobadi, V. Misra, J. Padhye, "ECN or delay: lessons learnt from analysis of DCQCN
and TIMELY", CoNEXT 2016.
D. Breda, S. Maset, R. Vermiglio, "Pseudospectral differencing methods for characteristic roots
of delay differential equations", SIAM J. Sci. Comput. 27(2), 2005.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import scipy.integrate
import scipy.sparse
import scipy.sparse.csgraph
import xarray as xr

from pathflow.analysis.characteristic import Linearization, characteristic_roots, loop_margins
from pathflow.analysis.equilibrium import RestState, rest_state
from pathflow.models.base import Signals
from pathflow.scenario import Scenario, ScenarioError
from pathflow.solvers import traced

__all__ = ["Linearization", "characteristic_roots", "linearize", "loop_margins", "stability"]

SIGNALS = ("mark", "loss", "acked")  # the delayed signals of each controller


def linearize(scenario: Scenario, rest: RestState | None = None) -> Linearization:
    """The linear system around the rest state of `scenario` (see the module docstring)."""
    whole = _Closed(rest or rest_state(scenario)).linearize()
    return _restrict(whole, np.arange(whole.a0.shape[0]))


def stability(scenario: Scenario, nodes: int = 32, rest: RestState | None = None
              ) -> xr.Dataset:
    """Roots and margins of each connected part of the network around its rest state.

    Per `component`: `root_real` (1/s) and `root_imag` (rad/s) of the rightmost root, `stable`,
    `decay_time` (1 / -Re s, s), `settling_time` (to 10 % of a small perturbation, s; NaN when
    unstable), `period` (2 pi / Im s, s; inf without oscillation), `phase_margin` (degrees),
    `crossover` (rad/s), `delay_margin` (s), `loop_delay` and `critical_delay` (s; NaN where the
    part's signals have different delays), `gain_margin`; coordinates `links` (the queues of the
    part) and `flows` (how many flows it holds); `neutral`, the dimension of the line (or
    plane) of rest states through this one, where the queued links' flow sets are linearly
    dependent (its roots at 0 are left out of the verdict). attrs: the rest state's `residual`
    (the largest |F(z*, g(z*))| relative to its scale)."""
    closed = _Closed(rest or rest_state(scenario))
    whole = closed.linearize()
    classes = closed.classes(whole)
    reduced, differences = _by_symmetry(whole, classes, len(closed.keys))
    rows, links, flows = [], [], []
    for part in _components(reduced):
        lin = _restrict(reduced, part)
        members = [cls for k, cls in enumerate(classes) if k in _classes_in(reduced, part)]
        apart = [differences[k] for k in _classes_in(reduced, part) if k in differences]
        # the roots (one large eigenproblem, then Newton: mostly one core) beside the margins
        # (whose eigenproblems keep every core busy but for their serial matching): 0.1 to
        # 0.2 s of the k = 8 fat-tree's 1.7
        subsystems = (lin, *apart)
        with ThreadPoolExecutor(1) as pool:
            found = pool.map(functools.partial(characteristic_roots, nodes=nodes), subsystems)
            margins = min(map(loop_margins, subsystems), key=lambda m: m.delay)
            roots = np.concatenate(list(found))
        # roots at 0 that a line of rest states brings (det(A0 + B C) = 0) are neutral, not
        # unstable: a perturbation along the line stays
        size = max(float(np.abs(lin.a0).max()), 1e-300)
        neutral = _neutral(lin)
        if neutral:
            roots = roots[np.abs(roots) > 1e-8 * size]
        root = complex(roots[np.argmax(roots.real)]) if roots.size else complex(-math.inf, 0)
        uniform = lin.delay.size > 0 and np.ptp(lin.delay) <= 1e-12 * lin.delay.max()
        loop = float(lin.delay[0]) if uniform else math.nan
        decay = -1.0 / root.real if root.real < 0 else math.nan
        rows.append({
            "root_real": root.real, "root_imag": root.imag, "stable": bool(root.real < 0),
            "decay_time": decay, "settling_time": decay * math.log(10.0),
            "period": 2 * math.pi / root.imag if root.imag > 0 else math.inf,
            "phase_margin": margins.phase, "crossover": margins.crossover,
            "delay_margin": margins.delay, "loop_delay": loop,
            "critical_delay": loop + margins.delay if uniform else math.nan,
            "gain_margin": margins.gain, "neutral": neutral})
        links.append(", ".join(name[len("queue["):-1] for name in lin.variables
                               if name.startswith("queue[")))
        flows.append(sum(float(closed.count[closed.moving[i]]) for cls in members for i in cls))
    units = {"root_real": "1/s", "root_imag": "rad/s", "stable": "", "decay_time": "s",
             "settling_time": "s", "period": "s", "phase_margin": "degrees",
             "crossover": "rad/s", "delay_margin": "s", "loop_delay": "s",
             "critical_delay": "s", "gain_margin": "1", "neutral": "1"}
    return xr.Dataset(
        {name: ("component", np.array([row[name] for row in rows]), {"units": unit})
         for name, unit in units.items()},
        coords={"component": np.arange(len(rows)), "links": ("component", links),
                "flows": ("component", np.array(flows, dtype=float))},
        attrs={"residual": closed.residual})


def _neutral(lin: Linearization) -> int:
    """The dimension of the null space of T(0) = -(A0 + B C): the directions along which
    the rest state is not isolated."""
    whole = lin.a0 + lin.b @ lin.c
    values = np.linalg.svd(whole, compute_uv=False)
    return int(np.sum(values <= 1e-10 * max(float(values.max()), 1e-300)))


def _by_symmetry(lin: Linearization, classes: list[np.ndarray], keys: int
                 ) -> tuple[Linearization, dict[int, Linearization]]:
    """The system on the subspace where the controllers of each class move alike (one
    representative per class: variables "key[k]" and channels "signal[k]" for class k), and per
    class of two or more the system of the differences between two of its members (the modes
    the queues do not see). Both subspaces are invariant when the classes are true symmetries,
    checked here; otherwise every controller is a class of its own."""
    m = sum(cls.size for cls in classes)
    n, channels = lin.a0.shape[0], lin.c.shape[0]
    tail = np.arange(keys * m, n)

    def spread(count: int, rows: int, extra: np.ndarray) -> np.ndarray:
        """Columns: per block and class the indicator of the class's members, then `extra`."""
        basis = np.zeros((rows, count * len(classes) + extra.size))
        for block in range(count):
            for k, cls in enumerate(classes):
                basis[block * m + cls, block * len(classes) + k] = 1.0
        basis[extra, count * len(classes) + np.arange(extra.size)] = 1.0
        return basis

    p = spread(keys, n, tail)
    q = spread(len(SIGNALS), channels, np.zeros(0, int))
    average_p, average_q = np.linalg.pinv(p), np.linalg.pinv(q)
    a0, b, c = average_p @ lin.a0 @ p, average_p @ lin.b @ q, average_q @ lin.c @ p
    loop = lin.b @ lin.c
    invariant = (np.allclose(lin.a0 @ p, p @ a0, atol=1e-9 * np.abs(lin.a0).max())
                 and np.allclose(loop @ p, p @ (b @ c), atol=1e-9 * max(np.abs(loop).max(),
                                                                        1e-300)))
    if not invariant and len(classes) < m:
        return _by_symmetry(lin, [np.array([i]) for i in range(m)], keys)
    names = [name.split("[")[0] for name in lin.variables]
    variables = [f"{names[block * m]}[{k}]" for block in range(keys)
                 for k in range(len(classes))] + [lin.variables[i] for i in tail]
    reduced = Linearization(a0, b, c, average_q @ lin.delay,
                            variables, [f"{name}[{k}]" for name in SIGNALS
                                        for k in range(len(classes))], average_p @ lin.rest)
    differences = {}
    for k, cls in enumerate(classes):
        if cls.size > 1:
            one = np.array([block * m + cls[0] for block in range(keys)])
            two = np.array([block * m + cls[1] for block in range(keys)])
            differences[k] = _restrict(Linearization(
                lin.a0[np.ix_(one, one)] - lin.a0[np.ix_(one, two)], lin.b[one],
                lin.c[:, one] - lin.c[:, two], lin.delay, [lin.variables[i] for i in one],
                lin.channels, lin.rest[one]), np.arange(keys))
    return reduced, differences


def _components(lin: Linearization) -> list[np.ndarray]:
    """The variables of each connected part (variables acting on each other) that holds a
    queue (a part without one is a controller whose signals are constant: no loop)."""
    coupling = (np.abs(lin.a0) + np.abs(lin.b) @ np.abs(lin.c)) > 0
    graph = scipy.sparse.csr_matrix(coupling | coupling.T)
    count, label = scipy.sparse.csgraph.connected_components(graph, directed=False)
    parts = [np.flatnonzero(label == k) for k in range(count)]
    return [part for part in parts if any(lin.variables[i].startswith("queue[") for i in part)]


def _classes_in(lin: Linearization, part: np.ndarray) -> set[int]:
    """The classes whose representative's variables lie in `part`."""
    return {int(lin.variables[i].split("[")[1][:-1]) for i in part
            if not lin.variables[i].startswith(("queue[", "average["))}


class _Closed:
    """The closed-loop field F(z, u) and the signals g(z) of a rest state, in JAX."""

    def __init__(self, rest: RestState) -> None:
        compiled = rest.compiled
        self.model, self.discipline = compiled.model, compiled.physics.discipline
        problem = compiled.problem
        if self.model.name == "olia":
            raise ScenarioError("transport.cc: OLIA's rest state lies where its sets of best and "
                                "largest subflows switch (a sliding mode): it has no "
                                "linearisation")
        if self.discipline.name not in ("red", "dcqcn"):
            raise ScenarioError(f"aqm.kind: stability needs a marking ramp (red, dcqcn), not "
                                f"{self.discipline.name!r}")
        network = rest.network
        self.names = [link.name for link in compiled.network.links]
        self.routing = jnp.asarray(network.routing)
        # the links' arrivals: data, and ACKs where they have a size; the round trip waits in
        # the queues of both
        self.carried = jnp.asarray(network.routing if network.acks is None
                                   else network.routing + network.acks)
        self.waits = jnp.asarray(network.waits)
        self.on_path = jnp.asarray(network.routing > 0, float)
        self.capacity = jnp.asarray(network.capacity)
        self.count = jnp.asarray(network.count)
        self.packet = jnp.asarray(problem.packet, float)
        self.params = jax.tree.map(jnp.asarray, problem.params)
        self.aqm = jax.tree.map(lambda a: jnp.asarray(a)[:-1], problem.aqm)
        self.flow = jnp.asarray(problem.subflow_flow)
        last = np.zeros(self.count.size, int)  # each controller's last link: its receiver
        for path, hops in enumerate(np.asarray(problem.path_hops)):
            real = hops[hops < self.capacity.size]
            last[np.asarray(problem.path_subflow)[path]] = real[-1] if real.size else 0
        self.receiver = jnp.asarray(np.unique(last, return_inverse=True)[1].reshape(-1))
        assert network.base_rtt is not None
        self.base = jnp.asarray(network.base_rtt)
        self.rest_queue = np.asarray(rest.queue, float)
        self.rest_rate = jnp.asarray(rest.rate)
        self.feedback = compiled.physics.feedback
        self.residual = 0.0
        self.averaged = self.discipline.name == "red"

        # which links and controllers move: the queues that hold a queue at rest, and the
        # controllers that a signal holds (the others are constant sources at their rest rate)
        full = network.load(np.asarray(rest.rate)) >= network.capacity * (1 - 1e-9)
        self.queued = np.flatnonzero((self.rest_queue > 0) & full)
        path_signal = np.asarray(rest.probability) @ network.routing
        self.moving = np.flatnonzero(path_signal > 0)
        self.state0 = self._controller_rest(rest)  # also sets `keys`
        self.z0 = self._polish()

    # -- the system --------------------------------------------------------------------------

    def _state(self, z: jax.Array) -> tuple[dict[str, jax.Array], jax.Array, jax.Array]:
        state, offset = dict(self.state0), 0
        for key in self.keys:
            width = self.moving.size
            state[key] = state[key].at[self.moving].set(z[offset:offset + width])
            offset += width
        queue = jnp.asarray(self.rest_queue).at[self.queued].set(
            z[offset:offset + self.queued.size])
        offset += self.queued.size
        measure = queue
        if self.averaged:
            measure = queue.at[self.queued].set(z[offset:offset + self.queued.size])
        return state, queue, measure

    def _rtt(self, queue: jax.Array) -> jax.Array:
        return self.base + self.waits.T @ (queue / self.capacity)

    def _rate(self, state: dict[str, jax.Array], rtt: jax.Array) -> jax.Array:
        """Bytes/s per controller: the model's rate where a signal holds it, else the rest
        rate (held by its NIC)."""
        moving = jnp.zeros(self.count.shape, bool).at[self.moving].set(True)
        wanted = self.model.rate(state, rtt, self.params) * self.packet
        return jnp.where(moving, wanted, self.rest_rate)

    def _path_signals(self, measure: jax.Array) -> jax.Array:
        """(controllers, 2): the marked and the dropped fraction along each path,
        1 - prod_l (1 - p_l), from the links' queue measures."""
        mark, drop = self.discipline.congestion(measure, self.aqm)
        kept = jnp.log1p(-jnp.clip(jnp.stack([mark, drop], 1), 0.0, 1 - 1e-15))
        return -jnp.expm1(self.on_path.T @ kept)

    def signals(self, z: jax.Array) -> jax.Array:
        """g(z): the path's marked and dropped fractions and the sending rate (packets/s) of
        each moving controller, stacked (3 m,)."""
        state, queue, measure = self._state(z)
        path = self._path_signals(measure)[self.moving]
        rate = self.model.rate(state, self._rtt(queue), self.params)[self.moving]
        return jnp.concatenate([path[:, 0], path[:, 1], rate])

    def field(self, z: jax.Array, u: jax.Array) -> jax.Array:
        """F(z, u): dz/dt with the delayed signals u."""
        state, queue, measure = self._state(z)
        rtt = self._rtt(queue)
        m = self.moving.size
        rest_u = self._rest_signals
        mark = rest_u[0].at[self.moving].set(u[:m])
        loss = rest_u[1].at[self.moving].set(u[m:2 * m])
        acked = rest_u[2].at[self.moving].set(u[2 * m:])
        signals = Signals(rtt, mark, loss, acked, jnp.ones_like(rtt), self.flow,
                          self.receiver, self.count)
        slope = self.model.derivative(state, signals, self.params)
        parts = [slope[key][self.moving] for key in self.keys]
        _, drop = self.discipline.congestion(measure, self.aqm)
        arrival = self.carried @ (self.count * self._rate(state, rtt))
        parts.append(((1.0 - drop) * arrival - self.capacity)[self.queued])
        if self.averaged:
            def averaged(dt: jax.Array) -> jax.Array:
                return self.discipline.average(measure, queue, self.aqm, dt)
            _, rate = jax.jvp(averaged, (jnp.zeros(()),), (jnp.ones(()),))
            parts.append(rate[self.queued])
        return jnp.concatenate(parts)

    @functools.cached_property
    def _program(self) -> Callable[[jax.Array], tuple[jax.Array, ...]]:
        """One program for the rest point's Newton and the linearisation (its compilation is
        most of their time: 0.7 s of 2.4 on the k = 8 fat-tree), its trace kept on disk
        (`solvers.traced`) under a digest of everything it closes over (this object's data
        and this module's source; the models' source is in the key already): tracing it
        took 0.25 s of `pathflow analyze` on the k = 8 fat-tree."""
        def derivatives(z: jax.Array) -> tuple[jax.Array, ...]:
            u = self.signals(z)
            return (self.field(z, u), u, self._rtt(self._state(z)[1]),
                    *jax.jacfwd(self.field, argnums=(0, 1))(z, u), jax.jacfwd(self.signals)(z))

        closure = traced.fingerprint((Path(__file__).read_bytes(), vars(self)))
        return traced.cached("stability.derivatives", closure, derivatives, options=_FEW_RUNS)

    def _derivatives(self, z: np.ndarray) -> tuple[np.ndarray, ...]:
        """(F(z, g(z)), g(z), the round trips, dF/dz, dF/du, dg/dz) at z."""
        return tuple(np.asarray(a) for a in self._program(jnp.asarray(z)))

    def linearize(self) -> Linearization:
        z = self.z0
        _, u, rtt, a0, b, c = self._derivatives(z)
        loop = rtt if self.feedback == "round_trip" else np.asarray(self.base)
        # relative deviations (dz / z*, du / u*): the same roots, matrices near unit scale
        scale = np.where(z != 0, np.abs(z), 1.0)
        unit = np.where(u != 0, np.abs(u), 1.0)
        a0 = a0 * scale[None, :] / scale[:, None]
        b = b * unit[None, :] / scale[:, None]
        c = c * scale[None, :] / unit[:, None]
        return Linearization(a0, b, c, np.tile(loop[self.moving], len(SIGNALS)),
                             self._variables(),
                             [f"{name}[{i}]" for name in SIGNALS for i in self.moving],
                             np.asarray(z))

    def classes(self, lin: Linearization) -> list[np.ndarray]:
        """Moving controllers (positions in `moving`) that the linear system cannot tell apart:
        equal parameters, rest state, flow count, loop delay and queued links."""
        m = self.moving.size
        columns = [np.asarray(leaf, float)[self.moving] for leaf in jax.tree.leaves(self.params)]
        columns += [np.asarray(self.state0[key], float)[self.moving] for key in self.keys]
        columns += [np.asarray(self.count, float)[self.moving], lin.delay[:m]]
        for crossing in (self.routing, self.carried):  # data, and data with ACKs
            columns += list(np.asarray(crossing)[np.ix_(self.queued, self.moving)])
        table = np.nan_to_num(np.column_stack(columns), nan=-1.0, posinf=1e300, neginf=-1e300)
        scale = np.max(np.abs(table), axis=0)
        table = np.round(table / np.where(scale > 0, scale, 1.0), 10)
        _, label = np.unique(table, axis=0, return_inverse=True)
        label = label.reshape(-1)
        return [np.flatnonzero(label == k) for k in range(label.max() + 1)] if m else []

    def _variables(self) -> list[str]:
        names = [f"{key}[{i}]" for key in self.keys for i in self.moving]
        names += [f"queue[{self.names[link]}]" for link in self.queued]
        if self.averaged:
            names += [f"average[{self.names[link]}]" for link in self.queued]
        return names

    # -- the parts of the network -------------------------------------------------------------

    # -- the rest point ------------------------------------------------------------------------

    def _controller_rest(self, rest: RestState) -> dict[str, jax.Array]:
        """Each controller's full state at rest under its rest signals: the model's initial
        state after its discrete rules (slow start over), then its moving variables
        integrated to rest with the signals held (a controller alone under constant signals
        settles; the network's loop is what may not)."""
        rtt = jnp.asarray(rest.rtt)

        def slope(values: dict[str, jax.Array], signals: Signals) -> dict[str, jax.Array]:
            return self.model.derivative(values, signals, self.params)

        # one program, not an eager dispatch (and a compilation) per operation
        @_jit_once
        def held(queue: jax.Array) -> tuple[Signals, dict[str, jax.Array], Any, Any]:
            path = self._path_signals(queue)
            signals = Signals(rtt, path[:, 0], path[:, 1], self.rest_rate / self.packet,
                              jnp.ones_like(rtt), self.flow, self.receiver, self.count)
            state = self.model.project(self.model.initial_state(self.params), signals,
                                       self.params)
            state = {key: jnp.asarray(value, float) for key, value in state.items()}
            return (signals, state, slope(state, signals),
                    jax.jacfwd(slope)(state, signals))

        signals, state, now, jac = held(jnp.asarray(self.rest_queue))
        rate = signals.acked_rate
        self._rest_signals = (signals.mark, signals.loss, rate)
        # the state variables whose derivative depends on anything, or is not zero (the others
        # are bookkeeping that the mean-field form leaves constant). Not zero: DCQCN+'s stage
        # count starts at 0, where its floor hides every dependence, yet it grows
        self.keys = keys = [
            key for key in state
            if np.any(np.asarray(now[key])[self.moving] != 0)
            or any(np.any(np.asarray(block)[self.moving] != 0)
                   for block in jax.tree.leaves(jac[key]))]
        if not keys or not self.moving.size:
            return state

        moving, width = self.moving, self.moving.size

        def unpack(y: jax.Array) -> dict[str, jax.Array]:
            out = dict(state)
            for k, key in enumerate(keys):
                out[key] = out[key].at[moving].set(y[k * width:(k + 1) * width])
            return out

        def moved(y: jax.Array) -> jax.Array:
            current = unpack(y)
            own = signals._replace(acked_rate=self.model.rate(current, rtt, self.params))
            d = slope(current, own)
            return jnp.concatenate([d[key][moving] for key in keys])

        newton = _jit_once(lambda y: (moved(y), jax.jacfwd(moved)(y)))
        start = np.concatenate([np.asarray(state[key])[moving] for key in keys])
        found = _newton_rest(newton, start, keys, np.asarray(rest.window)[moving])
        if found is not None:
            resting, sends = _jit_once(
                lambda y: (unpack(y), self.model.rate(unpack(y), rtt, self.params)))(found)
            if np.allclose(np.asarray(sends)[moving], np.asarray(rate)[moving], rtol=1e-9,
                           atol=0.0):
                return resting  # the equilibrium's own rest, the common case
        horizon = 1e4 * float(np.max(np.asarray(rtt)[moving]))
        solved = scipy.integrate.solve_ivp(
            lambda _, y: np.asarray(newton(y)[0]), (0.0, horizon), start, method="LSODA",
            jac=lambda _, y: np.asarray(newton(y)[1]), rtol=1e-10, atol=1e-12)
        return unpack(solved.y[:, -1])

    def _polish(self) -> np.ndarray:
        """Newton on F(z, g(z)) = 0 from the equilibrium's rest state."""
        parts = [np.asarray(self.state0[key])[self.moving] for key in self.keys]
        parts.append(self.rest_queue[self.queued])
        if self.averaged:
            parts.append(self.rest_queue[self.queued])
        z = np.concatenate(parts) if parts else np.zeros(0)
        if z.size == 0:
            return z

        def linear(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            """F(y, g(y)) and its Jacobian, dF/dz + dF/du dg/dz."""
            value, _, _, a0, b, c = self._derivatives(y)
            return value, a0 + b @ c

        scale = np.maximum(np.abs(z), 1e-300)
        for _ in range(30):
            value, jacobian = linear(z)
            # least squares: a network whose queued links' flow sets are linearly dependent
            # has a line of rest states (queue shifted round a cycle of links leaves every
            # path's signal alone), and a singular Jacobian along it
            step = np.linalg.lstsq(jacobian, -value, rcond=None)[0]
            z = z + step
            if np.max(np.abs(step) / scale) < 1e-13:
                break
        value, jacobian = linear(z)
        flux = np.abs(jacobian) @ scale
        self.residual = float(np.max(np.abs(value) / np.maximum(flux, 1e-300)))
        if self.residual > 1e-6:
            raise ScenarioError("the rest state could not be made exact for the linearisation "
                                f"(relative residual {self.residual:.1e})")
        return z


# for programs run a few times: LLVM's optimisations off, which halves their compilation (the
# k = 8 fat-tree's field and Jacobians: 0.84 s -> 0.48 s) and leaves their values within
# rounding (1e-16)
_FEW_RUNS = {"xla_backend_optimization_level": 0}


def _jit_once(function: Callable) -> Callable:
    """`jax.jit` for a program run a few times (`_FEW_RUNS`)."""
    return jax.jit(function, compiler_options=_FEW_RUNS)


def _newton_rest(newton: Callable[[jax.Array], tuple[jax.Array, jax.Array]],
                 start: np.ndarray, keys: list[str], window: np.ndarray) -> np.ndarray | None:
    """Newton on the controllers' moving variables under held signals (`newton`: their slope
    and its Jacobian), the windows started at the equilibrium's (where it gives them): their
    rest in a few steps, or None where Newton does not settle (the caller then integrates)."""
    y = start.copy()
    if "cwnd" in keys and np.all(np.isfinite(window)):
        k = keys.index("cwnd")
        y[k * window.size:(k + 1) * window.size] = window
    for _ in range(30):
        slope, jacobian = newton(y)
        step = np.linalg.lstsq(np.asarray(jacobian), -np.asarray(slope), rcond=None)[0]
        y = y + step
        if not np.all(np.isfinite(y)):
            return None
        if np.max(np.abs(step) / np.maximum(np.abs(y), 1e-300)) < 1e-13:
            return y
    return None


def _restrict(lin: Linearization, part: np.ndarray) -> Linearization:
    """The linear system of one part (its variables and the signals that act within it)."""
    b, c = lin.b[part], lin.c[:, part]
    used = (np.abs(b).sum(axis=0) > 0) & (np.abs(c).sum(axis=1) > 0)
    return Linearization(lin.a0[np.ix_(part, part)], b[:, used], c[used], lin.delay[used],
                         [lin.variables[i] for i in part],
                         [ch for ch, k in zip(lin.channels, used, strict=True) if k],
                         lin.rest[part])
