"""One result schema (`pathflow.schema`): every producer of results, the fluid engine, the packet
engine, the ns-3 runner, sweeps and each trace loader, run on a tiny case and checked against
the single definition: every name declared, with its declared dimensions, unit and long name,
and the core variables every engine must give."""

from __future__ import annotations

import socket
from pathlib import Path

import dpkt
import numpy as np
import pytest
import xarray as xr

import pathflow
from helpers import star
from pathflow.models.registry import CONTROLS
from pathflow.results import IN_PACKETS, reported_unit, write_dataset
from pathflow.schema import (
    ENGINE_REQUIRED,
    RESULT,
    SWEEP,
    Field,
    Schema,
    SchemaError,
    build_dataset,
    check_dataset,
    schema_problems,
)
from pathflow.sweeps import sweep
from pathflow.validation.ns3 import Ns3Config, ns3_available, simulate_ns3
from pathflow.validation.ns3.dataset import to_dataset as ns3_dataset
from pathflow.validation.packet import simulate_packets
from pathflow.validation.traces import (
    load_mininet_records,
    load_ns3,
    load_pcap,
    load_queue_file,
    load_queue_trace,
    reference_path,
)

SI_UNITS = {"bytes", "s", "bytes/s", "1"}
PACKET_COUNTS = {"lost", "credit"}  # counts of packets that engines keep as such


def tiny(cc: str = "dctcp") -> pathflow.Scenario:
    """A 2:1 star at 1 Gb/s for 10 ms: every engine runs it in a moment."""
    aqm = {"kind": "ecn_step", "threshold": "20pkt"} if cc == "dctcp" else {"kind": "droptail"}
    return star(2, rate="1Gbps", delay="10us", buffer="100pkt", aqm=aqm, cc=cc,
                duration="10ms")


# ------------------------------------------------------------------------------------------
# The definition itself
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("schema", [RESULT, SWEEP], ids=["result", "sweep"])
def test_declarations_use_declared_dimensions_and_si_units(schema: Schema) -> None:
    assert set(schema.stacking) <= set(schema.dimensions)
    for table in (schema.coordinates, schema.variables):
        for name, spec in table.items():
            assert set(spec.dims) <= set(schema.dimensions), name
            assert spec.long_name, name
            if name in PACKET_COUNTS:
                assert spec.units == "packets", name
            else:
                assert spec.units is None or spec.units in SI_UNITS, name


def test_engine_requirements_are_declared() -> None:
    declared = set(RESULT.coordinates) | set(RESULT.variables)
    assert declared >= ENGINE_REQUIRED


def test_model_state_units_agree_with_the_schema() -> None:
    # The fluid engine writes a model's state under its own name; where the schema declares the
    # name the model must mean the same unit (windows and DCQCN's data sent since its last cut
    # are converted from packets to bytes, rates from packets/s to bytes/s).
    for entry in CONTROLS.values():
        for name, unit in entry.model.state_units.items():
            if name not in IN_PACKETS and name in RESULT.variables:
                assert RESULT.variables[name].units == reported_unit(unit), (entry.name, name)


def test_build_labels_from_the_schema_and_refuses_the_undeclared() -> None:
    ds = build_dataset({"queue": np.zeros((3, 1))}, {"time": [1.0, 2.0, 3.0], "link": ["a->b"]},
                       {"engine": "test"}, comments={"queue": "made up"})
    assert ds.queue.dims == ("time", "link")
    assert ds.queue.attrs == {"units": "bytes", "long_name": RESULT.variables["queue"].long_name,
                              "comment": "made up"}
    assert "units" not in ds.link.attrs  # a label has no unit
    check_dataset(ds)
    with pytest.raises(SchemaError, match="'queue_depth' is not declared"):
        build_dataset({"queue_depth": np.zeros((3, 1))}, {})
    with pytest.raises(SchemaError, match="'queue': 1 dimensions"):
        build_dataset({"queue": np.zeros(3)}, {})
    with pytest.raises(SchemaError, match="'flows' does not stack"):
        build_dataset({"queue": np.zeros((2, 3, 1))}, {}, stacked_by="flows")
    stacked = build_dataset({"queue": np.zeros((2, 3, 1))}, {}, stacked_by="record")
    assert stacked.queue.dims == ("record", "time", "link")
    extra = {"phase": Field(("time", "subflow"), "1", "a new model's state")}
    with_state = build_dataset({"phase": np.zeros((3, 2))}, {}, extra=extra)
    assert schema_problems(with_state) == ["variable 'phase' is not declared"]
    assert schema_problems(with_state, extra=extra) == []


def test_check_names_every_departure() -> None:
    ds = xr.Dataset({"queue": (("link", "time"), np.zeros((1, 2)), {"units": "packets"}),
                     "depth": ("time", np.zeros(2))}, coords={"time": [1.0, 2.0]})
    problems = "\n".join(schema_problems(ds, required=["flow_rate"]))
    assert "variable 'queue' has dimensions ('link', 'time'), declared ('time', 'link')" \
        in problems
    assert "variable 'queue' has units 'packets', declared 'bytes'" in problems
    assert "variable 'depth' is not declared" in problems
    assert "coordinate 'time' has units None, declared 's'" in problems
    assert "required 'flow_rate' is missing" in problems
    with pytest.raises(SchemaError, match=r"departs from pathflow\.schema"):
        check_dataset(ds)


# ------------------------------------------------------------------------------------------
# Every producer against it
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cc", ["dctcp", "reno"])
def test_fluid_engine(cc: str) -> None:
    ds = pathflow.simulate(tiny(cc))
    check_dataset(ds, required=ENGINE_REQUIRED)


def test_packet_engine() -> None:
    ds = simulate_packets(tiny())
    check_dataset(ds, required=ENGINE_REQUIRED)
    assert "alpha" in ds and "ssthresh" in ds


def fake_ns3_arrays(n: int = 4, flows: int = 2) -> dict[str, np.ndarray]:
    """What the ns-3 child saves, made up (no ns-3 needed)."""
    rng = np.random.default_rng(1)
    cumulative = np.cumsum(rng.uniform(0, 1e4, (n, 2)), axis=0)
    return {
        "time": 1e-3 * np.arange(1, n + 1), "link_names": np.array(["s0->r0", "r0->s0"]),
        "queue": rng.uniform(0, 3e4, (n, 2)), "tx": cumulative, "drop": 0 * cumulative,
        "mark": 0.1 * cumulative, "rx": rng.uniform(0, 1e4, (n, flows)).cumsum(axis=0),
        "cwnd": rng.uniform(1e4, 2e4, (n, flows)), "rtt": rng.uniform(1e-4, 2e-4, (n, flows)),
        "alpha": rng.uniform(0, 1, (n, flows)), "sim_wall_time_s": np.float64(0.5),
        "aqm_desc": np.array("step"),
    }  # fmt: skip


def test_ns3_dataset_puts_senders_on_subflow(tmp_path: Path) -> None:
    cfg = Ns3Config(topology="star", senders=2, link_rate_bps=1e8, delay_s=1e-5,
                    buffer_packets=100, aqm="ecn_step", cc="dctcp", flows=2, duration_s=0.004)
    ds = ns3_dataset(cfg, fake_ns3_arrays(), wall_time_s=1.0)
    check_dataset(ds, required=ENGINE_REQUIRED)
    for name in ("cwnd", "rtt", "alpha"):
        assert ds[name].dims == ("time", "subflow"), name
    assert list(ds.subflow_flow.values) == [0, 1]
    assert "goodput" in ds.flow_rate.attrs["comment"]  # how ns-3 measures it
    write_dataset(ds, tmp_path / "ns3.nc")
    check_dataset(load_ns3(tmp_path / "ns3.nc"), required=ENGINE_REQUIRED)


@pytest.mark.ns3
def test_ns3_runner() -> None:
    if not ns3_available():
        pytest.skip("ns-3 Python bindings (pip package ns3) not installed")
    ds = simulate_ns3(tiny(), timeout_s=600)
    check_dataset(ds, required=ENGINE_REQUIRED)


def test_sweep() -> None:
    ds = sweep(tiny(), [1, 2], series=True)
    check_dataset(ds, SWEEP)
    assert ds.queue.dims == ("flows", "time", "link") and ds.queue_max.dims == ("flows",)


@pytest.mark.parametrize("name", ["hardware_dctcp_queue.csv", "mininet_dctcp_queue.csv"])
def test_queue_trace_loaders(name: str) -> None:
    check_dataset(load_queue_trace(reference_path(name)), required={"time", "link", "queue"})
    check_dataset(load_queue_file(reference_path(name)), required={"queue"})


def test_queue_file_of_a_saved_result(tmp_path: Path) -> None:
    write_dataset(pathflow.simulate(tiny()), tmp_path / "fluid.nc")
    check_dataset(load_queue_file(tmp_path / "fluid.nc"), required=ENGINE_REQUIRED)


def test_mininet_records() -> None:
    ds = load_mininet_records(reference_path("mininet_fattree_flows.csv"))
    check_dataset(ds, required={"record", "flow", "path", "goodput", "fct", "path_bytes"})
    assert ds.goodput.dims == ("record", "flow") and ds.router.dims == ("record",)


def test_pcap(tmp_path: Path) -> None:
    path = tmp_path / "two.pcap"
    a, b = socket.inet_aton("10.0.0.1"), socket.inet_aton("10.0.0.2")
    with path.open("wb") as f:
        writer = dpkt.pcap.Writer(f, linktype=dpkt.pcap.DLT_RAW)
        for t in (1e-4, 5e-4, 1.2e-3):
            segment = dpkt.tcp.TCP(sport=5000, dport=80, flags=dpkt.tcp.TH_ACK, data=b"x" * 100)
            writer.writepkt(bytes(dpkt.ip.IP(src=a, dst=b, p=6, data=segment)), ts=t)
    ds = load_pcap(path, bin_width=1e-3, t0=0.0)
    check_dataset(ds, required={"time", "link", "flow", "flow_rate", "link_departure"})
    assert list(ds.ip_protocol.values) == ["tcp"]
