"""What a calibration returns: the fitted parameters with their uncertainty, the losses and
effort, and the fitted scenario as TOML, a markdown report and a plot."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pathflow.scenario import Scenario
from pathflow.validation.calibration.parameters import scenario_updates

__all__ = ["CalibrationResult", "FittedParameter"]


@dataclass(frozen=True)
class FittedParameter:
    """One fitted parameter (values in `unit`, see `PARAMETERS`)."""

    name: str
    value: float
    std: float  # one standard deviation (sandwich with a block bootstrap: fit._sandwich)
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
        """The starting scenario with the fitted values written in (`scenario_updates`)."""
        return self.scenario.with_updates(scenario_updates(self.scenario, self.values))

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
