"""The `pathflow` command: run a scenario, sweep flow counts.

Errors in the user's input print one line naming the field and what is allowed, and exit with
code 2; nothing already computed is lost (a sweep writes its finished points before it stops).
"""

from __future__ import annotations

import math
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from pathflow import __version__
from pathflow.scenario import REFERENCE, Scenario, ScenarioError, load_scenario
from pathflow.units import UnitError, format_bytes, format_rate, format_time

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  pretty_exceptions_enable=False,
                  help="pathflow: fluid-model congestion-control analysis (DCTCP, Reno) over "
                       "multipath networks, solved with JAX.")
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
    if path is not None and not path.resolve().parent.is_dir():
        raise ScenarioError(f"{option}: directory {str(path.parent)!r} does not exist")


def _setup_jax(threads: int) -> None:
    """Persistent compilation cache, and the CPU threads XLA may use. A fluid step is many small
    kernels; handing them between threads costs more than it saves (measured 2.5x slower per
    step with two threads than with one on the DCTCP star; see benchmarks/README.md), so the
    command runs on one CPU unless told otherwise. Must run before JAX's first operation."""
    import os

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


@contextmanager
def _progress(description: str, quiet: bool) -> Iterator[Callable[[float, float], None]]:
    columns = (TextColumn("{task.description}"), BarColumn(),
               TextColumn("{task.percentage:>3.0f}%"), TimeElapsedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=errors, transient=True, disable=quiet) as bar:
        task = bar.add_task(description, total=1.0)

        def update(done: float, total: float) -> None:
            bar.update(task, completed=done, total=total)

        yield update


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


@app.command(epilog=REFERENCE)
def run(
    scenario_file: Annotated[Path, typer.Argument(metavar="SCENARIO.toml",
                                                  help="Scenario file (keys below).")],
    output: Annotated[Path | None, typer.Option("-o", "--output",
                                                help="Write the result Dataset (netCDF).")] = None,
    plot: Annotated[Path | None, typer.Option("--plot", help="Write a PNG of queues and rates.")
                    ] = None,
    check_dt: Annotated[bool, typer.Option("--check-dt", help="Also run at dt/2 and report "
                                           "whether the results agree.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    threads: Threads = 1,
) -> None:
    """Simulate a scenario; print per-flow throughput, the busiest links' queues, convergence
    time and the invariant verdict; optionally write the Dataset and a plot."""
    with _user_errors():
        scenario = load_scenario(scenario_file)
        _check_writable(output, "--output")
        _check_writable(plot, "--plot")
        _setup_jax(threads)
        from pathflow.results import write_dataset
        from pathflow.simulate import simulate

        with _progress(f"simulating {scenario.name}", quiet) as update, \
                warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ds = simulate(scenario, progress=update, check_dt=check_dt)
        for warning in caught:
            errors.print(f"warning: {warning.message}", markup=False, highlight=False)
        console.print(f"[bold]{scenario.name}[/bold]: {len(ds.flow)} flows, {len(ds.link)} links, "
                      f"{format_time(float(ds.time[-1]))} simulated, "
                      f"dt = {format_time(ds.attrs['dt'])}")
        _summary_table(ds, scenario)
        if output is not None:
            write_dataset(ds, str(output))
            console.print(f"wrote {output}")
        if plot is not None:
            from pathflow.plots import plot_run

            plot_run(ds, plot)
            console.print(f"wrote {plot}")


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
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    threads: Threads = 1,
) -> None:
    """Run a scenario for many flow counts, batched (one compiled program per size bucket)."""
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

        try:
            with _progress(f"sweeping {scenario.name} over {len(counts)} flow counts",
                           quiet) as update:
                result = sweep_flows(scenario, counts, progress=update, on_chunk=save)
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
    """Run the registered validation cases (closed forms, measured data, ns-3) and write the
    report: case, quantity, reference, pathflow value, error, tolerance, pass. Exit code 1 if a
    check fails."""
    with _user_errors():
        _check_writable(output, "--output")
        _setup_jax(threads)
        from pathflow.validation.report import run_cases, write_report

        def announce(item: object) -> None:
            errors.print(f"running {item.name}: {item.title}", highlight=False)  # type: ignore[attr-defined]

        try:
            results = run_cases(fast=fast, names=case, progress=announce)
        except ValueError as error:
            _fail(str(error))
        report = write_report(results, output)
        table = Table(title="Validation", title_justify="left")
        for column in ("case", "quantity", "reference", "pathflow", "error", "tolerance", "pass"):
            table.add_column(column, overflow="fold")
        for i in range(report.sizes["check"]):
            row = report.isel(check=i)
            relative = bool(row.relative)

            def fmt(x: float, rel: bool = relative) -> str:
                return f"{x:.1%}" if rel else f"{x:.4g}"

            table.add_row(str(row.case.values), str(row.quantity.values),
                          f"{float(row.reference):.4g}", f"{float(row.value):.4g}",
                          fmt(float(row.error)), fmt(float(row.tolerance)),
                          "yes" if bool(row.passed) else "NO")
        console.print(table)
        failed = int((~report.passed).sum())
        console.print(f"{report.sizes['check'] - failed} of {report.sizes['check']} checks pass; "
                      f"wrote {output}")
        if failed:
            raise typer.Exit(1)


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
