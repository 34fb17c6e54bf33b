"""What a table calibration returns: the model against a table row by row (`Comparison`, with
its errors), the fitted parameters (`TableFit`), the fitted scenario as TOML, a text report and
the figure of measured against modelled values versus N."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from pathflow.scenario import Scenario

__all__ = ["Comparison", "TableFit", "TableParameterFit", "comparison_figure"]

_LABELS = {"queue_max": "maximum buffer after warm-up (KB)", "latency": "mean latency (us)"}
_DISPLAY = {"queue_max": 1e-3, "latency": 1e6}  # SI -> KB, us


@dataclass(frozen=True)
class Comparison:
    """The model against one table: values per row in SI units (bytes, seconds)."""

    table: str
    flows: np.ndarray
    measured: dict[str, np.ndarray]  # target column -> values
    model: dict[str, np.ndarray]
    quantities: dict[str, str]  # target column -> "queue_max" | "latency"
    offset: float  # s: the latency's fixed part (NaN without a latency column)

    def ratio(self, column: str) -> np.ndarray:
        """Model / measured per row."""
        return self.model[column] / self.measured[column]

    def rms_log_error(self, column: str) -> float:
        """Root mean square of log(model / measured): exp of it is a typical factor."""
        return float(np.sqrt(np.mean(np.log(self.ratio(column)) ** 2)))

    def worst_factor(self, column: str) -> float:
        """max(model/measured, measured/model) over the rows."""
        return float(np.exp(np.max(np.abs(np.log(self.ratio(column))))))

    def median_relative_error(self, column: str) -> float:
        return float(np.median(np.abs(self.ratio(column) - 1)))

    def lines(self) -> list[str]:
        """The per-row table and the summary, as text."""
        columns = list(self.measured)
        head = f"{'N':>5}" + "".join(
            f"  {c[:24]:>24} {'model':>9} {'ratio':>6}" for c in columns)
        out = [head]
        for i, n in enumerate(self.flows):
            row = f"{int(n):>5}"
            for c in columns:
                scale = _DISPLAY[self.quantities[c]]
                row += (f"  {self.measured[c][i] * scale:>24.4g} {self.model[c][i] * scale:>9.4g}"
                        f" {self.ratio(c)[i]:>6.2f}")
            out.append(row)
        for c in columns:
            out.append(f"{c}: rms log-error {self.rms_log_error(c):.3f} (typical factor "
                       f"{math.exp(self.rms_log_error(c)):.2f}), worst factor "
                       f"{self.worst_factor(c):.2f}, median |relative error| "
                       f"{self.median_relative_error(c):.0%}")
        if math.isfinite(self.offset):
            out.append(f"latency = {self.offset * 1e6:.2f} us + mean queue / C")
        return out


@dataclass(frozen=True)
class TableParameterFit:
    """One fitted parameter (values in `unit`: B, 1, 1/us or s)."""

    name: str
    value: float
    initial: float
    lower: float
    upper: float
    unit: str

    @property
    def at_bound(self) -> bool:
        """Within 1 % of the range from a bound (log range for the positive parameters)."""
        if self.lower > 0:
            lo, hi, v = (math.log(x) for x in (self.lower, self.upper, self.value))
        else:
            lo, hi, v = self.lower, self.upper, self.value
        return min(v - lo, hi - v) < 0.01 * (hi - lo)

    def text(self, value: float | None = None) -> str:
        value = self.value if value is None else value
        if self.unit == "B":
            return f"{value / 1e3:.4g} KB"
        if self.unit == "s":
            return f"{value * 1e6:.4g} us"
        if self.unit == "1/us":
            return f"{value:.4g} per us"
        return f"{value:.4g}"


@dataclass
class TableFit:
    """A table calibration: fitted values, losses, effort, the model before and after."""

    scenario: Scenario  # the starting scenario, as given
    run_scenario: Scenario  # with the evaluation's run.duration and run.warmup
    fitted_scenario: Scenario  # run_scenario with the fitted values
    table: str
    parameters: dict[str, TableParameterFit]
    loss_before: float  # sum over targets of the mean squared log-error
    loss_after: float
    before: Comparison
    after: Comparison
    evaluations: int  # sweeps run
    seconds: float
    history: list[tuple[dict[str, float], float]] = field(default_factory=list, repr=False)

    @property
    def values(self) -> dict[str, float]:
        return {name: p.value for name, p in self.parameters.items()}

    @property
    def offset(self) -> float:
        """The fitted latency offset (s)."""
        return self.after.offset

    def lines(self) -> list[str]:
        out = [f"{self.scenario.name} against {self.table}: {self.evaluations} sweeps of "
               f"{len(self.after.flows)} flow counts in {self.seconds:.0f} s "
               f"(run {self.run_scenario.si.run.duration * 1e3:g} ms, statistics after "
               f"{(self.run_scenario.si.run.warmup or 0) * 1e3:g} ms)"]
        for p in self.parameters.values():
            out.append(f"  {p.name:<13} {p.text():>14}{'*' if p.at_bound else ' '}  (start "
                       f"{p.text(p.initial)}, bounds [{p.text(p.lower)}, {p.text(p.upper)}])")
        out.append(f"Loss (sum of mean squared log-errors): {self.loss_before:.4g} before, "
                   f"{self.loss_after:.4g} after (* at a bound)")
        return out + self.after.lines()

    def write_toml(self, path: Path) -> None:
        path.write_text(f"# {self.scenario.name} calibrated against {self.table} "
                        f"(pathflow calibrate, table): {', '.join(self.parameters)}; latency "
                        f"offset {self.offset * 1e6:.4g} us\n" + self.fitted_scenario.to_toml())

    def plot(self, path: Path) -> None:
        comparison_figure([self.after], [f"{self.table} (fit)"],
                          title=f"{self.scenario.name}: table calibration").savefig(path, dpi=120)


def comparison_figure(comparisons: Sequence[Comparison], labels: Sequence[str],
                      title: str = "", criterion: float | None = 200e3) -> Figure:
    """Measured (markers) and model (lines) against N, one panel per quantity, log y; the
    criterion (bytes) marked on the buffer panel."""
    quantities = [q for q in ("queue_max", "latency")
                  if any(q in c.quantities.values() for c in comparisons)]
    fig = Figure(figsize=(5.2 * len(quantities), 4.2), layout="constrained")
    axes = fig.subplots(1, len(quantities), squeeze=False)[0]
    colors = ("#d62728", "#1f77b4", "#2ca02c", "#9467bd")
    for ax, quantity in zip(axes, quantities, strict=True):
        for k, (c, label) in enumerate(zip(comparisons, labels, strict=True)):
            column = next((col for col, q in c.quantities.items() if q == quantity), None)
            if column is None:
                continue
            scale, color = _DISPLAY[quantity], colors[k % len(colors)]
            ax.plot(c.flows, c.measured[column] * scale, "o", color=color,
                    label=f"{label}: measured")
            ax.plot(c.flows, c.model[column] * scale, "-", color=color,
                    label=f"{label}: fluid model")
        if quantity == "queue_max" and criterion is not None:
            ax.axhline(criterion * 1e-3, color="gray", ls="--", lw=1,
                       label=f"{criterion / 1e3:g} KB: not converged above")
        ax.set_yscale("log")
        ax.set_xlabel("flows N")
        ax.set_ylabel(_LABELS[quantity])
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    if title:
        fig.suptitle(title)
    return fig
