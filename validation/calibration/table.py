"""Calibration against a table of per-flow-count summaries (issue 10: the seed 001 testbed).

A measured table has one row per incast size N (a `flows` column, the sweep variable) and some
target columns: the maximum queue after warm-up and the mean latency. The model side of a row
is the point N of `pathflow.sweeps.sweep`: all rows run batched, one sweep per evaluation.

Objective (`table_loss`): the mean over rows of the squared log-error of the maximum queue after
warm-up, plus the same for the mean latency, each target weighted equally. Log-errors because
both quantities span one to two orders of magnitude over N (130 KB to 5.1 MB, 25 us to 1.8 ms on
the testbed): a factor of two counts the same at 80 flows as at 720, and bytes and microseconds
become comparable without choosing a unit. Equal weights because each target has one value per
row and the table gives no repeat measurements to weight by; the two carry different
information (the latency pins the mean queue where the flows converge, the maximum buffer the
point where they stop converging and the collapse), so neither should drown the other.

Latency model: latency = offset + mean queue / C (C the capacity of the link with the largest
queue: queueing delay at the bottleneck). The offset, the table's fixed part (NIC, software and
propagation: ib_send_lat's 25 us at small N are far above the testbed's few-microsecond wire
RTT), is not a simulated parameter: it is profiled out, i.e. for every evaluation the offset
minimising the latency term is found in closed loop (a one-dimensional bounded search, no
simulation), and kept fixed when predicting another table. `base_rtt`, when fitted, is the
extra round trip the model's control loop sees (its feedback delay), not the latency offset.

Parameters (`TABLE_PARAMETERS`): DCQCN's marking kmin, kmax (bytes), pmax (`[aqm]` keys of kind
"dcqcn"), the receiving NIC's cnp_capacity (CNPs per microsecond, a `[transport]` key of the
DCQCN models) and base_rtt (s, as in the time-series calibration). Optimiser: Nelder-Mead on the
unit cube, each parameter mapped to its bounds on a log scale (linear for base_rtt, whose lower
bound is 0); the sweep is the expensive part, so the number of sweeps is capped
(`max_evaluations`) and repeated points are not rerun. A point with kmin > kmax is refused by
the scenario; the objective gives it a large loss without a simulation.
"""

from __future__ import annotations

import csv
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.optimize
import xarray as xr

from pathflow.scenario import Scenario, ScenarioError, load_scenario
from pathflow.sweeps import sweep
from pathflow.units import parse_time
from pathflow.validation.calibration.parameters import (
    given_bounds,
    parse_fit,
    scenario_updates,
)
from pathflow.validation.calibration.table_result import (
    Comparison,
    TableFit,
    TableParameterFit,
)

__all__ = ["TABLE_PARAMETERS", "TARGETS", "Table", "TableParameter", "apply_values",
           "calibrate_table", "check_table_applicable", "is_table", "load_table",
           "parse_table_fit", "predict_table", "table_bounds"]

_REFUSED = 1e3  # loss of a point the scenario refuses (kmin > kmax): far above any real misfit
_FLOOR = 1.0  # bytes: an empty model queue stays finite on the log scale


@dataclass(frozen=True)
class TableParameter:
    """One parameter `calibrate_table` can fit."""

    unit: str  # of the values the API takes and returns
    log: bool  # optimised on a log scale
    key: str  # the scenario key it is written to ("" for base_rtt: link overrides)
    meaning: str


TABLE_PARAMETERS: dict[str, TableParameter] = {
    "kmin": TableParameter("B", True, "aqm.kmin", "DCQCN marking: queue where marking starts"),
    "kmax": TableParameter("B", True, "aqm.kmax", "DCQCN marking: queue where p reaches pmax"),
    "pmax": TableParameter("1", True, "aqm.pmax", "DCQCN marking probability at kmax"),
    "cnp_capacity": TableParameter("1/us", True, "transport.cnp_capacity",
                                   "CNPs per microsecond the receiving NIC can send"),
    "base_rtt": TableParameter("s", False, "", "extra round-trip delay on every path"),
}


@dataclass(frozen=True)
class Target:
    """A target column: the model quantity it is compared with and its unit in the file."""

    quantity: str  # "queue_max" or "latency"
    scale: float  # file unit -> SI (bytes, seconds)
    meaning: str


TARGETS: dict[str, Target] = {
    "max_buffer_after_5s_bytes": Target("queue_max", 1.0, "maximum buffer after warm-up (B)"),
    "queue_max_bytes": Target("queue_max", 1.0, "maximum queue after warm-up (B)"),
    "avg_latency_us": Target("latency", 1e-6, "mean latency (us)"),
    "latency_us": Target("latency", 1e-6, "mean latency (us)"),
}


@dataclass(frozen=True)
class Table:
    """A measured table: flow counts and, per target column, values in SI units."""

    name: str
    flows: np.ndarray  # int, increasing
    targets: dict[str, np.ndarray]  # column -> values (bytes or seconds), one per row

    def quantity(self, quantity: str) -> tuple[str, np.ndarray] | None:
        """The (column, values) of the target compared with `quantity`, if the table has one."""
        for column, values in self.targets.items():
            if TARGETS[column].quantity == quantity:
                return column, values
        return None


def is_table(path: Path | str) -> bool:
    """Whether a trace file is a table of per-N summaries (a CSV whose header names `flows` or
    a target column) rather than a queue time series."""
    path = Path(path)
    if path.suffix.lower() != ".csv" or not path.is_file():
        return False
    try:
        with path.open(newline="") as f:
            header = next(csv.reader(f), [])
    except (OSError, UnicodeDecodeError):
        return False
    names = {h.strip() for h in header}
    return "flows" in names or bool(names & set(TARGETS))


def load_table(path: Path | str, targets: Sequence[str] | None = None) -> Table:
    """Read a table CSV: a `flows` column and the target columns `targets` (default: every
    column of `TARGETS` it has). A one-line ValueError naming the file and the problem."""
    path = Path(path)
    try:
        with path.open(newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as error:
        raise ValueError(f"{path}: cannot read the table ({error.strerror or error})") from None
    columns = [c.strip() for c in (rows[0].keys() if rows else [])]
    if not rows:
        raise ValueError(f"{path}: the table has no rows")
    if "flows" not in columns:
        raise ValueError(f"{path}: no 'flows' column (the flow count of each row, the sweep "
                         f"variable); columns: {', '.join(columns)}")
    if targets is None:
        chosen = [c for c in columns if c in TARGETS]
        if not chosen:
            raise ValueError(f"{path}: no target column; known: {', '.join(TARGETS)}")
    else:
        chosen = list(targets)
        for column in chosen:
            if column not in TARGETS:
                raise ValueError(f"unknown target column {column!r}; known: "
                                 f"{', '.join(TARGETS)}")
            if column not in columns:
                raise ValueError(f"{path}: no column {column!r}; columns: {', '.join(columns)}")
    quantities = [TARGETS[c].quantity for c in chosen]
    if len(set(quantities)) != len(quantities):
        raise ValueError(f"{path}: two target columns measure the same quantity: "
                         f"{', '.join(chosen)}")
    flows, values = [], {c: [] for c in chosen}
    for line, row in enumerate(rows, start=2):
        row = {k.strip(): v for k, v in row.items() if k is not None}
        try:
            n = float(row["flows"])
        except (TypeError, ValueError):
            raise ValueError(f"{path}: line {line}: flows {row['flows']!r} is not a number"
                             ) from None
        if n < 1 or n != int(n):
            raise ValueError(f"{path}: line {line}: flows must be a whole number >= 1, got {n:g}")
        flows.append(int(n))
        for column in chosen:
            try:
                value = float(row[column])
            except (TypeError, ValueError):
                raise ValueError(f"{path}: line {line}: {column} {row[column]!r} is not a "
                                 "number") from None
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{path}: line {line}: {column} must be > 0 (errors are "
                                 f"compared on a log scale), got {value:g}")
            values[column].append(value * TARGETS[column].scale)
    if len(set(flows)) != len(flows):
        raise ValueError(f"{path}: a flow count appears twice in 'flows'")
    order = np.argsort(flows)
    return Table(path.name, np.asarray(flows)[order],
                 {c: np.asarray(v)[order] for c, v in values.items()})


def parse_table_fit(text: str | Sequence[str]) -> tuple[str, ...]:
    """'kmax,pmax' -> ('kmax', 'pmax'); a one-line ValueError for unknown or repeated names."""
    return parse_fit(text, tuple(TABLE_PARAMETERS), "table calibration parameter")


def check_table_applicable(scenario: Scenario, names: Sequence[str]) -> None:
    """A one-line ValueError when a parameter does not exist in the scenario's model."""
    if len(scenario.si.groups) > 1:
        raise ValueError("traffic.groups: a table calibration sweeps one traffic table's flow "
                         "count; this scenario has several groups")
    kind = scenario.si.aqm.kind
    for name in names:
        if name in ("kmin", "kmax", "pmax") and kind != "dcqcn":
            raise ValueError(f"{name!r} applies to aqm.kind = 'dcqcn', not {kind!r}")
        if name == "cnp_capacity" and "cnp_capacity" not in scenario.si.transport.parameters:
            raise ValueError(f"'cnp_capacity' applies to the DCQCN transports (dcqcn, dcqcn+, "
                             f"dcqcn+static), not {scenario.si.transport.cc!r}")


def scenario_table_values(scenario: Scenario) -> dict[str, float]:
    """Each parameter's value in `scenario`, in its unit (NaN where it has none)."""
    aqm = scenario.si.aqm.parameters
    return {
        "kmin": float(aqm.get("kmin", math.nan)),
        "kmax": float(aqm.get("kmax", math.nan)),
        "pmax": float(aqm.get("pmax", math.nan)),
        "cnp_capacity": float(scenario.si.transport.parameters.get("cnp_capacity", math.nan)),
        "base_rtt": 0.0,
    }


def table_bounds(scenario: Scenario, name: str) -> tuple[float, float]:
    """Default bounds: kmin 1 KB to 200 KB, kmax 10 KB to the buffer, pmax 0.1 % to 50 %,
    cnp_capacity 0.05 to 5 per microsecond (a 10 Gb/s receiver of 1 KB packets takes 1.25
    packets per microsecond: more CNP capacity than packets is unlimited), base_rtt 0 to
    100 us (the testbed's wire RTT is a few microseconds)."""
    buffer = scenario.si.topology.buffer
    return {
        "kmin": (1e3, 200e3),
        "kmax": (10e3, max(buffer, 20e3) if math.isfinite(buffer) else 10e6),
        "pmax": (1e-3, 0.5),
        "cnp_capacity": (0.05, 5.0),
        "base_rtt": (0.0, 100e-6),
    }[name]


def apply_values(scenario: Scenario, values: Mapping[str, float]) -> Scenario:
    """`scenario` with the table parameters set (base_rtt through `scenario_updates`)."""
    updates: dict[str, Any] = {}
    for name, value in values.items():
        if name in ("kmin", "kmax"):
            updates[TABLE_PARAMETERS[name].key] = f"{value:.8g}B"
        elif name != "base_rtt":
            updates[TABLE_PARAMETERS[name].key] = float(value)
    if values.get("base_rtt", 0.0) > 0:
        updates.update(scenario_updates(scenario, {"base_rtt": float(values["base_rtt"])}))
    return scenario.with_updates(updates)


def _run_settings(scenario: Scenario, duration: float | str | None,
                  warmup: float | str | None) -> Scenario:
    """The scenario with the evaluation's run.duration and run.warmup."""
    updates: dict[str, Any] = {}
    if duration is not None:
        seconds = parse_time(duration, "duration", allow_zero=False) if isinstance(
            duration, str) else float(duration)
        updates["run.duration"] = seconds
    if warmup is not None:
        updates["run.warmup"] = parse_time(warmup, "warmup") if isinstance(warmup, str) \
            else float(warmup)
    out = scenario.with_updates(updates) if updates else scenario
    if out.si.run.warmup is not None and out.si.run.warmup >= out.si.run.duration:
        raise ValueError(f"warmup: {out.si.run.warmup:g} s must be shorter than the duration "
                         f"({out.si.run.duration:g} s)")
    return out


def model_summaries(scenario: Scenario, flows: Sequence[int]) -> dict[str, np.ndarray]:
    """The sweep's maximum and mean queue after warm-up (bytes) and the bottleneck's capacity
    (bytes/s, the link with the largest queue), per flow count."""
    ds = sweep(scenario, [int(n) for n in flows], series=True)  # the queues find the bottleneck
    ds = ds.sel(flows=list(flows))
    return {"queue_max": ds.queue_max.values.astype(float),
            "queue_mean": ds.queue_mean.values.astype(float),
            "capacity": np.full(len(flows), _bottleneck_capacity(ds))}


def _bottleneck_capacity(ds: xr.Dataset) -> float:
    queue = ds.queue.mean([d for d in ds.queue.dims if d != "link"])
    link = int(np.argmax(queue.values))
    return float(ds.capacity.values[link])


def best_offset(latency: np.ndarray, queueing: np.ndarray) -> float:
    """The latency offset (s) minimising sum(log((offset + queueing) / latency)^2), between 0
    and the smallest measured latency."""
    def cost(offset: float) -> float:
        return float(np.sum(np.log((offset + queueing + 1e-12) / latency) ** 2))

    high = float(latency.min())
    found = scipy.optimize.minimize_scalar(cost, bounds=(0.0, high), method="bounded",
                                           options={"xatol": 1e-9})
    return float(found.x) if cost(found.x) <= cost(0.0) else 0.0


def compare(table: Table, model: Mapping[str, np.ndarray], offset: float | None
            ) -> Comparison:
    """The model against the table: per-row model values and the latency offset (profiled when
    `offset` is None or NaN: a calibration without a latency target has none)."""
    predicted: dict[str, np.ndarray] = {}
    found = offset
    for column, measured in table.targets.items():
        quantity = TARGETS[column].quantity
        if quantity == "queue_max":
            predicted[column] = np.maximum(model["queue_max"], _FLOOR)
        else:
            queueing = model["queue_mean"] / model["capacity"]
            if found is None or not math.isfinite(found):  # a fit without latency has none
                found = best_offset(measured, queueing)
            predicted[column] = np.maximum(found + queueing, 1e-9)
    return Comparison(table.name, table.flows, dict(table.targets), predicted,
                      {c: TARGETS[c].quantity for c in table.targets},
                      found if found is not None else math.nan)


def table_loss(comparison: Comparison) -> float:
    """Sum over targets of the mean squared log-error (each target weighted equally)."""
    return float(sum(np.mean(np.log(comparison.model[c] / comparison.measured[c]) ** 2)
                     for c in comparison.measured))


def calibrate_table(
    scenario: Scenario | str | Path,
    table: Table | str | Path,
    fit: Sequence[str] | str = ("kmin", "kmax", "pmax", "cnp_capacity"),
    *,
    bounds: Mapping[str, tuple[float, float]] | None = None,
    initial: Mapping[str, float] | None = None,
    targets: Sequence[str] | None = None,
    duration: float | str | None = None,
    warmup: float | str | None = None,
    max_evaluations: int = 60,
    progress: Callable[[str], None] | None = None,
) -> TableFit:
    """Fit `fit` (names of `TABLE_PARAMETERS`) of `scenario` to a table of per-N summaries.

    scenario: a Scenario or TOML path whose traffic.flows the sweep sets to each row's N.
    table: a `Table` or a CSV path (`load_table`; `targets` picks its target columns).
    bounds: {name: (lower, upper)} in the parameters' units (default: `table_bounds`).
    initial: starting values (default: the scenario's, clipped into the bounds; a parameter
        the scenario leaves unlimited, cnp_capacity, starts at the geometric middle of its
        bounds).
    duration, warmup: simulated time per evaluation and the start of the statistics window
        (defaults: the scenario's run.duration and run.warmup).
    max_evaluations: sweeps at most (each runs every row of the table).
    """
    clock = time.perf_counter()
    say = progress or (lambda message: None)
    if max_evaluations < 1:
        raise ValueError(f"max_evaluations: must be >= 1, got {max_evaluations}")
    base = load_scenario(scenario) if isinstance(scenario, str | Path) else scenario
    data = table if isinstance(table, Table) else load_table(table, targets)
    names = parse_table_fit(fit)
    check_table_applicable(base, names)
    run = _run_settings(base, duration, warmup)
    lower, upper = _resolve_bounds(base, names, bounds)
    start = _start(base, names, lower, upper, initial)
    apply_values(run, dict(zip(names, start, strict=True)))  # the start itself must be valid

    log = np.array([TABLE_PARAMETERS[n].log for n in names])

    # the unit cube's coordinate z of each parameter: linear in its log where `log`
    lo_t = np.where(log, np.log(np.where(log, lower, 1.0)), lower)
    hi_t = np.where(log, np.log(np.where(log, upper, 1.0)), upper)

    def theta_of(z: np.ndarray) -> np.ndarray:
        t = lo_t + np.clip(z, 0.0, 1.0) * (hi_t - lo_t)
        return np.where(log, np.exp(t), t)

    def z_of(theta: np.ndarray) -> np.ndarray:
        t = np.where(log, np.log(np.where(log, theta, 1.0)), theta)
        return (t - lo_t) / (hi_t - lo_t)

    cache: dict[tuple[float, ...], tuple[float, Comparison | None]] = {}
    history: list[tuple[dict[str, float], float]] = []
    sweeps = 0

    def evaluate(theta: np.ndarray) -> tuple[float, Comparison | None]:
        nonlocal sweeps
        key = tuple(float(f"{v:.9g}") for v in theta)  # z -> theta -> z round trips
        if key in cache:
            return cache[key]
        values = dict(zip(names, (float(v) for v in theta), strict=True))
        try:
            fitted = apply_values(run, values)
        except ScenarioError:
            cache[key] = (_REFUSED, None)  # e.g. kmin > kmax: no simulation
            return cache[key]
        sweeps += 1
        comparison = compare(data, model_summaries(fitted, data.flows.tolist()), None)
        loss = table_loss(comparison)
        cache[key] = (loss, comparison)
        history.append((values, loss))
        say(f"sweep {sweeps}: loss {loss:.4g} at "
            + ", ".join(f"{n} {_text(v, TABLE_PARAMETERS[n].unit)}" for n, v in values.items()))
        return cache[key]

    say(f"{data.name}: {len(data.flows)} rows (N = {data.flows[0]}..{data.flows[-1]}), "
        f"targets {', '.join(data.targets)}; fitting {', '.join(names)} with at most "
        f"{max_evaluations} sweeps of {run.si.run.duration * 1e3:g} ms")
    loss_before, before = evaluate(start)
    z0 = z_of(start)
    if max_evaluations > 1:
        # the first simplex steps a quarter of each range (inwards where the start sits near
        # the upper end): wide enough to leave a flat region of the loss
        simplex = [z0]
        for i in range(len(names)):
            step = np.zeros(len(names))
            step[i] = 0.25 if z0[i] <= 0.75 else -0.25
            simplex.append(np.clip(z0 + step, 0.0, 1.0))
        scipy.optimize.minimize(
            lambda z: evaluate(theta_of(z))[0], z0, method="Nelder-Mead",
            bounds=[(0.0, 1.0)] * len(names),
            options={"maxfev": max_evaluations - 1, "initial_simplex": np.array(simplex),
                     "xatol": 1e-3, "fatol": 1e-4})
    best_key = min(cache, key=lambda k: cache[k][0])
    loss_after, after = cache[best_key]
    assert after is not None and before is not None  # the start is valid (checked above)
    theta_best = np.array(best_key)
    parameters = {
        name: TableParameterFit(name, float(theta_best[i]), float(start[i]), float(lower[i]),
                                float(upper[i]), TABLE_PARAMETERS[name].unit)
        for i, name in enumerate(names)}
    return TableFit(scenario=base, run_scenario=run,
                    fitted_scenario=apply_values(run, {n: p.value for n, p in parameters.items()}),
                    table=data.name, parameters=parameters, loss_before=loss_before,
                    loss_after=loss_after, before=before, after=after, evaluations=sweeps,
                    seconds=time.perf_counter() - clock, history=history)


def predict_table(fitted: Scenario, table: Table | str | Path, offset: float | None,
                  cc: str | None = None, targets: Sequence[str] | None = None) -> Comparison:
    """The fitted scenario (under another congestion control `cc`, `Scenario.with_cc`) over
    another table's N, nothing refitted: the latency offset is the calibration's (None or NaN:
    fitted to this table, the only thing fitted)."""
    data = table if isinstance(table, Table) else load_table(table, targets)
    scenario = fitted.with_cc(cc) if cc else fitted
    return compare(data, model_summaries(scenario, data.flows.tolist()), offset)


def _resolve_bounds(scenario: Scenario, names: Sequence[str],
                    bounds: Mapping[str, tuple[float, float]] | None
                    ) -> tuple[np.ndarray, np.ndarray]:
    given = given_bounds(bounds, names, tuple(TABLE_PARAMETERS), "table calibration parameter")
    lower, upper = [], []
    for name in names:
        lo, hi = (float(v) for v in given.get(name, table_bounds(scenario, name)))
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise ValueError(f"bounds of {name!r}: need finite lower < upper, got [{lo}, {hi}]")
        if TABLE_PARAMETERS[name].log and lo <= 0:
            raise ValueError(f"bounds of {name!r}: lower bound must be > 0, got {lo}")
        if name == "base_rtt" and lo < 0:
            raise ValueError(f"bounds of 'base_rtt': the extra delay cannot be negative, got {lo}")
        if name == "pmax" and hi >= 1:
            raise ValueError(f"bounds of 'pmax': upper bound must be < 1, got {hi}")
        lower.append(lo)
        upper.append(hi)
    return np.array(lower), np.array(upper)


def _start(scenario: Scenario, names: Sequence[str], lower: np.ndarray, upper: np.ndarray,
           initial: Mapping[str, float] | None) -> np.ndarray:
    given = dict(initial or {})
    for name in given:
        if name not in names:
            raise ValueError(f"initial value given for {name!r}, which is not fitted "
                             f"(fit: {', '.join(names)})")
    values = scenario_table_values(scenario)
    out = []
    for i, name in enumerate(names):
        value = float(given.get(name, values[name]))
        if name in given and not lower[i] <= value <= upper[i]:
            raise ValueError(f"initial {name!r}: {value:g} lies outside its bounds "
                             f"[{lower[i]:g}, {upper[i]:g}]")
        if not math.isfinite(value):  # unlimited (cnp_capacity): the middle of the bounds
            value = math.sqrt(lower[i] * upper[i]) if lower[i] > 0 else (lower[i] + upper[i]) / 2
        out.append(min(max(value, lower[i]), upper[i]))
    return np.array(out)


def _text(value: float, unit: str) -> str:
    if unit == "B":
        return f"{value / 1e3:.4g} KB"
    if unit == "s":
        return f"{value * 1e6:.4g} us"
    if unit == "1/us":
        return f"{value:.4g}/us"
    return f"{value:.4g}"
