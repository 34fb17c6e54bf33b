"""Regression tests for the crashes the fuzz test (tests/test_fuzz.py) and users found: each valid
scenario here once ended in a traceback or a false invariant violation (issue 13)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import tomli_w
import xarray as xr
from typer.testing import CliRunner

from pathflow.cli import app
from pathflow.invariants import report_of

runner = CliRunner()


def run(tmp_path: Path, data: dict[str, Any], engine: str = "fluid") -> tuple[int, str, Path]:
    scenario, out = tmp_path / "s.toml", tmp_path / "r.nc"
    scenario.write_text(tomli_w.dumps({"name": "regression", **data}))
    result = runner.invoke(app, ["run", str(scenario), "--engine", engine, "-o", str(out),
                                 "--yes"])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.output, out


def holds(out: Path) -> bool:
    with xr.open_dataset(out) as ds:
        return report_of(ds).ok


def test_a_pattern_that_needs_two_hosts_on_a_one_host_topology(tmp_path: Path) -> None:
    """Was ZeroDivisionError (a flow from the only host to itself has no round trip)."""
    code, output, _ = run(tmp_path, {
        "topology": {"kind": "leafspine", "leaves": 1, "spines": 1, "hosts_per_leaf": 1},
        "traffic": {"pattern": "permutation"}})
    assert code == 2
    assert output.strip() == ("error: s.toml: traffic.pattern: permutation needs two hosts; "
                              "this topology has one")


def test_one_to_one_where_senders_are_receivers(tmp_path: Path) -> None:
    """Was ZeroDivisionError: on a fat-tree every host is sender and receiver, so one_to_one
    paired each host with itself."""
    code, output, _ = run(tmp_path, {"topology": {"kind": "fattree", "k": 4},
                                     "traffic": {"pattern": "one_to_one"}})
    assert code == 2
    assert output.startswith("error: s.toml: traffic.pattern: one_to_one would make h")
    assert "send to itself" in output and len(output.strip().splitlines()) == 1


@pytest.mark.parametrize("engine", ["fluid", "packet"])
def test_a_run_shorter_than_one_record_of_a_slow_link(tmp_path: Path, engine: str) -> None:
    """Was IndexError in the invariants (one record, no interval between samples): a star at
    1 Kb/s, where one 1500-byte packet takes 12 s, run for 100 ms. Nothing is delivered, and
    the summary says that convergence cannot be judged."""
    code, output, out = run(tmp_path, {
        "topology": {"kind": "star", "senders": 2, "link_rate": "1Kbps"},
        "run": {"duration": "100ms"}}, engine)
    assert code == 0, output
    assert holds(out)
    assert "Convergence: not enough data" in output


def test_the_packet_engine_with_gigabyte_buffers_of_small_packets(tmp_path: Path) -> None:
    """Was MemoryError (a 629 GiB packet pool): the pool was sized to hold every switch buffer
    full of 64-byte packets, more than the senders could send in the whole run."""
    data = {"topology": {"kind": "fattree", "k": 4, "link_rate": "5Mbps", "delay": "5ms",
                         "buffer": "1GB"},
            "transport": {"cc": "reno", "mss": "64B"}, "run": {"duration": "50ms"}}
    code, output, out = run(tmp_path, data, "packet")
    assert code == 0, output
    assert holds(out)
    data["topology"]["link_rate"], data["run"]["duration"] = "1Tbps", "10s"
    code, output, _ = run(tmp_path, data, "packet")
    assert code == 2
    assert output.strip().startswith("error: s.toml: run.duration: the packet engine would hold up "
                                           "to")


def test_packet_departures_counted_per_packet_at_a_slow_link(tmp_path: Path) -> None:
    """Was a false work-conservation violation: at 400 Kb/s a 200-byte packet takes 4 ms, longer
    than a record, so a busy link can finish no packet within one interval."""
    code, output, out = run(tmp_path, {
        "topology": {"kind": "star", "senders": 23, "link_rate": "400Kbps", "delay": "10ms",
                     "buffer": "760pkt"},
        "aqm": {"kind": "ecn_step", "threshold": "7pkt"},
        "traffic": {"pattern": "stride", "flows": 156, "stride": 4},
        "transport": {"cc": "dctcp", "mss": "200B"},
        "run": {"duration": "0.2528s", "seed": 57, "precision": "float32"}}, "packet")
    assert code == 0, output
    assert holds(out)


def test_a_short_packet_level_incast_of_2000_flows(tmp_path: Path) -> None:
    """Was ValueError (NaN round trip) in the convergence metric: in 1 ms of the default
    sweep's 2,000-flow incast no ACK returns, so no flow has a measured round trip."""
    text = (Path(__file__).resolve().parents[1] / "pathflow" / "scenarios" /
            "incast_10g.toml").read_text()
    import tomllib

    data = tomllib.loads(text)
    data.pop("name")
    data["traffic"]["flows"] = 2000
    data["run"]["duration"] = "1ms"
    code, output, out = run(tmp_path, data, "packet")
    assert code == 0, output
    assert holds(out)
    assert "Convergence:" in output


def test_acks_queued_at_a_receiver_nic_smaller_than_two_acks(tmp_path: Path) -> None:
    """Was a false queue-bounds violation: a receiver's NIC queues the ACKs it sends without
    bound (hosts never drop), so with a one-packet buffer of 64 bytes two ACKs exceed it."""
    code, output, out = run(tmp_path, {
        "topology": {"kind": "star", "senders": 1, "link_rate": "1Kbps", "delay": "1us",
                     "buffer": "1pkt"},
        "aqm": {"kind": "droptail"}, "traffic": {"pattern": "incast", "flows": 3, "size": "1B"},
        "transport": {"cc": "reno", "mss": "64B"},
        "run": {"duration": "5.12001s", "seed": 0}}, "packet")
    assert code == 0, output
    assert holds(out)
