"""Assertions on a result of `pathflow.simulate` (or of the packet-level engine) for property
tests: each raises `AssertionError` with one line that names the link or flow, the time and the
numbers compared, with their units, and returns None when the property holds.

The invariants (`assert_queue_bounds`, `assert_capacity`, `assert_conservation`,
`assert_work_conservation`) are `pathflow.invariants.check_invariants` run again on the data, so
they judge a Dataset as it is now (one a test edited, one read from a file) and need only the
variables they read; `assert_invariants` reads the verdicts the engine stored in the run's attrs
instead (all of them, the window floors included, which need the scenario). The properties read
the metrics the command line prints: `assert_utilization` the steady-window utilization of
`metrics.hotspots`, `assert_fair` Jain's index (`metrics.jain_index`) or the allocations of
`analysis.fairness.fairness_of`, `assert_converges` `metrics.convergence_time`.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from typing import Literal

import numpy as np
import xarray as xr

from pathflow.analysis.fairness import fairness_of
from pathflow.invariants import INVARIANTS, Report, check_invariants, report_of
from pathflow.metrics import convergence_time, default_warmup, hotspots, jain_index, throughput
from pathflow.scenario import Scenario
from pathflow.units import format_bytes, format_rate, format_time

__all__ = ["Criterion", "assert_capacity", "assert_conservation", "assert_converges",
           "assert_fair", "assert_invariants", "assert_queue_bounds", "assert_utilization",
           "assert_work_conservation"]

# a control's own utility optimum is named by the control (`fairness.own_allocation`)
Criterion = Literal["jain", "max_min", "proportional", "reno", "dctcp", "uncoupled", "olia",
                    "lia", "balia"]


def _raise_violations(report: Report, source: str) -> None:
    broken = report.violations
    if broken:
        name, verdict = next(iter(broken.items()))
        more = f" (and {len(broken) - 1} more: {', '.join(list(broken)[1:])})" if len(
            broken) > 1 else ""
        raise AssertionError(f"invariant {name} violated{source}: {verdict.detail}{more}")


def _recheck(ds: xr.Dataset, name: str, tolerance: float | None) -> None:
    _raise_violations(check_invariants(ds, tolerance=tolerance, only=(name,)), "")


def assert_invariants(ds: xr.Dataset, names: Collection[str] | None = None) -> None:
    """Every invariant the engine checked on this run holds (`names`: only those, from
    `pathflow.invariants.INVARIANTS`), as its report in `ds.attrs["invariants"]` says. Fails
    when the result carries no report (a trace, an ns-3 result: nothing was checked)."""
    report = report_of(ds)
    if not report:
        raise AssertionError("no invariant report in the result's attrs: nothing was checked "
                             "(a fluid or packet-level result carries one)")
    wanted = list(report) if names is None else list(names)
    unknown = [name for name in wanted if name not in INVARIANTS]
    if unknown:
        raise ValueError(f"unknown invariant {unknown[0]!r}; known: {', '.join(INVARIANTS)}")
    missing = [name for name in wanted if name not in report]
    if missing:
        raise AssertionError(f"invariant {missing[0]} was not checked on this run (checked: "
                             f"{', '.join(report)})")
    _raise_violations(Report({name: report[name] for name in wanted}), " (run's report)")


def assert_queue_bounds(ds: xr.Dataset, *, at_most: float | None = None, after: float = 0.0,
                        tolerance: float | None = None) -> None:
    """Every queue stays within [0, its buffer] at every record, peaks between records included
    (`queue_min`, `queue_max`; host NICs, which never drop, are not bounded); and, with
    `at_most` (bytes), every queue stays at or below it from `after` (s) on, e.g. a predicted
    standing queue such as DCTCP's K + N packets. `tolerance` is relative (default: the
    precision's round-off)."""
    _recheck(ds, "queue_bounds", tolerance)
    if at_most is None:
        return
    peaks = (ds.queue_max if "queue_max" in ds else ds.queue).sel(time=ds.time > after)
    if peaks.size == 0 or float(peaks.max()) <= at_most:
        return
    where = peaks.argmax(...)
    link = str(peaks.link.values[int(where["link"])])
    at = float(peaks.time.values[int(where["time"])])
    packet = float(ds.attrs.get("packet_bytes", 1500))
    top = float(peaks.max())
    raise AssertionError(f"queue of link {link} at t = {format_time(at)} holds "
                         f"{format_bytes(top)} ({top / packet:.4g} pkt), above the bound "
                         f"{format_bytes(at_most)} ({at_most / packet:.4g} pkt)"
                         f"{f' after {format_time(after)}' if after > 0 else ''}")


def assert_capacity(ds: xr.Dataset, *, tolerance: float | None = None) -> None:
    """No link departs faster than its capacity, at any record (`tolerance` relative)."""
    _recheck(ds, "capacity", tolerance)


def assert_conservation(ds: xr.Dataset, *, tolerance: float | None = None) -> None:
    """Bytes are conserved on every link: what arrived equals what departed, is queued or was
    dropped, to within one packet, at every record."""
    _recheck(ds, "byte_conservation", tolerance)


def assert_work_conservation(ds: xr.Dataset, *, tolerance: float | None = None) -> None:
    """A link whose queue held data throughout a record departed at its capacity (within one
    packet per record, while not paused by PFC)."""
    _recheck(ds, "work_conservation", tolerance)


def assert_utilization(ds: xr.Dataset, at_least: float, *, link: str | None = None,
                       warmup: float | None = None) -> None:
    """The mean utilization of `link` (default: the busiest, as `metrics.hotspots` ranks them)
    over the steady window (after `warmup` s; default the run's) is at least `at_least` (a
    fraction of its capacity, 0.95 for 95 %)."""
    ranked = hotspots(ds, top=ds.sizes["link"], warmup=warmup)
    if link is None:
        link = str(ranked.link.values[0])
    elif link not in ranked.link.values:
        raise ValueError(f"link {link!r} is not in the result; links: "
                         f"{', '.join(map(str, ds.link.values))}")
    used = float(ranked.utilization.sel(link=link))
    if used >= at_least:
        return
    capacity = float(ds.capacity.sel(link=link))
    start = default_warmup(ds) if warmup is None else warmup
    raise AssertionError(f"link {link} carries {used:.2%} of its {format_rate(capacity)} "
                         f"({format_rate(used * capacity)}) on average after "
                         f"{format_time(start)}, below {at_least:.2%}")


def _flow(ds: xr.Dataset, index: int) -> str:
    """A flow as a reader finds it in the Dataset: its label and its ends."""
    name = f"flow {ds.flow.values[index]}"
    if "src" in ds.coords and "dst" in ds.coords:
        name += f" ({ds.src.values[index]}->{ds.dst.values[index]})"
    return name


def assert_fair(ds: xr.Dataset, within: float, *, criterion: Criterion = "jain",
                scenario: Scenario | None = None, warmup: float | None = None) -> None:
    """The flows' throughput over the steady window (after `warmup` s, default the run's) is
    fair to a tolerance `within`:

    - "jain": Jain's index of every flow in `ds` is at least 1 - within (select the flows that
      should share equally first, `ds.isel(flow=...)`);
    - "max_min", "proportional", or the congestion control's name ("reno", "olia", ...):
      every flow's throughput is within `within` (relative) of its share in that allocation
      (`analysis.fairness.fairness_of`: max-min, proportional fairness, connections of several
      subflows pooling their paths, or the control's own utility optimum at the run's round
      trips where it has one: Reno, DCTCP, uncoupled subflows, OLIA; LIA and BALIA on single
      paths), computed on the routing of `scenario` (default: the scenario in the result's
      attrs), on the whole result.
    """
    if not within >= 0:
        raise ValueError(f"within: must be >= 0, got {within}")
    if criterion == "jain":
        rates = throughput(ds, warmup).values
        index = jain_index(rates)
        if index >= 1 - within:
            return
        low, high = int(np.argmin(rates)), int(np.argmax(rates))
        raise AssertionError(f"Jain's index {index:.4f} of {rates.size} flows is below "
                             f"{1 - within:.4f}: {_flow(ds, low)} gets "
                             f"{format_rate(rates[low])}, {_flow(ds, high)} "
                             f"{format_rate(rates[high])} (mean {format_rate(rates.mean())})")
    if scenario is None:
        if "scenario" not in ds.attrs:
            raise ValueError(f"criterion {criterion!r}: give the scenario (the result holds "
                             "none in its attrs)")
        scenario = Scenario.from_toml(ds.attrs["scenario"])
    allocation = fairness_of(ds, scenario, warmup)
    if criterion not in allocation:
        known = ", ".join(["jain", *(name for name in allocation.data_vars
                                     if name != "simulated")])
        raise ValueError(f"criterion {criterion!r} is not known for this run; known: {known}")
    simulated, share = allocation.simulated.values, allocation[criterion].values
    off = np.abs(simulated - share) / np.where(share > 0, share, math.nan)
    off = np.where(share > 0, off, np.where(simulated > 0, math.inf, 0.0))
    worst = int(np.argmax(off))
    if off[worst] <= within:
        return
    raise AssertionError(f"{_flow(ds, worst)} gets {format_rate(simulated[worst])}, "
                         f"{off[worst]:.1%} off its {criterion} share "
                         f"{format_rate(share[worst])} (tolerance {within:.1%})")


def assert_converges(ds: xr.Dataset, within: float, *, band: float = 0.1,
                     link: str | None = None) -> None:
    """The run settles within `within` seconds, e.g. a predicted convergence time (scale it for
    the prediction's own error): every running flow's rate stays within +-`band` of its final
    mean from then on, and the queue of `link` (default: the busiest) within its band, as
    `metrics.convergence_time` judges it. Fails too when the run cannot be judged (too few
    records, no flow running at the end)."""
    found = convergence_time(ds, band=band, link=link)
    if found.reason is not None:
        raise AssertionError(f"convergence cannot be judged: {found.reason}")
    if found.time <= within:
        return
    flows = found.flows.values
    late = int(np.argmax(np.where(np.isnan(flows), -math.inf, flows)))
    if np.isnan(flows[late]) or found.queue_time >= flows[late]:
        last = f"the queue of link {found.link} {_settles(found.queue_time)}"
    else:
        last = (f"{_flow(ds, late)} {_settles(flows[late])} (its rate within {band:.0%} of its "
                "final mean)")
    raise AssertionError(f"not settled within {format_time(within)}: {last}")


def _settles(at: float) -> str:
    if math.isinf(at):  # convergence_time's inf: not before the last quarter of the run
        return "does not settle before the last quarter of the run"
    return f"settles at {format_time(at)}"
