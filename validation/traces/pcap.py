"""A packet capture as rate time series: per-flow and link bytes per second in fixed bins, with
the names and units of simulation results."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np
import xarray as xr
from numba import njit

from pathflow.schema import build_dataset
from pathflow.validation.traces.files import trace_error
from pathflow.validation.traces.frames import LINKTYPE_NAMES, PROTO_NAMES
from pathflow.validation.traces.packets import Packets, read_packets

__all__ = ["load_pcap"]


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


# How a capture measures what the schema names (every time is s since t0).
_COMMENTS = {
    "flow_rate": "IP bytes of the flow's packets seen in the interval, per second",
    "link_departure": "IP bytes of the packets seen in the interval, per second",
    "time": "end of each bin, s since t0",
    "start": "first packet, s since t0",
}

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
    first appearance), `src` / `dst` ("ip:port", IPv6 as "[ip]:port"), `ip_protocol`
    ("tcp" / "udp") and `start` (s since `t0` of the flow's first packet).

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
    return build_dataset(
        {
            "flow_rate": flow_ip / bin_width,
            "payload_rate": flow_payload / bin_width,
            "link_departure": link_bytes[:, None] / bin_width,
        },
        {
            "time": (np.arange(n_bins) + 1) * bin_width,
            "link": np.array([link], dtype=object),
            "flow": np.arange(n_flows),
            "src": np.array([_endpoint(c[0], c[1]) for c in conns], dtype=object),
            "dst": np.array([_endpoint(c[2], c[3]) for c in conns], dtype=object),
            "ip_protocol": np.array([PROTO_NAMES[c[4]] for c in conns], dtype=object),
            "start": first[data_conns] - start if n_flows else np.zeros(0),
        },
        {
            "engine": f"pcap {path.name}",
            "source": str(path),
            "sample_interval": float(bin_width),
            "t0": origin + start,
            "link_type": ", ".join(LINKTYPE_NAMES.get(lt, str(lt))
                                   for lt in sorted(set(packets.linktypes))),
            "direction": direction,
            "tx_rate_bps": float(tx_rate_bps) if tx_rate_bps is not None else 0.0,
            "ip_packets": int(time.size),
            "frames": packets.frames,
            "non_ip_frames": packets.non_ip_frames,
            "truncated": int(packets.truncated),
        },
        comments=_COMMENTS,
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
            raise trace_error(packets.path, f"packets from {len(used)} interfaces ({listed}); "
                                            f"pass interface= to pick the link")
        return np.ones(packets.time.size, dtype=bool)
    if isinstance(interface, str):
        if interface not in names:
            raise trace_error(packets.path, f"no interface named {interface!r} (have "
                                            f"{', '.join(names)})")
        interface = names.index(interface)
    if not 0 <= interface < len(names):
        raise trace_error(packets.path, f"no interface {interface} (have {len(names)})")
    mask = packets.interface == interface
    if not mask.any():
        raise trace_error(packets.path, f"no IP packets on interface {interface} "
                                        f"({names[interface]})")
    return mask
