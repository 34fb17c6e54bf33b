"""Priority flow control (models/pfc.py, `[aqm] pfc = true`) in both engines: nothing dropped,
the pause time that conservation dictates, congestion spreading on a fat-tree, the step-size
check, and its scenario errors. The engines' agreement on the fat-tree is the validation case
`pfc_congestion_spreading` (validation/cases/lossless.py)."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
import xarray as xr
from typer.testing import CliRunner

from pathflow import Scenario
from pathflow.cli import app
from pathflow.compile import compile_scenario
from pathflow.invariants import dt_halving_verdict
from pathflow.scenario import ScenarioError
from pathflow.simulate import simulate
from pathflow.validation.packet import simulate_packets

LINE_RATE = 10e9 / 8  # bytes/s


def _run(scenario: Scenario, engine: str) -> xr.Dataset:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # senders that ignore marks, or drops without PFC
        return simulate(scenario) if engine == "fluid" else simulate_packets(scenario)


def _steady(ds: xr.Dataset) -> xr.Dataset:
    """After the first millisecond (the start's burst)."""
    return ds.sel(time=ds.time > 1e-3)


def _star(pfc: bool, cc: str = "dcqcn", aqm: dict[str, Any] | None = None,
          duration: str = "4ms", buffer: str = "60KB") -> Scenario:
    """8 senders at 10 Gb/s into one receiver through a 60 KB port buffer."""
    return Scenario.from_dict({
        "topology": {"kind": "star", "senders": 8, "link_rate": "10Gbps", "delay": "1us",
                     "buffer": buffer},
        "aqm": {"kind": "droptail", "pfc": pfc, **(aqm or {})},
        "transport": {"cc": cc, "mss": "1KB"},
        "run": {"duration": duration}})


@pytest.mark.parametrize("engine", ["fluid", "packet"])
def test_pfc_alone_pauses_each_sender_for_all_but_its_share_and_drops_nothing(engine: str
                                                                              ) -> None:
    """Rate-based senders on a queue that never marks stay at line rate (RoCE with PFC and no
    end-to-end control): without PFC the port overflows; with it nothing is lost, the receiver's
    link stays busy, and since 8 equal senders share it, each NIC may send 1/8 of the time and
    is paused 7/8 of it (conservation, whatever the thresholds)."""
    lossy = _run(_star(pfc=False), engine)
    assert float(lossy.drops.sum()) > 0
    ds = _run(_star(pfc=True), engine)
    steady = _steady(ds)
    assert float(ds.drops.sum()) == 0
    assert float(steady.utilization.sel(link="s0->r0").mean()) > 0.98
    nics = [f"h{i}->s0" for i in range(8)]
    paused = steady.pause.sel(link=nics).mean("time").values
    np.testing.assert_allclose(paused, 7 / 8, atol=0.02)
    assert float(steady.pause.sel(link="s0->r0").max()) == 0  # a host never pauses


@pytest.mark.parametrize("engine", ["fluid", "packet"])
def test_a_shared_buffer_pauses_earlier_as_the_switch_fills(engine: str) -> None:
    """The same 8 line-rate senders into a switch whose ports share a 1 MB pool (pfc_alpha
    1/8): a sender's bytes in the switch are Q/8 and it is paused above alpha (B - H - Q), so
    the queue settles where Q/8 = alpha (B - H - Q): Q = 8 alpha (B - H) / (1 + 8 alpha), H
    the headroom of the switch's 9 ingress ports (2 x 1 us x 10 Gb/s + 2 packets each), 480 KB
    (closed form; 1 % fluid, 3 % packet level, whose pauses flip around the threshold). With
    per-port thresholds on 1 MB port buffers the queue sits near 8 x Xoff, above 800 KB.
    Nothing is dropped in either."""
    expected = 8 * 0.125 * (1e6 - 9 * (2 * 1e-6 * LINE_RATE + 2 * 1000)) / (1 + 8 * 0.125)
    for shared, check in ((True, lambda q: q == pytest.approx(expected,
                                                              rel=0.01 if engine == "fluid"
                                                              else 0.03)),
                          (False, lambda q: q > 800e3)):
        aqm = {"shared_buffer": "1MB"} if shared else {}
        ds = _run(_star(pfc=True, aqm=aqm, buffer="1MB"), engine)
        queue = float(_steady(ds).queue.sel(link="s0->r0").mean())
        assert check(queue), f"shared = {shared}: queue {queue:.0f} B"
        assert float(ds.drops.sum()) == 0


@pytest.mark.parametrize("engine", ["fluid", "packet"])
def test_window_based_flows_on_lossless_switches_lose_nothing(engine: str) -> None:
    """Reno on drop-tail learns of congestion from losses alone; with PFC there are none, so its
    windows only grow, and the pauses alone hold the port's queue within its buffer."""
    ds = _run(_star(pfc=True, cc="reno"), engine)
    assert float(ds.drops.sum()) == 0
    assert float(ds.queue_max.sel(link="s0->r0").max()) < 60e3
    steady = _steady(ds)
    assert float(steady.utilization.sel(link="s0->r0").mean()) > 0.98


def _fat_tree(incast: bool) -> Scenario:
    """k = 4 fat-tree, 10 Gb/s with 40 Gb/s edge-aggregation links, PFC alone (senders at line
    rate): four pod-1 hosts send into h0_0_0 (incast), and the victim h0_1_0 -> h0_0_1 shares
    with it only the 40 Gb/s aggregation-to-edge links into edge0_0, never a full one."""
    groups = [{"pattern": "explicit", "pairs": [[2, 1]]}]
    if incast:
        groups.insert(0, {"pattern": "explicit", "pairs": [[4, 0], [5, 0], [6, 0], [7, 0]]})
    return Scenario.from_dict({
        "topology": {"kind": "fattree", "k": 4, "link_rate": "10Gbps", "delay": "1us",
                     "buffer": "300KB", "links": [{"tier": "edge-agg", "link_rate": "40Gbps"}]},
        "aqm": {"kind": "droptail", "pfc": True},
        "transport": {"cc": "dcqcn", "mss": "1KB"},
        "traffic": {"groups": groups},
        "run": {"duration": "5ms"}})


@pytest.mark.parametrize("engine", ["fluid", "packet"])
def test_pauses_spread_upstream_and_slow_a_victim_that_shares_no_bottleneck(engine: str
                                                                            ) -> None:
    """Congestion spreading: the incast's port fills, edge0_0 pauses the aggregation links that
    feed it, whose queues fill and pause the cores, and so on back to the incast's senders; the
    victim's traffic to an idle port waits behind the paused links. Alone, its path has no
    bottleneck: it runs at line rate."""
    alone = _run(_fat_tree(incast=False), engine)
    assert float(_steady(alone).flow_rate.mean()) > 0.97 * LINE_RATE
    ds = _run(_fat_tree(incast=True), engine)
    steady = _steady(ds)
    assert float(ds.drops.sum()) == 0
    victim = float(steady.flow_rate.isel(flow=-1).mean())
    assert victim < 0.8 * LINE_RATE
    assert float(steady.utilization.sel(link="edge0_0->h0_0_0").mean()) > 0.98
    paused = steady.pause.mean("time")
    # four hops upstream of the full port: the links from pod 1's edge switches up
    upstream = [f"edge1_{e}->agg1_{a}" for e in (0, 1) for a in (0, 1)]
    assert float(paused.sel(link=upstream).min()) > 0.3


def test_pause_decisions_hold_when_the_step_halves() -> None:
    scenario = _fat_tree(incast=True)
    dt = compile_scenario(scenario).dt
    coarse, fine = (_run(Scenario.from_dict({**scenario.to_dict(),
                                             "run": {"duration": "5ms", "dt": f"{step!r}s"}}),
                         "fluid") for step in (dt, dt / 2))
    assert dt_halving_verdict(coarse, fine).ok
    victim = [float(_steady(d).flow_rate.isel(flow=-1).mean()) for d in (coarse, fine)]
    assert victim[1] == pytest.approx(victim[0], rel=0.05)


def test_pfc_errors_name_the_field() -> None:
    with pytest.raises(ScenarioError, match=r"^aqm\.xon: 50KB must not exceed xoff \(40KB\)$"):
        _star(pfc=True, aqm={"xoff": "40KB", "xon": "50KB"})
    with pytest.raises(ScenarioError, match=r"^aqm\.xoff: applies with aqm\.pfc = true only$"):
        _star(pfc=False, aqm={"xoff": "40KB"})
    with pytest.raises(ScenarioError, match=r"^aqm\.pfc: 1 must be true or false$"):
        Scenario.from_dict({"topology": {"kind": "star", "senders": 2},
                            "aqm": {"pfc": 1}})
    with pytest.raises(ScenarioError, match=r"^aqm\.shared_buffer: applies with aqm\.pfc = "):
        _star(pfc=False, aqm={"shared_buffer": "1MB"})
    with pytest.raises(ScenarioError, match=r"^aqm\.pfc_alpha: applies with aqm\.shared_buffer"):
        _star(pfc=True, aqm={"pfc_alpha": 0.5})
    with pytest.raises(ScenarioError, match=r"^aqm\.xoff: with aqm\.shared_buffer the "):
        _star(pfc=True, aqm={"shared_buffer": "1MB", "xoff": "40KB"})
    with pytest.raises(ScenarioError, match=r"^aqm\.pfc_alpha: 0 is out of range"):
        _star(pfc=True, aqm={"shared_buffer": "1MB", "pfc_alpha": 0})
    with pytest.raises(ScenarioError, match=r"^aqm\.shared_buffer: 30000 B leaves no room beyond "
                                            r"the headroom of s0's ingress ports \(40500 B\)$"):
        compile_scenario(_star(pfc=True, aqm={"shared_buffer": "30KB"}))
    tiny = Scenario.from_dict({"topology": {"kind": "star", "senders": 8, "buffer": "10KB"},
                               "aqm": {"pfc": True}})
    with pytest.raises(ScenarioError, match=r"^aqm\.xoff: the default for h0->s0 .* leaves "
                                            r"no room; set aqm\.xoff or a larger"):
        compile_scenario(tiny)


def test_dcqcn_without_pfc_is_warned_about() -> None:
    with pytest.warns(UserWarning, match=r"aqm\.pfc = false: 'dcqcn' expects a lossless"):
        Scenario.from_dict({"topology": {"kind": "star", "senders": 2},
                            "aqm": {"kind": "dcqcn"}, "transport": {"cc": "dcqcn"}})


def test_the_command_line_refuses_xon_above_xoff(tmp_path: Any) -> None:
    path = tmp_path / "pfc.toml"
    path.write_text('[topology]\nkind = "star"\nsenders = 2\n'
                    '[aqm]\npfc = true\nxoff = "20KB"\nxon = "30KB"\n')
    result = CliRunner().invoke(app, ["run", str(path), "-q"])
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1].endswith(
        "aqm.xon: 30KB must not exceed xoff (20KB)")
