"""Unit parsing against the definitions of the units (SI prefixes, bits vs bytes)."""

import math

import pytest

from pathflow.units import UnitError, format_rate, parse_rate, parse_size, parse_time


@pytest.mark.parametrize(("text", "bytes_per_s"), [
    ("10Gbps", 1.25e9), ("100Mbps", 12.5e6), ("1.5 Gb/s", 1.875e8), ("8bps", 1.0),
    ("40Gbps", 5e9), ("2.5MB/s", 2.5e6), ("1KB/s", 1e3),
])
def test_rates(text: str, bytes_per_s: float) -> None:
    assert parse_rate(text) == pytest.approx(bytes_per_s)


@pytest.mark.parametrize(("text", "seconds"), [
    ("62.5us", 62.5e-6), ("2ms", 2e-3), ("1s", 1.0), ("5µs", 5e-6), ("100ns", 1e-7), ("0s", 0.0),
])
def test_times(text: str, seconds: float) -> None:
    assert parse_time(text) == pytest.approx(seconds)


def test_sizes_with_packets_and_prefixes() -> None:
    assert parse_size("425pkt", 1500) == 637_500
    assert parse_size("512KB", 1500) == 512_000
    assert parse_size("1MiB", 1500) == 1_048_576
    assert math.isinf(parse_size("inf", 1500, allow_inf=True))


@pytest.mark.parametrize("text", ["-10Gbps", "10", "10 furlongs", "", "fast"])
def test_bad_rates_name_the_field(text: str) -> None:
    with pytest.raises(UnitError, match=r"topology\.link_rate"):
        parse_rate(text, "topology.link_rate")


def test_bare_numbers_are_refused() -> None:
    with pytest.raises(UnitError, match="no unit"):
        parse_rate(10e9, "topology.link_rate")  # type: ignore[arg-type]


def test_zero_buffer_is_refused() -> None:
    with pytest.raises(UnitError, match="> 0"):
        parse_size("0pkt", 1500, "topology.buffer")


def test_format_rate_rounds_to_the_next_prefix() -> None:
    assert format_rate(124_999_999.9) == "1 Gb/s"
    assert format_rate(12.5e6) == "100 Mb/s"
