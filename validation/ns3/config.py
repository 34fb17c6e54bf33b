"""What an ns-3 run is asked to simulate: `Ns3Config` (one scenario, SI units) and, for arbitrary
graphs, `Ns3Network` with its `Ns3Cable`s and `Ns3Path`s; their validation, their JSON form (how
the parent hands a scenario to the child process) and the quantities derived from them (ports,
empty-queue RTTs, the graph ns-3 builds)."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pathflow.topology import base_rtt

__all__ = ["TCP_IP_HEADER_BYTES", "TCP_TYPES", "Ns3Cable", "Ns3Config", "Ns3Network", "Ns3Path",
           "Routing"]

TCP_IP_HEADER_BYTES = 52  # 20 IP + 20 TCP + 12 timestamp option (10 B padded to 12)
_ACK_BYTES = TCP_IP_HEADER_BYTES
_PPP_HEADER_BYTES = 2
_FIRST_FLOW_PORT = 10000
_MAX_FLOWS = 49152 - _FIRST_FLOW_PORT  # flow ports stay below ns-3's ephemeral range

Routing = Literal["global", "paths", "random_ecmp"]


# The congestion controls simulation.cc implements, by pathflow name, with the ns-3 TypeId each
# is (DCTCP: simulation.cc's LinuxDctcp, ns-3's with Linux's floor) (models.registry declares the
# same; tests/test_registry.py compares them).
TCP_TYPES = {"reno": "ns3::TcpNewReno", "dctcp": "ns3::TcpDctcp"}

@dataclass(frozen=True)
class Ns3Cable:
    """A full-duplex point-to-point cable between nodes `a` and `b`: one delay (s), a rate
    (bits/s) and a switch-port buffer (packets) per direction. None takes the `Ns3Config`
    default (`link_rate_bps`, `delay_s`, `buffer_packets`)."""

    a: str
    b: str
    rate_ab_bps: float | None = None
    rate_ba_bps: float | None = None
    delay_s: float | None = None
    buffer_ab_packets: int | None = None
    buffer_ba_packets: int | None = None


@dataclass(frozen=True)
class Ns3Path:
    """One path of flow `flow`: the nodes from its sender to its receiver, and the share of
    the flow's packets it carries (the weights of a flow's paths sum to 1)."""

    flow: int
    nodes: tuple[str, ...]
    weight: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "nodes", tuple(str(n) for n in self.nodes))


@dataclass(frozen=True)
class Ns3Network:
    """An arbitrary network: nodes (created in this order; `hosts` are end hosts, the others
    switches), cables (ports are created in this order, a->b before b->a), flows as
    (sender, receiver) host pairs, their paths, how ns-3 forwards (see `pathflow.validation.ns3`),
    and optionally the port whose sending device `pcap_dir` captures."""

    nodes: tuple[str, ...]
    hosts: tuple[str, ...]
    cables: tuple[Ns3Cable, ...]
    flows: tuple[tuple[str, str], ...]
    paths: tuple[Ns3Path, ...] = ()
    routing: Routing = "paths"
    pcap_link: str | None = None

    def __post_init__(self) -> None:
        # Frozen dataclass: bypass __setattr__ so that lists (from JSON) become hashable tuples.
        fix = object.__setattr__
        fix(self, "nodes", tuple(str(n) for n in self.nodes))
        fix(self, "hosts", tuple(str(n) for n in self.hosts))
        fix(self, "cables", tuple(c if isinstance(c, Ns3Cable) else Ns3Cable(**c)
                                  for c in self.cables))
        fix(self, "flows", tuple((str(s), str(d)) for s, d in self.flows))
        fix(self, "paths", tuple(p if isinstance(p, Ns3Path) else Ns3Path(**p)
                                 for p in self.paths))

    def link_names(self) -> list[str]:
        """Port names in the order of the Dataset's `link` coordinate."""
        return [name for c in self.cables for name in (f"{c.a}->{c.b}", f"{c.b}->{c.a}")]

    def problems(self) -> list[str]:
        out: list[str] = []
        nodes = set(self.nodes)
        if len(nodes) != len(self.nodes):
            out.append("network.nodes has duplicate names")
        if not set(self.hosts) <= nodes:
            out.append("network.hosts must be nodes")
        if self.routing not in ("paths", "random_ecmp"):
            out.append(f"network.routing must be 'paths' or 'random_ecmp', got {self.routing!r}")
        pairs: set[frozenset[str]] = set()
        for c in self.cables:
            if c.a not in nodes or c.b not in nodes or c.a == c.b:
                out.append(f"network cable {c.a}-{c.b} must join two different nodes")
            elif frozenset((c.a, c.b)) in pairs:
                out.append(f"network cable {c.a}-{c.b} is listed twice")
            pairs.add(frozenset((c.a, c.b)))
            rates = [r for r in (c.rate_ab_bps, c.rate_ba_bps) if r is not None]
            buffers = [b for b in (c.buffer_ab_packets, c.buffer_ba_packets) if b is not None]
            if any(not r > 0 for r in rates) or any(b < 1 for b in buffers):
                out.append(f"network cable {c.a}-{c.b}: rates must be > 0 and buffers >= 1")
            if c.delay_s is not None and not c.delay_s >= 0:
                out.append(f"network cable {c.a}-{c.b}: delay_s must be >= 0")
        hosts = set(self.hosts)
        for i, (src, dst) in enumerate(self.flows):
            if src not in hosts or dst not in hosts or src == dst:
                out.append(f"network flow {i} ({src}->{dst}) must join two different hosts")
        weights = [0.0] * len(self.flows)
        for p in self.paths:
            if not 0 <= p.flow < len(self.flows):
                out.append(f"network path of flow {p.flow}: no such flow")
                continue
            if (p.nodes[:1], p.nodes[-1:]) != ((self.flows[p.flow][0],), (self.flows[p.flow][1],)):
                out.append(f"network path of flow {p.flow} must run from its sender to its "
                           "receiver")
            gaps = [f"{a}-{b}" for a, b in itertools.pairwise(p.nodes)
                    if frozenset((a, b)) not in pairs]
            if gaps:
                out.append(f"network path of flow {p.flow}: no cable {gaps[0]}")
            if not p.weight > 0:
                out.append(f"network path of flow {p.flow}: weight must be > 0")
            weights[p.flow] += p.weight
        if self.paths or self.routing == "paths":
            bad = [i for i, w in enumerate(weights) if not math.isclose(w, 1.0, rel_tol=1e-9)]
            if bad:
                out.append(f"network paths: the weights of flow {bad[0]} sum to "
                           f"{weights[bad[0]]:g}, not 1 (every flow needs a path)")
        if self.pcap_link is not None and self.pcap_link not in self.link_names():
            out.append(f"network.pcap_link {self.pcap_link!r} is not a port of the network")
        return out


@dataclass(frozen=True)
class Ns3Config:
    """One ns-3 scenario. SI units (bits/s, seconds), queue sizes in packets.

    For ``topology="network"``, `network` describes the graph; `link_rate_bps`, `delay_s` and
    `buffer_packets` are then the defaults for cable fields left None, `senders` must equal
    the number of distinct sending hosts and `flows` the number of `network.flows`."""

    topology: Literal["star", "dumbbell", "network"]
    senders: int
    link_rate_bps: float
    delay_s: float
    buffer_packets: int
    aqm: Literal["droptail", "ecn_step", "red"]
    cc: Literal["reno", "dctcp"]
    flows: int
    duration_s: float
    threshold_packets: float = 20.0
    red_min_packets: float = 5.0
    red_max_packets: float = 15.0
    red_pmax: float = 0.1
    red_weight: float = 0.002
    packet_bytes: int = 1500
    start_times_s: tuple[float, ...] | None = None
    sample_interval_s: float = 1e-3
    seed: int = 1
    dctcp_g: float = 1 / 16
    delayed_ack_count: int = 2
    initial_cwnd_packets: int = 10
    min_rto_s: float = 0.2
    # None: min(40 ms, min_rto_s / 5) (see validation/ns3/__init__.py)
    delayed_ack_timeout_s: float | None = None
    sack: bool = True  # ns-3's default, as Linux's
    # Finite flows: each flow's payload bytes per round (0: long-lived), and with `rounds` > 1
    # barrier-synchronised reads, the next round released when every flow's block has arrived
    block_bytes: int = 0
    rounds: int = 1
    # Directory for a pcap capture of the bottleneck link's sending device (None: no capture).
    pcap_dir: str | None = None
    # The graph of topology="network" (None for star and dumbbell).
    network: Ns3Network | None = None

    def __post_init__(self) -> None:
        if self.start_times_s is not None and not isinstance(self.start_times_s, tuple):
            # Frozen dataclass: bypass __setattr__ so lists from JSON stay hashable.
            object.__setattr__(self, "start_times_s", tuple(float(t) for t in self.start_times_s))
        if isinstance(self.network, dict):
            object.__setattr__(self, "network", Ns3Network(**self.network))
        problems = list(self._problems())
        if problems:
            raise ValueError("invalid Ns3Config: " + "; ".join(problems))

    def _problems(self) -> list[str]:
        out: list[str] = []
        if self.topology not in ("star", "dumbbell", "network"):
            out.append(f"topology must be 'star', 'dumbbell' or 'network', got {self.topology!r}")
        if (self.topology == "network") != (self.network is not None):
            out.append("topology='network' needs a network, star and dumbbell take none")
        if self.aqm not in ("droptail", "ecn_step", "red"):
            out.append(f"aqm must be droptail/ecn_step/red, got {self.aqm!r}")
        if self.cc not in TCP_TYPES:
            out.append(f"cc must be one of {', '.join(TCP_TYPES)}, got {self.cc!r}")
        if self.senders < 1 or self.flows < 1:
            out.append("senders and flows must be >= 1")
        if self.flows > _MAX_FLOWS:
            out.append(f"flows must be <= {_MAX_FLOWS} (port {_FIRST_FLOW_PORT} + i must stay "
                       "below ns-3's ephemeral ports)")
        if not self.link_rate_bps > 0 or not self.delay_s >= 0:
            out.append("link_rate_bps must be > 0 and delay_s >= 0")
        if self.buffer_packets < 1:
            out.append("buffer_packets must be >= 1")
        if not self.duration_s > 0:
            out.append("duration_s must be > 0")
        if not 0 < self.sample_interval_s <= self.duration_s:
            out.append("sample_interval_s must be in (0, duration_s]")
        if self.sample_interval_s < 1e-9:
            out.append("sample_interval_s below ns-3's 1 ns time resolution")
        if not TCP_IP_HEADER_BYTES < self.packet_bytes <= 65535:
            out.append(f"packet_bytes must be in ({TCP_IP_HEADER_BYTES}, 65535]")
        if self.aqm == "ecn_step" and not 1 <= self.threshold_packets <= self.buffer_packets:
            out.append("threshold_packets must be in [1, buffer_packets]")
        if self.aqm == "red":
            if not 0 <= self.red_min_packets <= self.red_max_packets:
                out.append("need 0 <= red_min_packets <= red_max_packets")
            if not 0 < self.red_pmax <= 1 or not 0 < self.red_weight <= 1:
                out.append("red_pmax and red_weight must be in (0, 1]")
        if not 0 < self.dctcp_g <= 1:
            out.append("dctcp_g must be in (0, 1]")
        if self.delayed_ack_count < 1 or self.initial_cwnd_packets < 1:
            out.append("delayed_ack_count and initial_cwnd_packets must be >= 1")
        if not self.min_rto_s > 0:
            out.append("min_rto_s must be > 0")
        if self.delayed_ack_timeout_s is not None and not self.delayed_ack_timeout_s > 0:
            out.append("delayed_ack_timeout_s must be > 0")
        if self.seed < 1:
            out.append("seed must be >= 1 (ns-3 rejects 0)")
        if self.block_bytes < 0 or self.rounds < 1:
            out.append("block_bytes must be >= 0 and rounds >= 1")
        if self.rounds > 1 and self.block_bytes == 0:
            out.append("rounds > 1 needs block_bytes > 0 (a long-lived flow has one round)")
        if self.pcap_dir is not None and not str(self.pcap_dir).strip():
            out.append("pcap_dir must be a directory path or None")
        if self.start_times_s is not None:
            if len(self.start_times_s) != self.flows:
                out.append(f"start_times_s needs {self.flows} entries")
            elif any(not 0 <= t < self.duration_s for t in self.start_times_s):
                out.append("start_times_s must lie in [0, duration_s)")
        if self.network is not None:
            out += self.network.problems()
            if len(self.network.flows) != self.flows:
                out.append(f"flows ({self.flows}) must equal the {len(self.network.flows)} "
                           "network.flows")
            sources = len({src for src, _ in self.network.flows})
            if self.senders != sources:
                out.append(f"senders ({self.senders}) must equal the {sources} distinct "
                           "sending hosts of network.flows")
            if self.pcap_dir is not None and self.network.pcap_link is None:
                out.append("pcap_dir needs network.pcap_link (the port to capture)")
        return out

    @property
    def mss_bytes(self) -> int:
        return self.packet_bytes - TCP_IP_HEADER_BYTES

    @property
    def hops(self) -> int:
        """Links on a data path (for a network: on its longest flow path)."""
        if self.network is not None:
            return max((len(p.nodes) - 1 for p in self.network.paths), default=0)
        return 2 if self.topology == "star" else 3

    @property
    def bottleneck_link(self) -> str | None:
        """The star's or dumbbell's shared link; a network's `pcap_link` (None if unset)."""
        if self.network is not None:
            return self.network.pcap_link
        return "s0->r0" if self.topology == "star" else "s0->s1"

    @property
    def pcap_path(self) -> Path | None:
        """The capture file written when `pcap_dir` is set: `<pcap_dir>/<from>-<to>.pcap`
        (DLT_PPP, nanosecond timestamps). It holds what the bottleneck's sending device
        transmits (stamped at the first bit) and what it receives from the far end (the ACKs,
        stamped at the last bit): ns-3's point-to-point sniffer sees both directions."""
        if self.pcap_dir is None or self.bottleneck_link is None:
            return None
        return Path(self.pcap_dir) / (self.bottleneck_link.replace("->", "-") + ".pcap")

    @property
    def base_rtt_s(self) -> float:
        """Empty-queue RTT: propagation both ways plus serialization of a full data packet
        and of a pure ACK on every hop (store-and-forward, PPP header included). For a
        network, the largest over the flows' paths (`path_base_rtt_s`)."""
        if self.network is not None:
            return max((self.path_base_rtt_s(p.nodes) for p in self.network.paths), default=0.0)
        hop = (self.delay_s, self.link_rate_bps, self.link_rate_bps)
        return self._base_rtt([hop] * self.hops)

    def path_base_rtt_s(self, nodes: tuple[str, ...]) -> float:
        """Empty-queue RTT of the path through `nodes`, data one way and the ACK back."""
        ports = self.ports()
        hops = []
        for a, b in itertools.pairwise(nodes):
            rate_out, delay, _ = ports[(a, b)]
            hops.append((delay, rate_out, ports[(b, a)][0]))
        return self._base_rtt(hops)

    def _base_rtt(self, hops: Iterable[tuple[float, float, float]]) -> float:
        """`topology.base_rtt` with ns-3's wire: its ACK size and the PPP header on every
        packet. Sizes go in bits, as the rates are in bits/s."""
        return base_rtt(hops, self.packet_bytes * 8, _ACK_BYTES * 8, _PPP_HEADER_BYTES * 8)

    def layout(self) -> Ns3Network:
        """The graph ns-3 builds: `network`, or the star's or dumbbell's, in the order in
        which the runner has always created its nodes and links (same objects, same random
        streams, same results)."""
        if self.network is not None:
            return self.network
        n = self.senders
        hosts = tuple(f"h{i}" for i in range(n))
        if self.topology == "star":
            receivers: tuple[str, ...] = ("r0",)
            switches: tuple[str, ...] = ("s0",)
            cables = [Ns3Cable("s0", "r0")] + [Ns3Cable(h, "s0") for h in hosts]
        else:
            receivers = tuple(f"r{i}" for i in range(n))
            switches = ("s0", "s1")
            cables = ([Ns3Cable("s0", "s1")] + [Ns3Cable(h, "s0") for h in hosts]
                      + [Ns3Cable("s1", r) for r in receivers])
        return Ns3Network(nodes=hosts + switches + receivers, hosts=hosts + receivers,
                          cables=tuple(cables), flows=tuple(self.flow_endpoints()),
                          routing="global")

    def ports(self) -> dict[tuple[str, str], tuple[float, float, int]]:
        """(from, to) -> (rate bits/s, delay s, buffer packets) of every egress port."""
        out: dict[tuple[str, str], tuple[float, float, int]] = {}
        for c in self.layout().cables:
            delay = self.delay_s if c.delay_s is None else c.delay_s
            for a, b, rate, buffer in ((c.a, c.b, c.rate_ab_bps, c.buffer_ab_packets),
                                       (c.b, c.a, c.rate_ba_bps, c.buffer_ba_packets)):
                out[(a, b)] = (self.link_rate_bps if rate is None else rate, delay,
                               self.buffer_packets if buffer is None else buffer)
        return out

    def flow_endpoints(self) -> list[tuple[str, str]]:
        if self.network is not None:
            return list(self.network.flows)
        n = self.senders
        if self.topology == "star":
            return [(f"h{i % n}", "r0") for i in range(self.flows)]
        return [(f"h{i % n}", f"r{i % n}") for i in range(self.flows)]

    def to_json(self) -> str:
        raw = dataclasses.asdict(self)
        # Without a capture, a network or finite flows the JSON stays what it was before they
        # existed.
        for key, absent in (("pcap_dir", None), ("network", None), ("block_bytes", 0),
                            ("rounds", 1)):
            if raw[key] == absent:
                del raw[key]
        return json.dumps(raw, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Ns3Config:
        raw: dict[str, Any] = json.loads(text)
        if raw.get("start_times_s") is not None:
            raw["start_times_s"] = tuple(raw["start_times_s"])
        return cls(**raw)
