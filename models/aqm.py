"""Queues and active queue management: drop-tail, RED and the ECN step marker, as disciplines.

Model
-----
Each directed link has an egress queue q (bytes) with capacity C (bytes/s) and buffer B (bytes).
Over a step dt with arrival rate A (held constant over the step) the fluid queue evolves as the
projection of dq/dt = A_accepted - C onto [0, B]:

    served   = min(C dt, q + A_accepted dt)          (departures never exceed C: work-conserving)
    q'       = q + A_accepted dt - served
    overflow = max(q' - B, 0),  q' <- q' - overflow  (drop-tail loss: the overflow fraction)

which is exact for piecewise-constant arrivals. Marking (or early dropping) uses the probability

    p(v) = 0 for v <= min,  pmax (v - min)/(max - min) for min < v <= max,  1 for v > max

of a queue measure v: the instantaneous queue for the ECN step marker (min = max = K, DCTCP's
switch rule "mark if q > K"), and RED's moving average for RED, whose per-packet EWMA with weight w
becomes in the fluid limit (MGT 2000) dv/dt = -ln(1 - w) C / mss * (q - v), integrated exactly
over the step. An ECN-capable AQM marks with p; a non-ECN RED drops arrivals with p before they
are queued. Drop-tail is min = max = inf.

Interface
---------
A queue discipline (`QueueDiscipline`) declares its scenario parameters (`[aqm]` keys, with
units, defaults and ranges), the per-link values it needs (`Params`, one entry per link) and two
pure functions the solver calls every step: `congestion` (the marking and early-drop
probabilities of a link from its queue measure) and `average` (the measure after a step: the
queue itself, or RED's moving average). The queue itself (`queue_step`: capacity, buffer,
projection) is common to all. Host NICs and the solver's padding link get the discipline's inert
values (`inert`): they never mark or drop early.

Parameters (per link, SI)
-------------------------
capacity (bytes/s) and buffer (bytes) for every discipline; ecn_step: threshold K (bytes); red:
min, max (bytes), pmax, avg_rate (1/s, from the per-packet weight w and the link's packet rate),
ecn (1 to mark, 0 to drop early). RED defaults: pmax 0.1, w 0.002 (Floyd and Jacobson 1993);
ecn defaults to whether the congestion control reacts to ECN (DCTCP yes, Reno no). RED here is
classic (not "gentle"): p jumps to 1 above max. dcqcn: kmin, kmax (bytes), pmax, on the
instantaneous queue, and whether the ramp is extended past kmax (`DcqcnMarking`, with presets).

Scope and limitations
---------------------
FIFO, one class, per-port buffers (no shared-buffer switch). Priority flow control, which pauses
the links feeding a switch, is `models.pfc`.
Departures are split among the flows in proportion to their arrival rates (fluid FIFO).

Validation
----------
tests/test_dcqcn.py: the DCQCN marking curve, standard and extended, and the fixed point of
DCQCN flows behind it. tests/test_properties.py: 0 <= q <= B and departures <= C on random
stars (hypothesis); every run's invariant report checks work and byte conservation
(pathflow.invariants); validation case `dctcp_hardware` (validation/cases/measured.py): step
marking on the seed 003 star.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import jax.numpy as jnp
import numpy as np

from pathflow.models.base import Array
from pathflow.models.parameters import Parameter, Presets

__all__ = ["DISCIPLINES", "DcqcnMarking", "DropTail", "EcnStep", "QueueDiscipline", "QueueStep",
           "Queues", "Red",
           "queue_step"]


class Queues(NamedTuple):
    """What every egress queue has, arrays of one entry per link (SI units)."""

    capacity: Array  # bytes/s
    buffer: Array  # bytes
    xoff: Array  # bytes of ingress occupancy that pause the link (`models.pfc`); inf: never
    xon: Array  # bytes below which a paused link resumes
    pause_delay: Array  # s: a PAUSE frame's flight back to the link's transmitter (propagation)
    # a shared PFC buffer (`models.pfc`): the dynamic-threshold factor (0: xoff and xon hold)
    # and the room of the switch the link feeds (bytes); with alpha > 0, xoff - xon is the
    # resume offset below the dynamic Xoff
    pfc_alpha: Array
    pfc_room: Array


class QueueStep(NamedTuple):
    queue: Array  # bytes after the step
    departure: Array  # bytes/s over the step
    drop: Array  # bytes/s dropped (early drops plus overflow)


def queue_step(queue: Array, arrival: Array, early_drop: Array, queues: Queues,
               dt: Array) -> QueueStep:
    """Advance the queue by dt with constant arrivals (bytes/s), after early drops (fraction)."""
    accepted = arrival * (1.0 - early_drop)
    served = jnp.minimum(queues.capacity * dt, queue + accepted * dt)
    filled = queue + accepted * dt - served
    overflow = jnp.maximum(filled - queues.buffer, 0.0)
    drop = arrival * early_drop + overflow / dt
    return QueueStep(filled - overflow, served / dt, drop)


@dataclass(frozen=True)
class QueueDiscipline(ABC):
    """A queue discipline at switch ports (see the module docstring)."""

    name: ClassVar[str]
    parameters: ClassVar[tuple[Parameter, ...]] = ()
    Params: ClassVar[type[Any]]
    presets: ClassVar[Presets] = {}  # named sets of defaults (`[aqm] preset`)

    @classmethod
    def check(cls, values: dict[str, Any]) -> None:
        """Rules across parameters (ValueError naming the key); none by default."""
        return

    @abstractmethod
    def port(self, values: dict[str, Any], capacity: float, packet_bytes: float
             ) -> tuple[float, ...]:
        """The `Params` row of a switch port of `capacity` (bytes/s) from resolved values."""

    @abstractmethod
    def inert(self) -> tuple[float, ...]:
        """The `Params` row of a link that never marks or drops early."""

    @abstractmethod
    def congestion(self, measure: Array, params: Any) -> tuple[Array, Array]:
        """(marking probability, early-drop probability) of each link from its queue measure."""

    def marks(self, values: dict[str, Any]) -> bool:
        """Whether congestion below the buffer limit is signalled by ECN marks (not drops)."""
        return False

    def average(self, measure: Array, queue: Array, params: Any, dt: Array) -> Array:
        """The queue measure after a step; the instantaneous queue unless overridden."""
        return queue

    def pack(self, rows: list[tuple[float, ...]]) -> Any:
        """`Params` of numpy arrays from one row per link."""
        columns = np.array(rows, dtype=np.float64).reshape(len(rows), -1).T
        return self.Params(*columns)


class _NoParams(NamedTuple):
    pass


@dataclass(frozen=True)
class DropTail(QueueDiscipline):
    """Loss only when the buffer is full."""

    name = "droptail"
    Params = _NoParams

    def port(self, values: dict[str, Any], capacity: float, packet_bytes: float
             ) -> tuple[float, ...]:
        return ()

    def inert(self) -> tuple[float, ...]:
        return ()

    def congestion(self, measure: Array, params: _NoParams) -> tuple[Array, Array]:
        zeros = jnp.zeros_like(measure)
        return zeros, zeros


class StepParams(NamedTuple):
    threshold: Array  # bytes; inf never marks


@dataclass(frozen=True)
class EcnStep(QueueDiscipline):
    """DCTCP's switch rule: mark every packet while the instantaneous queue exceeds K."""

    name = "ecn_step"
    parameters = (Parameter("threshold", "bytes", None, "marking threshold K on the "
                            "instantaneous queue (e.g. \"20pkt\")", low=0.0),)
    Params = StepParams

    def port(self, values: dict[str, Any], capacity: float, packet_bytes: float
             ) -> tuple[float, ...]:
        return (values["threshold"],)

    def inert(self) -> tuple[float, ...]:
        return (math.inf,)

    def marks(self, values: dict[str, Any]) -> bool:
        return True

    def congestion(self, measure: Array, params: StepParams) -> tuple[Array, Array]:
        marked = (measure > params.threshold).astype(measure.dtype)
        return marked, jnp.zeros_like(measure)


class RedParams(NamedTuple):
    min: Array  # bytes
    max: Array  # bytes
    pmax: Array
    avg_rate: Array  # 1/s: the fluid limit of the per-packet EWMA
    ecn: Array  # 1 marks, 0 drops early


@dataclass(frozen=True)
class Red(QueueDiscipline):
    """Random early detection on the moving average of the queue, marking or dropping."""

    name = "red"
    parameters = (
        Parameter("min", "bytes", None, "lower threshold on the averaged queue", low=0.0),
        Parameter("max", "bytes", None, "upper threshold on the averaged queue", low=0.0),
        Parameter("pmax", "1", 0.1, "probability at max", low=0.0, high=1.0, inclusive=False),
        Parameter("weight", "1", 0.002, "per-packet weight of the moving average", low=0.0,
                  high=1.0, inclusive=False),
        Parameter("ecn", "flag", None, "mark instead of drop (default: whether the congestion "
                  "control reacts to ECN: true for dctcp, false for reno)", optional=True),
    )
    Params = RedParams

    @classmethod
    def check(cls, values: dict[str, Any]) -> None:
        if not values["min"] < values["max"]:
            raise ValueError("min: must be smaller than max")

    def port(self, values: dict[str, Any], capacity: float, packet_bytes: float
             ) -> tuple[float, ...]:
        weight = min(values["weight"], 1 - 1e-12)
        rate = -math.log1p(-weight) * capacity / packet_bytes
        return (values["min"], values["max"], values["pmax"], rate, float(values["ecn"]))

    def inert(self) -> tuple[float, ...]:
        return (math.inf, math.inf, 1.0, math.inf, 0.0)

    def marks(self, values: dict[str, Any]) -> bool:
        return bool(values["ecn"])

    def congestion(self, measure: Array, params: RedParams) -> tuple[Array, Array]:
        span = jnp.where(params.max > params.min, params.max - params.min, 1.0)
        ramp = params.pmax * jnp.clip((measure - params.min) / span, 0.0, 1.0)
        ramp = jnp.where(jnp.isfinite(params.min), ramp, 0.0)
        above_min = jnp.where(measure > params.min, ramp, 0.0)
        probability = jnp.where(measure > params.max, 1.0, above_min)
        return probability * params.ecn, probability * (1.0 - params.ecn)

    def average(self, measure: Array, queue: Array, params: RedParams, dt: Array) -> Array:
        keep = jnp.exp(-params.avg_rate * dt)  # exp(-inf) = 0: instantaneous
        return queue + (measure - queue) * keep


class DcqcnMarkingParams(NamedTuple):
    kmin: Array  # bytes
    kmax: Array  # bytes
    pmax: Array
    extended: Array  # 1: the ramp goes on past kmax (to 1); 0: p jumps to 1 above kmax


def _dcqcn2015(link_rate: float) -> dict[str, Any]:
    return {"kmin": "5KB", "kmax": "200KB", "pmax": 0.01}


def _hpcc_marking(link_rate: float) -> dict[str, Any]:
    scale = link_rate * 8 / 25e9
    return {"kmin": f"{100e3 * scale!r}B", "kmax": f"{400e3 * scale!r}B", "pmax": 0.2}


@dataclass(frozen=True)
class DcqcnMarking(QueueDiscipline):
    """DCQCN's switch rule (RED on the instantaneous queue): mark with probability 0 below
    Kmin, rising linearly to Pmax at Kmax, and 1 above; with ``ramp = "extended"`` the line goes
    on past Kmax (capped at 1), as the CoNEXT 2016 analysis writes q* = (p*/Pmax)(Kmax - Kmin)
    + Kmin for any p*. Presets: ``conext2016`` and ``cx4`` (Kmin 5 KB, Kmax 200 KB, Pmax 1 %: DCQCN
    as published, Zhu et al. SIGCOMM 2015, which the seed 001 testbed says it follows) and
    ``hpcc`` (Kmin 100 KB x C/25G, Kmax 400 KB x C/25G, Pmax 0.2, C = topology.link_rate)."""

    name = "dcqcn"
    parameters = (
        Parameter("kmin", "bytes", None, "queue where marking starts", low=0.0),
        Parameter("kmax", "bytes", None, "queue where the marking probability reaches pmax",
                  low=0.0),
        Parameter("pmax", "1", None, "marking probability at kmax", low=0.0, high=1.0,
                  inclusive=False),
        Parameter("ramp", "choice", "standard", "above kmax: standard (mark every packet) | "
                  "extended (the line goes on to 1, the CoNEXT 2016 analysis's assumption)",
                  choices=("standard", "extended")),
    )
    Params = DcqcnMarkingParams
    presets: ClassVar[Presets] = {"conext2016": _dcqcn2015, "cx4": _dcqcn2015,
                                  "hpcc": _hpcc_marking}

    @classmethod
    def check(cls, values: dict[str, Any]) -> None:
        if values["kmin"] > values["kmax"]:
            raise ValueError("kmin: must not exceed kmax")

    def port(self, values: dict[str, Any], capacity: float, packet_bytes: float
             ) -> tuple[float, ...]:
        return (values["kmin"], values["kmax"], values["pmax"],
                float(values["ramp"] == "extended"))

    def inert(self) -> tuple[float, ...]:
        return (math.inf, math.inf, 1.0, 0.0)

    def marks(self, values: dict[str, Any]) -> bool:
        return True

    def congestion(self, measure: Array, params: DcqcnMarkingParams) -> tuple[Array, Array]:
        span = jnp.where(params.kmax > params.kmin, params.kmax - params.kmin, 1.0)
        line = params.pmax * jnp.maximum(measure - params.kmin, 0.0) / span
        line = jnp.where(jnp.isfinite(params.kmin), line, 0.0)
        above = jnp.where(params.extended > 0, jnp.minimum(line, 1.0), 1.0)
        probability = jnp.where(measure > params.kmax, above,
                                jnp.where(measure > params.kmin, line, 0.0))
        return probability, jnp.zeros_like(measure)


DISCIPLINES: dict[str, QueueDiscipline] = {
    d.name: d for d in (DropTail(), EcnStep(), Red(), DcqcnMarking())}
