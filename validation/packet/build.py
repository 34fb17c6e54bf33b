"""From a scenario to the simulator's arrays (`layout.Sim`), with pathflow's own network and routes.

`build_network` and `build_routes` give the links, the flows and their paths exactly as the fluid
model sees them (same ECMP hash, same spraying split). Each subflow becomes one sender (a TCP
flow has one subflow; an MPTCP connection `[transport] subflows`, each routed on its own as
ndiffports does, or given by `[[routing.paths]]`), with its own receiver; each forward path gets
a reverse path for its ACKs. A connection's subflows are contiguous senders (`SI_CONN_FIRST`,
`SI_CONN_END`) and start together at the flow's start (no handshake, no path manager delay).
A TCP flow gets all its segments at once, or with `[traffic] rounds` its first round's
block (`rounds`); a finite MPTCP connection's segments are handed to
its subflows one at a time as they send new data (`sender`), and an endless one gives every
subflow endless data. AQM applies at switch ports; a host's egress port is a NIC
(see `links`); PFC's Xoff and Xon are the fluid model's (`topology.pfc_thresholds`,
`pfc_sharing`). Sizes of
the preallocated pools follow from the buffers and windows; `Sizing` lets `simulate_packets`
enlarge them when a run reports that they were too small.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from pathflow.compile import ACK_BYTES, default_records, segments_per_ack
from pathflow.cost import available_memory
from pathflow.models.dcqcn_static import static_timer_and_step
from pathflow.models.registry import CONTROLS
from pathflow.routing import Routes, build_routes
from pathflow.scenario import Scenario, ScenarioError
from pathflow.topology import (
    Network,
    build_network,
    path_base_rtt,
    pfc_sharing,
    pfc_thresholds,
)
from pathflow.units import format_bytes
from pathflow.validation.packet import layout as L

__all__ = ["Built", "Options", "build", "default_sample_interval"]

MAX_RTO = 60.0  # s (RFC 6298 allows an upper bound of at least 60 s)
_ENDLESS = 2**62  # segments of a flow that never ends


@dataclass(frozen=True)
class Options:
    """Run options that are not part of the scenario (see `simulate_packets`)."""

    sample_interval: float  # s; 0: the default (`default_sample_interval`)
    min_rto: float
    delayed_ack: int
    delack_timeout: float
    seed: int
    ack_bytes: float = ACK_BYTES
    header_bytes: float = 0.0
    host_jitter: float = 0.0
    sack: bool = True  # SACK with RFC 6675 recovery (window-based senders); False: NewReno
    recovery: str = "rfc6675"  # with SACK: or "linux", RACK-TLP and PRR (`rack.py`)
    pool_scale: int = 1  # multiplies the packet pool and event heap (retries)


@dataclass(frozen=True)
class Built:
    scenario: Scenario
    network: Network
    routes: Routes
    options: Options
    sim: L.Sim
    growth: int


def default_sample_interval(scenario: Scenario, links: int, flows: int) -> float:
    """`[run] sample`, else as many records as the fluid model keeps (`compile.default_records`)
    but at least 10 us apart."""
    run = scenario.si.run
    if run.sample is not None:
        return run.sample
    return max(run.duration / default_records(links + flows), 10e-6)


def default_delayed_ack(ack_ratio: float) -> int:
    """ACK every 2nd segment (Linux, ns-3) unless ack_ratio b is an integer >= 2: then every
    b-th, so that one window increase per ACK gives the fluid model's 1/b segment per RTT (the
    rule the fluid model's ACK load follows: `compile.segments_per_ack`)."""
    return segments_per_ack(ack_ratio)


def growth_mode(ack_ratio: float, delayed_ack: int) -> int:
    if ack_ratio == 1:
        return L.GROW_PER_SEGMENT
    if ack_ratio == delayed_ack:
        return L.GROW_PER_ACK
    return L.GROW_FRACTIONAL


def _reverse(network: Network, path: tuple[int, ...]) -> tuple[int, ...]:
    links = network.links
    return tuple(network.link_between(links[i].dst, links[i].src) for i in reversed(path))


def packet_senders(scenario: Scenario) -> list[str]:
    """The packet-level sender of each traffic group's congestion control (models.registry)."""
    names = []
    for group in scenario.si.groups:
        control = CONTROLS[group.transport.cc]
        if control.packet_sender is None:
            raise ScenarioError(f"{group.field('transport', 'cc')}: {control.name!r} has no "
                                "packet-level sender; run it with the fluid engine")
        names.append(control.packet_sender)
    return names


# what the simulator's window fields hold where no group has a window (rate-based senders)
_NO_WINDOW = {"ack_ratio": 1.0, "init_cwnd": 10.0, "min_cwnd": 2.0, "ssthresh": math.inf}


def window_values(scenario: Scenario) -> dict[str, float]:
    """The window parameters of the senders, which the simulator holds once for all: traffic
    groups must agree on those their controls have (`g` is DCTCP's alone; DCQCN's are its
    senders' own, `_rate_parameters`)."""
    packet_senders(scenario)
    values: dict[str, float] = {}
    where: dict[str, str] = {}
    for group in scenario.si.groups:
        if CONTROLS[group.transport.cc].sends == "rate":
            continue
        for name in ("ack_ratio", "init_cwnd", "min_cwnd", "ssthresh", "g"):
            if name not in group.transport.parameters:
                continue
            value = float(group.transport.parameters[name])
            if values.setdefault(name, value) != value:
                raise ScenarioError(f"{group.field('transport', name)}: the packet engine takes "
                                    f"one {name} for every group ({value:g} here, "
                                    f"{values[name]:g} in {where[name]})")
            where.setdefault(name, group.where or "transport")
    return {**_NO_WINDOW, **values}


def _links(scenario: Scenario, network: Network, sender_nic: np.ndarray) -> L.Links:
    n = len(network.links)
    hosts = set(network.hosts)
    aqm = scenario.si.aqm.parameters
    nic = np.array([link.src in hosts for link in network.links], dtype=np.int64)
    param = np.zeros((n, L.N_LP))
    param[:, L.LP_RATE] = [link.capacity for link in network.links]
    param[:, L.LP_DELAY] = [link.delay for link in network.links]
    param[:, L.LP_BUFFER] = [link.buffer for link in network.links]
    param[:, L.LP_THRESHOLD] = aqm.get("threshold", math.inf)
    param[:, L.LP_RED_MIN] = aqm.get("min", aqm.get("kmin", math.inf))
    param[:, L.LP_RED_MAX] = aqm.get("max", aqm.get("kmax", math.inf))
    param[:, L.LP_RED_PMAX] = aqm.get("pmax", 1.0)
    param[:, L.LP_RED_WEIGHT] = aqm.get("weight", 1.0)
    param[:, L.LP_EXTENDED] = float(aqm.get("ramp") == "extended")
    param[:, L.LP_XOFF], param[:, L.LP_XON] = pfc_thresholds(scenario, network)  # inf: never
    param[:, L.LP_PFC_ALPHA], param[:, L.LP_PFC_ROOM], group = pfc_sharing(scenario, network)
    state = np.zeros((n, L.N_LI), np.int64)
    state[:, L.LI_NIC] = nic
    state[:, L.LI_PFC_GROUP] = group
    state[:, L.LI_AQM] = np.where(nic == 1, L.AQM_NONE, L.AQM_CODES[scenario.si.aqm.kind])
    state[:, [L.LI_HEAD, L.LI_TAIL, L.LI_IN_SERVICE]] = -1
    order = np.argsort(sender_nic, kind="stable")
    first = np.searchsorted(sender_nic[order], np.arange(n + 1)).astype(np.int64)
    return L.Links(param=param, f=np.zeros((n, L.N_LF)), i=state, nic_first=first,
                   nic_senders=order.astype(np.int64))


# DCQCN's and DCQCN+'s parameters (models/dcqcn.py, models/dcqcn_plus.py: packets, packets/s,
# s) -> sender columns (bytes, s); each model declares a subset
_DCQCN_COLUMNS = {"line_rate": L.SF_LINE_RATE, "min_rate": L.SF_MIN_RATE, "rai": L.SF_RAI,
                  "rhai": L.SF_RHAI,
                  "byte_counter": L.SF_BYTE_COUNTER, "timer": L.SF_TIMER,
                  "cnp_interval": L.SF_CNP_INTERVAL, "min_time_between_cnps": L.SF_CNP_GAP,
                  "alpha_interval": L.SF_ALPHA_INTERVAL, "g": L.SF_G, "stages": L.SF_STAGES,
                  "cnp_capacity": L.SF_CNP_CAPACITY, "timer_gain": L.SF_TIMER_GAIN,
                  "rl": L.SF_RL}
_IN_PACKETS = ("line_rate", "min_rate", "rai", "rhai", "byte_counter", "rl")
_PER_MICROSECOND = ("cnp_capacity",)


def _rate_parameters(scenario: Scenario, network: Network, routes: Routes, sf: np.ndarray,
                     si: np.ndarray) -> None:
    """Each rate-based sender's parameters from its group (line rate: its NIC's, unless
    given). DCQCN+ has no byte counter: it never expires. DCQCN+static is DCQCN with the timer
    and step its flownum sets (models/dcqcn_static.py)."""
    mss = scenario.si.transport.mss
    receiver_flows = routes.receiver_flows()
    for s, f in enumerate(routes.subflow_flow):
        if si[s, L.SI_CC] not in (L.CC_DCQCN, L.CC_DCQCN_PLUS):
            continue
        transport = scenario.si.groups[routes.flows[f].group].transport
        given = dict(transport.parameters)
        if transport.cc == "dcqcn+static":
            flownum = given["flownum"] or receiver_flows[s]
            timer, step = static_timer_and_step(flownum, given["timer_per_flow"],
                                                given["ai_total"], given["ai_unit"])
            given.update(timer=float(timer), rai=float(step))
        sf[s, L.SF_BYTE_COUNTER] = math.inf
        for name, column in _DCQCN_COLUMNS.items():
            if name not in given:
                continue
            value = given[name]
            if value is None:  # line_rate: the NIC's
                sf[s, column] = network.links[si[s, L.SI_NIC]].capacity
            else:
                scale = mss if name in _IN_PACKETS else 1e6 if name in _PER_MICROSECOND else 1.0
                sf[s, column] = float(value) * scale


def _check_memory(pool: int, heap: int, scale: int) -> None:
    """Refuse, in one line, a packet pool and event heap larger than the memory available."""
    needed = pool * (L.N_PK * 8 + 8) + heap * (L.N_HE * 8 + 8)
    available = available_memory()
    if needed > available:
        raise ScenarioError(
            f"run.duration: the packet engine would hold up to {pool:,} packets in flight"
            f"{' (after enlarging its pool)' if scale > 1 else ''}, "
            f"{format_bytes(needed)} with {format_bytes(available)} available; shorten the run, "
            "shrink topology.buffer or use the fluid engine")


def _paths(network: Network, routes: Routes) -> L.Paths:
    forward = list(routes.paths)
    everything = forward + [_reverse(network, p) for p in forward]
    n = len(forward)
    table = np.zeros((2 * n, L.N_PI), np.int64)
    table[:, L.PI_LENGTH] = [len(p) for p in everything]
    table[1:, L.PI_START] = np.cumsum(table[:-1, L.PI_LENGTH])
    table[:, L.PI_REVERSE] = np.concatenate([np.arange(n, 2 * n), np.arange(n)])
    flat = np.array([i for p in everything for i in p], dtype=np.int64)
    return L.Paths(i=table, links=flat)


def _ring(scenario: Scenario, network: Network, routes: Routes, n_senders: int) -> int:
    """Segment slots per sender: 4x the largest path's BDP plus switch buffers (as ns-3's socket
    buffers in validation/ns3/child.py), a power of two; it also caps the window."""
    mss = scenario.si.transport.mss
    hosts = set(network.hosts)
    largest = 0.0
    for path in routes.paths:
        rate = min(network.links[i].capacity for i in path)
        buffers = sum(network.links[i].buffer for i in path if network.links[i].src not in hosts)
        rtt = path_base_rtt(network, path, mss, ACK_BYTES)  # sizing: the fluid model's framing
        largest = max(largest, (rate * rtt + buffers) / mss)
    slots = 1 << max(6, math.ceil(math.log2(4 * largest + 64)))
    while slots > 64 and slots * n_senders > 2**25:  # memory cap: ~0.3 GB of ring state
        slots //= 2
    return slots


def build(scenario: Scenario, options: Options) -> Built:
    """The simulator state for `scenario` (see the module docstring)."""
    network = build_network(scenario)
    routes = build_routes(scenario, network)
    values = window_values(scenario)
    senders = packet_senders(scenario)
    mss = scenario.si.transport.mss
    duration = scenario.si.run.duration
    n_flows, n_links = len(routes.flows), len(network.links)
    n_subflows = len(routes.subflow_flow)
    subflow_flow = np.asarray(routes.subflow_flow)
    path_subflow = np.asarray(routes.path_subflow)
    if np.any(np.diff(path_subflow) < 0):
        raise ScenarioError("routing: paths must be grouped by subflow")  # build_routes does
    ring = _ring(scenario, network, routes, n_subflows)
    if options.sample_interval <= 0:
        options = replace(options, sample_interval=default_sample_interval(scenario, n_links,
                                                                           n_subflows))
    cfg = L.Config(
        mss=float(mss), ack_bytes=float(options.ack_bytes),
        header_bytes=float(options.header_bytes), host_jitter=float(options.host_jitter),
        min_rto=float(options.min_rto),
        max_rto=MAX_RTO, delack_timeout=float(options.delack_timeout),
        delayed_ack=int(options.delayed_ack),
        growth=growth_mode(values["ack_ratio"], options.delayed_ack),
        ack_ratio=float(values["ack_ratio"]), g=float(values.get("g", 0.0)),
        init_cwnd=float(values["init_cwnd"]), min_cwnd=float(values["min_cwnd"]),
        ssthresh=float(values["ssthresh"]),
        ring=int(ring), interval=float(options.sample_interval),
        records=math.ceil(duration / options.sample_interval - 1e-9),
        seed=int(options.seed), pfc=bool(scenario.si.aqm.pfc))

    # senders: one per subflow (a TCP flow has one; an MPTCP connection several, contiguous)
    conn_first = np.searchsorted(subflow_flow, np.arange(n_flows + 1)).astype(np.int64)
    if np.any(np.diff(subflow_flow) < 0) or np.any(np.diff(conn_first) < 1):
        raise ScenarioError("routing: subflows must be grouped by flow")  # build_routes does
    path_first = np.searchsorted(path_subflow, np.arange(n_subflows + 1)).astype(np.int64)
    weights = np.asarray(routes.path_weight, dtype=np.float64)
    cumweight = np.zeros(len(weights))
    sf = np.zeros((n_subflows, L.N_SF))
    si = np.zeros((n_subflows, L.N_SI), np.int64)
    for f, flow in ((s, routes.flows[subflow_flow[s]]) for s in range(n_subflows)):
        lo, hi = path_first[f], path_first[f + 1]
        first, end = conn_first[subflow_flow[f]], conn_first[subflow_flow[f] + 1]
        cumweight[lo:hi] = np.cumsum(weights[lo:hi]) / weights[lo:hi].sum()
        first_links = {routes.paths[p][0] for p in range(lo, hi)}
        if len(first_links) > 1:
            raise ScenarioError(f"routing: flow {subflow_flow[f]} ({flow.src} -> {flow.dst}) "
                                "leaves its host by several links; the packet engine needs one "
                                "NIC per sender")
        si[f, L.SI_NIC] = first_links.pop()
        sf[f, L.SF_BASE_RTT] = min(path_base_rtt(network, routes.paths[p], mss,
                                                 options.ack_bytes, options.header_bytes)
                                   for p in range(lo, hi))
        segments = _ENDLESS if math.isinf(flow.size) else max(1, math.ceil(flow.size / mss))
        last_bytes = mss if math.isinf(flow.size) else flow.size - (segments - 1) * mss
        si[f, L.SI_CONN_FIRST], si[f, L.SI_CONN_END] = first, end
        si[f, L.SI_CONN_SEGMENTS] = segments * flow.rounds
        sf[f, L.SF_CONN_LAST_BYTES] = last_bytes
        si[f, L.SI_ROUNDS] = flow.rounds
        if flow.rounds > 1:  # its first round's block; the barrier releases the others (rounds)
            if end - first > 1:
                where = scenario.si.groups[flow.group].field("traffic", "rounds")
                raise ScenarioError(f"{where}: the packet engine runs rounds with one subflow "
                                    f"per flow; flow {subflow_flow[f]} has {end - first} "
                                    "(leave subflows at 1, or rounds at 1)")
            si[f, L.SI_SEGMENTS] = si[f, L.SI_BLOCK] = segments
            sf[f, L.SF_LAST_BYTES] = last_bytes
        elif end - first == 1 or math.isinf(flow.size):  # all its data at once
            si[f, L.SI_SEGMENTS] = segments
            sf[f, L.SF_LAST_BYTES] = last_bytes
        else:  # subflows take the connection's segments as they send (sender._take_segment)
            si[f, L.SI_SEGMENTS] = 0
            sf[f, L.SF_LAST_BYTES] = mss
            if f == first:
                si[f, L.SI_CONN_UNASSIGNED] = segments
        sf[f, L.SF_START] = flow.start
    si[:, L.SI_CC] = [L.CC_CODES[senders[routes.flows[f].group]] for f in subflow_flow]
    # traffic groups: flows are numbered group after group, so each group's senders are
    # contiguous rows (the barrier of its rounds counts in the first)
    group_of = np.array([routes.flows[f].group for f in subflow_flow], dtype=np.int64)
    group_first = np.searchsorted(group_of, np.arange(len(scenario.si.groups) + 1))
    si[:, L.SI_GROUP_FIRST] = group_first[group_of]
    si[:, L.SI_GROUP_END] = group_first[group_of + 1]
    si[:, L.SI_GROUP_FLOWS] = np.bincount([flow.group for flow in routes.flows],
                                          minlength=len(scenario.si.groups))[group_of]
    si[:, L.SI_ECT] = 1 if scenario.si.aqm.marks_ecn else 0
    si[:, L.SI_FLOW] = subflow_flow
    si[:, L.SI_PATH_FIRST] = path_first[:-1]
    si[:, L.SI_PATH_END] = path_first[1:]
    si[:, [L.SI_RTX, L.SI_ALPHA_SEQ, L.SI_UNDO_RETRANS]] = -1
    si[:, L.SI_REORDERING] = 3  # RFC 5681's duplicate-ACK threshold (Linux tcp_reordering)
    # SACK for window-based senders only: RoCE NICs (DCQCN) repair losses by go-back-N
    rate = np.isin(si[:, L.SI_CC], (L.CC_DCQCN, L.CC_DCQCN_PLUS))
    si[:, L.SI_SACK] = np.where(rate, 0, int(options.sack))
    si[:, L.SI_NEXT_LOST] = -1
    si[:, L.SI_RACK] = si[:, L.SI_SACK] * int(options.recovery == "linux")
    si[:, L.SI_TLP_HIGH] = -1
    sf[:, [L.SF_RACK_XMIT, L.SF_RACK_CUTOFF]] = -math.inf
    sf[:, [L.SF_MIN_RTT, L.SF_RACK_WAIT]] = math.inf
    sf[:, L.SF_CWND] = cfg.init_cwnd
    sf[:, L.SF_SSTHRESH] = cfg.ssthresh
    sf[:, L.SF_ALPHA] = 1.0  # DCTCP alpha on init (Linux, ns-3)
    sf[:, L.SF_RTT_LAST] = math.nan
    _rate_parameters(scenario, network, routes, sf, si)
    senders = L.Senders(f=sf, i=si, paths=np.arange(len(routes.paths), dtype=np.int64),
                        cumweight=cumweight, path_sent=np.zeros(len(routes.paths)),
                        sent_at=np.zeros((n_subflows, ring)),
                        resent=np.zeros((n_subflows, ring), np.int8),
                        sacked=np.zeros((n_subflows, ring), np.int8))
    ri = np.zeros((n_subflows, L.N_RI), np.int64)
    ri[:, L.RI_PATH] = path_first[:-1]
    rf = np.zeros((n_subflows, L.N_RF))
    rf[:, L.RF_COMPLETION] = math.inf
    rf[:, L.RF_LAST_CNP] = -math.inf
    rounds = max(flow.rounds for flow in routes.flows)
    receivers = L.Receivers(i=ri, f=rf, have=np.zeros((n_subflows, ring), np.int8),
                            block_done=np.full((n_flows, rounds), math.inf))

    switch_buffers = sum(link.buffer for link in network.links if link.src not in network.hosts)
    rates = np.array([network.links[nic].capacity for nic in si[:, L.SI_NIC]])
    bdp = float(np.max(sf[:, L.SF_BASE_RTT] * rates)) / mss
    # the buffers can hold no more than the senders can send in the whole run (pools that run
    # dry are enlarged and the run repeated, see simulate_packets)
    sendable = sum(network.links[nic].capacity for nic in set(si[:, L.SI_NIC].tolist()))
    buffered = min(2 * switch_buffers, 2 * sendable * duration) / mss
    pool = int(buffered + n_subflows * (4 * (bdp + cfg.init_cwnd) + 64) + 4096)
    pool *= options.pool_scale
    timers = 3 * n_subflows  # RTO, delayed ACK, congestion-control timer per sender
    # a TX_DONE and two PFC frames (a PAUSE and a resume in flight) per link
    # ... and a start and a next-round event per sender
    heap = pool + 3 * n_links + 3 * timers + 2 * n_subflows + 64
    _check_memory(pool, heap, options.pool_scale)
    ctl = np.zeros(L.N_CTL, np.int64)
    sim = L.Sim(
        links=_links(scenario, network, si[:, L.SI_NIC]), paths=_paths(network, routes),
        packets=L.packet_pool(pool), events=L.event_heap(heap),
        timers=np.full((timers, L.N_TM), math.inf), senders=senders, receivers=receivers,
        recorder=L.Recorder(links=np.zeros((cfg.records, n_links, L.N_RL)),
                            senders=np.zeros((cfg.records, n_subflows, L.N_RS))),
        ctl=ctl, cfg=cfg)
    return Built(scenario, network, routes, options, sim, cfg.growth)
