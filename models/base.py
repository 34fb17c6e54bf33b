"""The interface every congestion-control model implements.

A *controller* (a TCP flow, later an MPTCP subflow or a DCQCN queue pair) owns congestion state and
sends on one or more paths. Once per step the solver hands each controller the network's signals as
it sees them, one round-trip late (`Signals`), and integrates the model's vector field
(`derivative`), then applies the model's discrete rules and floors (`project`). Models are pure
functions of arrays with one entry per controller, so the solver can `jit`, `vmap` and
differentiate through them.

Units: windows in packets (of `ControllerParams.mss` bytes), time in seconds, rates in packets/s.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar, NamedTuple

import jax

Array = jax.Array
State = dict[str, Array]


class Signals(NamedTuple):
    """What a controller observes now, per controller.

    rtt: current round-trip time R(t) (s), base plus queueing on its paths.
    mark: fraction of its packets ECN-marked, as seen now, i.e. marked at t - R.
    loss: fraction of its packets dropped, as seen now (t - R).
    acked_rate: its sending rate one round trip ago, x(t - R) (packets/s): the rate at which
        acknowledgements (and with them marks and loss notices) arrive now.
    window_limited: 1 where the window limits the sending rate, 0 where the sender's own NIC
        does (its host link is saturated). Like Linux (RFC 7661 cwnd validation, TCP small
        queues), a window that does not limit the rate does not grow.
    """

    rtt: Array
    mark: Array
    loss: Array
    acked_rate: Array
    window_limited: Array


class ControllerParams(NamedTuple):
    """Per-controller model parameters (arrays, so that a batch may vary them)."""

    mss: Array  # bytes per packet
    g: Array  # DCTCP EWMA gain
    ack_ratio: Array  # segments acknowledged per window-increase event (delayed ACK b)
    init_cwnd: Array  # packets
    min_cwnd: Array  # packets
    ssthresh: Array  # packets (inf: slow start until the first congestion signal)


class CongestionModel(ABC):
    """A window-based congestion-control model (see `models.reno`, `models.dctcp`)."""

    name: ClassVar[str]

    @abstractmethod
    def initial_state(self, params: ControllerParams) -> State:
        """State at the flow's start."""

    @abstractmethod
    def derivative(self, state: State, signals: Signals, params: ControllerParams) -> State:
        """d(state)/dt, given the delayed signals."""

    @abstractmethod
    def project(self, state: State, signals: Signals, params: ControllerParams) -> State:
        """Discrete rules applied after each step: floors, slow-start exit."""

    def window(self, state: State) -> Array:
        """Congestion window (packets); the sending rate is window * mss / rtt."""
        return state["cwnd"]
