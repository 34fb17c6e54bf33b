"""Packet-level ground truth from ns-3 (3.44) for star and dumbbell scenarios.

What it models
--------------
* ``star``: senders ``h0..h{N-1}`` -> switch ``s0`` -> receiver ``r0``; bottleneck ``s0->r0``.
* ``dumbbell``: ``h0..h{N-1}`` -> ``s0`` -> ``s1`` -> ``r0..r{N-1}``; bottleneck ``s0->s1``.
* Every link is a full-duplex point-to-point link with the same rate and one-way delay.
* Long-lived TCP flows (``BulkSendApplication`` -> ``PacketSink``), ``ns3::TcpNewReno``
  (no ECN) or ``ns3::TcpDctcp`` (ECN), with SACK and timestamps (MSS = packet - 52 B),
  PRR recovery (ns-3 default), delayed ACKs, and socket buffers large enough never to limit.
* Every switch egress port carries the configured queue disc (FIFO, a step marker built from
  ``RedQueueDisc`` with ``MinTh = MaxTh = K`` and ``QW = 1``, or RED); host NICs get an
  effectively unlimited FIFO. Device TX queues hold one packet, so queueing (and the AQM
  decision) happens in the queue disc.

Observables (sampled every ``sample_interval_s`` from C++, no per-packet Python callbacks):
queue backlog per egress port, per-port departure / drop / mark rates, per-flow goodput,
congestion window, an RTT estimate and, for DCTCP, alpha. All byte counts are IP bytes
(IP + TCP headers + payload; the 2-byte PPP header is excluded); ``flow_rate`` is goodput
(application payload).
With ``pcap_dir`` set, ns-3 also writes a pcap of the bottleneck link's sending device
(``Ns3Config.pcap_path``; both directions, see there), which
``pathflow.validation.traces.load_pcap`` turns into the same rate variables.

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
  nominal p(avg). Check it with ``marks / link_departure``.
* ns-3 takes TCP RTT samples from the timestamp option, which has 1 ms resolution, so its
  own RTT estimate is useless at data-center RTTs. ``rtt`` here is measured separately:
  one probe segment per round trip, from the sender's transmission of new data to the first
  ACK or SACK covering it (Karn: a probe whose segment is retransmitted is discarded). It
  includes any delayed-ACK wait.
* No pacing, no TSQ, no TSO/GRO: hosts emit window-sized bursts at line rate. Because access
  links run at the bottleneck rate, a window larger than BDP + switch buffer parks its excess
  in the sender's own NIC queue (visible as ``hX->s0`` in ``queue``), unseen by any AQM.
* Deviation from ns-3 defaults: the delayed-ACK timeout is min(40 ms, min_rto_s / 5) (Linux's
  minimum is 40 ms). ns-3's 200 ms equals a 200 ms MinRto and livelocks a flow after an RTO
  (one segment per RTO, forever).
* ``cc="reno"`` with ``aqm="ecn_step"`` is a drop-tail queue of K packets; with two Reno
  flows it can lock one flow out completely (its retransmissions always find the queue full).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
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

__all__ = ["Ns3Config", "ns3_available", "run_ns3"]

ENGINE = "ns-3 3.44"
_MODULE_NAME = "pathflow.validation.ns3_runner"
_TCP_IP_HEADER_BYTES = 52  # 20 IP + 20 TCP + 12 timestamp option (10 B padded to 12)
_ACK_BYTES = _TCP_IP_HEADER_BYTES
_PPP_HEADER_BYTES = 2
_EXIT_NO_NS3 = 3


@dataclass(frozen=True)
class Ns3Config:
    """One ns-3 scenario. SI units (bits/s, seconds), queue sizes in packets."""

    topology: Literal["star", "dumbbell"]
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

    def __post_init__(self) -> None:
        if self.start_times_s is not None and not isinstance(self.start_times_s, tuple):
            # Frozen dataclass: bypass __setattr__ so lists from JSON stay hashable.
            object.__setattr__(self, "start_times_s", tuple(float(t) for t in self.start_times_s))
        problems = list(self._problems())
        if problems:
            raise ValueError("invalid Ns3Config: " + "; ".join(problems))

    def _problems(self) -> list[str]:
        out: list[str] = []
        if self.topology not in ("star", "dumbbell"):
            out.append(f"topology must be 'star' or 'dumbbell', got {self.topology!r}")
        if self.aqm not in ("droptail", "ecn_step", "red"):
            out.append(f"aqm must be droptail/ecn_step/red, got {self.aqm!r}")
        if self.cc not in ("reno", "dctcp"):
            out.append(f"cc must be reno/dctcp, got {self.cc!r}")
        if self.senders < 1 or self.flows < 1:
            out.append("senders and flows must be >= 1")
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
        return out

    @property
    def mss_bytes(self) -> int:
        return self.packet_bytes - _TCP_IP_HEADER_BYTES

    @property
    def hops(self) -> int:
        return 2 if self.topology == "star" else 3

    @property
    def bottleneck_link(self) -> str:
        return "s0->r0" if self.topology == "star" else "s0->s1"

    @property
    def pcap_path(self) -> Path | None:
        """The capture file written when `pcap_dir` is set: `<pcap_dir>/<from>-<to>.pcap`
        (DLT_PPP, nanosecond timestamps). It holds what the bottleneck's sending device
        transmits (stamped at the first bit) and what it receives from the far end (the ACKs,
        stamped at the last bit): ns-3's point-to-point sniffer sees both directions."""
        if self.pcap_dir is None:
            return None
        return Path(self.pcap_dir) / (self.bottleneck_link.replace("->", "-") + ".pcap")

    @property
    def base_rtt_s(self) -> float:
        """Empty-queue RTT: propagation both ways plus serialization of a full data packet
        and of a pure ACK on every hop (store-and-forward, PPP header included)."""
        data_tx = (self.packet_bytes + _PPP_HEADER_BYTES) * 8 / self.link_rate_bps
        ack_tx = (_ACK_BYTES + _PPP_HEADER_BYTES) * 8 / self.link_rate_bps
        return self.hops * (2 * self.delay_s + data_tx + ack_tx)

    def flow_endpoints(self) -> list[tuple[str, str]]:
        n = self.senders
        if self.topology == "star":
            return [(f"h{i % n}", "r0") for i in range(self.flows)]
        return [(f"h{i % n}", f"r{i % n}") for i in range(self.flows)]

    def to_json(self) -> str:
        raw = dataclasses.asdict(self)
        if raw["pcap_dir"] is None:
            # Without a capture the JSON stays what it was before pcap_dir existed.
            del raw["pcap_dir"]
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
        "bottleneck_link": cfg.bottleneck_link,
        "base_rtt_s": cfg.base_rtt_s,
        "mss_bytes": cfg.mss_bytes,
        "sample_interval_s": dt,
        "tcp": "ns3::TcpDctcp (ECN)" if cfg.cc == "dctcp" else "ns3::TcpNewReno (no ECN)",
        "aqm": str(a["aqm_desc"]),
    }
    if cfg.pcap_path is not None:
        attrs["pcap"] = str(cfg.pcap_path)
    return xr.Dataset(data_vars=data_vars, coords=coords, attrs=attrs)


# --------------------------------------------------------------------------------------
# Child process: everything below runs only inside the ns-3 subprocess.
# --------------------------------------------------------------------------------------

_CPP_SOURCE = r"""
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
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
};

struct Params
{
    std::string topology;
    int senders = 1;
    double rateBps = 1e9;
    double delayS = 1e-5;
    int bufferPackets = 100;
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
    std::string pcapFile; // empty: no capture
    std::string pcapLink; // port name ("s0->r0") whose device is captured
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

    void Build()
    {
        const bool dctcp = m_p.cc == "dctcp";
        const bool star = m_p.topology == "star";
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

        const int n = m_p.senders;
        NodeContainer hosts, switches, receivers;
        hosts.Create(n);
        switches.Create(star ? 1 : 2);
        receivers.Create(star ? 1 : n);
        InternetStackHelper stack;
        stack.InstallAll();

        m_p2p.SetDeviceAttribute("DataRate",
                                 DataRateValue(DataRate(static_cast<uint64_t>(m_p.rateBps))));
        m_p2p.SetDeviceAttribute("Mtu", UintegerValue(std::max(1500, m_p.packetBytes)));
        m_p2p.SetChannelAttribute("Delay", TimeValue(Seconds(m_p.delayS)));
        // A one-packet device queue keeps the backlog (and the AQM decision) in the queue
        // disc; the traffic-control layer stops the disc while the device queue is full.
        m_p2p.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize", QueueSizeValue(QueueSize("1p")));
        m_addr.SetBase("10.1.0.0", "255.255.255.0");

        std::vector<Ipv4Address> rxAddr;
        if (star)
        {
            rxAddr.push_back(Link(switches.Get(0), "s0", true, receivers.Get(0), "r0", false));
        }
        else
        {
            Link(switches.Get(0), "s0", true, switches.Get(1), "s1", true);
        }
        for (int i = 0; i < n; ++i)
        {
            Link(hosts.Get(i), "h" + std::to_string(i), false, switches.Get(0), "s0", true);
        }
        if (!star)
        {
            for (int i = 0; i < n; ++i)
            {
                rxAddr.push_back(Link(switches.Get(1), "s1", true, receivers.Get(i),
                                      "r" + std::to_string(i), false));
            }
        }
        Ipv4GlobalRoutingHelper::PopulateRoutingTables();
        if (!m_p.pcapFile.empty())
        {
            EnableBottleneckPcap();
        }

        for (int i = 0; i < m_p.flows; ++i)
        {
            auto f = std::make_unique<Flow>();
            int dstIdx = star ? 0 : i % n;
            uint16_t port = static_cast<uint16_t>(10000 + i);
            PacketSinkHelper sinkHelper("ns3::TcpSocketFactory",
                                        InetSocketAddress(Ipv4Address::GetAny(), port));
            ApplicationContainer sinkApp = sinkHelper.Install(receivers.Get(dstIdx));
            sinkApp.Start(Seconds(0));
            BulkSendHelper bulk("ns3::TcpSocketFactory", InetSocketAddress(rxAddr[dstIdx], port));
            bulk.SetAttribute("MaxBytes", UintegerValue(0));
            // Big writes only reduce application callbacks; TCP still sends MSS segments.
            bulk.SetAttribute("SendSize", UintegerValue(64 * 1024));
            ApplicationContainer bulkApp = bulk.Install(hosts.Get(i % n));
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
        Simulator::Destroy();
    }

  private:
    Params m_p;
    PointToPointHelper m_p2p;
    Ipv4AddressHelper m_addr;
    std::vector<std::unique_ptr<Port>> m_ports;
    std::vector<std::unique_ptr<Flow>> m_flows;
    Time m_step;
    int m_k = 0;

    TrafficControlHelper SwitchQueueDisc()
    {
        TrafficControlHelper tch;
        QueueSizeValue maxSize(QueueSize(std::to_string(m_p.bufferPackets) + "p"));
        const bool dctcp = m_p.cc == "dctcp";
        if (m_p.aqm == "droptail")
        {
            tch.SetRootQueueDisc("ns3::FifoQueueDisc", "MaxSize", maxSize);
            aqmDesc = "FifoQueueDisc MaxSize=" + std::to_string(m_p.bufferPackets) + "p";
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
                                 DataRateValue(DataRate(static_cast<uint64_t>(m_p.rateBps))),
                                 "LinkDelay", TimeValue(Seconds(m_p.delayS)));
            aqmDesc = "RedQueueDisc step: MinTh=MaxTh=" + std::to_string(m_p.thresholdPackets) +
                      " QW=1 Gentle=false UseEcn=true UseHardDrop=false MaxSize=" +
                      std::to_string(m_p.bufferPackets) + "p";
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
                                 DataRateValue(DataRate(static_cast<uint64_t>(m_p.rateBps))),
                                 "LinkDelay", TimeValue(Seconds(m_p.delayS)));
            aqmDesc = "RedQueueDisc MinTh=" + std::to_string(m_p.redMin) +
                      " MaxTh=" + std::to_string(m_p.redMax) +
                      " LInterm=" + std::to_string(1.0 / m_p.redPmax) +
                      " QW=" + std::to_string(m_p.redWeight) +
                      " Gentle=false Wait=true UseHardDrop=false UseEcn=" +
                      (dctcp ? "true" : "false") + " MaxSize=" +
                      std::to_string(m_p.bufferPackets) + "p";
        }
        return tch;
    }

    TrafficControlHelper HostQueueDisc()
    {
        // Hosts should never drop: a real sender is throttled by TSQ long before its qdisc
        // overflows, which ns-3 does not model.
        TrafficControlHelper tch;
        int limit = std::max(100000, 10 * m_p.bufferPackets);
        tch.SetRootQueueDisc("ns3::FifoQueueDisc", "MaxSize",
                             QueueSizeValue(QueueSize(std::to_string(limit) + "p")));
        return tch;
    }

    // Connects a and b; returns b's address. Queue discs must be installed before address
    // assignment, otherwise Ipv4AddressHelper::Assign installs its default FqCoDel.
    Ipv4Address Link(Ptr<Node> a, const std::string& an, bool aSwitch,
                     Ptr<Node> b, const std::string& bn, bool bSwitch)
    {
        NetDeviceContainer d = m_p2p.Install(a, b);
        TrafficControlHelper ta = aSwitch ? SwitchQueueDisc() : HostQueueDisc();
        TrafficControlHelper tb = bSwitch ? SwitchQueueDisc() : HostQueueDisc();
        QueueDiscContainer qa = ta.Install(d.Get(0));
        QueueDiscContainer qb = tb.Install(d.Get(1));
        AddPort(an + "->" + bn, d.Get(0), qa.Get(0));
        AddPort(bn + "->" + an, d.Get(1), qb.Get(0));
        Ipv4InterfaceContainer ifc = m_addr.Assign(d);
        m_addr.NewNetwork();
        return ifc.GetAddress(1);
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
    p = gbl.Params()
    p.topology = cfg.topology
    p.senders = cfg.senders
    p.rateBps = float(cfg.link_rate_bps)
    p.delayS = float(cfg.delay_s)
    p.bufferPackets = cfg.buffer_packets
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
        p.startTimes = cppyy.gbl.std.vector["double"](list(cfg.start_times_s))
    p.sampleIntervalS = float(cfg.sample_interval_s)
    p.seed = cfg.seed
    p.dctcpG = float(cfg.dctcp_g)
    p.delAckCount = cfg.delayed_ack_count
    p.initialCwnd = cfg.initial_cwnd_packets
    p.minRtoS = float(cfg.min_rto_s)
    # Socket buffers: 4x (path BDP + bottleneck buffer) so that neither ever limits a flow.
    path_bytes = cfg.link_rate_bps / 8 * cfg.base_rtt_s + cfg.buffer_packets * cfg.packet_bytes
    p.sockBufBytes = float(min(max(4 * 2**20, 4 * path_bytes), 2**30))
    if cfg.pcap_path is not None:
        p.pcapFile = str(cfg.pcap_path.resolve())
        p.pcapLink = cfg.bottleneck_link

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
        aqm_desc=np.array(str(runner.aqmDesc)),
    )
    return 0


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
