"""Priority flow control (models/pfc.py) against conservation and the packet level.

The fluid model keeps the time average of PFC's pauses; the packet-level reference sends every
PAUSE and resume frame. The victim-flow experiment of examples/pfc_victim.toml (congestion
spreading on a k = 4 fat-tree, the experiment that motivated DCQCN) is run in both engines.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import xarray as xr

import pathflow
from pathflow.validation.cases.common import shipped
from pathflow.validation.registry import CaseResult, Check, case

LINE_RATE = 10e9 / 8  # bytes/s: every host link of the scenario
WARMUP = 1e-3  # s: the start's burst
# four hops upstream of the incast's port: pod 1's edge uplinks
UPSTREAM = [f"edge1_{e}->agg1_{a}" for e in (0, 1) for a in (0, 1)]


def _quietly(run: Any, scenario: pathflow.Scenario) -> xr.Dataset:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # senders that ignore congestion: said in the scenario
        ds = run(scenario)
    return ds.sel(time=ds.time > WARMUP)


@case("pfc_congestion_spreading", "PFC on a k = 4 fat-tree: congestion spreading and a victim "
      "flow", "packet level")
def pfc_congestion_spreading() -> CaseResult:
    """Four pod-1 hosts send at line rate into h0_0_0 with nothing but PFC to slow them; the
    victim h0_1_0 -> h0_0_1 shares only uncongested 40 Gb/s links with them. Alone, the victim
    runs at line rate (its path has no bottleneck); beside the incast the pauses of edge0_0's
    aggregation links stop it too. Tolerances: 15 % on the victim's rate and 0.05 on each
    link's paused fraction, the fluid pauses being the time average of the packet level's
    frames (measured within 5 % and 0.01); nothing may drop, and the incast's port stays busy."""
    from pathflow.validation.packet import simulate_packets

    scenario = shipped("pfc_victim.toml")
    alone = scenario.with_updates({"traffic.groups": scenario.to_dict()["traffic"]["groups"][1:]})
    fluid, packet = (_quietly(run, scenario) for run in (pathflow.simulate, simulate_packets))
    victim_alone = float(_quietly(pathflow.simulate, alone).flow_rate.mean())
    victims = [float(ds.flow_rate.isel(flow=-1).mean()) for ds in (packet, fluid)]
    checks = [
        Check("victim alone: its line rate", LINE_RATE, victim_alone, 0.01, "bytes/s"),
        Check("victim beside the incast", victims[0], victims[1], 0.15, "bytes/s"),
        Check.band("victim beside the incast, fraction of line rate (fluid)",
                   victims[1] / LINE_RATE, 0.0, 0.8, why="head-of-line blocking: well below "
                   "line rate"),
        Check("incast port busy (fluid)", 1.0,
              float(fluid.utilization.sel(link="edge0_0->h0_0_0").mean()), 0.02),
        Check.band("bytes dropped (both engines)",
                   float(sum((ds.drops * ds.attrs["sample_interval"]).sum()
                             for ds in (fluid, packet))), 0.0, 0.0, "bytes"),
    ]
    paused = {name: ds.pause.mean("time") for name, ds in (("packet", packet), ("fluid", fluid))}
    for link in UPSTREAM:
        checks.append(Check(f"paused fraction, {link}", float(paused["packet"].sel(link=link)),
                            float(paused["fluid"].sel(link=link)), 0.05, scale="absolute"))
    return CaseResult(checks, _figure(paused, {"packet": packet, "fluid": fluid}))


def _figure(paused: dict[str, xr.DataArray], runs: dict[str, xr.Dataset]) -> Any:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 4))
    bars, series = fig.subplots(1, 2, gridspec_kw={"width_ratios": [3, 2]})
    shown = paused["packet"].sortby(paused["packet"], ascending=False)[:10].link.values
    x = np.arange(len(shown))
    for offset, (name, values) in zip((-0.2, 0.2), paused.items(), strict=True):
        bars.bar(x + offset, values.sel(link=shown), 0.4, label=name)
    bars.set_xticks(x, [str(name) for name in shown], rotation=60, ha="right", fontsize=7)
    bars.set_ylabel("fraction of time paused")
    bars.legend(fontsize=8)
    for name, ds in runs.items():  # 50 us means: packet-level samples hold a few packets
        width = max(1, round(50e-6 / ds.attrs["sample_interval"]))
        victim = ds.flow_rate.isel(flow=-1).rolling(time=width).mean().dropna("time")
        series.plot(victim.time * 1e3, victim * 8 / 1e9, lw=0.8, label=name)
    series.set_xlabel("time (ms)")
    series.set_ylabel("victim's rate, 50 us means (Gb/s)")
    series.set_ylim(0, 10.5)
    series.legend(fontsize=8)
    fig.suptitle("PFC on a k = 4 fat-tree: the links paused longest, and the victim flow",
                 fontsize=10)
    fig.tight_layout()
    return fig
