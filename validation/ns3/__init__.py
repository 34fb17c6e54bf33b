"""Packet-level ground truth from ns-3 (3.44) for stars, dumbbells and any pathflow network.

    >>> import pathflow
    >>> from pathflow.validation.ns3 import simulate_ns3
    >>> ds = simulate_ns3(pathflow.load_scenario("examples/dctcp_star.toml"))

Layout
------
* `config`: what a run simulates (`Ns3Config`; `Ns3Network`, `Ns3Cable`, `Ns3Path` for graphs).
* `scenario`: a pathflow `Scenario` -> `Ns3Config` (`ns3_config`), and its run (`simulate_ns3`).
* `run`: the parent side (`run_ns3`): starts the child process on a config and waits for it.
* `child`: the child process: imports ns-3, compiles `simulation.cc` with cppyy and runs it.
* `simulation.cc`: the ns-3 program (nodes, cables, queue discs, TCP flows, forwarding,
  sampling), shipped as package data.
* `dataset`: the child's samples -> Dataset.

What it models
--------------
* ``star``: senders ``h0..h{N-1}`` -> switch ``s0`` -> receiver ``r0``; bottleneck ``s0->r0``.
* ``dumbbell``: ``h0..h{N-1}`` -> ``s0`` -> ``s1`` -> ``r0..r{N-1}``; bottleneck ``s0->s1``.
  Star and dumbbell links all have the same rate and one-way delay.
* ``network``: any graph of named nodes joined by cables (`Ns3Network`; this is what
  `scenario` (`ns3_config`) makes of a pathflow fat-tree, leaf-spine or graph, with
  pathflow's node and link names), each cable with its own delay and, per direction, its own
  rate and buffer; flows between named hosts, each with the path(s) pathflow gave it.
* Every cable is a full-duplex point-to-point link: one delay, one rate per direction.
* Long-lived TCP flows (``BulkSendApplication`` -> ``PacketSink``), ``ns3::TcpNewReno``
  (no ECN) or ``ns3::TcpDctcp`` (ECN) with Linux's 2-segment floor on its ssthresh
  (``LinuxDctcp``), with SACK and timestamps (MSS = packet - 52 B), Linux's proportional rate
  reduction in CWR and in loss recovery (``LinuxPrr``, in place of ns-3's
  ``TcpPrrRecovery``: see Limits), delayed ACKs, and socket buffers large enough never to
  limit. Flow i listens on TCP port 10000 + i.
* Finite flows (``BlockSender``): a block of the scenario's segments per flow (its payload
  ``size`` x (packet - 52) / packet), on a connection that stays open. With rounds
  (barrier-synchronised reads), the first round's blocks are released once every connection
  is up (pathflow's engines have no handshake), each next round's when every flow's block
  of the round has reached its receiving application; no request is sent (as in pathflow's
  engines). ns-3 has no restart of an idle window (Linux's tcp_slow_start_after_idle, which
  the packet level models): a round starts with the window the last one left.
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
queue backlog per egress port, per-port departure / drop / mark rates, per-flow goodput, and per
sender (``subflow``, one per flow, as in every pathflow result) the congestion window, an RTT
estimate and, for DCTCP, alpha. All byte counts are IP bytes
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
  cost: ~13 s importing the cppyy bindings, ~3 s JIT-compiling `simulation.cc` and templates.
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
* Deviations from ns-3 defaults: a lost SYN is sent again after 1 s (Linux's initial RTO; ns-3's
  ConnTimeout is 3 s); the delayed-ACK timeout is min(40 ms, min_rto_s / 5) (Linux's
  minimum is 40 ms) unless ``[transport] delayed_ack_timeout`` sets it; MinRto and SACK (ns-3's
  default, on) follow ``[transport] rto_min`` and ``sack``. ns-3's 200 ms equals a 200 ms MinRto
  and livelocks a flow after an RTO (one segment per RTO, forever). And the duplicate-ACK count
  restarts when a DCTCP window reduction (CA_CWR) ends: ns-3 counts SACK-bearing ACKs during CWR
  without acting on them, and the stale count then fails an NS_ASSERT in CA_OPEN and aborts the
  run (reordering or loss during CWR reach it, e.g. spraying); runs that never reach it are
  unchanged.
* Two departures of ns-3 3.44's TCP from Linux are replaced by Linux's rules, since a large
  incast hinges on them. ns-3's DCTCP cuts ssthresh to (1 - alpha/2) cwnd with no floor
  (Linux's dctcp_ssthresh keeps 2 segments), so a flow marked again and again falls to one
  segment and then waits for the receiver's delayed-ACK timer every round trip. And entering
  CWR, ns-3's ``TcpPrrRecovery`` counts the entering ACK's bytes twice, adds a segment for a
  duplicate ACK (though none came), and takes as RecoverFS the flight after that ACK
  (Linux: prior_cwnd = cwnd), so with ssthresh at 2 it keeps 5 to 6 segments in flight every
  round trip. Measured on 64 flows at 1 Gb/s, K = 20 packets, 0.3 s: stock ns-3 holds a mean
  window of 1.58 segments, a 17-packet queue and 0.40 Gb/s of goodput; with ``LinuxDctcp``
  and ``LinuxPrr`` every window sits at 2 segments (Linux's behaviour under persistent
  marking: no growth in CWR, an echo on the ACK that ends CWR starts the next), the queue at
  122 packets (2 N segments less the BDP) and the link full, as in both pathflow engines
  (case ``incast_floor_ns3``). Elsewhere the change is small (``docs/validation.md``: the
  8:1 DCTCP incast and the stars within 0.1 packet, the k = 4 fat-tree's compared queue 22.9
  -> 23.7 packets); one Reno point moved more: the 48-server incast with RTOmin 200 us
  delivers 943 Mb/s, where ns-3's PRR gave 768. Not modelled: Linux withholds PRR's extra
  segment on an ACK that reports new losses (ns-3 3.44 has no RACK to tell them).
* ``cc="reno"`` with ``aqm="ecn_step"`` is a drop-tail queue of K packets; with two Reno
  flows it can lock one flow out completely (its retransmissions always find the queue full).
"""

from __future__ import annotations

from pathflow.validation.ns3.config import Ns3Cable, Ns3Config, Ns3Network, Ns3Path
from pathflow.validation.ns3.run import ns3_available, run_ns3
from pathflow.validation.ns3.scenario import ns3_config, simulate_ns3

# Not `child`: it runs as `python -m` in the subprocess, and importing it here first would
# make runpy warn that the module was already imported.
__all__ = [
    "Ns3Cable",
    "Ns3Config",
    "Ns3Network",
    "Ns3Path",
    "ns3_available",
    "ns3_config",
    "run_ns3",
    "simulate_ns3",
]
