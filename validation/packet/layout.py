"""The simulator's state: a few numpy arrays per network element, their columns named here.

Everything the event loop touches is preallocated here, so that the numba kernels work on plain
arrays (no Python objects, no allocation per packet). Each element keeps a float and an integer
table with one row per element and named columns, e.g. `sim.senders.f[s, SF_CWND]` or
`sim.links.i[l, LI_BUSY]`:

- `Links`: per directed link its parameters (rate, delay, buffer, AQM, PFC thresholds), its
  egress port (FIFO of packet ids as a linked list, backlog, the packet in service, RED
  average), its PFC state (as the ingress port of the switch it feeds, and as a paused
  transmitter) and the current sample interval's counters.
- `Paths`: link sequences, flattened; each forward path has its reverse (the ACK path).
- `Packets`: a pool of packet records recycled through a free list.
- `Events` (binary heap), `Timers` (lazily cancelled protocol timers).
- `Senders`, `Receivers`: one row per sender (a TCP flow, or one subflow of an MPTCP connection;
  a DCQCN queue pair later) and its receiver. The subflows of one connection are contiguous rows
  `SI_CONN_FIRST:SI_CONN_END`; state of the connection as a whole (its segments not yet given
  to a subflow, its segments delivered) lives in the row of its first subflow.
  Likewise a traffic group's senders are contiguous (`SI_GROUP_FIRST:SI_GROUP_END`), and the
  barrier of its rounds (`[traffic] rounds`) counts in the receiver row of its first sender;
  `Receivers.block_done` holds when each flow's block of each round arrived.
- `Recorder`: the samples.
- `ctl`: global counters and the run status; `Config`: scalars.

Few arrays rather than one per quantity: numba passes every array of the state to every kernel,
and compile time grows with their number. A new congestion controller that needs state adds
columns (a constant and a larger `N_*`), not arrays or arguments.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

# --- codes -----------------------------------------------------------------------------------
# Codes that kernels pass as arguments are numpy scalars: numba would compile a separate copy of
# the callee for every distinct plain-int constant (it types those as literals).
DATA, ACK = np.int64(0), np.int64(1)  # packet kinds
WAITING, RUNNING, DONE = 0, 1, 2  # sender phases: not started, sending, all acknowledged

# congestion states (Linux / ns-3 names)
CA_OPEN = 0
CA_CWR = 1  # reducing the window for an ECN echo (PRR); no growth until RECOVER is passed
CA_RECOVERY = 2  # NewReno fast recovery
CA_LOSS = 3  # after a retransmission timeout: slow start from one segment, go-back-N

# congestion-control codes (cc.py dispatches on them)
CC_RENO, CC_DCTCP, CC_LIA, CC_OLIA, CC_BALIA, CC_UNCOUPLED, CC_DCQCN, CC_DCQCN_PLUS = range(8)
CC_CODES = {"reno": CC_RENO, "dctcp": CC_DCTCP, "lia": CC_LIA, "olia": CC_OLIA,
            "balia": CC_BALIA, "uncoupled": CC_UNCOUPLED, "dcqcn": CC_DCQCN,
            "dcqcn+": CC_DCQCN_PLUS, "dcqcn+static": CC_DCQCN}  # DCQCN with derived values

# window growth per acknowledgement (see cc._grow)
GROW_PER_SEGMENT = 0  # Linux / ns-3 TcpLinuxReno: by the segments acknowledged (ack_ratio = 1)
GROW_PER_ACK = 1  # ns-3 TcpNewReno: once per ACK (ack_ratio = delayed-ACK count)
GROW_FRACTIONAL = 2  # any other ack_ratio b: acknowledged segments / b

SACK_BLOCKS = 3  # SACK blocks per ACK: Linux with timestamps has room for 3 in the option

AQM_NONE, AQM_ECN_STEP, AQM_RED, AQM_DCQCN = 0, 1, 2, 3  # AQM codes (aqm.py)
AQM_CODES = {"droptail": AQM_NONE, "ecn_step": AQM_ECN_STEP, "red": AQM_RED,
             "dcqcn": AQM_DCQCN}

# --- links: parameters (float) ----------------------------------------------------------------
LP_RATE = 0  # bytes/s
LP_DELAY = 1  # s, propagation
LP_BUFFER = 2  # bytes of waiting room (the packet in service not counted)
LP_THRESHOLD = 3  # bytes, ECN-step K
LP_RED_MIN = 4  # bytes (DCQCN: Kmin)
LP_RED_MAX = 5  # bytes (DCQCN: Kmax)
LP_RED_PMAX = 6
LP_RED_WEIGHT = 7  # EWMA weight per arrival
LP_EXTENDED = 8  # DCQCN: 1 where the marking ramp goes on past Kmax
LP_XOFF = 9  # bytes: PFC pauses this link above this ingress occupancy (inf: never)
LP_XON = 10  # bytes: ... and resumes it below this one (shared buffer: the resume offset)
LP_PFC_ALPHA = 11  # shared PFC buffer: dynamic-threshold factor (0: LP_XOFF and LP_XON hold)
LP_PFC_ROOM = 12  # bytes: the pool less the headroom of the switch the link feeds
N_LP = 13
# links: state (float)
LF_BACKLOG = 0  # bytes waiting
LF_TX_START = 1  # s, when the packet in service started
LF_CREDITED = 2  # bytes of the packet in service already counted as departed
LF_RED_AVG = 3  # bytes
LF_IDLE_SINCE = 4  # s, when the port last became empty and idle
LF_ARRIVED = 5  # bytes in the current sample interval
LF_DEPARTED = 6
LF_DROPPED = 7
LF_MARKED = 8
LF_QMIN = 9  # smallest / largest backlog in the interval
LF_QMAX = 10
LF_CNP_NEXT = 11  # s: a host NIC's next CNP may leave from then (DCQCN's CNP capacity)
# PFC: the link as an ingress port of the switch at its far end, and as a paused transmitter
LF_INGRESS = 12  # bytes that came by this link and wait in the far switch's egress FIFOs
LF_PAUSED_SINCE = 13  # s: start of the pause time not yet in LF_PAUSE_TIME (while paused)
LF_PAUSE_TIME = 14  # s paused in the current sample interval
LF_FLOWS_IN = 15  # a host NIC: DCQCN+ flows sending to its host now (their CNP period)
LF_SWITCH_HELD = 16  # shared PFC buffer, in the row of a switch's LI_PFC_GROUP link: its bytes
N_LF = 17
# links: state (int)
LI_NIC = 0  # 1 for a host's own egress port (never drops, pulls from its senders)
LI_AQM = 1  # AQM_* code
LI_HEAD = 2  # first waiting packet or -1
LI_TAIL = 3
LI_BUSY = 4
LI_IN_SERVICE = 5  # packet id or -1
LI_RR = 6  # round-robin position among the NIC's senders
LI_PAUSED = 7  # PFC, the transmitter's view: 1 while a PAUSE frame holds it
LI_PFC_SENT = 8  # PFC, the far switch's view: 1 from sending a PAUSE to sending the resume
LI_PFC_GROUP = 9  # the first link feeding the same switch (its row counts the switch's bytes)
N_LI = 10

# --- paths (int) -------------------------------------------------------------------------------
PI_START = 0  # offset into Paths.links
PI_LENGTH = 1
PI_REVERSE = 2  # path id of the reverse path
N_PI = 3

# --- packets (int; sizes in Packets.size) ------------------------------------------------------
PK_KIND = 0  # DATA / ACK
PK_OWNER = 1  # sender id
PK_SEQ = 2  # data: segment number; ACK: cumulative ACK (next segment expected)
PK_PATH = 3
PK_HOP = 4  # index in the path of the link it is on / queued for
PK_ECT = 5  # ECN-capable transport
PK_CE = 6  # congestion experienced
PK_ECE = 7  # the ACK echoes congestion
PK_NEXT = 8  # FIFO / free-list link
PK_DSACK = 9  # ACK: 1 + the duplicate segment it reports (RFC 2883 D-SACK), 0 if none
PK_SACK = 10  # ACK: SACK blocks [start, end) of segments, at PK_SACK + 2 k and + 2 k + 1 for
#               k < SACK_BLOCKS, most recent first (RFC 2018); end 0: no block
N_PK = PK_SACK + 2 * SACK_BLOCKS

# --- event heap (int columns; times in Events.time) --------------------------------------------
HE_ORDER = 0  # insertion counter: equal times pop first-in first-out
HE_KIND = 1
HE_OBJ = 2
N_HE = 3
EV_START = np.int64(0)  # obj: sender
EV_TX_DONE = np.int64(1)  # obj: link (its packet in service is fully serialised)
EV_ARRIVE = np.int64(2)  # obj: packet (its last bit reaches the far end of its current link)
EV_TIMER = np.int64(3)  # obj: timer id (see Sim.timers)
EV_WAKE = np.int64(4)  # obj: sender (a paced sender may emit again)
EV_PFC = np.int64(5)  # obj: 2 x link + 1 (a PAUSE reaches the link's transmitter), + 0 (resume)
EV_ROUND = np.int64(6)  # obj: sender (its group's barrier released its next round, `rounds`)

# what a sender's retransmission timer stands for (`SI_TIMER_KIND`, Linux's icsk_pending)
TK_RTO = 0  # the retransmission timeout (RFC 6298)
TK_REORDER = 1  # RACK's reordering window of a segment sent before a delivered one
TK_PROBE = 2  # TLP's probe timeout

# --- timers (float) ----------------------------------------------------------------------------
TM_DEADLINE = 0  # when the timer should fire (inf: off)
TM_PENDING = 1  # time of the one heap event standing for it (inf: none)
N_TM = 2

# --- senders: float ----------------------------------------------------------------------------
SF_CWND = 0  # segments (float: fractional growth accumulates here)
SF_SSTHRESH = 1  # segments (inf until the first reduction)
SF_ALPHA = 2  # DCTCP congestion estimate
SF_ACKED = 3  # DCTCP: segments acknowledged in the current observation window
SF_ACKED_ECE = 4  # DCTCP: ... of which carried an ECN echo
SF_SRTT = 5  # s
SF_RTTVAR = 6  # s
SF_RTO = 7  # s, current retransmission timeout (backed off)
SF_NEXT_SEND = 8  # s, earliest time the sender may emit (pacing; 0 for window-based senders)
SF_BASE_RTT = 9  # s, base RTT of its best path (the "handshake" RTT sample)
SF_PRR_DELIVERED = 10  # segments delivered since the window reduction began (RFC 6937)
SF_PRR_OUT = 11  # segments sent since then
SF_RECOVER_FS = 12  # flight size when it began
SF_START = 13  # s
SF_LAST_BYTES = 14  # wire bytes of its last segment (mss until it takes a connection's last)
SF_SENT_BYTES = 15  # cumulative wire bytes of data sent
SF_RTT_SUM = 16  # RTT samples in the current sample interval
SF_RTT_COUNT = 17
SF_RTT_LAST = 18
SF_PRIOR_CWND = 19  # cwnd and ssthresh before the last fast retransmit (undone if spurious)
SF_PRIOR_SSTHRESH = 20
SF_DROPPED = 21  # packets of this sender (data and its ACKs) dropped in the network
SF_EPISODE_START = 22  # s, when the last fast recovery began
SF_CONN_LAST_BYTES = 23  # wire bytes of the last segment of its (finite) connection
# DCQCN's reaction point (cc.py): parameters (bytes, bytes/s, s) and state
SF_LINE_RATE = 24  # bytes/s
SF_MIN_RATE = 25
SF_RAI = 26  # bytes/s: additive increase of the target rate
SF_BYTE_COUNTER = 27  # bytes between byte-counter expiries
SF_TIMER = 28  # s: rate-increase timer
SF_CNP_INTERVAL = 29  # s: at most one rate cut per period
SF_ALPHA_INTERVAL = 30  # s: alpha update period
SF_G = 31  # alpha's gain
SF_STAGES = 32  # F: fast-recovery stages
SF_RC = 33  # bytes/s: current rate
SF_RT = 34  # bytes/s: target rate
SF_BYTES_SENT = 35  # bytes since the byte counter last expired (or the last cut)
SF_ALPHA_DUE = 36  # s: next alpha update
SF_INCREASE_DUE = 37  # s: next rate-increase timer expiry
SF_CNP_SEEN = 38  # 1 if a CNP arrived in the current alpha period
SF_LAST_CUT = 39  # s: the last rate cut
SF_CNP_GAP = 40  # s: the receiver's least time between CNPs of this flow (receiver.py)
SF_PACE_FROM = 41  # s: where the gap after the last data packet started (pacing)
SF_PACE_BYTES = 42  # bytes of that packet: NEXT_SEND = PACE_FROM + PACE_BYTES / R_C
SF_CNP_CAPACITY = 43  # CNPs/s its receiver's NIC can send (shared by the flows it receives)
SF_TIMER_GAIN = 44  # DCQCN+: lambda, the timer is lambda x max(CNP period, MTU / R_C)
SF_RL = 45  # DCQCN+: R_l, bytes/s
SF_CNP_PERIOD = 46  # DCQCN+: the CNP period its last CNP carried (s)
SF_TIMEOUTS = 47  # retransmission timeouts so far (count)
SF_RECOVERIES = 48  # fast recoveries (fast retransmits) so far (count)
SF_RESENT_BYTES = 49  # cumulative wire bytes of retransmitted data (in SF_SENT_BYTES too)
SF_RESENT_LOST = 50  # s, SACK recovery: a retransmission sent before this is lost again (sack.py)
SF_LAST_SEND = 51  # s, when it last sent data (idle restart of the window between rounds)
SF_RHAI = 52  # bytes/s: DCQCN's hyper increase of the target rate
# RACK-TLP (`rack.py`)
SF_RACK_XMIT = 53  # s: send time of the last sent segment known delivered (-inf: none yet)
SF_RACK_RTT = 54  # s: that segment's round trip
SF_MIN_RTT = 55  # s: least round trip of a delivered, never retransmitted segment
SF_RACK_CUTOFF = 56  # s: an unSACKed segment last sent before this is lost
SF_RACK_WAIT = 57  # s: when the next segment sent before SF_RACK_XMIT is due (inf: none)
N_SF = 58
# senders: int
SI_PHASE = 0  # WAITING / RUNNING / DONE
SI_CA = 1  # CA_* state
SI_UNA = 2  # first unacknowledged segment
SI_NXT = 3  # next new segment to send (reset to UNA after a timeout: go-back-N)
SI_HIGH = 4  # one past the highest segment ever sent
SI_RECOVER = 5  # end of the current recovery / CWR episode (HIGH when it began)
SI_RECOVER_ACTIVE = 6  # a loss episode is not yet fully acknowledged (RFC 6582 guard)
SI_DUPACKS = 7
SI_RTX = 8  # segment to retransmit next, or -1
SI_ALPHA_SEQ = 9  # DCTCP: update alpha when UNA reaches this (-1: not yet set)
SI_FIRST_PARTIAL = 10  # the next partial ACK is the first of this recovery (restarts the RTO)
SI_BACKOFF = 11  # consecutive timeouts
SI_WAKE_PENDING = 12  # a wake-up event is scheduled (paced senders)
SI_CC = 13  # CC_* code
SI_ECT = 14  # sends ECN-capable packets
SI_FLOW = 15  # the flow (connection) this sender (subflow) belongs to
SI_NIC = 16  # egress link of its host
SI_SEGMENTS = 17  # segments given to this sender so far (all of its flow's for TCP; huge for an
#                   endless flow; an MPTCP subflow of a finite connection takes them one by one)
SI_PATH_FIRST = 18  # its paths: Senders.paths[PATH_FIRST:PATH_END]
SI_PATH_END = 19
SI_SACKED = 20  # duplicate ACKs since UNA last advanced: segments the receiver holds above it
SI_REORDERING = 21  # duplicate ACKs that signal a loss (3; raised when reordering is seen)
SI_UNDO_RETRANS = 22  # retransmissions of the last fast recovery not yet reported duplicate
SI_EPISODE_DUPACKS = 23  # duplicate ACKs in the last fast recovery (reordering extent)
SI_CONN_FIRST = 24  # its connection's senders (subflows): rows CONN_FIRST:CONN_END
SI_CONN_END = 25
SI_CONN_SEGMENTS = 26  # segments in its connection (huge for an endless flow)
SI_CONN_UNASSIGNED = 27  # first subflow's row: segments no subflow has taken yet
SI_OLIA_LOSS1 = 28  # OLIA: UNA at the loss event before last (Linux's mptcp_loss1)
SI_OLIA_LOSS2 = 29  # OLIA: UNA at the last loss event (mptcp_loss2; UNA is mptcp_loss3)
SI_STAGE_TIMER = 30  # DCQCN: timer expiries since the last cut
SI_STAGE_BYTES = 31  # DCQCN: byte-counter expiries since the last cut
SI_SACK = 32  # 1: SACK (RFC 2018) with RFC 6675 loss recovery; 0: NewReno (sack.py)
SI_PIPE = 33  # SACK recovery: RFC 6675's pipe, segments (recomputed on each ACK, +1 per send)
SI_NEXT_LOST = 34  # SACK recovery: lowest lost segment not yet retransmitted (-1: none)
SI_LOST_EDGE = 35  # SACK recovery: unSACKed segments below this are lost (RFC 6675's IsLost;
#                  with recovery = "linux" one past the highest segment RACK found lost)
# barrier-synchronised rounds (`[traffic] rounds`, `rounds.py`); a flow without rounds has 1
SI_ROUNDS = 36  # rounds of its flow
SI_ROUND = 37  # the round it may send (released so far - 1)
SI_BLOCK = 38  # segments per round (its block; 0: no rounds, the last segment is SEGMENTS - 1)
SI_GROUP_FIRST = 39  # the senders of its traffic group: rows GROUP_FIRST:GROUP_END
SI_GROUP_END = 40
SI_GROUP_FLOWS = 41  # connections in its traffic group (the barrier's count)
SI_RACK = 42  # 1: RACK-TLP loss detection (RFC 8985) with SACK; 0: DupThresh (`rack.py`)
SI_RACK_REORDER = 43  # RACK: reordering seen (a never retransmitted segment SACKed late)
SI_RACK_FACK = 44  # RACK: one past the highest segment known delivered
SI_TIMER_KIND = 45  # what its retransmission timer stands for now: TK_RTO / TK_REORDER / TK_PROBE
SI_TLP_HIGH = 46  # TLP: HIGH after the outstanding probe (-1: no probe outstanding)
SI_PROBE = 47  # TLP: 1 while a probe may be sent beyond the window
N_SI = 48

# --- receivers ---------------------------------------------------------------------------------
RI_NXT = 0  # next in-order segment expected
RI_PENDING = 1  # segments received but not yet acknowledged (delayed ACK)
RI_CE = 2  # DCTCP CE state: CE bit of the last data packet
RI_PATH = 3  # path of the last data packet (its reverse carries the ACK)
RI_OOO = 4  # out-of-order segments held
RI_CONN_DELIVERED = 5  # first subflow's row: segments of its connection delivered in order
RI_ROUND_DONE = 6  # the group's first row: its connections that have the current round's block
RI_SACK = 7  # SACK blocks held, as PK_SACK: [start, end) at RI_SACK + 2 k, most recent first
N_RI = RI_SACK + 2 * SACK_BLOCKS
RF_DELIVERED = 0  # bytes delivered in order to the application
RF_COMPLETION = 1  # s, when the connection's last byte was delivered (inf until then)
RF_LAST_CNP = 2  # s, when the notification point last sent a CNP (DCQCN; -inf: never)
RF_CNP_PERIOD = 3  # s, DCQCN+: the CNP period the notification point last sent
N_RF = 4

# --- recorder columns ------------------------------------------------------------------------
RL_QUEUE = 0  # bytes at the sample instant
RL_QUEUE_MIN = 1
RL_QUEUE_MAX = 2
RL_ARRIVAL = 3  # bytes/s over the interval
RL_DEPARTURE = 4
RL_DROP = 5
RL_MARK = 6
RL_PAUSE = 7  # fraction of the interval the link's transmitter was paused (PFC)
N_RL = 8
RS_CWND = 0  # bytes
RS_SSTHRESH = 1  # bytes
RS_RTT = 2  # s
RS_ALPHA = 3
RS_DELIVERED = 4  # cumulative bytes
RS_SENT = 5  # cumulative bytes
RS_DROPPED = 6  # cumulative packets
RS_SINCE_LOSS = 7  # OLIA: segments acknowledged since the last loss event
RS_LAST_INTERVAL = 8  # OLIA: segments acknowledged between the two loss events before
RS_RC = 9  # DCQCN: current rate, bytes/s
RS_RT = 10  # DCQCN: target rate, bytes/s
RS_TIMEOUTS = 11  # cumulative count
RS_RECOVERIES = 12  # cumulative count
RS_RESENT = 13  # cumulative bytes
N_RS = 14

# --- global counters and status (Sim.ctl) ------------------------------------------------------
CTL_HEAP_SIZE = 0
CTL_ORDER = 1  # next event insertion number
CTL_FREE = 2  # head of the packet free list
CTL_STATUS = 3
CTL_EVENTS = 4  # events processed
CTL_HOPS = 5  # packets fully serialised onto a link (packet-hops)
CTL_DROPS = 6
N_CTL = 7
STATUS_OK = 0
STATUS_OUT_OF_EVENTS = 1
STATUS_OUT_OF_PACKETS = 2


class Links(NamedTuple):
    param: np.ndarray  # (L, N_LP)
    f: np.ndarray  # (L, N_LF)
    i: np.ndarray  # (L, N_LI)
    nic_first: np.ndarray  # (L+1,) CSR into nic_senders: the senders a NIC pulls from
    nic_senders: np.ndarray


class Paths(NamedTuple):
    i: np.ndarray  # (P, N_PI)
    links: np.ndarray  # flattened link indices


class Packets(NamedTuple):
    i: np.ndarray  # (N, N_PK)
    size: np.ndarray  # (N,) bytes on the wire (link-layer framing not counted)


class Events(NamedTuple):
    time: np.ndarray  # (E,)
    i: np.ndarray  # (E, N_HE)


class Senders(NamedTuple):
    f: np.ndarray  # (S, N_SF)
    i: np.ndarray  # (S, N_SI)
    paths: np.ndarray  # flattened path ids of every sender
    cumweight: np.ndarray  # cumulative split weights (spraying), 1 at each sender's last path
    path_sent: np.ndarray  # bytes of data sent on each path (retransmissions included)
    sent_at: np.ndarray  # (S, ring) s, last transmission of the segment in this slot
    resent: np.ndarray  # (S, ring) int8: that transmission was a retransmission (Karn)
    sacked: np.ndarray  # (S, ring) int8: the segment in this slot is SACKed (the scoreboard)


class Receivers(NamedTuple):
    i: np.ndarray  # (S, N_RI)
    f: np.ndarray  # (S, N_RF)
    have: np.ndarray  # (S, ring) int8: out-of-order segment held
    block_done: np.ndarray  # (F, largest rounds) s: flow f's block of round r arrived (inf: not)


class Recorder(NamedTuple):
    links: np.ndarray  # (R, L, N_RL)
    senders: np.ndarray  # (R, S, N_RS)


class Config(NamedTuple):
    mss: float  # bytes on the wire of a full data packet
    ack_bytes: float
    header_bytes: float  # link-layer framing per packet: serialisation time only
    host_jitter: float  # NIC gap before a data packet, uniform in [0, this x its tx time)
    min_rto: float  # s: `[transport] rto_min`
    max_rto: float
    delack_timeout: float  # s: `[transport] delayed_ack_timeout`
    delayed_ack: int
    growth: int  # GROW_* mode
    ack_ratio: float
    g: float
    init_cwnd: float  # segments
    min_cwnd: float
    ssthresh: float
    ring: int  # power of two: segment slots per sender (also its largest window)
    interval: float  # sample interval, s
    records: int
    seed: int
    pfc: bool  # some link may pause: count ingress bytes (`links`; skipped without PFC, a
    #            per-packet cost the other runs need not pay)


class Sim(NamedTuple):
    links: Links
    paths: Paths
    packets: Packets
    events: Events
    timers: np.ndarray  # (T, N_TM): [0, S) RTO, [S, 2S) delayed ACK, [2S, 3S) cc timer
    senders: Senders
    receivers: Receivers
    recorder: Recorder
    ctl: np.ndarray  # (N_CTL,)
    cfg: Config


def packet_pool(size: int) -> Packets:
    """A pool of `size` packet records, all on the free list (`ctl[CTL_FREE]` = 0)."""
    table = np.zeros((size, N_PK), np.int64)
    table[:, PK_NEXT] = np.arange(1, size + 1)
    table[-1, PK_NEXT] = -1
    return Packets(i=table, size=np.zeros(size))


def event_heap(size: int) -> Events:
    return Events(time=np.zeros(size), i=np.zeros((size, N_HE), np.int64))
