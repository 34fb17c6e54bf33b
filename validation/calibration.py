"""Calibration: fit a few effective fluid-model parameters to a measured or simulated queue trace.

What it fits
------------
`calibrate(scenario, trace, fit=[...])` adjusts some of these parameters of the scenario's fluid
model (values in the units of the table; every parameter has bounds):

============  ====  ==========================================================  ===============
name          unit  meaning                                                     default bounds
============  ====  ==========================================================  ===============
``base_rtt``  s     extra round-trip delay added to every path's base RTT       [0, 2 ms]
                    (host stacks, NICs, interrupt moderation: in a measured
                    RTT but in no link delay); written out as +extra/2
                    one-way delay on every sending host's egress link
``g``         1     DCTCP's EWMA gain                                           [1/256, 1/2]
``threshold`` pkt   ECN step-marking threshold K (``aqm.kind = "ecn_step"``)    [K/4, 4K]
``ack_ratio`` 1     segments per window-increase event (delayed ACKs)           [1, 4]
``init_cwnd`` pkt   initial window (start-up only: needs a trace with it)       [min_cwnd, 100]
``capacity``  1     factor on every link's capacity                             [0.8, 1.2]
============  ====  ==========================================================  ===============

How
---
*Loss* (`validation.calibration_loss`). Trace and model oscillate with unrelated phase (the
hardware trace samples a ~15 ms sawtooth at 8 Hz), so they are compared through phase-free
summaries of their compared windows: the queue quantiles at 5 %, 10 %, ..., 95 % (their mean
squared difference approximates the squared 2-Wasserstein distance between the two queue
distributions; the extreme tails, noise in a measurement and sharp peaks in the model, are left
out); for a trace sampled finely enough to resolve the oscillation, its autocovariance at 24
lags up to about 1.5 periods relative to that at one sample (the time scale, which the
distribution lacks; a ratio that white measurement noise does not bias); and the total
delivered rate when the trace has one. `loss="auto"` adds the autocovariance whenever the
trace allows it. The loss is in packets^2 (packets of the scenario's size).

*Optimisation.* Each parameter is optimised in an unconstrained z with
theta = lo + (hi - lo) sigmoid(z) (log scale for g and init_cwnd), so every iterate of every
optimiser respects the bounds. Adam (optax, cosine-decayed step) runs on z from `starts` points
at once (`jax.vmap`): the scenario's values (or `initial`) and points perturbed by N(0, 1) in
z. Gradients are
forward-mode (`jax.jacfwd`) for up to four parameters, else reverse-mode
(`jax.value_and_grad`): forward mode costs a tangent per parameter but its memory does not grow
with the number of steps, reverse mode stores the whole scan (+200 MB for 24 000 steps of the
2-flow star).

*Fallback.* The solver is not differentiable everywhere: step marking 1{q > K} has zero
derivative in K, per-window reactions jump at steps that do not move with the parameters, and
the feedback delay is a whole number of steps, so autodiff returns a pathwise derivative that
holds those events fixed. The gradient is declared useless for a parameter when its component
is NaN, infinite or below 1e-8 of the loss per unit of z at every start (K's is exactly zero),
and for the gradient phase as a whole when Adam lowers the loss by less than 1 % or when a
finite-difference probe at Adam's best point (z +- 0.1 along each parameter) finds a point more
than 1 % better. Then scipy's Nelder-Mead (or Powell) minimises the same bounded objective over
all fitted parameters from the best `fallback_starts` points seen, with first steps of 0.5 in z
(an eighth of a mid-range parameter's range: wide enough to step over the plateaus of step
marking) for parameters the gradient did not move and 0.15 for those Adam brought close.
`CalibrationResult.optimiser` says per parameter which method moved it; if no point beats the
starting values (which may sit on a bound, where z cannot reach), they are returned.

*Uncertainty.* A sandwich estimate: a moving-block bootstrap of the trace's steady window (20
blocks, 200 resamples) gives the covariance S of its feature vector (sampling noise, keeping the
correlation between neighbouring samples and between neighbouring quantiles); central finite
differences at the optimum give the model's Jacobian J (the autodiff Jacobian is biased for the
reasons above); cov(theta) = s^2 J+ S J+^T, J+ the pseudo-inverse, with
s^2 = max(1, r.r / tr((I - J J+) S)) inflating it when the misfit r is larger than the trace's
sampling noise explains (model error, as scipy's curve_fit does without `absolute_sigma`).
Refitting every bootstrap resample would be more faithful but costs a calibration each. The
estimate covers the trace's sampling noise and misfit, not biases that fit well (a trace from a
finer or coarser time step, for instance: 2-3 % in g in the recovery test).

*Compilation.* Which parameters are fitted, their values, the trace's features and the windows
are all data of one jitted objective, so a program compiled for one calibration serves every
other with the same scenario shapes, grid, compared link, feature layout and number of fitted
parameters. The grid (the starting scenario's dt; a history long enough for the largest RTT the
bounds allow) is fixed before the first evaluation.

Limits and findings
-------------------
- One link's queue is compared; the model samples it instantaneously (a trace of interval
  averages has a narrower distribution).
- What a steady queue cannot tell: on the 2-flow DCTCP star, for g below about 0.08, alpha
  settles at the marking fraction whatever g is, so the queue (distribution and period) does not
  depend on g (within 0.1 packet); above, the per-window form switches between cycle regimes and
  the loss jumps. g is identifiable from the start-up (alpha starts at 1 and decays at g/R) or,
  in steady state, where it matters (large g); longer base RTT and larger g both deepen the
  troughs, which the autocorrelation (period) separates. init_cwnd only acts in the start-up.
  Unidentifiable parameters show as large uncertainties.
- The calibrated model runs at the starting scenario's dt; the written scenario recompiles with
  its own default dt unless `[run] dt` is set (the rerun's loss differs by 1 to 3 % on the
  hardware fits, below 0.5 % on the packet-level ones).
- What a fit of base_rtt and threshold removes, in the loss's parts (quantile offset
  mean(r)^2, quantile shape var(r), autocorrelation): the offset, and little else. Both truths
  below differ from the fluid model in the shape of the queue's distribution, which no
  parameter here controls; the case texts (`validation/cases/calibration.py`) give the
  physics.
- The hardware DCTCP trace (seed 003 star, 8 Hz samples: quantiles only): the default model's
  queue sits 0.36 packet high; loss 0.226 packets^2 = offset 0.111 + shape 0.115. The default
  budget gives K = 19.67 +- 0.39 packets of 1500 B (29.5 KB, 19.5 hardware frames: the switch
  marks a little earlier than "q > 20 packets") and no extra base RTT (0.009 +- 0.035 ms, at
  the bound), loss 0.105 packets^2 (2.2x lower; seeds 0-3: 0.104-0.105); what remains is the
  shape (the hardware's distribution is narrower: sd 1.11 vs 1.25 packets). The small budget
  of the tests stops at 0.123 (base RTT 0.11 +- 0.19 ms). Adding g adds a flat direction and
  the fit gets no better (it stopped at 0.13).
- The packet-level reference, 8:1 DCTCP incast at 1 Gb/s (K = 65 packets, trace 1 s at
  20 us: quantiles, autocovariance and rate): the default model's queue sits 1.7 packets high
  and swings less (sd 3.8 vs 5.8 packets); loss 8.1-9.7 packets^2 over packet seeds 1-6
  (seed 1: offset 2.7 + shape 3.2 + autocorrelation 2.2). The fit: K = 62.8-63.4 +- 0.7-0.8
  packets, extra base RTT at most 0.004 ms (at the bound), loss 4.2-5.6 packets^2 (1.6-2.0x
  lower): the offset goes, the autocorrelation falls to 1.3 (period 4.1 -> 4.0 ms, the
  packet run's is 3.8), the shape stays (3.5). The fluid sawtooth is narrower because its
  identical flows cut together and its rate W/R follows a window cut only as the queue
  drains; the packet-level ACK clock keeps the data in flight at the window. What would
  widen it, g = 0.1 (an 11 ms cycle) or 0.3 ms more base RTT (a 6.6 ms period), the
  autocorrelation rejects. With quantiles alone (`loss="quantiles"`, seed 1) the fit widens
  it with unphysical values: 0.42 ms more base RTT (6x the path's 0.067 ms; quantile loss
  5.9 -> 0.51 packets^2), or, fitting g and K, g = 0.0145 (0.29). On the seed 003 star
  against its packet-level trace (4 s at 100 us) the fluid queue is already centred (mean
  19.5 vs 20.0 packets) and the misfit is the packet queue's wider swing (sd 1.68 vs 1.27
  packets): K = 20.43 +- 0.18, no extra RTT, loss 0.91 -> 0.74 packets^2 (1.24x).
- A model-form difference no parameter represents: at the incast limit (80 flows at 10 Gb/s,
  `examples/incast_10g.toml`) the packet-level DCTCP windows stay at the 2-packet floor (queue
  140 packets: 80 x 2 less the 19-packet BDP), while the fluid windows grow between cuts
  (mean 2.76 packets, queue 200); ack_ratio at its bound 4 only brings the fluid median to
  156 packets.

Validation
----------
tests/test_calibration.py: recovery of base RTT and g (gradient phase) and of K (Nelder-Mead
fallback) from noisy fluid traces; bounds, the written scenario, the report and
parameter-name errors. Validation cases (`validation/cases/calibration.py`, run by
tests/test_validation.py and `pathflow validate`): `calibration_packet` (the 8:1 DCTCP incast
against the packet-level reference) and `calibration_hardware` (the seed 003 star against the
hardware trace): the loss at most the shift floor (the start's loss less its quantile
offset), the fitted K within a packet of K minus the start's mean offset, the extra base RTT
in a physical band, and the written scenario at its own dt keeping 90 % of the reduction.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import jax.numpy as jnp
import numpy as np
import optax
import scipy.optimize
import xarray as xr

from pathflow.compile import Compiled, compile_scenario
from pathflow.metrics import default_warmup
from pathflow.scenario import Scenario, load_scenario
from pathflow.solvers.problem import Grid
from pathflow.units import parse_rate, parse_time
from pathflow.validation import calibration_loss as cl

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

LossKind = Literal["auto", "quantiles", "moments", "quantiles+acf", "moments+acf"]
GradientMode = Literal["auto", "forward", "reverse"]
Fallback = Literal["nelder-mead", "powell"]


@dataclass(frozen=True)
class _Parameter:
    unit: str  # of the values the API takes and returns
    log: bool  # optimised on a log scale (spans orders of magnitude)
    meaning: str


PARAMETERS: dict[str, _Parameter] = {
    "base_rtt": _Parameter("s", False, "extra round-trip delay on every path"),
    "g": _Parameter("1", True, "DCTCP EWMA gain"),
    "threshold": _Parameter("pkt", False, "ECN step-marking threshold K"),
    "ack_ratio": _Parameter("1", False, "segments per window-increase event"),
    "init_cwnd": _Parameter("pkt", True, "initial window"),
    "capacity": _Parameter("1", False, "factor on every link's capacity"),
}
_NAMES = tuple(PARAMETERS)  # the order of calibration_loss.Data.fixed
_PROBE = 0.1  # z step of the finite-difference probe and Jacobian
_TINY_GRADIENT = 1e-8  # |dL/dz| below this times the loss counts as a vanished gradient
_PROGRESS = 0.01  # relative loss decrease that counts as progress
_STALL = 8  # Adam stops after this many steps without a 0.1 % improvement


def parse_fit(text: str | Sequence[str]) -> tuple[str, ...]:
    """'base_rtt,g' or ['base_rtt', 'g'] -> ('base_rtt', 'g'); a one-line ValueError naming an
    unknown parameter and the allowed ones."""
    names = [n.strip() for n in text.split(",")] if isinstance(text, str) else list(text)
    names = [n for n in names if n]
    if not names:
        raise ValueError(f"no parameter to fit; allowed: {', '.join(_NAMES)}")
    for name in names:
        if name not in PARAMETERS:
            raise ValueError(f"unknown calibration parameter {name!r}; allowed: "
                             f"{', '.join(_NAMES)}")
    if len(set(names)) != len(names):
        raise ValueError(f"a parameter is listed twice in fit: {', '.join(names)}")
    return tuple(names)


# --- the scenario's values and bounds -----------------------------------------------------------

def _marked_links(compiled: Compiled) -> np.ndarray:
    """Links with an ECN step marker (mark_min == mark_max finite, marking rather than dropping)."""
    threshold = getattr(compiled.problem.aqm, "threshold", None)
    if threshold is None:
        return np.zeros(compiled.problem.queues.capacity.shape[0], dtype=bool)
    return np.isfinite(np.asarray(threshold))


def _scenario_values(scenario: Scenario) -> dict[str, float]:
    packet = scenario.packet_bytes
    values = scenario.cc_values
    return {
        "base_rtt": 0.0,
        "g": float(values.get("g", math.nan)),
        "threshold": scenario.aqm_si.get("threshold", math.nan) / packet,
        "ack_ratio": float(values["ack_ratio"]),
        "init_cwnd": float(values["init_cwnd"]),
        "capacity": 1.0,
    }


def default_bounds(scenario: Scenario, name: str) -> tuple[float, float]:
    """The default bounds of one parameter for this scenario (see the module docstring)."""
    parse_fit([name])
    packet = scenario.packet_bytes
    if name == "base_rtt":
        return 0.0, 2e-3
    if name == "g":
        return 1 / 256, 1 / 2
    if name == "threshold":
        k = scenario.aqm_si.get("threshold", 20 * packet) / packet
        buffer = scenario.size(scenario.spec.topology.buffer, "topology.buffer") / packet
        return max(1.0, k / 4), max(min(4 * k, buffer - 1), k + 1)
    if name == "ack_ratio":
        return 1.0, 4.0
    if name == "init_cwnd":
        floor = float(scenario.cc_values["min_cwnd"])
        return floor, max(100.0, 2 * floor)
    return 0.8, 1.2


def _resolve_bounds(scenario: Scenario, names: Sequence[str],
                    bounds: Mapping[str, tuple[float, float]] | None
                    ) -> dict[str, tuple[float, float]]:
    given = dict(bounds or {})
    for name in given:
        if name not in PARAMETERS:
            raise ValueError(f"bounds for unknown calibration parameter {name!r}; allowed: "
                             f"{', '.join(_NAMES)}")
        if name not in names:
            raise ValueError(f"bounds given for {name!r}, which is not fitted "
                             f"(fit: {', '.join(names)})")
    out = {}
    for name in names:
        lo, hi = (float(v) for v in given.get(name, default_bounds(scenario, name)))
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise ValueError(f"bounds of {name!r}: need finite lower < upper, got [{lo}, {hi}]")
        if name == "base_rtt" and lo < 0:
            raise ValueError(f"bounds of 'base_rtt': the extra delay cannot be negative, got {lo}")
        if name == "ack_ratio" and lo < 1:
            raise ValueError(f"bounds of 'ack_ratio': lower bound must be >= 1, got {lo}")
        if name != "base_rtt" and lo <= 0:
            raise ValueError(f"bounds of {name!r}: lower bound must be > 0, got {lo}")
        if name == "g" and hi > 1:
            raise ValueError(f"bounds of 'g': upper bound must be <= 1, got {hi}")
        out[name] = (lo, hi)
    return out


def _check_applicable(scenario: Scenario, names: Sequence[str], compiled: Compiled) -> None:
    if "g" in names and "g" not in scenario.cc_values:
        raise ValueError(f"'g' applies to transport.cc = 'dctcp', not "
                         f"{scenario.spec.transport.cc!r}")
    if "threshold" in names and not _marked_links(compiled).any():
        raise ValueError(f"'threshold' applies to aqm.kind = 'ecn_step', not "
                         f"{scenario.spec.aqm.kind!r}")


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
    hops = np.asarray(compiled.problem.path_hops).ravel()
    crossings = np.bincount(hops[hops < len(names)], minlength=len(names)).astype(float)
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


# --- the trace ------------------------------------------------------------------------------------

# First bytes of what a user may pass as a trace. The loader goes by content, not suffix.
_NETCDF_HEADS = (b"\x89HDF\r\n\x1a\n", b"CDF\x01", b"CDF\x02", b"CDF\x05")
_CAPTURE_HEADS = tuple(bytes.fromhex(magic) for magic in (
    "a1b2c3d4", "d4c3b2a1", "a1b23c4d", "4d3cb2a1", "a1b2cd34", "34cdb2a1", "0a0d0d0a"))
_GZIP_HEAD = b"\x1f\x8b"
_WANTED = "a time,queue CSV (s, packets) or a netCDF result with 'queue' (pathflow, ns-3)"


def _load_trace(trace: xr.Dataset | str | Path) -> xr.Dataset:
    """A Dataset with `queue` (time, link): the Dataset itself, or a file told apart by its
    content: netCDF (a pathflow fluid or packet result, an ns-3 result), a packet capture
    (refused: it has no queue), else a `time,queue` CSV. Unreadable input raises TraceError
    naming the file."""
    if isinstance(trace, xr.Dataset):
        return trace
    from pathflow.validation.traces import TraceError, load_queue_trace

    path = Path(trace)
    try:
        with path.open("rb") as f:
            head = f.read(8)
    except FileNotFoundError:
        raise TraceError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise TraceError(f"{path}: is a directory, not a trace file") from None
    except OSError as error:
        raise TraceError(f"{path}: cannot read ({error.strerror or error})") from None
    if not head:
        raise TraceError(f"{path}: empty file (expected {_WANTED})")
    if head.startswith(_GZIP_HEAD):
        import gzip

        try:
            with gzip.open(path, "rb") as f:
                head = f.read(8)
        except (OSError, EOFError):
            head = b""
        if not head.startswith(_CAPTURE_HEADS):
            raise TraceError(f"{path}: gzip-compressed; decompress it (expected {_WANTED})")
    if head.startswith(_CAPTURE_HEADS):
        # A capture's timestamps give rates, not the switch's backlog: nothing to fit to.
        raise TraceError(f"{path}: a packet capture gives per-flow rates (traces.load_pcap) but "
                         f"no queue; calibration needs {_WANTED}")
    if head.startswith(_NETCDF_HEADS):
        return _load_netcdf_trace(path)
    if path.suffix.lower() in (".nc", ".netcdf", ".h5"):
        raise TraceError(f"{path}: not a netCDF file (first bytes 0x{head[:4].hex()})")
    return load_queue_trace(path)


def _load_netcdf_trace(path: Path) -> xr.Dataset:
    from pathflow.validation.traces import TraceError

    try:
        with xr.open_dataset(path) as opened:
            ds = opened.load()
    except Exception as error:  # the netCDF back ends raise many types; all mean "unreadable"
        text = " ".join(str(error).split())
        raise TraceError(f"{path}: cannot read netCDF ({type(error).__name__}: {text})"
                         ) from None
    if "queue" not in ds:
        variables = ", ".join(map(str, ds.data_vars)) or "none"
        raise TraceError(f"{path}: no 'queue' variable (variables: {variables}); expected "
                         f"{_WANTED}")
    if set(ds.queue.dims) != {"time", "link"}:
        raise TraceError(f"{path}: 'queue' has dimensions ({', '.join(map(str, ds.queue.dims))})"
                         "; expected (time, link), one run (a sweep has a 'flows' dimension)")
    return ds


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


# --- the objective --------------------------------------------------------------------------------

@dataclass
class Objective:
    """The bounded objective of one calibration (scenario, trace, fitted parameters), compiled
    once. With `task = objective(...)`, `task({"base_rtt": 3e-4})` is the loss there
    (packets^2; fitted parameters left out keep their starting values); `task.evaluate` takes
    the values in `names` order and also returns the residuals and the model's queue series."""

    scenario: Scenario
    names: tuple[str, ...]
    compiled: Compiled = field(repr=False)
    features: cl.Features
    data: cl.Data = field(repr=False)
    static: cl.Static = field(repr=False)
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
        value, residuals, series = cl.evaluate(jnp.asarray(theta, dtype=float), self.data,
                                               self.static)
        self.evaluations += 1
        self.history.append((self.evaluations + self.gradient_evaluations, float(value)))
        return float(value), np.asarray(residuals), np.asarray(series)

    def value_and_gradient(self, z: np.ndarray, mode: str) -> tuple[np.ndarray, np.ndarray]:
        """Losses and d loss / dz for a batch of unconstrained points (S, n)."""
        values, grads = cl.value_and_gradient(jnp.asarray(z, dtype=float), self.data,
                                              self.static, mode)
        self.gradient_evaluations += z.shape[0]
        values = np.asarray(values)
        self.history.append((self.evaluations + self.gradient_evaluations,
                             float(np.nanmin(values))))
        return values, np.asarray(grads)

    def theta_of(self, z: np.ndarray) -> np.ndarray:
        return np.asarray(cl.theta_from_z(jnp.asarray(z, dtype=float), self.data))

    def z_of(self, theta: np.ndarray) -> np.ndarray:
        return cl.z_from_theta(np.asarray(theta, dtype=float), self.lower, self.upper, self.log)


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
    if loss not in cl.LOSSES:
        raise ValueError(f"unknown loss {loss!r}; allowed: {', '.join(cl.LOSSES)}")
    names = parse_fit(fit)
    if not isinstance(scenario, Scenario):
        scenario = load_scenario(scenario)
    trace_name = (str(trace.attrs.get("engine", "trace")) if isinstance(trace, xr.Dataset)
                  else Path(trace).name)
    trace_ds = _load_trace(trace)
    limits = _resolve_bounds(scenario, names, bounds)
    run_scenario = scenario
    if duration is not None:
        seconds = parse_time(duration, "duration") if isinstance(duration, str) else duration
        run_scenario = scenario.with_updates({"run.duration": f"{float(seconds):.12g}s"})
    compiled = compile_scenario(run_scenario)
    _check_applicable(scenario, names, compiled)
    run_length = run_scenario.duration
    if warmup is None:
        text = run_scenario.spec.run.warmup
        cut = parse_time(text, "run.warmup") if text else 0.25 * run_length
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
    packet = scenario.packet_bytes
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
        lags, trace_interval, note = cl.choose_lags(trace_time, trace_queue, window / 4)
        if note is not None and loss != "auto":
            raise ValueError(f"loss {loss!r}: no autocorrelation to compare, {note}")
    use_rate = trace_rate is not None and rate_weight > 0
    rate_norm = float(np.mean(trace_rate)) if use_rate and trace_rate is not None else 1.0
    relative_rate = trace_rate / rate_norm if use_rate and trace_rate is not None else None
    features = cl.Features(
        distribution=distribution, levels=tuple(level_array.tolist()), lags=lags,
        interval=trace_interval, acf_scale=acf_weight * float(np.std(trace_queue)),
        rate_scale=(rate_weight * math.sqrt(level_array.size if distribution == "quantiles"
                                            else 2) if use_rate else 0.0))
    target = cl.trace_features(trace_queue, relative_rate, features)
    positions = np.array(lags, dtype=float) * trace_interval / model_interval if lags else (
        np.zeros(0))

    start_values = _scenario_values(scenario)
    for name, value in (initial or {}).items():
        if name not in names:  # a value that is not fitted would not reach the written scenario
            raise ValueError(f"initial value for {name!r}, which is not fitted "
                             f"(fit: {', '.join(names)}); set it in the scenario instead")
        start_values[name] = float(value)
    n = len(names)
    select = np.zeros((len(_NAMES), n))
    select[[_NAMES.index(name) for name in names], np.arange(n)] = 1.0
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
    data = cl.Data(
        problem=compiled.problem, packet=jnp.asarray(packet), fixed=jnp.asarray(fixed),
        select=jnp.asarray(select), lower=jnp.asarray(lower), upper=jnp.asarray(upper),
        log=jnp.asarray(log), marked=jnp.asarray(_marked_links(compiled)),
        real=jnp.asarray(real), first=jnp.asarray(first, dtype=jnp.int32),
        levels=jnp.asarray(level_array), lag_position=jnp.asarray(positions),
        acf_scale=jnp.asarray(features.acf_scale),
        rate_factor=jnp.asarray(features.rate_scale / rate_norm), target=jnp.asarray(target),
    )
    acf_lags = math.ceil(positions.max()) + 1 if lags else 0
    static = cl.Static(compiled.physics, grid, link_index, distribution, acf_lags, use_rate)
    return Objective(
        scenario=scenario, names=names, compiled=compiled, features=features, data=data,
        static=static, start=start, lower=lower, upper=upper, log=log, model_time=model_time,
        warmup=cut, trace_name=trace_name, trace_time=trace_time, trace_queue=trace_queue,
        trace_rate=relative_rate, trace_warmup=trace_cut, target=target,
        acf_note=note,
    )


# --- the calibration ------------------------------------------------------------------------------

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
        result), a `time,queue` CSV (packets of 1514 B, `validation.traces`) or a netCDF file
        (files are told apart by content; a packet capture is refused: it has no queue).
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
    covariance = cl.bootstrap_covariance(task.trace_queue, task.trace_rate, task.features, rng)
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
    """Standard deviations from s^2 J+ S J+^T (see the module docstring), s^2 and cond(J)."""
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


# --- results --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class FittedParameter:
    """One fitted parameter (values in `unit`, see `PARAMETERS`)."""

    name: str
    value: float
    std: float  # one standard deviation (sandwich with a block bootstrap; module docstring)
    initial: float  # the starting value, where "loss before" is taken
    lower: float
    upper: float
    unit: str
    optimiser: str  # "adam", "nelder-mead", "powell", "adam + nelder-mead", ...

    @property
    def at_bound(self) -> bool:
        """Within 1 % of the range from a bound (the bound may be what limits the fit)."""
        width = self.upper - self.lower
        return min(self.value - self.lower, self.upper - self.value) < 0.01 * width


@dataclass
class CalibrationResult:
    """Fitted values, losses, effort, and the material for the report and the plot."""

    scenario: Scenario  # the starting scenario
    trace_name: str
    link: str  # the compared model link
    parameters: dict[str, FittedParameter]
    loss: str  # the features compared, e.g. "quantiles" or "quantiles+acf"
    compared: str  # the same in words, with why the autocorrelation is left out if it is
    loss_before: float  # packets^2, at the starting values
    loss_after: float
    loss_gradient: float  # the best loss of the gradient phase (before any fallback)
    evaluations: int  # simulations without gradient
    gradient_evaluations: int  # simulations with gradient (each start of a batch counts)
    seconds: float
    gradient: str  # "forward", "reverse" or "none" (no parameter had a gradient)
    fallback_reason: str | None  # why the derivative-free method ran (None: it did not)
    kept_start: bool  # no point beat the starting values, which are returned
    inflation: float  # s^2 of the sandwich (1: the misfit is what the trace's noise explains)
    condition: float  # condition number of the finite-difference Jacobian
    dt: float
    base_rtt: tuple[float, float]  # s, smallest and largest path base RTT with the fit
    warmup: float  # s, start of the model's compared window
    trace_warmup: float  # s, start of the trace's compared window
    levels: np.ndarray
    trace_time: np.ndarray = field(repr=False)
    trace_queue: np.ndarray = field(repr=False)  # packets, compared window
    model_time: np.ndarray = field(repr=False)
    model_before: np.ndarray = field(repr=False)  # packets, the whole run
    model_after: np.ndarray = field(repr=False)
    target: np.ndarray = field(repr=False)  # the trace's features
    summary_before: np.ndarray = field(repr=False)  # the model's features
    summary_after: np.ndarray = field(repr=False)
    history: list[tuple[int, float]] = field(default_factory=list, repr=False)

    @property
    def values(self) -> dict[str, float]:
        return {name: p.value for name, p in self.parameters.items()}

    @property
    def optimiser(self) -> dict[str, str]:
        return {name: p.optimiser for name, p in self.parameters.items()}

    def to_scenario(self) -> Scenario:
        """The starting scenario with the fitted values written in (`_scenario_updates`)."""
        return self.scenario.with_updates(_scenario_updates(self.scenario, self.values))

    def write_toml(self, path: str | Path) -> Path:
        """The fitted scenario as TOML, headed by comments with the fit."""
        path = Path(path)
        lines = [f"# calibrated by pathflow.validation.calibration against {self.trace_name}",
                 f"# loss ({self.loss}, packets^2): {self.loss_before:.4g} -> "
                 f"{self.loss_after:.4g}"]
        lines += [f"# {p.name} = {_show(p.value, p.unit)} +- {_show(p.std, p.unit)} "
                  f"({p.optimiser})" for p in self.parameters.values()]
        path.write_text("\n".join(lines) + "\n" + self.to_scenario().to_toml())
        return path

    def report(self) -> str:
        """Markdown: the parameter table, losses, effort and how the uncertainty was found."""
        rows = ["| parameter | unit | start | fitted | +- 1 sd | bounds | optimiser |",
                "|---|---|---|---|---|---|---|"]
        for p in self.parameters.values():
            unit = "ms" if p.unit == "s" else p.unit
            flag = " (at bound)" if p.at_bound else ""
            rows.append(f"| {p.name} | {unit} | {_show(p.initial, p.unit, False)} | "
                        f"{_show(p.value, p.unit, False)}{flag} | {_show(p.std, p.unit, False)} "
                        f"| [{_show(p.lower, p.unit, False)}, {_show(p.upper, p.unit, False)}] "
                        f"| {p.optimiser} |")
        drop = self.loss_before / self.loss_after if self.loss_after > 0 else math.inf
        low, high = (v * 1e3 for v in self.base_rtt)
        base = f"{low:.3g} ms" if math.isclose(low, high) else f"{low:.3g} to {high:.3g} ms"
        lines = [
            f"## Calibration of {self.scenario.name} against {self.trace_name}",
            "",
            *rows,
            "",
            f"- loss ({self.loss}, queue of {self.link}, packets^2): {self.loss_before:.4g} "
            f"before, {self.loss_after:.4g} after ({drop:.3g}x lower)",
            f"- compared: {self.compared}",
            f"- path base RTT with the fit: {base}",
            f"- simulations: {self.evaluations} plain + {self.gradient_evaluations} with "
            f"gradient ({self.gradient} mode), {self.seconds:.1f} s in all",
            f"- gradient phase (Adam): loss {self.loss_gradient:.4g}; derivative-free "
            f"fallback: {self.fallback_reason or 'not needed'}"
            + ("; no point beat the starting values, which are kept" if self.kept_start else ""),
            "- uncertainty: finite-difference Jacobian (condition "
            f"{self.condition:.3g}) with the block-bootstrap covariance of the trace's features, "
            f"inflated by {math.sqrt(self.inflation):.3g} for misfit beyond sampling noise",
        ]
        if self.loss.startswith("quantiles"):
            lines += ["", "| quantile | trace | before | after |", "|---|---|---|---|"]
            for wanted in (0.05, 0.25, 0.5, 0.75, 0.95):
                i = int(np.argmin(np.abs(self.levels - wanted)))
                lines.append(f"| {self.levels[i]:.2f} | {self.target[i]:.2f} | "
                             f"{self.summary_before[i]:.2f} | {self.summary_after[i]:.2f} |")
        return "\n".join(lines) + "\n"

    def plot(self, path: str | Path | None = None) -> Any:
        """Trace and model (before, after): queue time series and distributions. A matplotlib
        Figure (no pyplot), written to `path` when given."""
        from matplotlib.figure import Figure

        fig = Figure(figsize=(12, 7))
        grid = fig.add_gridspec(2, 2)
        top, middle = fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[1, 0])
        right = fig.add_subplot(grid[:, 1])
        # a dense trace is shown over as long a stretch as the model's window, a sparse one whole
        span = self.model_time[-1] - self.warmup
        shown = self.trace_time < self.trace_time[0] + span
        if shown.sum() < 100:
            shown[:] = True
        top.plot(self.trace_time[shown], self.trace_queue[shown], ".-", lw=0.4, ms=2,
                 color="black")
        top.set_title(f"trace: {self.trace_name}", fontsize=9)
        top.set_ylabel("queue (packets)")
        top.set_xlabel("time (s)")
        middle.plot(self.model_time * 1e3, self.model_before, lw=0.8, color="tab:blue",
                    label="model before")
        middle.plot(self.model_time * 1e3, self.model_after, lw=0.8, color="tab:red",
                    label="model after")
        middle.axvline(self.warmup * 1e3, color="grey", ls=":", lw=0.8)
        middle.set_ylabel("queue (packets)")
        middle.set_xlabel("model time (ms); dotted: start of the compared window")
        middle.legend(loc="upper right", fontsize=8)
        window = self.model_time > self.warmup
        for values, color, label in ((self.trace_queue, "black", "trace"),
                                     (self.model_before[window], "tab:blue", "model before"),
                                     (self.model_after[window], "tab:red", "model after")):
            ordered = np.sort(values)
            right.plot(ordered, (np.arange(ordered.size) + 0.5) / ordered.size, color=color,
                       lw=1.2, label=label)
        if self.loss.startswith("quantiles"):
            right.plot(self.target[: self.levels.size], self.levels, "ko", ms=3,
                       label="trace quantiles (fitted)")
        right.set_xlabel("queue (packets)")
        right.set_ylabel("fraction of samples at or below")
        right.legend(loc="lower right", fontsize=8)
        fitted = ", ".join(f"{p.name} = {_show(p.value, p.unit)}"
                           for p in self.parameters.values())
        fig.suptitle(f"{self.scenario.name}: loss {self.loss_before:.3g} -> "
                     f"{self.loss_after:.3g} packets^2 ({fitted})", fontsize=10)
        fig.tight_layout()
        if path is not None:
            fig.savefig(Path(path), dpi=120)
        return fig


def _show(value: float, unit: str, with_unit: bool = True) -> str:
    if not math.isfinite(value):
        return str(value)
    if unit == "s":
        return f"{value * 1e3:.4g}" + (" ms" if with_unit else "")
    if unit == "1" or not with_unit:
        return f"{value:.4g}"
    return f"{value:.4g} {unit}"


def _scenario_updates(scenario: Scenario, values: Mapping[str, float]) -> dict[str, Any]:
    """Scenario keys for fitted values. The vocabulary has no key for an extra host delay, so
    base_rtt becomes +extra/2 one-way delay on every sending host's egress link (every path
    starts there, and a link's delay counts twice in a path's base RTT, so every path's base
    RTT grows by exactly `extra`), written as exact-name [[topology.links]] overrides that
    restate the link's rate and buffer (an override of a graph-file edge replaces all of its
    columns). The capacity factor scales topology.link_rate and every override's rate (every
    link of a graph topology gets an override)."""
    updates: dict[str, Any] = {}
    spec = scenario.spec
    if "g" in values:
        updates["transport.g"] = float(values["g"])
    if "ack_ratio" in values:
        updates["transport.ack_ratio"] = float(values["ack_ratio"])
    if "init_cwnd" in values:
        updates["transport.init_cwnd"] = f"{values['init_cwnd']:.8g}pkt"
    if "threshold" in values:
        updates["aqm.threshold"] = f"{values['threshold']:.8g}pkt"
    if "capacity" not in values and "base_rtt" not in values:
        return updates
    scale = float(values.get("capacity", 1.0))
    extra = float(values.get("base_rtt", 0.0))
    compiled = compile_scenario(scenario)
    overrides = [o.model_dump(exclude_none=True) for o in spec.topology.links]
    rewrite: set[str] = set()
    if "capacity" in values:
        if spec.topology.kind == "graph":  # per-edge rates live in the graph file
            rewrite = {link.name for link in compiled.network.links}
        else:
            rate = parse_rate(spec.topology.link_rate, "topology.link_rate")
            updates["topology.link_rate"] = _rate_text(rate * scale)
            for override in overrides:
                if "link_rate" in override:
                    rate = parse_rate(override["link_rate"], "topology.links.link_rate")
                    override["link_rate"] = _rate_text(rate * scale)
    sources = {flow.src for flow in compiled.routes.flows}
    delayed = ({link.name for link in compiled.network.links if link.src in sources}
               if extra > 0 else set())
    for link in compiled.network.links:
        if link.name in rewrite or link.name in delayed:
            delay = link.delay + (extra / 2 if link.name in delayed else 0.0)
            overrides.append({"match": link.name, "link_rate": _rate_text(link.capacity * scale),
                              "delay": f"{delay * 1e6:.10g}us", "buffer": f"{link.buffer:.10g}B"})
    updates["topology.links"] = overrides
    return updates


def _rate_text(bytes_per_s: float) -> str:
    return f"{bytes_per_s * 8:.10g}bps"
