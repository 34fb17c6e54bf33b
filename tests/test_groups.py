"""Mixed traffic (`[[traffic.groups]]`): each group a traffic table of its own that may set any
`[transport]` key, in both engines.

Truth: a mixture of controls on links they do not share reproduces each group run alone (the
mixture changes nothing about a control's equations); a multipath group beside a single-path TCP
on one bottleneck against the packet-level reference and RFC 6356's "do no harm" (LIA takes no
more than the TCP it shares with) and its uncoupled baseline (three equal subflows: two thirds).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from pathflow.cli import app
from pathflow.scenario import Scenario, ScenarioError
from pathflow.simulate import simulate
from pathflow.validation.packet.simulate import simulate_packets

STAR: dict[str, Any] = {
    "topology": {"kind": "star", "senders": 2, "link_rate": "100Mbps", "delay": "62.5us",
                 "buffer": "100pkt"},
    "aqm": {"kind": "droptail"},
}


def grouped(*groups: dict[str, Any], transport: dict[str, Any] | None = None,
            **sections: dict[str, Any]) -> Scenario:
    return Scenario.from_dict({**STAR, "transport": transport or {"cc": "reno"},
                               "traffic": {"groups": list(groups)}, **sections})


def test_a_group_takes_the_transport_keys_its_control_has() -> None:
    scenario = grouped({"flows": 1}, {"flows": 1, "cc": "dctcp"}, {"flows": 1, "cc": "reno"},
                       transport={"cc": "lia", "subflows": 3, "ack_ratio": 2},
                       aqm={"kind": "red", "min": "20pkt", "max": "60pkt", "ecn": False})
    lia, dctcp, reno = (group.transport for group in scenario.si.groups)
    assert (lia.cc, lia.subflows, lia.parameters["ack_ratio"]) == ("lia", 3, 2.0)
    assert (dctcp.subflows, dctcp.parameters["ack_ratio"], dctcp.parameters["g"]) == (1, 2, 1 / 16)
    assert (reno.subflows, reno.parameters["reaction"]) == (1, "mean")  # Reno's own default


def test_a_dctcp_parameter_reaches_only_dctcp_groups() -> None:
    scenario = grouped({"flows": 1}, {"flows": 1, "cc": "reno"},
                       transport={"cc": "dctcp", "g": 0.125},
                       aqm={"kind": "ecn_step", "threshold": "20pkt"})
    dctcp, reno = (group.transport.parameters for group in scenario.si.groups)
    assert dctcp["g"] == 0.125 and "g" not in reno


def test_a_file_without_groups_is_one_group() -> None:
    plain = Scenario.from_dict({**STAR, "transport": {"cc": "reno"},
                                "traffic": {"flows": 2, "size": "200KB"},
                                "run": {"duration": "50ms"}})
    one = grouped({"flows": 2, "size": "200KB"}, run={"duration": "50ms"})
    assert plain.si.groups[0].traffic == one.si.groups[0].traffic
    a, b = simulate(plain), simulate(one)
    np.testing.assert_array_equal(a.flow_rate.values, b.flow_rate.values)
    np.testing.assert_array_equal(a.completion_time.values, b.completion_time.values)


@pytest.mark.parametrize(("group", "message"), [
    ({"mss": "9000B"}, r"^traffic\.groups\[1\]\.mss: one packet size per scenario"),
    ({"cc": "cubic"}, r"^traffic\.groups\[1\]\.cc: 'cubic' is not allowed; allowed: 'reno'"),
    ({"cc": "reno", "subflows": 2}, r"^traffic\.groups\[1\]\.subflows: 2 subflows need a "
                                    r"multipath cc \('lia'"),
    ({"flows": 0}, r"^traffic\.groups\[1\]\.flows: Input should be greater than or equal to 1"),
    ({"window": 3}, r"^traffic\.groups\[1\]\.window: unknown key 'window' for this cc; allowed "
                    r"keys: pattern, flows, .*, cc, subflows, path_manager, ack_ratio"),
    ({"cc": "dctcp"}, r"^aqm\.ecn: the traffic groups disagree on ECN \(reno does not, dctcp "
                      r"reacts\); set aqm\.ecn"),
    ({"pattern": "explicit", "pairs": [[0, 0]]}, r"^traffic\.groups\[1\]\.pairs: \[0, 0\] must "
                                                 r"be two different host indices"),
])
def test_a_bad_group_is_named_in_one_line(group: dict[str, Any], message: str) -> None:
    aqm = {"kind": "red", "min": "20pkt", "max": "60pkt"}
    with pytest.raises(ScenarioError, match=message):
        simulate(grouped({}, group, aqm=aqm, run={"duration": "10ms"}))


def test_the_command_line_refuses_a_bad_group_with_exit_code_2(tmp_path: Any) -> None:
    path = tmp_path / "groups.toml"
    path.write_text('[topology]\nkind = "star"\nsenders = 2\n[transport]\ncc = "reno"\n'
                    '[[traffic.groups]]\nflows = 1\n[[traffic.groups]]\ncc = "reno"\n'
                    'subflows = 4\n')
    result = CliRunner().invoke(app, ["run", str(path)])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "error: groups.toml: traffic.groups[1].subflows: 4 subflows need a multipath cc "
        "('lia', 'olia', 'balia', 'uncoupled'); 'reno' runs one subflow per flow"]


def test_a_mixture_on_links_it_does_not_share_is_each_group_alone() -> None:
    """Reno on one leaf and DCTCP on the other, run together (a mixture) and apart: the same
    windows, rates and queues, so the mixture adds nothing to either control."""
    leaves = {"topology": {"kind": "leafspine", "leaves": 2, "spines": 1, "hosts_per_leaf": 3,
                           "link_rate": "1Gbps", "delay": "5us", "buffer": "100pkt"},
              "aqm": {"kind": "ecn_step", "threshold": "20pkt"},
              "run": {"duration": "20ms", "dt": "2us", "sample": "100us"}}
    reno = {"pattern": "explicit", "pairs": [[0, 2], [1, 2]], "cc": "reno"}
    dctcp = {"pattern": "explicit", "pairs": [[3, 5], [4, 5]], "cc": "dctcp", "g": 0.125}

    def run(*groups: dict[str, Any]) -> Any:
        return simulate(Scenario.from_dict({**leaves, "traffic": {"groups": list(groups)}}))

    mixed, alone = run(reno, dctcp), [run(reno), run(dctcp)]
    assert list(mixed.cc.values) == ["reno", "reno", "dctcp", "dctcp"]
    assert list(mixed.group.values) == [0, 0, 1, 1]
    assert np.isnan(mixed.alpha.sel(subflow=[0, 1])).all()
    for flows, (links, result) in zip(([0, 1], [2, 3]), ((["leaf0->h0_2"], alone[0]),
                                                          (["leaf1->h1_2"], alone[1])),
                                      strict=True):
        np.testing.assert_allclose(mixed.cwnd.isel(subflow=flows).values, result.cwnd.values,
                                   rtol=1e-9)
        np.testing.assert_allclose(mixed.flow_rate.isel(flow=flows).values,
                                   result.flow_rate.values, rtol=1e-9)
        np.testing.assert_allclose(mixed.queue.sel(link=links).values,
                                   result.queue.sel(link=links).values, rtol=1e-9, atol=1e-6)
    np.testing.assert_allclose(mixed.alpha.isel(subflow=[2, 3]).values, alone[1].alpha.values,
                               rtol=1e-9)
    assert mixed.queue.sel(link="leaf1->h1_2").max() > 10 * 1500  # the controls were at work


def _share(cc: str, engine: Any, seeds: tuple[int, ...]) -> float:
    """The multipath connection's share of the 100 Mb/s bottleneck beside one Reno flow."""
    shares = []
    for seed in seeds:
        ds = engine(grouped({"pattern": "explicit", "pairs": [[0, 2]], "cc": cc, "subflows": 2},
                            {"pattern": "explicit", "pairs": [[1, 2]]},
                            run={"duration": "5s", "seed": seed}))
        rate = ds.flow_rate.where(ds.time > 1.0).mean("time").values
        shares.append(rate[0] / rate.sum())
    return float(np.mean(shares))


@pytest.mark.parametrize("cc", ["lia", "olia", "balia", "uncoupled"])
def test_multipath_beside_tcp_on_one_bottleneck_in_both_engines(cc: str) -> None:
    """A coupled connection's two subflows through the bottleneck take no more than the Reno
    flow beside them (RFC 6356, do no harm: within 5 %); uncoupled subflows take two thirds
    (three equal Renos). Both engines, the packet reference averaged over three seeds."""
    fluid = _share(cc, simulate, (1,))
    packet = _share(cc, simulate_packets, (1, 2, 3))
    assert fluid == pytest.approx(packet, abs=0.05)
    if cc == "uncoupled":
        assert fluid == pytest.approx(2 / 3, abs=0.03)
        assert packet == pytest.approx(2 / 3, abs=0.03)
    else:
        assert max(fluid, packet) <= 0.5 * 1.05


def test_the_packet_engine_names_a_window_parameter_the_groups_disagree_on() -> None:
    scenario = grouped({"flows": 1}, {"flows": 1, "init_cwnd": "4pkt", "min_cwnd": "1pkt"},
                       run={"duration": "10ms"})
    with pytest.raises(ScenarioError, match=r"^traffic\.groups\[1\]\.init_cwnd: the packet engine "
                                            r"takes one init_cwnd for every group \(4 here, 10 "
                                            r"in traffic\.groups\[0\]\)$"):
        simulate_packets(scenario)
