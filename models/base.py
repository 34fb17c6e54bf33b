"""The interface every congestion-control model implements.

A *controller* (a TCP flow, later an MPTCP subflow or a DCQCN queue pair) owns congestion state and
sends on one or more paths. Once per step the solver asks each controller for its sending rate
(`rate`), hands it the network's signals as it sees them, one round trip late (`Signals`), and
integrates the model's vector field (`derivative`), then applies the model's discrete rules and
floors (`project`). Models are pure functions of arrays with one entry per controller, so the
solver can `jit`, `vmap` and differentiate through them.

A model declares its own parameters (`parameters`: name, unit, default, range, meaning) and the
pytree that carries their values (`Params`, a NamedTuple whose fields are the declared names of
the non-structural parameters, each an array of one entry per controller, so that a batch may
vary them). Structural parameters (choices such as Reno's reaction form) select code and are
fields of the model object itself. The registry (`models.registry`) names each model once; the
scenario vocabulary and the help text come from these declarations.

Units: packets (of the controller's `transport.mss` bytes), seconds, packets/s. A window-based
model's rate is its window over the round trip; a rate-based model's is its own state.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar, Literal, NamedTuple

import jax
import numpy as np

from pathflow.models.parameters import Parameter, Presets

__all__ = ["Array", "CongestionModel", "Context", "Signals", "State", "flow_max", "flow_sum",
           "receiver_sum"]

Array = jax.Array
State = dict[str, Array]


class Signals(NamedTuple):
    """What a controller observes now, per controller.

    rtt: current round-trip time R(t) (s), base plus queueing on its paths.
    mark: fraction of its packets ECN-marked, as seen now, i.e. marked at t - R.
    loss: fraction of its packets dropped, as seen now (t - R).
    acked_rate: its sending rate one round trip ago, x(t - R) (packets/s): the rate at which
        acknowledgements (and with them marks and loss notices) arrive now; for a model with
        events of its own (`has_events`), x(t - R) stretched by the round trip's growth while
        the packets were in flight, the rate at which they arrive (`solvers.dde`, step 5).
    window_limited: 1 where the controller's own rate limits what it sends, 0 where the
        sender's NIC does (its host link is saturated). Like Linux (RFC 7661 cwnd validation,
        TCP small queues), a window that does not limit the rate does not grow.
    flow: the index of each subflow's flow (connection), for models coupled across the
        subflows of a connection (MPTCP): see `flow_sum` and `flow_max`.
    receiver: an index per receiving NIC (equal for the subflows that arrive by one link), for
        models coupled at the receiver (DCQCN's NIC-wide CNP capacity): see `receiver_sum`.
    count: how many identical subflows each controller stands for (the solver runs exchangeable
        flows once: `pathflow.compile`); `receiver_sum` counts each that many times.
    """

    rtt: Array
    mark: Array
    loss: Array
    acked_rate: Array
    window_limited: Array
    flow: Array
    receiver: Array | None = None
    count: Array | None = None


class Context(NamedTuple):
    """What compile knows of each subflow for a parameter left unset (`CongestionModel.unset`)."""

    nic_rate: np.ndarray  # packets/s: the rate of its sending NIC
    receiver_flows: np.ndarray  # flows its destination host receives


def flow_sum(values: Array, signals: Signals) -> Array:
    """For each subflow, the sum of `values` over the subflows of its flow (e.g. the total
    window of an MPTCP connection)."""
    return jax.ops.segment_sum(values, signals.flow, values.shape[0])[signals.flow]


def receiver_sum(values: Array, signals: Signals) -> Array:
    """For each subflow, the sum of `values` over the subflows that its receiver's NIC takes."""
    receiver = signals.receiver
    counted = values if signals.count is None else values * signals.count
    return jax.ops.segment_sum(counted, receiver, values.shape[0])[receiver]


def flow_max(values: Array, signals: Signals) -> Array:
    """For each subflow, the largest of `values` over the subflows of its flow."""
    return jax.ops.segment_max(values, signals.flow, values.shape[0])[signals.flow]


class CongestionModel(ABC):
    """A congestion-control model: its parameters, state, sending rate and dynamics.

    Subclasses are frozen dataclasses (hashable: the model is a static argument of the compiled
    solver) whose fields are the model's structural parameters."""

    name: ClassVar[str]
    sends: ClassVar[Literal["window", "rate"]]
    parameters: ClassVar[tuple[Parameter, ...]]
    Params: ClassVar[type[Any]]
    presets: ClassVar[Presets] = {}  # named sets of defaults (`[transport] preset`)
    state_units: ClassVar[dict[str, str]] = {}  # units of the state variables in results

    @classmethod
    def values(cls) -> tuple[Parameter, ...]:
        """The declared parameters that are values (the `Params` fields), in field order."""
        return tuple(p for p in cls.parameters if not p.structural)

    @classmethod
    def structure(cls) -> tuple[Parameter, ...]:
        """The declared structural parameters (constructor fields)."""
        return tuple(p for p in cls.parameters if p.structural)

    @classmethod
    def build_params(cls, values: dict[str, float], controllers: int) -> Any:
        """`Params` with every controller given the same resolved values (numpy arrays); an
        optional value left unset is NaN (compile fills a rate-based sender's line rate)."""
        return cls.Params(*(np.full(controllers, np.nan if values[p.name] is None
                                    else float(values[p.name])) for p in cls.values()))

    @classmethod
    def unset(cls, name: str, context: Context) -> np.ndarray:
        """Per subflow, the value of the optional parameter `name` left unset: by default its
        NIC's rate (a rate-based sender's line rate)."""
        return context.nic_rate

    @classmethod
    def check(cls, values: dict[str, float | str]) -> None:
        """Rules across parameters (ValueError naming the key); none by default."""
        return

    def fastest_rate(self, params: Any) -> float:
        """The largest rate (1/s) at which the model's own timers and gains move its state,
        beyond the round trip that paces every model: the solver keeps its step well below its
        inverse. 0: none (window-based models react once per round trip)."""
        return 0.0

    def state_owners(self, params: Any) -> dict[str, Array]:
        """Per state variable, the controllers it belongs to (True) where not all do (a
        `models.mixture.Mixture` of models with different state); results leave the others
        out (NaN). Empty: every controller has every variable."""
        return {}

    def min_window(self, params: Any) -> Array | None:
        """A window-based model's floor of the window (packets), per controller: the window a
        flow restarts from after a retransmission timeout (`models.timeouts`). None: the model
        has no window (a rate-based sender), and the fluid model has no timeouts for it."""
        return None

    @property
    def has_events(self) -> bool:
        """Whether the model draws events of its own (`event_rate`, `on_event`): jumps at random
        moments, each controller its own, which the solver realises by the time change (as the
        retransmission timeouts of `models.timeouts`)."""
        return False

    def event_rate(self, state: State, signals: Signals, params: Any) -> Array:
        """Events per second of each controller now (where `has_events`)."""
        raise NotImplementedError

    def on_event(self, state: State, params: Any) -> State:
        """The state after one event (where `has_events`)."""
        raise NotImplementedError

    @abstractmethod
    def initial_state(self, params: Any) -> State:
        """State at the controller's start."""

    @abstractmethod
    def rate(self, state: State, rtt: Array, params: Any) -> Array:
        """The sending rate the controller wants (packets/s), before its NIC caps it."""

    @abstractmethod
    def derivative(self, state: State, signals: Signals, params: Any) -> State:
        """d(state)/dt, given the delayed signals."""

    @abstractmethod
    def project(self, state: State, signals: Signals, params: Any) -> State:
        """Discrete rules applied after each step: floors, slow-start exit, reactions."""
