"""Network invariants checked on every result (after seed 003's invariants; DESIGN §6).

Each check returns a verdict with the worst offender: the link or flow, the time, by how much,
and the quantities compared there (with their units). `check_invariants` runs them all (or those
named, `INVARIANTS`) into a `Report`; `simulate` attaches it to the Dataset as JSON text
(`attrs["invariants"]`: any netCDF writer keeps it, `Dataset.to_netcdf` included) and turns each
violation into a warning; `report_of` reads it back as a `Report`. `pathflow.testing` raises
them as assertions.

- queue_bounds: 0 <= q (samples and per-interval extremes), and q <= B at every port but a host's
  NIC (which never drops; the packet engine queues its host's ACKs there without bound)
- capacity: departures <= C
- work_conservation: a queue that never emptied during an interval departed at C (within one
  packet) over the part of the interval its link was not paused (PFC's `pause`)
- byte_conservation: per link, bytes in = bytes out + queued + dropped, within one packet
- probabilities: marking fractions in [0, 1]
- floors: windows >= min_cwnd (one segment in slow start after a timeout), rates >= 0
- dt_halving (optional, costs a second run): mean queue and throughput within tolerance at dt/2
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Collection, Iterator, Mapping
from dataclasses import asdict, dataclass

import numpy as np
import xarray as xr

__all__ = ["INVARIANTS", "Report", "Verdict", "check_invariants", "dt_halving_verdict",
           "report_of", "warn_violations"]

_REL = 1e-6  # float64 round-off allowance, relative to the quantity's scale

INVARIANTS = ("queue_bounds", "capacity", "work_conservation", "byte_conservation",
              "probabilities", "floors")
"""The names `check_invariants` reports under, in the order it checks them."""


@dataclass(frozen=True)
class Verdict:
    """Whether one invariant holds; if not, the worst offender (link or flow, time, amount)."""

    ok: bool
    detail: str


class Report(Mapping[str, Verdict]):
    """The verdict of each invariant checked on a result, by name, in the order checked.

    Immutable, as the verdicts of a finished run are.
    """

    __slots__ = ("_verdicts",)

    def __init__(self, verdicts: Mapping[str, Verdict]) -> None:
        self._verdicts = dict(verdicts)

    def __getitem__(self, name: str) -> Verdict:
        return self._verdicts[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._verdicts)

    def __len__(self) -> int:
        return len(self._verdicts)

    def __repr__(self) -> str:
        return f"Report({self._verdicts!r})"

    @property
    def ok(self) -> bool:
        """Every invariant holds (also when none was checked)."""
        return all(verdict.ok for verdict in self.values())

    @property
    def violations(self) -> Report:
        """The invariants that do not hold."""
        return Report({name: verdict for name, verdict in self.items() if not verdict.ok})

    def to_json(self) -> str:
        """The text a written result stores: {name: {"ok": ..., "detail": ...}, ...}."""
        return json.dumps({name: asdict(verdict) for name, verdict in self.items()})

    @classmethod
    def from_json(cls, text: str) -> Report:
        return cls({name: Verdict(**fields) for name, fields in json.loads(text).items()})


def report_of(ds: xr.Dataset) -> Report:
    """The invariant report of a result (the JSON text an engine attached; a `Report` placed
    there by hand is taken as it is), or an empty report where nothing was checked (traces,
    ns-3)."""
    stored = ds.attrs.get("invariants")
    if stored is None:
        return Report({})
    return stored if isinstance(stored, Report) else Report.from_json(stored)


def _worst(excess: xr.DataArray, what: str, unit: str, dim: str,
           shown: Mapping[str, tuple[xr.DataArray | float, str]] | None = None) -> Verdict:
    """Verdict from an array that is > 0 where the invariant is violated; `shown` names the
    quantities (name -> values, unit) the detail gives at the worst point, so that a reader
    sees the numbers compared and not only the excess."""
    if excess.size == 0 or float(excess.max()) <= 0:
        return Verdict(True, "holds")
    where = excess.argmax(...)
    at_dim, at_time = int(where[dim]), int(where["time"])
    label = str(excess[dim].values[at_dim])
    at = float(excess.time.values[at_time])
    values = [f"{name} {float(_at(values, dim, at_dim, at_time)):.6g}{' ' + unit if unit else ''}"
              for name, (values, unit) in (shown or {}).items()]
    return Verdict(False, f"{what}: {dim} {label} at t = {at:.6g} s by {float(excess.max()):.3g} "
                          f"{unit}".rstrip() + (f" ({', '.join(values)})" if values else ""))


def _at(values: xr.DataArray | float, dim: str, index: int, time: int) -> float:
    """One value of a quantity that may vary over `dim` and time, or neither."""
    if not isinstance(values, xr.DataArray):
        return float(values)
    picked = {name: position for name, position in ((dim, index), ("time", time))
              if name in values.dims}
    return float(values.isel(picked))


def _sample_interval(ds: xr.Dataset) -> float:
    """The recording interval (s): from attrs, else from the time axis (a run of one record
    covers its first sample's time)."""
    if "sample_interval" in ds.attrs:
        return float(ds.attrs["sample_interval"])
    time = ds.time.values
    return float(time[1] - time[0]) if time.size > 1 else float(time[0])


def _buffered(ds: xr.Dataset) -> xr.DataArray | bool:
    """Links whose buffer bounds their queue: all but host NICs, which never drop and, at
    packet level, hold the ACKs their host sends in an unbounded FIFO (packet.links)."""
    if "link_src" not in ds.coords or "src" not in ds.coords:
        return True
    hosts = np.union1d(ds.src.values, ds.dst.values)
    return ~ds.link_src.isin(hosts)


def check_invariants(ds: xr.Dataset, min_cwnd_bytes: float | None = None,
                     tolerance: float | None = None, only: Collection[str] | None = None
                     ) -> Report:
    """The invariants of the module docstring (`only`: those named, from `INVARIANTS`; a
    result needs only the variables they read); `tolerance` is relative (default: float64 or
    float32 round-off, from the result's precision)."""
    wanted = set(INVARIANTS if only is None else only)
    unknown = sorted(wanted - set(INVARIANTS))
    if unknown:
        raise ValueError(f"unknown invariant {unknown[0]!r}; known: {', '.join(INVARIANTS)}")
    if tolerance is None:
        tolerance = _REL if ds.attrs.get("precision", "float64") == "float64" else 1e-4
    # sums over many samples: accumulate in double precision (a float64 result as it is)
    ds = ds.astype("float64", copy=False)
    packet = float(ds.attrs.get("packet_bytes", 1500))
    interval = _sample_interval(ds)
    report: dict[str, Verdict] = {}
    if {"queue_bounds", "work_conservation"} & wanted:
        buffer = ds.buffer
        low = ds.queue_min if "queue_min" in ds else ds.queue
        high = ds.queue_max if "queue_max" in ds else ds.queue
    if "queue_bounds" in wanted:
        below = -low - tolerance * buffer
        above = xr.where(_buffered(ds), high - buffer - tolerance * buffer, 0.0)
        report["queue_bounds"] = _worst(
            xr.concat([below, above], "side").max("side"), "queue outside [0, B]", "bytes",
            "link", {"lowest": (low, "bytes"), "highest": (high, "bytes"),
                     "buffer": (buffer, "bytes")})
    if "capacity" in wanted:
        report["capacity"] = _worst(
            ds.link_departure - ds.capacity * (1 + tolerance), "departures above capacity",
            "bytes/s", "link", {"departures": (ds.link_departure, "bytes/s"),
                                "capacity": (ds.capacity, "bytes/s")})
    if "work_conservation" in wanted:
        busy = low > tolerance * buffer
        # within one packet: a packet-level result counts a departure when its last bit leaves,
        # so an interval shorter than a packet time can hold a busy link with nothing counted yet
        running = 1.0 - ds.pause if "pause" in ds else 1.0
        idle_while_busy = xr.where(busy, ds.capacity * (1 - tolerance) * running
                                   - packet / interval - ds.link_departure, 0.0)
        report["work_conservation"] = _worst(
            idle_while_busy, "link idle while its queue held data", "bytes/s", "link",
            {"lowest queue": (low, "bytes"), "departures": (ds.link_departure, "bytes/s"),
             "capacity": (ds.capacity, "bytes/s")})
    if "byte_conservation" in wanted:
        inflow = (ds.link_arrival * interval).cumsum("time")
        outflow = ((ds.link_departure + ds.drops) * interval).cumsum("time") + ds.queue
        report["byte_conservation"] = _worst(
            abs(inflow - outflow) - packet, "bytes in != out + queued + dropped", "bytes",
            "link", {"in": (inflow, "bytes"), "out + queued + dropped": (outflow, "bytes")})
    if "probabilities" in wanted:
        report["probabilities"] = _worst(
            xr.concat([-ds.marking, ds.marking - 1.0], "side").max("side"),
            "marking fraction outside [0, 1]", "", "link", {"marking": (ds.marking, "")})
    if "floors" in wanted:
        floors = [-ds.subflow_rate]
        shown: dict[str, tuple[xr.DataArray | float, str]] = {
            "rate": (ds.subflow_rate, "bytes/s")}
        if min_cwnd_bytes is not None and "cwnd" in ds:
            floor = min_cwnd_bytes
            if "slow_start" in ds:  # a window restarting after a timeout grows from one segment
                floor = xr.where(ds.slow_start > 0, min(min_cwnd_bytes, packet), min_cwnd_bytes)
            floors.append(floor * (1 - tolerance) - ds.cwnd)
            shown.update(window=(ds.cwnd, "bytes"), floor=(floor, "bytes"))
        report["floors"] = _worst(xr.concat(floors, "side").max("side"),
                                  "window below its floor or negative rate", "bytes", "subflow",
                                  shown)
    return Report(report)


def warn_violations(report: Report) -> None:
    for name, verdict in report.violations.items():
        warnings.warn(f"invariant {name} violated: {verdict.detail}", stacklevel=3)


def dt_halving_verdict(coarse: xr.Dataset, fine: xr.Dataset, tolerance: float = 0.05
                       ) -> Verdict:
    """Compare mean queue (busiest link) and aggregate throughput at dt and dt/2."""
    from pathflow.metrics import queue_stats, throughput

    t_coarse, t_fine = float(throughput(coarse).sum()), float(throughput(fine).sum())
    q_coarse, q_fine = queue_stats(coarse)["mean"], queue_stats(fine)["mean"]
    link = int(np.argmax(q_fine.values))
    packet = float(coarse.attrs.get("packet_bytes", 1500))
    dq = abs(float(q_coarse[link]) - float(q_fine[link]))
    dthr = abs(t_coarse - t_fine) / max(t_fine, 1e-30)
    ok = dthr <= tolerance and dq <= max(tolerance * float(q_fine[link]), packet)
    return Verdict(bool(ok), f"throughput differs by {dthr:.2%}, mean queue on "
                             f"{coarse.link.values[link]} by {dq / packet:.2f} packets")
