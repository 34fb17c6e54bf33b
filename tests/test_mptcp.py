"""MPTCP in the fluid model (models/mptcp.py): a one-subflow connection is Reno, and RFC 6356's
three goals hold as properties over capacities, round trips and subflow counts for LIA, OLIA and
BALIA, with the capacity and queue invariants of every run.

The network: a sender A and a receiver B joined by two disjoint paths, A - a - p1 - b - B and
A - a - p2 - b - B, whose bottlenecks are p1 -> b and p2 -> b; background senders C1 and C2
enter at p1 and p2 and leave at b towards D1 and D2, so each background TCP shares exactly one
bottleneck with the connection. Single-path TCP users are Reno flows (a one-subflow
connection, the first test shows, is Reno exactly).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from hypothesis import given
from hypothesis import strategies as st

from helpers import star
from pathflow.metrics import summarize
from pathflow.scenario import Scenario, ScenarioError
from pathflow.simulate import simulate
from pathflow.testing import assert_invariants, simulation_settings

COUPLED = ("lia", "olia", "balia")
HOSTS = ["A", "B", "C1", "D1", "C2", "D2"]
VIA_P1 = ["A", "a", "p1", "b", "B"]
VIA_P2 = ["A", "a", "p2", "b", "B"]
PROPERTY = simulation_settings(max_examples=4)


@pytest.mark.parametrize("cc", [*COUPLED, "uncoupled"])
@pytest.mark.parametrize("reaction", ["mean", "window"])
def test_one_subflow_is_reno(cc: str, reaction: str) -> None:
    """Four Reno flows and four one-subflow connections on a drop-tail star: same windows,
    queues and rates (to rounding: the coupled increase of one subflow is 1 / w computed as a
    ratio of sums)."""
    def run(name: str) -> dict[str, np.ndarray]:
        ds = simulate(star(4, cc=name, aqm={"kind": "droptail"}, buffer="60pkt",
                           duration="300ms", transport={"reaction": reaction}))
        return {v: ds[v].values for v in ("cwnd", "queue", "flow_rate")}

    reno, mptcp = run("reno"), run(cc)
    for name, values in reno.items():
        np.testing.assert_allclose(mptcp[name], values, rtol=1e-9, atol=1e-6, err_msg=name)


def _network(folder: Path, c1: float, c2: float, d1: float, d2: float) -> None:
    """The two-path network (module docstring): bottlenecks of c1, c2 Mb/s and d1, d2 us;
    every other link 10 Gb/s and 1 us; 60-packet buffers."""
    fast = "10Gbps,1us,60pkt"
    rows = ["src,dst,link_rate,delay,buffer", f"A,a,{fast}", f"B,b,{fast}", f"a,p1,{fast}",
            f"a,p2,{fast}", f"p1,b,{c1}Mbps,{d1}us,60pkt", f"p2,b,{c2}Mbps,{d2}us,60pkt",
            f"C1,p1,{fast}", f"C2,p2,{fast}", f"D1,b,{fast}", f"D2,b,{fast}"]
    (folder / "edges.csv").write_text("\n".join(rows) + "\n")


def _simulate(folder: Path, cc: str, pairs: list[list[int]],
              paths: list[tuple[int, list[str]]]) -> xr.Dataset:
    """A 3 s run on the two-path network, its capacity and queue invariants checked."""
    scenario = Scenario.from_dict({
        "topology": {"kind": "graph", "edges": "edges.csv", "hosts": HOSTS},
        "aqm": {"kind": "droptail"},
        "traffic": {"pattern": "explicit", "pairs": pairs},
        "transport": {"cc": cc},
        "routing": {"mode": "shortest", "paths": [{"flow": f, "nodes": n} for f, n in paths]},
        "run": {"duration": "3s"},
    }, base_dir=folder)
    ds = simulate(scenario)
    assert_invariants(ds)
    return ds


def _run(folder: Path, cc: str, pairs: list[list[int]],
         paths: list[tuple[int, list[str]]]) -> np.ndarray:
    """Steady throughput per flow (bytes/s)."""
    return summarize(_simulate(folder, cc, pairs, paths)).throughput.values


capacities = st.integers(20, 200)
delays = st.integers(20, 400)


@PROPERTY
@given(c1=capacities, c2=capacities, d1=delays, d2=delays)
def test_improve_throughput(tmp_path: Path, c1: int, c2: int, d1: int, d2: int) -> None:
    """RFC 6356 goal 1: over two disjoint paths, each shared with one TCP, the connection gets
    at least what a single-path TCP would on the better of the two (within 5 %)."""
    _network(tmp_path, c1, c2, d1, d2)
    pairs = [[0, 1], [2, 3], [4, 5]]
    best_single = max(_run(tmp_path, "reno", pairs, [(0, path)])[0] for path in (VIA_P1, VIA_P2))
    for cc in COUPLED:
        multipath = _run(tmp_path, cc, pairs, [(0, VIA_P1), (0, VIA_P2)])[0]
        assert multipath >= 0.95 * best_single, cc


@PROPERTY
@given(capacity=capacities, delay=delays, subflows=st.integers(2, 4))
def test_do_no_harm(tmp_path: Path, capacity: int, delay: int, subflows: int) -> None:
    """RFC 6356 goal 2: n subflows through one bottleneck shared with a single-path TCP take no
    more than that TCP (within 5 %); uncoupled subflows take about n times as much (within
    15 %)."""
    _network(tmp_path, capacity, capacity, delay, delay)
    pairs = [[0, 1], [2, 3]]
    for cc in COUPLED:
        connection, tcp = _run(tmp_path, cc, pairs, [(0, VIA_P1)] * subflows)
        assert connection <= 1.05 * tcp, cc
    connection, tcp = _run(tmp_path, "uncoupled", pairs, [(0, VIA_P1)] * subflows)
    assert connection / tcp == pytest.approx(subflows, rel=0.15)


@PROPERTY
@given(capacity=capacities, delay=delays, background=st.integers(1, 3))
def test_balance_congestion(tmp_path: Path, capacity: int, delay: int, background: int
                            ) -> None:
    """RFC 6356 goal 3: with TCP background load on path 1 only (equal paths otherwise), the
    connection moves its traffic to path 2, further than independent subflows would: its
    path-1 subflow gets less than an uncoupled one, and less than its path-2 subflow."""
    _network(tmp_path, capacity, capacity, delay, delay)
    pairs = [[0, 1]] + [[2, 3]] * background
    paths = [(0, VIA_P1), (0, VIA_P2)]

    def on_path_one(cc: str) -> float:
        """Throughput of the connection's path-1 subflow over its whole throughput."""
        rates = _subflow_rates(tmp_path, cc, pairs, paths)
        return rates[0] / rates.sum()

    uncoupled = on_path_one("uncoupled")
    for cc in COUPLED:
        share = on_path_one(cc)
        assert share < 0.5, cc
        assert share < 0.9 * uncoupled, cc


def _subflow_rates(folder: Path, cc: str, pairs: list[list[int]],
                   paths: list[tuple[int, list[str]]]) -> np.ndarray:
    """Steady mean delivered rate of flow 0's subflows (bytes/s)."""
    ds = _simulate(folder, cc, pairs, paths)
    steady = ds.subflow_rate.sel(time=slice(0.75, None)).mean("time")
    return steady.values[ds.subflow_flow.values == 0]


def test_subflows_need_a_multipath_control() -> None:
    with pytest.raises(ScenarioError, match=r"^transport\.subflows: 4 subflows need a multipath"):
        star(2, cc="dctcp", transport={"subflows": 4})
    with pytest.raises(ScenarioError, match=r"^transport\.subflows: .*greater than or equal"):
        star(2, cc="lia", transport={"subflows": 0})


@pytest.mark.parametrize(("paths", "message"), [
    ([{"flow": 0, "nodes": ["A", "p1", "b", "B"]}],
     r"^routing\.paths\[0\]\.nodes: no link A -> p1 in the topology$"),
    ([{"flow": 0, "nodes": VIA_P1}, {"flow": 0, "nodes": ["C1", "p1", "b", "D1"]}],
     r"^routing\.paths\[1\]\.nodes: runs C1 -> D1, but flow 0 runs A -> B$"),
    ([{"flow": 3, "nodes": VIA_P1}],
     r"^routing\.paths\[0\]\.flow: 3 is out of range; the traffic has 2 flows \(0\.\.1\)$"),
    ([{"flow": 0, "nodes": ["A", "a", "p1", "a", "p2", "b", "B"]}],
     r"^routing\.paths\[0\]\.nodes: visits a node twice"),
])
def test_explicit_paths_that_do_not_fit_are_named(tmp_path: Path, paths: list[dict],
                                                  message: str) -> None:
    _network(tmp_path, 100, 100, 50, 50)
    scenario = Scenario.from_dict({
        "topology": {"kind": "graph", "edges": "edges.csv", "hosts": HOSTS},
        "traffic": {"pattern": "explicit", "pairs": [[0, 1], [2, 3]]},
        "transport": {"cc": "lia"}, "routing": {"paths": paths}}, base_dir=tmp_path)
    with pytest.raises(ScenarioError, match=message):
        simulate(scenario)


def test_several_paths_for_one_flow_need_a_multipath_control() -> None:
    scenario = star(2, cc="reno", routing={"paths": [{"flow": 0, "nodes": ["h0", "s0", "r0"]}] * 2})
    with pytest.raises(ScenarioError, match=r"^routing\.paths: flow 0 is given 2 paths"):
        simulate(scenario)


def test_the_command_line_names_a_broken_path_in_one_line(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from pathflow.cli import app

    _network(tmp_path, 100, 100, 50, 50)
    (tmp_path / "bad.toml").write_text(
        '[topology]\nkind = "graph"\nedges = "edges.csv"\n'
        'hosts = ["A", "B", "C1", "D1", "C2", "D2"]\n'
        '[traffic]\npattern = "explicit"\npairs = [[0, 1]]\n'
        '[transport]\ncc = "olia"\n'
        '[[routing.paths]]\nflow = 0\nnodes = ["A", "a", "p1", "B"]\n')
    result = CliRunner().invoke(app, ["run", str(tmp_path / "bad.toml"), "-q"])
    assert result.exit_code == 2
    assert result.output.strip() == ("error: bad.toml: routing.paths[0].nodes: no link p1 -> B in "
                                     "the topology")


def test_an_engine_without_the_control_refuses_it_in_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A control the packet engine lacks (as DCQCN's will until its sender lands) is refused in
    one line; OLIA's registry entry stands in, its packet sender removed."""
    import dataclasses

    from typer.testing import CliRunner

    from pathflow.cli import app
    from pathflow.models.registry import CONTROLS

    monkeypatch.setitem(CONTROLS, "olia", dataclasses.replace(CONTROLS["olia"],
                                                              packet_sender=None))
    (tmp_path / "mp.toml").write_text('[topology]\nkind = "star"\nsenders = 2\n'
                                      '[transport]\ncc = "olia"\nsubflows = 2\n')
    result = CliRunner().invoke(app, ["run", str(tmp_path / "mp.toml"), "--engine", "packet",
                                      "-q"])
    assert result.exit_code == 2
    assert result.output.strip() == ("error: mp.toml: transport.cc: 'olia' has no packet-level "
                                     "sender; run it with the fluid engine")
