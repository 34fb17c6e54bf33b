"""DCQCN+static: the approximation of DCQCN+ that seed 001's testbed could run on ConnectX-4 NICs.

Model
-----
DCQCN (`models.dcqcn`, its fluid model and its packet-level sender unchanged) with three NIC
parameters set from the incast's size instead of adapted at run time, as the thesis's testbed
did (seed 001 section 6.3, validation/data/dcqcn_testbed/README.md):

- rate-reduce period (ConnectX rate_reduce_monitor_period, DCQCN's tau): 4 us -> 40 us;
- rate-increase timer (rpg_time_reset, T): 300 us -> 3.1 x flownum us, in whole microseconds;
- additive increase (rpg_ai_rate, R_AI): 5 Mb/s -> 256 / flownum Mb/s, in whole Mb/s ("rounded
  to integers", as the NIC takes them), at least 1 Mb/s.

flownum is the number of flows of the incast: by default the flows its receiver takes (the
thesis's tables label their rows "8*10" ... "8*90", 80 to 720 flows). Read that way the timer is
DCQCN+'s lambda tau_c with lambda = 3.1 and tau_c = flownum x 1 us (one CNP per microsecond
shared by flownum flows), and the flows' additive steps add up to 256 Mb/s per timer period.

Parameters
----------
The other values are the cx4 preset of DCQCN (the testbed's NIC, `models.dcqcn`):
min_time_between_cnps 0, rpg_byte_reset B = 32767 B, F = 5, g = 1/256, tau' = 55 us,
min_rate 1 Mb/s, rpg_hai_rate R_HAI = 50 Mb/s (the testbed left it as it was).
`timer_per_flow` (3.1 us), `ai_total` (256 Mb/s), `ai_unit` (1 Mb/s: the NIC's rate step) and
`flownum` may be set to explore the approximation.

Scope and limitations
---------------------
As DCQCN's model (mean field, losses ignored: run it with `[aqm] pfc = true`). What flownum
meant on the testbed is not stated; the total incast size is the reading that matches DCQCN+'s
timer. A rounded additive step of 0 Mb/s (flownum above 512) is taken as 1 Mb/s.

Validation
----------
tests/test_dcqcn_static.py: the derived timer and step in both engines against the thesis's
rule for the testbed's incast sizes. Validation case `dcqcn_plus_fluid_packet`: fluid against
packet level on 80:1 at 10 Gb/s (throughput within 3 %, mean queue within 20 %).

References
----------
Seed 001 (DCQCN+ thesis), sections 4.3 and 6.3; Zhu et al., SIGCOMM 2015 (DCQCN).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import jax.numpy as jnp
import numpy as np

from pathflow.models.base import Array, Context, Signals, State
from pathflow.models.dcqcn import Dcqcn, DcqcnParams, dcqcn_parameters
from pathflow.models.parameters import Parameter, Presets

__all__ = ["DcqcnStatic", "DcqcnStaticParams", "static_timer_and_step"]

_MICROSECOND = 1e-6  # rpg_time_reset's unit


class DcqcnStaticParams(NamedTuple):
    line_rate: Array  # packets/s
    min_rate: Array  # packets/s
    cnp_interval: Array  # s
    min_time_between_cnps: Array  # s
    cnp_capacity: Array  # CNPs per microsecond
    alpha_interval: Array  # s
    g: Array
    stages: Array
    byte_counter: Array  # packets
    flownum: Array  # flows
    timer_per_flow: Array  # s
    ai_total: Array  # packets/s
    ai_unit: Array  # packets/s
    rhai: Array  # packets/s


def static_timer_and_step(flownum: Array, timer_per_flow: Array, ai_total: Array,
                          ai_unit: Array) -> tuple[Array, Array]:
    """The testbed's timer T (s) and additive step R_AI (in ai_total's unit) for `flownum`
    flows: timer_per_flow x flownum in whole microseconds, ai_total / flownum in whole
    ai_units, each at least one unit."""
    timer = jnp.maximum(jnp.round(timer_per_flow * flownum / _MICROSECOND), 1.0) * _MICROSECOND
    step = jnp.maximum(jnp.round(ai_total / flownum / ai_unit), 1.0) * ai_unit
    return timer, step


@dataclass(frozen=True)
class DcqcnStatic(Dcqcn):
    """DCQCN with the testbed's flownum-scaled timer, step and rate-reduce period."""

    name = "dcqcn+static"
    parameters = (
        *dcqcn_parameters("line_rate", "min_rate"),
        Parameter("cnp_interval", "s", "40us", "rate-reduce period: at most one cut per period "
                  "(the testbed's 4 us -> 40 us)", low=0.0, inclusive=False),
        *dcqcn_parameters("min_time_between_cnps", "cnp_capacity", "alpha_interval", "g",
                          "stages", "byte_counter", min_time_between_cnps="0us",
                          alpha_interval="55us", g=1 / 256, stages=5.0, byte_counter="32767B"),
        Parameter("flownum", "1", None, "the incast's flows the timer and step scale with "
                  "(default: the flows its receiver takes)", low=1.0, optional=True),
        Parameter("timer_per_flow", "s", "3.1us", "rate-increase timer per flow of flownum "
                  "(rounded to whole microseconds)", low=0.0, inclusive=False),
        Parameter("ai_total", "packets/s", "256Mbps", "additive step times flownum (the step "
                  "is rounded to whole ai_units)", low=0.0, inclusive=False),
        Parameter("ai_unit", "packets/s", "1Mbps", "the NIC's rate step (rpg_ai_rate is set in "
                  "whole Mb/s)", low=0.0, inclusive=False),
        *dcqcn_parameters("rhai", "cuts", rhai="50Mbps"),
    )
    Params: ClassVar[type] = DcqcnStaticParams
    presets: ClassVar[Presets] = {}

    @classmethod
    def unset(cls, name: str, context: Context) -> np.ndarray:
        return context.receiver_flows if name == "flownum" else context.nic_rate

    @staticmethod
    def as_dcqcn(params: DcqcnStaticParams) -> DcqcnParams:
        """The DCQCN parameters these stand for."""
        timer, step = static_timer_and_step(params.flownum, params.timer_per_flow,
                                            params.ai_total, params.ai_unit)
        return DcqcnParams(params.line_rate, params.min_rate, params.cnp_interval,
                           params.min_time_between_cnps, params.cnp_capacity,
                           params.alpha_interval, params.g, params.stages, params.byte_counter,
                           timer, step, params.rhai)

    def fastest_rate(self, params: Any) -> float:
        return super().fastest_rate(self.as_dcqcn(params))

    def derivative(self, state: State, signals: Signals, params: DcqcnStaticParams) -> State:
        return super().derivative(state, signals, self.as_dcqcn(params))

    def event_rate(self, state: State, signals: Signals, params: DcqcnStaticParams) -> Array:
        return super().event_rate(state, signals, self.as_dcqcn(params))
