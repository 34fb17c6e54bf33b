"""A test-only congestion control, added the way docs/architecture.md says ("Adding a congestion
control"): one model module (this file), one registry entry (`tests/test_registry.py`), one check
against independent truth (its closed-form equilibrium, also in `tests/test_registry.py`). It has no
packet-level sender and no ns-3 type, which the registry allows.

Model
-----
Generalised AIMD in the mean-field form of Misra, Gong and Towsley (2000): the window W (packets)
grows by `increase` packets per round trip and is multiplied by `decrease` on each congestion
signal, at most one per round trip:

    dW/dt = a / R - W (1 - beta) min(x(t-R) p(t-R), 1/R),    x = W / R

Equilibrium (below the one-per-round-trip cap): a / R = W^2 (1 - beta) p / R, so
p = a / ((1 - beta) W^2); Reno is a = 1, beta = 1/2 (p = 2 / W^2).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, NamedTuple

import jax.numpy as jnp

from pathflow.models.base import Array, CongestionModel, Signals, State
from pathflow.models.parameters import Parameter


class AimdParams(NamedTuple):
    increase: Array  # packets per round trip
    decrease: Array  # multiplicative factor on a congestion signal
    init_cwnd: Array  # packets


@dataclass(frozen=True)
class Aimd(CongestionModel):
    name = "aimd_test"
    sends = "window"
    parameters = (
        Parameter("increase", "1", 1.0, "additive increase per round trip (packets)", low=0.0,
                  inclusive=False),
        Parameter("decrease", "1", 0.5, "multiplicative decrease", low=0.0, high=1.0,
                  inclusive=False),
        Parameter("init_cwnd", "packets", "4pkt", "initial window", low=1.0),
    )
    Params = AimdParams
    state_units: ClassVar[dict[str, str]] = {"cwnd": "packets"}

    def initial_state(self, params: AimdParams) -> State:
        return {"cwnd": params.init_cwnd}

    def rate(self, state: State, rtt: Array, params: AimdParams) -> Array:
        return state["cwnd"] / rtt

    def derivative(self, state: State, signals: Signals, params: AimdParams) -> State:
        congestion = 1.0 - (1.0 - signals.mark) * (1.0 - signals.loss)
        cuts = jnp.minimum(signals.acked_rate * congestion, 1.0 / signals.rtt)
        growth = signals.window_limited * params.increase / signals.rtt
        return {"cwnd": growth - state["cwnd"] * (1.0 - params.decrease) * cuts}

    def project(self, state: State, signals: Signals, params: AimdParams) -> State:
        return {"cwnd": jnp.maximum(state["cwnd"], 1.0)}
