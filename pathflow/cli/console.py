"""What every command shares: the two consoles, bad input as one line with exit code 2, output
paths checked before the work and written after it, and the JAX setup."""

from __future__ import annotations

import os
import re
import typing
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from rich.console import Console

from pathflow import compilation_cache
from pathflow.atomic import write_atomically
from pathflow.scenario import Run, ScenarioError
from pathflow.units import UnitError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pathflow.scenario import Scenario

console = Console()
# progress, warnings and errors go to stderr, so that stdout holds only the results
errors = Console(stderr=True)


def show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                 file: object = None, line: str | None = None) -> None:
    """`warnings.showwarning` for the commands: one "warning:" line on stderr, as a person
    reads it, where Python would print its source file and line."""
    errors.print(f"warning: {message}", markup=False, highlight=False, soft_wrap=True)


def fail(message: str) -> NoReturn:
    """Bad input: one line on stderr and exit code 2."""
    errors.print(f"error: {message}", markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(2)


# an error about a field of the scenario file ("routing.paths[0].nodes: ...", "routing: ...")
_SCENARIO_FIELD = re.compile(r"(name|topology|aqm|traffic|transport|routing|run)[.\[:]")


@contextmanager
def user_errors(scenario_file: Path | None = None) -> Iterator[None]:
    """Bad input -> one line on stderr and exit code 2, never a traceback. An error about a
    field of `scenario_file` found once it is read (its network, routes or traffic: building
    them finds what the file's schema cannot) names the file, as its reading's errors do."""
    try:
        yield
    except (ScenarioError, UnitError) as error:
        message = str(error)
        if scenario_file is not None and _SCENARIO_FIELD.match(message):
            message = f"{Path(scenario_file).name}: {message}"
        fail(message)


def check_writable(path: Path | None, option: str, store: bool = False) -> None:
    """Refuse an output path before the work starts, not after. A `store` (a zarr store) is a
    directory, and must not be a file."""
    if path is None:
        return
    if not path.resolve().parent.is_dir():
        raise ScenarioError(f"{option}: directory {str(path.parent)!r} does not exist")
    if path.exists() and path.is_dir() != store:
        raise ScenarioError(f"{option}: {str(path)!r} is a {'file' if store else 'directory'}, "
                            f"not a {'zarr store' if store else 'file'}")
    if not os.access(path.resolve().parent, os.W_OK) or (path.exists()
                                                         and not os.access(path, os.W_OK)):
        raise ScenarioError(f"{option}: {str(path)!r} is not writable (permission denied)")


def check_figure(path: Path | None, option: str) -> None:
    """`check_writable`, and a suffix that names an image format matplotlib writes (it chooses
    the format by the suffix)."""
    check_writable(path, option)
    if path is None:
        return
    from matplotlib.figure import Figure

    formats = sorted(Figure().canvas.get_supported_filetypes())
    if path.suffix.lower().lstrip(".") not in formats:
        raise ScenarioError(f"{option}: {str(path)!r} needs an image suffix (one of "
                            f"{', '.join('.' + f for f in formats)})")


def write_output(path: Path, option: str, write: Callable[[Path], object]) -> None:
    """Write an output whole or not at all (`pathflow.atomic`); a failure at the end (disk full,
    a directory removed meanwhile) is one line, like any other bad input."""
    try:
        write_atomically(path, write)
    except OSError as error:
        fail(f"{option}: cannot write {str(path)!r} ({error.strerror or error})")
    console.print(f"wrote {path}", markup=False, highlight=False)


Threads = Annotated[int, typer.Option("--threads", min=0, help="CPUs for the solver (0: all). "
                                      "One is fastest for most fluid runs.")]


def setup_jax(threads: int) -> None:
    """Persistent compilation cache, and the CPU threads XLA may use. A fluid step is many small
    kernels; handing them between threads costs more than it saves (measured 2.5x slower per
    step with two threads than with one on the DCTCP star; see benchmarks/README.md), so the
    command runs on one CPU unless told otherwise. Must run before JAX's first operation."""
    if threads > 0 and hasattr(os, "sched_setaffinity"):
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, set(cpus[:threads]))
    compilation_cache.enable()


DEVICES = {"cpu": "cpu", "gpu": "cuda"}  # --device -> JAX's platform name
PRECISIONS = typing.get_args(Run.model_fields["precision"].annotation)  # run.precision's

Device = Annotated[str, typer.Option(
    "--device", metavar="cpu|gpu",
    help="Where JAX computes: cpu, or gpu (JAX's CUDA backend; pip install pathflow[gpu] on a "
         "machine with an NVIDIA GPU). The CPU is the default even where a GPU is present: "
         "float64 is the default precision, and GPUs are fast in float32.")]
Precision = Annotated[str | None, typer.Option(
    "--precision", metavar="float64|float32",
    help="Set run.precision for every point (default: the scenario's own, float64 unless it "
         "says otherwise). float32 is for GPUs; docs/architecture.md \"Precision\" says which "
         "results it keeps within what tolerance of float64.")]


def setup_device(device: str) -> None:
    """Choose JAX's backend (`--device`). Must run before JAX's first operation: JAX fixes its
    platforms when it first initialises them, and later changes of `jax_platforms` are ignored.
    Asking for the CPU explicitly keeps a machine with JAX's CUDA build from putting a float64
    run on its GPU unasked; asking for the GPU where JAX finds none is one line and exit code 2,
    not JAX's traceback (on a fresh process a missing CUDA plugin raises a bare
    AssertionError)."""
    if device not in DEVICES:
        fail(f"--device: unknown device {device!r}; allowed: {', '.join(DEVICES)}")
    import jax

    earlier = jax.config.jax_platforms
    jax.config.update("jax_platforms", DEVICES[device])
    if device == "cpu":
        return
    try:
        found = jax.devices("gpu")
    except Exception:  # RuntimeError (no such backend), AssertionError (no CUDA plugin), ...
        found = []
    if not found:
        jax.config.update("jax_platforms", earlier)  # leave an in-process caller usable
        fail("--device gpu: JAX finds no GPU (install pathflow[gpu], JAX's CUDA build, on a "
             "machine with an NVIDIA GPU)")


def accelerate(scenario: Scenario, keys: Mapping[str, object], device: str,
               precision: str | None) -> Scenario:
    """`--device` and `--precision` of a sweep: the backend chosen (`setup_device`) and the
    scenario with `run.precision` set, so that every point of the grid (`keys`, the swept
    dotted keys) computes in it. `--precision` beside `--set run.precision=...` is refused:
    the one fixes what the other sweeps."""
    if precision is not None:
        if precision not in PRECISIONS:
            fail(f"--precision: unknown precision {precision!r}; allowed: {', '.join(PRECISIONS)}")
        if "run.precision" in keys:
            fail("--precision: cannot be combined with --set run.precision (which sweeps it); "
                 "give one of the two")
        scenario = scenario.with_updates({"run.precision": precision})
    setup_device(device)
    return scenario
