"""Trace loaders: pcap/pcapng (synthetic and ns-3-written), ns-3 results, queue CSVs, the Mininet
fat-tree records, and a clear one-line TraceError for every malformed input."""

from __future__ import annotations

import gzip
import json
import re
import socket
import struct
from collections.abc import Callable
from pathlib import Path

import dpkt
import numpy as np
import pytest
import xarray as xr

from pathflow.results import write_dataset
from pathflow.validation.ns3 import Ns3Config, ns3_available, run_ns3
from pathflow.validation.ns3.dataset import to_dataset
from pathflow.validation.traces import (
    TraceError,
    load_mininet_records,
    load_ns3,
    load_pcap,
    load_queue_trace,
    read_packets,
    reference_path,
    write_mininet_csv,
)

SHARED_MININET = (Path(__file__).resolve().parents[2] / "shared" / "reference"
                  / "mininet_mptcp_fattree" / "silent_network_records.json")
MININET_CSV = "mininet_fattree_flows.csv"


# ------------------------------------------------------------------------------------------
# Synthetic captures written with dpkt
# ------------------------------------------------------------------------------------------

A, B, C = "10.0.0.1", "10.0.0.2", "10.0.0.3"
TS_OPTION = b"\x01\x01\x08\x0a" + bytes(8)  # NOP NOP timestamp: a 32-byte TCP header


def ipv4(src: str, dst: str, l4: dpkt.Packet, proto: int) -> dpkt.ip.IP:
    return dpkt.ip.IP(src=socket.inet_aton(src), dst=socket.inet_aton(dst), p=proto, ttl=64,
                      data=l4)


def tcp(sport: int, dport: int, payload: int, options: bytes = TS_OPTION) -> dpkt.tcp.TCP:
    return dpkt.tcp.TCP(sport=sport, dport=dport, flags=dpkt.tcp.TH_ACK,
                        off=5 + len(options) // 4, opts=options, data=b"x" * payload)


def udp(sport: int, dport: int, payload: int) -> dpkt.udp.UDP:
    u = dpkt.udp.UDP(sport=sport, dport=dport, data=b"u" * payload)
    u.ulen = 8 + payload
    return u


# (time s, IP packet, flow index or None) -- flows numbered by first appearance:
# 0: A:5000 -> B:80 TCP data, 1: C:6000 -> B:80 TCP data, 2: A:7000 -> C:53 UDP.
# The reverse ACKs B -> A and B -> C are pure ACKs (no flow), ICMP A -> B has no ports.
PACKETS: list[tuple[float, dpkt.ip.IP, int | None]] = [
    (0.0002, ipv4(A, B, tcp(5000, 80, 1448), 6), 0),      # 1500 B
    (0.0004, ipv4(A, B, tcp(5000, 80, 1448), 6), 0),
    (0.0006, ipv4(B, A, tcp(80, 5000, 0), 6), None),       # 52 B pure ACK
    (0.0011, ipv4(C, B, tcp(6000, 80, 500), 6), 1),        # 552 B
    (0.0013, ipv4(A, B, tcp(5000, 80, 100), 6), 0),        # 152 B
    (0.0017, ipv4(A, C, udp(7000, 53, 200), 17), 2),       # 228 B
    (0.0019, ipv4(B, C, tcp(80, 6000, 0), 6), None),
    (0.0031, ipv4(A, B, dpkt.icmp.ICMP(type=8, data=b"p" * 56), 1), None),
    (0.0035, ipv4(C, B, tcp(6000, 80, 1448, options=b""), 6), 1),  # 20-byte TCP header
]
WIDTH = 1e-3
N_BINS = 4  # the last packet is in [3 ms, 4 ms)


def expected_rates(direction: str = "all") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """flow_rate, payload_rate (time, flow) and link_departure (time,), computed directly."""
    flow_ip, flow_pl, link = np.zeros((N_BINS, 3)), np.zeros((N_BINS, 3)), np.zeros(N_BINS)
    data_pairs = {(p.src, p.dst) for _, p, f in PACKETS if f is not None}
    for t, ip, f in PACKETS:
        k = int(t / WIDTH)
        if f is not None:
            l4 = ip.data
            header = l4.off * 4 if isinstance(l4, dpkt.tcp.TCP) else 8
            flow_ip[k, f] += ip.len
            flow_pl[k, f] += ip.len - 20 - header
        if direction == "all" or (ip.src, ip.dst) in data_pairs:
            link[k] += ip.len
    return flow_ip / WIDTH, flow_pl / WIDTH, link / WIDTH


def frames(linktype: int) -> list[tuple[float, bytes]]:
    out = []
    for t, ip, _ in PACKETS:
        raw = bytes(ip)
        if linktype == dpkt.pcap.DLT_EN10MB:
            frame = bytes(dpkt.ethernet.Ethernet(src=b"\x02" * 6, dst=b"\x04" * 6,
                                                 type=dpkt.ethernet.ETH_TYPE_IP, data=ip))
        elif linktype == dpkt.pcap.DLT_PPP:
            frame = b"\x00\x21" + raw  # what ns-3's point-to-point device writes
        elif linktype == 50:  # PPP in HDLC framing
            frame = b"\xff\x03\x00\x21" + raw
        else:
            frame = raw
        out.append((t, frame))
    return out


def write_pcap(path: Path, linktype: int = dpkt.pcap.DLT_EN10MB, *, nano: bool = False) -> Path:
    with path.open("wb") as f:
        writer = dpkt.pcap.Writer(f, snaplen=65535, linktype=linktype, nano=nano)
        for t, frame in frames(linktype):
            writer.writepkt(frame, ts=t)
    return path


def write_pcapng(path: Path, linktype: int = dpkt.pcap.DLT_EN10MB) -> Path:
    with path.open("wb") as f:
        writer = dpkt.pcapng.Writer(f, snaplen=65535, linktype=linktype)
        for t, frame in frames(linktype):
            writer.writepkt(frame, ts=t)
    return path


def check_rates(ds: xr.Dataset, direction: str = "all") -> None:
    flow_ip, flow_pl, link = expected_rates(direction)
    assert ds.sizes == {"time": N_BINS, "flow": 3, "link": 1}
    np.testing.assert_allclose(ds.time.values, WIDTH * np.arange(1, N_BINS + 1), rtol=1e-12)
    np.testing.assert_allclose(ds.flow_rate.values, flow_ip, rtol=1e-12)
    np.testing.assert_allclose(ds.payload_rate.values, flow_pl, rtol=1e-12)
    np.testing.assert_allclose(ds.link_departure.values[:, 0], link, rtol=1e-12)


def test_pcap_ethernet_rates_are_exact(tmp_path: Path) -> None:
    ds = load_pcap(write_pcap(tmp_path / "eth.pcap"), bin_width=WIDTH, t0=0.0)
    check_rates(ds)
    assert list(ds.src.values) == [f"{A}:5000", f"{C}:6000", f"{A}:7000"]
    assert list(ds.dst.values) == [f"{B}:80", f"{B}:80", f"{C}:53"]
    assert list(ds.ip_protocol.values) == ["tcp", "tcp", "udp"]
    np.testing.assert_allclose(ds.start.values, [0.0002, 0.0011, 0.0017], atol=1e-9)
    for name in ("flow_rate", "payload_rate", "link_departure"):
        assert ds[name].attrs["units"] == "bytes/s"
    assert ds.time.attrs["units"] == "s" and ds.start.attrs["units"] == "s"
    assert ds.attrs["link_type"] == "ETHERNET" and ds.attrs["ip_packets"] == len(PACKETS)
    # The pure-ACK directions and ICMP are on the link but are no flow.
    assert float(ds.link_departure.sum()) > float(ds.flow_rate.sum())


def test_pcap_data_direction_drops_reverse_acks(tmp_path: Path) -> None:
    ds = load_pcap(write_pcap(tmp_path / "eth.pcap"), bin_width=WIDTH, t0=0.0,
                   direction="data")
    check_rates(ds, direction="data")
    # Only the two 52-byte ACKs are gone (ICMP A -> B travels in a data direction).
    all_bytes = load_pcap(tmp_path / "eth.pcap", bin_width=WIDTH, t0=0.0).link_departure.sum()
    assert float(all_bytes - ds.link_departure.sum()) * WIDTH == pytest.approx(2 * 52)


@pytest.mark.parametrize(
    ("name", "writer"),
    [
        ("ppp", lambda p: write_pcap(p, dpkt.pcap.DLT_PPP)),
        ("ppp-hdlc", lambda p: write_pcap(p, 50)),
        ("raw", lambda p: write_pcap(p, 101)),
        ("nanosecond", lambda p: write_pcap(p, nano=True)),
        ("pcapng", lambda p: write_pcapng(p)),
        ("pcapng-ppp", lambda p: write_pcapng(p, dpkt.pcap.DLT_PPP)),
    ],
)
def test_pcap_formats_and_link_types_agree(tmp_path: Path, name: str,
                                           writer: Callable[[Path], Path]) -> None:
    check_rates(load_pcap(writer(tmp_path / f"{name}.cap"), bin_width=WIDTH, t0=0.0))


def write_epoch_pcap(path: Path, epoch: int) -> Path:
    """Nanosecond pcap written field by field: dpkt's writer takes float seconds, which at
    Unix-epoch magnitudes hold only ~0.2 us."""
    out = [struct.pack("<IHHiIII", dpkt.pcap.TCPDUMP_MAGIC_NANO, 2, 4, 0, 0, 65535, 1)]
    for t, frame in frames(dpkt.pcap.DLT_EN10MB):
        out.append(struct.pack("<IIII", epoch, round(t * 1e9), len(frame), len(frame)) + frame)
    path.write_bytes(b"".join(out))
    return path


def test_pcap_gzip_and_epoch_timestamps(tmp_path: Path) -> None:
    epoch = 1_700_000_000
    plain = write_epoch_pcap(tmp_path / "epoch.pcap", epoch)
    zipped = tmp_path / "epoch.pcap.gz"
    zipped.write_bytes(gzip.compress(plain.read_bytes()))
    for path in (plain, zipped):
        # Default t0: the first packet's time rounded down to the bin grid (= the epoch here);
        # nanosecond timestamps survive because times are re-based on an integer second.
        ds = load_pcap(path, bin_width=WIDTH)
        check_rates(ds)
        assert ds.attrs["t0"] == epoch
    packets = read_packets(plain)
    assert packets.origin == epoch
    np.testing.assert_allclose(packets.time, [t for t, _, _ in PACKETS], rtol=0, atol=1e-15)


def test_pcap_ip_length_survives_snaplen_and_ipv6(tmp_path: Path) -> None:
    big = ipv4(A, B, tcp(5000, 80, 1460, options=b""), 6)  # 1500 B
    eth = bytes(dpkt.ethernet.Ethernet(src=b"\x02" * 6, dst=b"\x04" * 6,
                                       type=dpkt.ethernet.ETH_TYPE_IP, data=big))
    t6 = tcp(4000, 443, 1000)
    ip6 = dpkt.ip6.IP6(src=socket.inet_pton(socket.AF_INET6, "fd00::1"),
                       dst=socket.inet_pton(socket.AF_INET6, "fd00::2"), nxt=6, hlim=64,
                       data=t6, plen=len(bytes(t6)))
    eth6 = bytes(dpkt.ethernet.Ethernet(src=b"\x02" * 6, dst=b"\x04" * 6,
                                        type=dpkt.ethernet.ETH_TYPE_IP6, data=ip6))
    arp = bytes(dpkt.ethernet.Ethernet(src=b"\x02" * 6, dst=b"\xff" * 6,
                                       type=dpkt.ethernet.ETH_TYPE_ARP, data=dpkt.arp.ARP()))
    path = tmp_path / "snap.pcap"
    with path.open("wb") as f:
        writer = dpkt.pcap.Writer(f, snaplen=54, linktype=dpkt.pcap.DLT_EN10MB)
        writer.writepkt(eth[:54], ts=0.0001)  # headers only, as tcpdump -s 54 keeps
        writer.writepkt(eth6, ts=0.0002)
        writer.writepkt(arp, ts=0.0003)
    ds = load_pcap(path, bin_width=WIDTH, t0=0.0)
    np.testing.assert_allclose(ds.flow_rate.values[0], [1500 / WIDTH, 1072 / WIDTH])
    np.testing.assert_allclose(ds.payload_rate.values[0], [1460 / WIDTH, 1000 / WIDTH])
    assert list(ds.src.values) == [f"{A}:5000", "[fd00::1]:4000"]
    assert ds.attrs["non_ip_frames"] == 1 and ds.attrs["frames"] == 3


def test_pcap_window_and_transmission_shift(tmp_path: Path) -> None:
    path = write_pcap(tmp_path / "ppp.pcap", dpkt.pcap.DLT_PPP)
    # duration fixes the window; packets beyond it are ignored.
    ds = load_pcap(path, bin_width=2e-3, t0=0.0, duration=2e-3)
    assert ds.sizes["time"] == 1
    flow_ip, _, _ = expected_rates()
    np.testing.assert_allclose(ds.flow_rate.values[0], flow_ip[:2].sum(0) * WIDTH / 2e-3)
    # At 1 Mb/s a 1502-byte PPP frame takes 12.016 ms, so flow 0's first two packets end
    # at 12.216 and 12.416 ms (bin 12); its 154-byte frame sent at 1.3 ms ends at 2.532 ms.
    shifted = load_pcap(path, bin_width=WIDTH, t0=0.0, tx_rate_bps=1e6)
    first = shifted.flow_rate.sel(flow=0).values * WIDTH
    assert first[12] == pytest.approx(2 * 1500) and first[2] == pytest.approx(152)
    assert first.sum() == pytest.approx(2 * 1500 + 152)


def test_pcapng_with_two_interfaces_needs_a_choice(tmp_path: Path) -> None:
    ng = dpkt.pcapng
    idbs = [ng.InterfaceDescriptionBlockLE(linktype=1, snaplen=65535),
            ng.InterfaceDescriptionBlockLE(linktype=101, snaplen=65535)]
    path = tmp_path / "two.pcapng"
    with path.open("wb") as f:
        writer = ng.Writer(f, idb=idbs)
        for (t, frame), (_, raw) in zip(frames(1), frames(101), strict=True):
            writer.writepkt(frame, ts=t)
            block = ng.EnhancedPacketBlockLE(iface_id=1, pkt_data=raw, caplen=len(raw),
                                             pkt_len=len(raw))
            writer.writepkt(block, ts=t + 1e-6)
    with pytest.raises(TraceError, match=r"2 interfaces .*interface="):
        load_pcap(path, bin_width=WIDTH, t0=0.0)
    for interface in (0, 1, "if1"):
        check_rates(load_pcap(path, bin_width=WIDTH, t0=0.0, interface=interface))


# ------------------------------------------------------------------------------------------
# ns-3: the project's own pcap, against the runner's own counters
# ------------------------------------------------------------------------------------------

RATE_BPS = 100e6
PACKET = 1500
DELAY = 62.5e-6


@pytest.mark.ns3
def test_ns3_pcap_matches_runner_counters(tmp_path: Path) -> None:
    if not ns3_available():
        pytest.skip("ns-3 Python bindings (pip package ns3) not installed")
    cfg = Ns3Config(
        topology="star", senders=2, link_rate_bps=RATE_BPS, delay_s=DELAY,
        buffer_packets=425, aqm="ecn_step", cc="dctcp", flows=2, duration_s=0.2,
        threshold_packets=20, packet_bytes=PACKET, pcap_dir=str(tmp_path / "pcap"),
    )  # fmt: skip
    ref = run_ns3(cfg, timeout_s=600)
    assert cfg.pcap_path is not None and cfg.pcap_path.exists()
    assert ref.attrs["pcap"] == str(cfg.pcap_path)
    dt = cfg.sample_interval_s
    n = ref.sizes["time"]
    # The capture holds both directions of s0 <-> r0 (ns-3's sniffer sees what the device
    # sends and receives); direction="data" keeps the data direction, i.e. s0 -> r0.
    # tx_rate_bps moves each first-bit timestamp to the last bit, when the runner counts a
    # departure (PhyTxEnd); t0=0 puts the bins on the runner's sample grid.
    ds = load_pcap(cfg.pcap_path, bin_width=dt, t0=0.0, duration=cfg.duration_s,
                   link="s0->r0", direction="data", tx_rate_bps=RATE_BPS)
    assert ds.sizes["time"] == n and ds.sizes["flow"] == 2
    np.testing.assert_allclose(ds.time.values, ref.time.values, rtol=1e-12)
    assert ds.attrs["link_type"] == "PPP"
    assert list(ds.dst.values) == ["10.1.0.2:10000", "10.1.0.2:10001"]

    # Link: both count IP bytes (the 2-byte PPP header is excluded on both sides) at the end
    # of transmission, so every bin agrees up to one packet (1500 B / 1 ms) moved across a bin
    # edge by event ordering at an identical instant; the total agrees to one packet.
    departure = ref.link_departure.sel(link="s0->r0").values
    mine = ds.link_departure.sel(link="s0->r0").values
    one_packet = PACKET / dt
    assert np.abs(mine - departure).max() <= one_packet
    assert abs(mine.sum() - departure.sum()) * dt <= PACKET
    # Every data-direction packet belongs to one of the two flows (SYN included).
    np.testing.assert_allclose(ds.flow_rate.sum("flow").values, mine, rtol=1e-12)

    # Flows: the runner's flow_rate is goodput at the receiving application, which sees each
    # segment DELAY (62.5 us) after its last bit leaves s0. Without losses (DCTCP, ECN, no
    # drops) the payload is the goodput, shifted by less than one 120 us packet time, so each
    # flow's bins agree within one segment and its total within one segment.
    assert float(ref.drops.sum()) == 0.0
    segment = cfg.mss_bytes
    goodput = ref.flow_rate.values
    payload = ds.payload_rate.values
    assert np.abs(payload - goodput).max() <= segment / dt
    np.testing.assert_allclose(payload.sum(0) * dt, goodput.sum(0) * dt, atol=segment)
    # IP bytes per flow = payload x packet / MSS for full segments (header bytes: 52 per
    # segment), within a few small packets (SYN, handshake ACK, a partial last segment).
    steady = slice(20, None)
    ratio = ds.flow_rate.values[steady].sum(0) / payload[steady].sum(0)
    np.testing.assert_allclose(ratio, PACKET / segment, rtol=1e-3)

    # The same result round-trips through netCDF with its attrs.
    saved = tmp_path / "ns3.nc"
    write_dataset(ref, str(saved))
    loaded = load_ns3(saved)
    xr.testing.assert_allclose(loaded.drop_attrs(), ref.drop_attrs())
    assert Ns3Config.from_json(loaded.attrs["config"]) == cfg


def test_ns3_config_json_unchanged_without_pcap() -> None:
    cfg = Ns3Config(topology="star", senders=1, link_rate_bps=1e9, delay_s=1e-5,
                    buffer_packets=100, aqm="droptail", cc="reno", flows=1, duration_s=0.1)
    assert "pcap_dir" not in cfg.to_json() and cfg.pcap_path is None
    with_pcap = Ns3Config.from_json(cfg.to_json().replace("{", '{"pcap_dir": "caps", ', 1))
    assert with_pcap.pcap_path == Path("caps") / "s0-r0.pcap"
    assert Ns3Config.from_json(with_pcap.to_json()) == with_pcap
    with pytest.raises(ValueError, match="pcap_dir"):
        Ns3Config(topology="star", senders=1, link_rate_bps=1e9, delay_s=1e-5,
                  buffer_packets=100, aqm="droptail", cc="reno", flows=1, duration_s=0.1,
                  pcap_dir=" ")


def fake_ns3_result() -> xr.Dataset:
    """A runner Dataset built from made-up counters (no ns-3 needed)."""
    cfg = Ns3Config(topology="star", senders=2, link_rate_bps=1e8, delay_s=1e-5,
                    buffer_packets=100, aqm="ecn_step", cc="dctcp", flows=2, duration_s=0.004)
    n, links = 4, ["s0->r0", "r0->s0"]
    rng = np.random.default_rng(1)
    cumulative = np.cumsum(rng.uniform(0, 1e4, (n, 2)), axis=0)
    arrays = {
        "time": 1e-3 * np.arange(1, n + 1), "link_names": np.array(links),
        "queue": rng.uniform(0, 3e4, (n, 2)), "tx": cumulative, "drop": 0 * cumulative,
        "mark": 0.1 * cumulative, "rx": cumulative, "cwnd": rng.uniform(1e4, 2e4, (n, 2)),
        "rtt": rng.uniform(1e-4, 2e-4, (n, 2)), "alpha": rng.uniform(0, 1, (n, 2)),
        "sim_wall_time_s": np.float64(0.5), "aqm_desc": np.array("step"),
    }  # fmt: skip
    return to_dataset(cfg, arrays, wall_time_s=1.0)


@pytest.mark.parametrize("writer", ["write_dataset", "to_netcdf"])
def test_load_ns3_round_trip(tmp_path: Path, writer: str) -> None:
    ref = fake_ns3_result()
    ref.attrs["scenario"] = '[topology]\nkind = "star"\n'  # TOML text stays text
    if writer == "write_dataset":
        ref.attrs["report"] = {"ok": True, "checks": [1, 2]}
        write_dataset(ref, str(tmp_path / "r.nc"))
    else:
        ref.to_netcdf(tmp_path / "r.nc")
    ds = load_ns3(tmp_path / "r.nc")
    xr.testing.assert_identical(ds.drop_attrs(), ref.drop_attrs())
    for name in ref.data_vars:
        assert ds[name].attrs == ref[name].attrs
    assert set(ds.attrs) == set(ref.attrs)
    for key, value in ref.attrs.items():
        assert ds.attrs[key] == value, key
    assert Ns3Config.from_json(ds.attrs["config"]).flows == 2


# ------------------------------------------------------------------------------------------
# Queue CSV and the Mininet records
# ------------------------------------------------------------------------------------------


def test_queue_trace_header_and_comments(tmp_path: Path) -> None:
    path = tmp_path / "q.csv"
    path.write_text("# exported\ntime,queue\n0.0,3\n0.5,4.5\n")
    ds = load_queue_trace(path, packet_bytes=1500)
    np.testing.assert_allclose(ds.queue.values[:, 0], [4500, 6750])
    assert ds.queue.attrs["units"] == "bytes" and ds.time.attrs["units"] == "s"
    hardware = load_queue_trace(reference_path("hardware_dctcp_queue.csv"))
    assert hardware.sizes["time"] == 892


def test_mininet_records_shipped_extract() -> None:
    ds = load_mininet_records(reference_path(MININET_CSV))
    assert ds.sizes == {"record": 24, "flow": 80, "path": 4}
    assert int(ds.goodput.count()) == 1920
    assert set(ds.router.values) == {"static", "ecmp", "ps"}
    assert ds.goodput.attrs["units"] == "bytes/s" and ds.fct.attrs["units"] == "s"
    # Every run pairs the 16 hosts so that each is client once and server once.
    for run in range(5):
        sel = ds.sel(flow=ds.run == run)
        for r in range(24):
            assert len(set(sel.src.values[r])) == 16 and len(set(sel.dst.values[r])) == 16
    # 20 Mb/s = 2.5 MB/s: no transfer beats line rate; 25 MiB take at least 10.5 s.
    assert float(ds.goodput.max()) < 2.5e6
    long = ds.sel(record=ds.payloadsize == "long")
    assert float(long.fct.min()) > 26_214_400 / 2.5e6
    # README: "measured mean goodput of long flows is 2.16 to 2.32 MB/s". True for every ECMP
    # and spraying record; the static-routing TCP record with Juggler averages 2.36 MB/s.
    mean_goodput = long.goodput.mean("flow")
    spread = mean_goodput.sel(record=long.router != "static")
    assert float(spread.min()) >= 2.16e6 and float(spread.max()) <= 2.33e6
    assert float(mean_goodput.min()) >= 2.16e6 and float(mean_goodput.max()) <= 2.37e6
    # README: spraying uses all 4 inter-pod paths (mean network utilization ~0.99 for long
    # flows), static routing one (0.31); ECMP (hashing on sequence bits) lies between.
    util = {router: float(long.mean_network_utilization.where(long.router == router).mean())
            for router in ("ps", "static", "ecmp")}
    assert util["ps"] == pytest.approx(0.99, abs=0.005)
    assert util["static"] == pytest.approx(0.31, abs=0.005)
    assert util["static"] < util["ecmp"] < util["ps"]
    # Path bytes count both directions (path names are undirected): static routing puts the
    # data on one path and the ACKs on at most one other, which carries under 5 % of the bytes.
    static = np.sort(ds.path_bytes.sel(record=ds.router == "static").values, axis=-1)
    assert int((static > 0).sum(-1).max()) == 2
    assert float((static[..., -2] / static.sum(-1)).max()) < 0.05
    # Path bytes add up; throughput >= goodput (headers, retransmissions).
    np.testing.assert_array_equal(ds.path_bytes.sum("path"), ds.shortest_path_bytes)
    assert bool((ds.throughput >= ds.goodput).all())


@pytest.mark.skipif(not SHARED_MININET.exists(), reason="../shared/reference not present")
def test_mininet_extract_matches_the_json(tmp_path: Path) -> None:
    original = load_mininet_records(SHARED_MININET)
    extract = load_mininet_records(reference_path(MININET_CSV))
    # The CSV leaves out goodput, throughput and utilization; recomputed, they are the
    # JSON's numbers bit for bit.
    xr.testing.assert_identical(original.drop_attrs(), extract.drop_attrs())
    write_mininet_csv(SHARED_MININET, tmp_path / "again.csv")
    assert (tmp_path / "again.csv").read_bytes() == reference_path(MININET_CSV).read_bytes()


# ------------------------------------------------------------------------------------------
# Malformed inputs: TraceError (a ValueError), one line, naming the file and the problem
# ------------------------------------------------------------------------------------------


def assert_trace_error(call: Callable[[Path], object], path: Path, pattern: str) -> None:
    with pytest.raises(TraceError) as info:
        call(path)
    message = str(info.value)
    assert isinstance(info.value, ValueError)
    assert "\n" not in message
    assert message.startswith(str(path)), message
    assert re.search(pattern, message), message


def good_pcap_bytes(tmp_path: Path) -> bytes:
    return write_pcap(tmp_path / "good.pcap").read_bytes()


PCAP_CASES: dict[str, tuple[Callable[[bytes], bytes], str]] = {
    "empty": (lambda good: b"", "empty file"),
    "cut-in-frame": (lambda good: good[:-10], r"truncated capture: record 8 .*frame cut off"),
    "cut-in-record-header": (lambda good: good[:24 + 16 + 1514 + 5],
                             "record header cut off"),
    "cut-in-file-header": (lambda good: good[:10], "truncated pcap file header"),
    "text": (lambda good: b"time,queue\n0,1\n", "not a pcap or pcapng capture"),
    "corrupt-length": (lambda good: good[:24] + good[24:32] + b"\xff\xff\xff\x7f" + good[36:],
                       "corrupt record 0"),
    "broken-gzip": (lambda good: gzip.compress(good)[:40], "broken gzip stream"),
    "no-packets": (lambda good: good[:24], "capture holds no packets"),
}


@pytest.mark.parametrize("case", sorted(PCAP_CASES))
def test_malformed_pcap(tmp_path: Path, case: str) -> None:
    mangle, pattern = PCAP_CASES[case]
    path = tmp_path / f"{case}.pcap"
    path.write_bytes(mangle(good_pcap_bytes(tmp_path)))
    assert_trace_error(load_pcap, path, pattern)


def test_truncated_pcap_can_be_accepted(tmp_path: Path) -> None:
    path = tmp_path / "cut.pcap"
    path.write_bytes(good_pcap_bytes(tmp_path)[:-10])
    ds = load_pcap(path, bin_width=WIDTH, t0=0.0, allow_truncated=True)
    assert ds.attrs["truncated"] == 1 and ds.attrs["ip_packets"] == len(PACKETS) - 1


def test_malformed_pcap_other_cases(tmp_path: Path) -> None:
    assert_trace_error(load_pcap, tmp_path / "missing.pcap", "no such file")
    assert_trace_error(load_pcap, tmp_path, "is a directory")
    # pcapng cut inside a block
    ng = write_pcapng(tmp_path / "ng.pcapng").read_bytes()
    (tmp_path / "cut.pcapng").write_bytes(ng[:-7])
    assert_trace_error(load_pcap, tmp_path / "cut.pcapng", "block cut off")
    # unsupported link type (802.11)
    with (tmp_path / "wifi.pcap").open("wb") as f:
        dpkt.pcap.Writer(f, linktype=105).writepkt(b"\x00" * 40, ts=0.0)
    assert_trace_error(load_pcap, tmp_path / "wifi.pcap", "unsupported link type 105")
    # frames, but none carries IP
    arp = bytes(dpkt.ethernet.Ethernet(type=dpkt.ethernet.ETH_TYPE_ARP, data=dpkt.arp.ARP()))
    with (tmp_path / "arp.pcap").open("wb") as f:
        dpkt.pcap.Writer(f).writepkt(arp, ts=0.0)
    assert_trace_error(load_pcap, tmp_path / "arp.pcap", "no IPv4/IPv6 packets among 1 frames")
    with pytest.raises(ValueError, match="bin_width"):
        load_pcap(write_pcap(tmp_path / "ok.pcap"), bin_width=0.0)


CSV_CASES = {
    "empty": ("", "empty file"),
    "blank": ("\n\n", "no data rows"),
    "three-columns": ("0,1,2\n1,2,3\n", r"line 1: expected 2 columns .* got 3"),
    "one-column": ("0\n1\n", "line 1: expected 2 columns"),
    "ragged": ("0,1\n1,2\n2,3,4\n", "line 3: expected 2 columns"),
    "wrong-header": ("t,q,extra\n0,1,2\n", "line 1: header 't,q,extra', expected 'time,queue'"),
    "header-only": ("time,queue\n", "no data rows"),
    "not-numbers": ("0,1\n1,abc\n", "line 2: not numbers"),
    "nan": ("0,1\n1,nan\n", "line 2: non-finite"),
    "negative": ("0,1\n1,-2\n", "line 2: negative queue"),
    "time-goes-back": ("0,1\n2,1\n1,1\n", "line 3: time 1.0 does not increase"),
}


@pytest.mark.parametrize("case", sorted(CSV_CASES))
def test_malformed_queue_csv(tmp_path: Path, case: str) -> None:
    text, pattern = CSV_CASES[case]
    path = tmp_path / f"{case}.csv"
    path.write_text(text)
    assert_trace_error(load_queue_trace, path, pattern)


def test_malformed_queue_csv_binary(tmp_path: Path) -> None:
    path = tmp_path / "bin.csv"
    path.write_bytes(b"\xff\xfe\x00garbage")
    assert_trace_error(load_queue_trace, path, "not a text file")


def mininet_json(**changes: object) -> list[dict[str, object]]:
    record: dict[str, object] = {
        "id": 1,
        "data": {
            "metadata": {"router": "ps", "proto": "tcp", "pmanager": "fullmesh", "diffports": 1,
                         "juggler": "true", "payloadsize": "query", "K": 4, "runcount": 1},
            "unpacked": [{
                "id": 0, "goodput": 1.8e6, "throughput": 2.0e6, "fct": 0.07,
                "meanNetworkUtilization": 0.5,
                "debug": {"flowId": ["h000 50000 h100 41000"], "fileSize": 131072,
                          "totalBytes": 143322, "shortestPathTotalBytes": 143322,
                          "pathsWithBytes": {"32 > 16 > 0 > 1 > 20 > 36": 143322}},
            }],
        },
    }  # fmt: skip
    for dotted, value in changes.items():
        target: object = record
        keys = dotted.split("__")
        for key in keys[:-1]:
            target = target[int(key)] if isinstance(target, list) else target[key]  # type: ignore[index]
        if value is None:
            del target[keys[-1]]  # type: ignore[union-attr]
        else:
            target[keys[-1]] = value  # type: ignore[index]
    return [record]


def test_mininet_minimal_json(tmp_path: Path) -> None:
    path = tmp_path / "ok.json"
    path.write_text(json.dumps(mininet_json()))
    ds = load_mininet_records(path)
    assert ds.sizes == {"record": 1, "flow": 1, "path": 1}
    assert ds.src.item() == "h100" and ds.dst.item() == "h000"  # client -> server
    assert int(ds.equal_cost_paths.item()) == 4 and bool(ds.juggler.item())


JSON_CASES = {
    "empty": ("", "empty file"),
    "not-json": ("{nope", "not valid JSON"),
    "object": ('{"data": []}', "expected a JSON list of test records, got dict"),
    "list-of-numbers": ("[1, 2]", r"\[0\]: expected an object, got int"),
    "no-metadata": (mininet_json(data__metadata=None),
                    r"\[0\]\.data\.metadata: missing"),
    "no-fct": (mininet_json(data__unpacked__0__fct=None),
               r"\[0\]\.data\.unpacked\[0\]\.fct: missing"),
    "fct-as-text": (mininet_json(data__unpacked__0__fct="fast"),
                    r"unpacked\[0\]\.fct: expected int/float, got str"),
    "unpacked-not-list": (mininet_json(data__unpacked={"a": 1}),
                          r"\[0\]\.data\.unpacked: expected list, got dict"),
    "bad-juggler": (mininet_json(data__metadata__juggler="maybe"),
                    "juggler: expected 'true' or 'false'"),
    "bad-flow-id": (mininet_json(data__unpacked__0__debug__flowId=["h000 x h100 1"]),
                    "flowId: expected 'host port host port'"),
    "wrong-port": (mininet_json(data__unpacked__0__debug__flowId=["h000 1 h100 2"]),
                   "no end on server port 50000"),
    "no-records": ("[]", "no flow records"),
}


@pytest.mark.parametrize("case", sorted(JSON_CASES))
def test_malformed_mininet_json(tmp_path: Path, case: str) -> None:
    content, pattern = JSON_CASES[case]
    path = tmp_path / f"{case}.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    assert_trace_error(load_mininet_records, path, pattern)


def test_malformed_mininet_csv(tmp_path: Path) -> None:
    good = reference_path(MININET_CSV).read_text().splitlines()
    (tmp_path / "cols.csv").write_text("a,b,c\n1,2,3\n")
    assert_trace_error(load_mininet_records, tmp_path / "cols.csv", "header 'a,b,c', expected")
    (tmp_path / "short.csv").write_text("\n".join([good[0], "1,ps,tcp"]) + "\n")
    assert_trace_error(load_mininet_records, tmp_path / "short.csv",
                       "line 2: expected 15 columns, got 3")
    bad = good[1].split(",")
    bad[13] = "soon"
    (tmp_path / "value.csv").write_text("\n".join([good[0], ",".join(bad)]) + "\n")
    assert_trace_error(load_mininet_records, tmp_path / "value.csv", "line 2: bad value")


NETCDF_CASES: dict[str, tuple[Callable[[Path], None], str]] = {
    "empty": (lambda p: p.write_bytes(b""), "empty file"),
    "text": (lambda p: p.write_text("not netcdf"), "not a netCDF file"),
    "cut": (lambda p: (fake_ns3_result().to_netcdf(p), p.write_bytes(p.read_bytes()[:600])),
            "cannot read netCDF"),
    "no-engine": (lambda p: xr.Dataset({"x": ("time", [1.0])}).to_netcdf(p),
                  "no 'engine' attribute"),
    "fluid": (lambda p: xr.Dataset(attrs={"engine": "pathflow fluid"}).to_netcdf(p),
              "engine is 'pathflow fluid', not ns-3"),
    "no-variables": (lambda p: xr.Dataset({"x": ("time", [1.0])},
                                          attrs={"engine": "ns-3 3.44"}).to_netcdf(p),
                     "missing flow_rate, link_departure, queue"),
}


@pytest.mark.parametrize("case", sorted(NETCDF_CASES))
def test_malformed_ns3_result(tmp_path: Path, case: str) -> None:
    make, pattern = NETCDF_CASES[case]
    path = tmp_path / f"{case}.nc"
    make(path)
    assert_trace_error(load_ns3, path, pattern)


def test_error_messages_are_single_line_for_library_errors(tmp_path: Path) -> None:
    # json / dpkt / netCDF messages can span lines; TraceError flattens them.
    path = tmp_path / "x.json"
    path.write_text("[\n{\n")
    assert_trace_error(load_mininet_records, path, "not valid JSON .* at line 3 column 1")
