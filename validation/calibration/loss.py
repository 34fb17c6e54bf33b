"""The calibration loss: what is compared between a queue trace and the fluid model, on both sides.

A measured queue and the model's queue oscillate with unrelated phase, so they are compared
through phase-free summaries, each a block of the residual vector r (model minus trace, in
packets); the loss is sum(r^2) / m, m the size of the distribution block:

- distribution (always): the quantiles at `levels` (default 5 %, 10 %, ..., 95 %), whose mean
  squared difference approximates the squared 2-Wasserstein distance between the two queue
  distributions, or (``moments``) the mean and standard deviation;
- autocorrelation (``+acf``, for traces sampled finely enough to resolve the oscillation): the
  autocovariance at 24 lags up to about 1.5 periods relative to that at one sample (a ratio
  that white measurement noise does not bias, unlike the autocorrelation), times the trace's
  standard deviation (so a difference counts in packets). It
  carries the time scale of the oscillation (period and shape), which the distribution lacks:
  a longer base RTT and a smaller DCTCP gain can give nearly the same queue distribution but
  not the same period;
- rate (when the trace has `flow_rate`): the total delivered rate relative to the trace's,
  times `rate_weight` sqrt(m) packets.

`trace_features` computes the blocks from a trace (optionally from resampled blocks of it, for
the bootstrap), `bootstrap_covariance` their covariance, and `model_residuals` the same from a
simulated trajectory, traced by JAX: the fitted parameters enter a `Problem` built inside the
jitted function, so one compiled program serves every evaluation (and every calibration with
the same shapes, grid, compared link and feature layout).

Tests: tests/test_calibration.py (the traced estimators against the trace side's, the bounded
reparametrisation).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import Literal, NamedTuple, get_args

import jax
import jax.numpy as jnp
import numpy as np

from pathflow.solvers.dde import integrate
from pathflow.solvers.problem import Grid, Physics, Problem

__all__ = [
    "LOSSES",
    "Data",
    "Features",
    "LossKind",
    "Static",
    "bootstrap_covariance",
    "choose_lags",
    "evaluate",
    "theta_from_z",
    "trace_features",
    "value_and_gradient",
    "z_from_theta",
]

LossKind = Literal["auto", "quantiles", "moments", "quantiles+acf", "moments+acf"]
LOSSES: tuple[str, ...] = get_args(LossKind)
_ACF_LAGS = 24  # autocorrelation lags compared
_EDGE = 0.02  # starting points stay this far (fraction of the range) inside the bounds


@dataclass(frozen=True)
class Features:
    """The layout of the residual vector: [distribution, autocorrelation, rate]."""

    distribution: str  # "quantiles" or "moments"
    levels: tuple[float, ...]  # quantile levels (unused for moments)
    lags: tuple[int, ...]  # autocovariance lags in trace samples, the first (one sample) the
    # reference of the others; empty: no such block
    interval: float  # s between trace samples (for the lags)
    acf_scale: float  # packets per unit of correlation
    rate_scale: float  # packets per unit of relative rate error; 0: no rate block

    @property
    def name(self) -> str:
        return self.distribution + ("+acf" if self.lags else "")

    def describe(self) -> str:
        """One line for reports, e.g. "19 quantiles + autocovariance at 24 lags to 43 ms"."""
        text = (f"{len(self.levels)} quantiles" if self.distribution == "quantiles"
                else "mean and standard deviation")
        if self.lags:
            text += (f" + autocovariance at {len(self.lags) - 1} lags to "
                     f"{self.lags[-1] * self.interval * 1e3:.3g} ms")
        return text + (" + delivered rate" if self.rate_scale > 0 else "")


# --- the trace side (numpy) -----------------------------------------------------------------------

def _autocovariance(blocks: list[np.ndarray], lags: tuple[int, ...]) -> np.ndarray:
    """Mean of (x_i - m)(x_i+k - m) over the pairs inside a block, per lag k; blocks are
    contiguous runs of samples (one for the whole trace), m their common mean."""
    mean = np.mean(np.concatenate(blocks))
    out = np.empty(len(lags))
    for j, k in enumerate(lags):
        pairs = sum(max(b.size - k, 0) for b in blocks)
        products = sum(float(np.dot(b[: b.size - k] - mean, b[k:] - mean)) for b in blocks
                       if b.size > k)
        out[j] = products / max(pairs, 1)
    return out


def _relative_autocovariance(blocks: list[np.ndarray], lags: tuple[int, ...]) -> np.ndarray:
    """The autocovariance at lags[1:] over that at lags[0] (the shortest lag, one sample):
    white measurement noise adds to the variance but to no covariance at a lag, so this ratio,
    unlike the autocorrelation, does not shrink when a trace is noisy."""
    covariance = _autocovariance(blocks, lags)
    return covariance[1:] / covariance[0] if covariance[0] != 0 else np.zeros(len(lags) - 1)


def trace_features(queue: np.ndarray, rate: np.ndarray | None, features: Features,
                   blocks: list[np.ndarray] | None = None) -> np.ndarray:
    """The trace's feature vector (packets): `queue` in packets, `rate` relative to its mean;
    `blocks` (index arrays of contiguous samples) resample the trace for the bootstrap."""
    parts = [queue] if blocks is None else [queue[b] for b in blocks]
    values = np.concatenate(parts)
    if features.distribution == "quantiles":
        out = [np.quantile(values, features.levels)]
    else:
        out = [np.array([values.mean(), values.std()])]
    if features.lags:
        out.append(features.acf_scale * _relative_autocovariance(parts, features.lags))
    if features.rate_scale > 0 and rate is not None:
        resampled = rate if blocks is None else np.concatenate([rate[b] for b in blocks])
        out.append(np.array([features.rate_scale * resampled.mean()]))
    return np.concatenate(out)


def bootstrap_covariance(queue: np.ndarray, rate: np.ndarray | None, features: Features,
                         rng: np.random.Generator, resamples: int = 200, blocks: int = 20
                         ) -> np.ndarray:
    """Covariance of the trace's feature vector under a moving-block bootstrap: blocks of
    n/blocks samples (at least twice the longest lag), drawn with replacement. Blocks keep the
    correlation between neighbouring samples, which an ordinary bootstrap would destroy."""
    n = queue.size
    length = min(n, max(math.ceil(n / blocks), 2 * max(features.lags, default=0) + 1))
    count = math.ceil(n / length)
    draws = []
    for _ in range(resamples):
        starts = rng.integers(0, n - length + 1, size=count)
        draws.append(trace_features(queue, rate, features,
                                    [np.arange(s, s + length) for s in starts]))
    return np.atleast_2d(np.cov(np.array(draws), rowvar=False))


def choose_lags(time: np.ndarray, queue: np.ndarray, longest: float
                ) -> tuple[tuple[int, ...], float, str | None]:
    """Autocorrelation lags (trace samples) spanning about 1.5 periods, the sample interval,
    and why no lags fit (None when they do): the trace must be regularly sampled, resolve the
    oscillation (its autocorrelation first crosses zero no earlier than the third sample), and
    the longest lag must stay under `longest` seconds (a quarter of the model's window)."""
    steps = np.diff(time)
    interval = float(np.median(steps)) if steps.size else math.nan
    if steps.size < 10 or np.any(np.abs(steps - interval) > 0.01 * interval):
        return (), interval, "the trace is not regularly sampled"
    centred = queue - queue.mean()
    if not np.any(centred):
        return (), interval, "the trace's queue is constant"
    limit = max(queue.size // 4, 2)
    rho = _autocovariance([queue], tuple(range(1, limit)))
    negative = np.flatnonzero(rho <= 0)
    if negative.size == 0:
        return (), interval, "the trace's autocorrelation does not cross zero (no oscillation)"
    quarter = int(negative[0]) + 1  # first zero crossing: about a quarter period
    if quarter < 3:
        return (), interval, (f"the trace's samples ({interval:.3g} s apart) do not resolve its "
                              "oscillation")
    span = min(6 * quarter, limit - 1)
    if span * interval > longest:
        return (), interval, (f"its lags up to {span * interval:.3g} s exceed a quarter of the "
                              f"model's window ({longest:.3g} s)")
    lags = tuple(sorted({round(v) for v in np.linspace(1, span, _ACF_LAGS + 1)}))
    return lags, interval, None


# --- the model side (JAX, traced) ---------------------------------------------------------------

class Static(NamedTuple):
    """What the compiled objective is specialised on (hashable)."""

    physics: Physics
    grid: Grid
    link: int  # index of the compared link
    distribution: str
    acf_lags: int  # model-sample lags computed for the autocorrelation (0: no such block)
    rate: bool


class Data(NamedTuple):
    """Arrays of the objective (traced: new values, traces and windows reuse the program)."""

    problem: Problem
    packet: jax.Array  # bytes per packet of the residuals
    fixed: jax.Array  # (6,) every calibration parameter's value where it is not fitted
    select: jax.Array  # (6, n) puts the n fitted values in place
    lower: jax.Array  # (n,) bounds
    upper: jax.Array  # (n,)
    log: jax.Array  # (n,) bool: optimised on a log scale
    marked: jax.Array  # (L+1,) bool: links with the ECN step marker
    real: jax.Array  # (L+1,) bool: every link but the padding one
    first: jax.Array  # () int: first record of the compared window
    levels: jax.Array  # (m,)
    lag_position: jax.Array  # (a,) autocorrelation lags in model samples (fractional)
    acf_scale: jax.Array  # ()
    rate_factor: jax.Array  # () rate_scale / the trace's mean rate
    target: jax.Array  # the trace's feature vector


def theta_from_z(z: jax.Array, data: Data) -> jax.Array:
    """Bounded parameters from unconstrained z: lo + (hi - lo) sigmoid(z), on a log scale where
    `log` (so every iterate of every optimiser respects the bounds)."""
    log = data.log
    lo = jnp.where(log, jnp.log(jnp.where(log, data.lower, 1.0)), data.lower)
    hi = jnp.where(log, jnp.log(jnp.where(log, data.upper, 1.0)), data.upper)
    x = lo + (hi - lo) * jax.nn.sigmoid(z)
    return jnp.where(log, jnp.exp(jnp.where(log, x, 0.0)), x)  # double where: no NaN gradients


def z_from_theta(theta: np.ndarray, lower: np.ndarray, upper: np.ndarray, log: np.ndarray,
                 edge: float = _EDGE) -> np.ndarray:
    """Inverse of `theta_from_z`, kept `edge` inside the bounds (the sigmoid is flat at its
    ends, where neither gradients nor simplex steps would move a parameter)."""
    lo = np.where(log, np.log(np.where(log, lower, 1.0)), lower)
    hi = np.where(log, np.log(np.where(log, upper, 1.0)), upper)
    x = np.where(log, np.log(np.where(log, np.maximum(theta, 1e-300), 1.0)), theta)
    u = np.clip((x - lo) / (hi - lo), edge, 1 - edge)
    return np.log(u / (1 - u))


def _problem(theta_fit: jax.Array, data: Data) -> Problem:
    """The solver's problem with the parameters in place: base_rtt adds to every path's base
    RTT, threshold replaces K on the step-marked links, capacity scales every real link (and
    RED's averaging rate, which is per packet), g, ack_ratio and init_cwnd go to every flow."""
    values = data.fixed + data.select @ (theta_fit - data.select.T @ data.fixed)
    extra, g, threshold, ack_ratio, init_cwnd, scale = values
    p = data.problem
    q, aqm = p.queues, p.aqm
    queues = q._replace(capacity=jnp.where(data.real, q.capacity * scale, q.capacity))
    if "threshold" in aqm._fields:
        k = threshold * data.packet
        aqm = aqm._replace(threshold=jnp.where(data.marked, k, aqm.threshold))
    if "avg_rate" in aqm._fields:  # RED averages per packet: its rate scales with capacity
        finite = jnp.isfinite(aqm.avg_rate)
        rate = jnp.where(finite, jnp.where(finite, aqm.avg_rate, 0.0) * scale, aqm.avg_rate)
        aqm = aqm._replace(avg_rate=jnp.where(data.real, rate, aqm.avg_rate))
    params = p.params._replace(
        ack_ratio=jnp.full_like(p.params.ack_ratio, ack_ratio),
        init_cwnd=jnp.full_like(p.params.init_cwnd, init_cwnd),
    )
    if "g" in params._fields:
        params = params._replace(g=jnp.full_like(params.g, g))
    return p._replace(queues=queues, aqm=aqm, path_base_rtt=p.path_base_rtt + extra,
                      params=params)


def _window_quantiles(series: jax.Array, inside: jax.Array, count: jax.Array,
                      levels: jax.Array) -> jax.Array:
    """Quantiles (linear interpolation, numpy's default) of the samples `inside` a window whose
    start is data: earlier samples sort to the end as +inf and the interpolation positions
    count only the samples inside, so no shape depends on the window. Sorting is
    differentiable (the gradient flows to the samples that land at each position)."""
    ordered = jnp.sort(jnp.where(inside, series, jnp.inf))
    position = levels * (count - 1)
    below = jnp.clip(jnp.floor(position).astype(jnp.int32), 0, series.shape[0] - 2)
    above = jnp.minimum(below + 1, count - 1)  # never an +inf entry
    fraction = position - below
    return ordered[below] * (1 - fraction) + ordered[above] * fraction


def _window_autocovariance(centred: jax.Array, count: jax.Array, lags: int,
                           position: jax.Array) -> jax.Array:
    """`_relative_autocovariance` of the window (`centred` is zero outside it), by FFT, at
    fractional lags `position` in model samples (linear interpolation between samples)."""
    size = 1 << (2 * centred.shape[0] - 1).bit_length()
    spectrum = jnp.fft.rfft(centred, n=size)
    sums = jnp.fft.irfft(spectrum * jnp.conj(spectrum), n=size)[: lags + 1]
    covariance = sums / jnp.maximum(count - jnp.arange(lags + 1), 1)
    below = jnp.clip(jnp.floor(position).astype(jnp.int32), 0, lags - 1)
    fraction = position - below
    at = covariance[below] * (1 - fraction) + covariance[below + 1] * fraction
    return at[1:] / at[0]


def model_residuals(theta_fit: jax.Array, data: Data, static: Static
                    ) -> tuple[jax.Array, jax.Array]:
    """Residuals (model features minus the trace's, packets) and the compared queue series
    (packets, every record)."""
    problem = _problem(theta_fit, data)
    trajectory = integrate(static.physics, problem, static.grid)
    series = trajectory.queue[:, static.link] / data.packet
    inside = jnp.arange(series.shape[0]) >= data.first
    count = jnp.sum(inside)
    mean = jnp.sum(jnp.where(inside, series, 0.0)) / count
    if static.distribution == "quantiles":
        parts = [_window_quantiles(series, inside, count, data.levels)]
    else:
        spread = jnp.sum(jnp.where(inside, (series - mean) ** 2, 0.0)) / count
        parts = [jnp.stack([mean, jnp.sqrt(spread + 1e-12)])]
    if static.acf_lags:
        centred = jnp.where(inside, series - mean, 0.0)
        parts.append(data.acf_scale * _window_autocovariance(
            centred, count, static.acf_lags, data.lag_position))
    if static.rate:
        total = jnp.sum(trajectory.flow_rate * problem.count, axis=1)  # identical flows: count
        parts.append((data.rate_factor * jnp.sum(jnp.where(inside, total, 0.0)) / count)[None])
    return jnp.concatenate(parts) - data.target, series


def _loss(residuals: jax.Array, data: Data, static: Static) -> jax.Array:
    size = data.levels.shape[0] if static.distribution == "quantiles" else 2
    return jnp.sum(residuals**2) / size


@partial(jax.jit, static_argnames="static")
def evaluate(theta_fit: jax.Array, data: Data, static: Static
             ) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Loss, residuals and queue series at physical parameter values (one simulation)."""
    residuals, series = model_residuals(theta_fit, data, static)
    return _loss(residuals, data, static), residuals, series


def _z_loss(z: jax.Array, data: Data, static: Static) -> jax.Array:
    residuals, _ = model_residuals(theta_from_z(z, data), data, static)
    return _loss(residuals, data, static)


@partial(jax.jit, static_argnames=("static", "mode"))
def value_and_gradient(z: jax.Array, data: Data, static: Static, mode: str
                       ) -> tuple[jax.Array, jax.Array]:
    """Losses and d loss / dz for a batch of unconstrained points z (S, n), `jax.vmap`-ed.
    Forward mode (`jax.jacfwd`, one tangent per parameter) keeps memory independent of the
    number of steps; reverse mode (`jax.value_and_grad`) stores every step of the scan."""
    if mode == "forward":
        def one(point: jax.Array) -> tuple[jax.Array, jax.Array]:
            def with_value(x: jax.Array) -> tuple[jax.Array, jax.Array]:
                value = _z_loss(x, data, static)
                return value, value

            gradient, value = jax.jacfwd(with_value, has_aux=True)(point)
            return value, gradient
    else:
        def one(point: jax.Array) -> tuple[jax.Array, jax.Array]:
            return jax.value_and_grad(_z_loss)(point, data, static)
    return jax.vmap(one)(z)
