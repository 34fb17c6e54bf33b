"""Linux's loss recovery (`[transport] recovery = "linux"`): RACK-TLP loss detection (RFC
8985, Linux's default since 4.18) and proportional rate reduction in recovery (RFC 6937).

Model
-----
- RACK (time-based loss detection, with SACK): every segment newly delivered (cumulatively
  acknowledged or SACKed) may advance RACK.xmit_ts, the send time of the most recently sent
  segment known delivered, and RACK.rtt, its round trip (a retransmission whose round trip is
  below the least one seen may be the original's delivery and is skipped, RFC 8985 6.2 step 2).
  An unSACKed segment is lost once it was sent before RACK.xmit_ts and RACK.rtt + reo_wnd have
  passed since it was sent. reo_wnd is 0 in recovery, after a timeout, or once DupThresh
  segments are SACKed, unless reordering has been seen (a segment never retransmitted delivered
  after a later one); otherwise min(min_rtt / 4, srtt). A segment sent before RACK.xmit_ts but
  not yet due arms the reordering timer. Since a retransmission's send time is its own, a lost
  retransmission is found as any other loss: once something sent after it is delivered.
  Recovery starts when RACK marks a segment lost (Linux's tcp_time_to_recover with RACK: the
  duplicate-ACK count is no longer asked), and its pipe counts a lost segment 0 and any other
  unSACKed one 1 (Linux's packets_in_flight).
- PRR: in recovery the window follows RFC 6937 as in CWR (`sender._prr`): cwnd = pipe + the
  segments PRR releases for those each ACK delivers (acknowledged or SACKed), so that a
  recovery sends about ssthresh / RecoverFS of what is delivered rather than refilling cwnd =
  ssthresh past every segment found lost (Linux's tcp_cwnd_reduction; ns-3's default
  TcpPrrRecovery does the same).
- TLP (tail loss probe): in the Open and CWR states, with no probe outstanding, the sender arms
  a probe timeout PTO = 2 srtt + 2 ms (Linux's TCP_TIMEOUT_MIN, 2 jiffies at HZ = 1000), or
  2 srtt + 200 ms with one segment in flight (the receiver may delay its ACK), never later than
  the head segment's RTO. When it fires the sender sends one new segment beyond its window or,
  with nothing new to send, retransmits its highest segment; the probe's ACK lets RACK find the
  lost tail. One probe per episode (until an ACK passes what was sent when it left).

The sender's one retransmission timer stands for the RTO, the reordering timer or the probe
(`SI_TIMER_KIND`, as Linux's icsk_pending), re-armed after each ACK (`arm`).

Scope and limitations: segment granularity; reo_wnd is not widened by D-SACKs (RFC 8985's
reo_wnd_mult stays 1) and RACK's time-ordering ties are broken by send time only; TLP's own
loss detection (a retransmitted probe that repaired a hole, found by the absence of a D-SACK,
reduces the window in Linux) is left out, so a tail loss repaired by a probe costs no window
reduction; TLP is not sent in recovery (as Linux). ns-3's TCP has no RACK-TLP (it has PRR),
so the cases cross-checked against ns-3 run with the default, `recovery = "rfc6675"`.

Validation: tests/test_packet_rack.py (blocks whose tail a slow-start overshoot took: repaired
within a probe timeout and a few round trips, each lost segment resent once, where the
duplicate-ACK threshold waits for the RTO) and the validation case incast_range_fluid_packet
(the 10 Gb/s DCTCP incast from 80 to 2,000 flows with either recovery; lost retransmissions
are exercised there, not tested on their own).

References: RFC 8985 (RACK-TLP); Linux net/ipv4/tcp_recovery.c (tcp_rack_detect_loss,
tcp_rack_reo_timeout) and tcp_output.c (tcp_schedule_loss_probe, tcp_send_loss_probe).
"""

from __future__ import annotations

import math

from pathflow.validation.packet.events import arm_timer
from pathflow.validation.packet.jit import kernel, outlined
from pathflow.validation.packet.layout import (
    CA_CWR,
    CA_LOSS,
    CA_OPEN,
    CA_RECOVERY,
    RUNNING,
    SF_MIN_RTT,
    SF_RACK_CUTOFF,
    SF_RACK_RTT,
    SF_RACK_WAIT,
    SF_RACK_XMIT,
    SF_RTO,
    SF_SRTT,
    SI_CA,
    SI_CONN_FIRST,
    SI_CONN_UNASSIGNED,
    SI_HIGH,
    SI_NXT,
    SI_PHASE,
    SI_PROBE,
    SI_RACK,
    SI_RACK_FACK,
    SI_RACK_REORDER,
    SI_REORDERING,
    SI_RTX,
    SI_SACKED,
    SI_SEGMENTS,
    SI_TIMER_KIND,
    SI_TLP_HIGH,
    SI_UNA,
    TK_PROBE,
    TK_REORDER,
    TK_RTO,
    TM_DEADLINE,
)

__all__ = ["arm", "delivered", "detect", "enabled", "lost", "on_probe_timer", "sent"]

TLP_MIN = 2e-3  # s: Linux's TCP_TIMEOUT_MIN (2 jiffies at HZ = 1000), added to 2 srtt
TLP_DELAYED_ACK = 0.2  # s: Linux's TCP_RTO_MIN, added instead with one segment in flight
TIE = 1e-12  # s: "sent before" is strict; send times closer than this are one instant


@kernel
def enabled(sim, s: int) -> bool:
    """Whether sender s detects losses by RACK-TLP (`[transport] recovery = "linux"`, with
    SACK only)."""
    return sim.senders.i[s, SI_RACK] != 0


@kernel
def delivered(sim, s: int, seq: int, now: float) -> None:
    """Segment `seq` was newly delivered (cumulatively acknowledged or SACKed) at `now`."""
    snd = sim.senders
    f, i = snd.f, snd.i
    slot = seq & (sim.cfg.ring - 1)
    sent = snd.sent_at[s, slot]
    rtt = now - sent
    if snd.resent[s, slot]:
        if rtt < f[s, SF_MIN_RTT]:
            return  # perhaps the original's delivery (RFC 8985 6.2 step 2)
    else:
        f[s, SF_MIN_RTT] = min(f[s, SF_MIN_RTT], rtt)
        if seq < i[s, SI_RACK_FACK]:
            i[s, SI_RACK_REORDER] = 1  # delivered after a segment above it
    i[s, SI_RACK_FACK] = max(i[s, SI_RACK_FACK], seq + 1)
    if sent > f[s, SF_RACK_XMIT]:
        f[s, SF_RACK_XMIT] = sent
        f[s, SF_RACK_RTT] = rtt


@kernel
def _reordering_window(sim, s: int) -> float:
    f, i = sim.senders.f, sim.senders.i
    if i[s, SI_RACK_REORDER] == 0:
        if i[s, SI_CA] == CA_RECOVERY or i[s, SI_CA] == CA_LOSS:
            return 0.0
        if i[s, SI_SACKED] >= i[s, SI_REORDERING]:
            return 0.0
    return min(f[s, SF_MIN_RTT] / 4.0, f[s, SF_SRTT])


@outlined  # once per ACK while the scoreboard has holes
def detect(sim, s: int, now: float) -> bool:
    """RACK's loss detection at `now`: sets the cut-off below which an unSACKed segment's send
    time makes it lost (`lost`) and when the next one falls due (`SF_RACK_WAIT`); returns
    whether any segment is lost."""
    snd = sim.senders
    f, i, sacked, sent_at, mask = snd.f, snd.i, snd.sacked, snd.sent_at, sim.cfg.ring - 1
    xmit = f[s, SF_RACK_XMIT]
    wait = f[s, SF_RACK_RTT] + _reordering_window(sim, s)
    cutoff = min(xmit, now - wait + TIE)
    f[s, SF_RACK_CUTOFF] = cutoff
    due, any_lost = math.inf, False
    for seq in range(i[s, SI_UNA], i[s, SI_HIGH]):
        if sacked[s, seq & mask]:
            continue
        sent = sent_at[s, seq & mask]
        if sent < cutoff:
            any_lost = True
        elif sent < xmit:
            due = min(due, sent + wait)
    f[s, SF_RACK_WAIT] = due
    return any_lost


@kernel
def lost(sim, s: int, seq: int) -> bool:
    """Whether unSACKed segment `seq` is lost by the last `detect` (a retransmission sent since
    is not)."""
    snd = sim.senders
    slot = seq & (sim.cfg.ring - 1)
    return snd.sacked[s, slot] == 0 and snd.sent_at[s, slot] < snd.f[s, SF_RACK_CUTOFF]


@kernel
def _new_data(sim, s: int) -> bool:
    """Whether sender s has a segment never sent that its receive ring has room for."""
    i = sim.senders.i
    nxt = i[s, SI_NXT]
    if nxt - i[s, SI_UNA] >= sim.cfg.ring - 1:
        return False
    return nxt < i[s, SI_SEGMENTS] or i[i[s, SI_CONN_FIRST], SI_CONN_UNASSIGNED] > 0


@kernel
def _probing(sim, s: int) -> bool:
    """Whether a tail loss probe may be armed: data outstanding in the Open or CWR state and no
    probe outstanding."""
    i = sim.senders.i
    ca = i[s, SI_CA]
    return (ca in (CA_OPEN, CA_CWR) and i[s, SI_TLP_HIGH] < 0
            and i[s, SI_HIGH] > i[s, SI_UNA] and i[s, SI_PHASE] == RUNNING)


@outlined  # RACK-TLP only: the event loop's body stays as it was without it
def arm(sim, s: int, now: float) -> None:
    """After an ACK or a send: the reordering timer where a segment awaits its window, else the
    probe where one may be sent, else the RTO as it stands (the caller's)."""
    snd = sim.senders
    f, i = snd.f, snd.i
    if f[s, SF_RACK_WAIT] < math.inf and i[s, SI_HIGH] > i[s, SI_UNA]:
        i[s, SI_TIMER_KIND] = TK_REORDER
        arm_timer(sim, s, max(f[s, SF_RACK_WAIT], now))
        return
    head = snd.sent_at[s, i[s, SI_UNA] & (sim.cfg.ring - 1)] + f[s, SF_RTO]
    if _probing(sim, s):
        flight = i[s, SI_NXT] - i[s, SI_UNA]
        pto = 2.0 * f[s, SF_SRTT] + (TLP_DELAYED_ACK if flight == 1 else TLP_MIN)
        i[s, SI_TIMER_KIND] = TK_PROBE
        arm_timer(sim, s, max(min(now + pto, head), now))
    elif i[s, SI_TIMER_KIND] != TK_RTO:
        i[s, SI_TIMER_KIND] = TK_RTO
        if sim.timers[s, TM_DEADLINE] < math.inf:
            arm_timer(sim, s, max(head, now))


@outlined  # Linux's recovery only, once per segment sent
def sent(sim, s: int, now: float) -> None:
    """Sender s just sent a segment: a probe's episode starts; the probe is armed (Linux arms
    it as it sends) where the RTO stands."""
    i = sim.senders.i
    if i[s, SI_PROBE]:
        i[s, SI_PROBE] = 0
        i[s, SI_TLP_HIGH] = i[s, SI_HIGH]
    if i[s, SI_TIMER_KIND] == TK_RTO:
        arm(sim, s, now)


@outlined  # once per probe timeout
def on_probe_timer(sim, s: int, now: float) -> None:
    """The probe timeout fired: one segment goes out beyond the window (new data, else the
    highest segment sent), then the RTO stands."""
    f, i = sim.senders.f, sim.senders.i
    if _probing(sim, s):
        if not _new_data(sim, s):
            i[s, SI_RTX] = i[s, SI_HIGH] - 1
        i[s, SI_PROBE] = 1
    i[s, SI_TIMER_KIND] = TK_RTO
    arm_timer(sim, s, now + f[s, SF_RTO])
