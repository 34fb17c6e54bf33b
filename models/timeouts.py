"""Retransmission timeouts of window-based TCP in the fluid model.

Model
-----
A loss is repaired by fast retransmit only when at least three duplicate ACKs (SACK blocks)
come back after it and the retransmission itself arrives. Otherwise the flow stalls: it sends
nothing until its retransmission timer fires, RTO after the loss, and then restarts from the
loss window of one segment in slow start with ssthresh = max(W/2, min_cwnd) (RFC 5681 §3.1,
RFC 6298 §5; the floor min_cwnd holds reductions, not the loss window). This module gives the
rate at which a flow's losses are of that kind and the RTO estimator; the solver
(`solvers.dde`) holds each flow's timeout state.

Each flow is a stochastic hybrid system (Hespanha, Bohacek, Obraczka and Lee 2001; Bohacek,
Hespanha, Lee and Obraczka 2003 model timeouts as a mode of the fluid TCP flow): between
timeouts its window follows the fluid model; a timeout strikes as the first event of a Poisson
process of intensity

    h(t) = lambda(p) Q(m, p),   lambda(p) = min(x(t) p(t), 1/R)

lambda being the loss events (windows with a loss) per second of the mean-field model
(`models.window.event_rate`) among the packets the flow sends now (x its rate, p the fraction
its path drops now: the timer runs from the loss, not from the moment the sender would learn
of it), and Q the probability that a loss event cannot be repaired by
fast retransmit (Padhye, Firoiu, Towsley and Kurose 1998 give Q = min(1, 3/W) for Reno with
correlated losses; with SACK and limited transmit, as the packet-level reference and Linux):

    Q(m, p) = 1 - P[Binomial(m, 1 - p) >= 3],   m = min(W + 1, u)

m is the number of segments that can follow the lost one: the rest of the window and the two
that limited transmit (RFC 3042) sends on the first two duplicate ACKs, but no more than the u =
r - W segments of the flow's block not yet sent (r the segments of the block not yet delivered):
a loss among a block's last segments (the "block tail" timeouts of incast, Zhang, Ren and Lin
2011) has too few followers. Once u reaches 0 the hazard is 0: a fluid flow sends until its last
byte arrives, a round trip of sending that stands for no real packet. The binomial tail is
written with real-valued m, which interpolates between whole windows. A lost retransmission also
needs the timer, but the retransmission leaves a round trip after the loss, from a window
already cut, and the loss fraction p of the moment of the loss says little about its fate
(counted at p, it timed out half the flows of a slow-start overshoot that SACK repairs at packet
level): it is left out.

With Linux's loss recovery (`[transport] recovery = "linux"`: RACK-TLP, RFC 8985), a loss is
known as soon as any segment sent after it arrives, and where none of the m does, the tail loss
probe sent 2 srtt + 2 ms later shows it: the timer is needed only if all m and the probe are
lost, Q = p^(m + 1). A lost retransmission is then found the same way, which the fluid model's
leaving it out now matches. The probe's wait is not a stall of the fluid flow.

The solver realises the Poisson process by the time change: each flow draws a threshold
E ~ Exp(1) (from `[run] seed`), accumulates the integral of h while it sends, and times out
when the integral reaches E. Flows therefore time out at different moments, as packet-level
flows do, and a fluid flow in timeout sends nothing.

Flows that nothing but their timeouts tells apart (an incast's flows from one host) form a
class whose state is a distribution: the fraction of it stalled, and the windows of the flows
that have restarted. The solver carries that distribution as a sample (the particle form of the
mean field, as in Monte Carlo methods for McKean-Vlasov equations): a class of n flows runs as
K = min(n, `[run] representatives`) controllers, dealt the flows round-robin, each counted as
its share and drawing its own thresholds. The class's stalled fraction is then the mean of K
Bernoulli draws, unbiased, with a standard deviation sqrt(s (1 - s) / K) per class where every
flow runs, sqrt(s (1 - s) / n), and K = n is the exact per-flow model. At the default K = 32 (a
2,000-flow incast from 8 hosts runs 256 controllers, not 2,000) the Jain index and stalled
fraction over four seeds agree with every flow run on its own within their seed-to-seed spread
(2,000 flows: stalled 0.328 +- 0.012 against 0.324 +- 0.004).

RTO (RFC 6298, as the packet-level reference): RTO = max(rto_min, srtt + 4 rttvar), srtt and
rttvar smoothed from the flow's round trip once per round trip (gains 1/8 and 1/4), starting
from the base round trip (srtt = R0, rttvar = R0/2, the sample a handshake gives). Consecutive
timeouts back off (RFC 6298 §5.5): a timeout that fires within one srtt of the end of the
previous one's wait, before the segment resent on resuming could be acknowledged (so it was
lost), waits twice as long as that one did (at most 60 s) and keeps ssthresh (Linux's
tcp_enter_loss does not reduce it again in the loss state, nor does the packet-level
reference); a later one starts again from one RTO, as an acknowledgment of new data resets
the backoff.

Parameters
----------
`[transport] rto_min` (default 200 ms, Linux; 1 ms and 200 us are datacenter settings).
`[run] representatives` (default 32 per class; 0 runs every flow on its own).

Scope and limitations
---------------------
Window-based controls only (a rate-based DCQCN sender takes no notice of losses in the fluid
model). Not modelled: lost retransmissions (above, but for the one resent on resuming after a
timeout, which the backoff counts), the tail loss probe's wait (`recovery = "linux"`), spurious
timeouts, and go-back-N retransmission of data that had arrived (the fluid flow resends only
what was lost). Losses within a fluid flow are independent given p; a drop-tail burst that
takes a whole window is represented through m and p, not as a burst (with Linux's recovery,
where a burst takes a window and its probe together, the fluid model times out far fewer flows
than the packet level: 2,000 flows in `incast_range_fluid_packet`).

Validation
----------
tests/test_timeouts.py: the hazard against the binomial count of duplicate ACKs (and, with
Linux's recovery, against the loss patterns of the followers and the probe), a flow in
timeout sends nothing, no timeouts with a buffer of one BDP per flow (both engines), goodput
never above throughput, representatives time out as often as every flow run on its own;
tests/test_rounds.py: the restart after an idle RTO; the validation
case `incast_goodput`: the classic incast against the packet-level reference and the published
setup (the fluid model times out more than the packet level after the collapse, reported).

References
----------
J. Padhye, V. Firoiu, D. Towsley, J. Kurose, "Modeling TCP throughput: a simple model and its
empirical validation", SIGCOMM 1998. J. Hespanha, S. Bohacek, K. Obraczka, J. Lee, "Hybrid
modeling of TCP congestion control", HSCC 2001. J. Zhang, F. Ren, C. Lin, "Modeling and
understanding TCP incast in data center networks", INFOCOM 2011. RFC 3042, RFC 5681, RFC 6298.
"""

from __future__ import annotations

import jax.numpy as jnp

from pathflow.models.base import Array, State
from pathflow.models.window import event_rate

__all__ = ["DRAWS", "DUPLICATE_ACKS", "LOSS_WINDOW", "RTO_MAX", "backed_off", "consecutive",
           "hazard", "repairable", "restart", "restart_after_idle", "rto", "smoothed_rtt"]

DUPLICATE_ACKS = 3  # RFC 5681's DupThresh
LOSS_WINDOW = 1.0  # packets: the window after a timeout (RFC 5681 §3.1)
DRAWS = 64  # thresholds drawn per flow; a flow with more timeouts reuses them in turn
RTO_MAX = 60.0  # s: RFC 6298 (2.5)


def repairable(followers: Array, loss: Array) -> Array:
    """P[Binomial(m, 1 - p) >= 3]: at least three of the m segments after a lost one arrive
    (0 for m < 3), m real-valued."""
    m = jnp.maximum(followers, float(DUPLICATE_ACKS))
    p = jnp.clip(loss, 1e-12, 1.0)
    q = 1.0 - p
    base = p ** (m - 2.0)  # one power for the three terms
    fewer = base * (p * p + m * q * p + 0.5 * m * (m - 1.0) * q * q)
    return jnp.where(followers >= DUPLICATE_ACKS, jnp.clip(1.0 - fewer, 0.0, 1.0), 0.0)


def hazard(cwnd: Array, loss: Array, rate: Array, rtt: Array, unsent: Array,
           probe: Array | float = 0.0) -> Array:
    """Timeouts per second of a flow sending (see the module docstring): `cwnd` in packets,
    `loss` the fraction of its packets dropped, `rate` its sending rate (packets/s), `unsent`
    the segments of its block not yet sent (inf for a flow that never ends); `probe` 1 where
    RACK-TLP finds losses (`[transport] recovery = "linux"`), 0 where three SACKed segments
    must."""
    # the rest of the window (W - 1) and limited transmit's two, no more than the block has left
    followers = jnp.minimum(cwnd + 1.0, jnp.maximum(unsent, 0.0))
    # RACK-TLP: unrepaired only if every follower and the tail loss probe are lost too
    unrepaired = jnp.where(probe > 0, jnp.clip(loss, 0.0, 1.0) ** (followers + 1.0),
                           1.0 - repairable(followers, loss))
    # once the block is all sent, what a fluid flow sends until its last byte arrives stands
    # for nothing real (a fluid flow stops when its bytes are delivered, not sent)
    real = unsent > 0
    return jnp.where(real, event_rate(loss, rate, rtt) * unrepaired, 0.0)


def smoothed_rtt(srtt: Array, rttvar: Array, rtt: Array, dt: Array) -> tuple[Array, Array]:
    """RFC 6298's estimator, one sample per round trip, as a continuous filter over `dt`."""
    per_rtt = dt / rtt
    rttvar = rttvar + per_rtt * 0.25 * (jnp.abs(srtt - rtt) - rttvar)
    return srtt + per_rtt * 0.125 * (rtt - srtt), rttvar


def rto(srtt: Array, rttvar: Array, rto_min: Array) -> Array:
    """max(rto_min, srtt + 4 rttvar), at most 60 s (RFC 6298)."""
    return jnp.clip(srtt + 4.0 * rttvar, rto_min, RTO_MAX)


def restart_after_idle(state: State, initial: Array) -> State:
    """A window-based state that sat idle for an RTO and sends again: min(W, initial window)
    in slow start, ssthresh at least 3/4 W (RFC 2861, RFC 5681 §4.1, Linux's
    tcp_slow_start_after_idle; as the packet-level reference)."""
    cwnd = state["cwnd"]
    return {**state, "cwnd": jnp.minimum(cwnd, initial),
            "ssthresh": jnp.maximum(state["ssthresh"], 0.75 * cwnd),
            "slow_start": jnp.ones_like(cwnd)}


def consecutive(since_resumed: Array, srtt: Array) -> Array:
    """Whether a timeout `since_resumed` s after the last one's wait ended follows it: within a
    round trip, before the retransmission sent on resuming could be acknowledged (it was lost),
    as RFC 6298 §5.5 backs off and an acknowledgment of new data resets."""
    return since_resumed <= srtt


def backed_off(rto: Array, backoff: Array) -> Array:
    """The wait of a timeout after `backoff` consecutive ones: RTO doubled as often, at most 60 s
    (RFC 6298 §5.5 and (2.5))."""
    return jnp.minimum(rto * 2.0 ** backoff, RTO_MAX)


def restart(state: State, min_cwnd: Array, again: Array | bool = False) -> State:
    """A window-based state after its timeout: ssthresh = max(W/2, min_cwnd) (held where the
    timeout follows another, `again`: see the module docstring), the loss window of one
    segment (at most min_cwnd), slow start, no reduction pending."""
    cwnd = state["cwnd"]
    zeros = jnp.zeros_like(cwnd)
    halved = jnp.maximum(0.5 * cwnd, min_cwnd)
    return {**state, "ssthresh": jnp.where(again, state["ssthresh"], halved),
            "cwnd": jnp.minimum(LOSS_WINDOW, min_cwnd),
            "slow_start": jnp.ones_like(cwnd), "cwr": zeros, "credit": zeros}
