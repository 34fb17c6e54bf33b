"""DCQCN+ and DCQCN+static (models/dcqcn_plus.py, models/dcqcn_static.py) against the packet
level, on the seed 001 testbed's switch.

Both engines run the reaction point of seed 001 section 4.3 (docs/dcqcn_plus.md) on a 10 Gb/s
star with the testbed's 5.1 MB buffer, PFC and DCQCN's marking (cx4: Kmin 5 KB, Kmax 200 KB,
Pmax 1 %), 1 KB packets.
"""

from __future__ import annotations

import warnings
from typing import Any

import xarray as xr
from matplotlib.figure import Figure

import pathflow
from pathflow import Scenario
from pathflow.metrics import convergence_time
from pathflow.validation.cases.common import SETTLING_SMOOTHING, queue_figure, steady_window
from pathflow.validation.registry import CaseResult, Check, case

PACKET = 1000.0  # bytes
MIN_RATE = 1e6 / 8  # bytes/s: DCQCN+'s default floor (ConnectX rpg_min_rate)


def testbed_incast(flows: int, duration: str = "100ms", start_jitter: str | None = None,
                   cc: str = "dcqcn+") -> Scenario:
    """`flows` DCQCN+ (or `cc`) flows from at most 8 senders into one receiver at 10 Gb/s."""
    traffic: dict[str, Any] = {"pattern": "incast", "flows": flows}
    if start_jitter is not None:
        traffic["start_jitter"] = start_jitter
    return Scenario.from_dict({
        "topology": {"kind": "star", "senders": min(flows, 8), "link_rate": "10Gbps",
                     "delay": "1us", "buffer": "5.1MB"},
        "aqm": {"kind": "dcqcn", "preset": "cx4", "pfc": True},
        "traffic": traffic,
        "transport": {"cc": cc, "mss": f"{PACKET:g}B"},
        "run": {"duration": duration},
    })


def _both(scenario: Scenario) -> tuple[xr.Dataset, xr.Dataset]:
    from pathflow.validation.packet import simulate_packets

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pathflow.simulate(scenario), simulate_packets(scenario)


@case("dcqcn_plus_fluid_packet", "DCQCN+ incasts at 10 Gb/s: fluid model against the packet "
      "level", "packet level")
def dcqcn_plus_fluid_packet() -> CaseResult:
    """Three incasts, second half of each run. 2:1 started at line rate: both engines share the
    link fairly (min/max rate at least 0.9: a claim on each engine); the mean-field model keeps
    the link full where packet-level flows, cut below their share now and then, idle it part
    of the time (throughput and queue reported). 4:1 started at line rate: the trap at
    min_rate that the model predicts (docs/dcqcn_plus.md): the queue passes Kmax, the cuts take
    every flow to 1 Mb/s, where the timer is 25 ms; 50 ms after the start every flow's rate is
    still within twice min_rate, in both engines (claimed). 8:1 with flows started over 100 ms
    (the thesis's ns-3 set-up; 300 ms): the mean queue within 20 % and the settling time of
    every flow and the queue within 30 % (smoothed over 2 ms), DCQCN's tolerances (claimed;
    measured 0.5 % and 18 %); throughput reported (the mean field keeps the link fuller: 7.9
    against 7.3 Gb/s). 64:1 started the same way: throughput and queue reported. DCQCN+static,
    the testbed's approximation, on 80:1 (the testbed's smallest incast): mean queue within
    20 %, the tolerance of DCQCN's own comparison (claimed); throughput reported: within 2.8 %
    before DCQCN's hyper increase was modelled, 4.3 % after, where R_HAI (50 Mb/s, 17 times the
    3 Mb/s step at 80 flows) fires on the mean field's rare long gaps between cuts (3.0 ms per
    flow against the packet level's 0.5 ms, measured 2026-11-25; models/dcqcn.py)."""
    checks, series = [], {}
    fluid, packet = _both(testbed_incast(2))
    for name, ds in (("fluid", fluid), ("packet", packet)):
        rates = pathflow.metrics.throughput(ds).values
        checks.append(Check(f"2:1 rate spread min/max, {name}", 1.0,
                            float(rates.min() / rates.max()), 0.1, scale="absolute",
                            why="fair share"))
    for quantity, variable, unit in (("throughput", "link_departure", "bytes/s"),
                                     ("mean queue", "queue", "bytes")):
        values = [float(steady_window(ds, 0.05)[variable].mean())
                  for ds in (packet, fluid)]
        checks.append(Check(f"2:1 {quantity}", values[0], values[1], None, unit,
                            why="mean field: the link stays full (reported)"))
    series["2:1 fluid"], series["2:1 packet"] = (ds.queue.sel(link="s0->r0") / PACKET
                                                 for ds in (fluid, packet))
    for name, ds in zip(("fluid", "packet"), _both(testbed_incast(4)), strict=True):
        fastest = float(steady_window(ds, 0.05).current_rate.max())
        checks.append(Check.band(f"4:1 fastest rate after 50 ms / min_rate, {name}",
                                 fastest / MIN_RATE, 1.0, 2.0, why="the trap at min_rate"))
    fluid, packet = _both(testbed_incast(8, "300ms", start_jitter="100ms"))
    for quantity, variable, unit, tolerance in (("throughput", "link_departure", "bytes/s", None),
                                                ("mean queue", "queue", "bytes", 0.20)):
        values = [float(steady_window(ds, 0.15)[variable].mean()) for ds in (packet, fluid)]
        checks.append(Check(f"8:1 started over 100 ms, {quantity}", values[0], values[1],
                            tolerance, unit, why="mean field: the link stays full (reported)"
                            if tolerance is None else "as DCQCN's 8:1 (dcqcn_fluid_packet)"))
    settled = [convergence_time(ds, smoothing=SETTLING_SMOOTHING, link="s0->r0").time
               for ds in (packet, fluid)]
    checks.append(Check("8:1 started over 100 ms, settling time (every flow and the queue)",
                        *settled, 0.30, "s", why="as DCQCN's 8:1 (dcqcn_fluid_packet)"))
    fluid, packet = _both(testbed_incast(64, "200ms", start_jitter="100ms"))
    for quantity, variable, unit in (("throughput", "link_departure", "bytes/s"),
                                     ("mean queue", "queue", "bytes")):
        values = [float(steady_window(ds, 0.15)[variable].mean())
                  for ds in (packet, fluid)]
        checks.append(Check(f"64:1 started over 100 ms, {quantity}", values[0], values[1],
                            None, unit, why="flows held at min_rate beside flows that are not "
                            "(reported)"))
    fluid, packet = _both(testbed_incast(80, cc="dcqcn+static"))
    for quantity, variable, unit, tolerance, why in (
            ("throughput", "link_departure", "bytes/s", None, "the mean field cuts each flow "
             "every 3 ms, the NIC every 0.5 ms: hyper increase fires where a NIC's never does "
             "(reported; 2.8 % without it)"),
            ("mean queue", "queue", "bytes", 0.20, "as DCQCN's 8:1 (dcqcn_fluid_packet)")):
        values = [float(steady_window(ds, 0.05)[variable].mean()) for ds in (packet, fluid)]
        checks.append(Check(f"dcqcn+static 80:1, {quantity}", values[0], values[1], tolerance,
                            unit, why=why))
    series["dcqcn+static 80:1 fluid"], series["dcqcn+static 80:1 packet"] = (
        ds.queue.sel(link="s0->r0") / PACKET for ds in (fluid, packet))
    return CaseResult(checks, queue_figure(series, "DCQCN+ 2:1 and DCQCN+static 80:1 incasts at "
                                           "10 Gb/s, 1 KB packets"))


@case("dcqcn_plus_large_incast", "Seed 001's ns-3 claim: DCQCN+ queues about 20x smaller than "
      "DCQCN's from 800 to 2,000 flows at 10 and 40 Gb/s", "ns-3", fast=False)
def dcqcn_plus_large_incast() -> CaseResult:
    """The thesis's ns-3 runs (section 6.4; the numbers are not in its text) report about 20x
    smaller queues for DCQCN+ than for DCQCN in incasts of 800 to 2,000 flows at 10 and
    40 Gb/s. pathflow's prediction on the testbed's switch (`testbed_incast`, 200 ms, flows
    started at line rate): the ratio of DCQCN's mean queue to DCQCN+'s (DCQCN+'s floored at one
    packet) and DCQCN+'s share of the link, at 800 and 2,000 flows, reported: the thesis gives
    no numbers to hold them to, and its start-up and minimum rate are not stated (the trap at
    min_rate, docs/dcqcn_plus.md, decides the 10 Gb/s result). Claimed: PFC keeps the switch
    lossless at every point."""
    from pathflow.sweeps import sweep

    checks, figure = [], Figure(figsize=(9, 3.5))
    for axes, rate in zip(figure.subplots(1, 2), ("10Gbps", "40Gbps"), strict=True):
        base = testbed_incast(8, "200ms", cc="dcqcn").with_updates(
            {"topology.link_rate": rate, "aqm.preset": "cx4", "transport.preset": "cx4"})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            swept = sweep(base, [800, 2000], set={"transport.cc": ["dcqcn", "dcqcn+"]})
        capacity = float(swept.capacity.max())
        for n in (800, 2000):
            mean = swept.queue_mean.sel(flows=n)
            ratio = float(mean.sel(cc="dcqcn")) / max(float(mean.sel(cc="dcqcn+")), PACKET)
            checks.append(Check(f"{rate} {n} flows: DCQCN / DCQCN+ mean queue", 20.0, ratio,
                                None, why="the thesis's 'about 20x' (reported)"))
            share = float(swept.aggregate_throughput.sel(cc="dcqcn+", flows=n)) / capacity
            checks.append(Check(f"{rate} {n} flows: DCQCN+ throughput / link rate", 1.0, share,
                                None, why="below 1: flows held at min_rate idle the link "
                                "(reported)"))
        checks.append(Check(f"{rate}: drop rate at the bottleneck, largest of the points", 0.0,
                            float(swept.drops.max()), 0.0, "bytes/s", "absolute",
                            why="PFC keeps the switch lossless"))
        for cc in ("dcqcn", "dcqcn+"):
            axes.plot(swept.flows, swept.queue_mean.sel(cc=cc) / 1e3, "-o", label=f"{cc} mean")
            axes.plot(swept.flows, swept.queue_p99.sel(cc=cc) / 1e3, ":s", label=f"{cc} p99")
        axes.set(title=rate, xlabel="flows", ylabel="queue (KB)")
        axes.legend(fontsize=7)
    return CaseResult(checks, figure)
