"""The compiled problem: every array one simulation step needs, as a JAX pytree.

Indices follow DESIGN §3: links 0..L-1 plus one padding link L (infinite capacity, never marks, so
padded hops are inert); paths 0..P-1, each belonging to one controller and crossing up to H links
(`path_hops`, padded with L); controllers 0..F-1 (a TCP flow is one controller). Shapes, not values,
decide compilation, so scenarios of equal shapes share one compiled program and can be stacked
along a leading batch axis for `jax.vmap`.

`Physics` is the code a run executes, the static half of a compiled program: the congestion-control
model and the queue discipline. Their parameter values live in the `Problem` (`params`, `aqm`), in
the pytrees each declares, so a batch may vary them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from pathflow.models.aqm import QueueDiscipline, Queues
from pathflow.models.base import Array, CongestionModel


@dataclass(frozen=True)
class Physics:
    """The model and the queue discipline of a run (hashable: a static argument of `jit`)."""

    model: CongestionModel
    discipline: QueueDiscipline


class Problem(NamedTuple):
    queues: Queues  # (L+1,) capacity and buffer
    aqm: Any  # (L+1,) each: the queue discipline's Params
    path_hops: Array  # (P, H) int32 link indices, padded with L
    path_controller: Array  # (P,) int32
    path_weight: Array  # (P,) share of the controller's rate; 0 for padding paths
    path_base_rtt: Array  # (P,) s, propagation and serialisation, data out and ACK back
    nic: Array  # (F,) int32: the controller's host egress link (L if it has none)
    start: Array  # (F,) s
    size: Array  # (F,) bytes, inf for a long-lived flow
    active: Array  # (F,) 1 for a real controller, 0 for padding
    packet: Array  # (F,) bytes per packet (transport.mss)
    params: Any  # (F,) each: the congestion-control model's Params
    dt: Array  # () s

    @property
    def n_links(self) -> int:
        return int(self.queues.capacity.shape[-1]) - 1

    @property
    def n_controllers(self) -> int:
        return int(self.start.shape[-1])


@dataclass(frozen=True)
class Grid:
    """The static time grid: `records` samples, each `steps_per_record` steps of dt, and a history
    ring buffer of `history` steps (longer than the largest possible round trip)."""

    steps_per_record: int
    records: int
    history: int

    @property
    def steps(self) -> int:
        return self.steps_per_record * self.records


def pad_problem(problem: Problem, links: int, paths: int, hops: int, controllers: int) -> Problem:
    """Pad a problem to larger sizes with inert links, paths and controllers (for batching)."""
    n_links = problem.n_links
    if (links, paths, hops, controllers) == (n_links, *problem.path_hops.shape,
                                              problem.n_controllers):
        return problem

    def grow(array: Array, size: int, fill: float) -> Array:
        array = np.asarray(array)
        extra = size - array.shape[0]
        pad = np.full((extra, *array.shape[1:]), fill, dtype=array.dtype)
        return np.concatenate([array, pad])

    def grow_links(array: Array, fill: float) -> Array:
        array = np.asarray(array)  # keep the padding link last
        body, last = array[:-1], array[-1:]
        return np.concatenate([grow(body, links, fill), last])

    def links_of(table: Any) -> Any:
        return type(table)(*(grow_links(a, float(np.asarray(a)[-1])) for a in table))

    queues, aqm = links_of(problem.queues), links_of(problem.aqm)
    old_hops = np.asarray(problem.path_hops)
    hop_array = np.where(old_hops == n_links, links, old_hops)
    hop_array = np.concatenate(
        [hop_array, np.full((hop_array.shape[0], hops - hop_array.shape[1]), links)], axis=1)
    hop_array = grow(hop_array, paths, links)
    params = type(problem.params)(*(grow(a, controllers, float(np.asarray(a)[0]))
                                    for a in problem.params))
    return Problem(
        queues=queues,
        aqm=aqm,
        path_hops=jnp.asarray(hop_array, dtype=jnp.int32),
        path_controller=jnp.asarray(grow(problem.path_controller, paths, 0), dtype=jnp.int32),
        path_weight=grow(problem.path_weight, paths, 0.0),
        path_base_rtt=grow(problem.path_base_rtt, paths, 1.0),
        nic=jnp.asarray(grow(np.where(np.asarray(problem.nic) == n_links, links,
                                      problem.nic), controllers, links), dtype=jnp.int32),
        start=grow(problem.start, controllers, 0.0),
        size=grow(problem.size, controllers, 0.0),
        active=grow(problem.active, controllers, 0.0),
        packet=grow(problem.packet, controllers, float(np.asarray(problem.packet)[0])),
        params=params,
        dt=problem.dt,
    )


def stack_problems(problems: list[Problem]) -> Problem:
    """Stack problems of equal shapes along a new leading batch axis."""
    return jax.tree.map(lambda *arrays: jnp.stack([jnp.asarray(a) for a in arrays]), *problems)


def cast_problem(problem: Problem, dtype: jnp.dtype) -> Problem:
    """The problem with every floating-point array in `dtype` (indices stay integers)."""

    def cast(array: Array) -> Array:
        array = jnp.asarray(array)
        return array.astype(dtype) if jnp.issubdtype(array.dtype, jnp.floating) else array

    return jax.tree.map(cast, problem)
