"""`pathflow run`: one scenario through the fluid model or the packet-level reference, summarised
as tables of flows and busiest links, the convergence time and the invariant verdict."""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from pathflow.cli.console import (
    Threads,
    check_writable,
    console,
    errors,
    fail,
    setup_jax,
    user_errors,
    write_output,
)
from pathflow.cli.progress import MaxMemory, Yes, before_running, preparing, progress, spinner
from pathflow.scenario import Scenario, load_scenario
from pathflow.units import format_rate, format_time

if TYPE_CHECKING:
    import xarray as xr


def _summary_table(ds: xr.Dataset, scenario: Scenario) -> None:
    """Flows, busiest links, convergence and invariants of the steady window, as printed."""
    from pathflow.metrics import summarize

    summary = summarize(ds)
    packet = scenario.packet_bytes
    rates = summary.throughput
    flows = Table(title="Flows (steady window)", title_justify="left")
    for column in ("flow", "src -> dst", "throughput"):
        flows.add_column(column, justify="right" if column == "throughput" else "left",
                         overflow="fold")
    shown = range(min(len(rates), 10))
    for i in shown:
        flows.add_row(str(i), f"{ds.src.values[i]} -> {ds.dst.values[i]}",
                      format_rate(float(rates[i])))
    if len(rates) > 10:
        flows.add_row("...", f"{len(rates)} flows", f"min {format_rate(float(rates.min()))}, "
                      f"max {format_rate(float(rates.max()))}")
    jain = summary.jain
    flows.add_row("all", f"Jain {jain:.4f}" if math.isfinite(jain) else "Jain n/a (no delivery)",
                  format_rate(summary.aggregate_throughput), style="bold")
    console.print(flows)
    links = Table(title="Busiest links (steady window)", title_justify="left")
    for column in ("link", "utilization", "queue mean", "p99", "max", "drops"):
        links.add_column(column, justify="left" if column == "link" else "right", overflow="fold")
    hot, queues = summary.hotspots, summary.queues
    for i, name in enumerate(hot.link.values):
        def pk(value: float) -> str:
            return f"{value / packet:.1f} pkt"

        links.add_row(str(name), f"{float(hot.utilization[i]):.1%}",
                      pk(float(queues["mean"][i])), pk(float(queues["p99"][i])),
                      pk(float(queues["max"][i])), format_rate(float(hot.drops[i])))
    console.print(links)
    convergence = summary.convergence
    if convergence.reason:
        console.print(f"Convergence: {convergence.reason}")
    else:
        settled = (f"settled after {format_time(convergence.time)}" if convergence.settled
                   else "did not settle within the run")
        console.print(f"Convergence: {settled} (rates within 10 %, queue on "
                      f"{convergence.link} within a band)")
    report = summary.invariants
    broken = [f"{name}: {v.detail}" for name, v in report.violations.items()]
    verdict = "all hold" if report.ok else "VIOLATED: " + "; ".join(broken)
    console.print(f"Invariants ({', '.join(report)}): {verdict}")


ENGINES = ("fluid", "packet")


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
    with user_errors():
        if engine not in ENGINES:
            fail(f"--engine: unknown engine {engine!r}; allowed: {', '.join(ENGINES)}")
        if check_dt and engine != "fluid":
            fail(f"--check-dt: applies to --engine fluid only (the {engine} simulator has no "
                 "time step to halve)")
        scenario = load_scenario(scenario_file)
        check_writable(output, "--output")
        check_writable(plot, "--plot")
        setup_jax(threads)
        from pathflow.results import write_dataset

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if engine == "fluid":
                from pathflow.compile import compile_scenario
                from pathflow.cost import estimate
                from pathflow.simulate import simulate

                with preparing(f"preparing {scenario.name}", quiet):
                    compiled = compile_scenario(scenario)
                before_running(estimate(compiled, check_dt), scenario.name, quiet, yes,
                               max_memory)
                with progress(f"simulating {scenario.name}", quiet) as update:
                    ds = simulate(scenario, progress=update, check_dt=check_dt,
                                  compiled=compiled)
            else:
                from pathflow.validation.packet import simulate_packets

                with spinner(f"simulating the packets of {scenario.name}", quiet):
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
            write_output(output, "--output", lambda path: write_dataset(ds, str(path)))
        if plot is not None:
            from pathflow.plots import plot_run

            write_output(plot, "--plot", lambda path: plot_run(ds, path))

