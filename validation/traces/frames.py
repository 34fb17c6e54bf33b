"""Link-layer frames -> the IP fields a capture is binned by (addresses, protocol, lengths,
ports), for the link types that captures from ns-3, tcpdump and Linux hosts use."""

from __future__ import annotations

import functools
import socket
import struct
from pathlib import Path
from typing import Any

import dpkt

from pathflow.validation.traces.files import trace_error

__all__ = ["LINKTYPE_NAMES", "PROTO_NAMES", "FrameDecoder", "IpFields"]

# Link-layer header types (LINKTYPE_* numbers as written in capture files).
LINKTYPE_NAMES = {
    0: "NULL (BSD loopback)", 1: "ETHERNET", 9: "PPP", 12: "RAW", 14: "RAW", 50: "PPP_HDLC",
    101: "RAW", 108: "LOOP", 113: "LINUX_SLL", 228: "IPV4", 229: "IPV6", 276: "LINUX_SLL2",
}  # fmt: skip
_PPP_IPV4, _PPP_IPV6 = 0x0021, 0x0057
_TCP, _UDP = 6, 17
PROTO_NAMES = {_TCP: "tcp", _UDP: "udp"}

# (src, dst, proto, ip_bytes, payload_bytes, sport, dport); ports -1 where unknown.
IpFields = tuple[str, str, int, int, int, int, int]


class FrameDecoder:
    """Frame -> (src, dst, proto, ip_bytes, payload_bytes, sport, dport) or None (not IP)."""

    def __init__(self, path: Path, linktype: int) -> None:
        if linktype not in LINKTYPE_NAMES:
            supported = ", ".join(sorted(set(LINKTYPE_NAMES.values())))
            raise trace_error(path, f"unsupported link type {linktype} (supported: {supported})")
        self.linktype = linktype

    def __call__(self, frame: bytes) -> IpFields | None:
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


def _decode_ip(raw: bytes | dpkt.Packet | None) -> IpFields | None:
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
