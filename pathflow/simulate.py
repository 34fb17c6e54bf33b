"""`simulate`: a scenario in, a checked Dataset out."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import xarray as xr

from pathflow.compile import Compiled, compile_scenario
from pathflow.invariants import Report, check_invariants, dt_halving_verdict, warn_violations
from pathflow.metrics import store_warmup
from pathflow.models.registry import CONTROLS
from pathflow.results import trajectory_to_dataset
from pathflow.scenario import Scenario
from pathflow.solvers.dde import Trajectory
from pathflow.solvers.run import solve
from pathflow.units import format_bytes

__all__ = ["labelled_result", "run_compiled", "simulate"]


def labelled_result(compiled: Compiled, trajectory: Trajectory) -> xr.Dataset:
    """The solver's arrays as a Dataset (`results.trajectory_to_dataset`), with the run's
    steady-window start in attrs (`metrics.store_warmup`)."""
    ds = trajectory_to_dataset(compiled, trajectory)
    store_warmup(ds, compiled.scenario.si.run)
    return ds


def run_compiled(compiled: Compiled, progress: Callable[[int, int], None] | None = None
                 ) -> xr.Dataset:
    """Solve a compiled scenario and label the result (no invariant report)."""
    trajectory = solve(compiled.physics, compiled.problem, compiled.grid, progress=progress,
                       stepping=compiled.stepping)
    return labelled_result(compiled, trajectory)


def simulate(scenario: Scenario, progress: Callable[[int, int], None] | None = None,
             check_dt: bool = False, compiled: Compiled | None = None) -> xr.Dataset:
    """Run the fluid model of `scenario`; the invariant report is in `attrs["invariants"]` as
    JSON text (`invariants.report_of` and `metrics.summarize` read it as a `Report`).

    With `check_dt`, the scenario is run again at a fixed half of its finest step (the step the
    run starts from, and its step throughout where `[run] dt` fixes it) and the agreement of mean
    queue and throughput is part of the report (DESIGN §6, "results unchanged when dt halves").
    `compiled` is `scenario` already compiled (the command line compiles first, to state the
    cost of the run before it starts).
    """
    compiled = compile_scenario(scenario) if compiled is None else compiled
    ds = run_compiled(compiled, progress)
    report = check_invariants(ds, min_cwnd_bytes=scenario.si.min_cwnd_bytes)
    if check_dt:
        finer = scenario.with_updates({"run.dt": compiled.dt / 2,
                                       "run.sample": compiled.sample_interval})
        halved = dt_halving_verdict(ds, run_compiled(compile_scenario(finer)))
        report = Report({**report, "dt_halving": halved})
    ds.attrs["invariants"] = report.to_json()
    warn_violations(report)
    _warn_lossy_rate_control(scenario, ds)
    return ds


def _warn_lossy_rate_control(scenario: Scenario, ds: xr.Dataset) -> None:
    """A rate-based control (DCQCN) takes no notice of losses in the fluid model: say so when a
    run dropped packets (a packet-level flow would have stalled until its timeout)."""
    rate_based = sorted({g.transport.cc for g in scenario.si.groups
                         if CONTROLS[g.transport.cc].sends == "rate"})
    dropped = float(ds.drops.sum()) * ds.attrs["sample_interval"] if rate_based else 0.0
    if dropped > 0:
        remedy = ("lower aqm.xoff or enlarge topology.buffer" if scenario.si.aqm.pfc
                  else "set aqm.pfc = true (lossless) or enlarge topology.buffer")
        warnings.warn(f"{format_bytes(dropped)} dropped, and {', '.join(rate_based)} ignores "
                      f"losses in the fluid model: {remedy} so that nothing drops", stacklevel=2)
