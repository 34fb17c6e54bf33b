"""The registry of validation cases: one place where every comparison with truth is declared.

A case is a function that runs pathflow and its reference (a closed form, the packet-level
simulator, ns-3 or measured data) and returns `Check`s: one quantity each, with the reference
value, pathflow's value, the tolerance and whether it passed, plus an optional figure. Cases
register themselves with `@case(...)`; `pathflow validate` runs them all (or the fast ones) and
writes the report (`pathflow.validation.report`). Later issues add their cases the same way.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from matplotlib.figure import Figure

__all__ = ["CASES", "Case", "CaseResult", "Check", "Scale", "case", "load_cases"]

Source = Literal["closed form", "packet", "ns-3", "measured"]


Scale = Literal["relative", "absolute", "factor"]


@dataclass(frozen=True)
class Check:
    """One quantity: pathflow's value against a reference, with a stated tolerance.

    The error is |value - reference| / |reference| on the `relative` scale, |value - reference|
    in `unit` on the `absolute` scale, and max(value / reference, reference / value) on the
    `factor` scale ("within a factor of 2": tolerance 2). `why` justifies the tolerance in a few
    words. A check without a tolerance is *reported*, not claimed: the quantity lies outside
    the model's stated scope and `why` says which limitation; it is shown, never passed."""

    quantity: str
    reference: float
    value: float
    tolerance: float | None
    unit: str = ""
    scale: Scale = "relative"
    why: str = ""

    @classmethod
    def band(cls, quantity: str, value: float, low: float, high: float, unit: str = "",
             why: str = "") -> Check:
        """value must lie in [low, high]: the band's centre with its half-width as tolerance."""
        return cls(quantity, (low + high) / 2, value, (high - low) / 2, unit, "absolute",
                   why=why or f"band [{low:.4g}, {high:.4g}] {unit}".strip())

    @property
    def error(self) -> float:
        if self.scale == "absolute":
            return abs(self.value - self.reference)
        if self.scale == "factor":
            if self.value <= 0 or self.reference <= 0:
                return 0.0 if self.value == self.reference else math.inf
            return max(self.value / self.reference, self.reference / self.value)
        difference = abs(self.value - self.reference)
        if difference == 0:
            return 0.0
        return difference / abs(self.reference) if self.reference else math.inf

    @property
    def claimed(self) -> bool:
        return self.tolerance is not None

    @property
    def passed(self) -> bool:
        """Whether a claimed check holds (a reported quantity never passes)."""
        return self.tolerance is not None and bool(self.error <= self.tolerance)


@dataclass
class CaseResult:
    checks: list[Check]
    figure: Figure | None = None
    notes: str = ""


@dataclass(frozen=True)
class Case:
    name: str
    title: str
    source: Source
    fast: bool
    run: Callable[[], CaseResult] = field(compare=False)


CASES: dict[str, Case] = {}


def case(name: str, title: str, source: Source, fast: bool = True
         ) -> Callable[[Callable[[], CaseResult]], Callable[[], CaseResult]]:
    """Register a validation case; `fast` cases run in `pathflow validate --fast` (CI)."""

    def register(run: Callable[[], CaseResult]) -> Callable[[], CaseResult]:
        if name in CASES:
            raise ValueError(f"validation case {name!r} is registered twice")
        CASES[name] = Case(name, title, source, fast, run)
        return run

    return register


def load_cases() -> dict[str, Case]:
    """All registered cases (importing the modules that register them)."""
    import pathflow.validation.cases  # noqa: F401  (registers every case module)

    return CASES
