"""DCQCN+ fluid model: DCQCN whose rate-increase timer and steps follow the incast's scale.

Model
-----
The reaction point of seed 001 (section 4.3) as a mean-field fluid model; docs/dcqcn_plus.md
derives it step by step. A sender keeps R_C, R_T (packets/s) and alpha as DCQCN does
(`models.dcqcn`) and cuts as DCQCN on a CNP (R_T <- R_C, R_C <- R_C (1 - alpha/2)). What
changes is the notification and the increase:

- CNPs. A receiver's NIC sends at most `cnp_capacity` CNPs per microsecond, shared by the n flows
  it receives, and at most one per flow per `cnp_interval`: a congested flow's CNPs come every
  tau_c = max(cnp_interval, n / cnp_capacity), the period DCQCN+ carries in its CNPs, which
  grows with the incast.
- The rate-increase timer K = lambda max(tau_c, MTU / R_C) (no byte counter); its expiries count
  stages S since the last CNP. Every expiry moves R_C halfway to R_T; for F < S <= 4F it first
  raises R_T by min(R_C / 10, R_l / 100) (additive), for S > 4F by min(R_C, (S - 4F) R_l / 100)
  (hyper).

With p the path's marked fraction and R_C* the rate whose feedback arrives now, as in DCQCN, and
a fourth state, the mean stage m (expiries since the last cut):

    a   = 1 - (1-p)^(tau_c R_C*)            a CNP within a period tau_c: cuts at c = a / tau_c
    E   = R_C* p / ((1-p)^(-K R_C*) - 1)    timer expiries per second (1/K without marks)
    q   = m / (1 + m)                       stages geometric with mean m: P(S > s) = q^s
    inc = (q^F - q^4F) min(R_C/10, R_l/100)
          + q^4F ((R_l/100) (1 - q^k) / (1 - q) + (R_C - k R_l/100) q^k),  k = floor(100 R_C / R_l)
                                            the mean R_T step per expiry

    dm/dt     = E - c m                     each expiry adds a stage, each cut resets them
    dalpha/dt = g/tau' ((1 - (1-p)^(tau' R_C*)) - alpha)
    dR_T/dt   = -(R_T - R_C) c + E inc
    dR_C/dt   = -R_C alpha/2 c + (R_T - R_C)/2 E

In steady state m = E/c is the mean of the stationary stage count (q equals the chance that a
timer period passes without a cut, as a stationary model would take it directly); the state m
is there for the transients: when the marks stop, the stages grow by one per K as the NIC's
counter does, so hyper increase starts 4F timer periods later, not at once.

Cuts drawn per flow (`[transport] cuts = "events"`, as DCQCN's events form, `models.dcqcn`):
each flow is cut at moments of its own, at the marked packets' arrivals but none within tau_c
of its last cut (the time since read from its stage, S timer periods K; the event rate is
DCQCN's `cut_hazard`); a cut sets R_T <- R_C, R_C <- R_C (1 - alpha/2) and S <- 0. Between
cuts dS/dt = 1/K, and each expiry raises R_T by the step of the stage it leaves, floor(S) + 1
(none up to F, then as above) and moves R_C halfway to R_T: dR_T/dt = step / K,
dR_C/dt = (R_T - R_C) ln 2 / K; alpha follows the marks of DCQCN's events form.

Parameters (defaults and why)
-----------------------------
lambda (`timer_gain`) 3.1: the testbed's static approximation sets the timer to 3.1 x N us,
which is lambda tau_c with tau_c = N us, N flows sharing a ConnectX-4's 1 CNP per microsecond.
R_l (`rl`) 500 Mb/s: R_l/100 = 5 Mb/s, ConnectX-4's additive step (rpg_ai_rate), so that a small
incast, where R_C/10 is the larger, increases as DCQCN does ("similar performance with small
incasts", seed 001). cnp_capacity 1 per microsecond (seed 001: about 1 on ConnectX-4).
cnp_interval 40 us: the rate-reduce period the testbed's DCQCN+ approximation sets (ConnectX-4's
rate_reduce_monitor_period raised from 4 us), so that small incasts, where n / cnp_capacity is
shorter, are cut at most once per 40 us (with 4 us a 2:1 incast started at line rate is
cut to min_rate in both engines). F = 5, g = 1/256, tau' = 55 us and min_rate 1 Mb/s
(ConnectX rpg_min_rate) as DCQCN. Every value is overridable and calibratable.

Scope and limitations
---------------------
Mean field over CNP arrivals, as DCQCN's model: flows with equal parameters stay identical, and
a flow's stages follow a geometric law around their mean. On `pathflow sweep`'s incast this
matters (measured 2026-11-29, 200 ms): the packet level's flows escape the trap at min_rate from
a few hundred flows on (9.1 Gb/s at 640 flows, the buffer full at 2,000) while the mean field's
stay in it (0.75 and 4.7 Gb/s); the events form escapes with them (9.5 Gb/s at 640 flows, its
mean queue 359 KB against 474 KB, oscillating in both; at 2,000 the buffer full and settled in
both). At 80 flows all three stay trapped (0.08 Gb/s). The packet level's flows part unequally
at 640 (Jain's index 0.70), the events form's do not (1.00). The timer is taken as reset by every
marked packet in E (the NIC resets it at each cut, at most one per tau_c). n counts the flows a
receiver takes that are sending now, congested or not. Losses are ignored, as in DCQCN: run it
on lossless switches (`[aqm] pfc = true`). A flow cut to min_rate waits K = lambda MTU / R_C
(25 ms at 1 Mb/s with 1 KB packets) per stage: after a synchronised start an incast may take
hundreds of milliseconds to recover its throughput, in both engines, as the algorithm is written.

Validation
----------
tests/test_dcqcn_plus.py: the increase step against its stage sums computed directly, the
stage count against the timer's expiries (t / K without marks), the parameters. Validation case
`dcqcn_plus_fluid_packet` (validation/cases/dcqcn_plus.py): fluid against the packet-level
sender (validation/packet/dcqcn.py) on 2:1, 4:1 and 64:1 incasts at 10 Gb/s: fairness at 2:1
and the trap at min_rate at 4:1 claimed in both engines, throughputs and queues reported.

References
----------
Seed 001 (DCQCN+ thesis), sections 4.2 and 4.3; Zhu et al., CoNEXT 2016 (the DCQCN fluid model
this one extends).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import jax.numpy as jnp
import numpy as np

from pathflow.models.base import Array, Signals, State, receiver_sum
from pathflow.models.dcqcn import (
    _RATES_AND_ALPHA,
    HALVING,
    SURE,
    TINY,
    Dcqcn,
    any_marked,
    cut_hazard,
    dcqcn_parameters,
    log_keep_of,
    per_packet,
)
from pathflow.models.parameters import Parameter, Presets

__all__ = ["DcqcnPlus", "DcqcnPlusParams", "Feedback", "cnp_period", "feedback",
           "increase_step"]


class DcqcnPlusParams(NamedTuple):
    line_rate: Array  # packets/s
    min_rate: Array  # packets/s
    cnp_interval: Array  # s
    cnp_capacity: Array  # CNPs per microsecond per receiving NIC
    alpha_interval: Array  # s, tau'
    g: Array
    stages: Array  # F
    timer_gain: Array  # lambda
    rl: Array  # packets/s, R_l


def _ratio_of_powers(log_q: Array, exponent: Array) -> Array:
    """(1 - q^j) / (1 - q) from log q <= 0, with its limit j as q -> 1."""
    small = jnp.abs(log_q) < 1e-9
    safe = jnp.where(small, -1.0, log_q)
    return jnp.where(small, exponent, jnp.expm1(exponent * safe) / jnp.expm1(safe))


def increase_step(log_q: Array, current: Array, stages: Array, rl: Array) -> Array:
    """The mean raise of R_T per timer expiry (packets/s): stage S > F adds min(R_C/10, R_l/100)
    up to 4F and min(R_C, (S - 4F) R_l/100) beyond, S geometric (an expiry follows the one
    before with probability q = exp(log_q))."""
    past_f = jnp.exp(stages * log_q)
    past_4f = jnp.exp(4 * stages * log_q)
    full = jnp.floor(100 * current / rl)  # k: hyper steps (S - 4F) R_l/100 below R_C
    additive = (past_f - past_4f) * jnp.minimum(current / 10, rl / 100)
    hyper = (rl / 100 * _ratio_of_powers(log_q, full)
             + (current - full * rl / 100) * jnp.exp(full * log_q))
    return additive + past_4f * hyper


def cnp_period(sharing: Array, params: DcqcnPlusParams) -> Array:
    """tau_c (s): a congested flow's CNP period, max(cnp_interval, n / cnp_capacity), with n
    (`sharing`) the flows its receiver's NIC takes."""
    return jnp.maximum(params.cnp_interval, sharing / (params.cnp_capacity * 1e6))


class Feedback(NamedTuple):
    """What the CNPs and the timer do to a flow, per second (the model docstring's symbols)."""

    cuts: Array  # c = a / tau_c (1/s)
    marked: Array  # 1 - (1-p)^(tau' R_C*): where alpha tends
    expiries: Array  # E (1/s)


def _timer(period: Array, current: Array, params: DcqcnPlusParams) -> Array:
    """K = lambda max(tau_c, MTU / R_C) (s): the rate-increase timer."""
    return params.timer_gain * jnp.maximum(period, 1.0 / jnp.maximum(current, TINY))


def _sharing(signals: Signals) -> Array:
    """n: the flows sending now into each flow's receiver."""
    seen = signals.acked_rate
    return receiver_sum((seen > 0).astype(seen.dtype), signals)


def feedback(seen: Array, mark: Array, current: Array, sharing: Array,
             params: DcqcnPlusParams) -> Feedback:
    """The cuts, alpha's target and the timer expiries of a flow whose feedback arrives at
    `seen` (R_C*, packets/s) with marked fraction `mark`, sending at `current` (R_C), its
    receiver taking `sharing` flows (n). The derivative and the rest state
    (`pathflow.analysis.equilibrium`) both read them here."""
    p = jnp.clip(mark, 0.0, SURE)
    log_keep = log_keep_of(p)
    period = cnp_period(sharing, params)
    timer = _timer(period, current, params)  # K
    cuts = -jnp.expm1(period * seen * log_keep) / period  # c = a / tau_c
    marked = -jnp.expm1(params.alpha_interval * seen * log_keep)
    expiries = per_packet(timer * seen, p, log_keep) / timer  # E
    return Feedback(cuts, marked, expiries)


@dataclass(frozen=True)
class DcqcnPlus(Dcqcn):
    """DCQCN with the adaptive timer and steps of seed 001; its rate limits, start and
    projection are DCQCN's."""

    name = "dcqcn+"
    parameters = (
        *dcqcn_parameters("line_rate", "min_rate"),
        Parameter("cnp_interval", "s", "40us", "a flow's shortest CNP period (at most one "
                  "cut per period; the testbed's DCQCN+ rate-reduce period)", low=0.0,
                  inclusive=False),
        Parameter("cnp_capacity", "1", 1.0, "CNPs per microsecond a receiver's NIC sends, "
                  "shared by its flows: sets the CNP period tau_c (ConnectX-4: about 1)",
                  low=0.0, inclusive=False),
        *dcqcn_parameters("alpha_interval", "g", alpha_interval="55us", g=1 / 256),
        Parameter("stages", "1", 5.0, "F: fast-recovery stages; additive to 4F, hyper beyond",
                  low=1.0),
        Parameter("timer_gain", "1", 3.1, "lambda: the rate-increase timer is lambda x "
                  "max(CNP period, MTU / R_C)", low=0.0, inclusive=False),
        Parameter("rl", "packets/s", "500Mbps", "R_l: bounds the additive step to R_l/100 and "
                  "paces the hyper increase", low=0.0, inclusive=False),
        Dcqcn.parameters[-1],  # cuts: mean field or events
    )
    Params: ClassVar[type] = DcqcnPlusParams
    presets: ClassVar[Presets] = {}

    def fastest_rate(self, params: Any) -> float:
        p = params
        shortest_timer = np.asarray(p.timer_gain) * np.maximum(np.asarray(p.cnp_interval),
                                                               1 / np.asarray(p.line_rate))
        rates = [1 / np.asarray(p.cnp_interval), np.asarray(p.g) / np.asarray(p.alpha_interval),
                 1 / shortest_timer]
        return float(max(np.max(rate) for rate in rates))

    # DCQCN's rates and alpha (not its counters since a cut), and the mean timer stage
    state_units: ClassVar[dict[str, str]] = {
        **{key: Dcqcn.state_units[key] for key in _RATES_AND_ALPHA}, "stage": "1"}

    def event_rate(self, state: State, signals: Signals, params: DcqcnPlusParams) -> Array:
        """Cuts per second: marked packets arriving, none within the CNP period tau_c of the
        last cut (time since it read from the stage count: S timer periods K)."""
        period = cnp_period(_sharing(signals), params)
        timer = _timer(period, state["current_rate"], params)
        p = jnp.clip(signals.mark, 0.0, SURE)
        return cut_hazard(state["stage"] * timer, period, p, signals.acked_rate)

    def _between_cuts(self, state: State, signals: Signals, params: DcqcnPlusParams) -> State:
        """d(state)/dt of one flow between its cuts (`cuts = "events"`): the timer's expiries
        (1/K per second) count the stage S since the last cut; each moves R_C halfway to R_T
        after raising R_T by the step of stage S (none up to F, min(R_C/10, R_l/100) up to 4F,
        min(R_C, (S - 4F) R_l/100) beyond: validation/packet/dcqcn.py)."""
        seen, current = signals.acked_rate, state["current_rate"]
        target, stage = state["target_rate"], state["stage"]
        expiries = 1.0 / _timer(cnp_period(_sharing(signals), params), current, params)
        p = jnp.clip(signals.mark, 0.0, SURE)
        marked = any_marked(params.alpha_interval * seen, p, log_keep_of(p))
        past = jnp.floor(stage) + 1.0 - params.stages  # at the next expiry
        step = jnp.where(past > 3 * params.stages,
                         jnp.minimum(current, (past - 3 * params.stages) * params.rl / 100),
                         jnp.where(past > 0, jnp.minimum(current / 10, params.rl / 100), 0.0))
        return {
            "alpha": params.g / params.alpha_interval * (marked - state["alpha"]),
            "target_rate": step * expiries,
            "current_rate": (target - current) * HALVING * expiries,
            "stage": expiries,
        }

    def derivative(self, state: State, signals: Signals, params: DcqcnPlusParams) -> State:
        if self.has_events:
            return self._between_cuts(state, signals, params)
        seen = signals.acked_rate  # R_C*
        current, target, alpha = state["current_rate"], state["target_rate"], state["alpha"]
        stage = jnp.maximum(state["stage"], TINY)
        cuts, marked, expiries = feedback(seen, signals.mark, current, _sharing(signals), params)
        step = increase_step(-jnp.log1p(1.0 / stage), current, params.stages, params.rl)
        return {
            "alpha": params.g / params.alpha_interval * (marked - alpha),
            "target_rate": -(target - current) * cuts + expiries * step,
            "current_rate": -current * alpha / 2 * cuts + (target - current) / 2 * expiries,
            "stage": expiries - cuts * stage,
        }

