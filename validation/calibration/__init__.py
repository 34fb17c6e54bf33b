"""Calibration: fit a few effective fluid-model parameters to a measured or simulated queue trace.

Model: `calibrate(scenario, trace, fit=[...])` (the command `pathflow calibrate`) adjusts some of
`PARAMETERS` (an extra base RTT, DCTCP's g, the marking threshold K, the ACK ratio, the initial
window, a capacity factor) so that phase-free summaries of the fluid model's queue (quantiles,
autocovariance, delivered rate), computed inside the jitted solver, match the trace's: Adam
through the solver, a derivative-free fallback where the pathwise gradient vanishes, a sandwich
uncertainty from a block bootstrap of the trace, and the fitted scenario written back as TOML.

Scope: one link's queue is compared, at the starting scenario's time step. What the queue does
not determine shows as a large uncertainty; a difference of model form (the shape of the
queue's distribution) no parameter removes. The method in full, its limits and the fits to the
hardware trace and the packet-level reference are in docs/validation.md, section "Calibration
against the packet-level reference and the hardware trace" (the docstring of
`validation/cases/calibration.py`).

Modules: `parameters` (names, units, bounds, values in a scenario and written back), `loss`
(the phase-free loss, trace side and traced model side), `objective` (one calibration's
compiled objective), `fit` (`calibrate`), `result` (`CalibrationResult`).

Against a table of per-N summaries instead of a trace (issue 10: the seed 001 testbed's
maximum buffer and latency per incast size), `table.calibrate_table` (the same command, given a
CSV with a `flows` column) sweeps the scenario's traffic.flows over the table's rows and fits
DCQCN's marking (kmin, kmax, pmax), the receiver's cnp_capacity and base_rtt by Nelder-Mead on
squared log-errors; `table.predict_table` runs another table without refitting. Modules `table`
(parameters, table files, objective, fit) and `table_result` (`TableFit`, `Comparison`, the
figure); tests/test_calibration_table.py and the case `dcqcn_testbed`
(validation/cases/testbed.py).

Validation: tests/test_calibration.py (recovery of base RTT and g by the gradient phase and of K
by the fallback from noisy fluid traces; bounds, the written scenario, the report, input
errors), tests/test_cli_calibrate.py (the command, trace files), and the cases
`calibration_packet` and `calibration_hardware` (validation/cases/calibration.py, run by
tests/test_validation.py and `pathflow validate`).
"""

from pathflow.validation.calibration.fit import calibrate
from pathflow.validation.calibration.objective import Objective, objective
from pathflow.validation.calibration.parameters import PARAMETERS, default_bounds, parse_fit
from pathflow.validation.calibration.result import CalibrationResult, FittedParameter

__all__ = [
    "PARAMETERS",
    "CalibrationResult",
    "FittedParameter",
    "Objective",
    "calibrate",
    "default_bounds",
    "objective",
    "parse_fit",
]
