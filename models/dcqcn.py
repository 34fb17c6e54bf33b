"""DCQCN fluid model: the rate-based congestion control of RoCEv2 NICs.

Model
-----
The per-flow fluid model of Zhu et al. (CoNEXT 2016) of DCQCN's reaction point (Zhu et al.,
SIGCOMM 2015). A sender keeps a current rate R_C, a target rate R_T (packets/s) and alpha, its
estimate of congestion. The switch marks packets with probability p(q) (`models.aqm.DcqcnMarking`:
0 below Kmin, linear to Pmax at Kmax); the receiver (notification point) turns marks into
congestion notification packets (CNPs), at most one per flow per `cnp_interval` tau. With p and
R_C* = R_C(t - tau*) as the sender sees them one feedback delay late (p is the path's marked
fraction, R_C* the rate whose acknowledgements arrive now):

    a = 1 - (1-p)^(tau R_C*)         probability of at least one CNP in a period tau
    b = p / ((1-p)^(-B) - 1)          byte-counter expiries per packet (B: byte counter)
    d = p / ((1-p)^(-T R_C*) - 1)     timer expiries per packet (T: rate-increase timer)
    c = (1-p)^(F B) b,  e = (1-p)^(F T R_C*) d   the expiries past F fast-recovery stages

    w = (F+1) max(T/s, B/n)               the wait for F + 1 expiries of both counters, in
                                          units of s, the mean time since the last cut (n:
                                          the packets sent in it)
    h = exp(-2 w) (1 + 2 w)               the share of expiries past it (an Erlang-2 age)

    dalpha/dt = g/tau' ((1 - (1-p)^(tau' R_C*)) - alpha)
    ds/dt     = 1 - s a/tau,   dn/dt = R_C - n a/tau
    dR_T/dt   = -(R_T - R_C)/tau a + R_AI R_C* (c + e) + (R_HAI - R_AI) R_C* h (b + d)
    dR_C/dt   = -R_C alpha/(2 tau) a + (R_T - R_C)/2 R_C* (b + d)

The receiver's NIC sends at most `cnp_capacity` CNPs per microsecond for all the flows it
receives (about 1 on ConnectX-4, seed 001). The flows' CNP demand, a CNP per marked packet at
most one per `min_time_between_cnps` (the renewal rate x / (1 + x gap), x = p R_C*), is summed
over the receiving NIC; where it exceeds the capacity every flow's CNPs are thinned alike, which
the model reads as a marking probability p scaled by capacity / demand.

A CNP cuts R_C by alpha/2 and remembers it in R_T; each byte-counter or timer expiry moves R_C
halfway to R_T (fast recovery) and, past F expiries without a CNP, raises R_T by R_AI (additive
increase); once both counters are past F an expiry raises R_T by R_HAI instead (hyper
increase: ConnectX's rule, `rpg_hai_rate`; the published fluid model has none, and the
conext2016 preset sets R_HAI = R_AI, which leaves it out). The products R_C* b and R_C* d are
evaluated in a form that stays finite in every limit (p -> 0: R_C* b -> R_C*/B, R_C* d -> 1/T;
R_C* -> 0; p -> 1), so values and gradients are finite.
R_C and R_T start at the line rate (a new queue pair sends at line rate), alpha at 1 (ConnectX
`initial_alpha_value` = 1023/1024), and both rates stay within [min_rate, line_rate].

Cuts drawn per flow (`[transport] cuts = "events"`). The mean field above is a moment closure:
its cut and fast-recovery terms are products of a flow's rate and its chance of a CNP, so flows
with equal parameters stay identical and cut together, while packet-level flows are cut at
moments of their own and part. The events form keeps each flow's own sample path, the particle
form of the mean field (as `models.timeouts` does for timeouts): a flow is cut at the arrivals
of a point process, R_T <- R_C, R_C <- R_C (1 - alpha/2), and its counters restart; between its
cuts

    dalpha/dt = g/tau' (m(tau' R_C*, p) - alpha)
    ds/dt = 1,  dn/dt = R_C*                                         (time and packets since)
    dR_T/dt = (1/T) I(floor(s/T) + 1, floor(n/B)) + (R_C*/B) I(floor(s/T), floor(n/B) + 1)
    dR_C/dt = (R_T - R_C) ln 2 (1/T + R_C*/B)

with I(i, j) the NIC's raise at an expiry that leaves the counts i, j: R_HAI once both are past
F, R_AI once either has reached F, else none (fast recovery). The counters run on the clock and
on the packets the flow sends, R_C* (its NIC may send fewer than R_C: a paused or shared NIC);
halfway at each of evenly spaced expiries is the rate ln 2 per expiry; and
m(x, p) = 1 - (1-p)^floor(x) (1 - (x - floor(x)) p) is the chance that an alpha period holding
x packets (evenly spaced at a random phase) holds a marked one, which is the published
1 - (1-p)^x for whole x but x p below one packet, where 1 - (1-p)^x tends to 1 as p does (a
flow of 1,280 sharing 10 Gb/s sends one packet every 20 alpha periods). The cuts come at the
marked packets' arrivals, none within D = max(tau, min_time_between_cnps) of the last cut
(`cut_hazard`): packets arrive every 1/R_C*, so nothing comes before the first packet past the
dead time, ceil(D R_C*)/R_C* after the cut, and from then on the (1-p)/p unmarked packets
before the marked one, on average, are an exponential wait, the event rate

    h = p R_C* / (1 - p)    for s >= ceil(D R_C*)/R_C*, 0 before

so that the gap between cuts has the packet level's mean and, for the geometric count, an
exponential's spread, sqrt(1 - p) of it (tests/test_dcqcn_events.py checks both against that
renewal). The solver draws the cuts by the time change (`solvers.dde`: each flow integrates h
until its next Exp(1) draw) and runs flows that only their cuts tell apart as at most `[run]
representatives` controllers per class (the 64 flows of a 64:1 incast each its own, 2,000 flows
from 8 hosts as 256; `pathflow sweep` with no scenario runs its incast in this form with 4 per
host, which gives the sweep of 16 within 1 % in throughput and 2.2 % in mean queue, every
state the same). Results then depend on `[run] seed`, as a packet-level run's do. Where
every packet is marked (an incast's start) the cuts come with the first packet past the dead
time, alike for flows alike: they part once the marking is a probability again.

Fixed point (validation/cases/dcqcn.py solves it): N flows on a link of C packets/s settle at
R_C = C/N; with I = R_AI (c + e) + (R_HAI - R_AI) h (b + d) and R_T - R_C = tau I R_C / a from
dR_T/dt = 0, dR_C/dt = 0 leaves one equation in p, alpha(p) a(p)^2 = tau^2 I R_C (b + d) with
alpha(p) = 1 - (1-p)^(tau' R_C), and the queue follows from the marking curve. The paper's
approximation for small p (no hyper increase) is p* ~ cbrt(R_AI N^2 / (tau' C^2) (1/B + N/(T C))^2).

Parameters
----------
Presets (`[transport] preset`, every value overridable):

- ``conext2016`` (default): the published fluid defaults (the CoNEXT 2016 authors' fluid code):
  tau = 50 us, tau' = 55 us, g = 1/256, F = 5, B = 10 MB, T = 55 us, R_AI = 40 Mb/s, and
  R_HAI = R_AI (their model has no hyper increase); the receiver's CNP interval 50 us (DCQCN's
  notification point).
- ``cx4``: the ConnectX-4 values written by the seed 001 testbed scripts
  (validation/data/dcqcn_testbed/README.md): rate_reduce_monitor_period tau = 4 us (the NIC cuts at
  most once per period), min_time_between_cnps = 0 (a CNP per marked packet), rpg_time_reset
  T = 300 us, rpg_byte_reset B = 32767 B, rpg_threshold F = 5, rpg_ai_rate R_AI = 5 Mb/s,
  rpg_hai_rate R_HAI = 50 Mb/s. The alpha update (dce_tcp_g = 4 and dce_tcp_rtt, "meaning
  unresolved" in the testbed notes) keeps DCQCN's published g = 1/256 and tau' = 55 us, to be
  calibrated against the testbed. Read with NVIDIA's
  formula (alpha <- (G/1024) alpha + (1 - G/1024) per 1 us period), G = 4 makes alpha forget a
  CNP within a microsecond, so the cuts vanish and neither engine converges on an 8:1 incast:
  not what the testbed measured at small N.
- ``hpcc``: DCQCN as the HPCC paper (Li et al. SIGCOMM 2019) configures it, scaled to the link
  rate C (`topology.link_rate`): timers tau' = 1 us, tau = 4 us, T = 300 us,
  R_AI = 5 Mb/s x C/25G, R_HAI = 50 Mb/s x C/25G; g, F and B as conext2016, a CNP per marked
  packet as ConnectX's.

The receiver's `min_time_between_cnps` matters at packet level only: the fluid model's CNPs are
its rate cuts, at most one per tau, which holds while min_time_between_cnps <= tau.

line_rate: the sender's NIC rate unless given. min_rate: 1 Mb/s (ConnectX `rpg_min_rate`), also
the numerical floor. cnp_capacity: unlimited unless given (a calibration parameter of seed 001's
testbed, about 1 per microsecond).

Scope and limitations
---------------------
Mean field (the default, `cuts = "mean"`): a flow's rate is the expectation over CNP arrivals,
so flows with equal parameters and paths stay identical (real flows desynchronise). With many
flows per receiver that matters more than anything below: on the incast `pathflow sweep` runs
(cx4, 5.1 MB under PFC) the mean field's flows cut together and idle the link (6.7 to 8.6 Gb/s
from 80 to 2,000 flows, mean queues under 200 KB, oscillating at every N), where the packet
level carries 8.6 to 10 Gb/s and from about 1,000 flows holds the buffer full under PFC, every
flow at its share of its NIC's round robin, settled. Its alpha and cut probability, 1 - (1-p)^x,
are the published ones, which overcount marks where a flow sends less than a packet per period
(above). The events form follows the packet level there: throughput within 3 % from 80 to 2,000
flows, the same state (oscillating at 80, settled with the buffer full from 1,280), the mean
queue within 2 % at 80 flows, 1.5x and 1.8x the packet level's at 320 and 640 flows (510 KB
against 344 KB, 3.5 MB against 2.0 MB, measured 2026-11-29). At 8:1 it rises faster after its
deepest cuts than the packet level, 4.6 % (conext2016) and 10.5 % (cx4) above the packet level's
throughput, where the mean field is within 1.1 %; the equilibrium and stability analyses
(`pathflow.analysis`) are of the mean field (asked of the events form they say so). The additive
increase keeps the published model's geometric counts c and e, which hold at rest: after the
marks stop they count every expiry as past F at once, where a NIC first spends F expiries in
fast recovery. Hyper increase cannot be read that way: at p = 0 the counts would put every
expiry past F + 1 stages of the byte counter too, which a NIC at a few Mb/s reaches only after
(F + 1) x 32 KB, tens of milliseconds. So h follows s, the mean time since the last cut, and n,
the packets sent in it (both renewals: they relax to the mean gap between cuts tau/a and the
packets in it, and grow by 1 s per s and R_C once the cuts stop). The age's spread is not in the
mean field: Erlang-2 (coefficient of variation 0.71) is what the packet level measured on cx4's
8:1 incast, where hyper increase matters (the gaps between a flow's cuts after warm-up: mean 6.4
ms, coefficient of variation 0.73, 2026-11-25); the exponential (Poisson cuts) made the fluid
link 5 % busier than the packet level's there, a fixed threshold 11 % idler. The mean field's
cuts are rarer than the packet level's where its marking runs in bursts (dcqcn+static at 80:1: a
cut every 3.0 ms per flow against 0.5 ms), and there hyper increase fires where a NIC's never
does. Losses are ignored: a DCQCN network is lossless, so run it with `[aqm] pfc = true`
(`models.pfc`) or buffers in which nothing drops. The feedback delay is the solver's round trip,
base plus queueing, where the paper's analysis holds it fixed (`run.feedback_delay =
"propagation"` holds it too). The packet-level counterpart is validation/packet/dcqcn.py.

Validation
----------
Validation cases (validation/cases/dcqcn.py, run as tests by tests/test_validation.py):
`dcqcn_fixed_point`, the simulated rate, marking probability and queue against the fixed point
of the steady-state equations solved with a root finder (within 2 %, N in {2, 10}, conext2016,
40 Gb/s), with the paper's cube-root approximation reported; `dcqcn_stability`, the published
stability result with the loop delay held at 85 us (`run.feedback_delay = "propagation"`): the
queue of N = 10 oscillates with sustained amplitude, N = 2 settles (to within +-10 %: 85 us is
close to its own critical delay here), N = 64 settles at the paper's fixed point only with the
marking line extended past Kmax; `dcqcn_fluid_packet`, 8:1 and 64:1 incasts at 10 Gb/s against
the packet level (conext2016 and cx4: the mean field claimed at 8:1, the events form at 64:1).
tests/test_dcqcn_events.py: the gaps between cuts against the renewal of marked packets, flows
cut at moments of their own, and the events form against the packet level on the sweep's incast.
tests/test_dcqcn.py: presets, errors, units of the results, alpha's decay in both engines, a
receiver short of CNP capacity losing control of the queue in both engines, and hyper increase:
the recovery after a deep cut against the packet level, held back until the byte counter has
passed F + 1 expiries. The rest state with hyper increase (`pathflow.analysis.equilibrium`)
against the simulation: tests/test_equilibrium_dcqcn_plus.py (dcqcn+static on cx4's NIC).

References
----------
Y. Zhu et al., "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM 2015.
Y. Zhu, M. Ghobadi, V. Misra, J. Padhye, "ECN or Delay: Lessons Learnt from Analysis of DCQCN and
TIMELY", CoNEXT 2016.
NVIDIA, "DCQCN CC Parameters" (ConnectX-4 and later), networking-docs.nvidia.com.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, ClassVar, NamedTuple

import jax.numpy as jnp
import numpy as np

from pathflow.models.base import Array, CongestionModel, Signals, State, receiver_sum
from pathflow.models.parameters import Parameter, Presets

__all__ = ["SURE", "TINY", "Dcqcn", "DcqcnParams", "any_marked", "dcqcn_parameters", "log_keep_of",
           "per_packet"]

TINY = 1e-30
# the state every DCQCN-family model keeps; the rest of a model's state (DCQCN's time and data
# since the last cut, DCQCN+'s stage) counts up from 0 and stays >= 0
_RATES_AND_ALPHA = ("current_rate", "target_rate", "alpha")
SURE = 1.0 - 1e-12  # p is kept below 1 so that log(1 - p) stays finite
LOG_UNSURE = math.log1p(-SURE)  # log(1 - SURE), about -27.6


HALVING = math.log(2.0)
"""The rate, per expiry, at which a gap closed halfway at each of evenly spaced expiries closes
continuously: exp(-ln 2) = 1/2 over one (the events form's fast recovery between its cuts)."""


def log_keep_of(p: Array) -> Array:
    """log(1 - p) for p in [0, SURE], bounded below by log(1 - SURE) in every precision. In
    float32 SURE rounds to exactly 1: a full queue's p = 1 gave log(1 - p) = -inf, and a flow
    that sees no rate 0 x -inf = NaN (the default sweep's DCQCN+ point at 1,120 flows went NaN
    under PFC, benchmarks/bench_precision.py), while a saturated p took a different bound than
    in float64. The bound is float64's own, so float64 results do not move."""
    return jnp.maximum(jnp.log1p(-p), LOG_UNSURE)


class DcqcnParams(NamedTuple):
    line_rate: Array  # packets/s
    min_rate: Array  # packets/s
    cnp_interval: Array  # s, tau
    min_time_between_cnps: Array  # s (the packet-level notification point's)
    cnp_capacity: Array  # CNPs per microsecond per receiving NIC
    alpha_interval: Array  # s, tau'
    g: Array
    stages: Array  # F
    byte_counter: Array  # packets, B
    timer: Array  # s, T
    rai: Array  # packets/s, R_AI
    rhai: Array  # packets/s, R_HAI


def _conext2016(link_rate: float) -> dict[str, Any]:
    return {"cnp_interval": "50us", "min_time_between_cnps": "50us", "alpha_interval": "55us",
            "g": 1 / 256, "stages": 5, "byte_counter": "10MB", "timer": "55us", "rai": "40Mbps",
            "rhai": "40Mbps"}


def _cx4(link_rate: float) -> dict[str, Any]:
    return {"cnp_interval": "4us", "min_time_between_cnps": "0us", "alpha_interval": "55us",
            "g": 1 / 256, "stages": 5, "byte_counter": "32767B", "timer": "300us",
            "rai": "5Mbps", "rhai": "50Mbps"}


def _hpcc(link_rate: float) -> dict[str, Any]:
    scale = link_rate * 8 / 25e9
    return {**_conext2016(link_rate), "cnp_interval": "4us", "min_time_between_cnps": "0us",
            "alpha_interval": "1us", "timer": "300us", "rai": f"{5e6 * scale!r}bps",
            "rhai": f"{50e6 * scale!r}bps"}


def any_marked(packets: Array, p: Array, log_keep: Array) -> Array:
    """The probability that a window holding `packets` packets on average (evenly spaced, at a
    random phase: floor(n) or floor(n) + 1 of them) holds at least one marked with probability
    p each: 1 - (1-p)^k (1 - f p), k = floor(n), f = n - k. Where n is whole it is the
    published 1 - (1-p)^n; below one packet it is n p, where 1 - (1-p)^n tends to 1 as p does
    (a flow that sends one packet every 20 alpha periods into a queue that marks all of them
    does not see a mark in every period)."""
    whole = jnp.floor(packets)
    return 1.0 - jnp.exp(whole * log_keep) * (1.0 - (packets - whole) * p)


def cut_hazard(since_cut: Array, dead: Array, p: Array, seen: Array) -> Array:
    """The rate of a flow's cuts `since_cut` seconds after its last one (`cuts = "events"`):
    its packets arrive every 1/seen, each marked with probability p, and the first marked one
    at least `dead` after the last cut cuts. So nothing until the first packet past the dead
    time, ceil(dead seen) / seen after the cut; from then on the unmarked packets before the
    marked one, (1-p)/p on average, as a rate p seen / (1-p): the gap's mean is the packet
    level's renewal, its spread that of an exponential in place of the geometric count (the
    same as p -> 0, none at p = 1, where every cut comes with the first packet)."""
    first = jnp.ceil(dead * seen) / jnp.maximum(seen, TINY)
    rate = p * seen / jnp.maximum(1.0 - p, 1.0 - SURE)
    return jnp.where((since_cut >= first) & (seen > 0.0), rate, 0.0)


def per_packet(count: Array, p: Array, log_keep: Array) -> Array:
    """count * p / ((1-p)^(-count) - 1): the rate of counter expiries (a counter of `count`
    packets reset by every mark) per packet, times `count`; its limit is 1 as p -> 0 and
    p / -log(1-p) as count -> 0, taken where the direct form loses precision."""
    exponent = -count * log_keep
    direct = count * p / jnp.where(exponent > 1e-9, jnp.expm1(exponent), 1.0)
    limit = jnp.where(p > 0, p / jnp.maximum(-log_keep, TINY), 1.0)
    return jnp.where(exponent > 1e-9, direct, limit)


def _hyper_share(since_cut: Array, sent: Array, params: DcqcnParams) -> Array:
    """h: the share of expiries past F + 1 stages of both counters, (F + 1) T seconds and
    (F + 1) B packets after the last cut. The time since the cut is Erlang-2 of mean
    `since_cut` (`sent` packets sent in it): P(age > w) = exp(-2 w/s) (1 + 2 w/s)."""
    wait = (params.stages + 1) * jnp.maximum(params.timer / jnp.maximum(since_cut, TINY),
                                             params.byte_counter / jnp.maximum(sent, TINY))
    return jnp.exp(-2.0 * wait) * (1.0 + 2.0 * wait)


def _target_increase(bytes_b: Array, timer_d: Array, seen: Array, log_keep: Array,
                     hyper: Array, params: DcqcnParams) -> Array:
    """dR_T/dt's increase: R_AI per expiry of a counter past F stages, R_HAI in its place on
    the share `hyper` of expiries. `bytes_b`, `timer_d`: the expiry rates R_C* b and R_C* d."""
    past_bytes = jnp.exp(params.stages * params.byte_counter * log_keep)  # c / b
    past_timer = jnp.exp(params.stages * params.timer * seen * log_keep)  # e / d
    return (params.rai * (past_bytes * bytes_b + past_timer * timer_d)
            + (params.rhai - params.rai) * hyper * (bytes_b + timer_d))


def _cnp_share(signals: Signals, seen: Array, params: DcqcnParams) -> Array:
    """The fraction of its CNPs a flow's receiver can send: the flows' CNP demand (a CNP per
    marked packet, at most one per min_time_between_cnps: the renewal rate x / (1 + x gap),
    x = p R_C*) summed over the receiver's NIC, against its capacity."""
    marked = signals.mark * seen
    demand = marked / (1.0 + marked * params.min_time_between_cnps)
    total = receiver_sum(demand, signals)
    capacity = params.cnp_capacity * 1e6
    return jnp.where(total > capacity, capacity / jnp.maximum(total, TINY), 1.0)


def _cnp_probability(signals: Signals, seen: Array, params: DcqcnParams) -> Array:
    """p: the chance that a packet brings its flow a CNP, its marked fraction thinned by the
    receiver's CNP capacity (kept below 1)."""
    return jnp.clip(signals.mark * _cnp_share(signals, seen, params), 0.0, SURE)


@dataclass(frozen=True)
class Dcqcn(CongestionModel):
    name = "dcqcn"
    sends = "rate"
    parameters = (
        Parameter("line_rate", "packets/s", None, "the sender's line rate, where rates start "
                  "and stop (default: its NIC's rate)", low=0.0, inclusive=False, optional=True),
        Parameter("min_rate", "packets/s", "1Mbps", "lowest rate (ConnectX rpg_min_rate)",
                  low=0.0, inclusive=False),
        Parameter("cnp_interval", "s", None, "tau: at most one rate cut per period (the "
                  "NIC's rate-reduction period, or the CNP interval)", low=0.0, inclusive=False),
        Parameter("min_time_between_cnps", "s", None, "the receiver sends at most one CNP per "
                  "flow per this time (packet level; the fluid model folds it into tau)",
                  low=0.0),
        Parameter("cnp_capacity", "1", math.inf, "CNPs per microsecond a receiver's NIC can "
                  "send, shared by its flows (ConnectX-4: about 1)", low=0.0, inclusive=False),
        Parameter("alpha_interval", "s", None, "tau': alpha update period", low=0.0,
                  inclusive=False),
        Parameter("g", "1", None, "gain of alpha's moving average", low=0.0, high=1.0,
                  inclusive=False),
        Parameter("stages", "1", None, "F: fast-recovery stages before additive increase",
                  low=1.0),
        Parameter("byte_counter", "packets", None, "B: bytes sent between rate increases",
                  low=0.0, inclusive=False),
        Parameter("timer", "s", None, "T: rate-increase timer", low=0.0, inclusive=False),
        Parameter("rai", "packets/s", None, "R_AI: additive increase of the target rate",
                  low=0.0, inclusive=False),
        Parameter("rhai", "packets/s", None, "R_HAI: hyper increase of the target rate, once "
                  "both counters are past F", low=0.0, inclusive=False),
        Parameter("cuts", "choice", "mean", "mean: the published mean field (a flow's rate "
                  "is the expectation over CNP arrivals); events: each flow's cuts drawn at "
                  "its own random moments", choices=("mean", "events")),
    )
    Params: ClassVar[type] = DcqcnParams
    cuts: str = "mean"
    presets: ClassVar[Presets] = {"conext2016": _conext2016, "cx4": _cx4, "hpcc": _hpcc}
    state_units: ClassVar[dict[str, str]] = {"current_rate": "packets/s",
                                             "target_rate": "packets/s", "alpha": "1",
                                             "since_cut": "s", "sent_since_cut": "packets"}

    @classmethod
    def check(cls, values: dict[str, float | str]) -> None:
        line, low = values["line_rate"], values["min_rate"]
        if line is not None and not float(low) < float(line):
            raise ValueError("min_rate: must be below line_rate")

    def fastest_rate(self, params: Any) -> float:
        p = params
        rates = [1 / np.asarray(p.cnp_interval), np.asarray(p.g) / np.asarray(p.alpha_interval),
                 1 / np.asarray(p.timer), np.asarray(p.line_rate) / np.asarray(p.byte_counter)]
        return float(max(np.max(rate) for rate in rates))

    def initial_state(self, params: DcqcnParams) -> State:
        line = params.line_rate
        counters = {key: jnp.zeros_like(line) for key in self.state_units
                    if key not in _RATES_AND_ALPHA}
        return {"current_rate": line, "target_rate": line, "alpha": jnp.ones_like(line),
                **counters}

    def rate(self, state: State, rtt: Array, params: DcqcnParams) -> Array:
        return state["current_rate"]

    @property
    def has_events(self) -> bool:
        return self.cuts == "events"

    def event_rate(self, state: State, signals: Signals, params: DcqcnParams) -> Array:
        """Cuts per second: marked packets arriving (a CNP each, thinned by the receiver's CNP
        capacity), none within max(tau, min_time_between_cnps) of the last cut."""
        seen = signals.acked_rate
        p = _cnp_probability(signals, seen, params)
        dead = jnp.maximum(params.cnp_interval, params.min_time_between_cnps)
        return cut_hazard(state["since_cut"], dead, p, seen)

    def on_event(self, state: State, params: Any) -> State:
        """A cut: R_T = R_C, R_C = R_C (1 - alpha/2), the counts since the last cut restart."""
        current = state["current_rate"]
        counters = {key: jnp.zeros_like(value) for key, value in state.items()
                    if key not in _RATES_AND_ALPHA}
        return {**state, "target_rate": current,
                "current_rate": jnp.maximum(current * (1.0 - 0.5 * state["alpha"]),
                                            params.min_rate), **counters}

    def _between_cuts(self, state: State, signals: Signals, params: DcqcnParams) -> State:
        """d(state)/dt of one flow between its cuts (`cuts = "events"`): the counters since
        the last cut count time and packets; each expiry (1/T, R_C/B per second) moves R_C
        halfway to R_T, after raising R_T by R_AI once either count has reached F and by
        R_HAI once both are past it (the NIC's rule, validation/packet/dcqcn.py)."""
        seen = signals.acked_rate
        p = _cnp_probability(signals, seen, params)
        marked = any_marked(params.alpha_interval * seen, p, log_keep_of(p))
        current, target = state["current_rate"], state["target_rate"]
        timer_rate, bytes_rate = 1.0 / params.timer, seen / params.byte_counter  # bytes sent
        by_timer = jnp.floor(state["since_cut"] / params.timer)  # expiries so far
        by_bytes = jnp.floor(state["sent_since_cut"] / params.byte_counter)

        def step(timer_count: Array, bytes_count: Array) -> Array:
            """R_T's raise at an expiry that leaves these counts."""
            return jnp.where(jnp.minimum(timer_count, bytes_count) > params.stages, params.rhai,
                             jnp.where(jnp.maximum(timer_count, bytes_count) >= params.stages,
                                       params.rai, 0.0))

        return {
            "alpha": params.g / params.alpha_interval * (marked - state["alpha"]),
            "since_cut": jnp.ones_like(current),
            "sent_since_cut": seen,
            "target_rate": (timer_rate * step(by_timer + 1, by_bytes)
                            + bytes_rate * step(by_timer, by_bytes + 1)),
            "current_rate": (target - current) * HALVING * (timer_rate + bytes_rate),
        }

    def derivative(self, state: State, signals: Signals, params: DcqcnParams) -> State:
        if self.has_events:
            return self._between_cuts(state, signals, params)
        seen = signals.acked_rate  # R_C*: the rate whose feedback arrives now
        p = _cnp_probability(signals, seen, params)
        log_keep = log_keep_of(p)
        current, target, alpha = state["current_rate"], state["target_rate"], state["alpha"]
        tau, byte_counter, timer = params.cnp_interval, params.byte_counter, params.timer
        cut = -jnp.expm1(tau * seen * log_keep)  # a
        marked = -jnp.expm1(params.alpha_interval * seen * log_keep)
        bytes_b = seen / byte_counter * per_packet(byte_counter, p, log_keep)  # R_C* b
        timer_d = per_packet(timer * seen, p, log_keep) / timer  # R_C* d
        since_cut, sent = state["since_cut"], state["sent_since_cut"]
        hyper = _hyper_share(since_cut, sent, params)
        return {
            "alpha": params.g / params.alpha_interval * (marked - alpha),
            "since_cut": 1.0 - since_cut * cut / tau,
            "sent_since_cut": current - sent * cut / tau,
            "target_rate": (-(target - current) / tau * cut
                            + _target_increase(bytes_b, timer_d, seen, log_keep, hyper, params)),
            "current_rate": (-current * alpha / (2 * tau) * cut
                             + (target - current) / 2 * (bytes_b + timer_d)),
        }

    def project(self, state: State, signals: Signals, params: DcqcnParams) -> State:
        def bounded(rate: Array) -> Array:
            return jnp.clip(rate, params.min_rate, params.line_rate)

        counters = {key: jnp.maximum(value, 0.0) for key, value in state.items()
                    if key not in _RATES_AND_ALPHA}
        return {"current_rate": bounded(state["current_rate"]),
                "target_rate": bounded(state["target_rate"]),
                "alpha": jnp.clip(state["alpha"], 0.0, 1.0), **counters}


def dcqcn_parameters(*names: str, **defaults: Any) -> tuple[Parameter, ...]:
    """DCQCN's declared parameters `names`, in that order, with `defaults` set (for the
    models that extend DCQCN and have no presets to fill them)."""
    declared = {parameter.name: parameter for parameter in Dcqcn.parameters}
    return tuple(replace(declared[name], default=defaults[name]) if name in defaults
                 else declared[name] for name in names)
