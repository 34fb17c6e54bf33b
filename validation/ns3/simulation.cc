// The simulation program of pathflow's ns-3 runner: builds a scenario's nodes, cables, queue
// discs, TCP flows and forwarding tables, runs it and samples what the Dataset reports.
//
// No compiler sees this file ahead of time. It ships as package data and
// pathflow.validation.ns3.child hands its text to cppyy.cppdef inside the ns-3 subprocess,
// after `from ns import ns` has loaded ns-3's headers and libraries: that is why no ns-3 header
// is included here. Python fills `Params` and reads `Runner`'s sample vectors.
//
// One file, though long: cppyy compiles one text in one call, and its parts (Params, the flow
// routing, the ACK-first queue filter, Runner) share types that a split would have to
// declare twice or stitch back together in Python before compiling.

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

// Linux's DCTCP: ssthresh = max((1 - alpha / 2) cwnd, 2 segments) (dctcp_ssthresh). ns-3
// 3.44's TcpDctcp has no floor, so a flow marked again and again falls to one segment and
// then waits for the receiver's delayed-ACK timer every round trip.
class LinuxDctcp : public TcpDctcp
{
  public:
    static TypeId GetTypeId()
    {
        static TypeId tid = TypeId("pathflow_ns3::LinuxDctcp")
                                .SetParent<TcpDctcp>()
                                .SetGroupName("Internet")
                                .AddConstructor<LinuxDctcp>();
        return tid;
    }

    std::string GetName() const override { return "LinuxDctcp"; }

    uint32_t GetSsThresh(Ptr<const TcpSocketState> tcb, uint32_t bytesInFlight) override
    {
        return std::max(TcpDctcp::GetSsThresh(tcb, bytesInFlight), 2 * tcb->m_segmentSize);
    }

    Ptr<TcpCongestionOps> Fork() override { return CopyObject<LinuxDctcp>(this); }
};

// Linux's proportional rate reduction (tcp_init_cwnd_reduction, tcp_cwnd_reduction), in CWR
// and in loss recovery: the reduction is proportional to the window before it (prior_cwnd)
// and each ACK's delivered bytes count once. ns-3 3.44's TcpPrrRecovery takes the flight after
// the entering ACK instead, counts that ACK's bytes twice on entering CWR (its EnterRecovery
// and then ProcessAck) and adds a segment as for a duplicate ACK (though none came): at a
// 2-segment ssthresh it keeps 5 to 6 segments in flight every round trip, where Linux keeps 2.
// Not modelled: Linux withholds the extra segment of PRR's slow-start bound on an ACK that
// marks new losses (ns-3 3.44 has no RACK to tell); here any ACK that advances SND.UNA has it.
class LinuxPrr : public TcpClassicRecovery
{
  public:
    static TypeId GetTypeId()
    {
        static TypeId tid = TypeId("pathflow_ns3::LinuxPrr")
                                .SetParent<TcpClassicRecovery>()
                                .SetGroupName("Internet")
                                .AddConstructor<LinuxPrr>();
        return tid;
    }

    std::string GetName() const override { return "LinuxPrr"; }

    void EnterRecovery(Ptr<TcpSocketState> tcb,
                       uint32_t /* dupAckCount */,
                       uint32_t /* unAckDataCount */,
                       uint32_t deliveredBytes) override
    {
        m_priorCwnd = tcb->m_cWnd;
        m_delivered = 0;
        m_out = 0;
        m_una = tcb->m_lastAckedSeq;
        // Entering CWR the socket hands this ACK to DoRecovery next (ProcessAck); entering
        // loss recovery it does not, and Linux reduces on the entering ACK too.
        if (tcb->m_congState == TcpSocketState::CA_RECOVERY)
        {
            DoRecovery(tcb, deliveredBytes, true);
        }
    }

    void DoRecovery(Ptr<TcpSocketState> tcb, uint32_t deliveredBytes, bool /* isDupAck */) override
    {
        const bool advanced = tcb->m_lastAckedSeq > m_una;
        m_una = tcb->m_lastAckedSeq;
        if (deliveredBytes == 0 || m_priorCwnd == 0)
        {
            return;
        }
        m_delivered += deliveredBytes;
        const int64_t segment = tcb->m_segmentSize;
        const int64_t flight = tcb->m_bytesInFlight;
        const int64_t ssthresh = tcb->m_ssThresh;
        int64_t send;
        if (flight > ssthresh)
        {
            send = (ssthresh * m_delivered + m_priorCwnd - 1) / m_priorCwnd - m_out;
        }
        else
        {
            send = std::max<int64_t>(m_delivered - m_out, deliveredBytes);
            send = std::min(ssthresh - flight, send + (advanced ? segment : 0));
        }
        send = std::max<int64_t>(send, m_out > 0 ? 0 : segment); // the fast retransmit
        tcb->m_cWnd = static_cast<uint32_t>(flight + send);
        tcb->m_cWndInfl = tcb->m_cWnd;
    }

    void ExitRecovery(Ptr<TcpSocketState> tcb) override { tcb->m_cWndInfl = tcb->m_cWnd; }

    void UpdateBytesSent(uint32_t bytesSent) override { m_out += bytesSent; }

    Ptr<TcpRecoveryOps> Fork() override { return CopyObject<LinuxPrr>(this); }

  private:
    int64_t m_priorCwnd = 0;
    int64_t m_delivered = 0; // bytes delivered since the reduction began
    int64_t m_out = 0;       // bytes sent since
    SequenceNumber32 m_una;  // SND.UNA at the last ACK seen
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
    double delAckTimeoutS = -1; // < 0: min(40 ms, minRtoS / 5), see Build
    bool sack = true;           // ns-3's default (TcpSocketBase::Sack)
    // Finite flows: payload bytes per flow and round (0: long-lived, BulkSend), and rounds of
    // barrier-synchronised reads (BlockSender, Runner::OnBlockBytes)
    double blockBytes = 0;
    int rounds = 1;
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

// A sender of finite blocks: what `Release` hands it goes to its TCP socket as the socket's
// buffer takes it, and nothing more (BulkSend sends without end, or a fixed amount and then
// closes). The connection stays open between blocks, as a storage server's does; `connected`
// is called once its handshake is done.
class BlockSender : public Application
{
  public:
    void Setup(const Address& peer, Callback<void> connected)
    {
        m_peer = peer;
        m_onConnected = connected;
    }

    void Release(uint64_t bytes)
    {
        m_left += bytes;
        Push();
    }

    Ptr<Socket> GetSocket() const { return m_socket; }

  private:
    void StartApplication() override
    {
        m_socket = Socket::CreateSocket(GetNode(), TcpSocketFactory::GetTypeId());
        m_socket->Bind();
        m_socket->Connect(m_peer);
        m_socket->SetConnectCallback(MakeCallback(&BlockSender::Connected, this),
                                     MakeNullCallback<void, Ptr<Socket>>());
        m_socket->SetSendCallback(MakeCallback(&BlockSender::Room, this));
    }

    void Connected(Ptr<Socket>)
    {
        m_connected = true;
        if (!m_onConnected.IsNull())
        {
            m_onConnected();
        }
        Push();
    }

    void Room(Ptr<Socket>, uint32_t) { Push(); }

    void Push()
    {
        while (m_connected && m_left > 0)
        {
            uint64_t room = m_socket->GetTxAvailable();
            uint32_t n = static_cast<uint32_t>(std::min<uint64_t>({m_left, room, 64 * 1024}));
            if (n == 0)
            {
                return;
            }
            int sent = m_socket->Send(Create<Packet>(n));
            if (sent <= 0)
            {
                return;
            }
            m_left -= static_cast<uint64_t>(sent);
        }
    }

    Address m_peer;
    Callback<void> m_onConnected;
    Ptr<Socket> m_socket;
    uint64_t m_left = 0;
    bool m_connected = false;
};

struct Flow
{
    Ptr<BulkSendApplication> app;
    Ptr<BlockSender> blocks; // instead of app, for finite flows
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
    // finite flows: when each flow's block of each round reached its receiving application
    // (flow-major, flows x rounds; inf: not within the run), and with rounds when the first
    // round was released (every connection up; inf: never)
    std::vector<double> blockDone;
    double roundsStart = std::numeric_limits<double>::infinity();
    double unroutedPackets = 0; // see FlowRouting

    void Build()
    {
        const bool dctcp = m_p.cc == "dctcp";
        RngSeedManager::SetSeed(m_p.seed);
        RngSeedManager::SetRun(1);

        Config::SetDefault("ns3::TcpL4Protocol::SocketType",
                           TypeIdValue(dctcp ? LinuxDctcp::GetTypeId()
                                             : TypeId::LookupByName("ns3::TcpNewReno")));
        Config::SetDefault("ns3::TcpL4Protocol::RecoveryType", TypeIdValue(LinuxPrr::GetTypeId()));
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
                           TimeValue(Seconds(m_p.delAckTimeoutS >= 0
                                                 ? m_p.delAckTimeoutS
                                                 : std::min(0.04, m_p.minRtoS / 5))));
        Config::SetDefault("ns3::TcpSocketBase::Sack", BooleanValue(m_p.sack));
        // A lost SYN is sent again after Linux's initial RTO (1 s, RFC 6298), not ns-3's 3 s:
        // 48 SYNs at once overflow a 43-packet port (the incast's handshakes)
        Config::SetDefault("ns3::TcpSocket::ConnTimeout", TimeValue(Seconds(1)));
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

        if (m_p.blockBytes > 0)
        {
            blockDone.assign(static_cast<size_t>(m_p.flows) * m_p.rounds,
                             std::numeric_limits<double>::infinity());
            m_received.assign(m_p.flows, 0);
            m_blocks.assign(m_p.flows, 0);
        }
        for (int i = 0; i < m_p.flows; ++i)
        {
            auto f = std::make_unique<Flow>();
            uint16_t port = static_cast<uint16_t>(10000 + i);
            PacketSinkHelper sinkHelper("ns3::TcpSocketFactory",
                                        InetSocketAddress(Ipv4Address::GetAny(), port));
            ApplicationContainer sinkApp = sinkHelper.Install(nodes.Get(m_p.flowDst[i]));
            sinkApp.Start(Seconds(0));
            InetSocketAddress peer(m_nodeAddr[m_p.flowDst[i]], port);
            double start = m_p.startTimes.empty() ? 0.0 : m_p.startTimes[i];
            f->sink = DynamicCast<PacketSink>(sinkApp.Get(0));
            if (m_p.blockBytes > 0)
            {
                f->blocks = CreateObject<BlockSender>();
                // rounds: the first one starts once every connection is up (the handshakes
                // are not part of the reads; pathflow's engines have none), else at the start
                f->blocks->Setup(peer, m_p.rounds > 1 ? MakeCallback(&Runner::OnConnected, this)
                                                      : Callback<void>());
                nodes.Get(m_p.flowSrc[i])->AddApplication(f->blocks);
                f->blocks->SetStartTime(Seconds(start));
                if (m_p.rounds == 1)
                {
                    f->blocks->Release(static_cast<uint64_t>(m_p.blockBytes));
                }
                f->sink->TraceConnectWithoutContext(
                    "Rx", MakeBoundCallback(&Runner::OnBlockBytes, this, i));
            }
            else
            {
                BulkSendHelper bulk("ns3::TcpSocketFactory", peer);
                bulk.SetAttribute("MaxBytes", UintegerValue(0));
                // Big writes only reduce application callbacks; TCP still sends MSS segments.
                bulk.SetAttribute("SendSize", UintegerValue(64 * 1024));
                ApplicationContainer bulkApp = bulk.Install(nodes.Get(m_p.flowSrc[i]));
                bulkApp.Start(Seconds(start));
                f->app = DynamicCast<BulkSendApplication>(bulkApp.Get(0));
            }
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
    // finite flows (OnBlockBytes): payload bytes each flow's application received, its blocks
    // complete, the round under way and the flows whose block of it has arrived
    std::vector<uint64_t> m_received;
    std::vector<int> m_blocks;
    int m_round = 0;
    int m_arrived = 0;
    int m_connected = 0; // rounds: connections up so far
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

    // Flow i's receiving application got `p` (in order): the blocks it completes are
    // recorded, and once every flow's block of the round has arrived the next round's blocks
    // are released to all senders at that instant (no request is modelled, as in pathflow's
    // engines).
    void OnConnected()
    {
        if (++m_connected == m_p.flows)
        {
            roundsStart = Simulator::Now().GetSeconds();
            for (auto& f : m_flows)
            {
                f->blocks->Release(static_cast<uint64_t>(m_p.blockBytes));
            }
        }
    }

    static void OnBlockBytes(Runner* r, int i, Ptr<const Packet> p, const Address&)
    {
        const uint64_t block = static_cast<uint64_t>(r->m_p.blockBytes);
        r->m_received[i] += p->GetSize();
        while (r->m_blocks[i] < r->m_p.rounds &&
               r->m_received[i] >= static_cast<uint64_t>(r->m_blocks[i] + 1) * block)
        {
            r->blockDone[static_cast<size_t>(i) * r->m_p.rounds + r->m_blocks[i]] =
                Simulator::Now().GetSeconds();
            if (++r->m_blocks[i] == r->m_round + 1 && ++r->m_arrived == r->m_p.flows &&
                r->m_round + 1 < r->m_p.rounds)
            {
                ++r->m_round;
                r->m_arrived = 0;
                for (auto& f : r->m_flows)
                {
                    f->blocks->Release(block);
                }
            }
        }
    }

    void Hook(Flow* f)
    {
        Ptr<Socket> s = f->blocks ? f->blocks->GetSocket() : f->app->GetSocket();
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
