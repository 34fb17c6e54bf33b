"""A packet capture (pcap, pcapng, either gzip-compressed) -> `Packets`, a table with one row
per captured IP packet: time, lengths, and which connection and address pair it belongs to."""

from __future__ import annotations

import gzip
import mmap
import struct
from dataclasses import dataclass
from pathlib import Path

import dpkt
import numpy as np

from pathflow.validation.traces.capture_files import Interface, Truncated, capture_records
from pathflow.validation.traces.files import GZIP_MAGIC, read_head, trace_error
from pathflow.validation.traces.frames import FrameDecoder

__all__ = ["Packets", "read_packets"]


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
    head = read_head(path, 4)
    if not head:
        raise trace_error(path, "empty file (expected a pcap or pcapng capture)")
    if head[:2] == GZIP_MAGIC:
        try:
            with gzip.open(path, "rb") as f:
                data: bytes | mmap.mmap = f.read()
        except (OSError, EOFError) as error:
            raise trace_error(path, f"broken gzip stream ({error})") from None
        return _read_capture_checked(path, data, allow_truncated)
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as view:
        # mmap: large captures are paged in as they are walked, never copied whole.
        return _read_capture_checked(path, view, allow_truncated)


def _read_capture_checked(path: Path, data: bytes | mmap.mmap, allow_truncated: bool) -> Packets:
    try:
        return _read_capture(path, data, allow_truncated)
    except (dpkt.UnpackError, struct.error, IndexError) as error:
        # A file or block header that dpkt cannot unpack (frames are checked one by one).
        raise trace_error(path, f"malformed capture ({type(error).__name__}: {error})") from None


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

    def add(self, decode: FrameDecoder, iface: int, sec: int, frac: float, frame: bytes,
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


def _read_capture(path: Path, data: bytes | mmap.mmap, allow_truncated: bool) -> Packets:
    records = capture_records(path, data, allow_truncated)
    collector = _Collector()
    interfaces: list[str] = []
    linktypes: list[int] = []
    decoders: list[FrameDecoder | None] = []
    truncated = False
    for item in records:
        if isinstance(item, Interface):
            interfaces.append(item.name)
            linktypes.append(item.linktype)
            decoders.append(None)
        elif isinstance(item, Truncated):
            truncated = True
        else:
            iface, sec, frac, frame, wire_len = item
            decoder = decoders[iface]
            if decoder is None:
                # Made on the interface's first packet: an unsupported link type is an error
                # only if that interface captured something.
                decoder = decoders[iface] = FrameDecoder(path, linktypes[iface])
            collector.add(decoder, iface, sec, frac, frame, wire_len)
    if collector.frames == 0:
        raise trace_error(path, "capture holds no packets")
    if not collector.sec:
        raise trace_error(path, f"no IPv4/IPv6 packets among {collector.frames} frames "
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
