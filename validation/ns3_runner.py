"""Packet-level ground truth from ns-3 (3.44) for stars, dumbbells and any pathflow network.

What it models
--------------
* ``star``: senders ``h0..h{N-1}`` -> switch ``s0`` -> receiver ``r0``; bottleneck ``s0->r0``.
* ``dumbbell``: ``h0..h{N-1}`` -> ``s0`` -> ``s1`` -> ``r0..r{N-1}``; bottleneck ``s0->s1``.
  Star and dumbbell links all have the same rate and one-way delay.
* ``network``: any graph of named nodes joined by cables (`Ns3Network`; this is what
  ``validation/ns3_scenario.py`` makes of a pathflow fat-tree, leaf-spine or graph, with
  pathflow's node and link names), each cable with its own delay and, per direction, its own
  rate and buffer; flows between named hosts, each with the path(s) pathflow gave it.
* Every cable is a full-duplex point-to-point link: one delay, one rate per direction.
* Long-lived TCP flows (``BulkSendApplication`` -> ``PacketSink``), ``ns3::TcpNewReno``
  (no ECN) or ``ns3::TcpDctcp`` (ECN), with SACK and timestamps (MSS = packet - 52 B),
  PRR recovery (ns-3 default), delayed ACKs, and socket buffers large enough never to limit.
  Flow i listens on TCP port 10000 + i.
* Every switch egress port carries the configured queue disc (FIFO, a step marker built from
  ``RedQueueDisc`` with ``MinTh = MaxTh = K`` and ``QW = 1``, or RED), sized by that port's
  buffer; host NICs get an effectively unlimited FIFO (in networks, two: pure ACKs are sent
  ahead of data, see Limits). Device TX queues hold one packet, so queueing (and the AQM
  decision) happens in the queue disc.
* Routing. Star and dumbbell: ns-3's global routing (each pair has one path). Networks, with
  ``routing="paths"`` (the default): every flow follows its own paths (`Ns3Path`), forwarded by
  a per-flow table at each node (``FlowRouting``, consulted before global routing). A packet's
  flow is its TCP port 10000 + i (the data's destination port, the ACKs' source port), so two
  flows to one host may take different paths and ACKs return on the reverse of their flow's
  paths; per-destination host routes could express neither (on the k = 4 fat-tree permutation
  of seed 1, 4 nodes would need two next hops towards one host). A flow with one path
  (pathflow's ``ecmp``, ``shortest``, ``static``) is forwarded deterministically. A flow with
  several (``spray``) picks its next hop per packet at each node, with probability proportional
  to the weight of its paths through that hop; for equal weights over all shortest paths of a
  pair (pathflow's spray, unless ``routing.max_paths`` truncated them) that reproduces the equal
  per-path split exactly on any graph, ACKs included (sprayed over the reversed paths).
  ``routing="random_ecmp"`` leaves forwarding to ns-3 instead (``Ipv4GlobalRouting`` with
  ``RandomEcmpRouting=true``: every packet, data or ACK, picks uniformly among each node's
  equal-cost next hops). That equals pathflow's spray where each of a node's equal-cost next
  hops leads to equally many shortest paths (fat-tree, leaf-spine); on an irregular graph the
  per-path shares differ, and the paths are ns-3's, not `Ns3Path`'s (which then only give the
  base RTTs).

Observables (sampled every ``sample_interval_s`` from C++, no per-packet Python callbacks):
queue backlog per egress port, per-port departure / drop / mark rates, per-flow goodput,
congestion window, an RTT estimate and, for DCTCP, alpha. All byte counts are IP bytes
(IP + TCP headers + payload; the 2-byte PPP header is excluded); ``flow_rate`` is goodput
(application payload). Ports are named ``from->to`` with the node names (``edge0_0->agg0_1``).
For networks, the attribute ``unrouted_packets`` counts packets that no flow table recognised
and global routing forwarded instead (0 unless something other than the flows sends).
With ``pcap_dir`` set, ns-3 also writes a pcap of the bottleneck link's sending device
(``Ns3Config.pcap_path``; both directions, see there; networks name the link in
``Ns3Network.pcap_link``), which ``pathflow.validation.traces.load_pcap`` turns into the same
rate variables.

Limits
------
* ns-3 keeps global state, so each scenario runs in a fresh subprocess, with ~17 s of fixed
  cost: ~13 s importing the cppyy bindings, ~3 s JIT-compiling the C++ helper and templates.
* The step marker tests the number of packets already in the queue disc (>= K marks). The
  reported ``queue`` also counts the packet waiting in the device queue, so it sits about one
  packet above what the marker sees. With ``cc="reno"`` the AQMs cannot mark (packets are not
  ECN-capable) and drop instead.
* RED is ns-3's: non-gentle, ``UseHardDrop=false``, ``Wait=true``; ns-3 spaces marks
  uniformly (Floyd's count correction), so the per-packet mark rate differs from the
  nominal p(avg). Check it with ``marks / link_departure``. Its idle-time decay uses the
  port's own rate (``LinkBandwidth``).
* ns-3 takes TCP RTT samples from the timestamp option, which has 1 ms resolution, so its
  own RTT estimate is useless at data-center RTTs. ``rtt`` here is measured separately:
  one probe segment per round trip, from the sender's transmission of new data to the first
  ACK or SACK covering it (Karn: a probe whose segment is retransmitted is discarded). It
  includes any delayed-ACK wait.
* No pacing, no TSQ, no TSO/GRO: hosts emit window-sized bursts at line rate. Because access
  links run at the bottleneck rate, a window larger than BDP + switch buffer parks its excess
  in the sender's own NIC queue (visible as ``hX->s0`` in ``queue``), unseen by any AQM.
  A host that forwards (a graph whose listed host lies inside another flow's path) keeps that
  unlimited host FIFO, where pathflow sees an ordinary port.
* In a network a host may send one flow and acknowledge another (every host of a permutation
  does). Its NIC then sends pure ACKs ahead of its data (strict priority, ``AckFirstFilter``;
  Linux gets the same from TSQ and fq); in one FIFO they would wait behind the data backlog
  and throttle the other flow. The backlog itself remains: ns-3 grows a window that the NIC,
  not the window, limits (no RFC 7661), so a flow whose bottleneck is its own NIC (uncontended
  in a permutation, where every link has the NIC's rate) sees few or no marks and fills its
  ``hX->...`` queue up to its socket buffer (on the k = 4 fat-tree at 1 Gb/s: 4 000 packets,
  50 ms, after 0.2 s): its throughput is line rate but its ``cwnd`` and ``rtt`` mean nothing,
  and a switch port it shares with other flows' ACKs (load slightly above 1) keeps marking
  while the backlog drains, so that port's queue exceeds K. The packet simulator and the
  fluid model keep host queues empty. Star and dumbbell hosts keep one FIFO, so their
  results stay as they were.
* Spraying reorders packets. ns-3's TCP has SACK but neither RACK nor D-SACK undo, and a fixed
  duplicate-ACK threshold of 3: reordering beyond 3 segments triggers spurious fast
  retransmits and window cuts (the packet simulator undoes them and adapts its threshold).
* A cable has one delay for both directions (ns-3's point-to-point channel). At most 39152
  flows: port 10000 + i must stay below ns-3's ephemeral ports (49152 and up), which
  ``FlowRouting`` relies on to tell data from ACKs.
* Deviations from ns-3 defaults: the delayed-ACK timeout is min(40 ms, min_rto_s / 5)
  (Linux's minimum is 40 ms). ns-3's 200 ms equals a 200 ms MinRto and livelocks a flow after
  an RTO (one segment per RTO, forever). And the duplicate-ACK count restarts when a DCTCP
  window reduction (CA_CWR) ends: ns-3 counts SACK-bearing ACKs during CWR without acting on
  them, and the stale count then fails an NS_ASSERT in CA_OPEN and aborts the run (reordering
  or loss during CWR reach it, e.g. spraying); runs that never reach it are unchanged.
* ns-3's DCTCP cuts ssthresh to (1 - alpha/2) cwnd with no floor (Linux keeps 2 segments),
  so a flow marked at several bottlenecks can fall to one segment, which then waits for the
  receiver's delayed-ACK timer (40 ms) every round trip: such a flow all but stops.
* ``cc="reno"`` with ``aqm="ecn_step"`` is a drop-tail queue of K packets; with two Reno
  flows it can lock one flow out completely (its retransmissions always find the queue full).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import xarray as xr

__all__ = ["Ns3Cable", "Ns3Config", "Ns3Network", "Ns3Path", "ns3_available", "run_ns3"]

ENGINE = "ns-3 3.44"
_MODULE_NAME = "pathflow.validation.ns3_runner"
_TCP_IP_HEADER_BYTES = 52  # 20 IP + 20 TCP + 12 timestamp option (10 B padded to 12)
_ACK_BYTES = _TCP_IP_HEADER_BYTES
_PPP_HEADER_BYTES = 2
_EXIT_NO_NS3 = 3
_FIRST_FLOW_PORT = 10000
_MAX_FLOWS = 49152 - _FIRST_FLOW_PORT  # flow ports stay below ns-3's ephemeral range

Routing = Literal["global", "paths", "random_ecmp"]


# The congestion controls the C++ scenario below implements, by pathflow name, with the ns-3
# TypeId each becomes (models.registry declares the same; tests/test_registry.py compares them).
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
    (sender, receiver) host pairs, their paths, how ns-3 forwards (see the module docstring),
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
        if not _TCP_IP_HEADER_BYTES < self.packet_bytes <= 65535:
            out.append(f"packet_bytes must be in ({_TCP_IP_HEADER_BYTES}, 65535]")
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
        if self.seed < 1:
            out.append("seed must be >= 1 (ns-3 rejects 0)")
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
        return self.packet_bytes - _TCP_IP_HEADER_BYTES

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
        data_tx = (self.packet_bytes + _PPP_HEADER_BYTES) * 8 / self.link_rate_bps
        ack_tx = (_ACK_BYTES + _PPP_HEADER_BYTES) * 8 / self.link_rate_bps
        return self.hops * (2 * self.delay_s + data_tx + ack_tx)

    def path_base_rtt_s(self, nodes: tuple[str, ...]) -> float:
        """Empty-queue RTT of the path through `nodes`, data one way and the ACK back."""
        ports = self.ports()
        total = 0.0
        for a, b in itertools.pairwise(nodes):
            rate_ab, delay, _ = ports[(a, b)]
            rate_ba = ports[(b, a)][0]
            total += (2 * delay + (self.packet_bytes + _PPP_HEADER_BYTES) * 8 / rate_ab
                      + (_ACK_BYTES + _PPP_HEADER_BYTES) * 8 / rate_ba)
        return total

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
        # Without a capture or a network the JSON stays what it was before they existed.
        for key in ("pcap_dir", "network"):
            if raw[key] is None:
                del raw[key]
        return json.dumps(raw, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Ns3Config:
        raw: dict[str, Any] = json.loads(text)
        if raw.get("start_times_s") is not None:
            raw["start_times_s"] = tuple(raw["start_times_s"])
        return cls(**raw)


def ns3_available() -> bool:
    """True if the ns-3 Python bindings are installed (checked without importing them,
    which would take ~10 s and pull ns-3's global state into this process)."""
    return importlib.util.find_spec("ns") is not None


def run_ns3(config: Ns3Config, timeout_s: float | None = None) -> xr.Dataset:
    """Run one scenario in a fresh subprocess and return its sampled time series.

    Raises RuntimeError if ns-3 is not installed, the subprocess fails or times out.
    """
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="pathflow-ns3-") as tmp:
        cfg_path = Path(tmp) / "config.json"
        out_path = Path(tmp) / "result.npz"
        cfg_path.write_text(config.to_json())
        if config.pcap_path is not None:
            # ns-3 aborts if it cannot open the capture file; create its directory here.
            config.pcap_path.parent.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, *_child_entry(), str(cfg_path), str(out_path)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired as exc:
            raise RuntimeError(
                f"ns-3 run exceeded timeout_s={timeout_s}:\n{_tail(exc.stderr)}"
            ) from exc
        if proc.returncode == _EXIT_NO_NS3:
            raise RuntimeError(
                f"ns-3 Python bindings are not importable by {sys.executable} "
                f"(pip install 'ns3==3.44.post0'):\n{_tail(proc.stderr)}"
            )
        if proc.returncode != 0 or not out_path.exists():
            raise RuntimeError(
                f"ns-3 subprocess failed (exit code {proc.returncode}):\n"
                f"{_tail(proc.stderr) or _tail(proc.stdout)}"
            )
        with np.load(out_path, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    return _to_dataset(config, arrays, wall_time_s=time.perf_counter() - t0)


def _child_entry() -> list[str]:
    # Prefer `-m` (what an installed package gets); fall back to the file path when this
    # module was loaded from a source tree that is not importable under its package name.
    if __spec__ is not None and __spec__.name == _MODULE_NAME:
        return ["-m", _MODULE_NAME]
    return [str(Path(__file__).resolve())]


def _tail(text: str | bytes | None, lines: int = 25) -> str:
    if text is None:
        return ""
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    # cppyy prints these on every import of ns-3; they are noise, not errors.
    kept = [ln for ln in text.splitlines() if "Failed to materialize symbols" not in ln]
    # On a fatal error cppyy appends a long gdb backtrace after " *** Break *** "; the
    # ns-3 message (NS_FATAL / NS_ASSERT) sits just above it.
    brk = next((i for i, ln in enumerate(kept) if "*** Break ***" in ln), None)
    if brk is not None:
        kept = kept[: brk + 1]
    return "\n".join(kept[-lines:])


def _rate(cumulative: np.ndarray, dt: float) -> np.ndarray:
    """Per-interval average rate from cumulative counters that start at 0 at t = 0."""
    prev = np.concatenate([np.zeros_like(cumulative[:1]), cumulative[:-1]], axis=0)
    return (cumulative - prev) / dt


# name -> (dims, key in the child's arrays, cumulative counter?, units, long_name)
_VARIABLES: dict[str, tuple[tuple[str, str], str, bool, str, str]] = {
    "queue": (
        ("time", "link"), "queue", False, "bytes",
        "egress backlog (queue disc + device queue), sampled",
    ),
    "link_departure": (
        ("time", "link"), "tx", True, "bytes/s",
        "IP bytes whose transmission finished in the interval, per second",
    ),
    "drops": (
        ("time", "link"), "drop", True, "bytes/s",
        "IP bytes dropped at the port in the interval, per second",
    ),
    "marks": (
        ("time", "link"), "mark", True, "bytes/s",
        "IP bytes CE-marked at the port in the interval, per second",
    ),
    "flow_rate": (
        ("time", "flow"), "rx", True, "bytes/s",
        "goodput: payload bytes delivered to the receiving application, per second",
    ),
    "cwnd": (
        ("time", "flow"), "cwnd", False, "bytes",
        "sender congestion window, sampled (NaN before the flow starts, 0 until connected)",
    ),
    "rtt": (
        ("time", "flow"), "rtt", False, "s",
        "latest completed RTT probe: new data sent -> first ACK/SACK covering it",
    ),
    "alpha": (
        ("time", "flow"), "alpha", False, "1",
        "DCTCP congestion estimate alpha, latest update",
    ),
}  # fmt: skip


def _to_dataset(cfg: Ns3Config, a: dict[str, np.ndarray], wall_time_s: float) -> xr.Dataset:
    dt = cfg.sample_interval_s
    ends = cfg.flow_endpoints()
    data_vars: dict[str, Any] = {}
    for name, (dims, key, cumulative, units, desc) in _VARIABLES.items():
        if name == "alpha" and cfg.cc != "dctcp":
            continue
        values = _rate(a[key], dt) if cumulative else a[key]
        data_vars[name] = (dims, values.astype(np.float64), {"units": units, "long_name": desc})
    coords = {
        "time": (
            "time",
            a["time"],
            {"units": "s", "long_name": "sample instant; rates average over the preceding step"},
        ),
        "link": (
            "link",
            np.array([str(x) for x in a["link_names"]], dtype=object),
            {"units": "1", "long_name": "egress port 'from->to'"},
        ),
        "flow": ("flow", np.arange(cfg.flows), {"units": "1", "long_name": "flow index"}),
        "src": (
            "flow",
            np.array([s for s, _ in ends], dtype=object),
            {"units": "1", "long_name": "sending host"},
        ),
        "dst": (
            "flow",
            np.array([d for _, d in ends], dtype=object),
            {"units": "1", "long_name": "receiving host"},
        ),
    }
    attrs = {
        "engine": ENGINE,
        "config": cfg.to_json(),
        "wall_time_s": float(wall_time_s),
        "sim_wall_time_s": float(a["sim_wall_time_s"]),
        "base_rtt_s": cfg.base_rtt_s,
        "mss_bytes": cfg.mss_bytes,
        "sample_interval_s": dt,
        "tcp": TCP_TYPES[cfg.cc] + (" (ECN)" if cfg.cc == "dctcp" else " (no ECN)"),
        "aqm": str(a["aqm_desc"]),
    }
    if cfg.bottleneck_link is not None:  # netCDF attributes cannot be None
        attrs["bottleneck_link"] = cfg.bottleneck_link
    if cfg.network is not None:
        attrs["routing"] = cfg.network.routing
        attrs["unrouted_packets"] = int(a.get("unrouted", 0))
    if cfg.pcap_path is not None:
        attrs["pcap"] = str(cfg.pcap_path)
    return xr.Dataset(data_vars=data_vars, coords=coords, attrs=attrs)


# --------------------------------------------------------------------------------------
# Child process: everything below runs only inside the ns-3 subprocess.
# --------------------------------------------------------------------------------------

_CPP_SOURCE = r"""
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace pathflow_ns3
{
using namespace ns3;

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const uint32_t kPppHeaderBytes = 2;

// TcpSocketBase keeps its TcpSocketState and congestion-control object protected and
// exposes no getters; a pointer-to-member formed through a derived class reads them
// without a per-ACK trace callback.
struct TcbPeek : public TcpSocketBase
{
    static Ptr<TcpSocketState> Tcb(const TcpSocketBase* s) { return s->*(&TcbPeek::m_tcb); }
    static Ptr<TcpCongestionOps> Cc(const TcpSocketBase* s)
    {
        return s->*(&TcbPeek::m_congestionControl);
    }
    static uint32_t& DupAcks(TcpSocketBase* s) { return s->*(&TcbPeek::m_dupAckCount); }
};

struct Params
{
    std::string aqm;
    std::string cc;
    int flows = 1;
    double durationS = 1.0;
    double thresholdPackets = 20;
    double redMin = 5;
    double redMax = 15;
    double redPmax = 0.1;
    double redWeight = 0.002;
    int packetBytes = 1500;
    std::vector<double> startTimes;
    double sampleIntervalS = 1e-3;
    int seed = 1;
    double dctcpG = 1.0 / 16;
    int delAckCount = 2;
    int initialCwnd = 10;
    double minRtoS = 0.2;
    double sockBufBytes = 4e6;
    int hostQueuePackets = 100000;
    bool ackFirst = false; // host NICs send pure ACKs ahead of data (networks)
    std::string pcapFile; // empty: no capture
    std::string pcapLink; // port name ("s0->r0") whose device is captured
    // The graph, flattened: nodes in creation order, cables (a, b, rates and buffers per
    // direction, one delay), flows (node indices), paths (flow, weight, nodes[start..end)).
    std::vector<std::string> nodeNames;
    std::vector<int> nodeIsSwitch;
    std::vector<int> cableA, cableB, cableBufAB, cableBufBA;
    std::vector<double> cableRateAB, cableRateBA, cableDelay;
    std::vector<int> flowSrc, flowDst;
    std::string routing; // "global" | "paths" | "random_ecmp"
    std::vector<int> pathFlow, pathStart, pathEnd, pathNodes;
    std::vector<double> pathWeight;
};

struct Port
{
    Ptr<PointToPointNetDevice> dev;
    Ptr<QueueDisc> qd;
    uint64_t txBytes = 0;
    uint64_t markedBytes = 0;
    uint32_t lastMarked32 = 0; // QueueDisc::Stats::nTotalMarkedBytes is 32 bit; unwrap it
};

struct Flow
{
    Ptr<BulkSendApplication> app;
    Ptr<PacketSink> sink;
    Ptr<TcpSocketBase> sock;
    bool probing = false;
    bool anySent = false;
    SequenceNumber32 probeBegin{0};
    SequenceNumber32 probeEnd{0};
    SequenceNumber32 highSent{0};
    Time probeStart;
    double lastRtt = kNaN;
    double alpha = kNaN;
};

void
OnPhyTxEnd(Port* port, Ptr<const Packet> p)
{
    port->txBytes += p->GetSize() - kPppHeaderBytes;
}

void
OnTcpTx(Flow* f, Ptr<const Packet> p, const TcpHeader& h, Ptr<const TcpSocketBase>)
{
    uint32_t len = p->GetSize();
    if (len == 0)
    {
        return;
    }
    SequenceNumber32 begin = h.GetSequenceNumber();
    SequenceNumber32 end = begin + static_cast<int32_t>(len);
    if (f->anySent && end <= f->highSent)
    {
        // Karn: a retransmission of the probe segment makes its sample ambiguous.
        if (f->probing && begin < f->probeEnd && end > f->probeBegin)
        {
            f->probing = false;
        }
        return;
    }
    if (!f->probing)
    {
        f->probing = true;
        f->probeBegin = begin;
        f->probeEnd = end;
        f->probeStart = Simulator::Now();
    }
    f->highSent = end;
    f->anySent = true;
}

void
OnTcpRx(Flow* f, Ptr<const Packet>, const TcpHeader& h, Ptr<const TcpSocketBase>)
{
    if (!f->probing || !(h.GetFlags() & TcpHeader::ACK))
    {
        return;
    }
    bool covered = h.GetAckNumber() >= f->probeEnd;
    if (!covered && h.HasOption(TcpOption::SACK))
    {
        // Like Linux, take the sample from a SACK too: otherwise a hole below the probe
        // inflates it by the whole loss-recovery time.
        auto sack = DynamicCast<const TcpOptionSack>(h.GetOption(TcpOption::SACK));
        for (const auto& block : sack->GetSackList())
        {
            covered = covered || (block.first <= f->probeBegin && block.second >= f->probeEnd);
        }
    }
    if (covered)
    {
        f->lastRtt = (Simulator::Now() - f->probeStart).GetSeconds();
        f->probing = false;
    }
}

void
OnAlpha(Flow* f, uint32_t, uint32_t, double alpha)
{
    f->alpha = alpha;
}

// ns-3 3.44 counts duplicate ACKs (SACK-bearing ACKs) in CA_CWR without acting on them and
// keeps the count when CWR ends; the next one in CA_OPEN then fails NS_ASSERT "From
// OPEN->DISORDER but with N dup ACKs" and kills the run. ECN reductions (CWR) overlapping
// reordering (spraying) or loss reach it. Restart the count when CWR ends: a run that never
// hits the assert is unchanged (in CA_OPEN the count is only read by that assert, and the
// next cumulative ACK resets it anyway); the others go on as from a fresh CA_OPEN.
void
OnCongState(Flow* f, TcpSocketState::TcpCongState_t from, TcpSocketState::TcpCongState_t to)
{
    if (from == TcpSocketState::CA_CWR && to == TcpSocketState::CA_OPEN)
    {
        TcbPeek::DupAcks(PeekPointer(f->sock)) = 0;
    }
}

// Per-flow forwarding: a table per node, keyed by the flow's TCP port (10000 + i) and the
// direction (data: the destination port; ACKs: the source port; ephemeral ports are >= 49152,
// so the two never mix). An entry with several next hops picks one per packet, with
// probability proportional to its weight. Installed ahead of global routing in each node's
// Ipv4ListRouting, which delivers local packets before asking any protocol; a packet this
// table does not know (a route lookup without a packet, when a socket picks its source
// address) falls through to global routing.
class FlowRouting : public Ipv4RoutingProtocol
{
  public:
    static TypeId GetTypeId()
    {
        static TypeId tid = TypeId("pathflow_ns3::FlowRouting")
                                .SetParent<Ipv4RoutingProtocol>()
                                .SetGroupName("Internet");
        return tid;
    }

    struct Hop
    {
        Ptr<Ipv4Route> route; // prebuilt: the destination of a key never changes
        double weight = 0;
        double cumWeight = 0;
    };

    static uint32_t Key(uint16_t port, bool ack) { return 2u * port + (ack ? 1u : 0u); }

    // Adds `weight` to the next hop through `dev` (towards `gateway`) for key.
    void AddHop(uint32_t key, Ptr<NetDevice> dev, Ipv4Address source, Ipv4Address gateway,
                Ipv4Address destination, double weight)
    {
        auto& hops = m_table[key];
        for (auto& h : hops)
        {
            if (h.route->GetOutputDevice() == dev)
            {
                h.weight += weight;
                return;
            }
        }
        Ptr<Ipv4Route> r = Create<Ipv4Route>();
        r->SetDestination(destination);
        r->SetSource(source);
        r->SetGateway(gateway);
        r->SetOutputDevice(dev);
        hops.push_back(Hop{r, weight, 0});
    }

    // Call once after the last AddHop.
    void Finalize()
    {
        for (auto& entry : m_table)
        {
            double sum = 0;
            for (auto& h : entry.second)
            {
                sum += h.weight;
                h.cumWeight = sum;
            }
        }
    }

    void SetRandom(Ptr<UniformRandomVariable> rng) { m_rng = rng; }
    void SetUnrouted(uint64_t* counter) { m_unrouted = counter; }

    Ptr<Ipv4Route> RouteOutput(Ptr<Packet> p, const Ipv4Header& header, Ptr<NetDevice>,
                               Socket::SocketErrno& sockerr) override
    {
        if (!p)
        {
            return nullptr; // source-address lookup at connect: global routing answers
        }
        Ptr<Ipv4Route> r = Lookup(p, header);
        if (r)
        {
            sockerr = Socket::ERROR_NOTERROR;
        }
        return r;
    }

    bool RouteInput(Ptr<const Packet> p, const Ipv4Header& header, Ptr<const NetDevice>,
                    const UnicastForwardCallback& ucb, const MulticastForwardCallback&,
                    const LocalDeliverCallback&, const ErrorCallback&) override
    {
        Ptr<Ipv4Route> r = Lookup(p, header);
        if (!r)
        {
            return false;
        }
        ucb(r, p, header);
        return true;
    }

    void NotifyInterfaceUp(uint32_t) override {}
    void NotifyInterfaceDown(uint32_t) override {}
    void NotifyAddAddress(uint32_t, Ipv4InterfaceAddress) override {}
    void NotifyRemoveAddress(uint32_t, Ipv4InterfaceAddress) override {}
    void SetIpv4(Ptr<Ipv4> ipv4) override { m_ipv4 = ipv4; }
    void PrintRoutingTable(Ptr<OutputStreamWrapper> stream, Time::Unit) const override
    {
        *stream->GetStream() << "pathflow FlowRouting: " << m_table.size() << " keys\n";
    }

  protected:
    void DoDispose() override
    {
        m_table.clear();
        m_rng = nullptr;
        m_ipv4 = nullptr;
        Ipv4RoutingProtocol::DoDispose();
    }

  private:
    std::unordered_map<uint32_t, std::vector<Hop>> m_table;
    Ptr<UniformRandomVariable> m_rng;
    Ptr<Ipv4> m_ipv4;
    uint64_t* m_unrouted = nullptr;

    Ptr<Ipv4Route> Lookup(Ptr<const Packet> p, const Ipv4Header& header)
    {
        // At routing time the IP header has been removed (RouteInput) or not yet added
        // (RouteOutput): the packet starts with the TCP header, ports first.
        uint8_t b[4];
        if (header.GetProtocol() != 6 /* TCP */ || p->CopyData(b, 4) < 4)
        {
            Miss();
            return nullptr;
        }
        uint16_t srcPort = static_cast<uint16_t>((b[0] << 8) | b[1]);
        uint16_t dstPort = static_cast<uint16_t>((b[2] << 8) | b[3]);
        auto it = m_table.find(Key(dstPort, false));
        if (it == m_table.end())
        {
            it = m_table.find(Key(srcPort, true));
        }
        if (it == m_table.end())
        {
            Miss();
            return nullptr;
        }
        const auto& hops = it->second;
        if (hops.size() == 1)
        {
            return hops[0].route;
        }
        double u = m_rng->GetValue(0.0, hops.back().cumWeight);
        for (const auto& h : hops)
        {
            if (u < h.cumWeight)
            {
                return h.route;
            }
        }
        return hops.back().route;
    }

    void Miss()
    {
        if (m_unrouted)
        {
            ++*m_unrouted;
        }
    }
};

// Host NICs: a pure ACK (no TCP payload) goes ahead of queued data. Linux keeps a host's
// qdisc nearly empty (TCP small queues) and fq gives each flow its own queue, so an ACK
// never waits behind a bulk sender's backlog. ns-3 has neither, and its cwnd keeps growing
// while the NIC is the bottleneck, so without this a host that sends a flow and also
// acknowledges another (every host of a permutation) holds those ACKs behind thousands of
// its own data packets (tens of ms at 1 Gb/s), which throttles the other flow.
class AckFirstFilter : public PacketFilter
{
  public:
    static TypeId GetTypeId()
    {
        static TypeId tid = TypeId("pathflow_ns3::AckFirstFilter")
                                .SetParent<PacketFilter>()
                                .SetGroupName("TrafficControl");
        return tid;
    }

  private:
    bool CheckProtocol(Ptr<QueueDiscItem> item) const override
    {
        return DynamicCast<Ipv4QueueDiscItem>(item) != nullptr;
    }

    int32_t DoClassify(Ptr<QueueDiscItem> item) const override
    {
        // The item holds the IP header apart until dequeue: the packet starts with TCP.
        if (DynamicCast<Ipv4QueueDiscItem>(item)->GetHeader().GetProtocol() != 6 /* TCP */)
        {
            return 1;
        }
        Ptr<const Packet> p = item->GetPacket();
        uint8_t b[13];
        if (p->CopyData(b, 13) < 13)
        {
            return 1;
        }
        const uint32_t headerBytes = 4u * (b[12] >> 4); // data offset, options included
        return p->GetSize() <= headerBytes ? 0 : 1;
    }
};

class Runner
{
  public:
    explicit Runner(const Params& p)
        : m_p(p)
    {
    }

    std::vector<std::string> linkNames;
    std::string aqmDesc;
    int nSamples = 0;
    double simWallS = 0;
    std::vector<double> time, queueBytes, txBytes, dropBytes, markBytes;
    std::vector<double> rxBytes, cwnd, rtt, alpha;
    double unroutedPackets = 0; // see FlowRouting

    void Build()
    {
        const bool dctcp = m_p.cc == "dctcp";
        RngSeedManager::SetSeed(m_p.seed);
        RngSeedManager::SetRun(1);

        Config::SetDefault("ns3::TcpL4Protocol::SocketType",
                           TypeIdValue(TypeId::LookupByName(dctcp ? "ns3::TcpDctcp"
                                                                  : "ns3::TcpNewReno")));
        Config::SetDefault("ns3::TcpSocket::SegmentSize",
                           UintegerValue(m_p.packetBytes - 52));
        Config::SetDefault("ns3::TcpSocket::InitialCwnd", UintegerValue(m_p.initialCwnd));
        Config::SetDefault("ns3::TcpSocket::DelAckCount", UintegerValue(m_p.delAckCount));
        Config::SetDefault("ns3::TcpSocket::SndBufSize",
                           UintegerValue(static_cast<uint32_t>(m_p.sockBufBytes)));
        Config::SetDefault("ns3::TcpSocket::RcvBufSize",
                           UintegerValue(static_cast<uint32_t>(m_p.sockBufBytes)));
        Config::SetDefault("ns3::TcpSocketBase::MinRto", TimeValue(Seconds(m_p.minRtoS)));
        // ns-3's default delayed-ACK timeout (200 ms) equals a 200 ms MinRto: a lone segment
        // sent with cwnd = 1 MSS after an RTO then always times out before its delayed ACK
        // arrives, and since ns-3 credits no cwnd growth for the ACK that ends CA_LOSS the
        // flow livelocks at one segment per RTO. Linux's minimum delayed-ACK timer is 40 ms.
        Config::SetDefault("ns3::TcpSocket::DelAckTimeout",
                           TimeValue(Seconds(std::min(0.04, m_p.minRtoS / 5))));
        Config::SetDefault("ns3::TcpSocketBase::UseEcn", StringValue(dctcp ? "On" : "Off"));
        Config::SetDefault("ns3::TcpDctcp::DctcpShiftG", DoubleValue(m_p.dctcpG));
        if (m_p.routing == "random_ecmp")
        {
            // Every packet picks uniformly among its node's equal-cost next hops.
            Config::SetDefault("ns3::Ipv4GlobalRouting::RandomEcmpRouting", BooleanValue(true));
        }

        // One container, nodes created in the given order: star and dumbbell list theirs as
        // the runner always created them (senders, switches, receivers), so node ids, object
        // creation and random streams, hence results, stay what they were.
        NodeContainer nodes;
        nodes.Create(static_cast<uint32_t>(m_p.nodeNames.size()));
        InternetStackHelper stack;
        stack.InstallAll();

        m_p2p.SetDeviceAttribute("Mtu", UintegerValue(std::max(1500, m_p.packetBytes)));
        // A one-packet device queue keeps the backlog (and the AQM decision) in the queue
        // disc; the traffic-control layer stops the disc while the device queue is full.
        m_p2p.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize", QueueSizeValue(QueueSize("1p")));
        m_addr.SetBase("10.1.0.0", "255.255.255.0");
        m_nodeAddr.assign(nodes.GetN(), Ipv4Address());
        m_hasAddr.assign(nodes.GetN(), false);
        for (size_t c = 0; c < m_p.cableA.size(); ++c)
        {
            Link(nodes, c);
        }
        aqmDesc = m_aqmPrefix + " MaxSize=" +
                  (m_switchBuffers.size() == 1 ? std::to_string(*m_switchBuffers.begin()) + "p"
                                               : std::string("per port"));
        Ipv4GlobalRoutingHelper::PopulateRoutingTables();
        if (m_p.routing == "paths")
        {
            InstallFlowRouting(nodes);
        }
        if (!m_p.pcapFile.empty())
        {
            EnableBottleneckPcap();
        }

        for (int i = 0; i < m_p.flows; ++i)
        {
            auto f = std::make_unique<Flow>();
            uint16_t port = static_cast<uint16_t>(10000 + i);
            PacketSinkHelper sinkHelper("ns3::TcpSocketFactory",
                                        InetSocketAddress(Ipv4Address::GetAny(), port));
            ApplicationContainer sinkApp = sinkHelper.Install(nodes.Get(m_p.flowDst[i]));
            sinkApp.Start(Seconds(0));
            BulkSendHelper bulk("ns3::TcpSocketFactory",
                                InetSocketAddress(m_nodeAddr[m_p.flowDst[i]], port));
            bulk.SetAttribute("MaxBytes", UintegerValue(0));
            // Big writes only reduce application callbacks; TCP still sends MSS segments.
            bulk.SetAttribute("SendSize", UintegerValue(64 * 1024));
            ApplicationContainer bulkApp = bulk.Install(nodes.Get(m_p.flowSrc[i]));
            double start = m_p.startTimes.empty() ? 0.0 : m_p.startTimes[i];
            bulkApp.Start(Seconds(start));
            f->app = DynamicCast<BulkSendApplication>(bulkApp.Get(0));
            f->sink = DynamicCast<PacketSink>(sinkApp.Get(0));
            // The sender socket only exists once the application has started.
            Simulator::Schedule(Seconds(start) + NanoSeconds(1), &Runner::Hook, this, f.get());
            m_flows.push_back(std::move(f));
        }
    }

    void Run()
    {
        m_step = NanoSeconds(static_cast<int64_t>(std::llround(m_p.sampleIntervalS * 1e9)));
        nSamples = static_cast<int>(std::floor(m_p.durationS / m_p.sampleIntervalS + 1e-9));
        Simulator::Schedule(m_step, &Runner::Sample, this);
        // Half a step past the end so that the last sample is not pre-empted by Stop.
        Simulator::Stop(Seconds(m_p.durationS) + NanoSeconds(m_step.GetNanoSeconds() / 2));
        auto t0 = std::chrono::steady_clock::now();
        Simulator::Run();
        simWallS = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        unroutedPackets = static_cast<double>(m_unrouted);
        Simulator::Destroy();
    }

  private:
    struct PortInfo
    {
        Ptr<NetDevice> dev;
        Ipv4Address local, remote; // this end's and the far end's interface addresses
    };

    Params m_p;
    PointToPointHelper m_p2p;
    Ipv4AddressHelper m_addr;
    std::vector<std::unique_ptr<Port>> m_ports;
    std::vector<std::unique_ptr<Flow>> m_flows;
    std::map<std::pair<int, int>, PortInfo> m_portInfo; // (from node, to node)
    std::vector<Ipv4Address> m_nodeAddr; // a node's address on its first cable: flows use it
    std::vector<bool> m_hasAddr;
    std::set<int> m_switchBuffers;
    std::string m_aqmPrefix;
    uint64_t m_unrouted = 0;
    Time m_step;
    int m_k = 0;

    TrafficControlHelper SwitchQueueDisc(int bufferPackets, double rateBps, double delayS)
    {
        TrafficControlHelper tch;
        QueueSizeValue maxSize(QueueSize(std::to_string(bufferPackets) + "p"));
        const bool dctcp = m_p.cc == "dctcp";
        m_switchBuffers.insert(bufferPackets);
        if (m_p.aqm == "droptail")
        {
            tch.SetRootQueueDisc("ns3::FifoQueueDisc", "MaxSize", maxSize);
            m_aqmPrefix = "FifoQueueDisc";
        }
        else if (m_p.aqm == "ecn_step")
        {
            // QW=1 makes the "average" the instantaneous queue; MinTh=MaxTh with Gentle off
            // sends every arrival that finds >= K packets into the forced branch, which marks
            // (UseHardDrop=false) or drops if the packet is not ECN-capable.
            tch.SetRootQueueDisc("ns3::RedQueueDisc", "MaxSize", maxSize,
                                 "MinTh", DoubleValue(m_p.thresholdPackets),
                                 "MaxTh", DoubleValue(m_p.thresholdPackets),
                                 "QW", DoubleValue(1.0),
                                 "Gentle", BooleanValue(false),
                                 "UseEcn", BooleanValue(true),
                                 "UseHardDrop", BooleanValue(false),
                                 "MeanPktSize", UintegerValue(m_p.packetBytes),
                                 "LinkBandwidth",
                                 DataRateValue(DataRate(static_cast<uint64_t>(rateBps))),
                                 "LinkDelay", TimeValue(Seconds(delayS)));
            m_aqmPrefix = "RedQueueDisc step: MinTh=MaxTh=" +
                          std::to_string(m_p.thresholdPackets) +
                          " QW=1 Gentle=false UseEcn=true UseHardDrop=false";
        }
        else
        {
            tch.SetRootQueueDisc("ns3::RedQueueDisc", "MaxSize", maxSize,
                                 "MinTh", DoubleValue(m_p.redMin),
                                 "MaxTh", DoubleValue(m_p.redMax),
                                 "LInterm", DoubleValue(1.0 / m_p.redPmax),
                                 "QW", DoubleValue(m_p.redWeight),
                                 "Gentle", BooleanValue(false),
                                 "UseEcn", BooleanValue(dctcp),
                                 "UseHardDrop", BooleanValue(false),
                                 "MeanPktSize", UintegerValue(m_p.packetBytes),
                                 "LinkBandwidth",
                                 DataRateValue(DataRate(static_cast<uint64_t>(rateBps))),
                                 "LinkDelay", TimeValue(Seconds(delayS)));
            m_aqmPrefix = "RedQueueDisc MinTh=" + std::to_string(m_p.redMin) +
                          " MaxTh=" + std::to_string(m_p.redMax) +
                          " LInterm=" + std::to_string(1.0 / m_p.redPmax) +
                          " QW=" + std::to_string(m_p.redWeight) +
                          " Gentle=false Wait=true UseHardDrop=false UseEcn=" +
                          (dctcp ? "true" : "false");
        }
        return tch;
    }

    TrafficControlHelper HostQueueDisc()
    {
        // Hosts should never drop: a real sender is throttled by TSQ long before its qdisc
        // overflows, which ns-3 does not model.
        TrafficControlHelper tch;
        QueueSizeValue limit(QueueSize(std::to_string(m_p.hostQueuePackets) + "p"));
        if (!m_p.ackFirst)
        {
            tch.SetRootQueueDisc("ns3::FifoQueueDisc", "MaxSize", limit);
            return tch;
        }
        // Strict priority: band 0 for pure ACKs (AckFirstFilter, added once installed),
        // band 1 for data (band 2, PrioQueueDisc's minimum, stays empty); each a FIFO.
        uint16_t root = tch.SetRootQueueDisc("ns3::PrioQueueDisc");
        TrafficControlHelper::ClassIdList bands =
            tch.AddQueueDiscClasses(root, 3, "ns3::QueueDiscClass");
        for (uint16_t band : bands)
        {
            tch.AddChildQueueDisc(root, band, "ns3::FifoQueueDisc", "MaxSize", limit);
        }
        return tch;
    }

    // Builds cable c. Queue discs must be installed before address assignment, otherwise
    // Ipv4AddressHelper::Assign installs its default FqCoDel.
    void Link(NodeContainer& nodes, size_t c)
    {
        const int a = m_p.cableA[c], b = m_p.cableB[c];
        const std::string& an = m_p.nodeNames[a];
        const std::string& bn = m_p.nodeNames[b];
        m_p2p.SetDeviceAttribute("DataRate",
                                 DataRateValue(DataRate(static_cast<uint64_t>(m_p.cableRateAB[c]))));
        m_p2p.SetChannelAttribute("Delay", TimeValue(Seconds(m_p.cableDelay[c])));
        NetDeviceContainer d = m_p2p.Install(nodes.Get(a), nodes.Get(b));
        if (m_p.cableRateBA[c] != m_p.cableRateAB[c])
        {
            DynamicCast<PointToPointNetDevice>(d.Get(1))->SetDataRate(
                DataRate(static_cast<uint64_t>(m_p.cableRateBA[c])));
        }
        TrafficControlHelper ta =
            m_p.nodeIsSwitch[a]
                ? SwitchQueueDisc(m_p.cableBufAB[c], m_p.cableRateAB[c], m_p.cableDelay[c])
                : HostQueueDisc();
        TrafficControlHelper tb =
            m_p.nodeIsSwitch[b]
                ? SwitchQueueDisc(m_p.cableBufBA[c], m_p.cableRateBA[c], m_p.cableDelay[c])
                : HostQueueDisc();
        QueueDiscContainer qa = ta.Install(d.Get(0));
        QueueDiscContainer qb = tb.Install(d.Get(1));
        if (m_p.ackFirst && !m_p.nodeIsSwitch[a])
        {
            qa.Get(0)->AddPacketFilter(CreateObject<AckFirstFilter>());
        }
        if (m_p.ackFirst && !m_p.nodeIsSwitch[b])
        {
            qb.Get(0)->AddPacketFilter(CreateObject<AckFirstFilter>());
        }
        AddPort(an + "->" + bn, d.Get(0), qa.Get(0));
        AddPort(bn + "->" + an, d.Get(1), qb.Get(0));
        Ipv4InterfaceContainer ifc = m_addr.Assign(d);
        m_addr.NewNetwork();
        m_portInfo[{a, b}] = PortInfo{d.Get(0), ifc.GetAddress(0), ifc.GetAddress(1)};
        m_portInfo[{b, a}] = PortInfo{d.Get(1), ifc.GetAddress(1), ifc.GetAddress(0)};
        for (int end = 0; end < 2; ++end)
        {
            const int node = end == 0 ? a : b;
            if (!m_hasAddr[node])
            {
                m_nodeAddr[node] = ifc.GetAddress(end);
                m_hasAddr[node] = true;
            }
        }
    }

    // Per-flow tables at every node (FlowRouting): each hop u -> v of a path of flow f
    // forwards f's data at u towards v, and f's ACKs at v back towards u, with the path's
    // weight.
    void InstallFlowRouting(NodeContainer& nodes)
    {
        std::vector<Ptr<FlowRouting>> tables(nodes.GetN());
        for (uint32_t i = 0; i < nodes.GetN(); ++i)
        {
            Ptr<Ipv4ListRouting> list =
                DynamicCast<Ipv4ListRouting>(nodes.Get(i)->GetObject<Ipv4>()->GetRoutingProtocol());
            NS_ABORT_MSG_UNLESS(list, "FlowRouting needs InternetStackHelper's Ipv4ListRouting");
            tables[i] = CreateObject<FlowRouting>();
            tables[i]->SetUnrouted(&m_unrouted);
            // Priority 10: ahead of static (0) and global (-10) routing.
            list->AddRoutingProtocol(tables[i], 10);
        }
        for (size_t p = 0; p < m_p.pathFlow.size(); ++p)
        {
            const int f = m_p.pathFlow[p];
            const uint16_t port = static_cast<uint16_t>(10000 + f);
            const Ipv4Address dst = m_nodeAddr[m_p.flowDst[f]];
            const Ipv4Address src = m_nodeAddr[m_p.flowSrc[f]];
            for (int j = m_p.pathStart[p]; j + 1 < m_p.pathEnd[p]; ++j)
            {
                const int u = m_p.pathNodes[j], v = m_p.pathNodes[j + 1];
                const PortInfo& fwd = m_portInfo.at({u, v});
                tables[u]->AddHop(FlowRouting::Key(port, false), fwd.dev, fwd.local, fwd.remote,
                                  dst, m_p.pathWeight[p]);
                const PortInfo& back = m_portInfo.at({v, u});
                tables[v]->AddHop(FlowRouting::Key(port, true), back.dev, back.local,
                                  back.remote, src, m_p.pathWeight[p]);
            }
        }
        Ptr<UniformRandomVariable> rng = CreateObject<UniformRandomVariable>();
        for (auto& t : tables)
        {
            t->Finalize();
            t->SetRandom(rng);
        }
    }

    void EnableBottleneckPcap()
    {
        // Nanosecond timestamps: at 100 Gb/s a 1500 B frame lasts 120 ns.
        Config::SetDefault("ns3::PcapFileWrapper::NanosecMode", BooleanValue(true));
        for (size_t i = 0; i < m_ports.size(); ++i)
        {
            if (linkNames[i] == m_p.pcapLink)
            {
                // explicitFilename = true: pcapFile is the whole path, not a prefix.
                m_p2p.EnablePcap(m_p.pcapFile, m_ports[i]->dev, false, true);
                return;
            }
        }
        NS_FATAL_ERROR("pcap: no port named " << m_p.pcapLink);
    }

    void AddPort(const std::string& name, Ptr<NetDevice> dev, Ptr<QueueDisc> qd)
    {
        auto port = std::make_unique<Port>();
        port->dev = DynamicCast<PointToPointNetDevice>(dev);
        port->qd = qd;
        port->dev->TraceConnectWithoutContext("PhyTxEnd",
                                              MakeBoundCallback(&OnPhyTxEnd, port.get()));
        linkNames.push_back(name);
        m_ports.push_back(std::move(port));
    }

    void Hook(Flow* f)
    {
        Ptr<Socket> s = f->app->GetSocket();
        if (!s)
        {
            Simulator::Schedule(MicroSeconds(1), &Runner::Hook, this, f);
            return;
        }
        f->sock = DynamicCast<TcpSocketBase>(s);
        f->sock->TraceConnectWithoutContext("Tx", MakeBoundCallback(&OnTcpTx, f));
        f->sock->TraceConnectWithoutContext("Rx", MakeBoundCallback(&OnTcpRx, f));
        f->sock->TraceConnectWithoutContext("CongState", MakeBoundCallback(&OnCongState, f));
        if (m_p.cc == "dctcp")
        {
            Ptr<TcpCongestionOps> cc = TcbPeek::Cc(PeekPointer(f->sock));
            cc->TraceConnectWithoutContext("CongestionEstimate", MakeBoundCallback(&OnAlpha, f));
            f->alpha = 1.0; // DctcpAlphaOnInit default (write-only attribute, not readable)
        }
    }

    void Sample()
    {
        ++m_k;
        time.push_back(static_cast<double>(m_k) * m_step.GetSeconds());
        for (auto& p : m_ports)
        {
            Ptr<Queue<Packet>> dq = p->dev->GetQueue();
            double devBytes = static_cast<double>(dq->GetNBytes()) -
                              static_cast<double>(kPppHeaderBytes) * dq->GetNPackets();
            queueBytes.push_back(static_cast<double>(p->qd->GetNBytes()) + devBytes);
            const QueueDisc::Stats& st = p->qd->GetStats();
            uint32_t m32 = st.nTotalMarkedBytes;
            p->markedBytes += static_cast<uint32_t>(m32 - p->lastMarked32);
            p->lastMarked32 = m32;
            txBytes.push_back(static_cast<double>(p->txBytes));
            dropBytes.push_back(static_cast<double>(st.nTotalDroppedBytes) +
                                static_cast<double>(dq->GetTotalDroppedBytes()));
            markBytes.push_back(static_cast<double>(p->markedBytes));
        }
        for (auto& f : m_flows)
        {
            rxBytes.push_back(static_cast<double>(f->sink->GetTotalRx()));
            cwnd.push_back(f->sock ? static_cast<double>(
                                         TcbPeek::Tcb(PeekPointer(f->sock))->m_cWnd.Get())
                                   : kNaN);
            rtt.push_back(f->lastRtt);
            alpha.push_back(f->alpha);
        }
        if (m_k < nSamples)
        {
            Simulator::Schedule(m_step, &Runner::Sample, this);
        }
    }
};

} // namespace pathflow_ns3
"""


def _child_main(argv: list[str]) -> int:
    cfg_path, out_path = Path(argv[0]), Path(argv[1])
    cfg = Ns3Config.from_json(cfg_path.read_text())
    try:
        from ns import ns  # noqa: F401  (loads the ns-3 libraries and headers into cppyy)
    except (ImportError, SystemExit) as exc:  # the `ns` stub calls exit() if ns3 is broken
        print(f"cannot import ns-3 bindings: {exc!r}", file=sys.stderr)
        return _EXIT_NO_NS3
    import cppyy

    cppyy.cppdef(_CPP_SOURCE)
    gbl = cppyy.gbl.pathflow_ns3
    std = cppyy.gbl.std
    p = gbl.Params()
    p.aqm = cfg.aqm
    p.cc = cfg.cc
    p.flows = cfg.flows
    p.durationS = float(cfg.duration_s)
    p.thresholdPackets = float(cfg.threshold_packets)
    p.redMin = float(cfg.red_min_packets)
    p.redMax = float(cfg.red_max_packets)
    p.redPmax = float(cfg.red_pmax)
    p.redWeight = float(cfg.red_weight)
    p.packetBytes = cfg.packet_bytes
    if cfg.start_times_s is not None:
        p.startTimes = std.vector["double"](list(cfg.start_times_s))
    p.sampleIntervalS = float(cfg.sample_interval_s)
    p.seed = cfg.seed
    p.dctcpG = float(cfg.dctcp_g)
    p.delAckCount = cfg.delayed_ack_count
    p.initialCwnd = cfg.initial_cwnd_packets
    p.minRtoS = float(cfg.min_rto_s)
    p.sockBufBytes = _socket_buffer_bytes(cfg)
    if cfg.pcap_path is not None:
        p.pcapFile = str(cfg.pcap_path.resolve())
        p.pcapLink = cfg.bottleneck_link
    for name, values in _flat_layout(cfg).items():
        element = ("std::string" if name == "nodeNames"
                   else "double" if name in _DOUBLE_VECTORS else "int")
        setattr(p, name, std.vector[element](values))
    p.routing = cfg.layout().routing
    p.ackFirst = cfg.network is not None
    ports = cfg.ports()
    # Hosts never drop (see HostQueueDisc): far more room than any switch port.
    p.hostQueuePackets = max(100000, 10 * max(buffer for _, _, buffer in ports.values()))

    runner = gbl.Runner(p)
    runner.Build()
    runner.Run()

    n, n_links, n_flows = runner.nSamples, len(runner.linkNames), cfg.flows

    def arr(vec: Any, cols: int) -> np.ndarray:
        return _vector_to_numpy(vec).reshape(n, cols)

    np.savez(
        out_path,
        time=_vector_to_numpy(runner.time),
        link_names=np.array([str(s) for s in runner.linkNames]),
        queue=arr(runner.queueBytes, n_links),
        tx=arr(runner.txBytes, n_links),
        drop=arr(runner.dropBytes, n_links),
        mark=arr(runner.markBytes, n_links),
        rx=arr(runner.rxBytes, n_flows),
        cwnd=arr(runner.cwnd, n_flows),
        rtt=arr(runner.rtt, n_flows),
        alpha=arr(runner.alpha, n_flows),
        sim_wall_time_s=np.float64(runner.simWallS),
        unrouted=np.float64(runner.unroutedPackets),
        aqm_desc=np.array(str(runner.aqmDesc)),
    )
    return 0


def _socket_buffer_bytes(cfg: Ns3Config) -> float:
    """Socket buffers: 4x (path BDP + buffers the window may fill), at least 4 MiB and at
    most 1 GiB, so that neither buffer ever limits a flow."""
    if cfg.network is None:
        # Star and dumbbell: one shared bottleneck buffer (unchanged since the first runner).
        path_bytes = (cfg.link_rate_bps / 8 * cfg.base_rtt_s
                      + cfg.buffer_packets * cfg.packet_bytes)
    else:
        # A network's flow may queue at every switch port along its path.
        ports, hosts = cfg.ports(), set(cfg.network.hosts)
        path_bytes = 0.0
        for path in cfg.network.paths:
            hops = list(itertools.pairwise(path.nodes))
            rate = max(ports[hop][0] for hop in hops)
            queued = sum(ports[hop][2] for hop in hops if hop[0] not in hosts)
            path_bytes = max(path_bytes, rate / 8 * cfg.path_base_rtt_s(path.nodes)
                             + queued * cfg.packet_bytes)
    return float(min(max(4 * 2**20, 4 * path_bytes), 2**30))


_DOUBLE_VECTORS = frozenset({"cableRateAB", "cableRateBA", "cableDelay", "pathWeight"})


def _flat_layout(cfg: Ns3Config) -> dict[str, list[Any]]:
    """`cfg.layout()` as the flat vectors of the C++ `Params` (node indices, SI values)."""
    net = cfg.layout()
    index = {name: i for i, name in enumerate(net.nodes)}
    hosts = set(net.hosts)
    out: dict[str, list[Any]] = {
        "nodeNames": list(net.nodes),
        "nodeIsSwitch": [int(name not in hosts) for name in net.nodes],
        "flowSrc": [index[src] for src, _ in net.flows],
        "flowDst": [index[dst] for _, dst in net.flows],
    }
    ports = cfg.ports()
    cables: dict[str, list[Any]] = {key: [] for key in (
        "cableA", "cableB", "cableRateAB", "cableRateBA", "cableDelay", "cableBufAB",
        "cableBufBA")}
    for c in net.cables:
        rate_ab, delay, buffer_ab = ports[(c.a, c.b)]
        rate_ba, _, buffer_ba = ports[(c.b, c.a)]
        for key, value in (("cableA", index[c.a]), ("cableB", index[c.b]),
                           ("cableRateAB", float(rate_ab)), ("cableRateBA", float(rate_ba)),
                           ("cableDelay", float(delay)), ("cableBufAB", int(buffer_ab)),
                           ("cableBufBA", int(buffer_ba))):
            cables[key].append(value)
    out.update(cables)
    paths: dict[str, list[Any]] = {key: [] for key in (
        "pathFlow", "pathWeight", "pathStart", "pathEnd", "pathNodes")}
    for path in net.paths:
        paths["pathFlow"].append(path.flow)
        paths["pathWeight"].append(float(path.weight))
        paths["pathStart"].append(len(paths["pathNodes"]))
        paths["pathNodes"] += [index[name] for name in path.nodes]
        paths["pathEnd"].append(len(paths["pathNodes"]))
    out.update(paths)
    return out


def _vector_to_numpy(vec: Any) -> np.ndarray:
    size = int(vec.size())
    if size == 0:
        return np.zeros(0)
    # Zero-copy view of the std::vector buffer; iterating it from Python is ~100x slower.
    view = vec.data()
    view.reshape((size,))
    return np.frombuffer(view, dtype=np.float64, count=size).copy()


def _child_entrypoint() -> None:
    code = _child_main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: cppyy/ns-3 destructors at exit are slow and can crash.
    os._exit(code)


if __name__ == "__main__":
    _child_entrypoint()
