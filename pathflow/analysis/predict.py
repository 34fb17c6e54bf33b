"""A scenario's outcome predicted in a few numbers, before (or beside) its simulation (issue 12):
the rest state's largest queue (`analysis.equilibrium`), whether that rest state is stable, and
how fast it settles or at what period it oscillates (`analysis.stability`). These are what
`pathflow sweep --analyze` puts beside each simulated point.

The settling time is the linear one: ln(10) / sigma for the slowest part of the network (sigma
= -Re s of its rightmost root), the time a small perturbation of the rest state takes to shrink
to a tenth. A run that starts far from rest (slow start, DCQCN's line rate) adds the time to get
near it, which the linear analysis does not see; and the slowest mode may be one in which
identical flows move apart, which a run whose flows start together never excites (DCQCN+, 2
flows at 40 Gb/s: 114 ms predicted, the simulated flows within 10 % of their final rates after
21 ms; tests/test_equilibrium_dcqcn_plus.py compares the decay rates). Where no rest state is
derived (a model or a discipline the equilibrium does not cover, a rest state past the marking
ramp: every DCQCN and DCQCN+ point of the default sweep), every number is NaN and `reason`
says why; where the rest state has no linearisation (the ECN step), the queue stands and the
rest are NaN.

Validated through tests/test_sweep.py (`--analyze` on a Reno/RED sweep: the predicted queue
against the simulated mean, the verdict against the simulated state).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from pathflow.analysis.equilibrium import rest_state
from pathflow.analysis.stability import stability
from pathflow.scenario import Scenario, ScenarioError

__all__ = ["PREDICTIONS", "Prediction", "predict"]

PREDICTIONS = ("predicted_queue", "predicted_stable", "predicted_settling_time",
               "predicted_period")


class Prediction(NamedTuple):
    values: dict[str, float]  # PREDICTIONS: bytes, 1/0, s (inf: unstable), s (inf: none)
    reason: str  # why a value is NaN ("" where none is)


def predict(scenario: Scenario) -> Prediction:
    """The predictions of `scenario` (see the module docstring)."""
    values = dict.fromkeys(PREDICTIONS, math.nan)
    try:
        rest = rest_state(scenario)
        values["predicted_queue"] = float(rest.queue.max(initial=0.0))
        parts = stability(scenario, rest=rest)
    except ScenarioError as why:
        return Prediction(values, str(why))
    if parts.component.size == 0:  # nothing queues: nothing to settle
        return Prediction({**values, "predicted_stable": 1.0, "predicted_settling_time": 0.0,
                           "predicted_period": math.inf}, "")
    stable = bool(parts.stable.all())
    rightmost = int(np.argmax(parts.root_real.values))
    values.update(predicted_stable=float(stable),
                  predicted_settling_time=(float(parts.settling_time.max()) if stable
                                           else math.inf),
                  predicted_period=float(parts.period[rightmost]))
    return Prediction(values, "")
