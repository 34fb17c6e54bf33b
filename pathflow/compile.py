"""From a validated scenario to the arrays the solver runs on (DESIGN §3).

`compile_scenario` builds the network and routes, then packs links, paths and controllers into a
`Problem` and chooses the time grid:

- base RTT of a path: per hop, propagation delay plus the serialisation of one full packet, out
  along the path; back along the reverse links with an ACK of `[transport] ack_size` (64 bytes by
  default; store-and-forward, as ns-3 and hardware switches do; `topology.path_base_rtt`). On the
  seed 003 star (100 Mb/s, 62.5 us per link) this is 0.51 ms.
- ACKs (`_ack_arrays`): each link's reverse link, where the ACKs of the data it carries return
  and wait, and per controller the ACK bytes per delivered data byte, ack_size / (mss x d) with
  d the segments per ACK (`segments_per_ack`). The solver adds the ACKs to the arrivals of the
  reverse links and their queueing to the round trip (`solvers.dde`); `ack_size = "0B"` leaves
  both out (every reverse index the padding link, every ratio 0).
- dt: 1/20 of the smallest base RTT (1/10 for rate-based models, `solvers.stepping.STEPS_PER_RTT`),
  at most half of RED's averaging time constant (DESIGN §4) and at most a quarter of the model's
  fastest time constant (`CongestionModel.fastest_rate`: DCQCN's timers); this is the finest step.
  Unless `[run] dt` fixes the step, the solver coarsens it between record segments to the same
  fraction of the round trips that limit the senders (`solvers.stepping`), never beyond the
  record interval or RED's bound.
- history: the largest possible round trip (base RTT plus every switch buffer on the path full,
  and with ACKs those of the reverse links that can queue) in steps.
- records: `[run] sample` if given, else `default_records`: as many samples as fit a budget of
  about 5e5 values per variable (at least 500, at most 20 000), so that memory stays small for
  large networks. The packet engine keeps as many.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pathflow.models import timeouts
from pathflow.models.aqm import Queues
from pathflow.models.base import CongestionModel, Context
from pathflow.models.mixture import Mixture
from pathflow.models.parameters import Parameter
from pathflow.models.registry import CONTROLS
from pathflow.routing import Routes, build_routes
from pathflow.scenario import Scenario
from pathflow.solvers.dde import ring_bytes
from pathflow.solvers.problem import Grid, Physics, Problem, cast_problem, with_hop_layout
from pathflow.solvers.stepping import STEPS_PER_RTT, Stepping
from pathflow.topology import (
    Network,
    build_network,
    path_base_rtt,
    pfc_sharing,
    pfc_thresholds,
)

__all__ = ["ACK_BYTES", "Compiled", "choose_grid", "compile_scenario", "default_records",
           "segments_per_ack"]

ACK_BYTES = 64.0  # a pure ACK on the wire (TCP + IP + link headers, timestamps on)
DELAYED_ACK = 2  # segments per ACK of a Linux or ns-3 receiver (RFC 1122, RFC 5681 4.2)
_PAD_CAPACITY = 1e30  # the padding link: never a bottleneck, never a queue
_RECORD_BUDGET = 500_000  # recorded values per variable, over all its links and flows


@dataclass(frozen=True)
class Compiled:
    scenario: Scenario
    network: Network
    routes: Routes
    physics: Physics
    problem: Problem
    grid: Grid
    stepping: Stepping | None  # None: the step stays at dt throughout
    controller_of: np.ndarray  # per subflow of `routes`, its controller (`_exchangeable`)

    @property
    def model(self) -> CongestionModel:
        return self.physics.model

    @property
    def dt(self) -> float:
        return float(self.problem.dt)

    @property
    def sample_interval(self) -> float:
        return self.dt * self.grid.steps_per_record


def _queue_params(scenario: Scenario, network: Network) -> tuple[Queues, Any, np.ndarray]:
    """Capacity, buffer and PFC thresholds of every link, the discipline's values (a switch
    port's from the scenario, the discipline's inert ones at host NICs, plain drop-tail, and
    the padding link), and each link's PFC group (`topology.pfc_sharing`)."""
    discipline, values = scenario.discipline, scenario.si.aqm.parameters
    hosts = set(network.hosts)
    rows = [discipline.inert() if link.src in hosts
            else discipline.port(values, link.capacity, scenario.si.transport.mss)
            for link in network.links]
    capacity = np.array([link.capacity for link in network.links] + [_PAD_CAPACITY])
    buffer = np.array([link.buffer for link in network.links] + [_PAD_CAPACITY])
    xoff, xon = pfc_thresholds(scenario, network)
    alpha, room, group = pfc_sharing(scenario, network)
    delay = np.array([link.delay for link in network.links] + [0.0])
    queues = Queues(capacity, buffer, np.array([*xoff, math.inf]), np.array([*xon, math.inf]),
                    delay, np.array([*alpha, 0.0]), np.array([*room, 0.0]))
    return (queues, discipline.pack([*rows, discipline.inert()]),
            np.array([*group, len(network.links)], dtype=np.int32))


def segments_per_ack(ack_ratio: float) -> int:
    """Data segments per ACK of a receiver: every 2nd (delayed ACKs, Linux and ns-3) unless
    ack_ratio b is an integer >= 2, then every b-th (the packet engine's receiver, so that one
    window increase per ACK gives the window models' 1/b segment per RTT)."""
    return int(ack_ratio) if ack_ratio >= 2 and float(ack_ratio).is_integer() else DELAYED_ACK


def _reverse_links(network: Network, acks: bool) -> np.ndarray:
    """(L+1,) each link's reverse link (the padding link L where there is none, and for every
    link without ACKs)."""
    n_links = len(network.links)
    if not acks:
        return np.full(n_links + 1, n_links, dtype=np.int32)
    index = network.index
    return np.array([index.get(f"{link.dst}->{link.src}", n_links) for link in network.links]
                    + [n_links], dtype=np.int32)


def _ack_ratios(scenario: Scenario, routes: Routes) -> np.ndarray:
    """(F,) ACK bytes per delivered data byte of each subflow: ack_size / (mss x d), d the
    segments per ACK of its group's ack_ratio (rate-based senders, without one: every 2nd)."""
    transport = scenario.si.transport
    per_group = [transport.ack_size / (transport.mss * segments_per_ack(
        float(group.transport.parameters.get("ack_ratio", 1.0)))) for group in scenario.si.groups]
    return np.array([per_group[routes.flows[f].group] for f in routes.subflow_flow])


def _queueing_reverse(network: Network, routes: Routes, reverse: np.ndarray, ack_most: float
                      ) -> set[int]:
    """Links whose reverse link can hold a queue: it carries data, or the ACKs of everything
    that can enter the link (at most the capacity into its source node, times `ack_most` ACK
    bytes per data byte) can exceed its rate. A receiver's own link that carries only ACKs
    cannot queue, so its buffer does not lengthen the delay history."""
    carried = {i for path in routes.paths for i in path}
    links = network.links
    into: dict[str, float] = {}
    for link in links:
        into[link.dst] = into.get(link.dst, 0.0) + link.capacity
    found = set()
    for i, link in enumerate(links):
        back = int(reverse[i])
        if back >= len(links):
            continue
        inflow = max(into.get(link.src, 0.0), link.capacity)
        if back in carried or ack_most * inflow > links[back].capacity:
            found.add(i)
    return found


def _path_arrays(scenario: Scenario, network: Network, routes: Routes, nics: set[int],
                 reverse: np.ndarray, ack_most: float
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n_links = len(network.links)
    width = max(len(path) for path in routes.paths)
    hops = np.full((len(routes.paths), width), n_links, dtype=np.int32)
    base = np.zeros(len(routes.paths))
    largest = np.zeros(len(routes.paths))
    transport = scenario.si.transport
    queueing_back = _queueing_reverse(network, routes, reverse, ack_most)
    for p, path in enumerate(routes.paths):
        hops[p, : len(path)] = path
        base[p] = path_base_rtt(network, path, transport.mss, transport.ack_size)
        for index in path:
            link = network.links[index]
            if index not in nics:  # host NICs never queue (backpressure, see solvers.dde)
                largest[p] += link.buffer / link.capacity
            if index in queueing_back and int(reverse[index]) not in nics:  # its ACKs wait
                back = network.links[int(reverse[index])]
                largest[p] += back.buffer / back.capacity
    return hops, base, base + largest


def _subflow_nics(network: Network, routes: Routes) -> np.ndarray:
    """Each subflow's NIC: the host link all its paths leave by (a multi-homed host's subflows
    each have their own); L where its paths leave by several, whose host links then behave as
    ordinary queues."""
    first: list[set[int]] = [set() for _ in routes.subflow_flow]
    for path, subflow in zip(routes.paths, routes.path_subflow, strict=True):
        first[subflow].add(path[0])
    return np.array([next(iter(links)) if len(links) == 1 else len(network.links)
                     for links in first], dtype=np.int32)


def _exchangeable(routes: Routes, representatives: int = 0) -> np.ndarray:
    """Per subflow, the controller that runs it. Flows of one subflow that nothing tells apart
    (traffic group, start, size, paths and their split) share one controller, run once and
    counted as many: exact, since the model is deterministic and they see one network (an N:1
    incast from 8 hosts runs 8 controllers). A multipath connection's subflows keep their own.

    With `representatives` > 0 (flows that may time out, each at a moment of its own) a class
    is dealt round-robin to at most that many controllers, each standing for its share of the
    class and drawing its own timeouts: a sample of the class's timeout states (the particle
    form of the mean field; `models.timeouts`). A class no larger runs every flow."""
    paths_of: dict[int, list[tuple[tuple[int, ...], float]]] = {}
    for path, subflow, weight in zip(routes.paths, routes.path_subflow, routes.path_weight,
                                     strict=True):
        paths_of.setdefault(subflow, []).append((path, weight))
    subflows = np.bincount(routes.subflow_flow)
    classes: dict[tuple[Any, ...], int] = {}
    dealt: dict[tuple[Any, ...], int] = {}
    controller_of = np.empty(len(routes.subflow_flow), dtype=np.int64)
    for s, f in enumerate(routes.subflow_flow):
        flow = routes.flows[f]
        key = ((flow.group, flow.start, flow.size, tuple(paths_of[s])) if subflows[f] == 1
               else ("subflow", s))
        if representatives:
            seat = dealt.get(key, 0)
            dealt[key] = seat + 1
            key = (*key, seat % representatives)
        controller_of[s] = classes.setdefault(key, len(classes))
    return controller_of


def _run_once(problem: Problem, controller_of: np.ndarray) -> Problem:
    """`problem` with one controller per class of `controller_of` (numbered in order of first
    appearance), its `count` the class's size."""
    first = np.unique(controller_of, return_index=True)[1]  # each class's first subflow
    flow_of = np.asarray(problem.subflow_flow)
    flow_first = np.unique(flow_of, return_index=True)[1]  # each flow's first subflow
    kept = np.isin(np.asarray(problem.path_subflow), first)
    return problem._replace(
        path_hops=np.asarray(problem.path_hops)[kept],
        path_subflow=controller_of[np.asarray(problem.path_subflow)[kept]].astype(np.int32),
        path_weight=np.asarray(problem.path_weight)[kept],
        path_base_rtt=np.asarray(problem.path_base_rtt)[kept],
        subflow_flow=controller_of[flow_first[flow_of[first]]].astype(np.int32),
        nic=np.asarray(problem.nic)[first],
        start=np.asarray(problem.start)[first],
        size=np.asarray(problem.size)[first],
        rounds=np.asarray(problem.rounds)[first],
        barrier=controller_of[np.asarray(problem.barrier)[first]].astype(np.int32),
        count=np.bincount(controller_of).astype(float),
        packet=np.asarray(problem.packet)[first],
        ack=np.asarray(problem.ack)[first],
        rto_min=np.asarray(problem.rto_min)[first],
        probe=np.asarray(problem.probe)[first],
        draws=np.asarray(problem.draws)[first],
        params=jax.tree.map(lambda values: np.asarray(values)[first], problem.params),
    )


def default_records(width: int) -> int:
    """How many records a run keeps where `[run] sample` does not say: as many as fit the
    budget of values per variable, `width` of them (links + flows) per record, at least 500 (fewer
    say little) and at most 20 000."""
    return int(np.clip(_RECORD_BUDGET // max(width, 1), 500, 20_000))


def _longest_step(aqm: Any, model_rate: float) -> float:
    """The largest step RED's averaging and the model's own time constants allow (s)."""
    averaging = np.asarray(getattr(aqm, "avg_rate", np.array([np.inf])))
    fastest = float(averaging[np.isfinite(averaging)].max(initial=0.0))
    bounds = [0.5 / fastest if fastest > 0 else math.inf,
              0.25 / model_rate if model_rate > 0 else math.inf]
    return min(bounds)


def choose_grid(scenario: Scenario, base_rtt: np.ndarray, largest_rtt: np.ndarray,
                aqm: Any, width: int, model_rate: float = 0.0,
                per_rtt: int = STEPS_PER_RTT["window"]) -> tuple[float, Grid]:
    """dt and the record/history sizes for this scenario (see the module docstring);
    `model_rate`: the model's `fastest_rate` (1/s); `per_rtt`: steps per base round trip."""
    run = scenario.si.run
    if run.dt is not None:
        dt = run.dt
    else:
        dt = min(float(base_rtt.min()) / per_rtt, _longest_step(aqm, model_rate))
    steps = math.ceil(run.duration / dt - 1e-9)
    if run.sample is not None:
        per_record = max(1, round(run.sample / dt))
    else:
        per_record = max(1, math.ceil(steps / default_records(width)))
    records = math.ceil(steps / per_record)
    history = math.ceil(float(largest_rtt.max()) / dt) + 3
    return dt, Grid(per_record, records, history)


def compile_scenario(scenario: Scenario, exchangeable: bool = True) -> Compiled:
    """Network, routes and the solver's arrays for one scenario; `exchangeable`: flows that
    nothing tells apart run once (`_exchangeable`; False runs every flow, as a check)."""
    network = build_network(scenario)
    routes = build_routes(scenario, network)
    transport = scenario.si.transport
    model, params = _controls(scenario, network, routes)
    queues, aqm, pfc_group = _queue_params(scenario, network)
    nic = _subflow_nics(network, routes)
    acks = transport.ack_size > 0
    reverse = _reverse_links(network, acks)
    ack = _ack_ratios(scenario, routes)
    hops, base_rtt, largest_rtt = _path_arrays(scenario, network, routes, set(nic.tolist()),
                                               reverse, float(ack.max(initial=0.0)))
    n_subflows = len(routes.subflow_flow)
    # flows that may time out do so at moments of their own (`models.timeouts`): a class of
    # them runs as at most `[run] representatives` controllers, each a sample of its timeouts
    timed_out = model.min_window(params) is not None
    random = timed_out or model.has_events
    representatives = scenario.si.run.representatives if random else 0
    if exchangeable and (representatives or not random):
        controller_of = _exchangeable(routes, representatives)
    else:
        controller_of = np.arange(n_subflows)
    model_rate = model.fastest_rate(params)
    per_rtt = STEPS_PER_RTT[model.sends]
    dt, grid = choose_grid(scenario, base_rtt, largest_rtt, aqm, len(network.links) + n_subflows,
                           model_rate, per_rtt)
    history_bytes = ring_bytes(grid.history, int(controller_of.max()) + 1)
    if history_bytes > 4e9:
        warnings.warn(f"the delay history needs {history_bytes / 1e9:.1f} GB: buffers allow round "
                      f"trips of {largest_rtt.max() * 1e3:.1f} ms at dt = {dt * 1e6:.2f} us; "
                      "consider smaller buffers or a larger [run] dt", stacklevel=2)
    owners = [routes.flows[f] for f in routes.subflow_flow]  # each subflow's flow
    problem = Problem(
        queues=queues,
        aqm=aqm,
        path_hops=hops,
        path_subflow=np.asarray(routes.path_subflow, dtype=np.int32),
        path_weight=np.asarray(routes.path_weight),
        path_base_rtt=base_rtt,
        subflow_flow=np.asarray(routes.subflow_flow, dtype=np.int32),
        nic=nic,
        pfc_group=pfc_group,
        reverse=reverse,
        start=np.array([flow.start for flow in owners]),
        size=np.array([flow.size for flow in owners]),
        rounds=np.array([flow.rounds for flow in owners], dtype=np.int32),
        barrier=_barriers(routes),
        count=np.ones(n_subflows),
        packet=np.full(n_subflows, transport.mss),
        ack=ack,
        rto_min=np.full(n_subflows, transport.rto_min),
        probe=np.full(n_subflows, float(transport.sack and transport.recovery == "linux")),
        draws=_timeout_draws(scenario.si.run.seed, n_subflows),
        params=params,
        dt=np.asarray(dt),
    )
    problem = with_hop_layout(_run_once(problem, controller_of))  # solvers.problem.hop_layout
    dtype = jnp.float32 if scenario.si.run.precision == "float32" else jnp.float64
    physics = Physics(model, scenario.discipline, scenario.si.run.feedback_delay,
                      _pause_history(queues, dt), timed_out,
                      max((flow.rounds for flow in routes.flows), default=1))
    return Compiled(scenario, network, routes, physics, cast_problem(problem, dtype), grid,
                    _stepping(scenario, dt, grid, _longest_step(aqm, model_rate), per_rtt),
                    controller_of)


def _barriers(routes: Routes) -> np.ndarray:
    """Per subflow, its barrier: the first subflow of its traffic group where the group's
    flows have rounds (they wait for each other between rounds), else its own index."""
    first: dict[int, int] = {}
    barrier = np.arange(len(routes.subflow_flow), dtype=np.int32)
    for s, f in enumerate(routes.subflow_flow):
        flow = routes.flows[f]
        if flow.rounds > 1:
            barrier[s] = first.setdefault(flow.group, s)
    return barrier


def _timeout_draws(seed: int, subflows: int) -> np.ndarray:
    """(subflows, timeouts.DRAWS) Exp(1) thresholds of each subflow's successive timeouts,
    from the run's seed (a stream of its own, so that routing's draws do not move them)."""
    rng = np.random.default_rng([seed, 0x7105])
    return rng.exponential(1.0, (subflows, timeouts.DRAWS))


def _pause_history(queues: Queues, dt: float) -> int:
    """Steps of PFC decisions the solver keeps: enough to cover the longest PAUSE frame's flight
    (a link's propagation delay) at the finest step; 0 without PFC."""
    paused = np.isfinite(queues.xoff)
    if not paused.any():
        return 0
    return math.ceil(float(np.max(queues.pause_delay[paused])) / dt) + 2


def _controls(scenario: Scenario, network: Network, routes: Routes
              ) -> tuple[CongestionModel, Any]:
    """The congestion-control model and its per-subflow values: the groups' control itself
    where they all run one (with each group's values on its subflows), else a `Mixture` of the
    distinct ones (a control with other structural choices counts as distinct). A rate
    parameter left unset is the model's choice (`CongestionModel.unset`: a rate-based sender's
    `line_rate` is the subflow's NIC rate)."""
    groups = scenario.si.groups
    group_of = np.array([routes.flows[f].group for f in routes.subflow_flow])
    built = [CONTROLS[g.transport.cc].build(g.transport.parameters) for g in groups]
    parts = list(dict.fromkeys(built))
    part_of = np.array([parts.index(model) for model in built])
    host_link: dict[int, int] = {}  # each subflow's first path's first link
    for path, subflow in zip(routes.paths, routes.path_subflow, strict=True):
        host_link.setdefault(int(subflow), path[0])
    nic_rate = [network.links[host_link[s]].capacity / scenario.si.transport.mss
                for s in range(len(routes.subflow_flow))]  # packets/s
    context = Context(np.array(nic_rate), np.array(routes.receiver_flows(), dtype=float))

    def values(index: int, part: CongestionModel) -> Any:
        members = np.flatnonzero(part_of == index)
        # another part's subflow holds the first member group's values: valid, never used
        source = np.where(part_of[group_of] == index, group_of, members[0])

        def column(parameter: Parameter) -> np.ndarray:
            given = [groups[g].transport.parameters[parameter.name] for g in source]
            unset = part.unset(parameter.name, context)
            return np.array([unset[s] if value is None else float(value)
                             for s, value in enumerate(given)])

        return part.Params(*(column(p) for p in part.values()))

    if len(parts) == 1:
        return parts[0], values(0, parts[0])
    mixture = Mixture(tuple(parts))
    return mixture, mixture.pack(part_of[group_of], [values(i, p) for i, p in enumerate(parts)])


def _stepping(scenario: Scenario, dt: float, grid: Grid, longest: float, per_rtt: int
              ) -> Stepping | None:
    """How the solver may coarsen the step: up to the record interval, and no further than
    `longest` (RED's averaging, the model's time constants) or `per_rtt` steps per limiting
    round trip; None where `[run] dt` fixes it or nothing coarser is allowed."""
    if scenario.si.run.dt is not None:
        return None
    finest = grid.steps_per_record
    if longest <= dt:
        return None
    return Stepping(dt * finest, finest, longest, per_rtt)
