"""`pathflow sweep`: one scenario over many flow counts and any scenario keys (`--set`, `--cc`,
`--seeds`), batched, its result saved after every chunk so that an interruption keeps the
finished points. With no scenario it sweeps seed 001's RDMA incast with DCQCN and DCQCN+, each
flow's cuts drawn at moments of its own (`DEFAULT_FORM`)."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import numpy as np
import typer
from rich.table import Table

from pathflow.cli.console import (
    Device,
    Precision,
    accelerate,
    check_figure,
    check_writable,
    console,
    errors,
    fail,
    setup_jax,
    user_errors,
)
from pathflow.cli.progress import (
    MaxMemory,
    Yes,
    before_running,
    memory_limit,
    preparing,
    progress,
)
from pathflow.scenario import Scenario, load_scenario
from pathflow.units import format_bytes, format_rate, format_time, parse_size

if TYPE_CHECKING:
    import xarray as xr

    from pathflow.axes import Dimension
    from pathflow.compile import Compiled
    from pathflow.cost import Cost

DEFAULT_CONTROLS = "dcqcn,dcqcn+"  # compared by the built-in sweep
# The built-in sweep draws each flow's cuts at moments of its own (`models/dcqcn.py`): the
# scenario file's published mean field cuts a host's flows together and idles the link that
# the packet level keeps busy (README, quick start). A host's flows run as 4 sample
# paths: 2, 4 and 8 gave the sweep of 16 within 1 % in throughput and 2.2 % in mean queue,
# every state the same (2026-11-29).
DEFAULT_FORM: dict[str, Any] = {"transport.cuts": "events", "run.representatives": 4,
                                "name": "dcqcn-incast-10g (cuts drawn per flow)"}
MOST_TABLES = 4  # points of the other axes with a table each; more: one table of states


def default_sweep_scenario() -> Scenario:
    """Seed 001's RDMA incast (8 senders, 10 Gb/s, 1 KB packets, 5.1 MB shared buffer, PFC,
    DCQCN's marking), read from the installed package (no checkout needed), in `DEFAULT_FORM`."""
    text = resources.files("pathflow").joinpath("scenarios/dcqcn_incast.toml").read_text()
    return Scenario.from_toml(text).with_updates(DEFAULT_FORM)


def _keys(controls: str | None, settings: list[str]) -> dict[str, str]:
    """The swept keys of `--cc` and `--set` (`pathflow.axes`), each once."""
    from pathflow.axes import parse_set

    keys: dict[str, str] = {}
    if controls is not None:
        names = [name.strip() for name in controls.split(",") if name.strip()]
        if not names or len(set(names)) < len(names):
            fail(f"--cc: {controls!r} must name congestion controls once each, comma separated")
        keys["transport.cc"] = ",".join(names)
    for text in settings:
        key, _, values = text.partition("=")
        parse_set(text)  # the key and its values' syntax, one line
        if key.strip() in keys:
            fail(f"--set {key.strip()}: set once (--cc sets transport.cc)")
        keys[key.strip()] = values
    return keys


class _Output:
    """Where a sweep's result goes: a zarr store (`.zarr`, `pathflow.store`) grown point by
    point as chunks finish, readable with `xarray.open_zarr` while the sweep runs; or a netCDF
    file (`.nc`) rewritten whole after every chunk."""

    def __init__(self, path: Path) -> None:
        if path.suffix not in (".zarr", ".nc"):
            fail(f"--output: {str(path)!r} must end in .zarr (a store that grows point by "
                 "point) or .nc (netCDF, rewritten after every chunk)")
        self.path = path
        self.zarr = path.suffix == ".zarr"
        self.written: set[tuple[int, ...]] | None = None  # points in the store, once made
        self.last: xr.Dataset | None = None
        check_writable(path, "--output", store=self.zarr)

    def save(self, partial: xr.Dataset) -> None:
        """Keep the points of `partial` (the sweep so far) finished since the last call."""
        from pathflow.results import write_dataset
        from pathflow.store import create_store, finished_points, write_points

        if not self.zarr:
            write_dataset(partial, str(self.path))
        elif self.written is None:
            create_store(self.path, partial)
            self.written = finished_points(partial)
        else:
            new = finished_points(partial) - self.written
            write_points(self.path, partial, sorted(new))
            self.written |= new
        self.last = partial

    def final(self, result: xr.Dataset) -> None:
        """Replace what is saved by the whole result (with predictions beside the points)."""
        from pathflow.results import write_dataset
        from pathflow.store import create_store

        (create_store if self.zarr else write_dataset)(result, self.path)

    def kept(self) -> str:
        """How many finished points are saved, in words."""
        finished = 0 if self.last is None else int(self.last.aggregate_throughput.notnull().sum())
        return f"{finished} finished points kept in {self.path}"

    def earlier(self) -> xr.Dataset | None:
        """The partial result an interrupted sweep left (None: nothing to resume)."""
        import xarray as xr

        from pathflow.store import read_store

        if not self.path.exists():
            errors.print(f"--resume: {self.path} does not exist yet; running every point")
            return None
        try:
            if self.zarr:
                return read_store(self.path)
            with xr.open_dataset(self.path, engine="h5netcdf") as saved:
                return saved.load()
        except (OSError, ValueError, KeyError) as error:
            fail(f"--resume: cannot read {str(self.path)!r} as a sweep result ({error})")


def sweep(
    scenario_file: Annotated[Path | None, typer.Argument(
        metavar="[SCENARIO.toml]",
        help="Scenario to sweep (default: seed 001's RDMA incast at 10 Gb/s, DCQCN and DCQCN+, "
             "examples/dcqcn_incast.toml with each flow's cuts drawn at moments of its own: "
             "transport.cuts = events, run.representatives = 4; the DCTCP incast is "
             "examples/incast_10g.toml).")] = None,
    flows: Annotated[str, typer.Option("--flows", help="START:STOP[:STEP] flow counts "
                                       "(default 25 points between START and STOP). In the "
                                       "incast pattern the flows go round-robin to "
                                       "topology.senders: up to that many, N flows are N "
                                       "servers, one flow each (the classic incast's N); "
                                       "beyond, several flows share a server.")] = "80:2000",
    output: Annotated[Path, typer.Option(
        "-o", "--output", help="Result Dataset: a zarr store (.zarr) that grows point by point, "
                               "readable with xarray.open_zarr while the sweep runs, or netCDF "
                               "(.nc), rewritten after every batch.")] = Path("sweep.zarr"),
    keep: Annotated[str, typer.Option(
        "--keep", help="What the result keeps of each point: summaries (throughput, fairness, "
                       "queue and latency statistics, convergence, state), or series: also "
                       "every link's queue and utilization over time (8 bytes per link, "
                       "record and point: gigabytes over thousands of points).")
                    ] = "summaries",
    plot: Annotated[Path | None, typer.Option("--plot", help="PNG of queue, throughput and "
                                              "convergence time versus flows, and with "
                                              "traffic.rounds the rounds' goodput (default: "
                                              "OUTPUT with .png).")] = None,
    controls: Annotated[str | None, typer.Option(
        "--cc", help="Congestion controls to compare side by side, comma separated (a cc "
                     "dimension), e.g. dcqcn,dcqcn+,dcqcn+static; parameters a control does not "
                     f"declare are left out. Default: {DEFAULT_CONTROLS} for the built-in sweep, "
                     "the scenario's own cc otherwise.")] = None,
    settings: Annotated[list[str] | None, typer.Option(
        "--set", metavar="KEY=V1,V2,...",
        help="Sweep a scenario key too (repeatable; a dimension each): dotted keys as in the "
             "scenario file, values as it writes them, e.g. aqm.threshold=20pkt,40pkt,65pkt, "
             "topology.link_rate=10Gbps,40Gbps, transport.cc=dctcp,reno, or a range "
             "START:STOP:STEP in the key's units (20pkt:60pkt:20pkt).")] = None,
    seeds: Annotated[int | None, typer.Option(
        "--seeds", min=1, help="Also sweep hash seeds 1 to N (run.seed: ECMP's hashes, start "
                               "jitter), a seed dimension.")] = None,
    zipped: Annotated[bool, typer.Option(
        "--zip", help="Pair the --set keys' values (as many each) in one dimension instead of "
                      "crossing them.")] = False,
    standing_queue: Annotated[str, typer.Option(
        "--standing-queue", help="Convergence criterion of seed 001: a bottleneck queue that "
                                 "stays above this size after warm-up has not converged.")
                              ] = "200KB",
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No cost line and no progress.")
                     ] = False,
    resume: Annotated[bool, typer.Option("--resume", help="Keep the finished points of an "
                                         "interrupted sweep in OUTPUT and run the rest.")
                      ] = False,
    analyze: Annotated[bool, typer.Option(
        "--analyze", help="Also predict every point from the model alone (as pathflow "
                          "analyze): the rest state's queue, whether it is stable, the time to "
                          "settle or the period; shown beside the simulated values, in the "
                          "table and the figure.")] = False,
    yes: Yes = False,
    max_memory: MaxMemory = None,
    threads: Annotated[int, typer.Option(
        "--threads", min=0, help="CPUs the sweep runs on (0: all): its batches (one per "
                                 "congestion control and size bucket, at least) run side by "
                                 "side, one per CPU, as many as fit in memory; the results are "
                                 "those of one at a time.")
                     ] = 0,
    workers: Annotated[int | None, typer.Option(
        "--workers", min=1, help="Run the batches on a local dask cluster of N worker processes "
                                 "(one thread each); the result is the in-process one.")
                       ] = None,
    scheduler: Annotated[str | None, typer.Option(
        "--scheduler", metavar="tcp://HOST:PORT",
        help="Run the batches on a running dask scheduler (as dask-jobqueue or dask-kubernetes "
             "start one; docs/cluster.md); finished points are written here as they arrive.")
                         ] = None,
    device: Device = "cpu",
    precision: Precision = None,
) -> None:
    """Run a scenario for many flow counts and any other scenario keys, batched (one compiled
    program per physics and size bucket, whichever key varies). Before it starts, one line
    states its steps, memory and estimated time. With barrier-synchronised rounds
    (traffic.rounds) the table and figure add the goodput of the completed rounds, the incast
    experiment's goodput against servers."""
    with user_errors(scenario_file):
        from pathflow.axes import grid
        from pathflow.sweeps import parse_flow_range, sweep, sweep_dimensions

        counts = parse_flow_range(flows)
        scenario = load_scenario(scenario_file) if scenario_file else default_sweep_scenario()
        if scenario_file is None and controls is None:
            controls = DEFAULT_CONTROLS
        keys = _keys(controls, settings or [])
        scenario = accelerate(scenario, keys, device, precision)
        dims = sweep_dimensions(keys, seeds, zipped)
        places = list(grid(dims))
        standing = parse_size(standing_queue, scenario.packet_bytes, "--standing-queue")
        if keep not in ("summaries", "series"):
            fail(f"--keep: {keep!r} is not allowed; allowed: summaries, series")
        series = keep == "series"
        batch_bytes = _batch_bytes(max_memory)
        plot = plot or output.with_suffix(".png")
        saved = _Output(output)
        check_figure(plot, "--plot")
        earlier = saved.earlier() if resume else None

        compared = "".join(f" x {len(d)} {d.name}" for d in dims)
        what = f"sweeping {scenario.name} over {len(counts)} flow counts{compared}"
        try:
            with _cluster(workers, scheduler, threads) as client, \
                    preparing(f"preparing {len(counts)}{compared} points of {scenario.name}",
                              quiet) as done, \
                    progress(what, quiet) as update:
                from pathflow.cost import usable_cpus

                parallel = usable_cpus() if client is None else 1  # chunks side by side here

                def before_run(points: list[Compiled]) -> int:
                    done()
                    cost, fitting = _side_by_side(points, series, batch_bytes, parallel,
                                                  max_memory)
                    before_running(cost, scenario.name, quiet, yes, max_memory)
                    return fitting

                result = sweep(scenario, counts, set=keys, seeds=seeds, zipped=zipped,
                               progress=update, on_chunk=saved.save, before_run=before_run,
                               resume=earlier, standing_queue=standing,
                               series=series, client=client,
                               chunk_bytes=batch_bytes, parallel=parallel)
            if analyze:
                from pathflow.sweeps import with_predictions

                with preparing(f"predicting {len(counts) * len(places)} points from the model "
                               "alone", quiet):
                    result = with_predictions(result, scenario)
                saved.final(result)
        except KeyboardInterrupt:
            errors.print(f"interrupted: {saved.kept()}")
            raise typer.Exit(130) from None
        except Exception as error:
            if type(error).__name__ != "KilledWorker":  # dask's: a task that killed its workers
                raise
            errors.print(f"error: a chunk killed every worker that ran it ({error}); "
                         f"{saved.kept()}")
            raise typer.Exit(1) from None
        if len(places) > MOST_TABLES:
            console.print(_verdict_table(result, dims, scenario.name))
        else:
            for place in places:
                at = {d.name: i for d, i in zip(dims, place, strict=True)}
                console.print(_table(result.isel(at), scenario.name, _point(dims, place),
                                     _servers(scenario)))
        if result.attrs.get("prediction_notes"):
            console.print(f"no prediction for {result.attrs['prediction_notes']}")
        figures = _plot(result, dims, plot)
        console.print(f"wrote {output} and {' and '.join(map(str, figures))}")


def _side_by_side(points: list[Compiled], series: bool, batch_bytes: float, cpus: int,
                  max_memory: str | None) -> tuple[Cost, int]:
    """The sweep's cost with as many batches side by side as there are CPUs and as fit in
    memory (`--max-memory`, else what is available), one at least, and that number; a sweep
    that does not fit one at a time is refused by `before_running`."""
    from pathflow.cost import estimate_sweep

    limit = memory_limit(max_memory)
    count = max(1, cpus)
    cost = estimate_sweep(points, series, batch_bytes, count)
    while count > 1 and cost.memory > limit:
        count -= 1
        cost = estimate_sweep(points, series, batch_bytes, count)
    return cost, count


def _batch_bytes(max_memory: str | None) -> float:
    """How much of its memory a batch's records and feedback history may take: `batch`'s
    default, or with `--max-memory` a quarter of it where that is less (the solver holds about
    three copies of a batch's records at its peak, beside the program and the kept results)."""
    from pathflow.batch import CHUNK_BYTES

    if max_memory is None:
        return CHUNK_BYTES
    return min(CHUNK_BYTES, parse_size(max_memory, 1.0, "--max-memory") / 4)


@contextlib.contextmanager
def _cluster(workers: int | None, scheduler: str | None, threads: int = 1
             ) -> Iterator[Any]:
    """The dask client of `--workers` or `--scheduler` (None: run in this process); JAX is set
    up here after a local cluster's workers have started, so that they do not inherit this
    process's single CPU (`setup_jax`)."""
    if workers is None and scheduler is None:
        setup_jax(threads)
        yield None
        return
    if workers is not None and scheduler is not None:
        fail("--workers / --scheduler: give one of them (a local cluster, or a running one)")
    from pathflow.cluster import connect

    with connect(workers, scheduler) as client:
        setup_jax(threads)
        yield client


def _plot(result: xr.Dataset, dims: list[Dimension], plot: Path) -> list[Path]:
    """The sweep's figures: over flows alone or congestion controls, `plot_sweep`'s four
    panels; over other keys, the bottleneck queue against flows per point of the grid
    (`plot_grid`) and, beside it, the map of every point's state (`plot_verdict_map`)."""
    from pathflow.plots import plot_grid, plot_sweep, plot_verdict_map

    if [d.name for d in dims] in ([], ["cc"]):
        plot_sweep(result, plot)
        return [plot]
    states = plot.with_name(f"{plot.stem}_verdict{plot.suffix}")
    plot_grid(result, plot)
    plot_verdict_map(result, states)
    return [plot, states]


def _point(dims: list[Dimension], place: tuple[int, ...]) -> str:
    """A point of the grid beside flows in words: "reno, threshold=20pkt"."""
    return ", ".join(d.axes[0].labels[i] if d.name == "cc" else f"{d.name}={d.axes[0].labels[i]}"
                     for d, i in zip(dims, place, strict=True))


def _verdict_table(result: xr.Dataset, dims: list[Dimension], name: str) -> Table:
    """A grid too large for a table per point: the state of every point, one row per point of
    the other axes, one column per flow count."""
    from pathflow.axes import grid
    from pathflow.verdict import STATES, state_names

    table = Table(title=f"{name}: state of every point (numbers: the saved Dataset)",
                  title_justify="left", box=None, pad_edge=False, collapse_padding=True,
                  header_style="bold underline", caption_justify="left",
                  caption="; ".join(f"{state[0].upper()}: {state}" for state in STATES)
                  + "; -: not run (pathflow.verdict)")
    table.add_column("point", no_wrap=True)
    for n in result.flows.values:
        table.add_column(str(n), justify="right", no_wrap=True)
    for place in grid(dims):
        at = {d.name: i for d, i in zip(dims, place, strict=True)}
        table.add_row(_point(dims, place), *(state[:1].upper() or "-" for state in
                                             state_names(result.state.isel(at))))
    return table


def _servers(scenario: Scenario) -> int | None:
    """The senders an incast's flows are spread over, round-robin (None: not an incast, or a
    topology that does not count senders)."""
    return scenario.spec.topology.senders if scenario.spec.traffic.pattern == "incast" else None


def _table(result: xr.Dataset, name: str, point: str, servers: int | None = None) -> Table:
    """Per flow count: throughput, fairness, queueing latency, the largest queue, seed 001's
    convergence (time from which the queue stays below the standing-queue size), the state
    the point ends in and, with rounds, their goodput and how many completed; below, the states
    along the sweep in one line. `point`: the values of the other axes ("dctcp, threshold=20pkt";
    "" for none). `servers`: the incast's senders, to say what N is."""
    from pathflow.verdict import state_names, state_runs

    title = f"{name}{f' with {point}' if point else ''}: sweep over flows"
    standing = format_bytes(float(result.attrs["standing_queue"]))
    idle = (result.bottleneck_utilization < 0.5).values  # a short queue there says little
    states = state_names(result.state)
    # NaN rounds: the scenario has none (a count of 0 is rounds that none completed)
    rounds = "rounds_completed" in result and bool(result.rounds_completed.notnull().any())
    table = Table(title=title, title_justify="left", box=None, pad_edge=False,
                  collapse_padding=True, header_style="bold underline",
                  caption=f"state: {state_runs(result.flows.values, result.state.values)}"
                          + _cycles(result, states)
                          + f"\nlatency: queueing delay at the bottleneck (mean, p99); converged: "
                          f"the queue stays below {standing} from then on (seed 001)"
                          + ("; *: the bottleneck is less than half used, an idle link rather "
                             "than a converged one" if idle.any() else "")
                          + "; state: settled, oscillating (a limit cycle), lossy (standing "
                          "overflow), collapsed (a link under half used while it drops), "
                          "unsettled (pathflow.verdict)"
                          + (_rounds_caption(result, servers) if rounds else ""),
                  caption_justify="left")
    paused = bool((result.paused > 0).any())  # a lossless network: how long PFC held links
    predicted = "predicted_queue" in result
    for column in ("flows", "throughput", "Jain", "latency", "p99", "queue max", "converged",
                   "state", *(["paused"] if paused else []),
                   *(["goodput", "rounds"] if rounds else []),
                   *(["rest queue", "predicted"] if predicted else [])):
        table.add_column(column, justify="right", no_wrap=True)
    for i, n in enumerate(result.flows.values):
        point = result.isel(flows=i)
        below = float(point.below_standing)
        table.add_row(str(n), format_rate(float(point.aggregate_throughput)),
                      f"{float(point.jain):.2f}", format_time(float(point.latency_mean)),
                      format_time(float(point.latency_p99)),
                      format_bytes(float(point.queue_max)),
                      (format_time(below) if math.isfinite(below) else "no")
                      + ("*" if idle[i] else ""), str(states[i]),
                      *([f"{float(point.paused):.1%}"] if paused else []),
                      *([_goodput(float(point.round_goodput)),
                         str(int(point.rounds_completed))] if rounds else []),
                      *(_prediction(point) if predicted else []))
    return table


def _prediction(point: xr.Dataset) -> list[str]:
    """A point's predicted rest queue and verdict (`pathflow.analysis.predict`), in words."""
    queue = float(point.predicted_queue)
    stable = float(point.predicted_stable)
    if math.isnan(stable):
        verdict = "-"
    elif stable:
        verdict = f"settles in {format_time(float(point.predicted_settling_time))}"
    else:
        period = float(point.predicted_period)
        verdict = "unstable" + (f", {format_time(period)} cycle" if math.isfinite(period) else "")
    return [format_bytes(queue) if math.isfinite(queue) else "-", verdict]


def _goodput(rate: float) -> str:
    """A round goodput, or "none" where no round completed (NaN)."""
    return format_rate(rate) if math.isfinite(rate) else "none"


def _rounds_caption(result: xr.Dataset, servers: int | None) -> str:
    """What the rounds' columns are, and what a flow count is in an incast."""
    text = ("\ngoodput: the blocks of the completed barrier-synchronised rounds over their summed "
            "round times (traffic.rounds; none: no round completed); rounds: how many "
            "completed")
    if servers is None:
        return text
    shared = int((result.flows > servers).sum())
    return text + (f"; flows: the incast's servers N, one flow each, up to its {servers} senders"
                   + (f"; the {shared} points above {servers} flows have several flows sharing "
                      "a server (round-robin)" if shared else ""))


def _cycles(result: xr.Dataset, states: np.ndarray) -> str:
    """The oscillating points' period and swing ranges ("" if none oscillates)."""
    cycling = states == "oscillating"
    if not cycling.any():
        return ""
    return (f" (cycles of {_span(result.cycle_period.values[cycling], format_time)}, the queue "
            f"swinging {_span(result.queue_swing.values[cycling], format_bytes)})")


def _span(values: np.ndarray, show: Callable[[float], str]) -> str:
    """"low to high" of `values` as `show` writes them (one value if they read the same)."""
    low, high = show(float(values.min())), show(float(values.max()))
    return low if low == high else f"{low} to {high}"
