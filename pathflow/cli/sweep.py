"""`pathflow sweep`: one scenario over many flow counts, batched, its result saved after every
chunk so that an interruption keeps the finished points."""

from __future__ import annotations

import math
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
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
)
from pathflow.cli.progress import MaxMemory, Yes, before_running, preparing, progress
from pathflow.scenario import Scenario, load_scenario
from pathflow.units import format_bytes, format_rate, format_time

if TYPE_CHECKING:
    import xarray as xr

    from pathflow.compile import Compiled


def _default_sweep_scenario() -> Scenario:
    """The built-in N:1 DCTCP incast, read from the installed package (no checkout needed)."""
    text = resources.files("pathflow").joinpath("scenarios/incast_10g.toml").read_text()
    return Scenario.from_toml(text)


def _earlier_points(output: Path) -> xr.Dataset | None:
    """The partial result an interrupted sweep left in `output` (None: nothing to resume)."""
    import xarray as xr

    if not output.exists():
        errors.print(f"--resume: {output} does not exist yet; running every point")
        return None
    try:
        with xr.open_dataset(output, engine="h5netcdf") as saved:
            return saved.load()
    except (OSError, ValueError) as error:
        fail(f"--resume: cannot read {str(output)!r} as a sweep result ({error})")


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
    resume: Annotated[bool, typer.Option("--resume", help="Keep the finished points of an "
                                         "interrupted sweep in OUTPUT and run the rest.")
                      ] = False,
    yes: Yes = False,
    max_memory: MaxMemory = None,
    threads: Threads = 1,
) -> None:
    """Run a scenario for many flow counts, batched (one compiled program per size bucket).
    Before it starts, one line states its steps, memory and estimated time."""
    with user_errors():
        from pathflow.results import write_dataset
        from pathflow.sweep import parse_flow_range, sweep_flows

        counts = parse_flow_range(flows)
        scenario = load_scenario(scenario_file) if scenario_file else _default_sweep_scenario()
        plot = plot or output.with_suffix(".png")
        check_writable(output, "--output")
        check_figure(plot, "--plot")
        setup_jax(threads)
        saved: list[xr.Dataset] = []
        earlier = _earlier_points(output) if resume else None

        def save(partial: xr.Dataset) -> None:
            write_dataset(partial, str(output))
            saved.append(partial)

        what = f"sweeping {scenario.name} over {len(counts)} flow counts"
        try:
            with preparing(f"preparing {len(counts)} points of {scenario.name}", quiet) as done, \
                    progress(what, quiet) as update:
                def before_run(points: list[Compiled]) -> None:
                    from pathflow.cost import estimate_sweep

                    done()
                    before_running(estimate_sweep(points), scenario.name, quiet, yes,
                                   max_memory)

                result = sweep_flows(scenario, counts, progress=update, on_chunk=save,
                                     before_run=before_run, resume=earlier)
        except KeyboardInterrupt:
            if saved:
                errors.print(f"interrupted: {len(saved[-1].flows)} finished points kept in "
                             f"{output}")
            raise typer.Exit(130) from None
        from pathflow.plots import plot_sweep

        table = Table(title=f"{scenario.name}: sweep over flows", title_justify="left")
        paused = bool((result.paused > 0).any())  # a lossless network: how long PFC held links
        for column in ("flows", "throughput", "Jain", "queue mean", "p99", "max", "converged",
                       *(["paused (most)"] if paused else [])):
            table.add_column(column, justify="right")
        for i, n in enumerate(result.flows.values):
            conv = float(result.convergence_time[i])
            table.add_row(str(n), format_rate(float(result.aggregate_throughput[i])),
                          f"{float(result.jain[i]):.3f}",
                          format_bytes(float(result.queue_mean[i])),
                          format_bytes(float(result.queue_p99[i])),
                          format_bytes(float(result.queue_max[i])),
                          format_time(conv) if math.isfinite(conv) else "no",
                          *([f"{float(result.paused[i]):.1%}"] if paused else []))
        console.print(table)
        plot_sweep(result, plot)
        console.print(f"wrote {output} and {plot}")
