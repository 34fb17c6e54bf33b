"""Hypothesis strategies that draw scenarios for property tests: small networks with their
traffic (`networks`), a congestion control's parameters within their declared ranges
(`transport_parameters`), whole runnable scenarios (`scenarios`), and the settings a test whose
every example is a simulation wants (`simulation_settings`).

What is drawn, and why it stays cheap and meaningful by default:

- networks: stars (N senders into one receiver), dumbbells (N pairs across one bottleneck),
  parking lots (a chain of n bottlenecks, a long flow across all and a short flow across each),
  and on request a two-leaf leaf-spine and the k = 4 fat-tree, with 1 to 4 flows;
- the congestion control from those asked for, with a queue discipline it reacts to (the
  registry says whether it reads ECN and sends by window or by rate: an ECN window control gets
  an ECN step at half a BDP, an ECN rate control DCQCN's marking ramp from there on a lossless
  switch (PFC), a loss-based one drop-tail); MPTCP's controls get 1 to `max_subflows` subflows;
- link rates and delays from small sets spanning 10 Mb/s to 10 Gb/s and 2 to 200 us, the
  buffer in bandwidth-delay products per flow (at least the initial window and two packets per
  flow, below which losses need the retransmission timer and identical flows part ways), and
  the duration in round trips (400 by default, enough for Reno and DCTCP to settle), both read
  from the compiled scenario's own base round trips;
- parameters at their declared defaults unless a spread is asked for; then each value
  parameter of the control (`models.registry`, `models.parameters.Parameter`) is drawn
  geometrically within that factor of its default (or of its preset's value; presets and
  structural choices drawn too), clipped to its declared range, and a combination the model
  refuses (`check`, such as a floor above the initial window) is rejected, not run.

Every strategy shrinks towards the first of each choice and the defaults. A drawn scenario is
noted (`hypothesis.note`) as its TOML text, so a failing example prints the file that
reproduces it (`pathflow run FILE`). Parking lots are graph files written once per size into
the temporary directory (`pathflow-testing/`), which the scenario names by absolute path.

Validated by tests/test_testing.py: every topology and every registered congestion control
draws scenarios that the fluid engine runs with all invariants holding, parameters stay within
their declared ranges and at their defaults without a spread, and the drawn buffers, thresholds
and durations follow the round trips.
"""

from __future__ import annotations

import math
import re
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

try:
    from hypothesis import HealthCheck, Phase, assume, note, settings
    from hypothesis import strategies as st
except ImportError as error:  # hypothesis is a test dependency, not a runtime one
    raise ImportError("pathflow.testing's strategies need hypothesis: pip install "
                      "'pathflow[testing]' (or hypothesis>=6.100)") from error

from pathflow.atomic import write_atomically
from pathflow.compile import compile_scenario
from pathflow.models.parameters import Parameter, resolve_parameters
from pathflow.models.registry import CONTROLS
from pathflow.scenario import Scenario
from pathflow.units import parse_rate

__all__ = ["DEFAULT_TOPOLOGIES", "TOPOLOGIES", "networks", "scenarios", "simulation_settings",
           "transport_parameters"]

TOPOLOGIES = ("star", "dumbbell", "parking_lot", "leafspine", "fattree")
DEFAULT_TOPOLOGIES = ("star", "dumbbell", "parking_lot")
_QUANTITY = re.compile(r"^\s*([0-9.]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z/]*)\s*$")


def simulation_settings(max_examples: int = 6, *, derandomize: bool = True,
                        shrink: bool = False) -> settings:
    """Hypothesis settings for a test whose examples are simulations: few examples, no deadline
    (a first example compiles), no health check about slow generation, the same examples every
    run by default (CI explores the same cases; `derandomize=False` to search afresh), no
    example database (a derandomized search does not need one), and no shrinking unless asked
    (`shrink=True`): shrinking runs a simulation per step, minutes for one failure, while the
    failing example's scenario file is printed either way."""
    phases = [phase for phase in Phase if shrink or phase not in (Phase.shrink, Phase.explain)]
    return settings(max_examples=max_examples, deadline=None, derandomize=derandomize,
                    database=None, phases=phases,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                           HealthCheck.function_scoped_fixture])


def _parking_lot_file(links: int) -> tuple[str, list[str]]:
    """A chain of switches S0 .. S`links` with hosts L0 at S0, L1 at the end, and a_i, b_i at
    S_i, S_i+1 (edge list written once, the same text every time); the file's absolute path and
    the hosts in the order flows name them."""
    rows = ["src,dst", "L0,S0", f"L1,S{links}"]
    hosts = ["L0", "L1"]
    for i in range(links):
        rows += [f"S{i},S{i + 1}", f"a{i},S{i}", f"b{i},S{i + 1}"]
        hosts += [f"a{i}", f"b{i}"]
    path = Path(tempfile.gettempdir()) / "pathflow-testing" / f"parking_lot_{links}.csv"
    text = "\n".join(rows) + "\n"
    if not path.exists() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, lambda temporary: temporary.write_text(text))
    return str(path), hosts


@st.composite
def _network(draw: st.DrawFn, kinds: Sequence[str], min_flows: int, max_flows: int
             ) -> dict[str, Any]:
    kind = draw(st.sampled_from(kinds))
    if kind == "parking_lot":  # n links carry n + 1 flows
        links = draw(st.integers(max(1, min_flows - 1), max_flows - 1))
        edges, hosts = _parking_lot_file(links)
        return {"topology": {"kind": "graph", "edges": edges, "hosts": hosts},
                "traffic": {"pattern": "explicit",
                            "pairs": [[0, 1], *([2 + 2 * i, 3 + 2 * i] for i in range(links))]}}
    flows = draw(st.integers(min_flows, max_flows))
    if kind in ("star", "dumbbell"):  # a sender per flow
        return {"topology": {"kind": kind, "senders": flows},
                "traffic": {"pattern": "incast" if kind == "star" else "one_to_one",
                            "flows": flows}}
    topology = ({"kind": "leafspine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2}
                if kind == "leafspine" else {"kind": "fattree", "k": 4})
    # which hosts pair up and which equal-cost paths ECMP takes follow the seed
    return {"topology": topology,
            "traffic": {"pattern": draw(st.sampled_from(["permutation", "random"])),
                        "flows": flows},
            "run": {"seed": draw(st.integers(0, 99))}}


def networks(kinds: Sequence[str] = DEFAULT_TOPOLOGIES, *, min_flows: int = 1,
             max_flows: int = 4) -> st.SearchStrategy[dict[str, Any]]:
    """A network and its traffic as scenario sections ({"topology": ..., "traffic": ...}, and
    "run": {"seed"} where the seed chooses pairs or paths) with `min_flows` to `max_flows`
    flows, of the kinds named (`TOPOLOGIES`): "star" (incast of one flow per sender),
    "dumbbell" (one flow per sender-receiver pair), "parking_lot" (n links, n + 1 flows: needs
    max_flows >= 2), "leafspine" (2 leaves, 2 spines, 4 hosts) and "fattree" (k = 4, 16 hosts),
    the last two with permutation or random traffic. Rates, delays and buffers are left to
    the caller (`scenarios` sets them)."""
    unknown = [kind for kind in kinds if kind not in TOPOLOGIES]
    if unknown:
        raise ValueError(f"unknown topology {unknown[0]!r}; known: {', '.join(TOPOLOGIES)}")
    if not 1 <= min_flows <= max_flows:
        raise ValueError(f"flows: need 1 <= min_flows <= max_flows, got {min_flows} and "
                         f"{max_flows}")
    usable = [kind for kind in kinds if kind != "parking_lot" or max_flows >= 2]
    if not usable:
        raise ValueError("a parking lot has at least 2 flows: raise max_flows or add a topology")
    return _network(tuple(usable), min_flows, max_flows)


def _scaled(parameter: Parameter, text: str | float, factor: float, packet_bytes: float
            ) -> str | float:
    """`text` (a parameter's value as a user writes it) times `factor`, in the same unit,
    clipped to the declared range (the value resolved; `text` itself where it is 0, infinite,
    or the clipped value would not resolve)."""
    field = f"transport.{parameter.name}"
    base = parameter.resolve(text, field, packet_bytes)
    if not isinstance(base, float) or base == 0 or math.isinf(base):
        return text
    target = min(base * factor, parameter.high)
    if target < parameter.low or (not parameter.inclusive and target <= parameter.low):
        target = parameter.low if parameter.inclusive else base
    ratio = target / base
    if isinstance(text, str):
        found = _QUANTITY.match(text)
        if found is None:
            return text
        scaled: str | float = f"{float(found[1]) * ratio:.4g}{found[2]}"
    else:
        scaled = float(f"{float(text) * ratio:.4g}")
    try:
        parameter.resolve(scaled, field, packet_bytes)
    except ValueError:  # rounding to 4 digits stepped over an open bound
        return text
    return scaled


@st.composite
def _parameters(draw: st.DrawFn, cc: str, link_rate: float, spread: float,
                packet_bytes: float) -> dict[str, Any]:
    model = CONTROLS[cc].model
    drawn: dict[str, Any] = {}
    base: dict[str, Any] = {}
    if model.presets:
        drawn["preset"] = draw(st.sampled_from(list(model.presets)))
        base = model.presets[drawn["preset"]](link_rate)
    exponent = st.floats(-math.log2(spread), math.log2(spread))
    for parameter in model.parameters:
        default = base.get(parameter.name, parameter.default)
        if default is None:  # optional, decided by the engine (a sender's line rate)
            continue
        if parameter.structural:
            drawn[parameter.name] = draw(st.sampled_from(parameter.choices))
        elif parameter.unit == "flag":
            drawn[parameter.name] = draw(st.booleans())
        else:
            drawn[parameter.name] = _scaled(parameter, default, 2.0 ** draw(exponent),
                                            packet_bytes)
    try:  # joint conditions the ranges do not state (a floor above the initial window)
        model.check(resolve_parameters(model.parameters, drawn, "transport", packet_bytes,
                                       model.presets, link_rate))
    except ValueError:
        assume(False)
    return drawn


def transport_parameters(cc: str, *, spread: float = 2.0, link_rate: float = math.nan,
                         packet_bytes: float = 1500.0) -> st.SearchStrategy[dict[str, Any]]:
    """`[transport]` keys for congestion control `cc` (not `cc` itself) drawn from what its
    model declares: each value parameter within a factor `spread` of its default (of its
    preset's value where the model has presets, the preset drawn too), clipped to its declared
    range and written in its default's unit; every structural choice and flag drawn. `spread`
    1 gives {} (every default). `link_rate` (bytes/s) is what presets that scale with the link
    read; `packet_bytes` the packet size of units in packets."""
    if cc not in CONTROLS:
        raise ValueError(f"unknown congestion control {cc!r}; known: {', '.join(CONTROLS)}")
    if not spread >= 1:
        raise ValueError(f"spread: must be >= 1 (a factor around the default), got {spread}")
    if spread == 1:
        return st.just({})
    return _parameters(cc, link_rate, spread, packet_bytes)


def _aqm(cc: str, bdp: float, buffer: float) -> dict[str, Any]:
    """The queue discipline `cc` reacts to (module docstring), thresholds in packets."""
    entry = CONTROLS[cc]
    if not entry.ecn:
        return {"kind": "droptail"}
    # DCTCP's K > C RTT / 7 keeps the link busy (Alizadeh et al.); half a BDP, and at most
    # half the buffer, which a threshold must stay below
    threshold = min(max(2.0, bdp / 2), buffer / 2)
    if entry.sends == "window":
        return {"kind": "ecn_step", "threshold": f"{threshold:.3f}pkt"}
    top = max(threshold, min(4 * threshold, 0.9 * buffer))
    # RDMA's controls expect a lossless fabric: PFC pauses a full port's upstream links
    return {"kind": "dcqcn", "kmin": f"{threshold:.3f}pkt", "kmax": f"{top:.3f}pkt",
            "pfc": True}


@st.composite
def _scenario(draw: st.DrawFn, topologies: Sequence[str], ccs: Sequence[str], min_flows: int,
              max_flows: int, link_rates: Sequence[str], delays: Sequence[str],
              buffer_bdps: tuple[float, float], round_trips: float, min_duration: float,
              max_subflows: int, parameter_spread: float) -> Scenario:
    sections = draw(networks(topologies, min_flows=min_flows, max_flows=max_flows))
    cc = draw(st.sampled_from(ccs))
    rate = draw(st.sampled_from(link_rates))
    transport: dict[str, Any] = {"cc": cc, **draw(transport_parameters(
        cc, spread=parameter_spread, link_rate=parse_rate(rate)))}
    if CONTROLS[cc].multipath:
        transport["subflows"] = draw(st.integers(1, max_subflows))
    data: dict[str, Any] = {
        "name": "drawn",
        **sections,
        "topology": {**sections["topology"], "link_rate": rate,
                     "delay": draw(st.sampled_from(delays)), "buffer": "1000pkt"},
        "transport": transport,
        "run": {**sections.get("run", {}), "duration": "1ms"},
    }
    per_bdp = draw(st.floats(*buffer_bdps))
    # buffers and durations follow the round trips the compiled network has, not a formula
    # restated here (serialisation and ACKs included)
    with warnings.catch_warnings():  # the probe has no queue discipline yet: not run, no advice
        warnings.simplefilter("ignore")
        probe = Scenario.from_dict(data)
        compiled = compile_scenario(probe)
    rtt = float(np.max(np.asarray(compiled.problem.path_base_rtt)))
    packet = probe.packet_bytes
    bdp = parse_rate(rate) * rtt / packet
    floor = float(probe.si.transport.parameters.get("init_cwnd", 10.0)) + 2.0
    subflows = len(compiled.routes.subflow_flow)
    buffer = subflows * max(floor, per_bdp * bdp)
    data["topology"]["buffer"] = f"{buffer:.3f}pkt"
    data["aqm"] = _aqm(cc, bdp, buffer)
    data["run"]["duration"] = f"{max(min_duration, round_trips * rtt):.6g}s"
    scenario = Scenario.from_dict(data)
    note(f"drawn scenario:\n{scenario.to_toml()}")
    return scenario


def scenarios(*, topologies: Sequence[str] = DEFAULT_TOPOLOGIES,
              ccs: Sequence[str] = ("reno", "dctcp"), min_flows: int = 1, max_flows: int = 4,
              link_rates: Sequence[str] = ("10Mbps", "100Mbps", "1Gbps", "10Gbps"),
              delays: Sequence[str] = ("2us", "10us", "50us", "200us"),
              buffer_bdps: tuple[float, float] = (1.0, 4.0), round_trips: float = 400.0,
              min_duration: float = 0.05, max_subflows: int = 2,
              parameter_spread: float = 1.0) -> st.SearchStrategy[Scenario]:
    """Runnable scenarios (`pathflow.Scenario`) over `networks(topologies, ...)` with a
    congestion control from `ccs` (any of `models.registry.CONTROLS`) and the queue discipline
    it reacts to; every link at one rate from `link_rates` and one delay from `delays`; a
    buffer of `buffer_bdps` (a range, drawn) bandwidth-delay products per subflow, at least the
    initial window and two packets per subflow; a duration of `round_trips` base round trips,
    at least `min_duration` s; MPTCP's controls with 1 to `max_subflows` subflows; parameters
    at their defaults, or drawn within a factor `parameter_spread` of them
    (`transport_parameters`). The module docstring says why these defaults."""
    unknown = [cc for cc in ccs if cc not in CONTROLS]
    if unknown:
        raise ValueError(f"unknown congestion control {unknown[0]!r}; known: "
                         f"{', '.join(CONTROLS)}")
    if not 0 < buffer_bdps[0] <= buffer_bdps[1]:
        raise ValueError(f"buffer_bdps: need 0 < low <= high, got {buffer_bdps}")
    if not (round_trips > 0 and min_duration >= 0 and max_subflows >= 1
            and parameter_spread >= 1):
        raise ValueError("need round_trips > 0, min_duration >= 0, max_subflows >= 1 and "
                         "parameter_spread >= 1")
    networks(topologies, min_flows=min_flows, max_flows=max_flows)  # its errors, now
    return _scenario(tuple(topologies), tuple(ccs), min_flows, max_flows, tuple(link_rates),
                     tuple(delays), (float(buffer_bdps[0]), float(buffer_bdps[1])),
                     round_trips, min_duration, max_subflows, parameter_spread)
