"""The objective of one calibration: a scenario, a queue trace and the fitted parameters turn
into the trace's features, the bounded reparametrisation and one compiled loss (`loss`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import xarray as xr

from pathflow.compile import Compiled, compile_scenario
from pathflow.metrics import default_warmup
from pathflow.scenario import Scenario, load_scenario
from pathflow.solvers.problem import Grid
from pathflow.units import parse_time
from pathflow.validation.calibration.loss import (
    LOSSES,
    Data,
    Features,
    LossKind,
    Static,
    choose_lags,
    theta_from_z,
    trace_features,
    z_from_theta,
)
from pathflow.validation.calibration.loss import evaluate as loss_at
from pathflow.validation.calibration.loss import value_and_gradient as loss_and_gradient
from pathflow.validation.calibration.parameters import (
    NAMES,
    PARAMETERS,
    check_applicable,
    marked_links,
    parse_fit,
    resolve_bounds,
    scenario_values,
)
from pathflow.validation.traces import load_queue_file

__all__ = ["Objective", "objective"]


@dataclass
class Objective:
    """The bounded objective of one calibration (scenario, trace, fitted parameters), compiled
    once. With `task = objective(...)`, `task({"base_rtt": 3e-4})` is the loss there
    (packets^2; fitted parameters left out keep their starting values); `task.evaluate` takes
    the values in `names` order and also returns the residuals and the model's queue series."""

    scenario: Scenario
    names: tuple[str, ...]
    compiled: Compiled = field(repr=False)
    features: Features
    data: Data = field(repr=False)
    static: Static = field(repr=False)
    start: np.ndarray  # starting values (the scenario's, or `initial`)
    lower: np.ndarray
    upper: np.ndarray
    log: np.ndarray
    model_time: np.ndarray = field(repr=False)
    warmup: float
    trace_name: str
    trace_time: np.ndarray = field(repr=False)
    trace_queue: np.ndarray = field(repr=False)  # packets, steady window
    trace_rate: np.ndarray | None = field(repr=False)  # relative to its mean, if compared
    trace_warmup: float
    target: np.ndarray = field(repr=False)
    acf_note: str | None  # why "auto" left the autocovariance out (None: it did not)
    evaluations: int = 0
    gradient_evaluations: int = 0
    history: list[tuple[int, float]] = field(default_factory=list, repr=False)

    @property
    def link(self) -> str:
        return self.compiled.network.links[self.static.link].name

    def __call__(self, values: Mapping[str, float]) -> float:
        unknown = set(values) - set(self.names)
        if unknown:
            raise ValueError(f"not fitted here: {', '.join(sorted(unknown))} "
                             f"(fit: {', '.join(self.names)})")
        return self.evaluate(np.array([values.get(name, self.start[i])
                                       for i, name in enumerate(self.names)]))[0]

    def evaluate(self, theta: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        """Loss, residuals and queue series (packets) at the fitted values `theta`."""
        value, residuals, series = loss_at(jnp.asarray(theta, dtype=float), self.data,
                                           self.static)
        self.evaluations += 1
        self.history.append((self.evaluations + self.gradient_evaluations, float(value)))
        return float(value), np.asarray(residuals), np.asarray(series)

    def value_and_gradient(self, z: np.ndarray, mode: str) -> tuple[np.ndarray, np.ndarray]:
        """Losses and d loss / dz for a batch of unconstrained points (S, n)."""
        values, grads = loss_and_gradient(jnp.asarray(z, dtype=float), self.data,
                                          self.static, mode)
        self.gradient_evaluations += z.shape[0]
        values = np.asarray(values)
        self.history.append((self.evaluations + self.gradient_evaluations,
                             float(np.nanmin(values))))
        return values, np.asarray(grads)

    def theta_of(self, z: np.ndarray) -> np.ndarray:
        return np.asarray(theta_from_z(jnp.asarray(z, dtype=float), self.data))

    def z_of(self, theta: np.ndarray) -> np.ndarray:
        return z_from_theta(np.asarray(theta, dtype=float), self.lower, self.upper, self.log)


def objective(
    scenario: Scenario | str | Path,
    trace: xr.Dataset | str | Path,
    fit: Sequence[str] | str = ("base_rtt",),
    *,
    link: str | None = None,
    trace_link: str | None = None,
    bounds: Mapping[str, tuple[float, float]] | None = None,
    initial: Mapping[str, float] | None = None,
    loss: LossKind = "auto",
    levels: int | Sequence[float] = 19,
    acf_weight: float = 1.0,
    rate_weight: float = 10.0,
    duration: float | str | None = None,
    warmup: float | str | None = None,
    trace_warmup: float | None = None,
    samples: int = 3000,
) -> Objective:
    """The calibration objective without the optimisation (arguments as for `calibrate`), for
    loss landscapes and for checking a fit by hand."""
    if loss not in LOSSES:
        raise ValueError(f"unknown loss {loss!r}; allowed: {', '.join(LOSSES)}")
    names = parse_fit(fit)
    if not isinstance(scenario, Scenario):
        scenario = load_scenario(scenario)
    trace_name = (str(trace.attrs.get("engine", "trace")) if isinstance(trace, xr.Dataset)
                  else Path(trace).name)
    trace_ds = trace if isinstance(trace, xr.Dataset) else load_queue_file(trace)
    limits = resolve_bounds(scenario, names, bounds)
    run_scenario = scenario
    if duration is not None:
        seconds = parse_time(duration, "duration") if isinstance(duration, str) else duration
        run_scenario = scenario.with_updates({"run.duration": float(seconds)})
    compiled = compile_scenario(run_scenario)
    check_applicable(scenario, names, compiled)
    run_length = run_scenario.si.run.duration
    if warmup is None:
        cut = run_scenario.si.run.steady_start
    else:
        cut = parse_time(warmup, "warmup") if isinstance(warmup, str) else float(warmup)
    if not 0 <= cut < run_length:
        raise ValueError(f"warmup {cut:g} s must lie within the duration {run_length:g} s")
    grid = _grid(compiled, run_length, samples, limits)
    model_interval = compiled.dt * grid.steps_per_record
    model_time = model_interval * np.arange(1, grid.records + 1)
    first = int(np.searchsorted(model_time, cut, side="right"))
    if grid.records - first < 20:
        raise ValueError("fewer than 20 model samples after the warmup; lengthen the duration")

    try:
        trace_time, trace_bytes, trace_rate, trace_cut, trace_link = _trace_samples(
            trace_ds, trace_link, trace_warmup)
    except ValueError as error:  # name the trace: its problems are not the scenario's
        raise ValueError(f"{trace if isinstance(trace, str | Path) else trace_name}: {error}"
                         ) from None
    link_index = _pick_link(compiled, trace_link, link)
    packet = scenario.si.transport.mss
    trace_queue = trace_bytes / packet
    level_array = (np.linspace(0.05, 0.95, int(levels)) if np.isscalar(levels)
                   else np.asarray(levels, dtype=float))
    if level_array.size < 2 or np.any((level_array <= 0) | (level_array >= 1)):
        raise ValueError("levels: need at least 2 quantile levels strictly between 0 and 1")
    distribution = loss.split("+")[0] if loss != "auto" else "quantiles"
    lags: tuple[int, ...] = ()
    note: str | None = None  # why the autocovariance is left out where "auto" wanted it
    trace_interval = math.nan
    if loss == "auto" or loss.endswith("+acf"):
        window = model_time[-1] - model_time[first]
        lags, trace_interval, note = choose_lags(trace_time, trace_queue, window / 4)
        if note is not None and loss != "auto":
            raise ValueError(f"loss {loss!r}: no autocorrelation to compare, {note}")
    use_rate = trace_rate is not None and rate_weight > 0
    rate_norm = float(np.mean(trace_rate)) if use_rate and trace_rate is not None else 1.0
    relative_rate = trace_rate / rate_norm if use_rate and trace_rate is not None else None
    features = Features(
        distribution=distribution, levels=tuple(level_array.tolist()), lags=lags,
        interval=trace_interval, acf_scale=acf_weight * float(np.std(trace_queue)),
        rate_scale=(rate_weight * math.sqrt(level_array.size if distribution == "quantiles"
                                            else 2) if use_rate else 0.0))
    target = trace_features(trace_queue, relative_rate, features)
    positions = np.array(lags, dtype=float) * trace_interval / model_interval if lags else (
        np.zeros(0))

    start_values = scenario_values(scenario)
    for name, value in (initial or {}).items():
        if name not in names:  # a value that is not fitted would not reach the written scenario
            raise ValueError(f"initial value for {name!r}, which is not fitted "
                             f"(fit: {', '.join(names)}); set it in the scenario instead")
        start_values[name] = float(value)
    n = len(names)
    select = np.zeros((len(NAMES), n))
    select[[NAMES.index(name) for name in names], np.arange(n)] = 1.0
    lower = np.array([limits[name][0] for name in names])
    upper = np.array([limits[name][1] for name in names])
    log = np.array([PARAMETERS[name].log for name in names])
    start = np.array([start_values[name] for name in names])
    units = {name: "" if PARAMETERS[name].unit == "1" else f" {PARAMETERS[name].unit}"
             for name in names}
    outside = [f"{name} = {v:g}{units[name]} outside [{lo:g}, {hi:g}]{units[name]}"
               for name, v, lo, hi in zip(names, start, lower, upper, strict=True)
               if not lo <= v <= hi]
    if outside:
        raise ValueError(f"starting value out of bounds: {'; '.join(outside)}")
    fixed = np.array([v if math.isfinite(v) else 0.0 for v in start_values.values()])
    real = np.ones(compiled.problem.queues.capacity.shape[0], dtype=bool)
    real[-1] = False  # the padding link
    data = Data(
        problem=compiled.problem, packet=jnp.asarray(packet), fixed=jnp.asarray(fixed),
        select=jnp.asarray(select), lower=jnp.asarray(lower), upper=jnp.asarray(upper),
        log=jnp.asarray(log), marked=jnp.asarray(marked_links(compiled)),
        real=jnp.asarray(real), first=jnp.asarray(first, dtype=jnp.int32),
        levels=jnp.asarray(level_array), lag_position=jnp.asarray(positions),
        acf_scale=jnp.asarray(features.acf_scale),
        rate_factor=jnp.asarray(features.rate_scale / rate_norm), target=jnp.asarray(target),
    )
    acf_lags = math.ceil(positions.max()) + 1 if lags else 0
    static = Static(compiled.physics, grid, link_index, distribution, acf_lags, use_rate)
    return Objective(
        scenario=scenario, names=names, compiled=compiled, features=features, data=data,
        static=static, start=start, lower=lower, upper=upper, log=log, model_time=model_time,
        warmup=cut, trace_name=trace_name, trace_time=trace_time, trace_queue=trace_queue,
        trace_rate=relative_rate, trace_warmup=trace_cut, target=target,
        acf_note=note,
    )


def _pick_link(compiled: Compiled, trace_link: str, link: str | None) -> int:
    """The model link compared with the trace: `link`, else the trace's link name if the model
    has it, else the switch link that most paths cross (a host's own link never queues)."""
    names = [item.name for item in compiled.network.links]
    if link is not None:
        if link not in names:
            raise ValueError(f"link {link!r} is not in the scenario; links: {', '.join(names)}")
        return names.index(link)
    if trace_link in names:
        return names.index(trace_link)
    crossings = np.zeros(len(names))
    for path in compiled.routes.paths:
        crossings[list(path)] += 1.0
    hosts = set(compiled.network.hosts)
    crossings[[item.src in hosts for item in compiled.network.links]] = -1
    busiest = np.flatnonzero(crossings == crossings.max())
    if busiest.size == 1 and crossings.max() > 0:
        return int(busiest[0])
    raise ValueError(f"cannot tell which link the trace's {trace_link!r} is; pass link= one of "
                     f"{', '.join(names)}")


def _grid(compiled: Compiled, duration: float, samples: int,
          bounds: Mapping[str, tuple[float, float]]) -> Grid:
    """One grid for every evaluation: the scenario's dt, about `samples` records, and a history
    long enough for the largest RTT the bounds allow (longer base RTT, slower links)."""
    dt = compiled.dt
    steps = math.ceil(duration / dt - 1e-9)
    per_record = max(1, round(steps / samples))
    records = max(2, steps // per_record)
    largest = (compiled.grid.history - 3) * dt
    extra = bounds.get("base_rtt", (0.0, 0.0))[1]
    slowest = min(bounds.get("capacity", (1.0, 1.0))[0], 1.0)
    history = math.ceil((largest / slowest + extra) / dt) + 3
    return Grid(per_record, records, history)


def _trace_samples(trace: xr.Dataset, trace_link: str | None, warmup: float | None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, float, str]:
    """Steady window: time, queue (bytes), total delivered rate (or None); warmup; link."""
    if "queue" not in trace:
        raise ValueError("the trace has no 'queue' variable (time, link) in bytes")
    links = [str(v) for v in np.atleast_1d(trace.link.values)]
    cut = default_warmup(trace) if warmup is None else float(warmup)
    times = np.asarray(trace.time.values, dtype=float)
    keep = times > cut
    if keep.sum() < 20:
        raise ValueError(f"the trace has {int(keep.sum())} samples after its warmup of {cut:g} s;"
                         " need at least 20")
    if trace_link is None:  # the busiest link (a measured trace has one)
        means = np.asarray(trace.queue.transpose("time", ...).values, dtype=float)[keep]
        trace_link = links[int(np.argmax(means.mean(axis=0)))]
    elif trace_link not in links:
        raise ValueError(f"trace link {trace_link!r} is not in the trace; it has: "
                         f"{', '.join(links)}")
    queue = np.asarray(trace.queue.sel(link=trace_link).values, dtype=float)[keep]
    rate = None
    if "flow_rate" in trace:
        rate = np.asarray(trace.flow_rate.transpose("time", ...).values, dtype=float)
        rate = rate.reshape(times.size, -1)
        rate = rate.sum(axis=1)[keep]
    return times[keep], queue, rate, cut, trace_link
