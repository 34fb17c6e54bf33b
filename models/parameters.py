"""Declared model parameters: name, unit, default, valid range and meaning, in one place.

A congestion-control model and a queue discipline each declare the parameters they read
(`Parameter`). The declarations drive everything around the physics: the scenario keys that are
accepted under `[transport]` or `[aqm]`, their validation and one-line errors, the help text of
`pathflow run --help`, and the conversion of what the user wrote ("20pkt", "55us", 0.0625) to
the SI value the model receives. The model itself only sees the resolved numbers.

A model may also name presets (`Presets`): sets of defaults taken from a publication or a
device, chosen by the section's `preset` key (the first preset when absent); keys the user writes
override the preset's.

Units of a parameter (`unit`):

- ``"1"``: a plain number (gains, ratios, probabilities);
- ``"packets"``: a size given with a unit ("10pkt", "15KB"), passed to the model in packets of
  `transport.mss` bytes (windows are counted in packets);
- ``"bytes"``, ``"s"``, ``"bytes/s"``: a size, time or rate given with a unit, passed in SI;
- ``"packets/s"``: a rate given with a unit ("40Mbps"), passed in packets of `transport.mss`
  bytes per second (rate-based models count their rates in packets/s);
- ``"flag"``: true or false;
- ``"choice"``: one of `choices`, a structural option that selects code (it is part of the
  compiled program, not a value a batch may vary).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pathflow.units import UnitError, parse_rate, parse_size, parse_time

__all__ = ["Parameter", "Presets", "resolve_parameters"]

Unit = Literal["1", "packets", "bytes", "s", "bytes/s", "packets/s", "flag", "choice"]

# preset name -> (link rate in bytes/s -> the preset's values, as a user writes them): presets
# that scale with the link rate (HPCC's DCQCN settings) read it
Presets = Mapping[str, Callable[[float], dict[str, Any]]]


@dataclass(frozen=True)
class Parameter:
    """One declared parameter. `default` is what the user would write (a string with a unit, a
    number, a flag or a choice); None makes the parameter required, unless `optional`, when the
    consumer decides (the value resolves to None). `low` and `high` bound the resolved value
    (in the unit passed to the model); `inclusive` says whether `low` itself is allowed.
    `infinite` allows "inf" for sizes."""

    name: str
    unit: Unit
    default: str | float | None
    doc: str
    low: float = -math.inf
    high: float = math.inf
    inclusive: bool = True
    infinite: bool = False
    choices: tuple[str, ...] = ()
    optional: bool = False

    @property
    def structural(self) -> bool:
        """True for a choice: it selects code, so it is passed to the model's constructor."""
        return self.unit == "choice"

    def allowed(self) -> str:
        """The allowed values, as an error message or the help text states them."""
        if self.structural:
            return " | ".join(self.choices)
        if self.unit == "flag":
            return "true | false"
        lower = "[" if self.inclusive else "("
        unit = {"1": "", "packets": " pkt", "bytes": " B", "s": " s", "bytes/s": " B/s",
                "packets/s": " pkt/s"}[self.unit]
        infinite = "inf]" if self.infinite else "inf)"
        upper = infinite if math.isinf(self.high) else f"{self.high:g}]"
        return f"{lower}{self.low:g}, {upper}{unit}"

    def resolve(self, value: Any, field: str, packet_bytes: float) -> float | str:
        """The value the model receives (see the module docstring); ValueError naming `field`
        and the allowed values when it is not acceptable."""
        if self.structural:
            if value not in self.choices:
                raise ValueError(f"{field}: {value!r} is not allowed; allowed: {self.allowed()}")
            return str(value)
        if self.unit == "flag":
            if not isinstance(value, bool):
                raise ValueError(f"{field}: {value!r} must be true or false")
            return float(value)
        number = self._number(value, field, packet_bytes)
        below = number < self.low if self.inclusive else number <= self.low
        if below or number > self.high or math.isnan(number):
            raise ValueError(f"{field}: {value!r} is out of range; allowed: {self.allowed()}")
        return number

    def _number(self, value: Any, field: str, packet_bytes: float) -> float:
        if self.unit == "1":
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"{field}: {value!r} must be a number")
            return float(value)
        if not isinstance(value, str):
            raise ValueError(f"{field}: {value!r} must be a string with a unit "
                             f"({self._example()})")
        try:
            if self.unit in ("packets", "bytes"):
                size = parse_size(value, packet_bytes, field, allow_inf=self.infinite,
                                  allow_zero=True)
                return size / packet_bytes if self.unit == "packets" else size
            if self.unit == "s":
                return parse_time(value, field)
            rate = parse_rate(value, field)
            return rate / packet_bytes if self.unit == "packets/s" else rate
        except UnitError as error:
            raise ValueError(str(error)) from None

    def _example(self) -> str:
        return {"packets": '"10pkt"', "bytes": '"100KB"', "s": '"55us"',
                "bytes/s": '"40Mbps"', "packets/s": '"40Mbps"'}[self.unit]


def resolve_parameters(declared: tuple[Parameter, ...], given: dict[str, Any], section: str,
                       packet_bytes: float, presets: Presets | None = None,
                       link_rate: float = math.nan) -> dict[str, float | str | None]:
    """Resolve every declared parameter from `given` (user text), its preset (`given`'s
    "preset", else the first of `presets`, read at `link_rate` bytes/s) or its default. Unknown
    keys are the caller's to refuse; a missing required one raises ValueError naming it."""
    if presets:
        given = dict(given)
        name = given.pop("preset", next(iter(presets)))
        if name not in presets:
            raise ValueError(f"{section}.preset: {name!r} is not allowed; allowed: "
                             f"{' | '.join(presets)}")
        given = {**presets[name](link_rate), **given}
    values: dict[str, float | str | None] = {}
    for parameter in declared:
        field = f"{section}.{parameter.name}"
        if parameter.name in given:
            values[parameter.name] = parameter.resolve(given[parameter.name], field,
                                                       packet_bytes)
        elif parameter.default is None:
            if not parameter.optional:
                raise ValueError(f"{field}: required key is missing")
            values[parameter.name] = None
        else:
            values[parameter.name] = parameter.resolve(parameter.default, field, packet_bytes)
    return values
