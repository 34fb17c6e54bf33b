"""Priority flow control (models/pfc.py) against conservation and the packet level.

The fluid model keeps the time average of PFC's pauses; the packet-level reference sends every
PAUSE and resume frame. The victim-flow experiment of examples/pfc_victim.toml (congestion
spreading on a k = 4 fat-tree, the experiment that motivated DCQCN) and a permutation plus one
incast (examples/pfc_permutation.toml) are run in both engines.
"""

from __future__ import annotations

import re
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


INCAST_PORT = "edge0_0->h0_0_0"  # where both scenarios' incast meets its receiver


def _without_incast(scenario: pathflow.Scenario) -> pathflow.Scenario:
    """The scenario without its first traffic group, the incast."""
    return scenario.with_updates({"traffic.groups": scenario.to_dict()["traffic"]["groups"][1:]})


def _nothing_dropped(runs: list[xr.Dataset]) -> Check:
    return Check.band("bytes dropped (both engines)", float(sum(
        (ds.drops * ds.attrs["sample_interval"]).sum() for ds in runs)), 0.0, 0.0, "bytes")


def _paused_fractions(paused: dict[str, xr.DataArray], links: list[str], note: str = ""
                      ) -> list[Check]:
    """Each link's paused fraction, fluid against packet level, within 0.05."""
    return [Check(f"paused fraction, {link}{note}", float(paused["packet"].sel(link=link)),
                  float(paused["fluid"].sel(link=link)), 0.05, scale="absolute")
            for link in links]


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
    alone = _without_incast(scenario)
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
              float(fluid.utilization.sel(link=INCAST_PORT).mean()), 0.02),
        _nothing_dropped([fluid, packet]),
    ]
    paused = {name: ds.pause.mean("time") for name, ds in (("packet", packet), ("fluid", fluid))}
    checks += _paused_fractions(paused, UPSTREAM)
    return CaseResult(checks, _figure(paused, {"packet": packet, "fluid": fluid}))


def _rates(ds: xr.Dataset, flows: list[int]) -> np.ndarray:
    return ds.flow_rate.sel(flow=flows).mean("time").values


@case("pfc_permutation_incast", "PFC on a k = 4 fat-tree: a permutation plus one incast, "
      "congestion spreading", "packet level")
def pfc_permutation_incast() -> CaseResult:
    """examples/pfc_permutation.toml: a permutation of pods 0, 2 and 3 (pod 0 -> 2 -> 3 -> 0)
    on 40 Gb/s switch links, where alone every flow runs at line rate, plus pod 1's incast into
    h0_0_0, senders that ignore congestion, PFC the only brake. Victims: the permutation's
    flows that enter pod 0 but not through the incast's port, so that they share no bottleneck
    with it; bystanders: those that never enter pod 0. Claimed in both engines: the
    permutation alone runs free (every flow at least 95 % of line rate, measured 96.9 and
    96.4 %: the rest is the ACKs of the flow each host receives); beside the incast the
    victims fall below half their rate alone (measured 0.17 in both) while bystanders
    keep theirs within 3 % (measured 1.5 %); the victims' rates agree between the engines within
    15 % (the fluid pauses are the packet level's frames' time average: measured within 12 %);
    the pauses reach the victims' own edge switches in pod 3, five hops upstream of the port,
    paused fractions within 0.05 (measured 0.01); nothing drops."""
    from pathflow.validation.packet import simulate_packets

    scenario = shipped("pfc_permutation.toml")
    alone = _without_incast(scenario)
    runs = {name: (_quietly(run, scenario), _quietly(run, alone))
            for name, run in (("packet", simulate_packets), ("fluid", pathflow.simulate))}
    both, _ = runs["fluid"]
    paths = {int(f): str(both.path_links.sel(flow=f).values[0])
             for f in both.flow.values[both.group.values == 1]}
    into_pod0 = {f for f, path in paths.items() if re.search(r"core\d+_\d+->agg0_", path)}
    victims = [f for f in sorted(into_pod0) if INCAST_PORT not in paths[f]]
    bystanders = [f for f in paths if f not in into_pod0]
    # the alone run numbers the permutation's flows from 0
    first = min(paths)
    checks = []
    rates = {}
    for name, (beside, solo) in runs.items():
        slowest = float(solo.flow_rate.mean("time").min()) / LINE_RATE
        checks.append(Check.band(f"permutation alone: slowest flow / line rate ({name})",
                                 slowest, 0.95, 1.0, why="no bottleneck in the permutation"))
        ratio = {kind: _rates(beside, flows) / _rates(solo, [f - first for f in flows])
                 for kind, flows in (("victims", victims), ("bystanders", bystanders))}
        checks += [
            Check.band(f"victims beside the incast: largest rate / alone ({name})",
                       float(ratio["victims"].max()), 0.0, 0.5,
                       why="congestion spreading: under half"),
            Check.band(f"bystanders: smallest rate / alone ({name})",
                       float(ratio["bystanders"].min()), 0.97, 1.03, why="within 3 %"),
        ]
        rates[name] = _rates(beside, victims)
    for flow, packet, fluid in zip(victims, rates["packet"], rates["fluid"], strict=True):
        checks.append(Check(f"victim {paths[flow].split('->')[0]} -> "
                            f"{paths[flow].rsplit('->', 1)[1]}, beside the incast",
                            float(packet), float(fluid), 0.15, "bytes/s"))
    paused = {name: beside.pause.mean("time") for name, (beside, _) in runs.items()}
    sources = sorted({path.split(" > ")[1] for f, path in paths.items() if f in victims})
    checks += _paused_fractions(paused, sources, " (a victim's edge uplink)")
    checks.append(_nothing_dropped([beside for beside, _ in runs.values()]))
    return CaseResult(checks, _figure(paused, {name: beside for name, (beside, _) in
                                               runs.items()}, victims[0]))


def _figure(paused: dict[str, xr.DataArray], runs: dict[str, xr.Dataset], flow: int = -1
            ) -> Any:
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
        victim = ds.flow_rate.sel(flow=ds.flow[flow]).rolling(time=width).mean().dropna("time")
        series.plot(victim.time * 1e3, victim * 8 / 1e9, lw=0.8, label=name)
    series.set_xlabel("time (ms)")
    series.set_ylabel("victim's rate, 50 us means (Gb/s)")
    series.set_ylim(0, 10.5)
    series.legend(fontsize=8)
    fig.suptitle("PFC on a k = 4 fat-tree: the links paused longest, and the victim flow",
                 fontsize=10)
    fig.tight_layout()
    return fig
