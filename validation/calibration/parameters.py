"""The calibration parameters: their units, scales, bounds and meaning, their values in a
scenario, and how fitted values are written back into one."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pathflow.compile import Compiled, compile_scenario
from pathflow.scenario import Scenario

__all__ = [
    "NAMES",
    "PARAMETERS",
    "CalibrationParameter",
    "check_applicable",
    "default_bounds",
    "given_bounds",
    "marked_links",
    "parse_fit",
    "resolve_bounds",
    "scenario_updates",
    "scenario_values",
]


@dataclass(frozen=True)
class CalibrationParameter:
    """One parameter `calibrate` can fit (its default bounds: `default_bounds`)."""

    unit: str  # of the values the API takes and returns
    log: bool  # optimised on a log scale (spans orders of magnitude)
    meaning: str


PARAMETERS: dict[str, CalibrationParameter] = {
    "base_rtt": CalibrationParameter("s", False, "extra round-trip delay on every path"),
    "g": CalibrationParameter("1", True, "DCTCP EWMA gain"),
    "threshold": CalibrationParameter("pkt", False, "ECN step-marking threshold K"),
    "ack_ratio": CalibrationParameter("1", False, "segments per window-increase event"),
    "init_cwnd": CalibrationParameter("pkt", True, "initial window"),
    "capacity": CalibrationParameter("1", False, "factor on every link's capacity"),
}
NAMES = tuple(PARAMETERS)  # the order of loss.Data.fixed


def parse_fit(text: str | Sequence[str], allowed: Sequence[str] = NAMES,
              kind: str = "calibration parameter") -> tuple[str, ...]:
    """'base_rtt,g' or ['base_rtt', 'g'] -> ('base_rtt', 'g'); a one-line ValueError naming an
    unknown parameter (one not in `allowed`, a `kind`) and the allowed ones."""
    names = [n.strip() for n in text.split(",")] if isinstance(text, str) else list(text)
    names = [n for n in names if n]
    if not names:
        raise ValueError(f"no parameter to fit; allowed: {', '.join(allowed)}")
    for name in names:
        if name not in allowed:
            raise ValueError(f"unknown {kind} {name!r}; allowed: {', '.join(allowed)}")
    if len(set(names)) != len(names):
        raise ValueError(f"a parameter is listed twice in fit: {', '.join(names)}")
    return tuple(names)


# --- the scenario's values and bounds -----------------------------------------------------------

def marked_links(compiled: Compiled) -> np.ndarray:
    """Links with an ECN step marker (mark_min == mark_max finite, marking rather than dropping)."""
    threshold = getattr(compiled.problem.aqm, "threshold", None)
    if threshold is None:
        return np.zeros(compiled.problem.queues.capacity.shape[0], dtype=bool)
    return np.isfinite(np.asarray(threshold))


def scenario_values(scenario: Scenario) -> dict[str, float]:
    """Every parameter's value in `scenario`, in its unit (NaN where the scenario has none: g
    without DCTCP, threshold without step marking); base_rtt, an extra delay, is 0 and
    capacity, a factor, 1."""
    packet = scenario.si.transport.mss
    values = scenario.si.transport.parameters
    return {
        "base_rtt": 0.0,
        "g": float(values.get("g", math.nan)),
        "threshold": scenario.si.aqm.parameters.get("threshold", math.nan) / packet,
        "ack_ratio": float(values["ack_ratio"]),
        "init_cwnd": float(values["init_cwnd"]),
        "capacity": 1.0,
    }


def default_bounds(scenario: Scenario, name: str) -> tuple[float, float]:
    """The default bounds of one parameter for this scenario (the table in
    docs/validation.md, section Calibration)."""
    parse_fit([name])
    packet = scenario.si.transport.mss
    if name == "base_rtt":
        return 0.0, 2e-3
    if name == "g":
        return 1 / 256, 1 / 2
    if name == "threshold":
        k = scenario.si.aqm.parameters.get("threshold", 20 * packet) / packet
        buffer = scenario.si.topology.buffer / packet
        return max(1.0, k / 4), max(min(4 * k, buffer - 1), k + 1)
    if name == "ack_ratio":
        return 1.0, 4.0
    if name == "init_cwnd":
        floor = float(scenario.si.transport.parameters["min_cwnd"])
        return floor, max(100.0, 2 * floor)
    return 0.8, 1.2


def given_bounds(bounds: Mapping[str, tuple[float, float]] | None, names: Sequence[str],
                 allowed: Sequence[str], kind: str = "calibration parameter"
                 ) -> dict[str, tuple[float, float]]:
    """The bounds given, each for a fitted parameter; a one-line ValueError for bounds of an
    unknown parameter (not in `allowed`, a `kind`) or of one not fitted."""
    given = dict(bounds or {})
    for name in given:
        if name not in allowed:
            raise ValueError(f"bounds for unknown {kind} {name!r}; allowed: "
                             f"{', '.join(allowed)}")
        if name not in names:
            raise ValueError(f"bounds given for {name!r}, which is not fitted "
                             f"(fit: {', '.join(names)})")
    return given


def resolve_bounds(scenario: Scenario, names: Sequence[str],
                   bounds: Mapping[str, tuple[float, float]] | None
                   ) -> dict[str, tuple[float, float]]:
    """The bounds of each fitted parameter: those given, else `default_bounds`; a one-line
    ValueError for bounds of unknown or unfitted parameters and for impossible ones."""
    given = given_bounds(bounds, names, NAMES)
    out = {}
    for name in names:
        lo, hi = (float(v) for v in given.get(name, default_bounds(scenario, name)))
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise ValueError(f"bounds of {name!r}: need finite lower < upper, got [{lo}, {hi}]")
        if name == "base_rtt" and lo < 0:
            raise ValueError(f"bounds of 'base_rtt': the extra delay cannot be negative, got {lo}")
        if name == "ack_ratio" and lo < 1:
            raise ValueError(f"bounds of 'ack_ratio': lower bound must be >= 1, got {lo}")
        if name != "base_rtt" and lo <= 0:
            raise ValueError(f"bounds of {name!r}: lower bound must be > 0, got {lo}")
        if name == "g" and hi > 1:
            raise ValueError(f"bounds of 'g': upper bound must be <= 1, got {hi}")
        out[name] = (lo, hi)
    return out


def check_applicable(scenario: Scenario, names: Sequence[str], compiled: Compiled) -> None:
    """A one-line ValueError when a fitted parameter does not exist in the scenario's model."""
    if len(scenario.si.groups) > 1:
        raise ValueError("traffic.groups: calibration fits the parameters of one traffic table; "
                         "this scenario has several groups")
    if "g" in names and "g" not in scenario.si.transport.parameters:
        raise ValueError(f"'g' applies to transport.cc = 'dctcp', not "
                         f"{scenario.si.transport.cc!r}")
    if "threshold" in names and not marked_links(compiled).any():
        raise ValueError(f"'threshold' applies to aqm.kind = 'ecn_step', not "
                         f"{scenario.si.aqm.kind!r}")


# --- writing fitted values into a scenario -------------------------------------------------------

def scenario_updates(scenario: Scenario, values: Mapping[str, float]) -> dict[str, Any]:
    """Scenario keys for fitted values. The vocabulary has no key for an extra host delay, so
    base_rtt becomes +extra/2 one-way delay on every sending host's egress link (every path
    starts there, and a link's delay counts twice in a path's base RTT, so every path's base
    RTT grows by exactly `extra`), written as exact-name [[topology.links]] overrides that
    restate the link's rate and buffer (an override of a graph-file edge replaces all of its
    columns). The capacity factor scales topology.link_rate and every override's rate (every
    link of a graph topology gets an override)."""
    updates: dict[str, Any] = {}
    if "g" in values:
        updates["transport.g"] = float(values["g"])
    if "ack_ratio" in values:
        updates["transport.ack_ratio"] = float(values["ack_ratio"])
    if "init_cwnd" in values:
        updates["transport.init_cwnd"] = f"{values['init_cwnd']:.8g}pkt"
    if "threshold" in values:
        updates["aqm.threshold"] = f"{values['threshold']:.8g}pkt"
    if "capacity" not in values and "base_rtt" not in values:
        return updates
    scale = float(values.get("capacity", 1.0))
    extra = float(values.get("base_rtt", 0.0))
    compiled = compile_scenario(scenario)
    overrides = [o.model_dump(exclude_none=True) for o in scenario.spec.topology.links]  # text
    rewrite: set[str] = set()
    if "capacity" in values:
        if scenario.si.topology.kind == "graph":  # per-edge rates live in the graph file
            rewrite = {link.name for link in compiled.network.links}
        else:
            resolved = scenario.si.topology
            updates["topology.link_rate"] = _rate_text(resolved.link_rate * scale)
            for override, values_of in zip(overrides, resolved.links, strict=True):
                if values_of.link_rate is not None:
                    override["link_rate"] = _rate_text(values_of.link_rate * scale)
    sources = {flow.src for flow in compiled.routes.flows}
    delayed = ({link.name for link in compiled.network.links if link.src in sources}
               if extra > 0 else set())
    for link in compiled.network.links:
        if link.name in rewrite or link.name in delayed:
            delay = link.delay + (extra / 2 if link.name in delayed else 0.0)
            overrides.append({"match": link.name, "link_rate": _rate_text(link.capacity * scale),
                              "delay": f"{delay * 1e6:.10g}us", "buffer": f"{link.buffer:.10g}B"})
    updates["topology.links"] = overrides
    return updates


def _rate_text(bytes_per_s: float) -> str:
    return f"{bytes_per_s * 8:.10g}bps"
