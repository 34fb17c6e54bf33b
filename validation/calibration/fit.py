"""The fit: Adam on the bounded objective from several starts at once, a derivative-free
fallback where the pathwise gradient vanishes or stops short, and a sandwich uncertainty."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Literal

import jax.numpy as jnp
import numpy as np
import optax
import scipy.optimize
import xarray as xr

from pathflow.scenario import Scenario
from pathflow.validation.calibration.loss import LossKind, bootstrap_covariance
from pathflow.validation.calibration.objective import Objective, objective
from pathflow.validation.calibration.parameters import PARAMETERS
from pathflow.validation.calibration.result import CalibrationResult, FittedParameter

__all__ = ["Fallback", "GradientMode", "calibrate"]

GradientMode = Literal["auto", "forward", "reverse"]
Fallback = Literal["nelder-mead", "powell"]
_PROBE = 0.1  # z step of the finite-difference probe and Jacobian
_TINY_GRADIENT = 1e-8  # |dL/dz| below this times the loss counts as a vanished gradient
_PROGRESS = 0.01  # relative loss decrease that counts as progress
_STALL = 8  # Adam stops after this many steps without a 0.1 % improvement


def calibrate(
    scenario: Scenario | str | Path,
    trace: xr.Dataset | str | Path,
    fit: Sequence[str] | str = ("base_rtt",),
    *,
    link: str | None = None,
    trace_link: str | None = None,
    bounds: Mapping[str, tuple[float, float]] | None = None,
    initial: Mapping[str, float] | None = None,
    starts: int = 4,
    steps: int = 40,
    learning_rate: float = 0.15,
    loss: LossKind = "auto",
    levels: int | Sequence[float] = 19,
    acf_weight: float = 1.0,
    rate_weight: float = 10.0,
    duration: float | str | None = None,
    warmup: float | str | None = None,
    trace_warmup: float | None = None,
    samples: int = 3000,
    gradient: GradientMode = "auto",
    fallback: Fallback = "nelder-mead",
    fallback_starts: int = 2,
    fallback_evaluations: int = 60,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> CalibrationResult:
    """Fit `fit` (names of `PARAMETERS`) of `scenario` to the queue of `trace`.

    scenario: a Scenario or a TOML path; its values are the first starting point and where
        "loss before" is taken, unless `initial` ({name: value}) overrides them.
    trace: a Dataset with `queue` (time, link) in bytes (a loaded trace, a pathflow or ns-3
        result), or a file `traces.load_queue_file` reads: a `time,queue` CSV (packets of
        1514 B) or a netCDF result (told apart by content; a packet capture is refused: it has
        no queue).
    link / trace_link: the model and trace links compared (defaults: the trace's link name if
        the model has it, else the switch link most paths cross; the trace's busiest link).
    bounds: {name: (lower, upper)} in the units of `PARAMETERS`; others use `default_bounds`.
    starts: Adam's starting points (the first unperturbed); steps, learning_rate: its budget.
    loss: "auto" (quantiles, plus the autocorrelation when the trace resolves the oscillation),
        "quantiles", "moments", "quantiles+acf" or "moments+acf"; levels: the number of
        quantile levels from 5 % to 95 % or the levels; acf_weight, rate_weight: packets per
        unit of correlation (times the trace's standard deviation) and per 100 % rate error.
    duration, warmup: simulated time per evaluation and the start of the compared window
        (defaults: the scenario's run.duration and run.warmup, else a quarter of the duration).
    trace_warmup: start of the trace's compared window (default: a quarter of its time).
    gradient: "auto" (forward mode up to four parameters), "forward" or "reverse".
    fallback: "nelder-mead" or "powell", from `fallback_starts` points with
        `fallback_evaluations` simulations each.
    progress: called with one line per phase.
    """
    clock = time.perf_counter()
    say = progress or (lambda message: None)
    if gradient not in ("auto", "forward", "reverse"):
        raise ValueError(f"unknown gradient mode {gradient!r}; allowed: auto, forward, reverse")
    if fallback not in ("nelder-mead", "powell"):
        raise ValueError(f"unknown fallback {fallback!r}; allowed: nelder-mead, powell")
    task = objective(scenario, trace, fit, link=link, trace_link=trace_link, bounds=bounds,
                     initial=initial, loss=loss, levels=levels, acf_weight=acf_weight,
                     rate_weight=rate_weight, duration=duration, warmup=warmup,
                     trace_warmup=trace_warmup, samples=samples)
    names, n = task.names, len(task.names)
    say(f"compiling; loss {task.features.name} on {task.link}"
        + (f" (no autocovariance: {task.acf_note})" if task.acf_note else ""))
    # loss before: at the starting values themselves (which may sit on a bound)
    loss_before, residuals_before, series_before = task.evaluate(task.start)

    rng = np.random.default_rng(seed)
    z0 = task.z_of(task.start)
    z_starts = np.vstack([z0] + [z0 + rng.normal(0.0, 1.0, n) for _ in range(max(0, starts - 1))])
    mode = gradient if gradient != "auto" else ("forward" if n <= 4 else "reverse")

    # --- gradient phase: Adam from every start at once ---
    say(f"gradient phase: Adam from {len(z_starts)} starts, {mode}-mode derivatives")
    alive, best_values, best_z, first_best = _adam(task, z_starts, mode, steps, learning_rate)
    dead = [name for name, ok in zip(names, alive, strict=True) if not ok]
    candidates = sorted(zip(best_values.tolist(), list(best_z), strict=True),
                        key=lambda c: c[0])
    best_loss, z_best = candidates[0][0], np.array(candidates[0][1])
    loss_gradient = best_loss
    reason: str | None = None
    if dead:
        reason = (f"gradient vanished for {', '.join(dead)} (zero, NaN or below "
                  f"{_TINY_GRADIENT:g} of the loss per unit of z)")
    elif best_loss > (1 - _PROGRESS) * first_best:
        reason = f"Adam lowered the loss by less than {_PROGRESS:.0%}"
    # the simplex's first steps in z: wide (an eighth of a mid-range parameter's range, enough
    # to step over the plateaus that step marking and per-window jumps put into the loss) where
    # the gradient did nothing, narrow where Adam already brought a parameter close
    settled = alive & (best_loss <= (1 - _PROGRESS) * first_best)
    simplex = np.where(settled, 0.15, 0.5)

    # --- finite differences: the Jacobian for the uncertainty, and a check that Adam's best
    # point is a minimum of the real loss, not only of its pathwise derivative ---
    say("finite-difference probe at the best point")
    neighbours, jacobian = _probe(task, z_best)
    if reason is None:
        nearby = min(c[0] for c in neighbours)
        if nearby < (1 - _PROGRESS) * best_loss:
            reason = (f"a finite-difference neighbour of Adam's best point is "
                      f"{1 - nearby / best_loss:.0%} better (the pathwise gradient stopped "
                      "short of a minimum)")
    moved_by_fallback = np.zeros(n, dtype=bool)
    if reason is not None:
        say(f"derivative-free fallback ({fallback}): {reason}")
        chosen: list[np.ndarray] = []
        for _, z_candidate in sorted(candidates + neighbours, key=lambda c: c[0]):
            if all(np.max(np.abs(z_candidate - c)) > 0.25 for c in chosen):
                chosen.append(np.array(z_candidate))
            if len(chosen) >= fallback_starts:
                break
        z_before = z_best.copy()
        for z_candidate in chosen:
            found = _derivative_free(lambda point: task.evaluate(task.theta_of(point))[0],
                                     z_candidate, simplex, fallback, fallback_evaluations,
                                     best_loss)
            if found[0] < best_loss:
                best_loss, z_best = found
        moved_by_fallback = np.abs(z_best - z_before) > 1e-9
        if moved_by_fallback.any():
            _, jacobian = _probe(task, z_best)
    kept = loss_before <= best_loss  # the start itself (possibly on a bound) was never beaten
    if kept:
        theta_best, loss_after = task.start.copy(), loss_before
        residuals_after, series_after = residuals_before, series_before
        _, jacobian = _probe(task, task.z_of(task.start))
    else:
        theta_best = task.theta_of(z_best)
        loss_after, residuals_after, series_after = task.evaluate(theta_best)

    say("uncertainty: block bootstrap of the trace")
    covariance = bootstrap_covariance(task.trace_queue, task.trace_rate, task.features, rng)
    std, inflation, condition = _sandwich(jacobian, covariance, residuals_after)

    parameters = {}
    for i, name in enumerate(names):
        methods = (["adam"] if alive[i] else []) + (
            [fallback] if moved_by_fallback[i] or not alive[i] else [])
        if kept:
            methods = ["none (starting value kept)"]
        parameters[name] = FittedParameter(
            name, float(theta_best[i]), float(std[i]), float(task.start[i]),
            float(task.lower[i]), float(task.upper[i]), PARAMETERS[name].unit,
            " + ".join(methods))
    base = np.asarray(task.compiled.problem.path_base_rtt) + (
        parameters["base_rtt"].value if "base_rtt" in parameters else 0.0)
    return CalibrationResult(
        scenario=task.scenario, trace_name=task.trace_name, link=task.link,
        parameters=parameters, loss=task.features.name,
        compared=task.features.describe() + (f" (no autocovariance: {task.acf_note})"
                                             if task.acf_note else ""),
        loss_before=loss_before,
        loss_after=loss_after, loss_gradient=loss_gradient, evaluations=task.evaluations,
        gradient_evaluations=task.gradient_evaluations, seconds=time.perf_counter() - clock,
        gradient=mode if alive.any() else "none", fallback_reason=reason, kept_start=kept,
        inflation=inflation,
        condition=condition, dt=task.compiled.dt, base_rtt=(float(base.min()), float(base.max())),
        warmup=task.warmup, trace_warmup=task.trace_warmup, levels=np.array(task.features.levels),
        trace_time=task.trace_time, trace_queue=task.trace_queue, model_time=task.model_time,
        model_before=series_before, model_after=series_after, target=task.target,
        summary_before=task.target + residuals_before,
        summary_after=task.target + residuals_after, history=task.history,
    )


def _adam(task: Objective, z_starts: np.ndarray, mode: str, steps: int, learning_rate: float
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Adam on z from every start at once. Returns which parameters have a usable gradient
    (at some start: finite and above _TINY_GRADIENT times the loss), each start's best loss
    and point, and the best loss at the starts."""
    values, grads = task.value_and_gradient(z_starts, mode)
    scale = np.maximum(np.abs(values), 1e-12)[:, None]
    alive = np.any(np.isfinite(grads) & (np.abs(grads) > _TINY_GRADIENT * scale), axis=0)
    best_z = z_starts.copy()
    best_values = np.where(np.isfinite(values), values, np.inf)
    first_best = float(best_values.min())
    if not alive.any():
        return alive, best_values, best_z, first_best
    # a cosine decay to a twentieth lets Adam settle instead of circling the minimum
    optimizer = optax.adam(optax.cosine_decay_schedule(learning_rate, max(steps, 1), 0.05))
    z = jnp.asarray(z_starts)
    state = optimizer.init(z)
    mask = jnp.asarray(alive, dtype=float)  # parameters without a gradient stay put
    stalled, record = 0, first_best
    for step in range(steps):
        if step > 0:
            values, grads = task.value_and_gradient(np.asarray(z), mode)
        better = np.isfinite(values) & (values < best_values)
        best_values = np.where(better, values, best_values)
        best_z[better] = np.asarray(z)[better]
        grads = np.where(np.isfinite(grads), grads, 0.0)  # a NaN component does not move z
        updates, state = optimizer.update(jnp.asarray(grads) * mask, state, z)
        z = optax.apply_updates(z, updates)
        if best_values.min() < record * (1 - 1e-3):
            record, stalled = float(best_values.min()), 0
        else:
            stalled += 1
        if stalled >= _STALL:
            break
    return alive, best_values, best_z, first_best


def _probe(task: Objective, z: np.ndarray) -> tuple[list[tuple[float, np.ndarray]], np.ndarray]:
    """Losses at z +- _PROBE along each axis, and the central-difference Jacobian of the
    residuals in the parameters' own units."""
    n = z.size
    points: list[tuple[float, np.ndarray]] = []
    jacobian = np.zeros((task.target.size, n))
    for i in range(n):
        step = np.zeros(n)
        step[i] = _PROBE
        up, down = z + step, z - step
        loss_up, r_up, _ = task.evaluate(task.theta_of(up))
        loss_down, r_down, _ = task.evaluate(task.theta_of(down))
        points += [(loss_up, up), (loss_down, down)]
        jacobian[:, i] = (r_up - r_down) / (task.theta_of(up)[i] - task.theta_of(down)[i])
    return points, jacobian


def _derivative_free(function: Callable[[np.ndarray], float], z0: np.ndarray,
                     steps: np.ndarray, method: str, evaluations: int, reference: float
                     ) -> tuple[float, np.ndarray]:
    """Nelder-Mead or Powell on z from z0, first steps `steps`; the best point seen (loss, z)."""
    seen: list[tuple[float, np.ndarray]] = []

    def tracked(z: np.ndarray) -> float:
        value = function(np.asarray(z, dtype=float))
        seen.append((value if math.isfinite(value) else math.inf, np.array(z, dtype=float)))
        return seen[-1][0]

    if method == "nelder-mead":
        scipy.optimize.minimize(tracked, z0, method="Nelder-Mead", options={
            "initial_simplex": np.vstack([z0, z0 + np.diag(steps)]), "xatol": 0.02,
            "fatol": 1e-3 * max(reference, 1e-12), "maxfev": evaluations})
    else:
        scipy.optimize.minimize(tracked, z0, method="Powell", options={
            "direc": np.diag(steps), "xtol": 0.02, "ftol": 1e-3, "maxfev": evaluations})
    value, z = min(seen, key=lambda c: c[0])
    return value, z


def _sandwich(jacobian: np.ndarray, covariance: np.ndarray, residuals: np.ndarray
              ) -> tuple[np.ndarray, float, float]:
    """Standard deviations from s^2 J+ S J+^T, s^2 and cond(J): J the Jacobian of the
    residuals, S the trace's feature covariance, s^2 = max(1, r.r / tr((I - J J+) S)) inflating
    it for misfit beyond the trace's sampling noise (as scipy's curve_fit without
    `absolute_sigma`)."""
    singular = np.linalg.svd(jacobian, compute_uv=False)
    condition = float(singular[0] / singular[-1]) if singular[-1] > 0 else math.inf
    if not np.all(np.isfinite(jacobian)) or singular[-1] <= 1e-12 * max(singular[0], 1e-300):
        return np.full(jacobian.shape[1], math.inf), math.nan, condition
    pseudo = np.linalg.pinv(jacobian)
    projector = np.eye(jacobian.shape[0]) - jacobian @ pseudo
    expected = float(np.trace(projector @ covariance))
    misfit = float(residuals @ residuals)
    inflation = max(1.0, misfit / expected) if expected > 0 else math.inf
    cov = inflation * pseudo @ covariance @ pseudo.T
    return np.sqrt(np.maximum(np.diag(cov), 0.0)), inflation, condition
