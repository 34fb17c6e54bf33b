"""Packet-level reference simulator (numba): per-packet queues, TCP Reno, DCTCP, MPTCP senders.

    >>> import pathflow
    >>> from pathflow.validation.packet import simulate_packets
    >>> ds = simulate_packets(pathflow.load_scenario("examples/dctcp_star.toml"))

`simulate_packets(scenario)` reads the same scenario files as the fluid model, builds the network
and routes with pathflow's own `build_network` / `build_routes` (same links, flows, ECMP hash and
spraying split), simulates every packet, and returns a Dataset with the variables, dimensions and
units of fluid results (`pathflow.results`), so that `pathflow.metrics` compares them with one
function. It is rung 2 of the truth ladder (DESIGN section 7): the reference for protocols ns-3
lacks, itself cross-checked against ns-3 on Reno and DCTCP.

Model
-----
Network (`links`, `aqm`). Every directed link has an output queue at its transmitting end. An
arriving packet is admitted, ECN-marked or dropped at enqueue: drop-tail at the buffer limit;
ECN step, CE when the backlog exceeds K (`q > K`, the fluid model's rule; ns-3's "queue disc
holds >= K" is the same backlog); RED with an EWMA of the backlog per arrival and probability
pmax (avg - min)/(max - min), marking ECN-capable packets and dropping others. The backlog counts
bytes waiting, not the packet being serialised (ns-3's queue disc + device queue). A packet is
serialised at size / rate and arrives `delay` after its last bit left (store-and-forward).
With `[aqm] pfc`, each switch counts per ingress link the bytes waiting in its queues and, one
propagation delay after they pass Xoff, stops that link's transmitter from starting packets
until they fall below Xon (`models.pfc`; the `pause` variable).

Hosts. A host's own egress port (its NIC) never drops and never holds data: when free and empty
of ACKs it pulls the next packet from its senders, round-robin (the fluid model's backpressure;
Linux's TCP small queues). A sender therefore sends at most at line rate and its RTT samples
carry no self-inflicted queueing. Each pull waits a random gap, uniform in [0, 1 %) of the
packet's serialisation time (`host_jitter`), which breaks the phase locks of perfectly periodic
hosts (see `simulate_packets`).

Transport (`sender`, `receiver`, `cc`, `sack`). TCP with SACK and RFC 6675 loss recovery
(`[transport] sack`, on by default as in Linux and ns-3; off: NewReno), in segments of `mss` wire
bytes: slow start and congestion avoidance with the fluid model's `ack_ratio` b (b = 1: growth by
acknowledged segments, +1 segment per RTT; b = the delayed-ACK count, 2 by default: once per ACK,
+1/b per RTT), growth only while the window limits the sender, limited transmit, fast retransmit
when 3 segments above the cumulative ACK are SACKed (without SACK: after 3 duplicate ACKs), recovery
by the SACK scoreboard (pipe, NextSeg; without SACK: NewReno with partial ACKs), RTO per RFC 6298
with a minimum `[transport] rto_min` and exponential backoff, D-SACK undo of spurious recoveries
with an adaptive duplicate-ACK threshold (reordering under spraying). With `[transport] recovery =
"linux"` (`rack`): Linux's RACK-TLP loss detection (RFC 8985: losses known by time, lost
retransmissions and window tails repaired without the RTO) and PRR in recovery. DCTCP: ECN-capable
data, the receiver echoes the CE state and acknowledges at once when it changes, alpha <- (1-g)
alpha + g F once per window of data (F: fraction of echoed segments), ssthresh = cwnd (1 - alpha/2)
at most once per window, reached by proportional rate reduction (RFC 6937), slow start until the
first echo; a loss halves the window. MPTCP (LIA, OLIA, BALIA, uncoupled; `cc`): one sender and one
receiver per subflow, each a TCP sender as above with its own slow start, recovery and timer; in
congestion avoidance each window-increase event adds the coupled increase I_r of `models.mptcp`,
computed per ACK from the windows and smoothed RTTs of the connection's subflows; a loss or an ECN
echo cuts by the algorithm's factor (one half; BALIA's 1 - min(alpha, 1.5)/2). A finite connection's
segments go to whichever subflow sends new data next; its delivered bytes are the sum of its
subflows' in-order bytes (no connection-level reordering or meta-buffer) and it completes with its
last segment. Receivers acknowledge every 2nd segment (`[transport] delayed_ack_timeout`, 40 ms by
default) and at once on out-of-order or duplicate data, with up to 3 SACK blocks. DCQCN senders
never use SACK. ACKs are `[transport] ack_size` (64 bytes by default, as the fluid model's ACK load)
and return on the reverse of the path of the data packet that triggered them.

Rounds (`rounds`). `[traffic] rounds` makes an incast group's flows barrier-synchronised reads
(partition/aggregate): each sends its block of `size` bytes per round, and the group's next round
starts when the last of its blocks has been delivered in order; a sender holds only the current
round's segments, idles between rounds, and restarts its window after an idle RTO
(cwnd = min(cwnd, init_cwnd), Linux's tcp_slow_start_after_idle); `block_done` records when each
block arrived. The request for the next round is not modelled: it starts at the barrier instant.

Routing. ECMP: each subflow's single path from `build_routes` (a TCP flow has one subflow; an
MPTCP connection `[transport] subflows`, hashed apart, or `[[routing.paths]]`). Spraying: each
packet picks one of its subflow's equal-cost paths at random, by the split weights (seeded).

Engine (`engine`, `events`, `layout`, `jit`). A binary-heap event queue over preallocated arrays
(time, then insertion order, so runs are deterministic for a seed); two events per packet and
hop; all state in a few numpy tables with named columns; numba kernels, compiled once and cached
on disk (`jit`).

Parameters
----------
From the scenario: links (rate, delay, buffer), AQM, traffic (start, size, rounds), transport (cc,
mss, g, ack_ratio, init_cwnd, min_cwnd, ssthresh; the host stack's sack (true), rto_min (200 ms,
Linux and ns-3) and delayed_ack_timeout (min(40 ms, rto_min / 5): Linux's minimum, the ns-3 runner's
setting)), routing, run (duration, seed, sample). Options of `simulate_packets`, with their defaults
and sources: min_rto, delack_timeout, sack and ack_bytes override the scenario's (ack_bytes:
`[transport] ack_size`, 64); delayed_ack 2 segments (Linux, ns-3), or b for an integer ack_ratio
b >= 2; header_bytes 0 (link framing; ns-3's point-to-point links use 2); host_jitter 0.01;
sample_interval: `[run] sample`, else the fluid model's budget of samples, at least 10 us. Initial
window, DCTCP g and alpha = 1 at start follow Linux and ns-3.

Scope and limitations
---------------------
SACK recovery without RFC 6675's rules 3 and 4 and, by default, without RACK-TLP (a lost window tail
waits for the RTO; `sack.py`; `recovery = "linux"` has it, `rack.py`); with `sack = false` NewReno
recovers one hole per round trip (after a slow-start overshoot into a large drop-tail buffer that
takes long); no handshake (flows start established, RTO seeded with the path's base RTT); no pacing
of TCP, TSO/GRO or interrupt coalescing; DCQCN (`dcqcn.py`: paced senders, CNPs from the receiver,
DCQCN's marking in `aqm`); PFC (`links`) with one traffic class and static per-ingress-port
thresholds; a sender's paths must leave its host by one link; a window cannot exceed the receive
ring (4 x the largest path's BDP plus buffers); RED marks each arrival independently (no count-based
spacing); ACKs of ECN-capable flows are ECN-capable (Linux DCTCP), so a congested step marker marks
rather than drops them. Drop-tail Reno with few flows is dominated by phase effects (which flow a
loss event hits), where any two packet simulators may differ by several percent in mean queue.
MPTCP: no handshake or path manager (all subflows start with the connection), no data-sequence
retransmission across subflows, no scheduler but the NIC's round robin, no connection-level receive
buffer; windows and the coupled increase in floating point (Linux: integers, BALIA's alpha floored),
growing per `ack_ratio` like Reno's (Linux's coupled modules count ACKs). Rounds: one subflow per
flow (MPTCP connections with rounds are refused); no request packets (a round starts at the barrier
instant); Linux's halving of an idle window per further RTO is left out (the restart takes min(cwnd,
init_cwnd) at once); without RACK-TLP (the default) a block's lost tail waits for the RTO, which in
the first round of a small incast can cost an RTO that Linux would often avoid.

Validation
----------
Validation cases (`validation/cases/`, run by tests/test_validation.py and `pathflow validate`;
numbers in docs/validation.md), all against ns-3 3.44 with host_jitter 0: `dctcp_star_ns3` (2
flows, 100 Mb/s, K = 20: mean queue 19.6 vs 20.1 packets, p1..p99 15..24 in both),
`dctcp_incast_ns3` (8 flows, 1 Gb/s, K = 65: 63.1 vs 63.3 packets, p1..p99 51..76 vs 52..76),
`reno_star_ns3` (NewReno, drop-tail, 425 packets, 40 s: mean queue 350 vs 371 packets;
ns-3's losses hit one flow per event, ours often both), `dctcp_fattree_ns3` (k = 4 fat-tree,
ECMP, on pathflow's paths: the most loaded core port 28.7 vs 29.0 packets); bottleneck
throughput within 0.2 %. `dctcp_hardware`:
the DCTCP star's queue against the hardware trace (p1..p99 16..23 vs 16.3..21.4 packets, mean
19.8 vs 19.0). tests/test_packet_basics.py: line rate and base RTT on an idle path, buffers and
byte conservation, the Reno saw-tooth, growth of 1/b segment per RTT, the closed-form
completion time of a finite flow, a lossless PFC incast, spraying against ECMP on the k = 4
fat-tree, determinism, the Dataset names. tests/test_rounds.py: round times of
barrier-synchronised reads against closed forms (a block within the initial window, one
slow-start round trip), the barrier from the recorded sends of two unequal flows, the window
restart after an idle RTO, and incast collapse at 1 Gb/s with a 64 KB buffer (32 servers: every
round waits out a 200 ms RTO, goodput < 0.4 Gb/s; 4 servers near line rate after the first
round; rto_min = 200 us cures it). tests/test_mptcp_packet.py: a one-subflow connection
is Reno number for number; a finite connection delivers its size once over its subflows;
coupled growth of 1/n segment per RTT; RFC 6356's goals (disjoint paths filled, do no harm,
balance congestion); a k = 4 fat-tree with 4 LIA subflows per connection against the fluid
model and the paths' optimum. tests/test_packet_rack.py: Linux's recovery repairs a block whose
tail a slow-start overshoot took within a probe timeout and a few round trips, resending each
lost segment once, where the default waits for the RTO.

References
----------
M. Alizadeh et al., "Data Center TCP (DCTCP)", SIGCOMM 2010; RFC 8257 (DCTCP), RFC 5681, 6582
(NewReno), 6298 (RTO), 3042 (limited transmit), 2883 (D-SACK), 6937 (PRR), 8985 (RACK-TLP),
3168 (ECN);
S. Floyd, V. Jacobson, "On Traffic Phase Effects in Packet-Switched Gateways", 1992;
M. Handley et al., "Re-architecting datacenter networks and stacks for low latency and high
performance" (htsim), SIGCOMM 2017; RFC 6356 (LIA), Khalili et al. 2012 (OLIA), Peng et al.
2016 (BALIA); C. Raiciu et al., "Improving datacenter performance and robustness with
multipath TCP", SIGCOMM 2011.
"""

from pathflow.validation.packet.jit import refresh_cache

refresh_cache()  # before any kernel is compiled or loaded

from pathflow.validation.packet.simulate import simulate_packets  # noqa: E402

__all__ = ["simulate_packets"]
