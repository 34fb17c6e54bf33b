"""The scenario vocabulary as text: what `pathflow run --help` prints after its options.

Most of it is written here; the `[aqm]` and `[transport]` parts are generated from the registry
(`pathflow.models.registry`), so that a registered congestion control or queue discipline and its
parameters appear without an edit here. `pathflow.scenario` validates the same keys.
"""

from __future__ import annotations

import textwrap

from pathflow.models import pfc
from pathflow.models.parameters import Parameter, Presets
from pathflow.models.registry import CONTROLS, DISCIPLINES

__all__ = ["REFERENCE", "reference"]


_REFERENCE = """\
Scenario file keys (TOML). Quantities are strings with units: rates "10Gbps" "100Mbps" "1.25GB/s";
times "62.5us" "2ms" "1s"; sizes "1500B" "512KB" "1MiB" "20pkt" (pkt = transport.mss bytes).

name = "..."                   label for outputs

[topology]
  kind       star | dumbbell | fattree | leafspine | graph
  senders    star, dumbbell: number of senders (star: h0.. -> s0 -> r0; dumbbell: h0.. -> s0 -> s1
             -> r0..)
  k          fattree: even port count (k = 4: 16 hosts, 20 switches; k = 16: 1024 hosts)
  leaves, spines, hosts_per_leaf            leafspine
  edges      graph: CSV file (columns src,dst[,link_rate,delay,buffer]) or GraphML, relative to
             the scenario file; must be connected
  hosts      graph: list of host nodes (default: nodes of degree 1)
  nics       fattree, leafspine: NICs per host, 1..4 (default 1); a host's NIC n attaches to
             the n-th next edge switch of its pod (leaf), as dual-homed MPTCP datacentres do
  link_rate  every link (default "10Gbps")
  delay      one-way propagation delay per link (default "1us")
  buffer     per egress port, > 0 (default "300KB")
  [[topology.links]]  overrides: match = "s0->r0" (glob on link names, e.g. "agg*->core*") or
             tier = "access" | "bottleneck" | "host-edge" | "edge-agg" | "agg-core" | "host-leaf"
             | "leaf-spine" | "graph"; then any of link_rate, delay, buffer

{aqm}
[traffic]
  pattern    incast (default; flows round-robin over the senders to one receiver) | permutation
             (random derangement of hosts) | stride (host i -> i + stride) | random | explicit
             (pairs = [[src, dst], ...] host indices) | one_to_one (sender i -> receiver i)
  flows      number of connections (default: one per sender or host)
  size       bytes per flow or "inf" (default); a finite flow ends when its bytes are delivered
  start      start time of every flow (default "0s");  start_jitter: add uniform [0, jitter)
  stride     stride pattern: offset;  receiver: incast receiver index (default 0)
  rounds     incast: barrier-synchronised reads (partition/aggregate, as cluster storage and web
             search), >= 1 (default 1): each flow sends `size` (finite: its block) per round,
             and the group's next round starts when every one of its flows has delivered its
             block; results: block_done (flow, round) and pathflow.metrics.round_summary
  [[traffic.groups]]  mixed traffic: each entry a traffic table of its own (any key above) that
             may also set any [transport] key but the host stack's (mss, sack, recovery,
             rto_min, delayed_ack_timeout): cc, subflows, path_manager, the cc's parameters,
             e.g. MPTCP users beside TCP users, or long flows beside queries. A group takes
             the [traffic] and [transport] keys it does not set, except those its cc lacks; each
             draws its hosts as its table would alone (two incast groups share senders: give
             pairs to keep them apart); flows are numbered group after group

{transport}
[routing]
  mode       ecmp (default; seeded per-flow hash) | spray (equal split over equal-cost paths) |
             static (per-switch random next hop per destination) | shortest | kshortest
             (subflow i on the i-th shortest loopless path of its pair, any graph) | hamiltonian
             (seed 004: a multipath connection has one subflow per link of its ingress switch,
             each along a Hamiltonian path of the switches up to the destination's switch)
  scheme     hamiltonian: vlan (default; paths per VLAN, ingress switch and port) | shared
             (per ingress switch and port, whatever the host's VLAN)
  vlans      hamiltonian: lists of host names, one per VLAN (unlisted hosts: one default VLAN)
  max_paths  cap on equal-cost paths per pair, and kshortest's k (default 256)
  [[routing.paths]]  explicit paths: flow = i (the connection, in traffic order), nodes = ["h0",
             "s1", ..., "h5"] from its source host to its destination; each entry is one subflow
             of that flow (several need a multipath cc); its other flows are routed by mode

[run]
  duration   simulated time (default "100ms");  seed (default 1)
  dt         integration step (default: smallest base RTT / 20; / 10 for rate-based cc)
  sample     recording interval (default: up to 20000 samples)
  warmup     start of the steady window for statistics (default: a quarter of duration)
  precision  float64 (default) | float32
  feedback_delay  round_trip (default): feedback returns one round trip, queueing included, late
             | propagation: the base round trip only (the fixed loop delay of stability analyses)
  representatives  flows that only their timeouts tell apart run as at most this many per
             class, each a sample of the class's timeouts (default 32; 0: every flow)
"""


def _describe(parameter: Parameter, indent: str, preset: bool = False) -> str:
    """One parameter for the reference: meaning, default and allowed values, wrapped; `preset`:
    its owner's presets set what it leaves unset."""
    default = parameter.default
    shown = ("default: the preset's" if default is None and preset and not parameter.optional
             else "required" if default is None and not parameter.optional
             else "optional" if default is None
             else f"default {str(default).lower()}" if isinstance(default, bool)
             else f"default {default:.6g}" if isinstance(default, float)
             else f"default {default!r}")
    text = f"{parameter.name:<10} {parameter.doc}; {parameter.allowed()}; {shown}"
    return textwrap.fill(text, 100, initial_indent=indent,
                         subsequent_indent=indent + " " * 11)


def _presets(presets: Presets, indent: str) -> list[str]:
    """The `preset` key of a model or discipline that has named presets."""
    if not presets:
        return []
    names = " | ".join(presets)
    return [textwrap.fill(f"{'preset':<10} {names}; default {next(iter(presets))!r}: the defaults "
                          "of the keys below (any of them may be set)", 100,
                          initial_indent=indent, subsequent_indent=indent + " " * 11)]


def _vocabulary() -> dict[str, str]:
    """The [aqm] and [transport] parts of the reference, generated from the registry."""
    aqm = ["[aqm]  (applied at switch ports; host NICs are drop-tail)",
           f"  kind       {' | '.join(DISCIPLINES)} (default droptail)",
           *(_describe(p, "  ") for p in pfc.PARAMETERS)]
    for name, kind in DISCIPLINES.items():
        if kind.parameters:
            aqm.append(f"  kind = {name!r}:")
            aqm += _presets(kind.presets, "    ")
            aqm += [_describe(p, "    ", bool(kind.presets)) for p in kind.parameters]
    transport = ["[transport]", f"  cc         {' | '.join(CONTROLS)} (default dctcp)",
                 '  mss        packet size on the wire, also the unit "pkt" (default "1500B")',
                 '  ack_size   a pure ACK on the wire (default "64B"): its load on the reverse '
                 'links and its\n             serialisation in the base RTT; "0B" leaves ACKs '
                 'out of the fluid model',
                 "  subflows   subflows per connection, 1..64 (default 1); more than one needs a "
                 "multipath cc",
                 "  path_manager  ndiffports (default): every subflow on the connection's host "
                 "pair, routed on its\n             own (ECMP hashes each subflow, so subflows "
                 "may collide; spray splits each\n             over all equal-cost paths) | "
                 "fullmesh: `subflows` subflows on every pair of the\n             hosts' NICs "
                 "(multi-homed hosts: topology.nics, or graph hosts with several links)",
                 "  sack       true (default; Linux and ns-3) | false: SACK with RFC 6675 loss "
                 "recovery, or NewReno\n             (RFC 6582); window-based controls",
                 '  recovery   with SACK: "rfc6675" (default): losses known by 3 SACKed '
                 'segments above,\n             cwnd = ssthresh in recovery | "linux" (since '
                 "4.18): RACK-TLP (RFC 8985: lost\n             retransmissions and window "
                 "tails repaired without the RTO) and PRR\n             (RFC 6937) in recovery",
                 '  rto_min    lower bound of the retransmission timeout, (0, 60s] (default '
                 '"200ms" as Linux;\n             datacentres often use "1ms" or "200us")',
                 "  delayed_ack_timeout  delayed-ACK timer, (0, 500ms] (default min(40ms, "
                 "rto_min / 5): Linux's\n             minimum)",
                 "             These hold for the whole scenario (not in traffic groups); "
                 "ns-3 takes sack,\n             rto_min and delayed_ack_timeout (it has no "
                 "RACK); the fluid model's timeouts\n             take rto_min and recovery"]
    for name, entry in CONTROLS.items():
        transport.append(f"  cc = {name!r}: {entry.summary}; {entry.sends}-based")
        transport += _presets(entry.model.presets, "    ")
        transport += [_describe(p, "    ", bool(entry.model.presets)) for p in entry.parameters]
    return {"aqm": "\n".join(aqm), "transport": "\n".join(transport)}


def reference() -> str:
    """The scenario vocabulary as `pathflow run --help` prints it (from the registry as it is)."""
    return _REFERENCE.format(**_vocabulary())


def _unwrapped(text: str) -> str:
    """`text` as a click epilog that keeps its line breaks: click rewraps every paragraph but
    those whose first line is a lone \\b."""
    return "\n\n".join(f"\b\n{paragraph}" for paragraph in text.split("\n\n"))


REFERENCE = _unwrapped(reference())
