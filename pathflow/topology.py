"""Topology builders: star, dumbbell, fat-tree, leaf-spine and user graphs -> a `Network`; and
the empty-queue round trip of a path through it (`path_base_rtt`, `base_rtt`).

Every cable is two directed links, one per direction, each with its own egress queue (the queue of
the port that transmits onto it). Link names are "src->dst" with node names such as "h3", "s0",
"edge1_0", "agg1_1", "core0_1"; each link also has a tier label ("access", "bottleneck",
"host-edge", "edge-agg", "agg-core", "host-leaf", "leaf-spine", "graph") that
`[[topology.links]]` overrides can select.

Node naming:
- star: senders h0..h{N-1}, switch s0, receiver r0.
- dumbbell: senders h0..h{N-1} -> s0 -> s1 -> receivers r0..r{N-1}.
- fattree(k): hosts h{pod}_{edge}_{i}, edge{pod}_{i}, agg{pod}_{i}, core{i}_{j} (Al-Fares et al.
  2008: k pods of k/2 edge and k/2 aggregation switches, (k/2)^2 cores, k^3/4 hosts).
- leafspine: hosts h{leaf}_{i}, leaf{i}, spine{j}.
- graph: node names from the file; hosts are the `hosts` list or else the nodes of degree 1.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import networkx as nx

from pathflow.models.pfc import default_xoff, headroom
from pathflow.scenario import Scenario, ScenarioError
from pathflow.units import UnitError, parse_rate, parse_size, parse_time

__all__ = ["Link", "Network", "base_rtt", "build_network", "path_base_rtt", "pfc_sharing",
           "pfc_thresholds"]


@dataclass(frozen=True)
class Link:
    """A directed link and the egress queue that feeds it. SI units."""

    name: str
    src: str
    dst: str
    tier: str
    capacity: float  # bytes/s
    delay: float  # s, one-way propagation
    buffer: float  # bytes


@dataclass
class Network:
    """Directed links between named nodes, and which nodes are end hosts."""

    links: list[Link]
    hosts: list[str]
    senders: list[str]
    receivers: list[str]
    index: dict[str, int] = field(init=False)

    def __post_init__(self) -> None:
        self.index = {link.name: i for i, link in enumerate(self.links)}

    @property
    def graph(self) -> nx.DiGraph:
        g = nx.DiGraph()
        for i, link in enumerate(self.links):
            g.add_edge(link.src, link.dst, link=i)
        return g

    def link_between(self, src: str, dst: str) -> int:
        return self.index[f"{src}->{dst}"]


def base_rtt(hops: Iterable[tuple[float, float, float]], packet: float, ack: float,
             header: float = 0.0) -> float:
    """Empty-queue round trip (s) over `hops`, each (one-way delay s, rate out, rate back):
    per hop, propagation both ways, one packet serialised out and one ACK back, each with
    `header` of link framing (store-and-forward, as switches and ns-3 forward).

    Sizes and rates in one unit of data: bytes and bytes/s, or bits and bits/s (the ns-3
    runner's, whose rates are bits/s).
    """
    total = 0.0
    for delay, rate_out, rate_back in hops:  # summed hop by hop, in path order
        total += 2 * delay + (packet + header) / rate_out + (ack + header) / rate_back
    return total


def path_base_rtt(network: Network, path: Iterable[int], packet_bytes: float, ack_bytes: float,
                  header_bytes: float = 0.0) -> float:
    """Empty-queue round trip (s) of `path` (link indices): data out along it, each ACK back on
    the reverse link of every hop (`base_rtt`). The fluid model has no framing; the packet
    engine may add `header_bytes` to every packet and ACK."""
    links = network.links
    hops = ((links[i].delay, links[i].capacity,
             links[network.link_between(links[i].dst, links[i].src)].capacity) for i in path)
    return base_rtt(hops, packet_bytes, ack_bytes, header_bytes)


Cable = tuple[str, str, str]  # (node a, node b, tier)


def pfc_thresholds(scenario: Scenario, network: Network) -> tuple[list[float], list[float]]:
    """Xoff and Xon (bytes) of every link as an ingress port of the switch it feeds
    (`models.pfc`); inf where nothing pauses it (PFC off, or a link into a host). With a shared
    buffer (`pfc_sharing`) the thresholds are dynamic and these are the resume offset below
    the dynamic Xoff: Xoff 2 packets, Xon 0. One-line ScenarioError where a default Xoff
    leaves no room."""
    aqm, packet = scenario.si.aqm, scenario.si.transport.mss
    hosts = set(network.hosts)
    ingress: dict[str, int] = {}
    port_buffer: dict[str, float] = {}
    for link in network.links:
        ingress[link.dst] = ingress.get(link.dst, 0) + 1
        if link.src not in hosts:
            port_buffer[link.src] = min(port_buffer.get(link.src, link.buffer), link.buffer)
    xoff, xon = [], []
    for link in network.links:
        if not aqm.pfc or link.dst in hosts:
            xoff.append(float("inf"))
            xon.append(float("inf"))
            continue
        if aqm.shared_buffer is not None:
            xoff.append(2.0 * packet)
            xon.append(0.0)
            continue
        off = aqm.xoff
        if off is None:
            off = default_xoff(port_buffer[link.dst] / ingress[link.dst], link.capacity,
                               link.delay, packet)
            if off <= 0:
                raise ScenarioError(
                    f"aqm.xoff: the default for {link.name} (the buffer of {link.dst} per "
                    f"ingress port, {port_buffer[link.dst] / ingress[link.dst]:.0f} B, less "
                    "the headroom for its round trip) leaves no room; set aqm.xoff or a larger "
                    "topology.buffer")
        on = max(off - 2.0 * packet, 0.0) if aqm.xon is None else aqm.xon
        if on > off:
            raise ScenarioError(f"aqm.xon: {on:.0f} B must not exceed xoff ({off:.0f} B at "
                                f"{link.name})")
        xoff.append(off)
        xon.append(on)
    return xoff, xon


def pfc_sharing(scenario: Scenario, network: Network
                ) -> tuple[list[float], list[float], list[int]]:
    """Per link, as an ingress port of the switch it feeds, what a shared PFC buffer needs
    (`models.pfc`): the dynamic-threshold factor alpha (0: static thresholds), the room (the
    pool less the headroom of every ingress port of that switch, bytes; 0 where static) and its
    group (the index of the first link feeding the same switch: the switch's bytes are the sum
    of its group's ingress occupancies). One-line ScenarioError where the headroom takes the
    whole pool."""
    aqm, packet = scenario.si.aqm, scenario.si.transport.mss
    hosts = set(network.hosts)
    first: dict[str, int] = {}
    reserved: dict[str, float] = {}
    for index, link in enumerate(network.links):
        first.setdefault(link.dst, index)
        reserved[link.dst] = reserved.get(link.dst, 0.0) + headroom(link.capacity, link.delay,
                                                                    packet)
    group = [first[link.dst] for link in network.links]
    pool = aqm.shared_buffer
    if not aqm.pfc or pool is None:
        return [0.0] * len(group), [0.0] * len(group), group
    alpha, room = [], []
    for link in network.links:
        shared = link.dst not in hosts
        if shared and reserved[link.dst] >= pool:
            raise ScenarioError(f"aqm.shared_buffer: {pool:.0f} B leaves no room beyond the "
                                f"headroom of {link.dst}'s ingress ports "
                                f"({reserved[link.dst]:.0f} B)")
        alpha.append(aqm.pfc_alpha if shared else 0.0)
        room.append(pool - reserved[link.dst] if shared else 0.0)
    return alpha, room, group


def _star(n: int) -> tuple[list[Cable], list[str], list[str]]:
    senders = [f"h{i}" for i in range(n)]
    cables = [(h, "s0", "access") for h in senders] + [("s0", "r0", "bottleneck")]
    return cables, senders, ["r0"]


def _dumbbell(n: int) -> tuple[list[Cable], list[str], list[str]]:
    senders = [f"h{i}" for i in range(n)]
    receivers = [f"r{i}" for i in range(n)]
    cables = [(h, "s0", "access") for h in senders] + [("s0", "s1", "bottleneck")]
    cables += [("s1", r, "access") for r in receivers]
    return cables, senders, receivers


def _fattree(k: int, nics: int = 1) -> tuple[list[Cable], list[str], list[str]]:
    """A k-ary fat-tree; a host with several NICs attaches to its edge switch and the next ones
    of its pod (dual-homed, as in Raiciu et al.'s MPTCP datacenter topologies)."""
    half = k // 2
    cables: list[Cable] = []
    hosts: list[str] = []
    for pod in range(k):
        for e in range(half):
            edge = f"edge{pod}_{e}"
            for i in range(half):
                host = f"h{pod}_{e}_{i}"
                hosts.append(host)
                cables += [(host, f"edge{pod}_{(e + n) % half}", "host-edge")
                           for n in range(nics)]
            for a in range(half):
                cables.append((edge, f"agg{pod}_{a}", "edge-agg"))
        for a in range(half):
            for j in range(half):
                cables.append((f"agg{pod}_{a}", f"core{a}_{j}", "agg-core"))
    return cables, hosts, hosts


def _leafspine(leaves: int, spines: int, per_leaf: int, nics: int = 1
               ) -> tuple[list[Cable], list[str], list[str]]:
    """Leaves under every spine; a host with several NICs attaches to its leaf and the next."""
    cables: list[Cable] = []
    hosts: list[str] = []
    for leaf in range(leaves):
        for i in range(per_leaf):
            hosts.append(f"h{leaf}_{i}")
            cables += [(f"h{leaf}_{i}", f"leaf{(leaf + n) % leaves}", "host-leaf")
                       for n in range(nics)]
        for s in range(spines):
            cables.append((f"leaf{leaf}", f"spine{s}", "leaf-spine"))
    return cables, hosts, hosts


def _read_graph(scenario: Scenario) -> tuple[nx.Graph, str]:
    text = scenario.si.topology.edges or ""
    path = Path(text)
    if not path.is_absolute():
        path = scenario.base_dir / path
    if not path.exists():
        raise ScenarioError(f"topology.edges: file {text!r} not found (looked in {path.parent})")
    if path.suffix.lower() in (".graphml", ".xml"):
        try:
            graph = nx.Graph(nx.read_graphml(path))
        except Exception as error:  # networkx raises several parser errors
            raise ScenarioError(
                f"topology.edges: {path.name} is not valid GraphML ({error})") from None
        return graph, path.name
    graph = nx.Graph()
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        columns = set(reader.fieldnames or [])
        if not {"src", "dst"} <= columns:
            raise ScenarioError(f"topology.edges: {path.name} needs a header with columns src,dst "
                                f"(optional: link_rate, delay, buffer); got {sorted(columns)}")
        for row in reader:
            extra = {key: row[key] for key in ("link_rate", "delay", "buffer") if row.get(key)}
            graph.add_edge(row["src"].strip(), row["dst"].strip(), **extra)
    if graph.number_of_edges() == 0:
        raise ScenarioError(f"topology.edges: {path.name} holds no edges")
    return graph, path.name


def _graph(scenario: Scenario) -> tuple[list[Cable], list[str], list[str], nx.Graph]:
    graph, filename = _read_graph(scenario)
    components = nx.number_connected_components(graph)
    if components > 1:
        raise ScenarioError(f"topology.edges: the graph in {filename} is not connected "
                            f"({components} components); every host must reach every other")
    listed = scenario.si.topology.hosts
    if listed:
        missing = [h for h in listed if h not in graph]
        if missing:
            raise ScenarioError(f"topology.hosts: {missing[0]!r} is not a node of {filename}")
        hosts = list(listed)
    else:
        hosts = sorted((n for n in graph if graph.degree(n) == 1), key=str)
    if len(hosts) < 2:
        raise ScenarioError(f"topology.hosts: {filename} needs at least 2 hosts (nodes of degree 1 "
                            "unless listed in topology.hosts)")
    cables = [(str(a), str(b), "graph") for a, b in graph.edges()]
    return cables, hosts, hosts, graph


def build_network(scenario: Scenario) -> Network:
    """The scenario's topology as directed links with capacity, delay and buffer (SI units)."""
    topo = scenario.si.topology
    file_graph: nx.Graph | None = None
    if topo.kind == "star":
        cables, senders, receivers = _star(topo.senders or 1)
    elif topo.kind == "dumbbell":
        cables, senders, receivers = _dumbbell(topo.senders or 1)
    elif topo.kind == "fattree":
        cables, senders, receivers = _fattree(topo.k or 4, topo.nics)
    elif topo.kind == "leafspine":
        cables, senders, receivers = _leafspine(topo.leaves or 1, topo.spines or 1,
                                                topo.hosts_per_leaf or 1, topo.nics)
    else:
        cables, senders, receivers, file_graph = _graph(scenario)
    hosts = list(dict.fromkeys(senders + receivers))
    links: list[Link] = []
    for a, b, tier in cables:
        for src, dst in ((a, b), (b, a)):
            name = f"{src}->{dst}"
            capacity, delay, buffer = topo.link(name, tier)
            if file_graph is not None:
                capacity, delay, buffer = _edge_overrides(scenario, file_graph.edges[a, b],
                                                          name, (capacity, delay, buffer))
            links.append(Link(name, src, dst, tier, capacity, delay, buffer))
    return Network(links, hosts, senders, receivers)


def _edge_overrides(scenario: Scenario, attrs: dict[str, str], name: str,
                    values: tuple[float, float, float]) -> tuple[float, float, float]:
    """Per-edge link_rate / delay / buffer columns of a graph file, unless an explicit
    [[topology.links]] override in the scenario selects this link (the scenario wins). The
    columns are text of the graph file, read here (the scenario's own text is resolved)."""
    if any(o.selects(name, "graph") for o in scenario.si.topology.links):
        return values
    capacity, delay, buffer = values
    where = f"topology.edges[{name}]"
    try:
        if "link_rate" in attrs:
            capacity = parse_rate(str(attrs["link_rate"]), f"{where}.link_rate")
        if "delay" in attrs:
            delay = parse_time(str(attrs["delay"]), f"{where}.delay")
        if "buffer" in attrs:
            buffer = parse_size(str(attrs["buffer"]), scenario.si.transport.mss,
                                f"{where}.buffer")
    except UnitError as error:
        raise ScenarioError(str(error)) from None
    return capacity, delay, buffer
