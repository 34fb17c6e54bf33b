"""Parsing of quantities with units into SI floats.

Scenario files give every number with a unit ("10Gbps", "62.5us", "512KB", "20pkt"); internally
pathflow works in bytes, seconds and bytes/s. Decimal prefixes follow SI (1 KB = 1000 B,
1 Mbps = 10^6 bit/s); binary prefixes are spelt KiB, MiB, GiB. A packet ("pkt") is one full-size
packet of the scenario, whose size the caller passes in.
"""

from __future__ import annotations

import math
import re

__all__ = [
    "UnitError",
    "format_bytes",
    "format_rate",
    "format_time",
    "parse_rate",
    "parse_size",
    "parse_time",
]


class UnitError(ValueError):
    """A quantity that is missing its unit, has an unknown unit, or is out of range."""


_NUMBER = r"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"
_QUANTITY = re.compile(rf"^\s*{_NUMBER}\s*([A-Za-zµ/]+)\s*$")

_RATE_UNITS = {  # -> bytes/s
    "bps": 1 / 8, "b/s": 1 / 8, "kbps": 1e3 / 8, "kb/s": 1e3 / 8, "mbps": 1e6 / 8, "mb/s": 1e6 / 8,
    "gbps": 1e9 / 8, "gb/s": 1e9 / 8, "tbps": 1e12 / 8, "tb/s": 1e12 / 8,
    "Bps": 1.0, "B/s": 1.0, "KBps": 1e3, "KB/s": 1e3, "MBps": 1e6, "MB/s": 1e6, "GBps": 1e9,
    "GB/s": 1e9,
}
_TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9, "min": 60.0}
_SIZE_UNITS = {
    "B": 1.0, "KB": 1e3, "MB": 1e6, "GB": 1e9, "KiB": 1024.0, "MiB": 1024.0**2, "GiB": 1024.0**3,
}
_PACKET_UNITS = ("pkt", "pkts", "p", "packets", "packet")


def _split(text: str | float | int, field: str, allowed: str) -> tuple[float, str]:
    if isinstance(text, bool) or not isinstance(text, str):
        raise UnitError(f"{field}: {text!r} has no unit; write it as a string with one of "
                        f"{allowed}")
    match = _QUANTITY.match(text)
    if match is None:
        raise UnitError(f"{field}: cannot read {text!r}; expected a number and one of {allowed}")
    return float(match.group(1)), match.group(2)


def _positive(value: float, text: str, field: str, allow_zero: bool = False) -> float:
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise UnitError(f"{field}: {text!r} must be {bound}")
    return value


def _rate_unit(unit: str) -> float | None:
    if unit in _RATE_UNITS:  # byte units are case-sensitive (B vs b)
        return _RATE_UNITS[unit]
    return _RATE_UNITS.get(unit.lower()) if "B" not in unit else None


def parse_rate(text: str | float, field: str = "rate") -> float:
    """'10Gbps' -> 1.25e9 (bytes/s). Bits per second: bps, Kbps, Mbps, Gbps, Tbps (or b/s);
    bytes per second: B/s, KB/s, MB/s, GB/s."""
    allowed = "bps, Kbps, Mbps, Gbps, Tbps, B/s, KB/s, MB/s, GB/s"
    if isinstance(text, str) and text.strip().startswith("-"):
        raise UnitError(f"{field}: {text!r} must be > 0")
    value, unit = _split(text, field, allowed)
    scale = _rate_unit(unit)
    if scale is None:
        raise UnitError(f"{field}: unknown rate unit {unit!r} in {text!r}; allowed: {allowed}")
    return _positive(value * scale, text, field)


def parse_time(text: str | float, field: str = "time", allow_zero: bool = True) -> float:
    """'62.5us' -> 6.25e-05 (seconds). Units: s, ms, us (or µs), ns, min."""
    allowed = "s, ms, us, ns, min"
    if isinstance(text, str) and text.strip().startswith("-"):
        raise UnitError(f"{field}: {text!r} must be >= 0")
    value, unit = _split(text, field, allowed)
    if unit not in _TIME_UNITS:
        raise UnitError(f"{field}: unknown time unit {unit!r} in {text!r}; allowed: {allowed}")
    return _positive(value * _TIME_UNITS[unit], text, field, allow_zero)


def parse_size(
    text: str | float, packet_bytes: float, field: str = "size", allow_zero: bool = False,
    allow_inf: bool = False,
) -> float:
    """'512KB' -> 512000.0, '20pkt' -> 20 * packet_bytes (bytes). Units: B, KB, MB, GB, KiB,
    MiB, GiB, pkt. With allow_inf, 'inf' gives math.inf (a flow that never ends)."""
    allowed = "B, KB, MB, GB, KiB, MiB, GiB, pkt" + (" or 'inf'" if allow_inf else "")
    if allow_inf and isinstance(text, str) and text.strip().lower() in ("inf", "infinite"):
        return math.inf
    if isinstance(text, str) and text.strip().startswith("-"):
        raise UnitError(f"{field}: {text!r} must be > 0")
    value, unit = _split(text, field, allowed)
    if unit in _PACKET_UNITS:
        scale = packet_bytes
    elif unit in _SIZE_UNITS:
        scale = _SIZE_UNITS[unit]
    else:
        raise UnitError(f"{field}: unknown size unit {unit!r} in {text!r}; allowed: {allowed}")
    return _positive(value * scale, text, field, allow_zero)


def _engineering(value: float, unit: str, prefixes: tuple[tuple[float, str], ...]) -> str:
    """Three significant digits with the largest prefix that keeps the mantissa >= 1."""
    for scale, prefix in prefixes:
        if abs(float(f"{value:.3g}")) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    scale, prefix = prefixes[-1]
    return f"{value / scale:.3g} {prefix}{unit}"


def format_rate(bytes_per_s: float) -> str:
    """1.25e9 -> '10 Gb/s'."""
    bits = (
        (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""),
    )
    return _engineering(bytes_per_s * 8, "b/s", bits)


def format_time(seconds: float) -> str:
    """6.25e-5 -> '62.5 us'."""
    if not math.isfinite(seconds):
        return "never"
    return _engineering(seconds, "s", ((1.0, ""), (1e-3, "m"), (1e-6, "u"), (1e-9, "n")))


def format_bytes(n: float) -> str:
    """512000 -> '512 KB'."""
    return _engineering(n, "B", ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K"), (1.0, "")))
