"""Where a network settles, from each model's steady-state equations (issue 12, item 1: Reno,
DCTCP, DCQCN, DCQCN+ and dcqcn+static on one path per flow; MPTCP connections on one path per
subflow).

Model
-----
At rest a controller's rate is a function of the congestion signals its path returns (the
marked and the dropped fraction, m = 1 - prod_l (1 - p_l) over the path's links) and of its
round trip R = base + sum_l q_l / C_l, each model's own (`analysis.controller_rest`: Reno and
DCTCP in their mean-field form, DCQCN, dcqcn+static, DCQCN+). Not so for MPTCP (models/mptcp.py:
LIA, OLIA, BALIA, uncoupled subflows): a subflow's growth reads its siblings' windows, so no
formula gives its window from its own signals; the subflows' windows (and OLIA's count of
packets between losses, and how much each NIC lets windows grow) join the links' positions
as unknowns, with the model's own derivative at rest (`analysis.subflow_rest`, which also
says how OLIA's sliding modes are found, and why a connection's twin subflows are evened).

A marking link (RED, models/aqm.py, whose average equals the queue at rest; DCQCN's marking)
marks or drops with p_l = pmax (q_l - min) / (max - min) on its ramp. The ECN step at K marks
every packet above K and none below: no queue gives a probability in between, and the rest is
a sliding mode on q = K (Filippov) in which what the flows see is the fraction theta of the
time marked, during which lambda = 1 / R: 1 / b = W c theta (DCTCP: W = 2 / (b theta^2), the
fixed point alpha* = sqrt(2 / W*) of Alizadeh et al. 2011). Past theta = 1 every window sits at
its floor and the queue stands above K (a large incast: N min_cwnd MSS - C base). The network
is at rest where every marking link is either loaded to its capacity with a queue (or a marked
fraction), or has none and spare capacity:

    s_l >= 0,   C_l - sum_r R_lr x_r >= 0,   s_l (C_l - sum_r R_lr x_r) = 0,

s_l in [0, 1] the link's position along its queue (and, on the step, its marked fraction),
solved as a system of Fischer-Burmeister equations, phi(a, b) = a + b - sqrt(a^2 + b^2) = 0,
by least squares (scipy's trust-region reflective method; for single paths Newton first, which
near the rest converges in a fifth of the steps). A flow whose path marks nothing is
held by its NIC (the solver's rule: a window that does not limit the rate does not grow), so
its rate is its NIC's rate shared with the NIC's other flows.

ACKs are load, as in the solver (`solvers.dde`): a flow delivering x bytes/s returns x a bytes/s
of ACKs (a = ack_size / (mss d), d segments per ACK) along the reverse of each hop, so the
links' balances count them and a flow's round trip adds the q / C of the links its ACKs cross;
a NIC sends its host's ACKs first, and its flows share the room they leave (a fixed point: the
ACKs' rates may be held by their own NICs). A host's port towards it then carries the data it
receives and the ACKs of what it sends: a flow that its NIC holds at line rate, less that
host's own ACKs, can fill it (a k = 4 fat-tree at 1 Gb/s: rates 33 % off with the ACKs left
out). Solved in two steps: first without ACKs (few links can fill), then with them from there,
for the links within 0.1 % of full once they are added and any the solve leaves overloaded.
With ACKs, links that carry the same data at the same capacity and marking differ only in the
ACKs that cross them, which the data flows' signals and round trips hardly tell apart: they
share one unknown, the queue held by the tightest of them (`_Shared`; which one may change as
the solve goes on), and only where that finds no rest (the queue splits between them, the
ACKs' rates balancing their loads through their round trips) does each get its own.
Where a link is overloaded by flows that their NICs hold (or sits below its marking's onset,
where only round trips move), no position moves its balance and the least squares stalls; the
positions of the overloaded links are then lifted, each by bisection, to where their load
fits (`bounded_roots.lift`), and the solve goes on from there. Links full by a tie (a flow
at its NIC's rate and another's ACKs; a link and the one before it carrying the same data and
equal ACKs) hold a queue that neither grows nor drains: the simulation keeps what its start-up
left, the rest state the least (the earlier link's, or none), unless the later link's ACKs
would then overload it: its queue is then part of the rest (the k = 4 fat-tree's hash seed 5,
where the later link was 0.3 % over with none).

Scope and limitations
---------------------
One path per subflow (no spraying), on links that mark on a ramp (RED marking or early-dropping;
DCQCN's marking) or on the ECN step. Reno and DCTCP in their mean-field form only: the
per-window form (DCTCP's default) rests in a sawtooth, as drop-tail does (refused;
`analysis.stability` and the validation's sawtooth closed forms cover them). On the step the
rest point is the centre of a limit cycle: the simulated rates and mean alpha meet it, the queue
swings around K. A path across several step-marking links combines their marked fractions as if
independent (on a 3-link parking lot the long flow's simulated rate is 13 % above the
prediction; 0.4 % on 2 links). With ACKs, where the solve with them does not converge, the
rest state is the one without ACK load, and says so (`equilibrium`'s attrs["acks"] = "left
out", and `pathflow analyze`): on the k = 8 fat-tree at 10 Gb/s (`bench_analyze.py`'s) Reno's
rest with ACKs is found on hash seeds 1 and 2 and DCTCP's on seed 1, not Reno's on seed 3
(it stalls at a residual of 3e-3, a link's queue just below its marking's onset, where its
balance hardly moves with its own position, pinned by the round trips of its flows); MPTCP's
likewise (the example k = 4 fat-tree at 1 Gb/s, whose NICs hold the subflows: LIA's and
BALIA's rests without the ACKs, 1e-10 and 2e-7, none with them).
Near-ties make some queues ill-conditioned: on the k = 4 fat-tree the simulation's queues at
two host ports are 5 % below the rest state's while every rate is within 1.2 %. DCQCN's
NIC-wide CNP capacity is left out (refused when set, for dcqcn+static too); DCQCN+'s is in (its
CNP period). On the seed 001 testbed's switch (DCQCN's marking, Pmax 1 %) DCQCN+ rests on the
ramp only where each flow's share is large (up to 8 flows at 10 Gb/s, 32 at 40 Gb/s; 9 and 36
need more than Pmax), so none of `pathflow sweep`'s default points (80 to 2,000 flows) has a
rest state. A rest state beyond a ramp's max (where RED and the standard DCQCN marking jump to
1), or beyond the buffer after a step, is reported as not found. Where the root solver
stalls, the point it stopped at is returned with its residual (`equilibrium`'s
attrs["residual"], which `pathflow analyze` prints above 1e-4): with RED at 30 to 300
packets and two subflows per connection, OLIA on the example k = 4 fat-tree (64 B ACKs)
stalls at 6.6e-3 (how often MPTCP's rests are found on other fat-trees:
`analysis.subflow_rest`). Each least squares stops once its sum of squares falls by less
than 1 % in 100 evaluations: that OLIA took 40 s where it ran past ten minutes. A rest state
need not be stable: DCQCN with the cx4 parameters has one, and cycles around it (notebook 03;
`analysis.stability` says which), as does DCQCN+ with 2 flows at 10 Gb/s. dcqcn+static on the
testbed's switch rests on the ramp at 40 Gb/s with 2, 4 and 8 flows (not 16 or 32) and at
100 Gb/s with all five (of 2, 4, 8, 16 and 32 tried), at 10 and 25 Gb/s with none; at 40 Gb/s
that rest is locally stable, yet the simulation started at line rate (2, 4 and 8 flows) holds a
cycle from an empty queue to past Kmax, where the marking jumps to 1 (0.74 ms a period with 2
flows); at 100 Gb/s it settles.

Validated by tests/test_equilibrium.py: the closed form of one RED bottleneck (N flows share C:
p* = 2 / (b W*^2) with W* = C R* / N and R* = base + q*/C, q* on the ramp), the fluid
simulation's steady state on parking lots and a k = 4 fat-tree (ACKs of no size) within 2 % for
Reno and DCTCP on RED (and for Reno the utility optimum of `analysis.fairness` at the
equilibrium's round trips: the NUM view), the same fat-tree with 64 B ACKs (DCTCP: rates
within 2 % on two hash seeds, queues on one; Reno predicted unstable, and the simulation
cycles), DCTCP on
the ECN step against alpha* = sqrt(2 / (b W*)) and the simulated mean alpha (2 %), a 320-flow
incast's standing queue against N min_cwnd MSS - C base and the simulation, and DCQCN's fixed
point on one 40 Gb/s link (validation/cases/dcqcn.py's scalar root) with the simulation settling
there. tests/test_equilibrium_dcqcn_plus.py: DCQCN+'s rest rate against its own ODE (the model's
derivative, p held) integrated to rest by scipy (1e-6; measured 1e-13), with tau_c set by
cnp_interval and by n / cnp_capacity and R_T at the line rate; 2 and 4 flows at 40 Gb/s on the
testbed's switch, where the simulation settles at the rest state (rates, queue and marking
within 2 %; measured 2e-4); dcqcn+static's rest rate against `dcqcn_rest_rate`
(`analysis.controller_rest`) at the timer and step its docstring states (3.1 N us, 256 / N
Mb/s, rounded; 3, 4 and 7 flows at 100 Gb/s: 1e-9, measured 2e-14), and 4 flows at 100
Gb/s, where the simulation settles at the rest state (rates, queue and marking within 2 %;
measured 1.3e-4). tests/test_equilibrium_mptcp.py: LIA's
closed form on one RED link (1e-6), and the simulation's steady state on two paths (LIA, OLIA,
BALIA, uncoupled) and a k = 4 fat-tree with two subflows per connection (LIA, BALIA, uncoupled)
within 2 %.
tests/test_stability.py: the k = 8 fat-tree's rest state with ACKs (Reno, hash seed 1) found,
and nearer the simulated mean rates than the one without their load (the simulation cycles).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import xarray as xr

from pathflow.analysis.bounded_roots import bounded_root, lift
from pathflow.analysis.controller_rest import controller_rest_rate
from pathflow.analysis.fairness import Network, network_of
from pathflow.analysis.subflow_rest import MULTIPATH, CoupledWindows, fischer_burmeister
from pathflow.compile import Compiled, compile_scenario
from pathflow.scenario import Scenario, ScenarioError

__all__ = ["RestState", "equilibrium", "rest_state"]


class RestState(NamedTuple):
    """The rest state per solver controller (`Problem.count` flows each) and per link."""

    compiled: Compiled
    network: Network
    queue: np.ndarray  # (links,) bytes
    probability: np.ndarray  # (links,) marking or early-drop probability
    rate: np.ndarray  # (controllers,) bytes/s
    window: np.ndarray  # (controllers,) packets; NaN for a rate-based sender
    rtt: np.ndarray  # (controllers,) s
    residual: float  # the largest Fischer-Burmeister residual (0 at an exact rest state)


def equilibrium(scenario: Scenario, rest: RestState | None = None) -> xr.Dataset:
    """The rest state of `scenario` (see the module docstring): per flow (connection) its rate
    (bytes/s), window (packets, the sum over its subflows; NaN for DCQCN) and round trip (s, its
    subflows' mean weighted by their rates); the same per subflow (`subflow_rate`,
    `subflow_window`, `subflow_rtt`, `subflow_flow` naming its flow); per link its queue
    (bytes), marking or early-drop probability and load (bytes/s, data and ACKs). attrs:
    `residual`, the largest Fischer-Burmeister residual (0 at an exact rest state); `acks`, how
    the ACKs enter: "load" (as load and in the round trips), "none" (they have no size), or
    "left out" (no rest state found with them: the module docstring). `rest`: the rest state
    already found for `scenario` (`rest_state`)."""
    rest = rest or rest_state(scenario)
    routes = rest.compiled.routes
    controller = np.asarray(rest.compiled.controller_of)  # per subflow
    owner = np.asarray(routes.subflow_flow)
    flows = len(routes.flows)
    rate, window, rtt = rest.rate[controller], rest.window[controller], rest.rtt[controller]
    flow_rate = np.bincount(owner, rate, flows)
    with np.errstate(invalid="ignore", divide="ignore"):
        flow_rtt = np.bincount(owner, rate * rtt, flows) / flow_rate
    names = [f"{flow.src}->{flow.dst}" for flow in routes.flows]
    return xr.Dataset(
        {"rate": ("flow", flow_rate, {"units": "bytes/s"}),
         "window": ("flow", np.bincount(owner, window, flows), {"units": "packets"}),
         "rtt": ("flow", flow_rtt, {"units": "s"}),
         "subflow_rate": ("subflow", rate, {"units": "bytes/s"}),
         "subflow_window": ("subflow", window, {"units": "packets"}),
         "subflow_rtt": ("subflow", rtt, {"units": "s"}),
         "queue": ("link", rest.queue, {"units": "bytes"}),
         "probability": ("link", rest.probability, {"units": "1"}),
         "load": ("link", rest.network.load(rest.rate), {"units": "bytes/s"})},
        coords={"flow": np.arange(flows), "subflow": np.arange(controller.size),
                "subflow_flow": ("subflow", owner),
                "link": [link.name for link in rest.compiled.network.links],
                "pair": ("flow", names)},
        attrs={"residual": rest.residual, "acks": _acks_in(rest)})


def _acks_in(rest: RestState) -> str:
    """How the ACKs enter `rest` (`equilibrium`'s attrs["acks"])."""
    if rest.network.acks is not None:
        return "load"
    return "left out" if np.any(np.asarray(rest.compiled.problem.ack) > 0) else "none"


def rest_state(scenario: Scenario, compiled: Compiled | None = None) -> RestState:
    """The rest state of `scenario` per solver controller (see `equilibrium`); `compiled`: the
    scenario already compiled (`compile_scenario`), where the caller has it."""
    compiled = compiled or compile_scenario(scenario)
    if compiled.model.has_events:
        # between its jumps the events form has no cut term to balance: its rest is the mean
        # field's only on average, which the root solver and the linearisation do not see
        raise ScenarioError('transport.cuts: the rest state and its stability are those of the '
                            'mean field; set cuts = "mean" to analyse it (cuts = "events" draws '
                            'each flow\'s cuts at random moments)')
    network, _, _ = network_of(compiled, subflows=True, acks=True)
    problem = compiled.problem
    links = network.capacity.size
    markers = _markers(scenario, problem, links)
    coupled = CoupledWindows(compiled) if compiled.model.name in MULTIPATH else None
    rest_rate = None if coupled else controller_rest_rate(compiled, markers.step)
    packet = np.asarray(problem.packet, float)
    routing, capacity, base_rtt = network.routing, network.capacity, network.base_rtt
    assert base_rtt is not None
    nic = np.asarray(problem.nic)

    # keyed by whether the network is the bare one (no ACK load)
    nics = {False: _Nics(nic, network), True: _Nics(nic, dataclasses.replace(network, acks=None))}
    rows: dict[tuple[bytes, bool], _Rows] = {}

    def rows_of(marking: np.ndarray, net: Network) -> _Rows:
        """The marking links' rows, kept per set of marking links."""
        key = (marking.tobytes(), net.acks is None)
        if key not in rows:
            carried = routing if net.acks is None else routing + net.acks
            rows[key] = _Rows(markers.restricted(marking), routing[marking], net.waits[marking],
                              carried[marking].T * net.count[:, None], capacity[marking])
        return rows[key]

    def state(x: np.ndarray, marking: np.ndarray, net: Network = network
              ) -> tuple[np.ndarray, ...]:
        """The network at positions x (..., unknowns), a batch of them at once
        (`bounded_roots.grouped_differences`). Only the marking links hold a queue and signal:
        the others' rows are left out of the products."""
        loaded, on = int(marking.sum()), rows_of(marking, net)
        queued, signal = on.markers.at(np.maximum(x[..., :loaded], 0.0))  # below 0: empty
        mark, loss = (1.0 - np.exp(np.log1p(-np.minimum(signal * share, 1 - 1e-15)) @ on.routing)
                      for share in (on.markers.ecn, 1.0 - on.markers.ecn))
        rtt = base_rtt + (queued / on.capacity) @ on.waits
        if coupled:
            window = coupled.window(x[..., loaded:])
            wanted = window / rtt * packet
        else:
            assert rest_rate is not None
            wanted, window = rest_rate(mark, loss, rtt)
        rule = nics[net.acks is None]
        rate, acked = rule.limited(wanted)
        room = rule.room(acked) if coupled else None
        queue, p_link = (np.zeros((*x.shape[:-1], links)) for _ in range(2))
        queue[..., marking], p_link[..., marking] = queued, signal
        return queue, p_link, rtt, window, rate, mark, loss, room

    def spare(x: np.ndarray, marking: np.ndarray, net: Network
              ) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
        """Per marking link its spare capacity over its capacity at positions x (..., and the
        network's state there)."""
        found = state(x, marking, net)
        on = rows_of(marking, net)
        return 1.0 - (found[4] @ on.carried) / on.capacity, found

    def residual(x: np.ndarray, marking: np.ndarray, stage: int = 0,
                 net: Network = network) -> np.ndarray:
        slack_now, (_, _, rtt, _, _, mark, loss, room) = spare(x, marking, net)
        loaded = int(marking.sum())
        balance = fischer_burmeister(x[..., :loaded], slack_now)
        if not coupled:
            return balance
        return np.concatenate([balance, coupled.residual(stage, x[..., loaded:], mark, loss,
                                                         rtt, room)], axis=-1)

    stages = range(coupled.stages) if coupled else range(1)

    def left(x: np.ndarray, marking: np.ndarray, net: Network) -> float:
        """The largest residual at x (0 at an exact rest state)."""
        return float(np.max(np.abs(residual(x, marking, stages[-1], net)), initial=0.0))

    def solve(marking: np.ndarray, starts: list[np.ndarray], net: Network = network,
              budget: int = _FLAT, stages: range = stages) -> np.ndarray:
        if not coupled:
            loaded = int(marking.sum())
            if net.acks is None:
                return solve_sets(marking, starts[0], net, budget, np.arange(loaded))
            x = solve_sets(marking, starts[0], net, budget,
                           _same_data(routing, capacity, markers, marking))
            if left(x, marking, net) <= 1e-8:
                return x
            # the queue of a set may split where the ACKs' rates, through their round
            # trips, balance the links' loads (the k = 4 fat-tree's hash seeds 4 and 5)
            return solve_sets(marking, x, net, budget, np.arange(loaded))
        # a subflow's window reads its siblings': the windows join the positions as unknowns,
        # and the positions keep their bound at 0: from below their solve stalls (LIA on a
        # k = 4 fat-tree: residual 3e-2 after 116 s; 8e-6 in 5 s)
        loaded = int(marking.sum())
        low, high = np.full(loaded, 0.0), np.ones(loaded)
        bounds = coupled.bounds()
        low, high = np.concatenate([low, bounds[0]]), np.concatenate([high, bounds[1]])
        related = _related(problem, net, marking, coupled)
        best = starts[0]
        for start in starts:
            for stage in stages:
                def stage_residual(x: np.ndarray, stage: int = stage) -> np.ndarray:
                    return residual(x, marking, stage, net)

                start = bounded_root(stage_residual, start, low, high, related, _STALLED,
                                     batched=True)
            if left(start, marking, net) < left(best, marking, net) or best is starts[0]:
                best = start  # the best of the starts
            if left(best, marking, net) < 1e-5:
                break
        return best

    def evened(x: np.ndarray, marking: np.ndarray, net: Network) -> np.ndarray:
        """The rest at `x` with the windows of each connection's twins (subflows that see the
        same signals and round trip) made equal, where that is a rest too
        (`analysis.subflow_rest`)."""
        assert coupled is not None
        loaded = int(marking.sum())
        _, _, rtt, window, _, mark, loss, _ = state(x, marking, net)
        twins = _twins(np.asarray(problem.subflow_flow), mark, loss, rtt)
        even = (np.bincount(twins, window) / np.bincount(twins))[twins]
        if np.allclose(even, window, rtol=1e-6):
            return x
        y = x.copy()
        y[loaded:loaded + coupled.size] = np.log(even)
        at = max(left(x, marking, net), 1e-8)
        if left(y, marking, net) > at:  # not a rest as it is (twins that NICs do not
            # hold): solved again from there, the model's own stage alone
            y = solve(marking, [y], net, stages=stages[-1:])
        return y if left(y, marking, net) <= at else x

    def slack(x: np.ndarray, marking: np.ndarray, net: Network) -> np.ndarray:
        """Per marking link its spare capacity over its capacity at positions x."""
        return spare(x, marking, net)[0]

    def solve_sets(marking: np.ndarray, start: np.ndarray, net: Network, budget: int,
                   member: np.ndarray) -> np.ndarray:
        """Positions of the marking links at rest from `start`, single paths: one unknown per
        set of links (`member`: each marking link's set; `_Shared`)."""
        links = np.flatnonzero(marking)
        sets = _Shared(member, _tightest(member, slack(start, marking, net), upstream, links))
        joined = np.zeros((member.size, sets.holder.size))
        joined[np.arange(member.size), member] = 1.0
        related = (joined.T @ _related(problem, net, marking, None) @ joined) > 0
        # a position may go below 0 (an empty queue, as at 0, where its balance alone pulls it
        # back): the least squares' scaling crawls along a bound (the k = 8 fat-tree's 111
        # links took 155 iterations with the bound at 0, 80 without)
        low, high = np.full(sets.holder.size, -1.0), np.ones(sets.holder.size)
        y, best = sets.contract(start), start
        for _ in range(_HOLDER_TRIES):
            def used(y: np.ndarray, sets: _Shared = sets) -> np.ndarray:
                return 1.0 - sets.least(slack(sets.expand(y), marking, net))

            def balance(y: np.ndarray, used: Callable = used) -> np.ndarray:
                return fischer_burmeister(y, 1.0 - used(y))

            # a stall on a flat side (a link overloaded by flows that their NICs hold, or below
            # its marking's onset, where only round trips move: its balance does not answer its
            # own position until marking holds those flows below their NICs' rate) is lifted
            # (`lift`), and the solve goes on from there
            at = np.inf
            for _ in range(_LIFTS):
                tried = bounded_root(balance, lift(y, used), low, high, related, budget,
                                       batched=True)
                now = float(np.max(np.abs(balance(tried)), initial=0.0))
                if now < at:
                    y = tried
                if now <= 1e-10 or now > 0.5 * at:
                    break
                at = now
            x = sets.expand(y)
            if left(x, marking, net) >= left(best, marking, net):
                break
            best = x
            holder = _tightest(member, slack(x, marking, net), upstream, links, sets.holder)
            if np.array_equal(holder, sets.holder):
                break
            sets = _Shared(member, holder)
        return best

    # host NICs never mark, and a link that can never be given more than it serves holds no
    # queue (`_most_load`): one that nothing crosses, or only ACKs, or one downstream of a link
    # carrying the same data at no more capacity and no more than its slack in ACKs
    upstream = _upstream(problem, network)
    if coupled:
        # every link that data or ACKs cross but those downstream of one carrying the same
        # data with no ACKs of their own: the coupled windows' least squares took its way to
        # the k = 4 fat-tree's rest with these unknowns (with only the `able` ones LIA's
        # stalled at 1e-2). It may stall from one start: windows of 10 packets, then of 40, ...
        acked = np.zeros(links, bool) if network.acks is None else network.acks.any(axis=1)
        marking = (np.isfinite(markers.low) & network.waits.any(axis=1)
                   & ((upstream < 0) | acked))
        starts = [np.concatenate([np.full(marking.sum(), 0.5), coupled.start(window)])
                  for window in _START_WINDOWS]
        if network.acks is None:
            x = solve(marking, starts)
        else:
            # as single paths: first without ACKs, then with them from there (the model's
            # own stage); where no rest with them is found, the one without them is kept and
            # said (attrs["acks"]): the example k = 4 fat-tree at 1 Gb/s with 64 B ACKs,
            # whose NICs hold the subflows, LIA: 1e-11 without, 4e-3 with (9e-3 from the
            # starts). Where none is found without them either, from the starts with them
            bare = dataclasses.replace(network, acks=None)
            y = solve(marking, starts, bare)
            if left(y, marking, bare) > 1e-8:
                x = solve(marking, starts)
            else:
                x = solve(marking, [y], stages=stages[-1:])
                if left(x, marking, network) > 1e-8:
                    network, x = bare, y
        x = evened(x, marking, network)
    else:
        # single paths: first without ACKs (a few per cent of the load: far fewer links can
        # fill, and the solve is quick), then with them from there (`_with_acks`)
        bare = dataclasses.replace(network, acks=None)
        marking = np.isfinite(markers.low) & (_most_load(problem, bare, upstream) > capacity)
        x = solve(marking, [np.full(marking.sum(), 0.5)], bare)
        if network.acks is not None:
            able = np.isfinite(markers.low) & (_most_load(problem, network, upstream) > capacity)
            grown, y = _with_acks(x, marking, able, lambda x, m: network.load(state(x, m)[4]),
                                  capacity, lambda m, s: solve(m, s, network),
                                  lambda x, m: left(x, m, network) <= 1e-8)
            if left(y, grown, network) <= 1e-8:
                marking, x = grown, y
            else:  # not found with them (a k = 8 fat-tree at 10 Gb/s): said, not hidden
                network = bare
    loaded = int(marking.sum())
    if np.any(x[:loaded] >= 1 - 1e-9):
        raise ScenarioError(markers.beyond)
    # the ACKs of flows that their NICs hold may load a link and the one before it that carries
    # the same data equally: then both are full, and the later one's queue, neither growing nor
    # draining, is what the history left it. From empty queues the earlier one fills first and
    # holds the queue, as the simulation shows: the later one is taken as empty,
    position = np.zeros(links)
    position[marking] = x[:loaded]
    tied = marking & (upstream >= 0) & (position > 1e-6) & (position[upstream] > 1e-6)
    if tied.any():
        untied = marking & ~tied
        y = solve(untied, [np.concatenate([x[:loaded][~tied[marking]], x[loaded:]])], network)
        # unless the later one's ACKs then overload it: the queue splits between the two, the
        # ACKs' rates balancing their loads through their round trips (the k = 4 fat-tree's
        # hash seed 5: 0.3 % over)
        over = network.load(state(y, untied, network)[4])[tied] > capacity[tied] * (1 + 1e-9)
        if not over.any():
            marking, x = untied, y
            loaded = int(marking.sum())
    # a link within a millionth of its ramp from empty is empty (the solver's last digits); so
    # is a queue that no flow's rate answers (a link full by a tie: flows that their NICs
    # hold, ACKs, or a queue that marks nothing), which stays where the history left it; from
    # empty, empty. (Where window-held flows wait in it, their round trips set it.)
    x = x.copy()
    x[:loaded] = np.where(x[:loaded] > 1e-6, x[:loaded], 0.0)
    position[:] = 0.0
    position[marking] = x[:loaded]
    _, _, rtt, window, rate, *_ = state(x, marking, network)
    with np.errstate(invalid="ignore"):  # NaN windows: rate-based senders
        held = rate < window / rtt * packet * (1 - 1e-9)  # by their NICs
    unanswered = ((markers.at(position)[1] == 0)
                  | ~((routing > 0) & ~held[None, :]).any(axis=1))[marking]
    at = left(x, marking, network)
    for k in np.flatnonzero(unanswered & (x[:loaded] > 0)):
        emptied = x.copy()
        emptied[k] = 0.0
        if left(emptied, marking, network) <= max(at, 1e-12):
            x = emptied
    queue, p_link, rtt, window, rate, mark, loss, _ = state(x, marking, network)
    if coupled:  # a subflow that nothing signals: its window is not held (its NIC holds it)
        window = np.where(mark + loss > 0, window, np.inf)
    return RestState(compiled, network, queue, p_link, rate, window, rtt,
                     left(x, marking, network))


def _twins(flow: np.ndarray, *signals: np.ndarray) -> np.ndarray:
    """A label per subflow, shared by the subflows of one connection whose `signals` agree
    to a relative 1e-7."""
    order = np.lexsort((*signals[::-1], flow))
    apart = flow[order][1:] != flow[order][:-1]
    for signal in signals:
        a, b = signal[order][1:], signal[order][:-1]
        apart |= ~np.isclose(a, b, rtol=1e-7, atol=0.0)
    label = np.empty(flow.size, int)
    label[order] = np.concatenate([[0], np.cumsum(apart)])
    return label


def _with_acks(x: np.ndarray, marking: np.ndarray, able: np.ndarray,
               load: Callable[[np.ndarray, np.ndarray], np.ndarray], capacity: np.ndarray,
               solve: Callable[..., np.ndarray], found: Callable[[np.ndarray, np.ndarray], bool]
               ) -> tuple[np.ndarray, np.ndarray]:
    """(marking links, positions) of the rest with ACKs from `x` on `marking`, the rest without
    them: solved (`solve`) for those links and the others of `able` that come within 0.1 % of
    full once the ACKs are added (`load` at positions x on marking links), then again with any
    that the solve leaves overloaded; given up where a solve is not `found`."""
    margin = 1e-3
    while True:
        grown = able & ~marking & (load(x, marking) > capacity * (1 - margin))
        if margin < 0 and not grown.any():
            return marking, x
        position = np.zeros(capacity.size)
        position[marking] = x
        marking = marking | grown
        x = solve(marking, [position[marking]])
        if not found(x, marking):
            return marking, x
        margin = -1e-12


# evaluations after which a least squares has stalled: converging ones took 100 to 1,400 (k = 4
# and 8 fat-trees, LIA, OLIA, BALIA, Reno), stalled ones ran to scipy's 100 per unknown (a
# minute on a k = 4 fat-tree's 89) before the next start found the rest
_STALLED = 2000
# coupled windows: the windows (packets) the solve starts from in turn, until one finds a rest
# (below 1e-5). Which start stalls moves with the machine's rounding: on an AVX2 machine
# (2026-12-02) LIA on the k = 4 fat-tree of tests/test_equilibrium_mptcp.py, hash seed 4,
# stalled at 9.8e-5 from 10 and 40 and rested from 20 (2e-10) and 80 (6e-8); BALIA with RED
# 30 to 300, seed 3, stalled at 2.6e-3 and rested from 20 and 80 (4e-11, 1e-10)
_START_WINDOWS = (10.0, 40.0, 20.0, 80.0)
# single paths: evaluations after which the least squares is taken to be stuck on a flat side
# (`lift`): converging ones took 10 to 110 (k = 4 and 8 fat-trees, Reno and DCTCP); with ACKs
# from the rest without them 6 to 75 on the k = 4 fat-tree's eight hash seeds, 155 on the
# k = 8 fat-tree's seed 1
_FLAT = 200
# lifts after a stall, while each at least halves the residual (the k = 8 fat-tree with ACKs,
# hash seed 2: two stalls, then found)
_LIFTS = 4
# how often the links that hold the queues of sets (`_Shared`) may change before the solve
# keeps the best it found
_HOLDER_TRIES = 5


@dataclass(frozen=True)
class _Shared:
    """Marking links that carry the same flows' data at the same capacity and marking, and
    differ only in the ACKs that cross them, share one unknown: the position of the one that
    holds their queue, the tightest (the least spare capacity), the others empty. Every data
    flow crosses all of them, so its signals and round trip hardly tell them apart: with a
    position each the least squares spread the queue over them and stalled (the k = 8
    fat-tree at 10 Gb/s, Reno: at a residual of 5e-3, about the ACKs' share of the load)."""

    member: np.ndarray  # (marking links,) each one's set
    holder: np.ndarray  # (sets,) the marking link (its index among them) holding the queue

    def expand(self, y: np.ndarray) -> np.ndarray:
        """Per marking link its position, from one per set (..., sets)."""
        x = np.zeros(y.shape[:-1] + self.member.shape)
        x[..., self.holder] = y
        return x

    def contract(self, x: np.ndarray) -> np.ndarray:
        """Per set the largest of its links' positions."""
        y = np.full(self.holder.size, -np.inf)
        np.maximum.at(y, self.member, x)
        return y

    def least(self, value: np.ndarray) -> np.ndarray:
        """Per set the least of its links' `value` (..., marking links)."""
        order = np.argsort(self.member, kind="stable")
        starts = np.flatnonzero(np.diff(self.member[order], prepend=-1))  # every set has one
        return np.minimum.reduceat(value[..., order], starts, axis=-1)


def _same_data(routing: np.ndarray, capacity: np.ndarray, markers: _Markers,
               marking: np.ndarray) -> np.ndarray:
    """Per marking link the index of its set (`_Shared`)."""
    key = np.column_stack([routing[marking], capacity[marking], markers.low[marking],
                           markers.high[marking], markers.pmax[marking], markers.ecn[marking]])
    return np.unique(key, axis=0, return_inverse=True)[1].reshape(-1)


def _tightest(member: np.ndarray, slack: np.ndarray, upstream: np.ndarray, links: np.ndarray,
              holder: np.ndarray | None = None) -> np.ndarray:
    """Per set (`_Shared`) the marking link with the least `slack` (spare capacity over
    capacity); on a tie (within 1e-12) the `holder` so far, else the first on the path
    (`upstream`; `links`: the marking links' indices), which from empty queues fills first."""
    out = np.zeros(member.max(initial=-1) + 1, int)
    for group in range(out.size):
        members = np.flatnonzero(member == group)
        tight = members[slack[members] <= slack[members].min() + 1e-12]
        first = tight[~np.isin(upstream[links[tight]], links[members])]
        out[group] = (holder[group] if holder is not None and holder[group] in tight
                      else (first if first.size else tight)[0])
    return out


def _related(problem: Any, network: Network, marking: np.ndarray,
             coupled: CoupledWindows | None) -> np.ndarray:
    """Which unknowns (the marking links' positions, then the coupled windows' y) each residual
    may depend on: a link's balance on the flows whose data or ACKs it carries, those flows on
    the positions of the links where their data or ACKs wait and on the flows sharing a NIC or
    a connection with them or loading their NIC with ACKs; a subflow's window (or its NIC's
    theta) on the same around it. Differences of unrelated unknowns are taken together
    (`bounded_roots.grouped_differences`)."""
    links = network.capacity.size
    nic, connection = np.asarray(problem.nic), np.asarray(problem.subflow_flow)
    acks = np.zeros_like(network.routing) if network.acks is None else network.acks
    reads = [(network.routing + acks)[marking] > 0]
    acts = [network.waits[marking] > 0]
    near = (connection[:, None] == connection[None, :]) | (
        (nic[:, None] == nic[None, :]) & (nic[:, None] < links))
    near[nic < links] |= acks[nic[nic < links]] > 0  # the flows whose ACKs take room at its NIC
    if coupled is not None:
        reads.append(coupled.owner())
        acts.append(coupled.owner())
    read, act = (np.concatenate(part).astype(float) for part in (reads, acts))
    return (read @ near.astype(float) @ act.T > 0) | np.eye(read.shape[0], dtype=bool)


class _Rows(NamedTuple):
    """The marking links' part of the network (`rest_state`): only they hold queues and
    signal."""

    markers: _Markers
    routing: np.ndarray  # (marking links, flows)
    waits: np.ndarray  # (marking links, flows)
    carried: np.ndarray  # (flows, marking links): bytes/s per flow's rate, data and ACKs
    capacity: np.ndarray  # (marking links,) bytes/s


@dataclass(frozen=True)
class _Markers:
    """Per link how the rest queue and the marking (or early-drop) probability follow one
    position s in [0, 1], continuous and non-decreasing, so that a link is loaded where s > 0.

    On a ramp (RED, DCQCN) s is the queue over the ramp's end. The ECN step at K gives no
    probability between 0 and 1 at any queue: its rest is a sliding mode on q = K (Filippov),
    where what the flows see is the fraction theta of the time marked (the fluid model's rest
    under step marking, Alizadeh, Javanmard and Prabhakar 2011). There s runs in thirds: the
    queue from 0 to K, then theta from 0 to 1 at q = K, then the queue from K to the buffer
    with every packet marked (windows at their floor: a large incast's standing queue)."""

    low: np.ndarray  # bytes: where marking starts (inf: never marks)
    high: np.ndarray  # bytes: the ramp's end, or the buffer after a step
    pmax: np.ndarray  # the probability at the ramp's end
    ecn: np.ndarray  # 1 where the signal is a mark, 0 an early drop
    step: bool
    beyond: str  # why a rest state at s = 1 is none

    def restricted(self, links: np.ndarray) -> _Markers:
        """The markers of `links` alone (a mask or indices)."""
        return dataclasses.replace(self, low=self.low[links], high=self.high[links],
                                   pmax=self.pmax[links], ecn=self.ecn[links])

    def at(self, position: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(queue in bytes, probability) per link at `position`."""
        with np.errstate(invalid="ignore"):  # inf - inf at links that never mark
            if not self.step:
                queue = position * self.high
                ramp = (queue - self.low) / np.where(self.high > self.low,
                                                     self.high - self.low, 1.0)
                return queue, self.pmax * np.clip(ramp, 0.0, 1.0)
            third = 3.0 * position
            queue = np.where(third < 1, third * self.low,
                             self.low + np.clip(third - 2.0, 0.0, 1.0) * (self.high - self.low))
            return queue, np.clip(third - 1.0, 0.0, 1.0)


def _markers(scenario: Scenario, problem: Any, links: int) -> _Markers:
    """The marking of each link (`_Markers`) from the scenario's discipline."""
    aqm, kind = problem.aqm, scenario.si.aqm.kind
    ecn = np.ones(links)
    beyond = ("aqm: the rest state lies at the end of the marking ramp (a queue at its max, "
              "where marking jumps to 1): no equilibrium on the ramp")
    if kind == "red":
        ends = (aqm.min, aqm.max, aqm.pmax)
        ecn = np.asarray(aqm.ecn, float)[:links]
    elif kind == "dcqcn":
        kmin, kmax, pmax = (np.asarray(v, float) for v in (aqm.kmin, aqm.kmax, aqm.pmax))
        # the extended line goes on past kmax to 1 (the CoNEXT 2016 analysis's ramp)
        with np.errstate(invalid="ignore"):  # inf - inf at host NICs, which never mark
            end = np.where(np.asarray(aqm.extended) > 0, kmin + (kmax - kmin) / pmax, kmax)
        ends = (kmin, end, np.where(np.asarray(aqm.extended) > 0, 1.0, pmax))
    elif kind == "ecn_step":
        ends = (aqm.threshold, problem.queues.buffer, np.ones(links))
        beyond = ("aqm: the rest state needs more queue than the buffer holds (every window at "
                  "its floor): no equilibrium without losses")
    else:
        raise ScenarioError(f"aqm.kind: the equilibrium needs a marking ramp (red, dcqcn) or "
                            f"the ECN step, not {kind!r} (drop-tail settles into a sawtooth, "
                            "not a point)")
    low, high, pmax = (np.asarray(v, float)[:links] for v in ends)
    return _Markers(low, high, pmax, ecn, kind == "ecn_step", beyond)


def _upstream(problem: Any, network: Network) -> np.ndarray:
    """Per link, the link before it on the path that carries exactly its flows' data at no more
    capacity (-1: none): then it never receives more data than it serves (single paths)."""
    routing, capacity = network.routing, network.capacity
    links = capacity.size
    order = np.full((links, routing.shape[1]), -1)  # each flow's hop index at each link
    for path, hops in enumerate(np.asarray(problem.path_hops)):
        real = hops[hops < links]
        order[real, np.asarray(problem.path_subflow)[path]] = np.arange(real.size)
    upstream = np.full(links, -1)
    crossed = routing > 0
    _, group = np.unique(crossed, axis=0, return_inverse=True)
    for members in (np.flatnonzero(group.reshape(-1) == g) for g in np.unique(group)):
        if members.size < 2 or not crossed[members[0]].any():
            continue
        flow = np.flatnonzero(crossed[members[0]])[0]
        first = members[np.argmin(order[members, flow])]
        later = (members != first) & (capacity[members] >= capacity[first])
        upstream[members[later]] = first
    return upstream


def _most_load(problem: Any, network: Network, upstream: np.ndarray) -> np.ndarray:
    """Per link, the most it can be given (bytes/s): each flow's data at the least capacity of
    the hops before it (NIC included), on a link downstream of one carrying the same data
    (`upstream`) no more than that link serves, and the ACKs of flows at their paths' least
    capacity."""
    capacity, count = network.capacity, network.count
    links = capacity.size
    data = np.zeros(links)
    least = np.full(count.size, np.inf)  # each flow's least capacity along its path
    for path, hops in enumerate(np.asarray(problem.path_hops)):
        real = hops[hops < links]
        flow = np.asarray(problem.path_subflow)[path]
        before = np.minimum.accumulate(np.concatenate([[np.inf], capacity[real]]))
        data[real] += before[:-1] * count[flow] * float(np.asarray(problem.path_weight)[path])
        least[flow] = min(least[flow], before[-1])
    data = np.where(upstream >= 0, np.minimum(data, capacity[upstream]), data)
    acks = 0.0 if network.acks is None else network.acks @ (np.where(
        np.isfinite(least), least, 0.0) * count)
    return data + acks


class _Nics:
    """The host NICs' rule (`solvers.dde`): what each flow sends where its NIC limits it, the
    NIC's room for data (its capacity less the ACKs of the flows its host receives, which it
    sends first) shared in proportion to what its flows want. The ACKs' rates may be held by
    their own NICs in turn: a fixed point, reached by iteration (each round changes the rates
    by about the ACK bytes per data byte, a few per cent, times the last change)."""

    def __init__(self, nic: np.ndarray, network: Network) -> None:
        self.network = network
        links = network.capacity.size
        held = nic < links  # a flow with no NIC (nic == links) is held by none
        at = np.minimum(nic, links - 1)
        self.line = np.where(held, network.capacity[at], np.inf)  # per flow its NIC's rate
        # per flow the ACKs that take room at its NIC, and the flows that share its NIC
        self.acks = None if network.acks is None else network.acks[at] * held[:, None]
        self.sharing = ((nic[:, None] == nic[None, :]) & held[:, None]).astype(float)

    def limited(self, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(rate per flow, the rates whose ACKs left the room: the fixed point's last
        iterate) at `wanted` (..., flows)."""
        count = self.network.count
        # a flow that nothing signals wants all of its NIC, and no more (finite arithmetic)
        wanted = np.minimum(wanted, self.line)
        demand = np.maximum((count * wanted) @ self.sharing, 1e-300)
        rate = before = wanted
        for _ in range(1 if self.acks is None else 100):
            before = rate
            limit = (self.line if self.acks is None
                     else np.maximum(self.line - (count * rate) @ self.acks.T, 0.0))
            rate = np.where(demand > limit, wanted * limit / demand, wanted)
            if np.all(np.abs(rate - before) <= 1e-15 * np.abs(rate)):
                break
        return rate, before

    def room(self, acked: np.ndarray) -> np.ndarray:
        """Per link its room for data: its capacity less the ACKs of flows at rates `acked`."""
        return np.maximum(self.network.capacity - self.network.ack_load(acked), 0.0)
