"""Sweep axes: a scenario key over a list of values, as `pathflow sweep --set KEY=V1,V2,...`,
`--seeds N` and `pathflow.sweep(set=..., seeds=...)` give them.

An axis becomes a dimension of the sweep's Dataset in front of `flows`. The dimension is named
after the key's last part (`aqm.threshold` -> `threshold`, `transport.cc` -> `cc`,
`run.seed` -> `seed`), or the whole key with `_` for `.` where two axes would share a name or
the Dataset names something else so (`topology.buffer` -> `topology_buffer`, beside the links'
`buffer`). Its coordinate holds the values in SI units (bytes, s, bytes/s, with a `units`
attribute; a size or rate written in packets is converted at the scenario's packet size; "1"
for counts and plain numbers) or, for choices and flags, the values as written; beside it
`<dim>_label` keeps the text the user wrote. Axes zipped together (`--zip`) share one
dimension, named after the first, the others' coordinates lying along it.

Values are text as a scenario file holds it ("20pkt", "10Gbps", "dctcp"); a bare number is a
number (TOML reads it), and for a quantity it is in SI units (`Scenario.with_updates`). A range
`START:STOP:STEP` counts in the key's own units ("20pkt:60pkt:20pkt" is 20, 40 and 60 packets).
`transport.cc` changes the congestion control as `Scenario.with_cc` does, leaving out the
parameters the new one does not declare; it is applied before the other keys, so an axis may set
the new control's own parameters. Not axes: `traffic.flows` (the sweep's `flows`) and
`run.duration` (a sweep's points run together on one time axis).
"""

from __future__ import annotations

import itertools
import math
import re
import tomllib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pathflow.scenario import Scenario, ScenarioError
from pathflow.schema import SWEEP

__all__ = ["Axis", "Dimension", "axis", "dimensions", "parse_set", "point_scenario",
           "seed_axis"]

_NOT_AXES = {"traffic.flows": "the flow counts are --flows",
             "run.duration": "a sweep's points run together on one time axis, one duration"}
_MOST_VALUES = 10_000
# names a sweep's Dataset already gives to something else (the links' buffer, ...); `cc` is
# the declared dimension of congestion controls side by side
_TAKEN = {*SWEEP.dimensions, *SWEEP.coordinates, *SWEEP.variables} - {"cc"}
_NUMBER = re.compile(r"\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-z/]*)\s*")


@dataclass(frozen=True)
class Axis:
    """One scenario key (dotted) over its values: `values` as `Scenario.with_updates` takes
    them, `labels` as the user wrote them."""

    key: str
    values: tuple[Any, ...]
    labels: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.values)


@dataclass(frozen=True)
class Dimension:
    """A dimension of a sweep: one axis, or several of one length zipped together; `names`
    are the axes' coordinate names, the first also the dimension's."""

    axes: tuple[Axis, ...]
    names: tuple[str, ...]

    @property
    def name(self) -> str:
        return self.names[0]

    def __len__(self) -> int:
        return len(self.axes[0])


def axis(key: str, values: str | Sequence[Any], labels: Sequence[str] | None = None) -> Axis:
    """An axis from text ("20pkt,40pkt", or a range "20pkt:60pkt:20pkt") or from values (text
    or numbers, labelled as `str` writes them unless `labels` are given); one-line
    ScenarioError naming `--set KEY` when it cannot be one."""
    where = f"--set {key}"
    if not re.fullmatch(r"[a-z_]+(\.[a-z_]+)+", key):
        raise ScenarioError(f"{where}: the key must be a dotted scenario key such as "
                            "aqm.threshold or topology.link_rate")
    if key in _NOT_AXES:
        raise ScenarioError(f"{where}: not a sweep axis ({_NOT_AXES[key]})")
    if isinstance(values, str):
        labels = (_range(values, where) if ":" in values and "," not in values
                  else [part.strip() for part in values.split(",")])
        values = [_typed(label) for label in labels]
    labels = [str(value) for value in values] if labels is None else list(labels)
    if not labels or any(label == "" for label in labels):
        raise ScenarioError(f"{where}: give values, comma separated (V1,V2,...), or a range "
                            "START:STOP:STEP")
    if len(set(labels)) < len(labels):
        raise ScenarioError(f"{where}: each value once (got {', '.join(labels)})")
    return Axis(key, tuple(values), tuple(labels))


def written(key: str, labels: Sequence[str]) -> Axis:
    """An axis of values as text, each read as a scenario file would (a bare number is a
    number); one-line ScenarioError naming `--set KEY` when they cannot be an axis."""
    return axis(key, [_typed(label) for label in labels], labels)


def parse_set(text: str) -> Axis:
    """`--set KEY=V1,V2,...` or `--set KEY=START:STOP:STEP`."""
    key, equals, values = text.partition("=")
    if not equals:
        raise ScenarioError(f"--set: {text!r} must be KEY=V1,V2,... or KEY=START:STOP:STEP, "
                            "e.g. aqm.threshold=20pkt,40pkt")
    return axis(key.strip(), values)


def seed_axis(seeds: int) -> Axis:
    """Hash seeds 1 to `seeds` (`[run] seed`: ECMP's hashes, start jitter)."""
    if seeds < 1:
        raise ScenarioError(f"--seeds: {seeds} must be at least 1")
    return Axis("run.seed", tuple(range(1, seeds + 1)), tuple(map(str, range(1, seeds + 1))))


def dimensions(groups: Sequence[Sequence[Axis]]) -> list[Dimension]:
    """The sweep's dimensions, one per group of axes: a group of one axis is its own, a group of
    several (`--zip`) pairs their values and must have as many of each."""
    keys = [a.key for group in groups for a in group]
    repeated = sorted({key for key in keys if keys.count(key) > 1})
    if repeated:
        raise ScenarioError(f"--set {repeated[0]}: set once (give all its values in one --set)")
    for group in groups:
        if len({len(a) for a in group}) > 1:
            raise ScenarioError("--zip: the zipped axes must have as many values each (got "
                                + ", ".join(f"{a.key} {len(a)}" for a in group) + ")")
    last = [key.rpartition(".")[2] for key in keys]
    names = {key: short if last.count(short) == 1 and short not in _TAKEN
             else key.replace(".", "_") for key, short in zip(keys, last, strict=True)}
    return [Dimension(tuple(group), tuple(names[a.key] for a in group))
            for group in groups if group]


def grid(dims: Sequence[Dimension]) -> Iterator[tuple[int, ...]]:
    """Every point of the dimensions, as one index per dimension, the last varying fastest."""
    return itertools.product(*(range(len(d)) for d in dims))


def point_scenario(base: Scenario, dims: Sequence[Dimension], index: tuple[int, ...]
                   ) -> Scenario:
    """`base` with each dimension's axes at their `index` values; ScenarioError naming the
    key and its value where the scenario refuses one."""
    assigned = [(a, i) for d, i in zip(dims, index, strict=True) for a in d.axes]
    scenario = base
    for a, i in sorted(assigned, key=lambda pair: pair[0].key != "transport.cc"):
        try:
            scenario = (scenario.with_cc(str(a.values[i])) if a.key == "transport.cc"
                        else scenario.with_updates({a.key: a.values[i]}))
        except ScenarioError as error:
            raise ScenarioError(f"--set {a.key}={a.labels[i]}: {error}") from None
    return scenario


def coordinates(base: Scenario, dims: Sequence[Dimension]
                ) -> dict[str, tuple[str, list[Any], dict[str, str]]]:
    """The Dataset coordinates of `dims`: per axis its values (SI where it has a unit) and its
    labels (`<name>_label`), each as (dimension, values, attrs)."""
    out: dict[str, tuple[str, list[Any], dict[str, str]]] = {}
    for d in dims:
        for a, name in zip(d.axes, d.names, strict=True):
            values, units = [], set()
            for i in range(len(a)):
                value, unit = point_scenario(base, [Dimension((a,), (name,))], (i,)
                                             ).value_of(a.key)
                values.append(value)
                units.add(unit)
            numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
            attrs = {"long_name": f"swept scenario key {a.key}"}
            if numeric and len(units) == 1:
                attrs["units"] = units.pop() or "1"  # counts and plain numbers: "1"
            else:  # choices, flags, or numbers of no common unit: the values as written
                values = list(a.labels)
            out[name] = (d.name, values, attrs)
            out[f"{name}_label"] = (d.name, list(a.labels),
                                    {"long_name": f"{a.key} as written"})
    return out


def _typed(text: str) -> Any:
    """`text` as TOML reads it where it is a number or a flag, else the text itself."""
    try:
        value = tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text
    return value if isinstance(value, int | float | bool) else text


def _range(text: str, where: str) -> list[str]:
    """START:STOP:STEP in the unit START is written in ("20pkt:60pkt:20pkt"), as labels."""
    parts = text.split(":")
    matches = [_NUMBER.fullmatch(part) for part in parts]
    if len(parts) != 3 or not all(matches):
        raise ScenarioError(f"{where}: {text!r} must be START:STOP:STEP, each a number in the "
                            "key's units, e.g. 20pkt:60pkt:20pkt")
    numbers = [float(m.group(1)) for m in matches if m]
    units = {m.group(2) for m in matches if m and m.group(2)}
    if len(units) > 1:
        raise ScenarioError(f"{where}: {text!r}: START, STOP and STEP in one unit")
    unit = units.pop() if units else ""
    start, stop, step = numbers
    if step <= 0 or stop < start:
        raise ScenarioError(f"{where}: {text!r} needs STEP > 0 and START <= STOP")
    count = math.floor((stop - start) / step * (1 + 1e-12) + 1e-9) + 1
    if count > _MOST_VALUES:
        raise ScenarioError(f"{where}: {text!r} gives {count} values, at most {_MOST_VALUES}")
    whole = all(m and re.fullmatch(r"[-+]?\d+", m.group(1)) for m in matches)
    values = [start + i * step for i in range(count)]
    return [f"{round(v)}{unit}" if whole else f"{v:.12g}{unit}" for v in values]
