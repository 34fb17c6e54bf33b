"""The windows of multipath TCP subflows at rest, as unknowns of the network's rest state
(issue 12, item 1: LIA, OLIA, BALIA and uncoupled subflows; `analysis.equilibrium` solves them
with the links).

Model
-----
A connection's subflows are coupled (models/mptcp.py): the growth of subflow r, A_r / (b R_r)
per second in congestion avoidance, reads the windows and round trips of its siblings; its
mean-field cut, w_r (1 - f_r) min(x_r p_r, 1 / R_r) per kind of signal, its own path's marked
and dropped fractions p_r (BALIA's factor f_r also reads the siblings). No closed form gives
the windows from the signals, so they join the links' positions as unknowns of one system. A
subflow rests where its window balances growth against cuts or sits at the floor `min_cwnd`
with cuts at least as large:

    w_r - floor >= 0,   -dw_r/dt >= 0,   (w_r - floor) dw_r/dt = 0

dw_r/dt being the model's own `derivative` (slow start over, the acknowledged rate x_r = w_r /
R_r its own), written as a Fischer-Burmeister equation. A model's extra state that moves (OLIA's
packets since the last loss) rests where its own derivative is zero: it is settled there at
every evaluation, under the windows and signals of the moment, by a Newton step on its own
drift (exact for OLIA's count, whose drift, acknowledged rate minus loss rate times the count,
is affine in it), rather than solved for beside them: on a path that signals almost nothing
its rest count is some 1e12 packets, where the least squares, started at 1, saw no slope
(OLIA on the k = 4 fat-tree stalled with residual 1 there). A sending NIC lets its
subflows' windows grow (the solver's `window_limited`) only while it has room: theta_n in
[0, 1], 1 while the wanted rates fit the NIC, 0 while they exceed it, in between only at its
capacity (the sliding mode between the two), the box theta = mid(0, 1, theta + room). A
subflow whose path signals nothing is given a signal of 1e-12: its window grows until its NIC
holds its rate, as in the solver.

The least squares is continued, each stage started from the last: first uncoupled subflows
(a Reno each, whose rest it finds from windows of 10 packets on every hash seed tried), then
the windows' drift blended half and half from theirs and the model's, then the model's own.
Started at the model straight away it stalled on most networks: on the k = 4 fat-tree below
(two subflows per connection, a 1 Gb/s fabric behind 10 Gb/s NICs, RED from 30 to 300 or 20 to
400 packets, hash seeds 1 to 5), rests below a residual of 1e-4 for LIA on 3 of 10, BALIA 2 of
10; continued, 9 and 8 of 10 (OLIA 2, was 1: for the reason below), in 3 to 45 s
each rather than 5 to 13. Where NICs hold the subflows too (the same fat-tree at 1 Gb/s
throughout) with 64 B ACKs it stalls (LIA, OLIA, BALIA: residuals 4e-3 to 1.6e-2), without
them LIA and BALIA rest (1e-10, 2e-7): as for single paths the rest without ACKs is then kept and
said (`analysis.equilibrium`); OLIA's stalls either way (6.6e-3, 40 s; before 1e-2, 116 s).

OLIA's sets of largest and best subflows (M and B) jump, and its rest often lies where they
switch: on two paths of equal quality the simulation chatters on the surface where it moves
window between them (a Filippov sliding mode). The rest state is found as the limit of the
model with the sets' edges smoothed (`Olia.sets_width`), the width falling from 10 % to 1e-6,
each stage started from the last (the blend above at 10 %).

Scope and limitations
---------------------
The mean-field form (`reaction = "mean"`, the MPTCP models' default); the per-window form rests
in a sawtooth. A rest state need not be unique: BALIA's decrease capped at alpha = 1.5 gives two
subflows on paths with equal signals and round trips (twins) a second rest at a 1.653 : 1
split ((1 + a)(4 + a) = 15) beside the equal one, and which one the least squares finds
depends on its way there (on the k = 4 fat-tree of the tests it found the uneven one).
The simulation starts every subflow at the same window, and twins that share their signals
stay equal, so `analysis.equilibrium` then evens each connection's twins and solves again
from there (the model's own stage alone), keeping the even rest where it is one (there the
subflows' rates moved by 33 % to the simulation's; connection rates and queues agree within
0.05 % either way). OLIA on the k = 4 fat-tree with two subflows per connection is found to a
residual of 1.5e-5 (the sets' widths below 1e-4 make no further progress), and the simulation
approaches it slowly: its connections' rates 1.6 % away after 4 to 8 s, 0.7 % after 8 to 12
s, 0.2 % after 12 to 16 s, its subflows' split 61 % and 26 % away (sliding modes move window
between equally good paths slowly). Where a NIC is full, its windows' split depends on the
history in the solver (windows that do not limit the rate neither grow nor, unsignalled,
shrink): a family of rest states of which this finds one. Families show on other hash seeds
too: on seeds 1 to 3 of the fat-tree above the simulation's connections settle within 1.3 to
4 % of the rest found, but subflows' splits and some queues (up to 20 packets) elsewhere, a
rest the simulation's history chooses (before the continuation as after it).

Validated by tests/test_equilibrium_mptcp.py: the closed form of LIA on one RED link
(`analysis.closed_forms.lia_red`, 1e-6), the fluid simulation's steady state on a two-path
network (LIA, OLIA, BALIA, uncoupled: connection and subflow rates and queues within 2 %,
measured 1e-4 and below) and on a k = 4 fat-tree with two subflows per connection (LIA, BALIA
and uncoupled: connections, subflows and queues; OLIA: connections and queues, for the reason
above).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pathflow.compile import Compiled
from pathflow.models.base import Signals
from pathflow.models.mptcp import Uncoupled
from pathflow.models.window import WindowControl
from pathflow.scenario import ScenarioError

__all__ = ["MULTIPATH", "CoupledWindows", "fischer_burmeister"]

MULTIPATH = ("lia", "olia", "balia", "uncoupled")
_BOOKKEEPING = tuple(WindowControl.state_units)  # the window and its discrete rules' state
_UNSIGNALLED = 1e-12  # the signal given a subflow whose path signals nothing
_UNCOUPLED = Uncoupled(reaction="mean")
# the blends of the uncoupled subflows' drift (0) and the model's (1) solved before the model's
# own: with 0, 1/4, 1/2 and 3/4 no more rests were found (the k = 4 fat-tree of the module
# docstring, LIA and BALIA), in more time
_BLENDS = (0.0, 0.5)


def fischer_burmeister(a: Any, b: Any) -> Any:
    """phi(a, b) = a + b - sqrt(a^2 + b^2), zero exactly where a >= 0, b >= 0 and a b = 0 (NumPy
    or JAX arrays; differentiable at (0, 0) too)."""
    return a + b - (a * a + b * b + 1e-300) ** 0.5


class CoupledWindows:
    """The subflows' windows (and a model's extra state, and how much their NICs let windows
    grow) as unknowns of the network's rest state, with their residuals (module docstring).
    The unknowns y are, per solver controller, the log window, then per sending NIC the
    fraction theta of the time its subflows' windows limit what they send (a model's extra
    states that move are settled, not solved for: module docstring); `stages` counts the drifts
    to solve with in turn (module docstring: from uncoupled subflows' to the model's, and OLIA's
    sets sharpened step by step)."""

    def __init__(self, compiled: Compiled) -> None:
        model, problem = compiled.model, compiled.problem
        if getattr(model, "reaction", None) != "mean":
            raise ScenarioError(f"transport.reaction: the rest state of {model.name} is derived "
                                "for the mean-field form ('mean'); the per-window form rests in "
                                "a sawtooth, not a point")
        params = jax.tree.map(jnp.asarray, problem.params)
        flow, count = jnp.asarray(problem.subflow_flow), jnp.asarray(problem.count, float)
        size = self.size = flow.size
        self.floor = np.asarray(params.min_cwnd, float) + np.zeros(size)
        packet = jnp.asarray(problem.packet, float)
        capacity = np.asarray(problem.queues.capacity, float)
        nic = np.asarray(problem.nic)
        limited = nic < capacity.size - 1  # the last link is the solver's unlimited padding
        self.nics, at_nic = np.unique(nic[limited], return_inverse=True)
        self.nic_of = np.full(size, -1)
        self.nic_of[limited] = at_nic.reshape(-1)
        nics, nic_of = self.nics.size, jnp.asarray(self.nic_of)
        state = {key: jnp.asarray(value, float) + jnp.zeros(size)
                 for key, value in model.initial_state(params).items()}
        state["slow_start"] = jnp.zeros(size)
        extra = [key for key in state if key not in _BOOKKEEPING]

        def signals_at(y: jax.Array, mark: jax.Array, loss: jax.Array, rtt: jax.Array
                       ) -> tuple[dict[str, jax.Array], Signals]:
            current = {**state, "cwnd": jnp.exp(y[:size])}
            theta = jnp.append(y[size:], 1.0)[nic_of]  # -1: unlimited
            return current, Signals(rtt, mark, loss, current["cwnd"] / rtt, theta, flow, None,
                                    count)

        def settled(model: WindowControl, current: dict[str, jax.Array], signals: Signals,
                    keys: list[str]) -> dict[str, jax.Array]:
            """`current` with the extra states `keys` where their own drift vanishes: a
            Newton step along each, whose drift reads its own value alone (exact where it is
            affine in it, as OLIA's count is)."""
            def drifts(values: list[jax.Array]) -> list[jax.Array]:
                slope = model.derivative({**current, **dict(zip(keys, values, strict=True))},
                                         signals, params)
                return [slope[key] for key in keys]

            values = [current[key] for key in keys]
            now, along = jax.jvp(drifts, (values,), ([jnp.ones(size) for _ in keys],))
            return {**current, **{key: value - f / df for key, value, f, df
                                  in zip(keys, values, now, along, strict=True)}}

        def residual(stage: tuple[WindowControl, float], y: jax.Array, mark: jax.Array,
                     loss: jax.Array, rtt: jax.Array, nic_rate: jax.Array) -> jax.Array:
            model, blend = stage
            current, signals = signals_at(y, mark, loss, rtt)
            current = settled(model, current, signals, self.keys)
            window = current["cwnd"]
            change = model.derivative(current, signals, params)["cwnd"]
            if blend < 1:
                change = blend * change + (1 - blend) * _UNCOUPLED.derivative(
                    current, signals, params)["cwnd"]
            change = change * rtt / window
            wanted = jnp.where(nic_of >= 0, count * window / rtt * packet, 0.0)
            demand = jax.ops.segment_sum(wanted, jnp.maximum(nic_of, 0), nics)
            theta = y[size:]
            # the NIC's box: windows grow (theta = 1) while it has room, not at all (0) while
            # it is over-asked, and in between only at its capacity (the solver's sliding
            # mode between the two)
            room = 1.0 - demand / nic_rate
            return jnp.concatenate([fischer_burmeister(window / self.floor - 1.0, -change),
                                    theta - jnp.clip(theta + room, 0.0, 1.0)])

        # the extra states that move (OLIA's count since the last loss, not the interval
        # before it, which the mean-field form never updates)
        def extra_drift(mark: jax.Array) -> list[jax.Array]:
            probe = jnp.concatenate([jnp.log(jnp.asarray(self.floor)) + 1.0, jnp.ones(nics)])
            current, signals = signals_at(probe, mark, mark, mark + 1e-3)
            slope = model.derivative({**current, **{key: jnp.ones(size) for key in extra}},
                                     signals, params)
            return [slope[key] for key in extra]

        moves = jax.jacfwd(extra_drift)(jnp.full(size, 1e-3))
        self.keys = [key for key, block in zip(extra, moves, strict=True)
                     if np.any(np.asarray(block) != 0)]
        stages = _stages(model)
        self._residuals = [jax.jit(lambda *a, m=m: residual(m, *a))
                           for m in stages]
        self._batched = [jax.jit(jax.vmap(lambda *a, m=m: residual(m, *a)))
                         for m in stages]

    @property
    def stages(self) -> int:
        return len(self._residuals)

    def owner(self) -> np.ndarray:
        """(unknowns, controllers): the subflows each unknown belongs to (a NIC's theta: the
        subflows it sends)."""
        nic = self.nic_of[None, :] == np.arange(self.nics.size)[:, None]
        return np.concatenate([np.eye(self.size, dtype=bool), nic])

    def start(self, window: float) -> np.ndarray:
        """y with every window at `window` packets (or its floor), every NIC letting them grow."""
        return np.concatenate([np.log(np.maximum(self.floor, window)), np.ones(self.nics.size)])

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """(lower, upper) on y: log windows from a packet below the floor to 1e12 packets,
        theta in [0, 1]."""
        low = np.concatenate([np.log(np.maximum(self.floor - 1.0, 1e-3)),
                              np.zeros(self.nics.size)])
        high = np.concatenate([np.full(self.size, np.log(1e12)), np.ones(self.nics.size)])
        return low, high

    def window(self, y: np.ndarray) -> np.ndarray:
        return np.exp(y[..., :self.size])

    def residual(self, stage: int, y: np.ndarray, mark: np.ndarray, loss: np.ndarray,
                 rtt: np.ndarray, room: np.ndarray) -> np.ndarray:
        """The windows' complementarity (the extra states settled) and the NICs' boxes at
        the path signals, round trips and room per link (bytes/s a NIC has for data: its
        capacity less its host's ACKs) given; a subflow that nothing signals is given a
        signal of 1e-12 (its window grows until its NIC holds its rate either way)."""
        mark = np.where(mark + loss > 0, mark, _UNSIGNALLED)
        function = (self._residuals if y.ndim == 1 else self._batched)[stage]
        return np.asarray(function(jnp.asarray(y), jnp.asarray(mark), jnp.asarray(loss),
                                   jnp.asarray(rtt), jnp.asarray(room[..., self.nics])))


def _regularised(model: WindowControl) -> list[WindowControl]:
    """The model, or for a model with sets whose edges may be smoothed (OLIA's `sets_width`)
    the model at widths falling from 10 % to 1e-6 (module docstring)."""
    if "sets_width" not in {field.name for field in dataclasses.fields(model)}:
        return [model]
    return [dataclasses.replace(model, sets_width=10.0**-k) for k in range(1, 7)]


def _stages(model: WindowControl) -> list[tuple[WindowControl, float]]:
    """(model, blend) in the order solved: the windows' drift blended from uncoupled subflows'
    (a Reno each) to the model's, then the model's own (OLIA: its sets sharpened)."""
    models = _regularised(model)
    if model.name == "uncoupled":
        return [(m, 1.0) for m in models]
    return [(models[0], blend) for blend in _BLENDS] + [(m, 1.0) for m in models]
