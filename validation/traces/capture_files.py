"""Capture files, pcap and pcapng, walked record by record: which interfaces (with their link
types) captured, and each frame with its timestamp and length on the wire."""

from __future__ import annotations

import mmap
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dpkt

from pathflow.validation.traces.files import trace_error

__all__ = ["Interface", "Record", "Truncated", "capture_records", "is_capture"]

_PCAP_MAGICS = {
    dpkt.pcap.TCPDUMP_MAGIC, dpkt.pcap.TCPDUMP_MAGIC_NANO, dpkt.pcap.PMUDPCT_MAGIC,
    dpkt.pcap.PMUDPCT_MAGIC_NANO, dpkt.pcap.MODPCAP_MAGIC, dpkt.pcap.PACPDOM_MAGIC,
}  # fmt: skip
_NANO_MAGICS = {dpkt.pcap.TCPDUMP_MAGIC_NANO, dpkt.pcap.PMUDPCT_MAGIC_NANO}
_LE_MAGICS = {dpkt.pcap.PMUDPCT_MAGIC, dpkt.pcap.PMUDPCT_MAGIC_NANO, dpkt.pcap.PACPDOM_MAGIC}
_PCAPNG_SHB = 0x0A0D0D0A
# A record longer than this is corruption, not a packet (pcap's largest snaplen is 256 KiB).
_MAX_RECORD = 1 << 20


def _is_pcapng(data: bytes | mmap.mmap) -> bool:
    return len(data) >= 4 and struct.unpack_from("<I", data)[0] == _PCAPNG_SHB


def _is_pcap(data: bytes | mmap.mmap) -> bool:
    return len(data) >= 4 and struct.unpack_from(">I", data)[0] in _PCAP_MAGICS


def is_capture(head: bytes) -> bool:
    """Whether a file starting with `head` is a pcap or pcapng capture (by its magic number)."""
    return _is_pcapng(head) or _is_pcap(head)


@dataclass(frozen=True)
class Interface:
    """An interface that captured (pcap has one; pcapng numbers those of every section)."""

    name: str
    linktype: int


@dataclass(frozen=True)
class Truncated:
    """The capture ends inside the record at `offset` (bytes), which is dropped."""

    offset: int


Record = tuple[int, int, float, bytes, int]  # interface, seconds, fraction, frame, wire length


def capture_records(path: Path, data: bytes | mmap.mmap, allow_truncated: bool
                    ) -> Iterator[Interface | Truncated | Record]:
    """The records of a pcap or pcapng capture, in file order: an `Interface` before the
    frames it captured, a `Truncated` last where the capture is cut off (TraceError unless
    `allow_truncated`). A file that is neither raises TraceError."""
    if _is_pcapng(data):
        return _pcapng_records(path, data, allow_truncated)
    if _is_pcap(data):
        return _pcap_records(path, data, allow_truncated)
    magic = bytes(data[:4]).hex()
    raise trace_error(path, f"not a pcap or pcapng capture (first bytes 0x{magic})")


def _pcap_records(path: Path, data: bytes | mmap.mmap,
                  allow_truncated: bool) -> Iterator[Interface | Truncated | Record]:
    """Classic libpcap: file header, then (record header, frame) pairs."""
    hdr_len = dpkt.pcap.FileHdr.__hdr_len__
    if len(data) < hdr_len:
        raise trace_error(path, f"truncated pcap file header ({len(data)} of {hdr_len} bytes)")
    # dpkt names magics as read big-endian: the PMUDPCT / PACPDOM spellings are
    # little-endian files. Its header classes know both orders and the "modified pcap" layout.
    magic = struct.unpack_from(">I", data)[0]
    little = magic in _LE_MAGICS
    file_hdr = (dpkt.pcap.LEFileHdr if little else dpkt.pcap.FileHdr)(bytes(data[:hdr_len]))
    pkt_cls = dpkt.pcap.MAGIC_TO_PKT_HDR[magic]
    divisor = 1e9 if magic in _NANO_MAGICS else 1e6
    yield Interface("captured", file_hdr.linktype & 0xFFFF)  # high bits: FCS flags
    rec_len = pkt_cls.__hdr_len__
    offset, size, index = hdr_len, len(data), 0
    while offset < size:
        if offset + rec_len > size:
            yield _truncation(path, offset, index, f"record header cut off ({size - offset} "
                                                   f"of {rec_len} bytes)", allow_truncated)
            return
        hdr = pkt_cls(bytes(data[offset:offset + rec_len]))
        if hdr.caplen > _MAX_RECORD or hdr.tv_usec >= divisor:
            raise trace_error(path, f"corrupt record {index} at byte {offset} (captured length "
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


def _truncation(path: Path, offset: int, index: int, what: str, allow: bool) -> Truncated:
    if not allow:
        raise trace_error(path, f"truncated capture: record {index} at byte {offset}: {what}")
    return Truncated(offset)


def _pcapng_records(path: Path, data: bytes | mmap.mmap,
                    allow_truncated: bool) -> Iterator[Interface | Truncated | Record]:
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
                raise trace_error(path, f"corrupt pcapng section header at byte {offset}")
            little = bom == 0x1A2B3C4D
            section = []
        order = "<" if little else ">"
        block_type, block_len = struct.unpack_from(order + "II", data, offset)
        if block_len < 12 or block_len % 4 or block_len > _MAX_RECORD + 64:
            raise trace_error(path, f"corrupt pcapng block at byte {offset} (length {block_len})")
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
            yield Interface(name, idb.linktype)
        elif block_type in (ng.PCAPNG_BT_EPB, ng.PCAPNG_BT_PB):
            if block_type == ng.PCAPNG_BT_EPB:
                epb = (ng.EnhancedPacketBlockLE if little else ng.EnhancedPacketBlock)(block)
                iface, wire_len = epb.iface_id, epb.pkt_len
            else:
                epb = (ng.PacketBlockLE if little else ng.PacketBlock)(block)
                iface, wire_len = epb.iface_id, epb.pkt_len
            if iface >= len(section):
                raise trace_error(path, f"packet block at byte {offset} names interface {iface}, "
                                        f"but the section describes {len(section)}")
            units, ts_offset, global_id = section[iface]
            ticks = (epb.ts_high << 32) | epb.ts_low
            sec, rest = divmod(ticks, units)
            yield (global_id, sec + int(ts_offset), rest / units + (ts_offset % 1),
                   epb.pkt_data, wire_len)
            index += 1
        elif block_type == ng.PCAPNG_BT_SPB:
            raise trace_error(path, f"simple packet block at byte {offset}: it has no timestamp")
        offset += block_len
