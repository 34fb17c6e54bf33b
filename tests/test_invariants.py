"""The invariant checks detect what they claim to, on synthetic results built by hand."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from pathflow.invariants import Report, check_invariants, report_of
from pathflow.results import write_dataset

PACKET, CAPACITY, BUFFER, INTERVAL = 1500.0, 1.25e6, 100 * 1500.0, 1e-3  # 10 Mb/s, 1 ms


def one_link(departure: float, queue: float, records: int = 10) -> xr.Dataset:
    """A link whose queue holds `queue` bytes throughout while `departure` bytes/s leave and as
    much arrives, after the queue's own bytes in the first interval (so bytes balance)."""
    def series(value: float) -> tuple[tuple[str, str], np.ndarray]:
        return ("time", "link"), np.full((records, 1), value)

    arrival = np.full((records, 1), departure)
    arrival[0] += queue / INTERVAL

    return xr.Dataset(
        {"queue": series(queue), "queue_min": series(queue), "queue_max": series(queue),
         "link_arrival": (("time", "link"), arrival), "link_departure": series(departure),
         "drops": series(0.0), "marking": series(0.0),
         "subflow_rate": (("time", "subflow"), np.full((records, 1), departure)),
         "buffer": ("link", [BUFFER]), "capacity": ("link", [CAPACITY])},
        coords={"time": INTERVAL * np.arange(1, records + 1), "link": ["a->b"], "subflow": [0]},
        attrs={"packet_bytes": PACKET, "sample_interval": INTERVAL})


@pytest.mark.parametrize(("shortfall_packets", "holds"), [(0.0, True), (0.9, True), (1.5, False),
                                                          (10.0, False)])
def test_work_conservation_allows_one_packet_per_interval(shortfall_packets: float,
                                                          holds: bool) -> None:
    """A link whose queue never empties departs at C, less at most the packet still on the
    wire at the end of the interval."""
    departure = CAPACITY - shortfall_packets * PACKET / INTERVAL
    report = check_invariants(one_link(departure, queue=10 * PACKET))
    assert report["work_conservation"].ok is holds
    assert report["byte_conservation"].ok and report["queue_bounds"].ok


def test_an_idle_link_with_an_empty_queue_conserves_work() -> None:
    assert check_invariants(one_link(0.0, queue=0.0))["work_conservation"].ok


def test_queue_above_buffer_and_departures_above_capacity_are_caught() -> None:
    report = check_invariants(one_link(1.01 * CAPACITY, queue=BUFFER + PACKET))
    assert not report["queue_bounds"].ok and not report["capacity"].ok


def test_a_written_report_reads_back_as_it_was(tmp_path: Path) -> None:
    """A result holds its report as JSON text ({name: {"ok", "detail"}}), so that any netCDF
    writer keeps it; `report_of` reads it back into the same `Report`."""
    ds = one_link(1.01 * CAPACITY, queue=BUFFER + PACKET)
    report = check_invariants(ds)
    ds.attrs["invariants"] = report.to_json()
    assert isinstance(report, Report) and not report.ok
    assert set(report.violations) == {"queue_bounds", "capacity"}
    write_dataset(ds, tmp_path / "r.nc")
    ds.to_netcdf(tmp_path / "plain.nc")  # a user's own writer
    with xr.open_dataset(tmp_path / "r.nc") as saved:
        text = saved.attrs["invariants"]
        assert report_of(saved) == report == report_of(ds)
    assert text == json.dumps({name: {"ok": verdict.ok, "detail": verdict.detail}
                               for name, verdict in report.items()})
    assert report_of(xr.Dataset()) == Report({}) and Report({}).ok


def test_a_verdict_gives_the_numbers_compared_and_only_the_invariants_asked_for() -> None:
    """The detail names the quantities compared at the worst point, with units; `only` checks
    the invariants named (a result needs just their variables) and refuses unknown names."""
    report = check_invariants(one_link(1.01 * CAPACITY, queue=BUFFER + PACKET))
    assert report["capacity"].detail == (
        "departures above capacity: link a->b at t = 0.001 s by 1.25e+04 bytes/s (departures "
        "1.2625e+06 bytes/s, capacity 1.25e+06 bytes/s)")
    assert report["queue_bounds"].detail.endswith(
        "(lowest 151500 bytes, highest 151500 bytes, buffer 150000 bytes)")
    bare = one_link(1.01 * CAPACITY, queue=0.0)[["link_departure", "capacity"]]
    assert list(check_invariants(bare, only=["capacity"])) == ["capacity"]
    assert not check_invariants(bare, only=["capacity"]).ok
    with pytest.raises(ValueError, match="unknown invariant 'fairness'"):
        check_invariants(bare, only=["fairness"])
