"""Queues and active queue management: drop-tail, RED and the ECN step marker.

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

Parameters (per link, SI)
-------------------------
capacity, buffer, mark_min, mark_max (bytes), mark_pmax, avg_rate (1/s; inf for the instantaneous
queue), ecn (1 to mark, 0 to drop early). RED defaults (scenario level): pmax 0.1, w 0.002
(Floyd and Jacobson 1993). RED here is classic (not "gentle"): p jumps to 1 above max.

Scope and limitations
---------------------
FIFO, one class, per-port buffers (no shared-buffer switch), no PFC (the DCQCN issue adds it).
Departures are split among the flows in proportion to their arrival rates (fluid FIFO).

Validation
----------
tests/test_properties.py: 0 <= q <= B and departures <= C on random stars (hypothesis); every
run's invariant report checks work and byte conservation (pathflow.invariants); validation case
`dctcp_hardware` (validation/cases/fluid.py): step marking on the seed 003 star.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from pathflow.models.base import Array


class QueueParams(NamedTuple):
    """Per-link queue parameters (SI units), arrays of one entry per link."""

    capacity: Array
    buffer: Array
    mark_min: Array
    mark_max: Array
    mark_pmax: Array
    avg_rate: Array
    ecn: Array


class QueueStep(NamedTuple):
    queue: Array  # bytes after the step
    departure: Array  # bytes/s over the step
    drop: Array  # bytes/s dropped (early drops plus overflow)


def marking_probability(measure: Array, params: QueueParams) -> Array:
    """RED's linear ramp; a step at K when mark_min == mark_max == K; 0 when both are inf."""
    span = jnp.where(params.mark_max > params.mark_min, params.mark_max - params.mark_min, 1.0)
    ramp = params.mark_pmax * jnp.clip((measure - params.mark_min) / span, 0.0, 1.0)
    ramp = jnp.where(jnp.isfinite(params.mark_min), ramp, 0.0)
    above_min = jnp.where(measure > params.mark_min, ramp, 0.0)
    return jnp.where(measure > params.mark_max, 1.0, above_min)


def average(measure: Array, queue: Array, params: QueueParams, dt: Array) -> Array:
    """RED's moving average after a step; the queue itself where avg_rate is inf."""
    keep = jnp.exp(-params.avg_rate * dt)  # exp(-inf) = 0: instantaneous
    return queue + (measure - queue) * keep


def queue_step(queue: Array, arrival: Array, early_drop: Array, params: QueueParams,
               dt: Array) -> QueueStep:
    """Advance the queue by dt with constant arrivals (bytes/s), after early drops (fraction)."""
    accepted = arrival * (1.0 - early_drop)
    served = jnp.minimum(params.capacity * dt, queue + accepted * dt)
    filled = queue + accepted * dt - served
    overflow = jnp.maximum(filled - params.buffer, 0.0)
    drop = arrival * early_drop + overflow / dt
    return QueueStep(filled - overflow, served / dt, drop)
