"""ns-3 ground-truth runner: a short DCTCP star run must look like DCTCP, in SI units; a k = 4
fat-tree runs on pathflow's own paths and obeys independent physics (line rate when alone,
saturated collisions, byte conservation, spraying beats ECMP)."""

from __future__ import annotations

import dataclasses
import math
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from pathflow.metrics import round_summary
from pathflow.routing import Routes, build_routes
from pathflow.scenario import Scenario, ScenarioError, load_scenario
from pathflow.schema import ENGINE_REQUIRED, check_dataset
from pathflow.sweeps import summarize_point
from pathflow.topology import Network, build_network
from pathflow.validation.ns3 import (
    Ns3Config,
    Ns3Path,
    ns3_available,
    ns3_config,
    run_ns3,
    simulate_ns3,
)

ROOT = Path(__file__).resolve().parents[1]

PACKET = 1500
RATE_BPS = 100e6
K = 20


def test_config_json_roundtrip_and_validation() -> None:
    cfg = Ns3Config(
        topology="dumbbell", senders=2, link_rate_bps=1e9, delay_s=1e-5, buffer_packets=100,
        aqm="red", cc="reno", flows=3, duration_s=0.1, start_times_s=(0.0, 0.01, 0.02),
    )  # fmt: skip
    assert Ns3Config.from_json(cfg.to_json()) == cfg
    assert cfg.flow_endpoints() == [("h0", "r0"), ("h1", "r1"), ("h0", "r0")]
    # 3 hops x (2 x 10 us + 1502 B + 54 B serialized at 1 Gb/s)
    assert cfg.base_rtt_s == pytest.approx(3 * (20e-6 + 1556 * 8 / 1e9))
    with pytest.raises(ValueError, match="start_times_s"):
        Ns3Config(
            topology="star", senders=1, link_rate_bps=1e9, delay_s=1e-5, buffer_packets=100,
            aqm="droptail", cc="reno", flows=2, duration_s=0.1, start_times_s=(0.0,),
        )  # fmt: skip


@pytest.mark.ns3
def test_dctcp_star_holds_queue_at_threshold() -> None:
    # find_spec rather than importorskip: importing ns-3 here would cost ~13 s and load its
    # global state into the test process, while the runner only needs it in a subprocess.
    if not ns3_available():
        pytest.skip("ns-3 Python bindings (pip package ns3) not installed")
    cfg = Ns3Config(
        topology="star", senders=2, link_rate_bps=RATE_BPS, delay_s=62.5e-6,
        buffer_packets=425, aqm="ecn_step", cc="dctcp", flows=2, duration_s=0.3,
        threshold_packets=K, packet_bytes=PACKET,
    )  # fmt: skip
    ds = run_ns3(cfg, timeout_s=600)

    assert set(ds.dims) == {"time", "link", "flow", "subflow"}
    assert ds.sizes["time"] == 300 and ds.sizes["flow"] == ds.sizes["subflow"] == 2
    check_dataset(ds, required=ENGINE_REQUIRED)
    np.testing.assert_allclose(ds.time.values[[0, -1]], [1e-3, 0.3])
    assert "s0->r0" in ds.link.values and ds.attrs["bottleneck_link"] == "s0->r0"
    assert list(ds.src.values) == ["h0", "h1"] and list(ds.dst.values) == ["r0", "r0"]
    units = {
        "queue": "bytes", "flow_rate": "bytes/s", "link_departure": "bytes/s",
        "drops": "bytes/s", "marks": "bytes/s", "cwnd": "bytes", "rtt": "s", "alpha": "1",
    }  # fmt: skip
    for name, unit in units.items():
        assert ds[name].attrs["units"] == unit, name
    assert ds.time.attrs["units"] == "s"
    assert ds.attrs["engine"] == "ns-3 3.44"
    assert Ns3Config.from_json(ds.attrs["config"]) == cfg
    assert ds.attrs["wall_time_s"] > 0

    steady = ds.sel(time=slice(0.1, None), link="s0->r0")
    queue_pkts = steady.queue.values / PACKET
    # DCTCP keeps the instantaneous queue oscillating tightly around K, never near the buffer.
    assert abs(queue_pkts.mean() - K) < 3
    assert np.percentile(queue_pkts, 1) > K / 2
    assert queue_pkts.max() < 2 * K
    assert float(steady.drops.sum()) == 0.0
    assert float(steady.marks.sum()) > 0.0

    link_bytes_per_s = RATE_BPS / 8
    goodput = float(steady.flow_rate.sum("flow").mean()) / link_bytes_per_s
    assert goodput > 0.9
    # The wire carries 1500 B IP packets in 1502 B PPP frames at full utilization.
    departure = float(steady.link_departure.mean()) / link_bytes_per_s
    assert departure == pytest.approx(PACKET / (PACKET + 2), rel=0.01)
    # the ports carry their rates, so a sweep can summarise an ns-3 run as any other
    assert float(ds.capacity.sel(link="s0->r0")) == link_bytes_per_s
    assert ds.utilization.attrs["units"] == "1"
    summary = summarize_point(ds)
    assert summary["bottleneck_utilization"] == pytest.approx(PACKET / (PACKET + 2), rel=0.01)
    assert summary["queue_mean"] == pytest.approx(float(steady.queue.mean()), rel=0.05)
    # The measured RTT never beats the empty-network RTT and is about base + queue / C.
    rtt = ds.rtt.values
    assert np.nanmin(rtt) >= 0.99 * ds.attrs["base_rtt_s"]
    expected = ds.attrs["base_rtt_s"] + K * PACKET / link_bytes_per_s
    assert float(steady.rtt.mean()) == pytest.approx(expected, rel=0.25)
    alpha = steady.alpha.values
    assert np.all((alpha >= 0) & (alpha <= 1))


@pytest.mark.ns3
def test_a_large_dctcp_incast_holds_linux_s_window_floor() -> None:
    """64 DCTCP flows into one 1 Gb/s port with K = 20 packets: the marks never stop, and
    Linux holds every window at its floor of 2 segments (dctcp_ssthresh's floor, and a
    proportional rate reduction that sends what is delivered), so the queue stands at 2 N
    packets less the bandwidth-delay product (closed form). Stock ns-3 3.44 (no floor, its
    TcpPrrRecovery's accounting) held a mean window of 1.58 segments and a 17-packet queue."""
    if not ns3_available():
        pytest.skip("ns-3 Python bindings (pip package ns3) not installed")
    flows = 64
    scenario = load_scenario(ROOT / "examples" / "dctcp_incast_1g.toml").with_updates({
        "topology.senders": flows, "traffic.flows": flows, "aqm.threshold": "20pkt",
        "run.duration": "200ms"})
    ds = simulate_ns3(scenario)
    late = ds.sel(time=ds.time > 0.1)
    np.testing.assert_array_equal(late.cwnd.values, 2 * ds.attrs["mss_bytes"])
    bdp = 1e9 / 8 * ds.attrs["base_rtt_s"]
    queue = float(late.queue.sel(link="s0->r0").mean())
    assert queue == pytest.approx(2 * flows * PACKET - bdp, rel=0.02)
    assert float(late.drops.sum()) == 0.0


# ------------------------------------------------------------------------------------------
# Networks: a pathflow fat-tree in ns-3, on pathflow's own paths
# ------------------------------------------------------------------------------------------

FATTREE = ROOT / "examples" / "fattree_permutation.toml"
FT_DURATION = "40ms"  # k = 4 at 1 Gb/s settles within a few ms; two runs cost ~25 s together
FT_WARMUP_S = 0.01
MSS = PACKET - 52
ACK = 52  # ns-3's pure ACK: IP + TCP + timestamp option


def fattree(mode: str) -> tuple[Scenario, Network, Routes]:
    scenario = load_scenario(FATTREE).with_updates({"routing.mode": mode,
                                                    "run.duration": FT_DURATION})
    network = build_network(scenario)
    return scenario, network, build_routes(scenario, network)


def node_path(network: Network, path: tuple[int, ...]) -> tuple[str, ...]:
    return (network.links[path[0]].src, *(network.links[i].dst for i in path))


def test_network_config_follows_pathflow_routes() -> None:
    for mode in ("ecmp", "spray"):
        scenario, network, routes = fattree(mode)
        cfg = ns3_config(scenario)
        assert cfg.topology == "network" and cfg.network is not None
        assert cfg.flows == len(routes.flows) == 16 and cfg.senders == 16
        assert Ns3Config.from_json(cfg.to_json()) == cfg
        net = cfg.network
        assert net.routing == "paths"
        # Same ports, same names, same order as pathflow's links (and the Dataset's).
        assert net.link_names() == [link.name for link in network.links]
        assert net.flows == tuple((f.src, f.dst) for f in routes.flows)
        assert [(p.flow, p.nodes, p.weight) for p in net.paths] == [
            (f, node_path(network, path), w)
            for path, f, w in zip(routes.paths, routes.path_flow, routes.path_weight, strict=True)
        ]
        # Uniform links: every cable takes the defaults (1 Gb/s, 5 us, 200 packets).
        defaults = (cfg.link_rate_bps, cfg.delay_s, cfg.buffer_packets)
        assert defaults == pytest.approx((1e9, 5e-6, 200))
        assert all(c.rate_ab_bps is None and c.buffer_ba_packets is None for c in net.cables)
        # 6 hops each way, store-and-forward of a 1502 B frame and a 54 B ACK per hop.
        assert cfg.base_rtt_s == pytest.approx(6 * (10e-6 + (1502 + 54) * 8 / 1e9))
    sprayed = ns3_config(fattree("spray")[0]).network
    assert sprayed is not None and len(sprayed.paths) == 51
    by_ns3 = ns3_config(fattree("spray")[0], spray="random_ecmp").network
    assert by_ns3 is not None and by_ns3.routing == "random_ecmp"

    # A path that leaves the cabling, or weights that do not sum to 1, are refused.
    cfg = ns3_config(fattree("ecmp")[0])
    assert cfg.network is not None
    bad = dataclasses.replace(cfg.network, paths=(
        Ns3Path(0, ("h0_0_0", "edge0_0", "core0_0", "agg1_0", "edge1_0", "h1_0_1")),
        *cfg.network.paths[1:]))
    with pytest.raises(ValueError, match="no cable edge0_0-core0_0"):
        dataclasses.replace(cfg, network=bad)
    half = dataclasses.replace(cfg.network, paths=(
        dataclasses.replace(cfg.network.paths[0], weight=0.5), *cfg.network.paths[1:]))
    with pytest.raises(ValueError, match=r"weights of flow 0 sum to 0\.5"):
        dataclasses.replace(cfg, network=half)
    with pytest.raises(ValueError, match=r"pcap_dir needs network\.pcap_link"):
        dataclasses.replace(cfg, pcap_dir="caps")
    capture = dataclasses.replace(cfg, pcap_dir="caps",
                                  network=dataclasses.replace(cfg.network,
                                                              pcap_link="agg0_0->core0_1"))
    assert capture.pcap_path == Path("caps") / "agg0_0-core0_1.pcap"


def test_scenario_mapping_of_stars_dumbbells_and_overrides() -> None:
    # The shipped stars keep the runner's built-in star (same config, same results).
    star = ns3_config(load_scenario(ROOT / "examples" / "dctcp_star.toml"))
    assert star.topology == "star" and star.network is None and "network" not in star.to_json()
    # A dumbbell under incast sends h_i -> r0 in pathflow; the built-in dumbbell would send
    # h_i -> r_i, so it runs as a network with pathflow's flows.
    spec = {"topology": {"kind": "dumbbell", "senders": 3, "link_rate": "1Gbps", "delay": "5us",
                         "buffer": "100pkt"},
            "traffic": {"pattern": "incast"}, "run": {"duration": "10ms"}}
    cfg = ns3_config(Scenario.from_dict(spec))
    assert cfg.topology == "network"
    assert cfg.flow_endpoints() == [("h0", "r0"), ("h1", "r0"), ("h2", "r0")]
    one_to_one = ns3_config(Scenario.from_dict({**spec, "traffic": {"pattern": "one_to_one"}}))
    assert one_to_one.topology == "dumbbell"
    # Per-link overrides become per-cable values; a one-way delay override cannot be built.
    spec["topology"]["links"] = [{"match": "s0->s1", "link_rate": "100Mbps", "buffer": "50pkt"}]
    cfg = ns3_config(Scenario.from_dict(spec))
    assert cfg.network is not None
    (cable,) = [c for c in cfg.network.cables if {c.a, c.b} == {"s0", "s1"}]
    assert (cable.a, cable.rate_ab_bps, cable.buffer_ab_packets) == ("s0", 1e8, 50)
    assert cable.rate_ba_bps is None and cable.buffer_ba_packets is None
    assert cfg.ports()[("s0", "s1")] == pytest.approx((1e8, 5e-6, 50))
    spec["topology"]["links"] = [{"match": "s0->s1", "delay": "50us"}]
    with pytest.raises(ScenarioError, match="one delay for both directions"):
        ns3_config(Scenario.from_dict(spec))


@pytest.fixture(scope="module")
def fattree_ns3() -> dict[str, xr.Dataset]:
    """The k = 4 fat-tree permutation (DCTCP, 1 Gb/s) in ns-3, ECMP and spray, 40 ms each;
    the two subprocesses run side by side."""
    if not ns3_available():
        pytest.skip("ns-3 Python bindings (pip package ns3) not installed")
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = {mode: pool.submit(simulate_ns3, fattree(mode)[0], timeout_s=600)
                for mode in ("ecmp", "spray")}
        return {mode: run.result() for mode, run in runs.items()}


def totals(ds: xr.Dataset) -> tuple[np.ndarray, np.ndarray]:
    """(bytes departed per link, payload bytes delivered per flow) over the whole run."""
    dt = ds.attrs["sample_interval_s"]
    return (ds.link_departure.sum("time").values * dt, ds.flow_rate.sum("time").values * dt)


def steady(ds: xr.Dataset) -> xr.Dataset:
    return ds.sel(time=slice(FT_WARMUP_S + 1e-9, None)).mean("time")


def link_roles(network: Network, routes: Routes) -> tuple[np.ndarray, np.ndarray]:
    """Per link: data bytes per delivered payload byte (the sum of path weights of the flows
    whose data crosses it, per flow), and whether some flow's ACKs cross it."""
    data = np.zeros((len(network.links), len(routes.flows)))
    acks = np.zeros(len(network.links), dtype=bool)
    for path, flow, weight in zip(routes.paths, routes.path_flow, routes.path_weight,
                                  strict=True):
        for i in path:
            link = network.links[i]
            data[i, flow] += weight
            acks[network.link_between(link.dst, link.src)] = True
    return data, acks


def max_min_fair(network: Network, routes: Routes) -> tuple[np.ndarray, dict[int, list[int]]]:
    """Max-min fair shares (fractions of a 1 Gb/s link) of single-path flows by progressive
    filling, and the links it saturates with the flows crossing them: truth that owes nothing
    to ns-3."""
    crossing: dict[int, set[int]] = {}
    for path, flow in zip(routes.paths, routes.path_flow, strict=True):
        for i in path:
            crossing.setdefault(i, set()).add(flow)
    share = np.zeros(len(routes.flows))
    room = {i: 1.0 for i in crossing}
    frozen: set[int] = set()
    saturated: dict[int, list[int]] = {}
    while len(frozen) < len(share):
        step = min(room[i] / len(f - frozen) for i, f in crossing.items() if f - frozen)
        for i, flows in crossing.items():
            room[i] -= step * len(flows - frozen)
        share[list(set(range(len(share))) - frozen)] += step
        for i, flows in crossing.items():
            if room[i] < 1e-12 and flows - frozen:
                saturated[i] = sorted(flows)
                frozen |= flows
    return share, saturated


@pytest.mark.ns3
def test_fattree_ecmp_follows_pathflow_paths(fattree_ns3: dict[str, xr.Dataset]) -> None:
    ds = fattree_ns3["ecmp"]
    _, network, routes = fattree("ecmp")
    assert list(ds.link.values) == [link.name for link in network.links]
    assert list(ds.src.values) == [f.src for f in routes.flows]
    assert ds.attrs["routing"] == "paths" and ds.attrs["unrouted_packets"] == 0
    assert "bottleneck_link" not in ds.attrs
    departed, delivered = totals(ds)
    data, acks = link_roles(network, routes)
    assert float(ds.drops.sum()) == 0.0  # DCTCP at K = 30 of 200 packets: no loss
    # Every delivered byte crossed each link of its flow's path; beyond that a link carries
    # only the data still in flight at the end (at most a window, cwnd + 1 segment, per
    # flow) and ACKs of flows whose reverse path crosses it (at most one 52 B ACK per
    # segment, plus the handshake).
    data_bytes = data @ delivered * PACKET / MSS
    in_flight = data @ (ds.cwnd.isel(time=-1).values + MSS) * PACKET / MSS
    ack_bytes = np.zeros(len(network.links))
    for i, link in enumerate(network.links):
        back = network.link_between(link.dst, link.src)
        ack_bytes[i] = data[back] @ (delivered / MSS + 3) * ACK
    assert np.all(departed >= data_bytes)
    assert np.all(departed <= data_bytes + in_flight + ack_bytes)
    # So data took pathflow's path and no other: links on no path carry nothing at all,
    # links only on reverse paths carry ACKs only (one per 2 segments, delayed ACKs).
    unused = ~data.any(axis=1) & ~acks
    ack_only = ~data.any(axis=1) & acks
    assert unused.any() and ack_only.any()  # the permutation leaves links of both kinds
    assert np.all(departed[unused] == 0)
    np.testing.assert_allclose(departed[ack_only] / ack_bytes[ack_only], 0.5, atol=0.05)


@pytest.mark.ns3
def test_fattree_ecmp_physics(fattree_ns3: dict[str, xr.Dataset]) -> None:
    ds = fattree_ns3["ecmp"]
    _, network, routes = fattree("ecmp")
    mean = steady(ds)
    goodput = mean.flow_rate.values  # payload bytes/s
    line = 1e9 / 8 * MSS / (PACKET + 2)  # payload of back-to-back full PPP frames
    capacity = 1e9 / 8 * PACKET / (PACKET + 2)  # IP bytes/s of a saturated link
    assert float(mean.link_departure.max()) <= capacity * 1.001
    data, _ = link_roles(network, routes)
    # A flow that shares no link with another flow runs close to line rate (what it loses:
    # the other flows' ACKs on its links, up to 3.5 %).
    alone = [f for f in range(len(routes.flows))
             if np.all(data[data[:, f] > 0].sum(axis=1) == 1)]
    assert len(alone) >= 2
    assert np.all(goodput[alone] >= 0.95 * line)
    # Links where ECMP collides flows and max-min fairness says they saturate do saturate,
    # and the flows crossing them fill them (measured: each at least 99.6 % busy, its flows'
    # goodput at least 98 % of the line).
    share, saturated = max_min_fair(network, routes)
    collisions = {network.links[i].name: flows for i, flows in saturated.items()
                  if len(flows) > 1}
    assert collisions
    for name, flows in collisions.items():
        assert float(mean.link_departure.sel(link=name)) >= 0.95 * capacity, name
        assert goodput[flows].sum() >= 0.9 * line, name
    # Flows whose fair share is equal split their link, though not evenly over 30 ms: DCTCP
    # favours the shorter round trip and beats down a flow that crosses further marking ports;
    # none starves (each keeps at least a quarter of an equal split: at core1_1->agg2_1 the
    # flow that also crosses a second saturated port gets 0.33 of one in ns-3, 0.28 in the
    # fluid model and 0.50 at packet level).
    for name, flows in collisions.items():
        if np.allclose(share[flows], share[flows[0]]):
            assert np.all(goodput[flows] >= goodput[flows].sum() / (4 * len(flows))), name


@pytest.mark.ns3
@pytest.mark.parametrize("mode", ["ecmp", "spray"])
def test_fattree_conserves_bytes(fattree_ns3: dict[str, xr.Dataset], mode: str) -> None:
    ds = fattree_ns3[mode]
    _, network, _ = fattree(mode)
    departed, _ = totals(ds)
    dt = ds.attrs["sample_interval_s"]
    dropped = ds.drops.sum("time").values * dt
    backlog = ds.queue.isel(time=-1).values
    hosts = set(network.hosts)
    for switch in sorted({link.src for link in network.links} - hosts):
        into = [i for i, link in enumerate(network.links) if link.dst == switch]
        out = [i for i, link in enumerate(network.links) if link.src == switch]
        # What arrived left, waits in a port or was dropped, but for the packets still on
        # an incoming wire (delay x rate + one frame) or being serialised onto an outgoing
        # one (one frame each).
        imbalance = (departed[into].sum() - departed[out].sum() - backlog[out].sum()
                     - dropped[out].sum())
        slack = (sum(network.links[i].capacity * network.links[i].delay for i in into)
                 + (PACKET + 2) * (len(into) + len(out)))
        assert abs(imbalance) <= slack, (switch, imbalance, slack)


@pytest.mark.ns3
def test_fattree_spray_splits_and_beats_ecmp(fattree_ns3: dict[str, xr.Dataset]) -> None:
    ds = fattree_ns3["spray"]
    _, network, routes = fattree("spray")
    assert ds.attrs["routing"] == "paths" and ds.attrs["unrouted_packets"] == 0
    departed, delivered = totals(ds)
    data, _ = link_roles(network, routes)
    # Each link carries at least its share of every flow sprayed over it (each packet picks
    # one of 2 or 4 paths at random, so a share is exact only on average: a few % over
    # 40 ms; retransmissions of reordered segments come on top).
    expected = data @ delivered * PACKET / MSS
    used = expected > 0
    assert np.all(departed[used] >= 0.9 * expected[used])
    # Spraying removes ECMP's collisions: more aggregate goodput, and no flow starves.
    ecmp = steady(fattree_ns3["ecmp"]).flow_rate.values
    spray = steady(ds).flow_rate.values
    assert spray.sum() > 1.1 * ecmp.sum()
    assert spray.min() > 2 * ecmp.min()


@pytest.mark.ns3
def test_graph_spray_splits_per_path_where_random_ecmp_cannot(tmp_path: Path) -> None:
    # Three shortest paths a -> b: two through s2 (which branches to s4 and s5), one through
    # s3. pathflow sprays a third on each; ns-3's per-hop random ECMP gives s3's path half.
    if not ns3_available():
        pytest.skip("ns-3 Python bindings (pip package ns3) not installed")
    (tmp_path / "edges.csv").write_text(
        "src,dst\na,s1\ns1,s2\ns1,s3\ns2,s4\ns2,s5\ns3,s6\ns4,s7\ns5,s7\ns6,s7\ns7,b\n")
    scenario = Scenario.from_dict({
        "topology": {"kind": "graph", "edges": "edges.csv", "hosts": ["a", "b"],
                     "link_rate": "1Gbps", "delay": "5us", "buffer": "200pkt"},
        "aqm": {"kind": "ecn_step", "threshold": "30pkt"},
        "traffic": {"pattern": "explicit", "pairs": [[0, 1]]},
        "transport": {"cc": "dctcp"}, "routing": {"mode": "spray"}, "run": {"duration": "20ms"},
    }, base_dir=tmp_path)  # fmt: skip
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = {spray: pool.submit(simulate_ns3, scenario, timeout_s=600, spray=spray)
                for spray in ("paths", "random_ecmp")}
        results = {spray: run.result() for spray, run in runs.items()}
    for spray, expected in (("paths", [1 / 3, 1 / 3, 1 / 3]),
                            ("random_ecmp", [1 / 4, 1 / 4, 1 / 2])):
        departed, _ = totals(results[spray])
        ds = results[spray]
        ports = [list(ds.link.values).index(name) for name in ("s2->s4", "s2->s5", "s3->s6")]
        split = departed[ports] / departed[ports].sum()
        # ~1 700 packets, each on a random branch: a few % of binomial noise.
        np.testing.assert_allclose(split, expected, atol=0.05, err_msg=spray)
        assert ds.attrs["routing"] == spray and ds.attrs["unrouted_packets"] == 0


def test_the_host_stack_reaches_ns3() -> None:
    """[transport] sack, rto_min and delayed_ack_timeout become TcpSocketBase::Sack, MinRto and
    TcpSocket::DelAckTimeout; left unset, Linux's (and the runner's former fixed) values."""
    spec = {"topology": {"kind": "star", "senders": 2}, "transport": {"cc": "reno"},
            "run": {"duration": "10ms"}}
    cfg = ns3_config(Scenario.from_dict(spec))
    assert (cfg.sack, cfg.min_rto_s, cfg.delayed_ack_timeout_s) == (True, 0.2, 0.04)
    spec["transport"].update(sack=False, rto_min="1ms", delayed_ack_timeout="500us")
    cfg = ns3_config(Scenario.from_dict(spec))
    assert (cfg.sack, cfg.min_rto_s) == (False, 1e-3)
    assert cfg.delayed_ack_timeout_s == pytest.approx(5e-4)
    assert Ns3Config.from_json(cfg.to_json()) == cfg


@pytest.mark.ns3
def test_barrier_synchronised_rounds_in_ns3() -> None:
    """The classic incast's reads (`[traffic] rounds`) in ns-3: 4 servers, 3 rounds of 256 KB
    each, RTOmin 200 us (no timeout here). The first round starts once the four connections
    are up; each next one only after every block of the last has arrived (the barrier); a
    round carries its four blocks at the line rate at best (closed form: their wire bytes with
    ns-3's 2-byte PPP header over 1 Gb/s) and, without a timeout, within 20 % of it; the
    Dataset's rounds read as the other engines' (`round_summary`, blocks in wire bytes)."""
    if not ns3_available():
        pytest.skip("ns-3 Python bindings (pip package ns3) not installed")
    scenario = load_scenario(ROOT / "examples" / "incast_rounds_1g.toml").with_updates({
        "topology.senders": 4, "traffic.flows": 4, "traffic.rounds": 3,
        "transport.rto_min": "200us", "run.duration": "200ms"})
    cfg = ns3_config(scenario)
    assert cfg.rounds == 3 and cfg.block_bytes == math.ceil(256_000 * 1448 / 1500)
    ds = simulate_ns3(scenario)
    done = ds.block_done.values  # (flow, round)
    assert np.isfinite(done).all()
    assert 0 < float(ds.start[0]) < 1e-3  # the handshakes: about one round trip
    assert np.all(done[:, 1:].min(axis=0) > done[:, :-1].max(axis=0))  # the barrier
    rounds = round_summary(ds)
    assert int(rounds.rounds_completed[0]) == 3
    shortest = float(ds["size"].sum()) * 1502 / 1500 / (1e9 / 8)
    assert np.all(rounds.round_time.values[0] >= shortest)
    assert np.all(rounds.round_time.values[0] <= 1.2 * shortest)
    # the scenario's wire bytes per block, as the other engines count them (ns-3 sends their
    # payload: a byte's rounding apart)
    np.testing.assert_allclose(ds["size"].values, 256_000, atol=1.1)


@pytest.mark.ns3
def test_finite_flows_in_ns3() -> None:
    """`[traffic] size` in ns-3: two 1 MB flows through a 100 Mb/s star finish together no
    sooner than their wire bytes at the line rate allow (closed form: 2 x 1 MB x 1502/1500
    over 100 Mb/s, 160.2 ms) and within 2 % of it (a handshake and a slow start)."""
    if not ns3_available():
        pytest.skip("ns-3 Python bindings (pip package ns3) not installed")
    scenario = Scenario.from_dict({
        "topology": {"kind": "star", "senders": 2, "link_rate": "100Mbps"},
        "traffic": {"size": "1MB"}, "transport": {"cc": "reno"}, "run": {"duration": "300ms"}})
    ds = simulate_ns3(scenario)
    shortest = 2 * 1e6 * 1502 / 1500 / (100e6 / 8)
    last = float(ds.completion_time.max())
    assert shortest <= last <= 1.02 * shortest
    assert "block_done" not in ds  # one round: its completion time says it all
