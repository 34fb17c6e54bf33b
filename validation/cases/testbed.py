"""Seed 001's DCQCN testbed: calibration against a table of per-N summaries (issue 10)

The testbed (validation/data/dcqcn_testbed/): 8 senders -> 1 receiver through one switch (5.1 MB
buffer, PFC), 10 Gb/s, 1 KB packets, N = 80..720 flows; per N the maximum buffer after 5 s and
the mean ib_send_lat latency, for DCQCN with the NICs' defaults (Figure 9) and for DCQCN+static,
the DCQCN+ approximation the NICs could run (Figure 10). The scenario is
`pathflow/scenarios/dcqcn_incast.toml` (cx4 NIC preset, DCQCN marking, PFC). Its unstated
parameters, Kmin, Kmax, Pmax, the receiving NIC's CNP capacity and an extra base RTT, are fitted
to the DCQCN table only (`pathflow calibrate SCENARIO TABLE`, validation/calibration/table.py):
each evaluation sweeps the table's N (100 ms runs, statistics after 50 ms: within 1 % of 200 ms
runs for the maximum), the loss is the mean squared log-error of the maximum queue after warm-up
plus that of the latency, latency = offset + mean queue / C with the offset profiled out. The
DCQCN+static table is then predicted with transport.cc = "dcqcn+static" on the same switch and
NIC limits and the same latency offset: nothing refitted.

What the model can and cannot do here. The fluid model's queue grows smoothly with N while the
receiving NIC can send the CNPs the marks ask for, and runs away to the buffer PFC lets the
switch hold once it cannot: the testbed's jump at 720 flows, from 1.2 MB at 640 to the full
5.1 MB, is that runaway in the fit, whose CNP capacity puts the threshold between 640 and 720.
It needs the switch's dynamic PFC threshold as the testbed showed it (pfc_alpha = 8 in the
scenario: one port held the whole pool right after every start); at the default 1/8 the
switch holds half the pool and the fit gave the jump up (loss 0.98 against 0.67, before
DCQCN's hyper increase was modelled). Below the jump the fitted buffer is 0.59 to 0.78 of the
measured one, and the latency 1.7 to 3.7 times the measured from 320 flows: the testbed's
latency rises far less than its maximum buffer (40 us at 400 flows, when the buffer peaks at
389 KB: a mean queue of some 20 KB beside it), where the mean-field queue's mean stays a fixed
part of its maximum, and the fit, weighing both equally, splits the difference.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from pathflow import Scenario
from pathflow.validation.calibration.table import (
    Table,
    calibrate_table,
    load_table,
    predict_table,
)
from pathflow.validation.calibration.table_result import Comparison, TableFit, comparison_figure
from pathflow.validation.cases.common import shipped
from pathflow.validation.registry import CaseResult, Check, case
from pathflow.validation.traces import reference_path

__all__ = ["CONVERGED", "FIT", "START", "TestbedRun", "testbed_run", "testbed_tables"]

CONVERGED = 200e3  # bytes: the thesis's criterion, a buffer above this did not converge
BUFFER = 5.1e6  # bytes: the testbed switch's buffer
FIT = ("kmin", "kmax", "pmax", "cnp_capacity", "base_rtt")
# The documented starting point: the result of the full calibration (README, "Calibration
# against a table"): `pathflow calibrate pathflow/scenarios/dcqcn_incast.toml
# validation/data/dcqcn_testbed/dcqcn_default_params.csv --fit kmin,kmax,pmax,cnp_capacity,base_rtt
# --duration 100ms --warmup 50ms --max-evaluations 80`, 79 sweeps (7 minutes on one busy core)
# from the scenario's values (cx4 marking: Kmin 5 KB, Kmax 200 KB, Pmax 1 %; cnp_capacity 0.5
# per us, the middle of its bounds; no extra RTT) to loss 0.700, rounded. The loss jumps where
# the CNP capacity moves the runaway across 720 flows (about 0.7 a little below 1 per us, 1.0
# above), so the case's small budget starts on the collapsing side and checks that Nelder-Mead
# finds nothing better nearby, within the time of `pathflow validate`.
START = {"kmin": 1.56e3, "kmax": 60.5e3, "pmax": 0.0721, "cnp_capacity": 0.985,
         "base_rtt": 31.9e-6}
# 100 ms per point, statistics after 50 ms: the maximum queue of every N is within 1 % and the
# mean within 5 % of a 200 ms run (measured at cnp_capacity 1 per us); 50 ms runs are 10 % low.
DURATION, WARMUP = "100ms", "50ms"
EVALUATIONS = 12  # the case's budget of sweeps (about a minute on one core)


def testbed_tables() -> tuple[Table, Table]:
    """The DCQCN and DCQCN+static tables (maximum buffer after 5 s, mean latency)."""
    return tuple(load_table(reference_path(f"dcqcn_testbed/{name}"))  # type: ignore[return-value]
                 for name in ("dcqcn_default_params.csv", "dcqcn_plus_static_params.csv"))


@dataclass(frozen=True)
class TestbedRun:
    fit: TableFit
    dcqcn: Comparison  # the fitted model against the DCQCN table
    static: Comparison  # DCQCN+static predicted, against its table


def testbed_run(max_evaluations: int = EVALUATIONS, start: dict[str, float] | None = None,
                progress: Any = None) -> TestbedRun:
    """Calibrate on the DCQCN table from `start` (default `START`), predict DCQCN+static."""
    scenario: Scenario = shipped("dcqcn_incast.toml")
    dcqcn, static = testbed_tables()
    fit = calibrate_table(scenario, dcqcn, FIT, initial=start or START, duration=DURATION,
                          warmup=WARMUP, max_evaluations=max_evaluations, progress=progress)
    prediction = predict_table(fit.fitted_scenario, static, fit.offset, "dcqcn+static")
    return TestbedRun(fit, fit.after, prediction)


def _first_above(flows: np.ndarray, values: np.ndarray, level: float) -> float:
    above = np.nonzero(values > level)[0]
    return float(flows[above[0]]) if above.size else math.inf


@case("dcqcn_testbed", "Seed 001 testbed: DCQCN calibrated on its table, DCQCN+static "
      "predicted", "measured", fast=False)
def dcqcn_testbed() -> CaseResult:
    """Calibration of the DCQCN incast on the seed 001 testbed's DCQCN table (N = 80..720) from
    the documented starting point `START` (the full calibration's result, rounded) with a budget
    of `EVALUATIONS` sweeps, then DCQCN+static
    on the same switch predicted for its own table, nothing refitted. Claimed, against the
    measurements: the qualitative result of the thesis. (1) DCQCN stops converging in the
    few-hundred-flow range: the first N whose maximum buffer after warm-up exceeds 200 KB is
    within one row (80 flows) of the measured one. (2) It collapses by 720: the model's maximum
    queue at 720 flows is at least 80 % of the buffer the testbed filled. (3) DCQCN+static stays
    far lower: at 640 and 720 flows its predicted maximum queue is at most half of the fitted
    DCQCN's (measured: a fifth and an eighth). Reported: every row's model/measured ratio and
    each table's rms log-error of both targets; the fitted values and latency offset in the
    notes."""
    run = testbed_run()
    checks: list[Check] = []
    dcqcn, static = run.dcqcn, run.static
    buffer_column = next(c for c, q in dcqcn.quantities.items() if q == "queue_max")
    measured_first = _first_above(dcqcn.flows, dcqcn.measured[buffer_column], CONVERGED)
    model_first = _first_above(dcqcn.flows, dcqcn.model[buffer_column], CONVERGED)
    checks.append(Check("DCQCN: first N with max buffer after warm-up > 200 KB",
                        measured_first, model_first, 80.0, "flows", "absolute",
                        why="one table row: where the flows stop converging"))
    at_720 = float(dcqcn.model[buffer_column][dcqcn.flows == 720][0])
    checks.append(Check.band("DCQCN 720 flows: max queue after warm-up / buffer",
                             at_720 / BUFFER, 0.8, 1.0, why="collapse: the testbed filled its "
                             "5.1 MB buffer (PFC holds the rest)"))
    static_column = next(c for c, q in static.quantities.items() if q == "queue_max")
    for n in (640, 720):
        model_ratio = float(static.model[static_column][static.flows == n][0]
                            / dcqcn.model[buffer_column][dcqcn.flows == n][0])
        measured_ratio = float(static.measured[static_column][static.flows == n][0]
                               / dcqcn.measured[buffer_column][dcqcn.flows == n][0])
        checks.append(Check.band(f"{n} flows: DCQCN+static / DCQCN max queue, predicted",
                                 model_ratio, 0.0, 0.5,
                                 why=f"far lower (measured {measured_ratio:.2f})"))
    for label, comparison in (("DCQCN (fitted)", dcqcn), ("DCQCN+static (predicted)", static)):
        for column, quantity in comparison.quantities.items():
            name = "max buffer" if quantity == "queue_max" else "latency"
            unit, scale = ("KB", 1e-3) if quantity == "queue_max" else ("us", 1e6)
            for i, n in enumerate(comparison.flows):
                checks.append(Check(f"{label} {name}, {int(n)} flows",
                                    float(comparison.measured[column][i] * scale),
                                    float(comparison.model[column][i] * scale), None, unit,
                                    why="reported: mean field, one run per N measured"))
            checks.append(Check(f"{label} {name}: rms log-error (0 = exact)", 0.0,
                                comparison.rms_log_error(column), None, scale="absolute",
                                why="reported"))
    fit = run.fit
    notes = ("Fitted from " + ", ".join(f"{n} {p.text(p.initial)}" for n, p in
                                         fit.parameters.items())
             + f" in {fit.evaluations} sweeps ({fit.seconds:.0f} s): "
             + ", ".join(f"{n} {p.text()}" for n, p in fit.parameters.items())
             + f"; latency = {fit.offset * 1e6:.1f} us + mean queue / C; loss "
             f"{fit.loss_before:.3g} -> {fit.loss_after:.3g}.")
    figure = comparison_figure([dcqcn, static], ["DCQCN (fit)", "DCQCN+static (prediction)"],
                               title="Seed 001 testbed, 10 Gb/s incast")
    return CaseResult(checks, figure, notes)
