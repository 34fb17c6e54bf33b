"""Fixed-step integration of the network's delay-differential equations.

Contract
--------
`integrate(physics, problem, grid)` advances the whole network by `grid.steps` steps of
`problem.dt` inside `lax.scan` and returns a `Trajectory` of `grid.records` samples. Memory is
O(history + records), independent of the number of steps. The function is pure, so it can be
`jax.jit`-ed, `jax.vmap`-ed over a batch of problems and differentiated.

Method (DESIGN §4)
------------------
One step from t to t + dt:

1. Round-trip times from the current queues: per controller the split-weighted mean over its
   paths of R_p = base_p + sum_{l in p} (q_l / C_l + q_l' / C_l'), l' the reverse link of l
   where the path's ACKs wait (`Problem.reverse`; the padding link, without queue, when ACKs
   are off), summed over the distinct (hop, link) slots of the problem's hop layout
   (`solvers.problem`). It is computed at the end of the previous step, at the queues it left,
   and carried.
2. Sending rates from the model (`model.rate`: W / R for a window-based controller, its own
   state for a rate-based one) for running controllers (started, not yet finished), capped by
   the sender's own NIC: a host link never queues or drops, it shares its capacity, less the
   ACKs it sends, among its flows in proportion to their windows (local backpressure, as Linux's
   TCP small queues do; the host's ACKs go first, as in the packet engine's NIC), and among
   rate-based senders max-min (`_water_level`: the NIC's round robin among paced queue pairs,
   each sending at most its own rate).
3. Flows tier by tier: the flow entering hop h + 1 is the flow entering hop h times the
   share-weighted departure/arrival ratio of its hop-h links (fluid FIFO: a queue passes on its
   departures in the proportions it receives), with the ratios of the previous step, so a
   downstream link never sees more than an upstream link sends. Link arrivals are one
   `segment_sum` over the slots. Exact for single-path routing; with several paths, upstream
   losses thin all of a controller's downstream slots alike. ACKs are load: every link also
   receives the ACKs of the data its reverse link delivered, at the previous step's delivered
   rates (`_acks`: ack bytes per data byte `Problem.ack`, one `segment_sum`).
4. Queues, marking and drops (`models.aqm`: the common projected queue, the discipline's
   marking and early-drop probabilities and queue measure), projected onto [0, B]. With priority
   flow control (`Physics.pfc`, `models.pfc`) each subflow's bytes in each queue are tracked
   (a well-mixed queue) and summed, per link, over the subflows that reached the switch by it:
   the link's ingress occupancy, from which the switch decides at the end of each step the
   part of the time the link is to be paused (`models.pfc.paused_fraction`, the time average
   of its pauses). The decision reaches the link's transmitter one propagation delay later
   (the PAUSE frame's flight; the decisions of the last `Physics.pfc` steps are kept for it),
   and a link serves at its rate times the part of the step it was not paused (a paused host
   NIC holds its senders). The flows entering the next hop follow the queues' contents rather
   than the ratio (`_tiers_from_queues`).
5. Feedback. What a controller learns from this step (the mark and drop fractions along its
   paths, 1 - prod_h (1 - s_h) with s_h the share-weighted fraction at hop h, which is the
   split-weighted 1 - prod_l (1 - p_l) when at most one hop of each path marks, and its own sending
   rate x) reaches it one round trip later, at a = t + R(t): marks are applied on enqueue, so the
   marked packet still waits through the current queues (`Physics.feedback = "propagation"`
   files it at the base round trip instead, the fixed loop delay of fluid-model stability
   analyses). A model with events of its own (`CongestionModel.has_events`), which come with
   packet arrivals, gets the rate at which the step's packets arrive instead of x:
   x dt / (dt + R(t + dt) - R(t)), the fluid FIFO's, so that an incast's flows sending at eight
   times the link arrive at its rate while the queue fills (the published fluid models, which
   the others are, read x(t - R); for a window-based sender, clocked by its ACKs, the two differ
   little once out of slow start). The
   signals are written into a ring buffer of `grid.history` steps at the slot of their arrival
   step, ceil(a/dt), kept nondecreasing per controller (a packet never overtakes an earlier one);
   each step reads its own slot, contiguously, and a controller keeps the last values it received
   while nothing new arrives (when several steps' signals arrive within one step, the newest wins).
   Looking back by the current RTT, t - R(t), would be wrong while queues grow faster than they
   drain: the look-back point then stalls and congestion is never signalled.
6. Controller states advance by Heun's method (explicit trapezoid, second order in the smooth
   state dependence) with the delayed signals held over the step, followed by the model's
   projection (floors, slow-start exit).
7. Retransmission timeouts (window-based models, `Physics.timeouts`; `models.timeouts`): each
   sending controller integrates its timeout hazard; when the integral reaches its next Exp(1)
   draw (`Problem.draws`) it stalls for an RTO (`Timers`), sending nothing and its state
   frozen, and restarts from the loss window. Bytes dropped are counted as sent again.
   A model with random events of its own (`CongestionModel.has_events`: DCQCN's cuts with
   `cuts = "events"`) uses the same time change with its `event_rate` and jumps by its
   `on_event` when the integral reaches the draw (`_events`; such a model has no timeouts).
8. Rounds (`Problem.rounds`, barrier-synchronised traffic): a flow sends its round's block
   (`Problem.size` bytes each round) and waits; when every flow of its barrier has its block,
   the barrier's next round starts (a window idle for an RTO restarts from at most its initial
   window). `block_done` keeps when each block arrived.

The vector field is discontinuous (step marking, projections), so the global order is one; the
test suite checks that results are stable when dt halves.

ACKs
----
Modelled: ACK bytes as load and ACK queueing in the round trip. A controller delivering x
bytes/s sends x * `Problem.ack` bytes/s of ACKs (ack_size / (mss x d), d the segments per ACK:
2, Linux's and ns-3's delayed ACKs, or an integer ack_ratio >= 2, as the packet engine's
receiver; `compile.segments_per_ack`) back along the reverse of each of its paths, with the
path's share; they join the arrivals (and so the queues, drops and departures) of the reverse
links one step later, thinned by the reverse links they crossed. A host NIC sends its host's
ACKs first and shares the rest among its senders. The round trip adds the reverse links'
q / C. `[transport] ack_size = "0B"` leaves both out (the model before ACKs).
Not modelled: ACK compression and bursts (ACKs are a fluid at the delivered rate), ACK loss (a
full reverse queue drops a share of the ACK bytes, but the ACK rate and the window's clock do
not change), DCTCP's immediate ACKs when the CE state changes (more ACKs under marking), the
delayed-ACK timer (a flow of less than 2 segments per 40 ms), and ACKs in PFC's per-ingress
counts (they are in the queues, not in the ingress occupancy).
Validation: `tests/test_acks.py` (closed forms on a two-way dumbbell: arrivals, which port
queues, the NIC's share, the round trip; pad and merge), the validation case
`ack_port_fluid_packet` (a port loaded by other flows' ACKs, against the packet reference).
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp

from pathflow.models import aqm, pfc, timeouts
from pathflow.models.base import Array, CongestionModel, Signals, State
from pathflow.solvers.problem import Grid, Physics, Problem

__all__ = ["Carry", "Feedback", "Timers", "Trajectory", "initial_carry", "integrate", "ring_bytes",
           "run_records"]

_TINY = 1e-30
_RETURN_FLOOR = 1e-3  # a step's packets return over at least this part of a step
_WATER_ROUNDS = 64  # most Newton steps of `_water_level` (each uncaps at least one sender)
# The ring holds fractions, a rate and a step stamp below 2**22: float32 keeps the stamps exact
# and the signals to 6e-8, and halves the largest array of a long-RTT run (memory, and the time
# to fill and re-file it).
RING_DTYPE = jnp.float32


def ring_bytes(history: int, subflows: int) -> int:
    """Bytes of the feedback ring of `history` steps for `subflows` subflows."""
    return history * subflows * 4 * jnp.dtype(RING_DTYPE).itemsize


class Carry(NamedTuple):
    """Everything that persists from one step to the next."""

    step: Array  # () int
    state: State  # controller states, (F,) each
    delivered: Array  # (F,) bytes each subflow delivered to the receiver
    flow_delivered: Array  # (F,) bytes the subflow's flow delivered (the sum over its subflows)
    completion: Array  # (F,) s, inf until the last byte of the subflow's flow arrives
    round: Array  # (F,) int32: the round its barrier is in (`Problem.rounds`)
    block_done: Array  # (F, Physics.rounds) s, when its flow's block of each round arrived
    queue: Array  # (L+1,) bytes
    measure: Array  # (L+1,) RED average (bytes)
    ratio: Array  # (L+1,) departure / arrival of the previous step
    held: Array  # (F, J) bytes of each hop-layout slot in its link's queue ((F, 0) without PFC)
    pause_views: Array  # (K, L+1) the switches' last K decisions: part of the time paused
    pause_times: Array  # (K,) s, when each was decided (a ring by step)
    rtt: Array  # (F,) s, round-trip time at `queue` (split-weighted over the paths)
    acks: Array  # (L+1,) bytes/s of ACKs arriving at each link (the last step's deliveries)
    feedback: Feedback  # signals in flight back to the controllers
    timers: Timers  # retransmission timeouts (`models.timeouts`)


class Timers(NamedTuple):
    """Each controller's retransmission timer and what its losses cost (`models.timeouts`)."""

    stall: Array  # (F,) s until its timer fires; 0 while it sends
    srtt: Array  # (F,) s, RFC 6298's smoothed round trip
    rttvar: Array  # (F,) s, and its variation
    clock: Array  # (F,) the timeout hazard integrated since the last timeout
    count: Array  # (F,) timeouts so far
    lost: Array  # (F,) bytes dropped so far, each sent again
    sent_at: Array  # (F,) s, the last step it sent (for the restart after idle)
    threshold: Array  # (F,) the draw `clock` is to reach, `Problem.draws` [count % M]
    backoff: Array  # (F,) consecutive timeouts before the last (its RTO doubled as often)
    resumed: Array  # (F,) s, when the last timeout's wait ends (-inf: none yet)


class Feedback(NamedTuple):
    """Signals on their way back to the controllers, filed by the step at which they arrive."""

    slots: Array  # (history, F, 4) RING_DTYPE [arrival step, mark, loss, rate], at arrival % H
    due: Array  # (F,) int32: arrival step of the newest signal sent (FIFO order)
    seen: Array  # (F, 3): the last [mark, loss, rate (packets/s)] each controller received


class Trajectory(NamedTuple):
    """Samples at the end of each record interval; rates are means over the interval."""

    queue: Array  # (records, L+1) bytes, instantaneous
    queue_max: Array  # (records, L+1) bytes, largest within the interval
    queue_min: Array  # (records, L+1) bytes, smallest within the interval
    arrival: Array  # (records, L+1) bytes/s
    departure: Array  # (records, L+1) bytes/s
    drop: Array  # (records, L+1) bytes/s
    mark: Array  # (records, L+1) bytes/s of marked packets
    pause: Array  # (records, L+1) fraction of the interval the link was paused (PFC)
    flow_rate: Array  # (records, F) bytes/s each subflow delivered
    send_rate: Array  # (records, F) bytes/s sent
    rtt: Array  # (records, F) s
    state: State  # (records, F) each
    delivered: Array  # (records, F) bytes
    completion: Array  # (F,) s
    block_done: Array  # (F, rounds) s, when each round's block of the flow arrived (inf: not)
    dt: Array  # (records,) s, the step used (solvers.stepping)
    stall: Array  # (records, F) s until the retransmission timer fires (0: sending)
    timeouts: Array  # (records, F) timeouts so far
    resent: Array  # (records, F) bytes dropped so far (sent again)


class _Sums(NamedTuple):
    """A step's values, or their running sums over a record interval, stacked so that one
    kernel a step updates each stack: on a CPU a step costs about its kernel count, and nine
    separate sums cost 17 % of the k = 8 fat-tree's step, these three 7 % (benchmarks/README.md)."""

    links: Array  # (5, L+1): arrival, departure, drop, mark (bytes/s), pause (fraction)
    flows: Array  # (2, F): delivered and sent (bytes/s)
    extremes: Array  # (2, L+1): the queue and minus the queue (bytes), kept by their maximum

    def add(self, now: _Sums) -> _Sums:
        return _Sums(self.links + now.links, self.flows + now.flows,
                     jnp.maximum(self.extremes, now.extremes))


def initial_carry(physics: Physics, problem: Problem, grid: Grid) -> Carry:
    links = problem.queues.capacity.shape[0]
    controllers = problem.start.shape[0]
    dtype = problem.queues.capacity.dtype
    zeros_links = jnp.zeros(links, dtype)
    layout = _prepare(problem)
    slots = layout.link.shape[1] if physics.pfc else 0
    return Carry(
        step=jnp.zeros((), jnp.int32),
        state=physics.model.initial_state(problem.params),
        delivered=jnp.zeros(controllers, dtype),
        flow_delivered=jnp.zeros(controllers, dtype),
        completion=jnp.full(controllers, jnp.inf, dtype),
        round=jnp.zeros(controllers, jnp.int32),
        block_done=jnp.full((controllers, physics.rounds), jnp.inf, dtype),
        queue=zeros_links,
        measure=zeros_links,
        ratio=jnp.ones(links, dtype),
        held=jnp.zeros((controllers, slots), dtype),
        pause_views=jnp.zeros((physics.pfc, links), dtype),
        pause_times=jnp.full(physics.pfc, -jnp.inf, dtype),
        rtt=_rtt(zeros_links, problem, layout),
        acks=zeros_links,
        feedback=Feedback(
            slots=jnp.full((grid.history, controllers, 4), -1.0, RING_DTYPE),
            due=jnp.zeros(controllers, jnp.int32),
            seen=jnp.zeros((controllers, 3), dtype),
        ),
        # the RTT estimator starts from the base round trip, the sample a handshake gives
        timers=Timers(jnp.zeros(controllers, dtype), layout.base_rtt, 0.5 * layout.base_rtt,
                      jnp.zeros(controllers, dtype), jnp.zeros(controllers, dtype),
                      jnp.zeros(controllers, dtype), jnp.zeros(controllers, dtype),
                      problem.draws[:, 0].astype(dtype), jnp.zeros(controllers, dtype),
                      jnp.full(controllers, -jnp.inf, dtype)),
    )


class _Layout(NamedTuple):
    """Step-invariant arrays derived from the problem once per run, outside the step loop (so
    that calibration, which edits `path_base_rtt`, still sees its edits and their gradients)."""

    link: Array  # (F, J) int32: the hop layout's slots, hop after hop (J = sum_h K_h)
    share: Array  # (F, J) share of the controller's rate on the slot's link
    exit: Array  # (F, J) share whose path ends with the slot's link
    upstream: Array  # (F, J) the slot's part of its hop's share (which link a byte came by)
    last: Array  # (F, J) exit / share: the part of the slot's traffic whose path ends there
    weight: Array  # (F,) sum of the controller's split weights (0 for padding controllers)
    base_rtt: Array  # (F,) split-weighted mean base RTT (1 s for padding controllers)
    reverse: Array  # (F, J) int32: each slot's reverse link, where its ACKs arrive
    receiver: Array  # (F,) int32 < F: one index per receiving NIC (the link into the receiver)


def _prepare(problem: Problem) -> _Layout:
    if not problem.hop_link:
        raise ValueError("the problem has no hop layout: build it with compile_scenario or "
                         "solvers.problem.with_hop_layout")
    controllers = problem.start.shape[0]
    owner, weight = problem.path_subflow, problem.path_weight
    total = jax.ops.segment_sum(weight, owner, controllers)
    base = jax.ops.segment_sum(weight * problem.path_base_rtt, owner, controllers)
    link = jnp.concatenate(problem.hop_link, axis=-1)
    exit_ = jnp.concatenate(problem.hop_exit, axis=-1)
    last = jnp.take_along_axis(link, jnp.argmax(exit_ > 0, axis=1)[:, None], axis=1)[:, 0]
    _, receiver = jnp.unique(last, size=controllers, return_inverse=True)
    share = jnp.concatenate(problem.hop_share, axis=-1)
    widths = _widths(problem)
    hop_total = _per_slot(_by_hop(share, widths), widths)
    return _Layout(
        link=link,
        share=share,
        exit=exit_,
        upstream=jnp.where(hop_total > 0, share / jnp.maximum(hop_total, _TINY), 0.0),
        last=jnp.where(share > 0, exit_ / jnp.maximum(share, _TINY), 0.0),
        weight=total,
        base_rtt=jnp.where(total > 0, base / jnp.maximum(total, _TINY), 1.0),
        reverse=problem.reverse[link],
        receiver=receiver.reshape(-1).astype(jnp.int32),
    )


def _widths(problem: Problem) -> tuple[int, ...]:
    """K_h of each hop index: static (shapes), so hops are sliced without gathers."""
    return tuple(int(a.shape[-1]) for a in problem.hop_link)


def _by_hop(values: Array, widths: tuple[int, ...]) -> list[Array]:
    """Per hop index, the sum over its slots of (..., J) values: a list of (...) arrays."""
    sums, offset = [], 0
    for width in widths:
        piece = values[..., offset:offset + width]
        sums.append(piece[..., 0] if width == 1 else piece.sum(axis=-1))
        offset += width
    return sums


def _per_slot(per_hop: list[Array], widths: tuple[int, ...]) -> Array:
    """(F,) values per hop index spread over that hop's slots: (F, J)."""
    return jnp.concatenate([jnp.broadcast_to(v[:, None], (v.shape[0], width))
                            for v, width in zip(per_hop, widths, strict=True)], axis=1)


def _rtt(queue: Array, problem: Problem, layout: _Layout) -> Array:
    """Split-weighted round-trip time per controller: base + sum over its paths' hops of q/C,
    data out and ACKs back (the reverse link's q/C; zero for the padding link), summed once per
    distinct (hop, link) slot with the slot's share (exact, it is linear)."""
    # a product by the reciprocal, which XLA computes once outside the step loop: on a CPU the
    # division of every link's queue cost 7 % of the k = 8 fat-tree's step (benchmarks/README.md)
    waiting = queue * (1.0 / problem.queues.capacity)
    queueing = (waiting + waiting[problem.reverse])[layout.link]
    return layout.base_rtt + jnp.sum(layout.share * queueing, axis=1)


def _acks(flow_rate: Array, ratio: Array, problem: Problem, layout: _Layout,
          widths: tuple[int, ...]) -> Array:
    """(L+1,) ACK bytes/s arriving at each link: every controller's delivered rate (bytes/s)
    times its ACK bytes per data byte, on the reverse link of every slot of its paths, with the
    slot's share (a path's ACKs return along its reverse). ACKs leave the receiver by the
    reverse of the last hop and are thinned by the departure/arrival ratio of every reverse link
    they have crossed (fluid FIFO, as data: a link downstream of a saturated one never sees
    more than it sends)."""
    passed = _by_hop(layout.share * ratio[layout.reverse], widths)
    entering = [jnp.ones_like(flow_rate)]
    for through in passed[:0:-1]:  # from the last hop back to the second
        entering.append(entering[-1] * through)
    per_byte = flow_rate * problem.ack * problem.count
    acks = layout.share * _per_slot([per_byte * e for e in entering[::-1]], widths)
    return jax.ops.segment_sum(acks.ravel(), layout.reverse.ravel(),
                               problem.queues.capacity.shape[0])


def _path_signal(probability: Array, layout: _Layout, widths: tuple[int, ...]) -> Array:
    """(K, L+1) per-link fractions to (K, F) per-controller path signals 1 - prod_h (1 - s_h),
    s_h the share-weighted fraction at hop h. Exact for single-path routing; for a controller
    with several paths it is the split-weighted mean of 1 - prod_l (1 - p_l) over its paths
    when at most one hop of each path marks (layers are averaged before the product)."""
    at_hop = _by_hop(layout.share * probability[:, layout.link], widths)
    keep = 1.0 - at_hop[0]
    for fraction in at_hop[1:]:
        keep = keep * (1.0 - fraction)
    return jnp.where(layout.weight > 0, 1.0 - keep, 1.0)


def _stamp(step: Array) -> Array:
    """A step number that float32 holds exactly (the ring is far shorter than 2**22 steps)."""
    return step % (1 << 22)


def _send_back(feedback: Feedback, step: Array, delay: Array, dt: Array, signals: Array
               ) -> Feedback:
    """File this step's signals (F, 3) to arrive `delay` (s) later, never before an earlier
    signal of the same controller, at least one step and at most history - 1 steps ahead."""
    size, controllers = feedback.slots.shape[:2]
    ahead = jnp.clip(jnp.ceil(delay / dt), 1, size - 1).astype(jnp.int32)
    due = jnp.maximum(step + ahead, feedback.due)
    entry = jnp.concatenate([_stamp(due)[:, None], signals], axis=1).astype(RING_DTYPE)
    slots = feedback.slots.at[due % size, jnp.arange(controllers)].set(entry, unique_indices=True)
    return Feedback(slots, due, feedback.seen)


def _receive(feedback: Feedback, step: Array) -> Feedback:
    """Deliver what arrives at this step: one contiguous row, whose entries count only if they
    were filed for this very step (older ones are from a previous turn of the ring)."""
    row = feedback.slots[step % feedback.slots.shape[0]]
    arrived = row[:, :1] == _stamp(step).astype(row.dtype)
    seen = jnp.where(arrived, row[:, 1:].astype(feedback.seen.dtype), feedback.seen)
    return Feedback(feedback.slots, feedback.due, seen)


def _transmitters_paused(carry: Carry, time: Array, dt: Array, delay: Array) -> Array:
    """(L+1,) the part of the step from `time` that each link's transmitter is paused: each
    decision of the switch it feeds holds from its arrival (decided + `delay`, the PAUSE frame's
    flight) to the next one's."""
    history = carry.pause_times.shape[0]
    oldest_first = (carry.step + jnp.arange(history)) % history
    views = carry.pause_views[oldest_first]
    arrives = carry.pause_times[oldest_first][:, None] + delay
    until = jnp.concatenate([arrives[1:], jnp.full_like(arrives[:1], jnp.inf)])
    overlap = jnp.clip(jnp.minimum(until, time + dt) - jnp.maximum(arrives, time), 0.0, dt)
    return jnp.clip(jnp.sum(views * overlap, axis=0) / dt, 0.0, 1.0)  # round-off: not 1 + eps


def _flow_control(carry: Carry, hop_flow: Array, early_drop: Array, arrival: Array,
                  moved: aqm.QueueStep, problem: Problem, layout: _Layout,
                  widths: tuple[int, ...]) -> tuple[Array, Array, Array]:
    """Each slot's bytes in its queue after the step (a well-mixed queue: the step's accepted
    arrivals join, and every slot keeps the fraction of the queue that stays), and the
    switches' pause decisions with their times (`models.pfc`)."""
    dt, links = problem.dt, carry.queue.shape[0]
    accepted = 1.0 - early_drop
    offered = carry.queue + arrival * accepted * dt
    keep = jnp.where(offered > _TINY, moved.queue / jnp.maximum(offered, _TINY), 0.0)
    held = (carry.held + hop_flow * accepted[layout.link] * dt) * keep[layout.link]
    # the bytes a subflow holds at hop h came by its hop h - 1 link(s)
    at_hop = _by_hop(held, widths)
    came_by = _per_slot([*at_hop[1:], jnp.zeros_like(at_hop[0])], widths) * layout.upstream
    ingress = jax.ops.segment_sum((came_by * problem.count[:, None]).ravel(),
                                  layout.link.ravel(), links)
    queues = problem.queues
    # a shared buffer: every ingress port's Xoff falls as its switch fills (0 factor: static)
    in_switch = jax.ops.segment_sum(ingress, problem.pfc_group, links)[problem.pfc_group]
    shared = queues.pfc_alpha > 0
    dynamic = pfc.dynamic_xoff(queues.pfc_alpha, queues.pfc_room, in_switch)
    resume = jnp.where(shared, queues.xoff, 0.0) - jnp.where(shared, queues.xon, 0.0)
    xoff = jnp.where(shared, dynamic, queues.xoff)
    xon = jnp.where(shared, jnp.maximum(dynamic - resume, 0.0), queues.xon)
    decided = pfc.paused_fraction(ingress, xoff, xon, queues.capacity, queues.pause_delay, dt)
    slot = carry.step % carry.pause_times.shape[0]
    return (held, carry.pause_views.at[slot].set(decided),
            carry.pause_times.at[slot].set((carry.step + 1) * dt))


def _tiers_from_queues(path_send: Array, carry: Carry, capacity: Array, layout: _Layout,
                       widths: tuple[int, ...], dt: Array) -> tuple[Array, Array]:
    """Under PFC, tier by tier from the queues' contents: (F, J) the flow entering each slot's
    hop, and (F, J) what of it leaves the slot's link. A link backlogged through the step
    passes on its service rate (less while paused) in the proportions of the bytes each
    subflow holds there, so a link that resumes sends its paused backlog, never more than its
    rate; a link without a backlog passes on its arrivals at the previous step's ratio. (The
    ratio alone would multiply a resuming link's arrivals by the departures of the step
    before over arrivals that were near zero.)"""
    entering, leaving, offset = [], [], 0
    flow = path_send
    for width in widths:
        piece = slice(offset, offset + width)
        link, held = layout.link[:, piece], carry.held[:, piece]
        queue, rate = carry.queue[link], capacity[link]
        arriving = flow[:, None] * layout.share[:, piece]
        draining = rate * held / jnp.maximum(queue, _TINY)
        passing = jnp.minimum(carry.ratio[link], 1.0) * arriving + held / dt
        out = jnp.where(queue >= rate * dt, draining, passing)
        entering.append(flow)
        leaving.append(out)
        flow = out.sum(axis=1)
        offset += width
    return _per_slot(entering, widths), jnp.concatenate(leaving, axis=1)


def _step(physics: Physics, problem: Problem, layout: _Layout, carry: Carry
          ) -> tuple[Carry, _Sums]:
    model, discipline = physics.model, physics.discipline
    dt = problem.dt
    queues = problem.queues
    links = queues.capacity.shape[0]
    widths = _widths(problem)
    time = carry.step * dt

    rtt = carry.rtt  # at the current queues, computed by the previous step (or initial_carry)
    flow = problem.subflow_flow
    count = problem.count  # the identical subflows each controller runs for (0: padding)
    quota = problem.size * (carry.round + 1)  # bytes of the flow due by the end of its round
    running = (time >= problem.start) & (carry.flow_delivered < quota) & (count > 0)
    sending = running & (carry.timers.stall <= 0)  # a flow in timeout sends nothing
    wanted = jnp.where(sending, model.rate(carry.state, rtt, problem.params), 0.0)
    wanted = wanted * problem.packet
    room = jnp.maximum(queues.capacity - carry.acks, 0.0)  # a NIC sends its host's ACKs first
    paused = jnp.zeros_like(queues.capacity)
    if physics.pfc:  # a paused transmitter sends nothing: a NIC's senders, a port's queue
        paused = _transmitters_paused(carry, time, dt, queues.pause_delay)
    if model.sends == "rate":
        send = jnp.minimum(wanted, _water_level(wanted, count, problem.nic, room)[problem.nic])
        nic_share = jnp.where(wanted > 0.0, send / jnp.maximum(wanted, _TINY), 1.0)
    else:
        offered = jax.ops.segment_sum(wanted * count, problem.nic, links)
        nic_share = jnp.minimum(1.0, room / jnp.maximum(offered, _TINY))[problem.nic]
        send = wanted * nic_share
    if physics.pfc:
        send = send * (1.0 - paused[problem.nic])
        queues = queues._replace(capacity=queues.capacity * (1.0 - paused))
    packets_per_s = send / problem.packet

    path_send = send * layout.weight
    if physics.pfc:
        slot_entering, slot_leaving = _tiers_from_queues(path_send, carry, queues.capacity,
                                                         layout, widths, dt)
    else:
        # Tier by tier: the flow entering hop h + 1 is the flow entering hop h times the
        # share-weighted departure/arrival ratio of its hop-h links (exact for one path).
        passed = _by_hop(layout.share * carry.ratio[layout.link], widths)
        entering = [jnp.ones_like(send)]
        for through in passed[:-1]:
            entering.append(entering[-1] * through)
        slot_entering = _per_slot([path_send * e for e in entering], widths)
    hop_flow = slot_entering * layout.share
    arrival = jax.ops.segment_sum((hop_flow * count[:, None]).ravel(), layout.link.ravel(),
                                  links) + carry.acks

    mark, early_drop = discipline.congestion(carry.measure, problem.aqm)
    moved = aqm.queue_step(carry.queue, arrival, early_drop, queues, dt)
    flowing = arrival > _TINY
    loss = jnp.where(flowing, moved.drop / jnp.maximum(arrival, _TINY), 0.0)
    ratio = jnp.where(flowing, moved.departure / jnp.maximum(arrival, _TINY), 1.0)
    measure = discipline.average(carry.measure, moved.queue, problem.aqm, dt)
    held, views, decided = carry.held, carry.pause_views, carry.pause_times
    if physics.pfc:
        held, views, decided = _flow_control(carry, hop_flow, early_drop, arrival, moved,
                                             problem, layout, widths)
        # delivered: what leaves each path's last hop
        flow_rate = jnp.sum(slot_leaving * layout.last, axis=1)
    else:  # delivered: what enters each path's last hop and leaves it (this step's ratio there)
        flow_rate = jnp.sum(slot_entering * layout.exit * ratio[layout.link], axis=1)

    mark_loss = _path_signal(jnp.stack([mark, loss]), layout, widths)
    rtt_later = _rtt(moved.queue, problem, layout)  # also the next step's current RTT
    delay = rtt if physics.feedback == "round_trip" else layout.base_rtt
    returned = packets_per_s
    if model.has_events and physics.feedback == "round_trip":
        # events come with packet arrivals, and a step's packets arrive over dt + (the round
        # trip's change), not dt: slower than they left while the queues fill (an incast's
        # flows at 8x the link arrive at its rate), faster while they drain (fluid FIFO)
        returned = packets_per_s * dt / jnp.maximum(dt + rtt_later - rtt, _RETURN_FLOOR * dt)
    sent = jnp.stack([mark_loss[0], mark_loss[1], returned], axis=1)
    feedback = _receive(_send_back(carry.feedback, carry.step, delay, dt, sent), carry.step)
    seen_mark, seen_loss, acked = feedback.seen.T
    signals = Signals(rtt, seen_mark, seen_loss, acked, (nic_share >= 1.0).astype(rtt.dtype),
                      flow, layout.receiver, count)

    params = problem.params
    slope = model.derivative(carry.state, signals, params)
    euler = jax.tree.map(lambda s, d: s + dt * d, carry.state, slope)
    guess = model.project(euler, signals, params)
    later = signals._replace(rtt=rtt_later)
    slope_later = model.derivative(guess, later, params)
    stepped = jax.tree.map(lambda s, a, b: s + 0.5 * dt * (a + b), carry.state, slope, slope_later)
    stepped = model.project(stepped, signals, params)
    state = jax.tree.map(lambda new, old: jnp.where(sending, new, old), stepped, carry.state)
    timers = carry.timers
    if physics.rounds > 1:  # the restart after idle needs the last moment it sent
        timers = timers._replace(sent_at=jnp.where(send > 0, time + dt, timers.sent_at))
    if physics.timeouts:
        timers, state = _time_out(model, problem, rtt, mark_loss[1], packets_per_s, sending,
                                  path_send, state, timers, quota - carry.flow_delivered, time)
    elif model.has_events:
        timers, state = _events(model, problem, carry.state, signals, state, sending, timers)

    delivered = carry.delivered + flow_rate * dt
    flow_total = jax.ops.segment_sum(delivered, flow, flow.shape[0])[flow]
    finished = (flow_total >= problem.size * problem.rounds) & jnp.isinf(carry.completion)
    completion = jnp.where(finished, time + dt, carry.completion)
    turn, block_done = carry.round, carry.block_done
    if physics.rounds > 1:
        turn, block_done, state = _barrier(physics, problem, carry, flow_total >= quota, state,
                                           timers, time + dt)

    new_carry = Carry(carry.step + 1, state, delivered, flow_total, completion, turn, block_done,
                      moved.queue, measure, ratio, held, views, decided, rtt_later,
                      _acks(flow_rate, ratio, problem, layout, widths), feedback, timers)
    now = _Sums(jnp.stack([arrival, moved.departure, moved.drop, mark * arrival, paused]),
                jnp.stack([flow_rate, send]), jnp.stack([moved.queue, -moved.queue]))
    return new_carry, now


def _time_out(model: CongestionModel, problem: Problem, rtt: Array, loss: Array,
              sent: Array, sending: Array, path_send: Array, state: State, timers: Timers,
              due: Array, time: Array) -> tuple[Timers, State]:
    """Advance the retransmission timers over one step (`models.timeouts`): a sending
    controller integrates its timeout hazard and times out when the integral reaches its next
    Exp(1) draw; a stalled one waits out its RTO and then restarts from the loss window.
    The hazard is that of the packets sent now (`loss` the fraction of them its paths drop,
    `sent` their rate in packets/s, `due` bytes of the round not yet delivered): the timer
    runs from the loss, and the followers a lost packet can have are counted now. Bytes
    dropped (`path_send` times `loss`) are counted as sent again. A timeout within a round trip
    of the last one's end (its retransmission lost) doubles the RTO again and keeps ssthresh.

    Cost. On a CPU a step's cost is its kernel count, and XLA copies cheap elementwise
    producers into every consumer: written as plain `jnp.where`s, the hazard, the firing test
    and the step's whole Heun update of the window were recomputed inside the kernel of each
    field a timeout restarts, which cost more than the rest of the step on a 2,000-flow
    incast. So the hazard and the firing test are computed inside a `lax.cond`, whose outputs
    are computed once (`fire` is then one array that the restart's `where`s read, folded into
    the kernels that write those fields anyway), and only when some sending controller's
    paths drop: without a loss the hazard is 0, the clock stays below its draw, nothing fires
    and nothing is resent, which the other branch gives as is. Values are those of the plain
    form, bit for bit. (Under `jax.vmap` a cond runs both branches, as the plain form did.)"""
    dt = problem.dt
    srtt, rttvar = timeouts.smoothed_rtt(timers.srtt, timers.rttvar, rtt, dt)
    srtt = jnp.where(sending, srtt, timers.srtt)
    rttvar = jnp.where(sending, rttvar, timers.rttvar)

    def lossy(clock: Array, lost: Array, threshold: Array, backoff: Array, resumed: Array
              ) -> tuple[Array, ...]:
        cwnd = state["cwnd"]
        unsent = due / problem.packet - cwnd  # the round's segments not yet sent
        rate = timeouts.hazard(cwnd, loss, sent, rtt, unsent, problem.probe)
        clock = clock + jnp.where(sending, rate * dt, 0.0)
        fire = sending & (clock >= threshold)
        again = fire & timeouts.consecutive(time - resumed, srtt)
        backoff = jnp.where(fire, jnp.where(again, backoff + 1.0, 0.0), backoff)
        wait = timeouts.backed_off(timeouts.rto(srtt, rttvar, problem.rto_min), backoff)
        following = _next_draw(problem.draws, timers.count)  # where this one fires
        return (fire, again, wait, jnp.where(fire, 0.0, clock), lost + path_send * loss * dt,
                jnp.where(fire, following, threshold), backoff,
                jnp.where(fire, time + dt + wait, resumed))

    def quiet(clock: Array, lost: Array, threshold: Array, backoff: Array, resumed: Array
              ) -> tuple[Array, ...]:
        none = jnp.zeros_like(sending)
        return none, none, jnp.zeros_like(clock), clock, lost, threshold, backoff, resumed

    fire, again, wait, clock, lost, threshold, backoff, resumed = jax.lax.cond(
        jnp.any(sending & (loss > 0)), lossy, quiet, timers.clock, timers.lost,
        timers.threshold, timers.backoff, timers.resumed)
    restarted = timeouts.restart(state, model.min_window(problem.params), again)
    state = jax.tree.map(lambda new, old: jnp.where(fire, new, old), restarted, state)
    stall = jnp.where(fire, wait, jnp.maximum(timers.stall - dt, 0.0))
    return Timers(stall, srtt, rttvar, clock, timers.count + fire, lost, timers.sent_at,
                  threshold, backoff, resumed), state


def _next_draw(draws: Array, count: Array) -> Array:
    """Each controller's Exp(1) threshold for the event after its `count`-th (`Problem.draws`,
    used in turn)."""
    turn = (count.astype(jnp.int32) + 1) % draws.shape[1]
    return jnp.take_along_axis(draws, turn[:, None], axis=1)[:, 0]


def _water_level(wanted: Array, count: Array, nic: Array, room: Array) -> Array:
    """Per NIC, the level lambda at which its rate-based senders, each sending min(rate,
    lambda), fill its room (inf where their rates fit): the NIC's round robin among paced
    queue pairs, a max-min share. Newton's method on the concave, piecewise linear
    sum_i count_i min(rate_i, lambda) - room, started at the equal share below the root,
    climbs to it without passing it and ends exactly once it knows which senders are capped:
    lambda = (room - what the uncapped send) / (the capped's count)."""
    links = room.shape[0]

    def level(lam: Array) -> Array:
        capped = wanted > lam[nic]
        free = jax.ops.segment_sum(jnp.where(capped, 0.0, wanted * count), nic, links)
        held = jax.ops.segment_sum(jnp.where(capped, count, 0.0), nic, links)
        return jnp.where(held > 0.0, jnp.maximum(room - free, 0.0) / jnp.maximum(held, _TINY),
                         jnp.inf)

    senders = jax.ops.segment_sum(jnp.where(wanted > 0.0, count, 0.0), nic, links)
    start = room / jnp.maximum(senders, _TINY)

    def climbing(carry: tuple[Array, Array, Array]) -> Array:
        before, lam, rounds = carry
        return jnp.any(lam > before) & (rounds < _WATER_ROUNDS)

    def climb(carry: tuple[Array, Array, Array]) -> tuple[Array, Array, Array]:
        _, lam, rounds = carry
        return lam, jnp.maximum(level(lam), lam), rounds + 1

    return jax.lax.while_loop(climbing, climb, (jnp.full_like(start, -1.0), start, 0))[1]


def _events(model: CongestionModel, problem: Problem, before: State, signals: Signals,
            state: State, sending: Array, timers: Timers) -> tuple[Timers, State]:
    """A model's own random events over one step (`CongestionModel.event_rate`), by the time
    change of `_time_out`: a sending controller integrates its event rate and jumps
    (`on_event`) when the integral reaches its next Exp(1) draw. A model without timeouts keeps
    the count and the clock in `timers` (its `count`, `clock` and `threshold`)."""
    rate = model.event_rate(before, signals, problem.params)
    clock = timers.clock + jnp.where(sending, rate * problem.dt, 0.0)
    fire = sending & (clock >= timers.threshold)
    following = _next_draw(problem.draws, timers.count)
    jumped = model.on_event(state, problem.params)
    state = jax.tree.map(lambda new, old: jnp.where(fire, new, old), jumped, state)
    return timers._replace(clock=jnp.where(fire, 0.0, clock), count=timers.count + fire,
                           threshold=jnp.where(fire, following, timers.threshold)), state


def _barrier(physics: Physics, problem: Problem, carry: Carry, done: Array, state: State,
             timers: Timers, now: Array) -> tuple[Array, Array, State]:
    """Barrier-synchronised rounds: note when each flow's block of its round arrived; when
    every flow of a barrier has its block, the barrier's next round starts; a window idle for
    at least an RTO restarts (`models.timeouts.restart_after_idle`)."""
    controllers = done.shape[0]
    rows = jnp.arange(controllers)
    turn = carry.round
    first = done & jnp.isinf(carry.block_done[rows, turn])
    block_done = carry.block_done.at[rows, turn].set(
        jnp.where(first, now, carry.block_done[rows, turn]), unique_indices=True)
    everyone = jax.ops.segment_min(done.astype(jnp.int32), problem.barrier, controllers)
    advance = (everyone[problem.barrier] > 0) & (turn + 1 < problem.rounds)
    if physics.timeouts:  # a window-based model
        idle = now - timers.sent_at >= timeouts.rto(timers.srtt, timers.rttvar, problem.rto_min)
        initial = physics.model.initial_state(problem.params)["cwnd"]
        restarted = timeouts.restart_after_idle(state, initial)
        state = jax.tree.map(lambda new, old: jnp.where(advance & idle, new, old), restarted,
                             state)
    return turn + advance, block_done, state


def _record(physics: Physics, problem: Problem, layout: _Layout, grid: Grid, carry: Carry,
            steps: Array | None = None) -> tuple[Carry, Trajectory]:
    """One record interval: `grid.steps_per_record` steps, or `steps` (a traced count, so that
    one compiled program serves every step size; not reverse-differentiable)."""

    def body(inner: tuple[Carry, _Sums], _: None) -> tuple[tuple[Carry, _Sums], None]:
        current, sums = inner
        current, now = _step(physics, problem, layout, current)
        return (current, sums.add(now)), None

    links, controllers = carry.queue.shape[0], carry.delivered.shape[0]
    dtype = carry.queue.dtype
    start = _Sums(jnp.zeros((5, links), dtype), jnp.zeros((2, controllers), dtype),
                  jnp.full((2, links), -jnp.inf, dtype))
    if steps is None:
        (carry, sums), _ = jax.lax.scan(body, (carry, start), None, length=grid.steps_per_record)
        n = grid.steps_per_record
    else:
        carry, sums = jax.lax.fori_loop(0, steps, lambda _, inner: body(inner, None)[0],
                                        (carry, start))
        n = jnp.maximum(steps, 1).astype(carry.queue.dtype)  # 0: a record not run
    arrival, departure, drop, mark, pause = sums.links / n
    flow_rate, send_rate = sums.flows / n
    sample = Trajectory(
        queue=carry.queue, queue_max=sums.extremes[0], queue_min=-sums.extremes[1],
        arrival=arrival, departure=departure, drop=drop, mark=mark, pause=pause,
        flow_rate=flow_rate, send_rate=send_rate,
        rtt=carry.rtt, state=carry.state, delivered=carry.delivered,
        completion=carry.completion, block_done=carry.block_done, dt=problem.dt,
        stall=carry.timers.stall,
        timeouts=carry.timers.count, resent=carry.timers.lost,
    )
    return carry, sample


def run_records(physics: Physics, problem: Problem, grid: Grid, carry: Carry,
                records: int, steps: Array | None = None, active: Array | None = None
                ) -> tuple[Carry, Trajectory]:
    """Advance `records` sample intervals from `carry`; the building block for progress bars.
    `steps` (traced) overrides the grid's steps per record (`solvers.stepping`); with it,
    `active` (traced) runs only the first `active` records, the others taking no step (their
    samples are to be dropped), so that one compiled program serves shorter segments."""

    layout = _prepare(problem)

    def body(current: Carry, index: Array) -> tuple[Carry, Trajectory]:
        taken = steps if active is None else jnp.where(index < active, steps, 0)
        return _record(physics, problem, layout, grid, current, taken)

    return jax.lax.scan(body, carry, jnp.arange(records))


@partial(jax.jit, static_argnums=(0, 2))
def integrate(physics: Physics, problem: Problem, grid: Grid) -> Trajectory:
    """The whole run in one compiled scan (see the module docstring for the method)."""
    carry = initial_carry(physics, problem, grid)
    _, trajectory = run_records(physics, problem, grid, carry, grid.records)
    return trajectory
