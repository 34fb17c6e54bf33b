"""The `pathflow` command: run a scenario, sweep flow counts.

Errors in the user's input print one line naming the field and what is allowed, and exit with
code 2; nothing already computed is lost (a sweep writes its finished points before it stops).
"""

from __future__ import annotations

import math
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from pathflow import __version__
from pathflow.scenario import REFERENCE, Scenario, ScenarioError, load_scenario
from pathflow.units import (
    UnitError,
    format_bytes,
    format_rate,
    format_time,
    parse_size,
    parse_time,
)

if TYPE_CHECKING:
    from pathflow.cost import Cost
    from pathflow.validation.calibration import CalibrationResult

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  pretty_exceptions_enable=False,
                  help="pathflow: fluid-model congestion-control analysis (DCTCP, Reno) over "
                       "multipath networks, solved with JAX; a packet-level reference "
                       "simulator; calibration against measured queues.")
console = Console()
errors = Console(stderr=True)


def _version(value: bool) -> None:
    if value:
        console.print(f"pathflow {__version__}")
        raise typer.Exit()


@app.callback()
def _main(version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                                 help="Print the version and exit.")] = False
          ) -> None:
    """pathflow: fluid-model congestion-control analysis over multipath networks."""


def _fail(message: str) -> None:
    errors.print(f"error: {message}", markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(2)


@contextmanager
def _user_errors() -> Iterator[None]:
    """Bad input -> one line on stderr and exit code 2, never a traceback."""
    try:
        yield
    except (ScenarioError, UnitError) as error:
        _fail(str(error))


def _check_writable(path: Path | None, option: str) -> None:
    """Refuse an output path before the work starts, not after."""
    if path is None:
        return
    if not path.resolve().parent.is_dir():
        raise ScenarioError(f"{option}: directory {str(path.parent)!r} does not exist")
    if path.is_dir():
        raise ScenarioError(f"{option}: {str(path)!r} is a directory, not a file")
    if not os.access(path.resolve().parent, os.W_OK) or (path.exists()
                                                         and not os.access(path, os.W_OK)):
        raise ScenarioError(f"{option}: {str(path)!r} is not writable (permission denied)")


def _write(path: Path, option: str, write: Callable[[Path], object]) -> None:
    """Write an output; a failure at the end (disk full, a directory removed meanwhile) is one
    line, like any other bad input."""
    try:
        write(path)
    except OSError as error:
        _fail(f"{option}: cannot write {str(path)!r} ({error.strerror or error})")
    console.print(f"wrote {path}", markup=False, highlight=False)


def _setup_jax(threads: int) -> None:
    """Persistent compilation cache, and the CPU threads XLA may use. A fluid step is many small
    kernels; handing them between threads costs more than it saves (measured 2.5x slower per
    step with two threads than with one on the DCTCP star; see benchmarks/README.md), so the
    command runs on one CPU unless told otherwise. Must run before JAX's first operation."""
    import jax

    if threads > 0 and hasattr(os, "sched_setaffinity"):
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, set(cpus[:threads]))
    cache = Path.home() / ".cache" / "pathflow" / "jax"
    try:
        cache.mkdir(parents=True, exist_ok=True)
        jax.config.update("jax_compilation_cache_dir", str(cache))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)
    except OSError:
        pass  # a read-only home: run without the persistent cache


Threads = Annotated[int, typer.Option("--threads", min=0, help="CPUs for the solver (0: all). "
                                      "One is fastest for most fluid runs.")]


Yes = Annotated[bool, typer.Option("--yes", "-y", help=(
    "Start without asking when the estimated time is above an hour (without a terminal to "
    "ask on, such a run is refused unless --yes is given)."))]
MaxMemory = Annotated[str | None, typer.Option("--max-memory", metavar="SIZE", help=(
    "Refuse to start when the estimated memory exceeds SIZE, e.g. 8GB (default: the memory "
    "available now)."))]


def _plain_progress(description: str) -> Callable[[float, float], None]:
    """Progress for a log or a pipe: a line each time another tenth of the work is done."""
    from pathflow.cost import duration

    clock = time.perf_counter()
    shown = 0

    def update(done: float, total: float) -> None:
        nonlocal shown
        fraction = min(1.0, done / total) if total > 0 else 1.0
        tenth = math.floor(fraction * 10 + 1e-9)
        if tenth <= shown:
            return
        shown = tenth
        elapsed = time.perf_counter() - clock
        left = "" if fraction >= 1 else (
            f", about {duration(elapsed * (1 - fraction) / fraction)} left")
        errors.print(f"{description}: {round(100 * fraction)} % (elapsed {duration(elapsed)}"
                     f"{left})", markup=False, highlight=False, soft_wrap=True)

    return update


@contextmanager
def _progress(description: str, quiet: bool) -> Iterator[Callable[[float, float], None]]:
    """A progress bar on a terminal, a line per 10 % otherwise. The bar appears with the first
    update, so whatever runs before it (the cost line, a question) prints undisturbed."""
    if quiet:
        yield lambda done, total: None
        return
    if not errors.is_terminal:
        yield _plain_progress(description)
        return
    columns = (TextColumn("{task.description}"), BarColumn(),
               TextColumn("{task.percentage:>3.0f}%"), TimeElapsedColumn(), TimeRemainingColumn())
    bar = Progress(*columns, console=errors, transient=True)
    task = bar.add_task(description, total=1.0)

    def update(done: float, total: float) -> None:
        if not bar.live.is_started:
            bar.start()
        bar.update(task, completed=done, total=total)

    try:
        yield update
    finally:
        bar.stop()


@contextmanager
def _preparing(description: str, quiet: bool) -> Iterator[Callable[[], None]]:
    """While a scenario is compiled (networks, routes, arrays; minutes for a k = 32 fat-tree): a
    spinner on a terminal; otherwise one line, if it takes more than two seconds. The yielded
    function ends it early."""
    if quiet:
        yield lambda: None
        return
    if not errors.is_terminal:
        from threading import Timer

        timer = Timer(2.0, lambda: errors.print(f"{description} ...", markup=False,
                                                highlight=False, soft_wrap=True))
        timer.daemon = True
        timer.start()
        try:
            yield timer.cancel
        finally:
            timer.cancel()
        return
    spinner = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                       console=errors, transient=True)
    spinner.add_task(escape(description), total=None)
    spinner.start()
    try:
        yield spinner.stop
    finally:
        spinner.stop()


def _interactive() -> bool:
    """Whether a question can be asked (standard input is a terminal)."""
    return sys.stdin.isatty()


def _before_running(cost: Cost, what: str, quiet: bool, yes: bool, max_memory: str | None
                    ) -> None:
    """Refuse what cannot fit in memory, state the cost, and ask before what is estimated above
    an hour (refuse it without a terminal unless --yes)."""
    from pathflow.cost import CONFIRM_SECONDS, available_memory, check_memory, describe

    if max_memory is not None:
        limit = parse_size(max_memory, 1.0, "--max-memory")
        check_memory(cost, limit, what, "the limit (--max-memory)")
    else:
        check_memory(cost, available_memory(), what, "available (--max-memory to change)")
    line = f"{what}: {describe(cost)}"
    long = cost.seconds > CONFIRM_SECONDS
    if long and not yes and not _interactive():
        _fail(f"{line}, above an hour; pass --yes to start it anyway (or a larger run.dt, a "
              "shorter run.duration)")
    if not quiet:
        errors.print(line, markup=False, highlight=False, soft_wrap=True)
    if long and not yes and not typer.confirm("Above an hour. Start it?", default=False,
                                              err=True):
        _fail("not started; pass --yes to start without asking")


@contextmanager
def _spinner(description: str, quiet: bool) -> Iterator[Callable[[str], None]]:
    """For work without a fraction done (a packet simulation, a calibration's phases): a spinner
    with the elapsed time; the yielded function names the current phase."""
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    with Progress(*columns, console=errors, transient=True, disable=quiet) as bar:
        task = bar.add_task(description, total=None)

        def phase(text: str) -> None:
            bar.update(task, description=text)

        yield phase


def _summary_table(ds: object, scenario: Scenario) -> None:
    from pathflow.metrics import summarize

    summary = summarize(ds)  # type: ignore[arg-type]
    packet = scenario.packet_bytes
    rates = summary["throughput"]
    flows = Table(title="Flows (steady window)", title_justify="left")
    for column in ("flow", "src -> dst", "throughput"):
        flows.add_column(column, justify="right" if column == "throughput" else "left",
                         overflow="fold")
    shown = range(min(len(rates), 10))
    for i in shown:
        flows.add_row(str(i), f"{ds.src.values[i]} -> {ds.dst.values[i]}",  # type: ignore[attr-defined]
                      format_rate(float(rates[i])))
    if len(rates) > 10:
        flows.add_row("...", f"{len(rates)} flows", f"min {format_rate(float(rates.min()))}, "
                      f"max {format_rate(float(rates.max()))}")
    flows.add_row("all", f"Jain {summary['jain']:.4f}",
                  format_rate(summary["aggregate_throughput"]), style="bold")
    console.print(flows)
    links = Table(title="Busiest links (steady window)", title_justify="left")
    for column in ("link", "utilization", "queue mean", "p99", "max", "drops"):
        links.add_column(column, justify="left" if column == "link" else "right", overflow="fold")
    hot, queues = summary["hotspots"], summary["queues"]
    for i, name in enumerate(hot.link.values):
        def pk(value: float) -> str:
            return f"{value / packet:.1f} pkt"

        links.add_row(str(name), f"{float(hot.utilization[i]):.1%}",
                      pk(float(queues["mean"][i])), pk(float(queues["p99"][i])),
                      pk(float(queues["max"][i])), format_rate(float(hot.drops[i])))
    console.print(links)
    convergence = summary["convergence"]
    settled = (f"settled after {format_time(convergence['time'])}" if convergence["settled"]
               else "did not settle within the run")
    console.print(f"Convergence: {settled} (rates within 10 %, queue on {convergence['link']} "
                  "within a band)")
    report = summary["invariants"]
    broken = [f"{name}: {v['detail']}" for name, v in report.items() if not v["ok"]]
    verdict = "all hold" if not broken else "VIOLATED: " + "; ".join(broken)
    console.print(f"Invariants ({', '.join(report)}): {verdict}")


ENGINES = ("fluid", "packet")


@app.command(epilog=REFERENCE)
def run(
    scenario_file: Annotated[Path, typer.Argument(metavar="SCENARIO.toml",
                                                  help="Scenario file (keys below).")],
    output: Annotated[Path | None, typer.Option("-o", "--output",
                                                help="Write the result Dataset (netCDF).")] = None,
    plot: Annotated[Path | None, typer.Option("--plot", help="Write a PNG of queues and rates.")
                    ] = None,
    engine: Annotated[str, typer.Option("--engine", metavar="fluid|packet", help=(
        "fluid: the JAX fluid model; packet: the packet-level reference simulator (numba; "
        "every packet, so far slower on fast links and long runs). Same results Dataset."))
                      ] = "fluid",
    check_dt: Annotated[bool, typer.Option("--check-dt", help="Also run at a fixed half of the "
                                           "finest step and report whether the results agree "
                                           "(fluid only).")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No cost line and no progress.")
                     ] = False,
    yes: Yes = False,
    max_memory: MaxMemory = None,
    threads: Threads = 1,
) -> None:
    """Simulate a scenario with the fluid model (default) or the packet-level reference
    simulator (--engine packet); print per-flow throughput, the busiest links' queues,
    convergence time and the invariant verdict; optionally write the Dataset and a plot.
    Before a fluid run starts, one line states its steps, memory and estimated time."""
    with _user_errors():
        if engine not in ENGINES:
            _fail(f"--engine: unknown engine {engine!r}; allowed: {', '.join(ENGINES)}")
        if check_dt and engine != "fluid":
            _fail(f"--check-dt: applies to --engine fluid only (the {engine} simulator has no "
                  "time step to halve)")
        scenario = load_scenario(scenario_file)
        _check_writable(output, "--output")
        _check_writable(plot, "--plot")
        _setup_jax(threads)
        from pathflow.results import write_dataset

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if engine == "fluid":
                from pathflow.compile import compile_scenario
                from pathflow.cost import estimate
                from pathflow.simulate import simulate

                with _preparing(f"preparing {scenario.name}", quiet):
                    compiled = compile_scenario(scenario)
                _before_running(estimate(compiled, check_dt), scenario.name, quiet, yes,
                                max_memory)
                with _progress(f"simulating {scenario.name}", quiet) as update:
                    ds = simulate(scenario, progress=update, check_dt=check_dt,
                                  compiled=compiled)
            else:
                from pathflow.validation.packet import simulate_packets

                with _spinner(f"simulating the packets of {scenario.name}", quiet):
                    ds = simulate_packets(scenario)
        for warning in caught:
            errors.print(f"warning: {warning.message}", markup=False, highlight=False)
        if engine == "fluid":
            finest, coarsest = float(ds.dt.min()), float(ds.dt.max())
            how = (f"fluid model, dt = {format_time(finest)}" if coarsest <= finest * (1 + 1e-9)
                   else f"fluid model, dt = {format_time(finest)} to {format_time(coarsest)} "
                        "following the round trips")
        else:
            how = (f"packet simulator, {ds.attrs['packet_hops']:,} packet hops in "
                   f"{format_time(ds.attrs['wall_time_s'])}, sampled every "
                   f"{format_time(ds.attrs['sample_interval'])}")
        console.print(f"[bold]{scenario.name}[/bold]: {len(ds.flow)} flows, {len(ds.link)} links, "
                      f"{format_time(float(ds.time[-1]))} simulated ({how})")
        _summary_table(ds, scenario)
        if output is not None:
            _write(output, "--output", lambda path: write_dataset(ds, str(path)))
        if plot is not None:
            from pathflow.plots import plot_run

            _write(plot, "--plot", lambda path: plot_run(ds, path))


def _default_sweep_scenario() -> Scenario:
    text = resources.files("pathflow").joinpath("scenarios/incast_10g.toml").read_text()
    return Scenario.from_toml(text)


@app.command()
def sweep(
    scenario_file: Annotated[Path | None, typer.Argument(
        metavar="[SCENARIO.toml]",
        help="Scenario to sweep (default: a built-in N:1 DCTCP incast at 10 Gb/s).")] = None,
    flows: Annotated[str, typer.Option("--flows", help="START:STOP[:STEP] flow counts "
                                       "(default 25 points between START and STOP).")] = "80:2000",
    output: Annotated[Path, typer.Option("-o", "--output", help="Result Dataset (netCDF), "
                                         "written after every batch.")] = Path("sweep.nc"),
    plot: Annotated[Path | None, typer.Option("--plot", help="PNG of queue and convergence time "
                                              "versus flows (default: OUTPUT with .png).")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No cost line and no progress.")
                     ] = False,
    yes: Yes = False,
    max_memory: MaxMemory = None,
    threads: Threads = 1,
) -> None:
    """Run a scenario for many flow counts, batched (one compiled program per size bucket).
    Before it starts, one line states its steps, memory and estimated time."""
    with _user_errors():
        from pathflow.results import write_dataset
        from pathflow.sweep import parse_flow_range, sweep_flows

        counts = parse_flow_range(flows)
        scenario = load_scenario(scenario_file) if scenario_file else _default_sweep_scenario()
        plot = plot or output.with_suffix(".png")
        _check_writable(output, "--output")
        _check_writable(plot, "--plot")
        _setup_jax(threads)
        saved: list[object] = []

        def save(partial: object) -> None:
            write_dataset(partial, str(output))  # type: ignore[arg-type]
            saved.append(partial)

        what = f"sweeping {scenario.name} over {len(counts)} flow counts"
        try:
            with _preparing(f"preparing {len(counts)} points of {scenario.name}", quiet) as done, \
                    _progress(what, quiet) as update:
                def before_run(points: list) -> None:
                    from pathflow.cost import estimate_sweep

                    done()
                    _before_running(estimate_sweep(points), scenario.name, quiet, yes,
                                    max_memory)

                result = sweep_flows(scenario, counts, progress=update, on_chunk=save,
                                     before_run=before_run)
        except KeyboardInterrupt:
            if saved:
                errors.print(f"interrupted: {len(saved[-1].flows)} finished points kept in "  # type: ignore[attr-defined]
                             f"{output}")
            raise typer.Exit(130) from None
        from pathflow.plots import plot_sweep

        table = Table(title=f"{scenario.name}: sweep over flows", title_justify="left")
        for column in ("flows", "throughput", "Jain", "queue mean", "p99", "max", "converged"):
            table.add_column(column, justify="right")
        for i, n in enumerate(result.flows.values):
            conv = float(result.convergence_time[i])
            table.add_row(str(n), format_rate(float(result.aggregate_throughput[i])),
                          f"{float(result.jain[i]):.3f}",
                          format_bytes(float(result.queue_mean[i])),
                          format_bytes(float(result.queue_p99[i])),
                          format_bytes(float(result.queue_max[i])),
                          format_time(conv) if math.isfinite(conv) else "no")
        console.print(table)
        plot_sweep(result, plot)
        console.print(f"wrote {output} and {plot}")


@app.command()
def validate(
    fast: Annotated[bool, typer.Option("--fast", help="Only the fast cases (a few minutes; "
                                       "no ns-3).")] = False,
    case: Annotated[list[str] | None, typer.Option("--case", help="Run only this case "
                                                   "(repeatable).")] = None,
    output: Annotated[Path, typer.Option("-o", "--output", help="Markdown report; PNGs go in a "
                                         "folder of the same name, the table also as .nc.")
                      ] = Path("validation.md"),
    threads: Threads = 1,
) -> None:
    """Run the registered validation cases (closed forms, measured data, ns-3, the packet-level
    reference, calibration) and write the report: case, quantity, reference, pathflow value,
    error, tolerance, pass. Exit code 1 if a check fails."""
    with _user_errors():
        _check_writable(output, "--output")
        _setup_jax(threads)
        from pathflow.validation.report import amount, run_cases, tally, verdict, write_report

        def announce(item: object) -> None:
            errors.print(f"running {item.name}: {item.title}", highlight=False)  # type: ignore[attr-defined]

        try:
            results = run_cases(fast=fast, names=case, progress=announce)
        except ValueError as error:
            _fail(str(error))
        write_report(results, output)
        table = Table(title="Validation", title_justify="left")
        for column in ("case", "quantity", "reference", "pathflow", "error", "tolerance", "pass"):
            table.add_column(column, overflow="fold")
        checks = [(c.name, check) for c, result, _ in results for check in result.checks]
        for name, check in checks:
            table.add_row(name, check.quantity, f"{check.reference:.4g} {check.unit}",
                          f"{check.value:.4g} {check.unit}",
                          amount(check.error, check.scale, check.unit),
                          amount(check.tolerance, check.scale, check.unit),
                          verdict(check))
        console.print(table)
        console.print(f"{tally([check for _, check in checks])}; wrote {output}")
        if any(check.claimed and not check.passed for _, check in checks):
            raise typer.Exit(1)


_FIT_HELP = ("base_rtt (s: extra round trip on every path), g (DCTCP gain), threshold (pkt: ECN "
             "step K), ack_ratio, init_cwnd (pkt), capacity (factor on every link)")


def _parameter_value(name: str, text: str, option: str, packet: float) -> float:
    """A value of a calibration parameter: a plain number in its unit (see --fit), or a
    quantity where the parameter has a dimension ('0.5ms' for base_rtt, '30KB' for threshold)."""
    from pathflow.validation.calibration import PARAMETERS

    text = text.strip()
    try:
        return float(text)
    except ValueError:
        pass
    unit = PARAMETERS[name].unit
    field = f"{option} {name}"
    if unit == "s":
        return parse_time(text, field)
    if unit == "pkt":
        return parse_size(text, packet, field) / packet
    raise UnitError(f"{field}: {text!r} is not a number ({name} is dimensionless)")


def _named_values(items: Sequence[str], option: str, syntax: str, fit: Sequence[str]
                  ) -> Iterator[tuple[str, str, str]]:
    """NAME=REST items of a repeatable option -> (item, name, rest), checked against --fit."""
    from pathflow.validation.calibration import PARAMETERS

    seen: set[str] = set()
    for item in items:
        name, equals, rest = (part.strip() for part in item.partition("="))
        if not equals or not name or not rest:
            raise UnitError(f"{option}: expected {syntax}, got {item!r}")
        if name not in PARAMETERS:
            raise UnitError(f"{option}: unknown calibration parameter {name!r}; allowed: "
                            f"{', '.join(PARAMETERS)}")
        if name not in fit:
            raise UnitError(f"{option}: {name!r} is not fitted (--fit {','.join(fit)})")
        if name in seen:
            raise UnitError(f"{option}: {name!r} given twice")
        seen.add(name)
        yield item, name, rest


def _parse_bounds(items: Sequence[str], fit: Sequence[str], packet: float
                  ) -> dict[str, tuple[float, float]]:
    syntax = "NAME=LOW:HIGH (e.g. threshold=10:30, base_rtt=0:1ms)"
    out = {}
    for item, name, rest in _named_values(items, "--bounds", syntax, fit):
        low, colon, high = rest.partition(":")
        if not colon or not low.strip() or not high.strip():
            raise UnitError(f"--bounds: expected {syntax}, got {item!r}")
        out[name] = (_parameter_value(name, low, "--bounds", packet),
                     _parameter_value(name, high, "--bounds", packet))
    return out


def _parse_initial(items: Sequence[str], fit: Sequence[str], packet: float) -> dict[str, float]:
    syntax = "NAME=VALUE (e.g. threshold=18, base_rtt=0.2ms)"
    return {name: _parameter_value(name, rest, "--initial", packet)
            for _, name, rest in _named_values(items, "--initial", syntax, fit)}


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


@app.command()
def calibrate(
    scenario_file: Annotated[Path, typer.Argument(metavar="SCENARIO.toml",
                                                  help="Starting scenario (see run --help).")],
    trace: Annotated[Path, typer.Argument(metavar="TRACE", help=(
        "Measured or simulated queue: a time,queue CSV (s, packets of 1514 B), or a netCDF "
        "result with 'queue' (pathflow run -o, either engine; an ns-3 result)."))],
    fit: Annotated[str | None, typer.Option("--fit", metavar="NAME[,NAME...]", help=(
        f"Parameters to fit: {_FIT_HELP}."))] = None,
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
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress lines.")] = False,
    threads: Threads = 1,
) -> None:
    """Fit fluid-model parameters of a scenario to a measured (or simulated) queue trace; print
    the fitted values with their uncertainty and the loss before and after; write the fitted
    scenario (TOML, to rerun with pathflow run), a plot and optionally a report. Takes tens of
    seconds to minutes: each step simulates the scenario for --duration."""
    with _user_errors():
        # checked here, in seconds, so that bad input never waits for a calibration
        from pathflow.validation.calibration import PARAMETERS, parse_fit
        from pathflow.validation.calibration_loss import LOSSES

        if fit is None:
            _fail(f"--fit: name the parameters to fit, comma-separated; allowed: "
                  f"{', '.join(PARAMETERS)}")
        try:
            names = parse_fit(fit)
        except ValueError as error:
            _fail(f"--fit: {error}")
        if loss not in LOSSES:
            _fail(f"--loss: unknown loss {loss!r}; allowed: {', '.join(LOSSES)}")
        if fallback not in ("nelder-mead", "powell"):
            _fail(f"--fallback: unknown method {fallback!r}; allowed: nelder-mead, powell")
        for option, value, least in (("--starts", starts, 1), ("--steps", steps, 0),
                                     ("--fallback-starts", fallback_starts, 1),
                                     ("--fallback-evaluations", fallback_evaluations, 1)):
            if value < least:
                _fail(f"{option}: must be >= {least}, got {value}")
        scenario = load_scenario(scenario_file)
        packet = scenario.packet_bytes
        limits = _parse_bounds(bounds or [], names, packet)
        starting = _parse_initial(initial or [], names, packet)
        seconds = parse_time(duration, "--duration", allow_zero=False) if duration else None
        cut = parse_time(warmup, "--warmup") if warmup else None
        trace_cut = parse_time(trace_warmup, "--trace-warmup") if trace_warmup else None
        output = output or Path(f"{scenario_file.stem}_fitted.toml")
        plot = plot or output.with_suffix(".png")
        for path, option in ((output, "--output"), (plot, "--plot"), (report, "--report")):
            _check_writable(path, option)
        edges = scenario.spec.topology.edges
        if edges and not Path(edges).is_absolute():
            # the fitted file may land elsewhere; its graph must still be found
            scenario = scenario.with_updates(
                {"topology.edges": str((scenario.base_dir / edges).resolve())})
        _setup_jax(threads)
        from pathflow.validation.calibration import calibrate as fit_trace

        started = False
        clock = time.perf_counter()
        with _spinner(f"calibrating {scenario.name}", quiet) as phase:
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
                _fail(str(error))
        _calibration_summary(result, fallback)
        _write(output, "--output", result.write_toml)
        _write(plot, "--plot", result.plot)
        if report is not None:
            _write(report, "--report", lambda path: path.write_text(result.report()))


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
