"""Loading traces and measurements into Datasets with the names and units of simulation results.

Every loader returns an `xarray.Dataset` that uses the vocabulary of `pathflow.results`
(dimensions `time`, `link`, `flow`; rates in bytes/s, sizes in bytes, times in s; every variable
carries a `units` attribute), so that `pathflow.metrics` and the comparison functions apply
unchanged. A file that cannot be read raises `TraceError` (a `ValueError`) whose one-line message
starts with the file name and says what is wrong.

=========================  ==============================================================
loader                     returns
=========================  ==============================================================
`load_pcap`                pcap / pcapng / gzip of either: `flow_rate`, `payload_rate`
                           (time, flow) and `link_departure` (time, link), bytes/s, binned
                           by numba; flows are data-carrying TCP/UDP 5-tuples
`read_packets`             the per-packet table behind `load_pcap` (`Packets`)
`load_ns3`                 a saved ns-3 result (netCDF from `run_ns3` / `simulate_ns3`)
`load_queue_trace`         a `time,queue` CSV (s, packets) -> `queue` (time, link), bytes
`load_mininet_records`     the Mininet MPTCP fat-tree records (JSON, or the shipped CSV
                           extract) -> (record, flow[, path]) goodput, throughput, fct, ...
`write_mininet_csv`        writes that CSV extract from the JSON
`reference_path`           the copies shipped in `pathflow/validation/data/`
=========================  ==============================================================
"""

from __future__ import annotations

import csv
import functools
import gzip
import io
import json
import math
import mmap
import re
import socket
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import dpkt
import numpy as np
import xarray as xr
from numba import njit

__all__ = [
    "Packets",
    "TraceError",
    "load_mininet_records",
    "load_ns3",
    "load_pcap",
    "load_queue_trace",
    "read_packets",
    "reference_path",
    "write_mininet_csv",
]


class TraceError(ValueError):
    """A trace file that cannot be read; the message names the file and the problem."""


def _error(path: Path | str, problem: object) -> TraceError:
    # One line, whatever the underlying library printed: the CLI shows it as is.
    text = " ".join(str(problem).split())
    return TraceError(f"{path}: {text}")


def reference_path(name: str) -> Path:
    """Path of a reference file shipped with pathflow (e.g. 'hardware_dctcp_queue.csv')."""
    path = Path(str(resources.files("pathflow.validation").joinpath("data", name)))
    if not path.exists():
        raise TraceError(f"{name}: no such reference file in {path.parent}")
    return path


def _read_bytes_head(path: Path, size: int) -> bytes:
    try:
        with path.open("rb") as f:
            return f.read(size)
    except FileNotFoundError:
        raise _error(path, "no such file") from None
    except IsADirectoryError:
        raise _error(path, "is a directory, not a file") from None
    except OSError as error:
        raise _error(path, f"cannot read ({error.strerror or error})") from None


# --------------------------------------------------------------------------------------
# CSV queue traces
# --------------------------------------------------------------------------------------

_QUEUE_COLUMNS = ("time", "queue")


def load_queue_trace(path: str | Path, packet_bytes: float = 1514.0, link: str = "bottleneck",
                     source: str | None = None) -> xr.Dataset:
    """A queue trace CSV as a Dataset.

    The file has two numeric columns, `time` (s, strictly increasing) and `queue` (packets,
    >= 0), optionally under a `time,queue` header line; lines starting with '#' are comments.
    Returns `queue` (time, link) in bytes (packets * packet_bytes; attrs["packet_bytes"]
    keeps the factor) with `time` in s as in the file (no offset is subtracted).
    """
    path = Path(path)
    head = _read_bytes_head(path, 1)
    if not head:
        raise _error(path, "empty file (expected a time,queue CSV)")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise _error(path, "not a text file (expected a time,queue CSV)") from None
    except OSError as error:
        raise _error(path, f"cannot read ({error.strerror or error})") from None
    time, queue = _parse_queue_csv(path, text)
    return xr.Dataset(
        {"queue": (("time", "link"), (queue * packet_bytes)[:, None], {"units": "bytes"})},
        coords={"time": ("time", time, {"units": "s"}), "link": [link]},
        attrs={"engine": source or f"trace {path.name}", "packet_bytes": packet_bytes},
    )


def _parse_queue_csv(path: Path, text: str) -> tuple[np.ndarray, np.ndarray]:
    """Rows of (time, queue); every problem is reported with its line number."""
    times: list[float] = []
    queues: list[float] = []
    seen_data = False
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        cells = [cell.strip() for cell in stripped.split(",")]
        if not seen_data and not _is_number(cells[0]):
            # A header is allowed once, before the data, and must name the two columns.
            if tuple(cell.lower() for cell in cells) != _QUEUE_COLUMNS:
                raise _error(path, f"line {number}: header {stripped!r}, expected 'time,queue' "
                                   f"(or no header)")
            seen_data = True
            continue
        seen_data = True
        if len(cells) != 2:
            raise _error(path, f"line {number}: expected 2 columns (time in s, queue in "
                               f"packets), got {len(cells)}: {stripped[:60]!r}")
        try:
            t, q = float(cells[0]), float(cells[1])
        except ValueError:
            raise _error(path, f"line {number}: not numbers: {stripped[:60]!r}") from None
        if not (math.isfinite(t) and math.isfinite(q)):
            raise _error(path, f"line {number}: non-finite value: {stripped[:60]!r}")
        if q < 0:
            raise _error(path, f"line {number}: negative queue {q:g}")
        if times and t <= times[-1]:
            raise _error(path, f"line {number}: time {t!r} does not increase "
                               f"(previous {times[-1]!r})")
        times.append(t)
        queues.append(q)
    if not times:
        raise _error(path, "no data rows (expected time,queue lines)")
    return np.array(times), np.array(queues)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


# --------------------------------------------------------------------------------------
# pcap / pcapng
# --------------------------------------------------------------------------------------

_PCAP_MAGICS = {
    dpkt.pcap.TCPDUMP_MAGIC, dpkt.pcap.TCPDUMP_MAGIC_NANO, dpkt.pcap.PMUDPCT_MAGIC,
    dpkt.pcap.PMUDPCT_MAGIC_NANO, dpkt.pcap.MODPCAP_MAGIC, dpkt.pcap.PACPDOM_MAGIC,
}  # fmt: skip
_NANO_MAGICS = {dpkt.pcap.TCPDUMP_MAGIC_NANO, dpkt.pcap.PMUDPCT_MAGIC_NANO}
_LE_MAGICS = {dpkt.pcap.PMUDPCT_MAGIC, dpkt.pcap.PMUDPCT_MAGIC_NANO, dpkt.pcap.PACPDOM_MAGIC}
_PCAPNG_SHB = 0x0A0D0D0A
_GZIP_MAGIC = b"\x1f\x8b"
# A record longer than this is corruption, not a packet (pcap's largest snaplen is 256 KiB).
_MAX_RECORD = 1 << 20

# Link-layer header types (LINKTYPE_* numbers as written in capture files).
_LINKTYPE_NAMES = {
    0: "NULL (BSD loopback)", 1: "ETHERNET", 9: "PPP", 12: "RAW", 14: "RAW", 50: "PPP_HDLC",
    101: "RAW", 108: "LOOP", 113: "LINUX_SLL", 228: "IPV4", 229: "IPV6", 276: "LINUX_SLL2",
}  # fmt: skip
_PPP_IPV4, _PPP_IPV6 = 0x0021, 0x0057
_TCP, _UDP = 6, 17
_PROTO_NAMES = {_TCP: "tcp", _UDP: "udp"}


@dataclass(frozen=True)
class Packets:
    """Per-packet table of a capture (one entry per captured frame that carries IP).

    `time` is seconds since `origin` (an integer second of the capture's clock, so that epoch
    timestamps keep nanosecond precision in float64). `ip_bytes` is the IP total length from
    the header (IPv4 total length, IPv6 40 + payload length), so snap-length truncation does
    not shrink it; `frame_bytes` is the original link-layer frame length. `payload_bytes` is
    the TCP/UDP payload (IP length minus IP and L4 headers; 0 for other protocols).
    `conn` indexes `connections` (src_ip, src_port, dst_ip, dst_port, proto), -1 for
    packets without ports (ICMP, non-first fragments, L4 header not captured); `pair`
    indexes `pairs` (src_ip, dst_ip).
    """

    path: Path
    origin: int
    time: np.ndarray
    frame_bytes: np.ndarray
    ip_bytes: np.ndarray
    payload_bytes: np.ndarray
    conn: np.ndarray
    pair: np.ndarray
    interface: np.ndarray
    connections: list[tuple[str, int, str, int, int]]
    pairs: list[tuple[str, str]]
    interfaces: list[str]
    linktypes: list[int]
    frames: int
    non_ip_frames: int
    truncated: bool


def read_packets(path: str | Path, allow_truncated: bool = False) -> Packets:
    """Read a capture (pcap, pcapng, or either gzip-compressed) into a `Packets` table.

    Link types: Ethernet (with VLAN tags), PPP (ns-3 point-to-point, with or without HDLC
    address/control), raw IPv4/IPv6, Linux cooked (SLL, SLL2) and BSD loopback. Frames that
    do not carry IPv4/IPv6 (ARP, LLDP, ...) are counted in `non_ip_frames` and skipped.
    A capture that ends inside a record raises TraceError unless `allow_truncated`, which
    drops the partial record (what a killed tcpdump leaves) and sets `truncated`.
    """
    path = Path(path)
    head = _read_bytes_head(path, 4)
    if not head:
        raise _error(path, "empty file (expected a pcap or pcapng capture)")
    if head[:2] == _GZIP_MAGIC:
        try:
            with gzip.open(path, "rb") as f:
                data: bytes | mmap.mmap = f.read()
        except (OSError, EOFError) as error:
            raise _error(path, f"broken gzip stream ({error})") from None
        return _read_capture_checked(path, data, allow_truncated)
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as view:
        # mmap: large captures are paged in as they are walked, never copied whole.
        return _read_capture_checked(path, view, allow_truncated)


def _read_capture_checked(path: Path, data: bytes | mmap.mmap, allow_truncated: bool) -> Packets:
    try:
        return _read_capture(path, data, allow_truncated)
    except (dpkt.UnpackError, struct.error, IndexError) as error:
        # A file or block header that dpkt cannot unpack (frames are checked one by one).
        raise _error(path, f"malformed capture ({type(error).__name__}: {error})") from None


class _Collector:
    """Accumulates decoded packets; connection and address-pair keys are interned."""

    def __init__(self) -> None:
        self.sec: list[int] = []
        self.frac: list[float] = []
        self.frame: list[int] = []
        self.ip: list[int] = []
        self.payload: list[int] = []
        self.conn: list[int] = []
        self.pair: list[int] = []
        self.iface: list[int] = []
        self.conn_index: dict[tuple[str, int, str, int, int], int] = {}
        self.pair_index: dict[tuple[str, str], int] = {}
        self.frames = 0
        self.non_ip = 0

    def add(self, decode: _Decoder, iface: int, sec: int, frac: float, frame: bytes,
            wire_len: int) -> None:
        self.frames += 1
        fields = decode(frame)
        if fields is None:
            self.non_ip += 1
            return
        src, dst, proto, ip_len, payload, sport, dport = fields
        pair = self.pair_index.setdefault((src, dst), len(self.pair_index))
        conn = -1
        if sport >= 0:
            key = (src, sport, dst, dport, proto)
            conn = self.conn_index.setdefault(key, len(self.conn_index))
        self.sec.append(sec)
        self.frac.append(frac)
        self.frame.append(wire_len)
        self.ip.append(ip_len)
        self.payload.append(payload)
        self.conn.append(conn)
        self.pair.append(pair)
        self.iface.append(iface)


_Fields = tuple[str, str, int, int, int, int, int]


class _Decoder:
    """Frame -> (src, dst, proto, ip_bytes, payload_bytes, sport, dport) or None (not IP)."""

    def __init__(self, path: Path, linktype: int) -> None:
        if linktype not in _LINKTYPE_NAMES:
            raise _error(path, f"unsupported link type {linktype} (supported: "
                               f"{', '.join(sorted(set(_LINKTYPE_NAMES.values())))})")
        self.linktype = linktype

    def __call__(self, frame: bytes) -> _Fields | None:
        try:
            return _decode_ip(self._network_layer(frame))
        except (dpkt.UnpackError, struct.error, IndexError, ValueError):
            # A frame too short to hold the headers it announces: not countable as IP.
            return None

    def _network_layer(self, frame: bytes) -> bytes | dpkt.Packet | None:
        lt = self.linktype
        if lt in (12, 14, 101, 228, 229):
            return frame
        if lt in (9, 50):
            return _ppp_payload(frame)
        if lt in (1, 113, 276):
            # dpkt decodes the IP packet inside (VLAN tags included); hand the object on.
            kind = {1: dpkt.ethernet.Ethernet, 113: dpkt.sll.SLL, 276: dpkt.sll2.SLL2}[lt]
            inner = kind(frame).data
            return inner if isinstance(inner, dpkt.ip.IP | dpkt.ip6.IP6) else None
        # NULL / LOOP: a 4-byte address family in host or network order.
        family = struct.unpack_from("<I", frame)[0]
        if family > 0xFFFF:
            family = struct.unpack_from(">I", frame)[0]
        return frame[4:] if family in (2, 24, 28, 30) else None


def _ppp_payload(frame: bytes) -> bytes | None:
    # ns-3 writes a bare 2-byte protocol field; HDLC-framed PPP adds 0xff 0x03 before it,
    # and protocol-field compression shortens 0x0021 to 0x21 (odd first byte).
    if frame[:2] == b"\xff\x03":
        frame = frame[2:]
    if frame[0] & 1:
        proto, rest = frame[0], frame[1:]
    else:
        proto, rest = struct.unpack_from(">H", frame)[0], frame[2:]
    return rest if proto in (_PPP_IPV4, _PPP_IPV6) else None


def _decode_ip(raw: bytes | dpkt.Packet | None) -> _Fields | None:
    if raw is None or (isinstance(raw, bytes) and not raw):
        return None
    if isinstance(raw, dpkt.ip.IP | dpkt.ip6.IP6):
        ip: Any = raw
        version = 4 if isinstance(raw, dpkt.ip.IP) else 6
    else:
        version = raw[0] >> 4
        ip = dpkt.ip.IP(raw) if version == 4 else dpkt.ip6.IP6(raw) if version == 6 else None
    if version == 4:
        # 0 in the length field: a TSO capture, whose frame holds the whole packet.
        ip_len = ip.len or ip.hl * 4 + len(ip.data)
        l4_offset = ip.hl * 4
        fragment = ip.offset != 0 or bool(ip.mf)
        src, dst = _ntoa(ip.src), _ntoa(ip.dst)
    elif version == 6:
        ip_len = 40 + (ip.plen or len(bytes(ip.data)))
        l4_offset = 40 + sum(ext.length for ext in ip.all_extension_headers)
        fragment = 44 in ip.extension_hdrs
        src, dst = _ntoa(ip.src), _ntoa(ip.dst)
    else:
        return None
    proto = ip.p
    l4 = ip.data
    if fragment or proto not in (_TCP, _UDP) or not isinstance(l4, dpkt.tcp.TCP | dpkt.udp.UDP):
        # Ports unknown (ICMP, fragment, or L4 header cut off by the snap length): the packet
        # still counts toward the link, not toward any flow.
        return src, dst, proto, ip_len, 0, -1, -1
    l4_header = (l4.off * 4) if proto == _TCP else 8
    payload = max(0, ip_len - l4_offset - l4_header)
    return src, dst, proto, ip_len, payload, l4.sport, l4.dport


@functools.lru_cache(maxsize=1 << 16)
def _ntoa(address: bytes) -> str:
    # Cached: a capture has few addresses and many packets.
    return socket.inet_ntop(socket.AF_INET if len(address) == 4 else socket.AF_INET6, address)


def _read_capture(path: Path, data: bytes | mmap.mmap, allow_truncated: bool) -> Packets:
    size = len(data)
    if size >= 4 and struct.unpack_from("<I", data)[0] == _PCAPNG_SHB:
        records = _pcapng_records(path, data, allow_truncated)
    elif size >= 4 and struct.unpack_from(">I", data)[0] in _PCAP_MAGICS:
        records = _pcap_records(path, data, allow_truncated)
    else:
        magic = bytes(data[:4]).hex()
        raise _error(path, f"not a pcap or pcapng capture (first bytes 0x{magic})")
    collector = _Collector()
    interfaces: list[str] = []
    linktypes: list[int] = []
    decoders: list[_Decoder | None] = []
    truncated = False
    for item in records:
        if isinstance(item, _Interface):
            interfaces.append(item.name)
            linktypes.append(item.linktype)
            decoders.append(None)
        elif isinstance(item, _Truncated):
            truncated = True
        else:
            iface, sec, frac, frame, wire_len = item
            decoder = decoders[iface]
            if decoder is None:
                # Made on the interface's first packet: an unsupported link type is an error
                # only if that interface captured something.
                decoder = decoders[iface] = _Decoder(path, linktypes[iface])
            collector.add(decoder, iface, sec, frac, frame, wire_len)
    if collector.frames == 0:
        raise _error(path, "capture holds no packets")
    if not collector.sec:
        raise _error(path, f"no IPv4/IPv6 packets among {collector.frames} frames "
                           f"(link type {', '.join(map(str, sorted(set(linktypes))))})")
    # Re-base on an integer second before adding the fraction: at Unix-epoch magnitudes a
    # float64 resolves only ~0.2 us, relative to `origin` it keeps nanoseconds.
    sec = np.asarray(collector.sec, dtype=np.int64)
    origin = int(sec.min())
    time = (sec - origin).astype(np.float64) + np.asarray(collector.frac, dtype=np.float64)
    return Packets(
        path=path, origin=origin, time=time,
        frame_bytes=np.asarray(collector.frame, dtype=np.int64),
        ip_bytes=np.asarray(collector.ip, dtype=np.int64),
        payload_bytes=np.asarray(collector.payload, dtype=np.int64),
        conn=np.asarray(collector.conn, dtype=np.int64),
        pair=np.asarray(collector.pair, dtype=np.int64),
        interface=np.asarray(collector.iface, dtype=np.int64),
        connections=list(collector.conn_index), pairs=list(collector.pair_index),
        interfaces=interfaces, linktypes=linktypes, frames=collector.frames,
        non_ip_frames=collector.non_ip, truncated=truncated,
    )  # fmt: skip


@dataclass(frozen=True)
class _Interface:
    name: str
    linktype: int


@dataclass(frozen=True)
class _Truncated:
    offset: int


_Record = tuple[int, int, float, bytes, int]  # interface, seconds, fraction, frame, wire length


def _pcap_records(path: Path, data: bytes | mmap.mmap,
                  allow_truncated: bool) -> Iterator[_Interface | _Truncated | _Record]:
    """Classic libpcap: file header, then (record header, frame) pairs."""
    hdr_len = dpkt.pcap.FileHdr.__hdr_len__
    if len(data) < hdr_len:
        raise _error(path, f"truncated pcap file header ({len(data)} of {hdr_len} bytes)")
    # dpkt names magics as read big-endian: the PMUDPCT / PACPDOM spellings are
    # little-endian files. Its header classes know both orders and the "modified pcap" layout.
    magic = struct.unpack_from(">I", data)[0]
    little = magic in _LE_MAGICS
    file_hdr = (dpkt.pcap.LEFileHdr if little else dpkt.pcap.FileHdr)(bytes(data[:hdr_len]))
    pkt_cls = dpkt.pcap.MAGIC_TO_PKT_HDR[magic]
    divisor = 1e9 if magic in _NANO_MAGICS else 1e6
    yield _Interface("captured", file_hdr.linktype & 0xFFFF)  # high bits: FCS flags
    rec_len = pkt_cls.__hdr_len__
    offset, size, index = hdr_len, len(data), 0
    while offset < size:
        if offset + rec_len > size:
            yield _truncation(path, offset, index, f"record header cut off ({size - offset} "
                                                   f"of {rec_len} bytes)", allow_truncated)
            return
        hdr = pkt_cls(bytes(data[offset:offset + rec_len]))
        if hdr.caplen > _MAX_RECORD or hdr.tv_usec >= divisor:
            raise _error(path, f"corrupt record {index} at byte {offset} (captured length "
                               f"{hdr.caplen}, sub-second field {hdr.tv_usec})")
        start = offset + rec_len
        if start + hdr.caplen > size:
            yield _truncation(path, offset, index, f"frame cut off ({size - start} of "
                                                   f"{hdr.caplen} bytes)", allow_truncated)
            return
        yield 0, hdr.tv_sec, hdr.tv_usec / divisor, bytes(data[start:start + hdr.caplen]), \
            hdr.len
        offset = start + hdr.caplen
        index += 1


def _truncation(path: Path, offset: int, index: int, what: str, allow: bool) -> _Truncated:
    if not allow:
        raise _error(path, f"truncated capture: record {index} at byte {offset}: {what}")
    return _Truncated(offset)


def _pcapng_records(path: Path, data: bytes | mmap.mmap,
                    allow_truncated: bool) -> Iterator[_Interface | _Truncated | _Record]:
    """pcapng: blocks. Interfaces of every section are numbered globally, in order."""
    ng = dpkt.pcapng
    offset, size, index = 0, len(data), 0
    little = True
    section: list[tuple[int, float, int]] = []  # per interface: (units/s, offset s, global id)
    n_interfaces = 0
    while offset < size:
        if offset + 12 > size:
            yield _truncation(path, offset, index, "block header cut off", allow_truncated)
            return
        block_type = struct.unpack_from("<I", data, offset)[0]
        if block_type == _PCAPNG_SHB:
            bom = struct.unpack_from("<I", data, offset + 8)[0]
            if bom not in (0x1A2B3C4D, 0x4D3C2B1A):
                raise _error(path, f"corrupt pcapng section header at byte {offset}")
            little = bom == 0x1A2B3C4D
            section = []
        order = "<" if little else ">"
        block_type, block_len = struct.unpack_from(order + "II", data, offset)
        if block_len < 12 or block_len % 4 or block_len > _MAX_RECORD + 64:
            raise _error(path, f"corrupt pcapng block at byte {offset} (length {block_len})")
        if offset + block_len > size:
            yield _truncation(path, offset, index, f"block cut off ({size - offset} of "
                                                   f"{block_len} bytes)", allow_truncated)
            return
        block = bytes(data[offset:offset + block_len])
        if block_type == ng.PCAPNG_BT_IDB:
            idb = (ng.InterfaceDescriptionBlockLE if little else ng.InterfaceDescriptionBlock)(
                block)
            units, ts_offset, name = 1e6, 0.0, f"if{n_interfaces}"
            for opt in idb.opts:
                if opt.code == ng.PCAPNG_OPT_IF_TSRESOL:
                    raw = opt.data[0]
                    units = float(2 ** (raw & 0x7F) if raw & 0x80 else 10 ** (raw & 0x7F))
                elif opt.code == ng.PCAPNG_OPT_IF_TSOFFSET:
                    ts_offset = float(struct.unpack(order + "q", opt.data[:8])[0])
                elif opt.code == ng.PCAPNG_OPT_IF_NAME:
                    name = opt.data.rstrip(b"\x00").decode(errors="replace") or name
            section.append((int(units), ts_offset, n_interfaces))
            n_interfaces += 1
            yield _Interface(name, idb.linktype)
        elif block_type in (ng.PCAPNG_BT_EPB, ng.PCAPNG_BT_PB):
            if block_type == ng.PCAPNG_BT_EPB:
                epb = (ng.EnhancedPacketBlockLE if little else ng.EnhancedPacketBlock)(block)
                iface, wire_len = epb.iface_id, epb.pkt_len
            else:
                epb = (ng.PacketBlockLE if little else ng.PacketBlock)(block)
                iface, wire_len = epb.iface_id, epb.pkt_len
            if iface >= len(section):
                raise _error(path, f"packet block at byte {offset} names interface {iface}, "
                                   f"but the section describes {len(section)}")
            units, ts_offset, global_id = section[iface]
            ticks = (epb.ts_high << 32) | epb.ts_low
            sec, rest = divmod(ticks, units)
            yield (global_id, sec + int(ts_offset), rest / units + (ts_offset % 1),
                   epb.pkt_data, wire_len)
            index += 1
        elif block_type == ng.PCAPNG_BT_SPB:
            raise _error(path, f"simple packet block at byte {offset}: it has no timestamp")
        offset += block_len


@njit(cache=True)
def _bin_packets(time: np.ndarray, flow: np.ndarray, ip_bytes: np.ndarray,
                 payload_bytes: np.ndarray, on_link: np.ndarray, t0: float, width: float,
                 n_bins: int, n_flows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bytes per bin [t0 + k w, t0 + (k + 1) w): per flow (IP, payload) and on the link."""
    flow_ip = np.zeros((n_bins, n_flows))
    flow_payload = np.zeros((n_bins, n_flows))
    link = np.zeros(n_bins)
    for i in range(time.size):
        k = int(np.floor((time[i] - t0) / width))
        if k < 0 or k >= n_bins:
            continue
        f = flow[i]
        if f >= 0:
            flow_ip[k, f] += ip_bytes[i]
            flow_payload[k, f] += payload_bytes[i]
        if on_link[i]:
            link[k] += ip_bytes[i]
    return flow_ip, flow_payload, link


_MAX_CELLS = 2e8  # 1.6 GB of float64: beyond this a bin width is surely a mistake


def load_pcap(path: str | Path, bin_width: float = 1e-3, *, t0: float | None = None,
              duration: float | None = None, link: str = "captured",
              direction: Literal["all", "data"] = "all", tx_rate_bps: float | None = None,
              interface: int | str | None = None,
              allow_truncated: bool = False) -> xr.Dataset:
    """Per-flow rate time series of a packet capture (pcap / pcapng, optionally gzipped).

    Returns a Dataset with
      * `flow_rate` (time, flow), bytes/s: IP bytes (headers included, link-layer header
        excluded, like ns-3's `link_departure` and the fluid model's rates) of the flow's
        packets seen in each bin, divided by `bin_width`;
      * `payload_rate` (time, flow), bytes/s: their TCP/UDP payload (retransmissions
        included: a sender-side rate, comparable to goodput only without losses);
      * `link_departure` (time, link), bytes/s: IP bytes of every IP packet in the bin (one
        link: the capture is taken to be one link; `direction` below);
    with coordinates `time` (s since `t0`, the end of each bin, as in simulation results:
    the rate at `time` averages over the preceding `bin_width`), `flow` (0..n-1 in order of
    first appearance), `src` / `dst` ("ip:port", IPv6 as "[ip]:port"), `proto` ("tcp" /
    "udp") and `start` (s since `t0` of the flow's first packet).

    A flow is one direction of a TCP or UDP 5-tuple that carries payload in at least one
    packet: for a bulk TCP transfer the data direction is a flow and the pure-ACK reverse
    direction is not (its bytes still count on the link when `direction="all"`). A
    connection with data both ways gives two flows.

    t0: capture-clock time of the first bin's left edge; default: the first packet's time
        rounded down to a multiple of bin_width. Pass 0.0 for simulator captures so that the
        bins line up with the simulator's sample instants.
    duration: length of the binned window (s); default: up to the last packet.
    direction: "all" counts every IP packet on the link; "data" only those travelling in
        the direction of some flow (same source and destination address), which keeps the
        reverse-path ACKs of a bidirectional capture (ns-3's point-to-point pcap, tcpdump on
        an interface) out of `link_departure`.
    tx_rate_bps: if given, timestamps mark each frame's first bit on a link of this rate and
        are moved to its last bit (t + frame bytes * 8 / rate), the instant at which ns-3 and
        the fluid model count a departure. Use it only for transmit-side timestamps.
    interface: which interface of a multi-interface pcapng to use (index or name); required
        when packets were captured on more than one.
    allow_truncated: accept a capture whose last record is cut off (dropping that record).

    Raises TraceError for unreadable captures (empty, truncated, not a capture, unsupported
    link type, no IP packets) and ValueError for bad arguments.
    """
    if not (bin_width > 0 and math.isfinite(bin_width)):
        raise ValueError(f"bin_width must be a positive number of seconds, got {bin_width!r}")
    if direction not in ("all", "data"):
        raise ValueError(f"direction must be 'all' or 'data', got {direction!r}")
    if tx_rate_bps is not None and not tx_rate_bps > 0:
        raise ValueError(f"tx_rate_bps must be > 0, got {tx_rate_bps!r}")
    if duration is not None and not duration > 0:
        raise ValueError(f"duration must be > 0, got {duration!r}")
    path = Path(path)
    packets = read_packets(path, allow_truncated=allow_truncated)

    keep = _select_interface(packets, interface)
    time = packets.time[keep]
    if tx_rate_bps is not None:
        time = time + packets.frame_bytes[keep] * 8.0 / tx_rate_bps
    conn = packets.conn[keep]
    pair = packets.pair[keep]
    ip_bytes = packets.ip_bytes[keep].astype(np.float64)
    payload = packets.payload_bytes[keep].astype(np.float64)

    # Flows: connections (5-tuple directions) that carry payload, in order of first packet.
    n_conn = len(packets.connections)
    carried = np.zeros(n_conn)
    np.add.at(carried, conn[conn >= 0], payload[conn >= 0])
    first = np.full(n_conn, np.inf)
    np.minimum.at(first, conn[conn >= 0], time[conn >= 0])
    data_conns = [c for c in np.argsort(first, kind="stable") if carried[c] > 0]
    flow_of_conn = np.full(n_conn + 1, -1, dtype=np.int64)  # last slot: conn == -1
    flow_of_conn[data_conns] = np.arange(len(data_conns))
    flow = flow_of_conn[conn]

    if direction == "all":
        on_link = np.ones(time.size, dtype=np.bool_)
    else:
        data_pairs = _data_pairs(packets, data_conns)
        on_link = np.isin(pair, np.fromiter(data_pairs, dtype=np.int64, count=len(data_pairs)))

    origin = packets.origin
    if t0 is None:
        start = math.floor(float(time.min()) / bin_width) * bin_width
    else:
        start = float(t0) - origin
    if duration is None:
        # Enough bins to hold the last packet (bins are half-open on the right).
        n_bins = max(1, math.floor((float(time.max()) - start) / bin_width) + 1)
    else:
        n_bins = max(1, round(float(duration) / bin_width))
    n_flows = len(data_conns)
    if n_bins * (2 * n_flows + 1) > _MAX_CELLS:
        raise ValueError(f"{path}: {n_bins} bins of {bin_width:g} s x {n_flows} flows is too "
                         f"large; use a larger bin_width or a shorter duration")
    flow_ip, flow_payload, link_bytes = _bin_packets(
        time, flow, ip_bytes, payload, on_link, start, float(bin_width), n_bins, n_flows)

    conns = [packets.connections[c] for c in data_conns]
    return xr.Dataset(
        {
            "flow_rate": (("time", "flow"), flow_ip / bin_width, {
                "units": "bytes/s",
                "long_name": "IP bytes of the flow's packets seen in the interval, per second"}),
            "payload_rate": (("time", "flow"), flow_payload / bin_width, {
                "units": "bytes/s",
                "long_name": "TCP/UDP payload bytes seen in the interval (retransmissions "
                             "included), per second"}),
            "link_departure": (("time", "link"), link_bytes[:, None] / bin_width, {
                "units": "bytes/s",
                "long_name": "IP bytes of the packets seen in the interval, per second"}),
        },
        coords={
            "time": ("time", (np.arange(n_bins) + 1) * bin_width,
                     {"units": "s", "long_name": "end of each bin, s since t0"}),
            "link": ("link", np.array([link], dtype=object)),
            "flow": ("flow", np.arange(n_flows)),
            "src": ("flow", np.array([_endpoint(c[0], c[1]) for c in conns], dtype=object)),
            "dst": ("flow", np.array([_endpoint(c[2], c[3]) for c in conns], dtype=object)),
            "proto": ("flow", np.array([_PROTO_NAMES[c[4]] for c in conns], dtype=object)),
            "start": ("flow", first[data_conns] - start if n_flows else np.zeros(0),
                      {"units": "s", "long_name": "first packet, s since t0"}),
        },
        attrs={
            "engine": f"pcap {path.name}",
            "source": str(path),
            "sample_interval": float(bin_width),
            "t0": origin + start,
            "link_type": ", ".join(_LINKTYPE_NAMES.get(lt, str(lt))
                                   for lt in sorted(set(packets.linktypes))),
            "direction": direction,
            "tx_rate_bps": float(tx_rate_bps) if tx_rate_bps is not None else 0.0,
            "ip_packets": int(time.size),
            "frames": packets.frames,
            "non_ip_frames": packets.non_ip_frames,
            "truncated": int(packets.truncated),
        },
    )


def _data_pairs(packets: Packets, data_conns: Sequence[int]) -> set[int]:
    index = {pair: i for i, pair in enumerate(packets.pairs)}
    return {index[(packets.connections[c][0], packets.connections[c][2])] for c in data_conns}


def _endpoint(ip: str, port: int) -> str:
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def _select_interface(packets: Packets, interface: int | str | None) -> np.ndarray:
    """Mask of the packets of one interface (all of them for single-interface captures)."""
    used = sorted(set(packets.interface.tolist()))
    names = packets.interfaces
    if interface is None:
        if len(used) > 1:
            listed = ", ".join(f"{i} ({names[i]})" for i in used)
            raise _error(packets.path, f"packets from {len(used)} interfaces ({listed}); "
                                       f"pass interface= to pick the link")
        return np.ones(packets.time.size, dtype=bool)
    if isinstance(interface, str):
        if interface not in names:
            raise _error(packets.path, f"no interface named {interface!r} (have "
                                       f"{', '.join(names)})")
        interface = names.index(interface)
    if not 0 <= interface < len(names):
        raise _error(packets.path, f"no interface {interface} (have {len(names)})")
    mask = packets.interface == interface
    if not mask.any():
        raise _error(packets.path, f"no IP packets on interface {interface} ({names[interface]})")
    return mask


# --------------------------------------------------------------------------------------
# ns-3 results
# --------------------------------------------------------------------------------------

# Attributes that are JSON text by design (Ns3Config.from_json reads it) and stay text.
_JSON_TEXT_ATTRS = frozenset({"config"})


def load_ns3(path: str | Path) -> xr.Dataset:
    """A saved ns-3 result (netCDF written by `Dataset.to_netcdf` or
    `pathflow.results.write_dataset` from `run_ns3` / `simulate_ns3`), loaded into memory.

    Returns the Dataset as the runner made it: `queue` (bytes), `link_departure`, `drops`,
    `marks`, `flow_rate` (bytes/s), `cwnd` (bytes), `rtt` (s), `alpha` over (time, link /
    flow), with its attrs. Attributes that `write_dataset` stored as JSON text because they
    were dicts or lists become dicts and lists again; `config` stays the JSON text that
    `Ns3Config.from_json` reads.
    """
    path = Path(path)
    head = _read_bytes_head(path, 8)
    if not head:
        raise _error(path, "empty file (expected a netCDF ns-3 result)")
    if not (head.startswith(b"\x89HDF\r\n\x1a\n") or head.startswith(b"CDF")):
        raise _error(path, f"not a netCDF file (first bytes 0x{head[:4].hex()})")
    try:
        with xr.open_dataset(path) as opened:
            ds = opened.load()
    except Exception as error:  # the netCDF back ends raise many types; all mean "unreadable"
        raise _error(path, f"cannot read netCDF ({type(error).__name__}: {error})") from None
    engine = ds.attrs.get("engine")
    if engine is None:
        raise _error(path, "no 'engine' attribute: not a saved pathflow / ns-3 result")
    if not str(engine).startswith("ns-3"):
        raise _error(path, f"engine is {engine!r}, not ns-3")
    missing = [name for name in ("flow_rate", "link_departure", "queue") if name not in ds]
    if "time" not in ds.dims or missing:
        raise _error(path, f"not an ns-3 result: missing {', '.join(missing) or 'time'}")
    ds.attrs = {key: _decode_attr(key, value) for key, value in ds.attrs.items()}
    return ds


def _decode_attr(key: str, value: Any) -> Any:
    if key in _JSON_TEXT_ATTRS or not isinstance(value, str) or value[:1] not in "{[":
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value  # text that merely starts with a bracket (a TOML table header, say)


# --------------------------------------------------------------------------------------
# Mininet MPTCP fat-tree records (seeds 000/002)
# --------------------------------------------------------------------------------------

_MININET_META = ("router", "proto", "pmanager", "diffports", "juggler", "payloadsize")
_MININET_FLOW = ("goodput", "throughput", "fct", "meanNetworkUtilization")
_MININET_DEBUG = ("fileSize", "totalBytes", "shortestPathTotalBytes", "pathsWithBytes",
                  "flowId")
_CSV_COLUMNS = ("record", "router", "proto", "pmanager", "diffports", "juggler", "payloadsize",
                "flow", "run", "src", "dst", "file_size", "total_bytes", "fct", "paths")
_SERVER_PORT = 50000  # iperf server port of run r is 50000 + r (seed 000's scripts)
_TRANSFERS_PER_RUN = 16
_HOST = re.compile(r"^h([0-9])([0-9])([0-9])$")


@dataclass
class _MininetFlow:
    record: int
    meta: dict[str, Any]
    flow: int
    run: int
    src: str
    dst: str
    file_size: int
    total_bytes: int
    fct: float
    goodput: float
    throughput: float
    utilization: float
    paths: list[tuple[str, int]]


def load_mininet_records(path: str | Path) -> xr.Dataset:
    """The Mininet MPTCP / TCP fat-tree records (silent network) as a Dataset.

    Reads the original JSON (`silent_network_records.json`: a list of test records, each
    `data.metadata` + `data.unpacked[*]` flow records) or the CSV extract shipped as
    `mininet_fattree_flows.csv` (see `write_mininet_csv`). Returns, over dimensions
    `record` (one test configuration: 5 runs x 16 transfers), `flow` (0..79; run =
    flow // 16) and `path` (slots for the paths that carried bytes, at most 4):
      * `goodput` (record, flow), bytes/s: file size / FCT;
      * `throughput` (record, flow), bytes/s: all bytes seen on the network / FCT (both
        directions and every capture point: it exceeds the 2.5 MB/s line rate for about a
        third of the flows, so it is no wire rate);
      * `fct` (record, flow), s: first request packet to the last FIN;
      * `mean_network_utilization` (record, flow), 1: (1/P) sum_p b_p / max_q b_q over the
        P equal-cost shortest paths of the host pair;
      * `total_bytes`, `shortest_path_bytes` (record, flow), bytes; `path_bytes` (record,
        flow, path), bytes (0 in unused slots), with `path_links` naming each path by its
        link ids ("35 > 17 > 0 > 1 > 21 > 38"; 32..47 host-edge, 16..31 edge-aggregate,
        0..15 aggregate-core; "" in unused slots). Paths are undirected: their bytes count
        data and ACKs, so a single-path TCP transfer shows a second path carrying its ACKs
        when the reverse route differs;
    coordinates `router`, `proto`, `pmanager`, `diffports`, `juggler` (bool), `payloadsize`
    (record); `run` (flow); `src` (the iperf client, which sends the data), `dst` (the iperf
    server), `size` (file size, bytes) and `equal_cost_paths` (P: 4 between pods, 2 within a
    pod, 1 under one edge switch) over (record, flow). Rows missing from a record are NaN.
    """
    path = Path(path)
    head = _read_bytes_head(path, 1)
    if not head:
        raise _error(path, "empty file (expected Mininet records: JSON or the CSV extract)")
    csv_extract = path.suffix.lower() == ".csv"
    flows = _mininet_from_csv(path) if csv_extract else _mininet_from_json(path)
    if not flows:
        raise _error(path, "no flow records")
    return _mininet_dataset(path, flows)


def _mininet_from_json(path: Path) -> list[_MininetFlow]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise _error(path, "not a text file (expected Mininet records JSON)") from None
    except json.JSONDecodeError as error:
        raise _error(path, f"not valid JSON ({error.msg} at line {error.lineno} column "
                           f"{error.colno})") from None
    if not isinstance(raw, list):
        raise _error(path, f"expected a JSON list of test records, got {type(raw).__name__}")
    flows: list[_MininetFlow] = []
    for i, record in enumerate(raw):
        where = f"[{i}]"
        data = _field(path, record, "data", dict, where)
        meta = _field(path, data, "metadata", dict, f"{where}.data")
        unpacked = _field(path, data, "unpacked", list, f"{where}.data")
        record_id = _field(path, record, "id", int, where)
        clean = _clean_meta(path, {k: _field(path, meta, k, (str, int), f"{where}.data.metadata")
                                   for k in _MININET_META}, f"{where}.data.metadata")
        for j, item in enumerate(unpacked):
            at = f"{where}.data.unpacked[{j}]"
            values = {k: float(_field(path, item, k, (int, float), at)) for k in _MININET_FLOW}
            flow_id = _field(path, item, "id", int, at)
            debug = _field(path, item, "debug", dict, at)
            dbg = {k: _field(path, debug, k, (int, dict, list), f"{at}.debug")
                   for k in _MININET_DEBUG}
            paths = [(str(k), int(v)) for k, v in dbg["pathsWithBytes"].items()]
            run = flow_id // _TRANSFERS_PER_RUN
            src, dst = _client_server(path, dbg["flowId"], _SERVER_PORT + run, at)
            flows.append(_MininetFlow(
                record=record_id, meta=clean, flow=flow_id, run=run, src=src, dst=dst,
                file_size=int(dbg["fileSize"]), total_bytes=int(dbg["totalBytes"]),
                fct=values["fct"], goodput=values["goodput"], throughput=values["throughput"],
                utilization=values["meanNetworkUtilization"], paths=paths,
            ))  # fmt: skip
    return flows


def _field(path: Path, obj: Any, key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(obj, dict):
        raise _error(path, f"{where}: expected an object, got {type(obj).__name__}")
    if key not in obj:
        raise _error(path, f"{where}.{key}: missing (not Mininet records JSON?)")
    value = obj[key]
    if isinstance(value, bool) or not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise _error(path, f"{where}.{key}: expected {names}, got {type(value).__name__}")
    return value


def _clean_meta(path: Path, meta: dict[str, Any], where: str) -> dict[str, Any]:
    juggler = str(meta["juggler"]).lower()
    if juggler not in ("true", "false"):
        raise _error(path, f"{where}.juggler: expected 'true' or 'false', got {juggler!r}")
    try:
        diffports = int(meta["diffports"])
    except ValueError:
        raise _error(path, f"{where}.diffports: not an integer: {meta['diffports']!r}") from None
    return {"router": str(meta["router"]), "proto": str(meta["proto"]),
            "pmanager": str(meta["pmanager"]), "diffports": diffports,
            "juggler": juggler == "true", "payloadsize": str(meta["payloadsize"])}


def _client_server(path: Path, flow_ids: Any, server_port: int, where: str) -> tuple[str, str]:
    """(client, server) from the subflows' "hostA portA hostB portB" strings: the server is the
    end on the run's iperf port, the client (iperf -c, the data sender) the other end."""
    if not isinstance(flow_ids, list) or not flow_ids:
        raise _error(path, f"{where}.debug.flowId: expected a non-empty list")
    ends: set[tuple[str, str]] = set()
    for text in flow_ids:
        parts = str(text).split()
        if len(parts) != 4 or not (parts[1].isdigit() and parts[3].isdigit()):
            raise _error(path, f"{where}.debug.flowId: expected 'host port host port', "
                               f"got {text!r}")
        a, pa, b, pb = parts[0], int(parts[1]), parts[2], int(parts[3])
        if pa == server_port and pb != server_port:
            ends.add((b, a))
        elif pb == server_port and pa != server_port:
            ends.add((a, b))
        else:
            raise _error(path, f"{where}.debug.flowId: no end on server port {server_port} "
                               f"in {text!r}")
    if len(ends) != 1:
        raise _error(path, f"{where}.debug.flowId: subflows disagree on client/server {ends}")
    return ends.pop()


def _equal_cost_paths(src: str, dst: str) -> int:
    """Shortest paths between two hosts "h<pod><edge><host>" of a k = 4 fat-tree."""
    a, b = _HOST.match(src), _HOST.match(dst)
    if a is None or b is None:
        return 0
    if a[1] != b[1]:
        return 4  # (k/2)^2 via the core
    return 2 if a[2] != b[2] else 1  # k/2 aggregation switches, or the shared edge switch


def _mininet_dataset(path: Path, flows: list[_MininetFlow]) -> xr.Dataset:
    records = sorted({f.record for f in flows}, key=[f.record for f in flows].index)
    metas: dict[int, dict[str, Any]] = {}
    for f in flows:
        if metas.setdefault(f.record, f.meta) != f.meta:
            raise _error(path, f"record {f.record}: rows disagree on its metadata")
    n_rec = len(records)
    n_flow = max(f.flow for f in flows) + 1
    n_path = max((len(f.paths) for f in flows), default=0) or 1
    rec_index = {r: i for i, r in enumerate(records)}

    def grid(fill: float = np.nan) -> np.ndarray:
        return np.full((n_rec, n_flow), fill)

    goodput, throughput, fct, util = grid(), grid(), grid(), grid()
    total, shortest, size, ecmp = grid(), grid(), grid(), grid()
    run = np.arange(n_flow) // _TRANSFERS_PER_RUN
    src = np.full((n_rec, n_flow), "", dtype=object)
    dst = np.full((n_rec, n_flow), "", dtype=object)
    path_bytes = np.zeros((n_rec, n_flow, n_path))
    path_links = np.full((n_rec, n_flow, n_path), "", dtype=object)
    seen = np.zeros((n_rec, n_flow), dtype=bool)
    for f in flows:
        i, j = rec_index[f.record], f.flow
        if j < 0 or seen[i, j]:
            raise _error(path, f"record {f.record}: flow id {j} repeated or negative")
        if f.run != j // _TRANSFERS_PER_RUN:
            raise _error(path, f"record {f.record} flow {j}: run {f.run}, expected "
                               f"{j // _TRANSFERS_PER_RUN} (16 transfers per run)")
        seen[i, j] = True
        goodput[i, j], throughput[i, j], fct[i, j] = f.goodput, f.throughput, f.fct
        util[i, j], total[i, j], size[i, j] = f.utilization, f.total_bytes, f.file_size
        shortest[i, j] = sum(b for _, b in f.paths)
        src[i, j], dst[i, j] = f.src, f.dst
        ecmp[i, j] = _equal_cost_paths(f.src, f.dst) or np.nan
        for k, (links, nbytes) in enumerate(f.paths):
            path_links[i, j, k] = links
            path_bytes[i, j, k] = nbytes
    meta = [metas[r] for r in records]
    rf = ("record", "flow")
    return xr.Dataset(
        {
            "goodput": (rf, goodput, {"units": "bytes/s", "long_name": "file size / FCT"}),
            "throughput": (rf, throughput, {
                "units": "bytes/s", "long_name": "bytes seen on the network / FCT"}),
            "fct": (rf, fct, {"units": "s",
                              "long_name": "flow completion time: first request to last FIN"}),
            "mean_network_utilization": (rf, util, {
                "units": "1", "long_name": "(1/P) sum_p b_p / max_q b_q over the P shortest "
                                           "paths of the host pair"}),
            "total_bytes": (rf, total, {"units": "bytes",
                                        "long_name": "bytes seen on the network"}),
            "shortest_path_bytes": (rf, shortest, {
                "units": "bytes", "long_name": "bytes seen on the shortest paths"}),
            "path_bytes": (("record", "flow", "path"), path_bytes, {
                "units": "bytes", "long_name": "bytes seen on each path (0: unused slot)"}),
        },
        coords={
            "record": ("record", np.array(records)),
            **{key: ("record", np.array([m[key] for m in meta],
                                        dtype=object if isinstance(meta[0][key], str) else None))
               for key in _MININET_META},
            "flow": ("flow", np.arange(n_flow)),
            "run": ("flow", run),
            "path": ("path", np.arange(n_path)),
            "src": (rf, src, {"long_name": "iperf client (data sender)"}),
            "dst": (rf, dst, {"long_name": "iperf server (data receiver)"}),
            "size": (rf, size, {"units": "bytes"}),
            "equal_cost_paths": (rf, ecmp, {"units": "1"}),
            "path_links": (("record", "flow", "path"), path_links,
                           {"long_name": "link ids along the path ('' : unused slot)"}),
        },
        attrs={
            "engine": "Mininet + P4 (bmv2) + Linux MPTCP, seeds 000/002 (silent network)",
            "source": str(path),
            "topology": "fat-tree k=4, 16 hosts, every link 20 Mb/s",
            "link_rate_bps": 20e6,
        },
    )


def write_mininet_csv(json_path: str | Path, csv_path: str | Path) -> None:
    """Write the compact CSV extract of the Mininet JSON: one row per flow record.

    Columns: record, router, proto, pmanager, diffports, juggler, payloadsize (the record's
    metadata), flow, run, src (client), dst (server), file_size, total_bytes (bytes), fct
    (s, as in the JSON), paths ("35-17-0-1-21-38:137374;..." link ids and bytes, in the
    JSON's order). goodput, throughput, the shortest-path total and the mean network
    utilization are left out: `load_mininet_records` recomputes them exactly as the study
    did (file_size / fct, total_bytes / fct, sum of path bytes, (1/P) sum_p b_p / max b),
    bit for bit (tests/test_traces.py checks it against the JSON).
    """
    flows = _mininet_from_json(Path(json_path))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(_CSV_COLUMNS)
    for f in flows:
        m = f.meta
        paths = ";".join(f"{links.replace(' > ', '-')}:{nbytes}" for links, nbytes in f.paths)
        writer.writerow([f.record, m["router"], m["proto"], m["pmanager"], m["diffports"],
                         "true" if m["juggler"] else "false", m["payloadsize"], f.flow, f.run,
                         f.src, f.dst, f.file_size, f.total_bytes, repr(f.fct), paths])
    Path(csv_path).write_text(out.getvalue(), encoding="utf-8")


def _mininet_from_csv(path: Path) -> list[_MininetFlow]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise _error(path, "not a text file (expected the Mininet flow CSV)") from None
    rows = csv.reader(io.StringIO(text))
    header = next(rows, None)
    if header is None or tuple(h.strip() for h in header) != _CSV_COLUMNS:
        got = ",".join(header or [])[:80]
        raise _error(path, f"header {got!r}, expected {','.join(_CSV_COLUMNS)!r}")
    flows: list[_MininetFlow] = []
    for number, row in enumerate(rows, start=2):
        if not row:
            continue
        if len(row) != len(_CSV_COLUMNS):
            raise _error(path, f"line {number}: expected {len(_CSV_COLUMNS)} columns, "
                               f"got {len(row)}")
        cell = dict(zip(_CSV_COLUMNS, row, strict=True))
        try:
            meta = _clean_meta(path, {k: cell[k] for k in _MININET_META}, f"line {number}")
            file_size, total = int(cell["file_size"]), int(cell["total_bytes"])
            fct = float(cell["fct"])
            paths = []
            for item in filter(None, cell["paths"].split(";")):
                links, nbytes = item.rsplit(":", 1)
                paths.append((links.replace("-", " > "), int(nbytes)))
            flow = _MininetFlow(
                record=int(cell["record"]), meta=meta, flow=int(cell["flow"]),
                run=int(cell["run"]), src=cell["src"], dst=cell["dst"], file_size=file_size,
                total_bytes=total, fct=fct, goodput=file_size / fct, throughput=total / fct,
                utilization=_utilization(paths, _equal_cost_paths(cell["src"], cell["dst"])),
                paths=paths,
            )  # fmt: skip
        except (ValueError, ZeroDivisionError) as error:
            if isinstance(error, TraceError):
                raise
            raise _error(path, f"line {number}: bad value ({error})") from None
        flows.append(flow)
    return flows


def _utilization(paths: list[tuple[str, int]], equal_cost: int) -> float:
    # The study's formula, evaluated in the same order (numpy sum over the JSON's path order)
    # so that the CSV gives the JSON's numbers bit for bit.
    if not paths or equal_cost == 0:
        return math.nan
    b = np.array([nbytes for _, nbytes in paths], dtype=np.float64)
    return float((b / b.max()).sum() / equal_cost)
