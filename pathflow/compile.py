"""From a validated scenario to the arrays the solver runs on (DESIGN §3).

`compile_scenario` builds the network and routes, then packs links, paths and controllers into a
`Problem` and chooses the time grid:

- base RTT of a path: per hop, propagation delay plus the serialisation of one full packet, out
  along the path; back along the reverse links with a 64-byte ACK (store-and-forward, as ns-3 and
  hardware switches do). On the seed 003 star (100 Mb/s, 62.5 us per link) this is 0.51 ms.
- dt: 1/20 of the smallest base RTT, and at most half of RED's averaging time constant (DESIGN §4);
  `[run] dt` overrides it.
- history: the largest possible round trip (base RTT plus every switch buffer on the path full)
  in steps.
- records: `[run] sample` if given, else as many samples as fit a budget of about 5e5 values per
  variable (at least 500, at most 20 000), so that memory stays small for large networks.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

from pathflow.models.aqm import QueueParams
from pathflow.models.base import CongestionModel, ControllerParams
from pathflow.models.registry import get_model
from pathflow.routing import Routes, build_routes
from pathflow.scenario import Scenario
from pathflow.solvers.problem import Grid, Problem, cast_problem
from pathflow.topology import Network, build_network
from pathflow.units import parse_time

__all__ = ["ACK_BYTES", "Compiled", "choose_grid", "compile_scenario"]

ACK_BYTES = 64.0  # a pure ACK on the wire (TCP + IP + link headers, timestamps on)
_PAD_CAPACITY = 1e30  # the padding link: never a bottleneck, never a queue
_RECORD_BUDGET = 500_000


@dataclass(frozen=True)
class Compiled:
    scenario: Scenario
    network: Network
    routes: Routes
    model: CongestionModel
    problem: Problem
    grid: Grid

    @property
    def dt(self) -> float:
        return float(self.problem.dt)

    @property
    def sample_interval(self) -> float:
        return self.dt * self.grid.steps_per_record


def _queue_params(scenario: Scenario, network: Network) -> QueueParams:
    kind = scenario.spec.aqm.kind
    aqm = scenario.aqm_si
    hosts = set(network.hosts)
    rows = []
    for link in network.links:
        at_switch = link.src not in hosts  # hosts' NIC queues are plain drop-tail
        if kind == "ecn_step" and at_switch:
            rows.append((aqm["threshold"], aqm["threshold"], 1.0, math.inf, 1.0))
        elif kind == "red" and at_switch:
            weight = min(aqm["weight"], 1 - 1e-12)
            rate = -math.log1p(-weight) * link.capacity / scenario.packet_bytes
            rows.append((aqm["min"], aqm["max"], aqm["pmax"], rate, float(scenario.marks_ecn)))
        else:
            rows.append((math.inf, math.inf, 1.0, math.inf, 0.0))
    rows.append((math.inf, math.inf, 1.0, math.inf, 0.0))  # padding link
    columns = np.array(rows, dtype=np.float64).T
    capacity = np.array([link.capacity for link in network.links] + [_PAD_CAPACITY])
    buffer = np.array([link.buffer for link in network.links] + [_PAD_CAPACITY])
    return QueueParams(capacity, buffer, *columns)


def _path_arrays(scenario: Scenario, network: Network, routes: Routes
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n_links = len(network.links)
    nics = {_host_link(network, host) for host in network.hosts}
    width = max(len(path) for path in routes.paths)
    hops = np.full((len(routes.paths), width), n_links, dtype=np.int32)
    base = np.zeros(len(routes.paths))
    largest = np.zeros(len(routes.paths))
    for p, path in enumerate(routes.paths):
        hops[p, : len(path)] = path
        for index in path:
            link = network.links[index]
            back = network.links[network.link_between(link.dst, link.src)]
            base[p] += (2 * link.delay + scenario.packet_bytes / link.capacity
                        + ACK_BYTES / back.capacity)
            if index not in nics:  # host NICs never queue (backpressure, see solvers.dde)
                largest[p] += link.buffer / link.capacity
    return hops, base, base + largest


def _host_link(network: Network, host: str) -> int:
    """The host's egress link (hosts attach by one link in every built-in topology); L if the
    host has several, which then behave as ordinary queues."""
    links = [i for i, link in enumerate(network.links) if link.src == host]
    return links[0] if len(links) == 1 else len(network.links)


def choose_grid(scenario: Scenario, base_rtt: np.ndarray, largest_rtt: np.ndarray,
                queues: QueueParams, width: int) -> tuple[float, Grid]:
    """dt and the record/history sizes for this scenario (see the module docstring)."""
    run = scenario.spec.run
    if run.dt is not None:
        dt = parse_time(run.dt, "run.dt")
    else:
        dt = float(base_rtt.min()) / 20
        red = np.asarray(queues.avg_rate)[np.isfinite(queues.avg_rate)]
        if red.size:
            dt = min(dt, 0.5 / float(red.max()))
    steps = math.ceil(scenario.duration / dt - 1e-9)
    if run.sample is not None:
        per_record = max(1, round(parse_time(run.sample, "run.sample") / dt))
    else:
        records = int(np.clip(_RECORD_BUDGET // max(width, 1), 500, 20_000))
        per_record = max(1, math.ceil(steps / records))
    records = math.ceil(steps / per_record)
    history = math.ceil(float(largest_rtt.max()) / dt) + 3
    return dt, Grid(per_record, records, history)


def compile_scenario(scenario: Scenario) -> Compiled:
    """Network, routes and the solver's arrays for one scenario."""
    network = build_network(scenario)
    routes = build_routes(scenario, network)
    model = get_model(scenario.spec.transport.cc, scenario.spec.transport.reaction)
    queues = _queue_params(scenario, network)
    hops, base_rtt, largest_rtt = _path_arrays(scenario, network, routes)
    n_flows = len(routes.flows)
    dt, grid = choose_grid(scenario, base_rtt, largest_rtt, queues,
                           len(network.links) + n_flows)
    history_bytes = grid.history * 4 * n_flows * 8  # the feedback ring buffer
    if history_bytes > 4e9:
        warnings.warn(f"the delay history needs {history_bytes / 1e9:.1f} GB: buffers allow round "
                      f"trips of {largest_rtt.max() * 1e3:.1f} ms at dt = {dt * 1e6:.2f} us; "
                      "consider smaller buffers or a larger [run] dt", stacklevel=2)
    transport = scenario.spec.transport
    mss = scenario.packet_bytes

    def per_flow(value: float) -> np.ndarray:
        return np.full(n_flows, value, dtype=np.float64)

    params = ControllerParams(
        mss=per_flow(mss),
        g=per_flow(transport.g),
        ack_ratio=per_flow(transport.ack_ratio),
        init_cwnd=per_flow(scenario.size(transport.init_cwnd, "transport.init_cwnd") / mss),
        min_cwnd=per_flow(scenario.size(transport.min_cwnd, "transport.min_cwnd") / mss),
        ssthresh=per_flow(scenario.size(transport.ssthresh, "transport.ssthresh",
                                        allow_inf=True) / mss),
    )
    problem = Problem(
        queues=queues,
        path_hops=hops,
        path_controller=np.asarray(routes.path_flow, dtype=np.int32),
        path_weight=np.asarray(routes.path_weight),
        path_base_rtt=base_rtt,
        nic=np.array([_host_link(network, flow.src) for flow in routes.flows], dtype=np.int32),
        start=np.array([flow.start for flow in routes.flows]),
        size=np.array([flow.size for flow in routes.flows]),
        active=np.ones(n_flows),
        params=params,
        dt=np.asarray(dt),
    )
    dtype = jnp.float32 if scenario.spec.run.precision == "float32" else jnp.float64
    return Compiled(scenario, network, routes, model, cast_problem(problem, dtype), grid)
