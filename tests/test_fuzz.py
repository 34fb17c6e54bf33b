"""No valid scenario crashes either engine (issue 13): whole scenarios drawn across the vocabulary.

Each drawn scenario is run as a user runs it, `pathflow run FILE --engine fluid|packet` (in
process), and the outcome must be one of two: a result (exit code 0) whose invariants all hold
and whose summary printed, or one clear line with exit code 2 (input the engines cannot run:
an impossible pattern on the topology, a threshold above the buffer, a run that would not fit in
memory). Anything else, a traceback or a violated invariant, fails the test with the scenario's
file in the message.

The draws span every topology kind (a small edge-list graph too) with per-link overrides, link
rates from 1 Kb/s to 1 Tb/s, delays from 0.1 us to 1 s, buffers from one packet to 1 GB, 1 to 3,000
flows, finite and infinite sizes, starts and jitter, every AQM, routing mode (and path cap) and
congestion control (MPTCP's with 1 to 8 subflows, ndiffports or fullmesh; a second traffic group
with a control of its own), multi-homed hosts, both precisions, warm-ups and sample
intervals. Durations are drawn in round trips (from half of one to many), and capped so that a
run stays short: the CI profile is
derandomised (the same cases every time) and sized to a few minutes per engine; `pytest --nightly`
runs the long profile (more cases, longer runs).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import tomli_w
import xarray as xr
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import pathflow  # noqa: F401  (float64 before any array)
from pathflow.cli import app
from pathflow.testing import assert_invariants

runner = CliRunner()

RATE_UNITS = {"Kbps": 1e3, "Mbps": 1e6, "Gbps": 1e9, "Tbps": 1e12}
TIME_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0}
ACK_BYTES = 64
MULTIPATH = ("lia", "olia", "balia", "uncoupled")


def _quantity(units: dict[str, float], low: float, high: float) -> st.SearchStrategy[str]:
    """Round quantities with units between low and high (SI), spread over the decades."""
    def build(unit: str, mantissa: int, exponent: int) -> str | None:
        value = mantissa * 10.0**exponent
        return None if not low <= value * units[unit] <= high else f"{value:g}{unit}"

    return st.builds(build, st.sampled_from(list(units)), st.sampled_from([1, 2, 4, 5]),
                     st.integers(-1, 3)).filter(lambda text: text is not None)


def _si(text: str, units: dict[str, float]) -> float:
    unit = next(u for u in sorted(units, key=len, reverse=True) if text.endswith(u))
    return float(text[: -len(unit)]) * units[unit]


TOPOLOGIES = st.one_of(
    st.fixed_dictionaries({"kind": st.just("star"), "senders": st.integers(1, 32)}),
    st.fixed_dictionaries({"kind": st.just("dumbbell"), "senders": st.integers(1, 16)}),
    st.fixed_dictionaries({"kind": st.just("fattree"), "k": st.sampled_from([2, 4, 6])},
                          optional={"nics": st.integers(1, 2)}),
    st.fixed_dictionaries({"kind": st.just("leafspine"), "leaves": st.integers(1, 4),
                           "spines": st.integers(1, 3), "hosts_per_leaf": st.integers(1, 4)},
                          optional={"nics": st.integers(1, 2)}),
    st.fixed_dictionaries({"kind": st.just("graph"), "edges": st.just("ring.csv")}),
)
RING_CSV = "src,dst\nh0,s0\nh1,s1\nh2,s2\ns0,s1\ns1,s2\ns2,s0\n"  # three switches, a host each


@st.composite
def aqms(draw: st.DrawFn) -> dict[str, Any]:
    """A queue discipline, lossless (PFC, thresholds drawn or the defaults, or a shared buffer
    with dynamic thresholds) half the time."""
    chosen = draw(disciplines())
    if draw(st.booleans()):
        thresholds = st.integers(0, 100).map(lambda n: f"{n}pkt")
        shared = st.fixed_dictionaries(
            {"shared_buffer": st.integers(1, 2000).map(lambda n: f"{n}pkt")},
            optional={"pfc_alpha": st.sampled_from([1 / 16, 1 / 8, 1.0, 8.0])})
        static = st.fixed_dictionaries({}, optional={"xoff": thresholds, "xon": thresholds})
        chosen = {**chosen, "pfc": True, **draw(shared if draw(st.booleans()) else static)}
    return chosen


@st.composite
def disciplines(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["droptail", "ecn_step", "red", "dcqcn"]))
    if kind == "dcqcn":  # DCQCN's marker on its published defaults, or thresholds drawn
        return {"kind": kind, **draw(st.fixed_dictionaries({}, optional={
            "kmin": st.integers(0, 50).map(lambda n: f"{n}pkt"),
            "pmax": st.sampled_from([0.01, 0.2, 1.0]),
            "ramp": st.sampled_from(["standard", "extended"])}))}
    if kind == "ecn_step":
        return {"kind": kind, "threshold": f"{draw(st.integers(0, 200))}pkt"}
    if kind == "red":
        low = draw(st.integers(0, 100))
        out = {"kind": kind, "min": f"{low}pkt", "max": f"{low + draw(st.integers(0, 200))}pkt",
               "pmax": draw(st.sampled_from([0.01, 0.1, 0.5, 1.0])),
               "weight": draw(st.sampled_from([1e-4, 0.002, 0.1, 1.0]))}
        ecn = draw(st.sampled_from([None, True, False]))
        return out if ecn is None else {**out, "ecn": ecn}
    return {"kind": kind}


@st.composite
def scenarios(draw: st.DrawFn, round_trips: float, packets: float) -> dict[str, Any]:
    """A scenario file (as a dict) with a duration of about `round_trips` round trips at most,
    and at most about `packets` packet times of one link."""
    overrides = st.lists(st.fixed_dictionaries(
        {"match": st.sampled_from(["s0->*", "*->h0", "nothing"])},
        optional={"link_rate": _quantity(RATE_UNITS, 1e3, 1e12),
                  "delay": _quantity(TIME_UNITS, 1e-7, 1.0)}), max_size=2)
    topology = {**draw(TOPOLOGIES), **draw(st.fixed_dictionaries({}, optional={
                    "links": overrides})),
                "link_rate": draw(_quantity(RATE_UNITS, 1e3, 1e12)),
                "delay": draw(_quantity(TIME_UNITS, 1e-7, 1.0)),
                "buffer": draw(st.one_of(st.integers(1, 10_000).map(lambda n: f"{n}pkt"),
                                         _quantity({"B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9},
                                                   64, 1e9)))}
    cc = draw(st.sampled_from(["reno", "dctcp", "dcqcn", "dcqcn+", *MULTIPATH]))
    transport: dict[str, Any] = {"cc": cc, "mss": f"{draw(st.integers(64, 9000))}B"}
    if cc in MULTIPATH:
        transport["subflows"] = draw(st.integers(1, 8))
        transport["path_manager"] = draw(st.sampled_from(["ndiffports", "fullmesh"]))
    transport.update(draw(st.fixed_dictionaries({}, optional={
        "init_cwnd": st.sampled_from(["1pkt", "2pkt", "10pkt", "100pkt"]),
        "reaction": st.sampled_from(["window", "mean"]),
        "ssthresh": st.sampled_from(["20pkt", "inf"]),
    })))
    pattern = draw(st.sampled_from(["incast", "permutation", "stride", "random", "one_to_one",
                                    "explicit"]))
    traffic: dict[str, Any] = {"pattern": pattern}
    traffic.update(draw(st.fixed_dictionaries({}, optional={
        "flows": st.integers(1, 3000),
        "size": st.one_of(st.just("inf"), _quantity({"B": 1, "KB": 1e3, "MB": 1e6}, 1, 1e8)),
    })))
    if pattern == "stride":
        traffic["stride"] = draw(st.integers(1, 5))
    if pattern == "explicit":
        traffic["pairs"] = draw(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)),
                                         min_size=1, max_size=4))
    # the duration in round trips of one hop each way, capped in packet times
    rate = _si(topology["link_rate"], {"bps": 1.0, **RATE_UNITS}) / 8
    rtt = 2 * (2 * _si(topology["delay"], TIME_UNITS) + (int(transport["mss"][:-1]) + ACK_BYTES)
               / rate)
    duration = min(draw(st.sampled_from([0.5, 2.0, 8.0, 1.0])) * round_trips / 8 * rtt,
                   packets * int(transport["mss"][:-1]) / rate)
    start = draw(st.sampled_from([None, 0.0, 0.3, 1.5]))  # fractions of the duration
    if start is not None:
        traffic["start"] = f"{start * duration:.6g}s"
    jitter = draw(st.sampled_from([None, 0.5]))
    if jitter is not None:
        traffic["start_jitter"] = f"{jitter * duration:.6g}s"
    if draw(st.booleans()):  # mixed traffic: a second group with a control of its own
        traffic = {"groups": [traffic, {"pattern": "random", "flows": draw(st.integers(1, 4)),
                                        "cc": draw(st.sampled_from(["reno", "dctcp", "lia"]))}]}
    return {
        "name": "fuzz",
        "topology": topology,
        "aqm": draw(aqms()),
        "traffic": traffic,
        "transport": transport,
        "routing": {"mode": draw(st.sampled_from(["ecmp", "spray", "static", "shortest",
                                                  "kshortest", "hamiltonian"])),
                    **draw(st.fixed_dictionaries({}, optional={"max_paths": st.integers(1, 4)}))},
        "run": {"duration": f"{duration:.6g}s", "seed": draw(st.integers(0, 99)),
                "precision": draw(st.sampled_from(["float64", "float32"])),
                **{key: f"{fraction * duration:.6g}s" for key, fraction in draw(
                    st.fixed_dictionaries({}, optional={
                        "warmup": st.sampled_from([0.0, 0.5, 0.99]),
                        "sample": st.sampled_from([1e-3, 0.1, 2.0])})).items()}},
    }


def check_outcome(data: dict[str, Any], engine: str, folder: Path) -> str:
    """Run the scenario through the command line; a result whose invariants hold, or exit 2.
    Returns the outcome's kind ("result", or the field the error names), for statistics."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "ring.csv").write_text(RING_CSV)
    scenario = folder / "fuzz.toml"
    scenario.write_text(tomli_w.dumps(data))
    out = folder / "fuzz.nc"
    out.unlink(missing_ok=True)
    result = runner.invoke(app, ["run", str(scenario), "--engine", engine, "-q", "-o", str(out),
                                 "--yes", "--max-memory", "2GB"])
    where = f"{engine} engine on {json.dumps(data)}"
    if result.exit_code == 2:  # one error line, after any warnings met on the way
        message = "\n".join(line for line in result.output.strip().splitlines()
                            if not line.startswith("warning: "))
        assert message and "\n" not in message and "Traceback" not in message, (
            f"not one clear line: {message!r} ({where})")
        parts = message.removeprefix("error: ").split(": ")
        return "error on " + (parts[1] if parts[0].endswith(".toml") else parts[0])
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"{type(result.exception).__name__}: {result.exception} ({where})")
    assert result.exit_code == 0, f"exit code {result.exit_code}: {result.output} ({where})"
    with xr.open_dataset(out) as ds:
        try:
            assert_invariants(ds)
        except AssertionError as error:
            raise AssertionError(f"{error} ({where})") from None
    return "result"


CI = settings(max_examples=int(os.environ.get("PATHFLOW_FUZZ_EXAMPLES", 300)), derandomize=True,
              deadline=None, database=None, suppress_health_check=list(HealthCheck),
              print_blob=True)
NIGHTLY = settings(CI, max_examples=3000)


@pytest.mark.parametrize("engine", ["fluid", "packet"])
@CI
@given(data=scenarios(round_trips=40, packets=20_000))
def test_no_valid_scenario_crashes(engine: str, data: dict[str, Any], tmp_path_factory) -> None:
    event(check_outcome(data, engine, tmp_path_factory.getbasetemp() / f"fuzz-{engine}"))


@pytest.mark.nightly
@pytest.mark.parametrize("engine", ["fluid", "packet"])
@NIGHTLY
@given(data=scenarios(round_trips=2000, packets=2_000_000))
def test_no_valid_scenario_crashes_long(engine: str, data: dict[str, Any],
                                        tmp_path_factory) -> None:
    event(check_outcome(data, engine, tmp_path_factory.getbasetemp() / f"fuzz-long-{engine}"))

