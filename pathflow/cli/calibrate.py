"""`pathflow calibrate`: fluid-model parameters fitted to a queue trace; the options naming
parameter values (--bounds, --initial) and the printed summary of the fit."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from pathflow.cli.console import (
    Threads,
    check_figure,
    check_writable,
    console,
    errors,
    fail,
    setup_jax,
    user_errors,
    write_output,
)
from pathflow.cli.progress import spinner
from pathflow.scenario import load_scenario
from pathflow.units import UnitError, format_time, parse_size, parse_time

if TYPE_CHECKING:
    from pathflow.validation.calibration import CalibrationResult

_TARGETS_HELP = "max_buffer_after_5s_bytes or queue_max_bytes, avg_latency_us or latency_us"
_TABLE_FIT_HELP = ("kmin, kmax (B: DCQCN marking), pmax, cnp_capacity (CNPs per us at the "
                   "receiving NIC), base_rtt (s)")
_FIT_HELP = ("base_rtt (s: extra round trip on every path), g (DCTCP gain), threshold (pkt: ECN "
             "step K), ack_ratio, init_cwnd (pkt), capacity (factor on every link)")


def _parameters(table: bool) -> dict[str, str]:
    """Name -> unit of the parameters --fit may name (a table calibration has its own)."""
    if table:
        from pathflow.validation.calibration.table import TABLE_PARAMETERS

        return {name: p.unit for name, p in TABLE_PARAMETERS.items()}
    from pathflow.validation.calibration import PARAMETERS

    return {name: p.unit for name, p in PARAMETERS.items()}


def _names_to_fit(fit: str | None, parse: Callable[[str], tuple[str, ...]],
                  allowed: Iterable[str]) -> tuple[str, ...]:
    """The parameters --fit names, or a one-line error naming the allowed ones."""
    if fit is None:
        fail(f"--fit: name the parameters to fit, comma-separated; allowed: "
             f"{', '.join(allowed)}")
    try:
        return parse(fit)
    except ValueError as error:
        fail(f"--fit: {error}")


def _parameter_value(name: str, text: str, option: str, packet: float, unit: str) -> float:
    """A value of a calibration parameter: a plain number in its unit (see --fit), or a
    quantity where the parameter has a dimension ('0.5ms' for base_rtt, '30KB' for threshold
    or kmax)."""
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        pass
    field = f"{option} {name}"
    if unit == "s":
        return parse_time(text, field)
    if unit == "pkt":
        return parse_size(text, packet, field) / packet
    if unit == "B":
        return parse_size(text, packet, field)
    raise UnitError(f"{field}: {text!r} is not a number ({name} is in {unit})")


def _named_values(items: Sequence[str], option: str, syntax: str, fit: Sequence[str],
                  units: dict[str, str]) -> Iterator[tuple[str, str, str]]:
    """NAME=REST items of a repeatable option -> (item, name, rest), checked against --fit."""
    seen: set[str] = set()
    for item in items:
        name, equals, rest = (part.strip() for part in item.partition("="))
        if not equals or not name or not rest:
            raise UnitError(f"{option}: expected {syntax}, got {item!r}")
        if name not in units:
            raise UnitError(f"{option}: unknown calibration parameter {name!r}; allowed: "
                            f"{', '.join(units)}")
        if name not in fit:
            raise UnitError(f"{option}: {name!r} is not fitted (--fit {','.join(fit)})")
        if name in seen:
            raise UnitError(f"{option}: {name!r} given twice")
        seen.add(name)
        yield item, name, rest


def _parse_bounds(items: Sequence[str], fit: Sequence[str], packet: float,
                  units: dict[str, str]) -> dict[str, tuple[float, float]]:
    syntax = "NAME=LOW:HIGH (e.g. threshold=10:30, base_rtt=0:1ms, kmax=50KB:2MB)"
    out = {}
    for item, name, rest in _named_values(items, "--bounds", syntax, fit, units):
        low, colon, high = rest.partition(":")
        if not colon or not low.strip() or not high.strip():
            raise UnitError(f"--bounds: expected {syntax}, got {item!r}")
        out[name] = (_parameter_value(name, low, "--bounds", packet, units[name]),
                     _parameter_value(name, high, "--bounds", packet, units[name]))
    return out


def _parse_initial(items: Sequence[str], fit: Sequence[str], packet: float,
                   units: dict[str, str]) -> dict[str, float]:
    syntax = "NAME=VALUE (e.g. threshold=18, base_rtt=0.2ms, kmax=200KB)"
    return {name: _parameter_value(name, rest, "--initial", packet, units[name])
            for _, name, rest in _named_values(items, "--initial", syntax, fit, units)}


def _quantity(value: float, unit: str, digits: int = 4) -> str:
    """A parameter value for the table (base_rtt in ms, as the markdown report)."""
    if not math.isfinite(value):
        return str(value)
    return f"{value * (1e3 if unit == 's' else 1):.{digits}g}"


def _calibration_summary(result: CalibrationResult, fallback: str) -> None:
    console.print(f"[bold]{result.scenario.name}[/bold] against {result.trace_name}: queue of "
                  f"{result.link}, model dt = {format_time(result.dt)}", soft_wrap=True)
    table = Table(title="Fitted parameters (* at a bound)", title_justify="left")
    for column in ("parameter", "unit", "fitted", "± 1 sd", "bounds", "start", "optimiser"):
        table.add_column(column, justify="right" if column in ("fitted", "± 1 sd", "start")
                         else "left", overflow="fold")
    for p in result.parameters.values():
        table.add_row(p.name, "ms" if p.unit == "s" else p.unit,
                      _quantity(p.value, p.unit) + ("*" if p.at_bound else ""),
                      _quantity(p.std, p.unit, 2),
                      f"[{_quantity(p.lower, p.unit)}, {_quantity(p.upper, p.unit)}]",
                      _quantity(p.initial, p.unit), p.optimiser)
    console.print(table)
    before, after = result.loss_before, result.loss_after
    change = (f"{100 * (1 - after / before):.0f} % lower" if before > 0 and after < before
              else "no point beat the starting values, which are kept")
    lines = [
        f"Loss: {before:.4g} pkt^2 before, {after:.4g} pkt^2 after ({change})",
        f"Compared: {result.compared}",
    ]
    if "base_rtt" in result.parameters:
        low, high = result.base_rtt
        span = format_time(low) if math.isclose(low, high) else (
            f"{format_time(low)} to {format_time(high)}")
        lines.append(f"Path base RTT with the fit: {span} (base_rtt is the extra part)")
    lines += [
        f"Effort: {result.evaluations} simulations + {result.gradient_evaluations} with "
        + (f"gradient ({result.gradient} mode)" if result.gradient != "none"
           else "gradient (none usable)")
        + f" in {format_time(result.seconds)}; {fallback} fallback: "
        f"{result.fallback_reason or 'not needed'}",
    ]
    unidentified = [p.name for p in result.parameters.values() if not math.isfinite(p.std)]
    if unidentified:
        lines.append(f"Uncertainty: none; not identifiable from this trace: "
                     f"{', '.join(unidentified)} (the loss does not change along it)")
    else:
        lines.append("Uncertainty: block bootstrap of the trace through a finite-difference "
                     f"Jacobian (condition {result.condition:.3g}), "
                     f"x{math.sqrt(result.inflation):.3g} for misfit beyond sampling noise")
    for line in lines:
        console.print(line, markup=False, highlight=False, soft_wrap=True)


def calibrate(
    scenario_file: Annotated[Path, typer.Argument(metavar="SCENARIO.toml",
                                                  help="Starting scenario (see run --help).")],
    trace: Annotated[Path, typer.Argument(metavar="TRACE", help=(
        "Measured or simulated queue: a time,queue CSV (s, packets of 1514 B), or a netCDF "
        "result with 'queue' (pathflow run -o, either engine; an ns-3 result). Or a table of "
        "per-N summaries: a CSV with a 'flows' column and target columns "
        f"({_TARGETS_HELP}), fitted by sweeping traffic.flows over its rows."))],
    fit: Annotated[str | None, typer.Option("--fit", metavar="NAME[,NAME...]", help=(
        f"Parameters to fit: {_FIT_HELP}. Against a table: {_TABLE_FIT_HELP}."))] = None,
    output: Annotated[Path | None, typer.Option("-o", "--output", help=(
        "The scenario with the fitted values, as TOML (default: "
        "<SCENARIO stem>_fitted.toml here)."))] = None,
    plot: Annotated[Path | None, typer.Option("--plot", help=(
        "PNG of trace and model, before and after (default: OUTPUT with .png)."))] = None,
    report: Annotated[Path | None, typer.Option("--report", metavar="FILE", help=(
        "Also write the markdown report."))] = None,
    bounds: Annotated[list[str] | None, typer.Option("--bounds", metavar="NAME=LOW:HIGH", help=(
        "Bounds of a fitted parameter, in its unit or with one (base_rtt=0:1ms, threshold="
        "10:30); repeatable; default: per parameter, from the scenario."))] = None,
    initial: Annotated[list[str] | None, typer.Option("--initial", metavar="NAME=VALUE", help=(
        "Starting value of a fitted parameter (default: the scenario's); repeatable."))
                       ] = None,
    loss: Annotated[str, typer.Option("--loss", metavar="KIND", help=(
        "Features compared: auto (quantiles, plus the autocorrelation when the trace resolves "
        "the oscillation), quantiles, moments, quantiles+acf, moments+acf."))] = "auto",
    link: Annotated[str | None, typer.Option("--link", metavar="NAME", help=(
        "Model link compared with the trace (default: the trace's link name, else the switch "
        "link most paths cross)."))] = None,
    trace_link: Annotated[str | None, typer.Option("--trace-link", metavar="NAME", help=(
        "Link of a multi-link trace (default: its busiest)."))] = None,
    duration: Annotated[str | None, typer.Option("--duration", metavar="TIME", help=(
        "Simulated time per evaluation, e.g. 0.5s (default: the scenario's run.duration)."))
                        ] = None,
    warmup: Annotated[str | None, typer.Option("--warmup", metavar="TIME", help=(
        "Start of the model's compared window (default: run.warmup, else a quarter of the "
        "duration)."))] = None,
    trace_warmup: Annotated[str | None, typer.Option("--trace-warmup", metavar="TIME", help=(
        "Start of the trace's compared window, in the trace's time, e.g. 10s (default: a "
        "quarter of its time span)."))] = None,
    starts: Annotated[int, typer.Option("--starts", help=(
        "Adam's starting points (the first at the starting values)."))] = 4,
    steps: Annotated[int, typer.Option("--steps", help="Adam steps at most.")] = 40,
    fallback: Annotated[str, typer.Option("--fallback", metavar="nelder-mead|powell", help=(
        "Derivative-free method for parameters without a usable gradient."))] = "nelder-mead",
    fallback_starts: Annotated[int, typer.Option("--fallback-starts", help=(
        "Points the fallback starts from."))] = 2,
    fallback_evaluations: Annotated[int, typer.Option("--fallback-evaluations", help=(
        "Simulations per fallback start at most."))] = 60,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the perturbed starts and the "
                                      "bootstrap.")] = 0,
    targets: Annotated[str | None, typer.Option("--targets", metavar="COLUMN[,COLUMN...]", help=(
        "Table only: the target columns compared (default: every known one it has)."))] = None,
    max_evaluations: Annotated[int, typer.Option("--max-evaluations", help=(
        "Table only: sweeps at most (Nelder-Mead; each sweep runs every row)."))] = 60,
    predict: Annotated[Path | None, typer.Option("--predict", metavar="TABLE", help=(
        "Table only: after the fit, predict this table without refitting and print its "
        "errors."))] = None,
    predict_cc: Annotated[str | None, typer.Option("--predict-cc", metavar="CC", help=(
        "Table only: the transport.cc of the prediction, e.g. dcqcn+static (default: the "
        "scenario's)."))] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress lines.")] = False,
    threads: Threads = 1,
) -> None:
    """Fit fluid-model parameters of a scenario to a measured (or simulated) queue trace; print
    the fitted values with their uncertainty and the loss before and after; write the fitted
    scenario (TOML, to rerun with pathflow run), a plot and optionally a report. Takes tens of
    seconds to minutes: each step simulates the scenario for --duration. Given a table of per-N
    summaries (a CSV with a 'flows' column), each step sweeps traffic.flows over its rows
    instead, and --predict runs another table with the fitted values."""
    with user_errors(scenario_file):
        from pathflow.validation.calibration.table import is_table

        if is_table(trace):
            given = {"--loss": loss != "auto", "--link": link is not None,
                     "--trace-link": trace_link is not None,
                     "--trace-warmup": trace_warmup is not None}
            for option, used in given.items():
                if used:
                    fail(f"{option}: applies to a queue trace, not a table of per-N summaries "
                         f"({trace})")
            _calibrate_table(scenario_file, trace, fit, output, plot, report, bounds, initial,
                             duration, warmup, targets, max_evaluations, predict, predict_cc,
                             quiet, threads)
            return
        for option, used in (("--targets", targets is not None),
                             ("--predict", predict is not None),
                             ("--predict-cc", predict_cc is not None)):
            if used:
                fail(f"{option}: applies to a table of per-N summaries (a CSV with a 'flows' "
                     f"column), not to the queue trace {trace}")
        # checked here, in seconds, so that bad input never waits for a calibration
        from pathflow.validation.calibration import PARAMETERS, parse_fit
        from pathflow.validation.calibration.loss import LOSSES

        names = _names_to_fit(fit, parse_fit, PARAMETERS)
        if loss not in LOSSES:
            fail(f"--loss: unknown loss {loss!r}; allowed: {', '.join(LOSSES)}")
        if fallback not in ("nelder-mead", "powell"):
            fail(f"--fallback: unknown method {fallback!r}; allowed: nelder-mead, powell")
        for option, value, least in (("--starts", starts, 1), ("--steps", steps, 0),
                                     ("--fallback-starts", fallback_starts, 1),
                                     ("--fallback-evaluations", fallback_evaluations, 1)):
            if value < least:
                fail(f"{option}: must be >= {least}, got {value}")
        scenario = load_scenario(scenario_file)
        packet = scenario.packet_bytes
        units = _parameters(table=False)
        limits = _parse_bounds(bounds or [], names, packet, units)
        starting = _parse_initial(initial or [], names, packet, units)
        seconds = parse_time(duration, "--duration", allow_zero=False) if duration else None
        cut = parse_time(warmup, "--warmup") if warmup else None
        trace_cut = parse_time(trace_warmup, "--trace-warmup") if trace_warmup else None
        output = output or Path(f"{scenario_file.stem}_fitted.toml")
        plot = plot or output.with_suffix(".png")
        for path, option in ((output, "--output"), (report, "--report")):
            check_writable(path, option)
        check_figure(plot, "--plot")
        edges = scenario.spec.topology.edges
        if edges and not Path(edges).is_absolute():
            # the fitted file may land elsewhere; its graph must still be found
            scenario = scenario.with_updates(
                {"topology.edges": str((scenario.base_dir / edges).resolve())})
        setup_jax(threads)
        from pathflow.validation.calibration import calibrate as fit_trace

        started = False
        clock = time.perf_counter()
        with spinner(f"calibrating {scenario.name}", quiet) as phase:
            def say(message: str) -> None:
                nonlocal started
                started = True
                if not quiet:
                    elapsed = format_time(time.perf_counter() - clock)
                    errors.print(f"[{elapsed}] {message}", markup=False, highlight=False,
                                 soft_wrap=True)
                phase(escape(f"calibrating {scenario.name}: "
                             f"{message.split(';')[0].split(':')[0]}"))

            try:
                result = fit_trace(
                    scenario, str(trace), names, link=link, trace_link=trace_link,
                    bounds=limits, initial=starting, starts=starts, steps=steps,
                    loss=loss, duration=seconds, warmup=cut,  # type: ignore[arg-type]
                    trace_warmup=trace_cut, fallback=fallback,  # type: ignore[arg-type]
                    fallback_starts=fallback_starts, fallback_evaluations=fallback_evaluations,
                    seed=seed, progress=say)
            except ValueError as error:
                # calibrate checks its input (trace, bounds, links, applicability) before its
                # first progress line; a ValueError after that is a fault, not bad input
                if started:
                    raise
                fail(str(error))
        _calibration_summary(result, fallback)
        write_output(output, "--output", result.write_toml)
        write_output(plot, "--plot", result.plot)
        if report is not None:
            write_output(report, "--report", lambda path: path.write_text(result.report()))


def _calibrate_table(scenario_file: Path, trace: Path, fit: str | None, output: Path | None,
                     plot: Path | None, report: Path | None, bounds: list[str] | None,
                     initial: list[str] | None, duration: str | None, warmup: str | None,
                     targets: str | None, max_evaluations: int, predict: Path | None,
                     predict_cc: str | None, quiet: bool, threads: int) -> None:
    """`pathflow calibrate` against a table of per-N summaries (issue 10): the fit, its
    per-row errors, optionally the prediction of another table; bad input exits with one
    line before any sweep runs."""
    from pathflow.validation.calibration.table import (
        TABLE_PARAMETERS,
        calibrate_table,
        check_table_applicable,
        load_table,
        parse_table_fit,
        predict_table,
    )

    names = _names_to_fit(fit, parse_table_fit, TABLE_PARAMETERS)
    if max_evaluations < 1:
        fail(f"--max-evaluations: must be >= 1, got {max_evaluations}")
    columns = [c.strip() for c in targets.split(",") if c.strip()] if targets else None
    try:
        table = load_table(trace, columns)
        other = load_table(predict, columns if columns else None) if predict else None
    except ValueError as error:
        fail(str(error))
    scenario = load_scenario(scenario_file)
    units = _parameters(table=True)
    limits = _parse_bounds(bounds or [], names, scenario.packet_bytes, units)
    starting = _parse_initial(initial or [], names, scenario.packet_bytes, units)
    try:
        check_table_applicable(scenario, names)
        if predict_cc:
            scenario.with_cc(predict_cc)  # a cc it cannot switch to: refused before any sweep
    except ValueError as error:
        fail(str(error))
    if predict_cc and not predict:
        fail("--predict-cc: name the table to predict with --predict")
    seconds = parse_time(duration, "--duration", allow_zero=False) if duration else None
    cut = parse_time(warmup, "--warmup") if warmup else None
    output = output or Path(f"{scenario_file.stem}_fitted.toml")
    plot = plot or output.with_suffix(".png")
    for path, option in ((output, "--output"), (report, "--report")):
        check_writable(path, option)
    check_figure(plot, "--plot")
    setup_jax(threads)
    started = False
    clock = time.perf_counter()

    def say(message: str) -> None:
        nonlocal started
        started = True
        if not quiet:
            errors.print(f"[{format_time(time.perf_counter() - clock)}] {message}",
                         markup=False, highlight=False, soft_wrap=True)

    try:
        result = calibrate_table(scenario, table, names, bounds=limits, initial=starting,
                                 duration=seconds, warmup=cut,
                                 max_evaluations=max_evaluations, progress=say)
    except ValueError as error:
        if started:  # checked input raises before the first sweep; later it is a fault
            raise
        fail(str(error))
    lines = result.lines()
    if other is not None:
        say(f"predicting {other.name}" + (f" with transport.cc = {predict_cc}"
                                          if predict_cc else "") + " (no refit)")
        comparison = predict_table(result.fitted_scenario, other, result.offset, predict_cc)
        lines += [f"Prediction of {other.name}" + (f" (transport.cc = {predict_cc})"
                                                  if predict_cc else "") + ", nothing refitted:"]
        lines += comparison.lines()
    for line in lines:
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    write_output(output, "--output", result.write_toml)
    write_output(plot, "--plot", result.plot)
    if report is not None:
        write_output(report, "--report", lambda path: path.write_text("\n".join(lines) + "\n"))
