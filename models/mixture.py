"""Several congestion controls in one network: the model of a scenario whose traffic groups
(`[[traffic.groups]]`) run different controls, such as MPTCP users beside single-path TCP users,
or DCTCP beside Reno.

Model
-----
Subflow s runs part `which[s]` of the mixture, a model of its own (`models.reno`, `models.dctcp`,
`models.mptcp`, ...) whose equations, parameters and limits its module documents; nothing about
them changes. Each step the mixture evaluates every part on every subflow and keeps, for each
subflow, its own part's rate, derivative and projection. The state is the union of the parts'
state variables (the window-based parts share `cwnd`, `slow_start`, `cwr` and `credit`; DCTCP adds
`alpha`); a variable a subflow's part lacks stays as it is and is not reported for that subflow
(`state_owners`). Coupled parts (MPTCP) couple the subflows of one connection, which belong to one
group and hence to one part.

Parameters
----------
Each part's own, one value per subflow: `Params` holds `which` (the part of each subflow, as a
number) and every part's value fields prefixed `p0_`, `p1_`, ... A subflow of another part holds
the first of its groups' values (valid, never used), so a batch may still vary any of them.

Scope and limitations
---------------------
A step costs the sum of the parts' steps (every part runs on every subflow), so `compile` builds a
mixture only where groups differ in their control or its structural choices (Reno's reaction
form); groups that share a control share its model with per-subflow values. The parts must all
send by window (or all by rate).

Validation
----------
tests/test_groups.py: a mixture of Reno and DCTCP groups on links they do not share reproduces
each group run alone; an MPTCP group (LIA, OLIA, BALIA, uncoupled) beside a Reno group on one
bottleneck against the packet-level reference. Not validated: DCTCP beside Reno behind one ECN
threshold splits the link 64/36 here and 78/22 at packet level on a 4-flow 100 Mb/s star (the
fluid DCTCP's alpha, as for synchronised flows, is about twice the packet level's).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax.numpy as jnp
import numpy as np

from pathflow.models.base import Array, CongestionModel, Signals, State

__all__ = ["Mixture"]


@functools.cache
def _params_type(fields: tuple[str, ...]) -> type:
    """A NamedTuple of these fields: flat, as the solver's padding and batching expect."""
    return NamedTuple("MixtureParams", [(name, Any) for name in fields])


@dataclass(frozen=True)
class Mixture(CongestionModel):
    """Subflows running different congestion-control models (see the module docstring)."""

    parts: tuple[CongestionModel, ...]
    name = "mixture"
    parameters = ()

    def __post_init__(self) -> None:
        sends = {part.sends for part in self.parts}
        if len(sends) > 1:
            raise ValueError(f"a mixture of window- and rate-based controls ({self.parts})")

    @property  # type: ignore[override]
    def sends(self) -> str:
        return self.parts[0].sends

    @property  # type: ignore[override]
    def state_units(self) -> dict[str, str]:
        return {key: unit for part in self.parts for key, unit in part.state_units.items()}

    def pack(self, which: np.ndarray, params: Sequence[Any]) -> Any:
        """The mixture's `Params` from each subflow's part and every part's `Params` (each with
        one value per subflow)."""
        fields = ("which", *(f"p{i}_{name}" for i, values in enumerate(params)
                             for name in values._fields))
        return _params_type(fields)(np.asarray(which, dtype=float),
                                    *(array for values in params for array in values))

    def _unpack(self, params: Any) -> tuple[Array, list[Any]]:
        which, *rest = params
        parts = []
        for part in self.parts:
            count = len(part.Params._fields)
            parts.append(part.Params(*rest[:count]))
            rest = rest[count:]
        return which, parts

    @staticmethod
    def _select(which: Array, results: list[State], fallback: State) -> State:
        """Per subflow, its own part's value of each variable; `fallback` where its part has
        none."""
        selected = {}
        for key in dict.fromkeys(key for result in results for key in result):
            value = fallback[key]
            for i, result in enumerate(results):
                if key in result:
                    value = jnp.where(which == i, result[key], value)
            selected[key] = value
        return selected

    def fastest_rate(self, params: Any) -> float:
        _, parts = self._unpack(params)
        return max(part.fastest_rate(values) for part, values in zip(self.parts, parts,
                                                                     strict=True))

    def state_owners(self, params: Any) -> dict[str, Array]:
        which, parts = self._unpack(params)
        owners: dict[str, Array] = {}
        for i, (part, values) in enumerate(zip(self.parts, parts, strict=True)):
            for key in part.initial_state(values):
                owners[key] = owners.get(key, which < 0) | (which == i)
        return owners

    def initial_state(self, params: Any) -> State:
        which, parts = self._unpack(params)
        results = [part.initial_state(values) for part, values in zip(self.parts, parts,
                                                                       strict=True)]
        zeros = jnp.zeros_like(which)
        return self._select(which, results, {key: zeros for result in results for key in result})

    def rate(self, state: State, rtt: Array, params: Any) -> Array:
        which, parts = self._unpack(params)
        rate = jnp.zeros_like(rtt)
        for i, (part, values) in enumerate(zip(self.parts, parts, strict=True)):
            rate = jnp.where(which == i, part.rate(state, rtt, values), rate)
        return rate

    def min_window(self, params: Any) -> Array | None:
        which, parts = self._unpack(params)
        floors = [part.min_window(values) for part, values in zip(self.parts, parts, strict=True)]
        if any(floor is None for floor in floors):
            return None
        floor = jnp.zeros_like(which)
        for i, value in enumerate(floors):
            floor = jnp.where(which == i, value, floor)
        return floor

    @property
    def has_events(self) -> bool:
        return any(part.has_events for part in self.parts)

    def event_rate(self, state: State, signals: Signals, params: Any) -> Array:
        which, parts = self._unpack(params)
        rate = jnp.zeros_like(which)
        for i, (part, values) in enumerate(zip(self.parts, parts, strict=True)):
            if part.has_events:
                rate = jnp.where(which == i, part.event_rate(state, signals, values), rate)
        return rate

    def on_event(self, state: State, params: Any) -> State:
        which, parts = self._unpack(params)
        results = [part.on_event(state, values) if part.has_events else state
                   for part, values in zip(self.parts, parts, strict=True)]
        return self._select(which, results, state)

    def derivative(self, state: State, signals: Signals, params: Any) -> State:
        which, parts = self._unpack(params)
        results = [part.derivative(state, signals, values)
                   for part, values in zip(self.parts, parts, strict=True)]
        return self._select(which, results, {key: jnp.zeros_like(v) for key, v in state.items()})

    def project(self, state: State, signals: Signals, params: Any) -> State:
        which, parts = self._unpack(params)
        results = [part.project(state, signals, values)
                   for part, values in zip(self.parts, parts, strict=True)]
        return self._select(which, results, state)
