"""The compiled problem: every array one simulation step needs, as a JAX pytree.

Indices follow DESIGN §3: links 0..L-1 plus one padding link L (infinite capacity, never marks, so
padded hops are inert); paths 0..P-1, each belonging to one subflow and crossing up to H links
(`path_hops`, padded with L); subflows 0..F-1, each belonging to one flow (`subflow_flow`; a flow
is a connection: a TCP flow has one subflow, an MPTCP connection several). A subflow owns
congestion state (it is a controller: the model's arrays have one entry per subflow); flows are
what finishes and what coupled models sum over. Shapes, not values, decide compilation, so
scenarios of equal shapes share one compiled program, and a batch of problems runs as one
(`merge_problems`).

`Physics` is the code a run executes, the static half of a compiled program: the congestion-control
model and the queue discipline. Their parameter values live in the `Problem` (`params`, `aqm`), in
the pytrees each declares, so a batch may vary them.

The solver does not walk the (P, H) path arrays: it walks the *hop layout* derived from them
(`hop_layout`, DESIGN §4 "Paths, measured"). For each hop index h, controller c has K_h slots
holding the distinct links its paths cross at their h-th hop, with the share of c's rate sent
that way (`hop_share`, the split weights of those paths over c's total weight) and the share
whose path ends there (`hop_exit`). Under single-path routing K_h = 1 and every slot is one
path's hop; under spraying on a k = 8 fat-tree the 16 paths x 6 hops of a flow collapse to the
1 + 4 + 16 + 16 + 4 + 1 distinct links they cross. Hop levels beyond a path's end carry its share
on the padding link L (inert: infinite capacity, no marks), as the padded path hops do.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

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
    # what delays the feedback: the round trip at the current queues, or its propagation part
    # alone (the loop delay held fixed, as fluid-model stability analyses assume)
    feedback: Literal["round_trip", "propagation"] = "round_trip"
    # lossless switches (`models.pfc`): how many steps of pause decisions the solver keeps for
    # their flight to the paused links (0: no PFC)
    pfc: int = 0
    # retransmission timeouts of window-based controllers (`models.timeouts`)
    timeouts: bool = False
    # the most rounds of any flow (`Problem.rounds`; 1: no barrier-synchronised traffic)
    rounds: int = 1


class Problem(NamedTuple):
    queues: Queues  # (L+1,) capacity, buffer and PFC thresholds
    aqm: Any  # (L+1,) each: the queue discipline's Params
    path_hops: Array  # (P, H) int32 link indices, padded with L
    path_subflow: Array  # (P,) int32
    path_weight: Array  # (P,) share of the subflow's rate; 0 for padding paths
    path_base_rtt: Array  # (P,) s, propagation and serialisation, data out and ACK back
    subflow_flow: Array  # (F,) int32: the flow (connection) of each subflow, < F
    nic: Array  # (F,) int32: the subflow's host egress link (L if it has none)
    pfc_group: Array  # (L+1,) int32: the first link feeding the same switch (shared PFC buffer)
    reverse: Array  # (L+1,) int32: the link back, where ACKs of data on this one queue (L: none)
    start: Array  # (F,) s, its flow's start
    size: Array  # (F,) bytes, its flow's size per round (inf for a long-lived flow)
    rounds: Array  # (F,) int32: its flow's rounds of `size` bytes (1: one transfer)
    barrier: Array  # (F,) int32 < F: its barrier (the flows of a group with rounds wait for
    # each other between rounds); one of its own where it has one round
    count: Array  # (F,) identical subflows it runs for (pathflow.compile); 0 for padding
    packet: Array  # (F,) bytes per packet (transport.mss)
    ack: Array  # (F,) ACK bytes per delivered data byte (ack_size / (mss x segments per ACK))
    rto_min: Array  # (F,) s, the retransmission timer's lower bound (`models.timeouts`)
    probe: Array  # (F,) 1: losses found by RACK-TLP (recovery = "linux"), 0: by 3 SACKs
    draws: Array  # (F, M) Exp(1) thresholds of successive timeouts (`models.timeouts`)
    params: Any  # (F,) each: the congestion-control model's Params
    dt: Array  # () s
    # The hop layout (see the module docstring), one array per hop index h, derived from the
    # path arrays by `hop_layout`; rebuild it when they change.
    hop_link: tuple[Array, ...] = ()  # H x (F, K_h) int32 link indices, padded with L
    hop_share: tuple[Array, ...] = ()  # H x (F, K_h) share of the controller's rate on the link
    hop_exit: tuple[Array, ...] = ()  # H x (F, K_h) share whose path ends with this hop

    @property
    def n_links(self) -> int:
        return int(self.queues.capacity.shape[-1]) - 1

    @property
    def n_subflows(self) -> int:
        return int(self.start.shape[-1])


class HopLayout(NamedTuple):
    link: tuple[np.ndarray, ...]
    share: tuple[np.ndarray, ...]
    exit: tuple[np.ndarray, ...]


def hop_layout(path_hops: np.ndarray, path_subflow: np.ndarray, path_weight: np.ndarray,
               controllers: int, n_links: int) -> HopLayout:
    """The per-hop (controller, link) slots of the path arrays (see the module docstring).

    Slots of one controller and hop hold distinct links in increasing order; unused slots point
    at the padding link `n_links` with share 0. Paths of weight 0 (padding) are left out, and a
    controller without weight keeps only unused slots."""
    hops = np.asarray(path_hops, dtype=np.int64)
    owner = np.asarray(path_subflow, dtype=np.int64)
    weight = np.asarray(path_weight, dtype=np.float64)
    real = weight > 0
    hops, owner, weight = hops[real], owner[real], weight[real]
    total = np.bincount(owner, weights=weight, minlength=controllers)
    inverse = np.divide(1.0, total, out=np.zeros(controllers), where=total > 0)
    count = hops.shape[1]
    inside = hops < n_links
    # the index of each path's last real hop (-1 for a path without one)
    last = np.where(inside.any(axis=1), count - 1 - np.argmax(inside[:, ::-1], axis=1), -1)
    links, shares, exits = [], [], []
    for h in range(count):
        key = owner * (n_links + 1) + hops[:, h]
        unique, where = np.unique(key, return_inverse=True)
        share = np.bincount(where, weights=weight, minlength=unique.size)
        ending = np.bincount(where, weights=weight * (last == h), minlength=unique.size)
        slot_owner, slot_link = np.divmod(unique, n_links + 1)
        # position of each distinct link among its controller's slots (unique sorts by owner)
        first = np.searchsorted(slot_owner, slot_owner)
        rank = np.arange(unique.size) - first
        width = int(rank.max()) + 1 if unique.size else 1
        link = np.full((controllers, width), n_links, dtype=np.int32)
        fraction = np.zeros((controllers, width))
        ended = np.zeros((controllers, width))
        link[slot_owner, rank] = slot_link
        # a share over the controller's weight, so that a single path's is exactly 1
        fraction[slot_owner, rank] = share * inverse[slot_owner]
        ended[slot_owner, rank] = ending * inverse[slot_owner]
        links.append(link)
        shares.append(fraction)
        exits.append(ended)
    return HopLayout(tuple(links), tuple(shares), tuple(exits))


def with_hop_layout(problem: Problem) -> Problem:
    """`problem` with its hop layout rebuilt from its path arrays."""
    layout = hop_layout(np.asarray(problem.path_hops), np.asarray(problem.path_subflow),
                        np.asarray(problem.path_weight), problem.n_subflows, problem.n_links)
    dtype = np.asarray(problem.path_weight).dtype
    return problem._replace(
        hop_link=tuple(jnp.asarray(a) for a in layout.link),
        hop_share=tuple(np.asarray(a, dtype=dtype) for a in layout.share),
        hop_exit=tuple(np.asarray(a, dtype=dtype) for a in layout.exit),
    )


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
                                              problem.n_subflows):
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
    return with_hop_layout(Problem(
        queues=queues,
        aqm=aqm,
        path_hops=jnp.asarray(hop_array, dtype=jnp.int32),
        path_subflow=jnp.asarray(grow(problem.path_subflow, paths, 0), dtype=jnp.int32),
        path_weight=grow(problem.path_weight, paths, 0.0),
        path_base_rtt=grow(problem.path_base_rtt, paths, 1.0),
        subflow_flow=jnp.asarray(np.concatenate([  # a padding subflow is a flow of its own
            np.asarray(problem.subflow_flow),
            np.arange(problem.n_subflows, controllers)]), dtype=jnp.int32),
        nic=jnp.asarray(grow(np.where(np.asarray(problem.nic) == n_links, links,
                                      problem.nic), controllers, links), dtype=jnp.int32),
        pfc_group=jnp.asarray(grow_links(np.where(np.asarray(problem.pfc_group) == n_links,
                                                  links, problem.pfc_group),
                                         links), dtype=jnp.int32),
        reverse=jnp.asarray(grow_links(np.where(np.asarray(problem.reverse) == n_links,
                                                links, problem.reverse),
                                       links), dtype=jnp.int32),
        start=grow(problem.start, controllers, 0.0),
        size=grow(problem.size, controllers, 0.0),
        rounds=jnp.asarray(grow(problem.rounds, controllers, 1), dtype=jnp.int32),
        barrier=jnp.asarray(np.concatenate([np.asarray(problem.barrier),
                                            np.arange(problem.n_subflows, controllers)]),
                            dtype=jnp.int32),
        count=grow(problem.count, controllers, 0.0),
        packet=grow(problem.packet, controllers, float(np.asarray(problem.packet)[0])),
        ack=grow(problem.ack, controllers, 0.0),
        rto_min=grow(problem.rto_min, controllers, 1.0),
        probe=grow(problem.probe, controllers, 0.0),
        draws=grow(problem.draws, controllers, np.inf),
        params=params,
        dt=problem.dt,
    ))


def cast_problem(problem: Problem, dtype: jnp.dtype) -> Problem:
    """The problem with every floating-point array in `dtype` (indices stay integers). On the
    host, in numpy: an eager JAX conversion per field costs a dispatch each (0.13 s for the
    2,000-flow incast's problem); the arrays go to the device when the solver is called."""

    def cast(array: Array) -> Array:
        array = np.asarray(array)
        return array.astype(dtype) if np.issubdtype(array.dtype, np.floating) else array

    return jax.tree.map(cast, problem)


def merge_problems(problems: list[Problem]) -> Problem:
    """Problems of one time step as one problem: disjoint copies side by side (block-diagonal),
    their links, paths and subflows concatenated and one padding link at the end.

    A batch run this way costs the kernels of one run per step, on longer arrays: on a CPU,
    where a step's cost is its kernel count, this beats `jax.vmap` (measured on 8 hash seeds of
    the k = 8 fat-tree: a vmapped step cost about ten times one run's, the merged batch about
    four times one run's wall time). `split_links` and `split_subflows` take the results apart."""
    links = [p.n_links for p in problems]
    total_links = sum(links)
    link_offset = np.cumsum([0, *links])[:-1]
    subflow_offset = np.cumsum([0, *(p.n_subflows for p in problems)])[:-1]
    width = max(p.path_hops.shape[1] for p in problems)

    def real(array: Array) -> np.ndarray:
        return np.asarray(array)[:-1]  # a link array without its padding entry

    def join_links(tables: list[Any]) -> Any:
        rows = [np.concatenate([*(real(a) for a in column), np.asarray(column[0])[-1:]])
                for column in zip(*tables, strict=True)]
        return type(tables[0])(*rows)

    def relink(index: Array, problem: Problem, offset: int) -> np.ndarray:
        index = np.asarray(index)
        return np.where(index == problem.n_links, total_links, index + offset)

    hops = [np.pad(relink(p.path_hops, p, o), ((0, 0), (0, width - p.path_hops.shape[1])),
                   constant_values=total_links) for p, o in zip(problems, link_offset, strict=True)]
    subflows = [np.asarray(p.path_subflow) + o for p, o in zip(problems, subflow_offset,
                                                              strict=True)]

    def join(name: str) -> np.ndarray:
        return np.concatenate([np.asarray(getattr(p, name)) for p in problems])

    params = type(problems[0].params)(*(np.concatenate([np.asarray(a) for a in column])
                                        for column in zip(*(p.params for p in problems),
                                                          strict=True)))
    merged = Problem(
        queues=join_links([p.queues for p in problems]),
        aqm=join_links([p.aqm for p in problems]),
        path_hops=np.concatenate(hops).astype(np.int32),
        path_subflow=np.concatenate(subflows).astype(np.int32),
        path_weight=join("path_weight"),
        path_base_rtt=join("path_base_rtt"),
        subflow_flow=np.concatenate([np.asarray(p.subflow_flow) + o
                                     for p, o in zip(problems, subflow_offset, strict=True)]
                                    ).astype(np.int32),
        nic=np.concatenate([relink(p.nic, p, o) for p, o in zip(problems, link_offset,
                                                                 strict=True)]).astype(np.int32),
        pfc_group=np.concatenate([*(real(relink(p.pfc_group, p, o))
                                    for p, o in zip(problems, link_offset, strict=True)),
                                  [total_links]]).astype(np.int32),
        reverse=np.concatenate([*(real(relink(p.reverse, p, o))
                                  for p, o in zip(problems, link_offset, strict=True)),
                                [total_links]]).astype(np.int32),
        start=join("start"), size=join("size"), count=join("count"), packet=join("packet"),
        rounds=join("rounds"),
        barrier=np.concatenate([np.asarray(p.barrier) + o for p, o in zip(problems, subflow_offset,
                                                                           strict=True)]
                               ).astype(np.int32),
        ack=join("ack"), rto_min=join("rto_min"), probe=join("probe"),
        draws=join("draws"),
        params=params, dt=problems[0].dt)
    return with_hop_layout(merged)


def split_links(values: np.ndarray, problems: list[Problem]) -> list[np.ndarray]:
    """Per-link results (..., L_total + 1) of a merged run, each problem's (..., L + 1) with
    the shared padding entry last."""
    bounds = np.cumsum([0, *(p.n_links for p in problems)])
    return [np.concatenate([values[..., a:b], values[..., -1:]], axis=-1)
            for a, b in itertools.pairwise(bounds)]


def split_subflows(values: np.ndarray, problems: list[Problem]) -> list[np.ndarray]:
    """Per-subflow results (..., F_total) of a merged run, each problem's (..., F)."""
    bounds = np.cumsum([0, *(p.n_subflows for p in problems)])
    return [values[..., a:b] for a, b in itertools.pairwise(bounds)]
