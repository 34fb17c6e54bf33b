"""`pathflow run`: one scenario through the fluid model or the packet-level reference, summarised
as tables of flows and busiest links, a line per traffic group with rounds (`[traffic] rounds`),
the convergence time and the invariant verdict."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import numpy as np
import typer
from rich.table import Table

from pathflow.cli.console import (
    Device,
    Threads,
    check_figure,
    check_writable,
    console,
    errors,
    fail,
    setup_device,
    setup_jax,
    user_errors,
    write_output,
)
from pathflow.cli.progress import MaxMemory, Yes, before_running, preparing, progress, spinner
from pathflow.scenario import Scenario, load_scenario
from pathflow.units import format_rate, format_time

if TYPE_CHECKING:
    import xarray as xr

    from pathflow.compile import Compiled


def _summary_table(ds: xr.Dataset, scenario: Scenario) -> None:
    """Flows, busiest links, convergence, the state it ends in and invariants of the steady
    window, as printed."""
    from pathflow.metrics import summarize
    from pathflow.verdict import verdict

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
    if summary.groups.sizes["group"] > 1:
        _groups_table(summary.groups)
    if "block_done" in ds:
        _rounds_lines(ds)
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
    if summary.paused.size:
        paused = Table(title="Links paused longest by PFC (whole run)", title_justify="left")
        for column in ("link", "paused", "of the run"):
            paused.add_column(column, justify="left" if column == "link" else "right")
        duration = float(ds.time[-1])
        for name, seconds in zip(summary.paused.link.values, summary.paused.values, strict=True):
            paused.add_row(str(name), format_time(float(seconds)), f"{seconds / duration:.1%}")
        console.print(paused)
    convergence = summary.convergence
    if convergence.reason:
        console.print(f"Convergence: {convergence.reason}")
    else:
        settled = (f"settled after {format_time(convergence.time)}" if convergence.settled
                   else "did not settle within the run")
        console.print(f"Convergence: {settled} (rates within 10 %, queue on "
                      f"{convergence.link} within a band)")
    state = verdict(ds)
    console.print(f"State: {state.state} ({state.reason})")
    report = summary.invariants
    broken = [f"{name}: {v.detail}" for name, v in report.violations.items()]
    holds = "all hold" if report.ok else "VIOLATED: " + "; ".join(broken)
    console.print(f"Invariants ({', '.join(report)}): {holds}")


def _rounds_lines(ds: xr.Dataset) -> None:
    """One line per traffic group with barrier-synchronised rounds: rounds completed, round
    times, goodput (`metrics.round_summary`)."""
    from pathflow.metrics import round_summary

    rounds = round_summary(ds)
    for g in rounds.group.values:
        row = rounds.sel(group=g)
        times = row.round_time.values[: int(row.rounds)]
        done = times[np.isfinite(times)]
        where = f" (group {g})" if rounds.sizes["group"] > 1 or g != 0 else ""
        spread = (f", round time mean {format_time(float(done.mean()))} "
                  f"({format_time(float(done.min()))} to {format_time(float(done.max()))}), "
                  f"goodput {format_rate(float(row.goodput))}" if done.size else "")
        console.print(f"Rounds{where}: {int(row.rounds_completed)}/{int(row.rounds)} done"
                      f"{spread}")


def _groups_table(groups: xr.Dataset) -> None:
    table = Table(title="Traffic groups (steady window)", title_justify="left")
    for column in ("group", "cc", "flows", "throughput", "Jain", "transfers"):
        table.add_column(column, justify="left" if column in ("group", "cc") else "right")
    for g in groups.group.values:
        row = groups.sel(group=g)
        transfers = ("long-lived" if int(row.transfers) == 0 else
                     f"{int(row.finished)}/{int(row.transfers)} done"
                     + (f", median {format_time(float(row.transfer_time_median))}"
                        if int(row.finished) else ""))
        jain = float(row.jain)
        table.add_row(str(g), str(row.cc.values), str(int(row.flows)),
                      format_rate(float(row.throughput)),
                      f"{jain:.4f}" if math.isfinite(jain) else "n/a", transfers)
    console.print(table)


def _run_seeds(scenario: Scenario, count: int, output: Path | None, plot: Path | None,
               quiet: bool, yes: bool, max_memory: str | None) -> None:
    """`--seeds N`: the scenario under N hash seeds in one batch (`pathflow.hotspots`); the
    links most often a bottleneck, and the spread of the largest link load over the seeds."""
    from pathflow.hotspots import seed_hotspots, seed_list
    from pathflow.results import write_dataset

    chosen = seed_list(scenario, count)
    what = f"{scenario.name} over {count} seeds"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with preparing(f"preparing {count} seeds of {scenario.name}", quiet) as done, \
                progress(f"simulating {what}", quiet) as update:
            def before_run(points: list[Compiled]) -> None:
                from pathflow.cost import estimate_sweep

                done()
                before_running(estimate_sweep(points), what, quiet, yes, max_memory)

            hot = seed_hotspots(scenario, chosen, progress=update, before_run=before_run)
    for warning in caught:
        errors.print(f"warning: {warning.message}", markup=False, highlight=False)
    _seeds_report(hot, scenario)
    if output is not None:
        write_output(output, "--output", lambda path: write_dataset(hot, str(path)))
    if plot is not None:
        from pathflow.network_plot import plot_network
        from pathflow.topology import build_network

        queues = hot.queue_mean.mean("seed") / scenario.packet_bytes
        title = f"{scenario.name}: P(bottleneck) over {count} seeds, mean queues"
        write_output(plot, "--plot", lambda path: plot_network(
            build_network(scenario), hot.bottleneck_probability, path, label="P(bottleneck)",
            queues=queues, title=title, vmax=1.0))


def _spread(values: np.ndarray, show: Callable[[float], str]) -> str:
    """min / median / p90 / max of `values`, each shown by `show`."""
    points = np.quantile(values, [0.0, 0.5, 0.9, 1.0])
    return " / ".join(show(float(v)) for v in points)


def _seeds_report(hot: xr.Dataset, scenario: Scenario) -> None:
    """What `--seeds` prints: the fabric links most often a bottleneck, the spread of the largest
    fabric-link load and of aggregate throughput over the seeds, host links, invariants."""
    seeds = [int(s) for s in hot.seed.values]
    console.print(f"[bold]{scenario.name}[/bold]: {len(seeds)} seeds ({seeds[0]}..{seeds[-1]}), "
                  f"{hot.attrs['flows']} flows, {len(hot.link)} links, "
                  f"{format_time(hot.attrs['simulated_s'])} simulated (fluid model, one batch; "
                  f"steady window t > {format_time(hot.attrs['warmup_s'])})")
    fabric = hot.isel(link=np.flatnonzero(~hot.host_link.values))
    if not fabric.sizes["link"]:
        console.print("No fabric links (both ends switches) in this topology: nothing for the "
                      "hash to spread.")
    else:
        probability = fabric.bottleneck_probability.values
        utilization = fabric.utilization.mean("seed").values
        queue = fabric.queue_mean.mean("seed").values
        order = np.lexsort((-queue, -utilization, -probability))
        order = [i for i in order if probability[i] > 0][:10]
        if order:
            table = Table(title="Links most often a bottleneck (fabric links, over seeds)",
                          title_justify="left")
            for column in ("link", "P(bottleneck)", "mean utilization", "mean queue"):
                table.add_column(column, justify="left" if column == "link" else "right",
                                 overflow="fold")
            for i in order:
                table.add_row(str(fabric.link.values[i]), f"{probability[i]:.0%}",
                              f"{utilization[i]:.1%}",
                              f"{queue[i] / scenario.packet_bytes:.1f} pkt")
            console.print(table)
        else:
            console.print("No fabric link was a bottleneck in any seed.")
        console.print("Largest fabric-link load over seeds (min / median / p90 / max): "
                      f"offered {_spread(fabric.max_offered.values, lambda v: f'{v:g}')} flows; "
                      f"utilization {_spread(hot.max_utilization.values, lambda v: f'{v:.1%}')}")
    console.print("Aggregate throughput over seeds (min / median / p90 / max): "
                  f"{_spread(hot.aggregate_throughput.values, format_rate)}")
    access = hot.bottleneck.any("seed").values & hot.host_link.values
    if access.any():
        console.print(f"Host links a bottleneck in some seed: {int(access.sum())} (set by the "
                      "traffic pattern, not the hash; not in the table)")
    broken = [(int(s), str(v)) for s, v in zip(hot.seed.values, hot.violations.values,
                                                 strict=True) if v]
    verdict = ("all hold in every seed" if not broken else f"VIOLATED in {len(broken)} seeds, "
               f"e.g. seed {broken[0][0]}: {broken[0][1]}")
    console.print(f"Invariants: {verdict}")


ENGINES = ("fluid", "packet")


def run(
    scenario_file: Annotated[Path, typer.Argument(metavar="SCENARIO.toml",
                                                  help="Scenario file (keys below).")],
    output: Annotated[Path | None, typer.Option("-o", "--output",
                                                help="Write the result Dataset (netCDF).")] = None,
    plot: Annotated[Path | None, typer.Option("--plot", help=(
        "Write a PNG of queues and rates, and beside it STEM.network.png: the network, links "
        "coloured by steady-window mean utilization, mean queues marked."))] = None,
    engine: Annotated[str, typer.Option("--engine", metavar="fluid|packet", help=(
        "fluid: the JAX fluid model; packet: the packet-level reference simulator (numba; "
        "every packet, so far slower on fast links and long runs). Same results Dataset."))
                      ] = "fluid",
    check_dt: Annotated[bool, typer.Option("--check-dt", help="Also run at a fixed half of the "
                                           "finest step and report whether the results agree "
                                           "(fluid only).")] = False,
    seeds: Annotated[int | None, typer.Option("--seeds", metavar="N", help=(
        "Run N hash seeds ([run] seed onwards) in one batch and print the links most often a "
        "bottleneck (fluid only); -o writes the hotspot Dataset, --plot the network coloured "
        "by P(bottleneck)."))] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No cost line and no progress.")
                     ] = False,
    yes: Yes = False,
    max_memory: MaxMemory = None,
    threads: Threads = 1,
    device: Device = "cpu",
) -> None:
    """Simulate a scenario with the fluid model (default) or the packet-level reference
    simulator (--engine packet); print per-flow throughput, the busiest links' queues,
    convergence time and the invariant verdict; optionally write the Dataset and a plot.
    Before a fluid run starts, one line states its steps, memory and estimated time."""
    with user_errors(scenario_file):
        if engine not in ENGINES:
            fail(f"--engine: unknown engine {engine!r}; allowed: {', '.join(ENGINES)}")
        if check_dt and engine != "fluid":
            fail(f"--check-dt: applies to --engine fluid only (the {engine} simulator has no "
                 "time step to halve)")
        if seeds is not None:
            if engine != "fluid":
                fail(f"--seeds: applies to --engine fluid only (the {engine} simulator runs one "
                     "seed at a time)")
            if seeds < 1:
                fail(f"--seeds: must be at least 1 (got {seeds})")
            if check_dt:
                fail("--seeds: cannot be combined with --check-dt")
        scenario = load_scenario(scenario_file)
        check_writable(output, "--output")
        check_figure(plot, "--plot")
        setup_device(device)
        setup_jax(threads)
        if seeds is not None:
            _run_seeds(scenario, seeds, output, plot, quiet, yes, max_memory)
            return
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
            from pathflow.network_plot import plot_network_result
            from pathflow.plots import plot_run

            write_output(plot, "--plot", lambda path: plot_run(ds, path))
            picture = plot.with_name(f"{plot.stem}.network{plot.suffix or '.png'}")
            write_output(picture, "--plot", lambda path: plot_network_result(ds, path))

