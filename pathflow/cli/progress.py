"""Long work on the console: the cost line and the question before it starts, then a progress
bar or spinner on a terminal, or a line per tenth in a log or a pipe."""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.progress import (
    BarColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from pathflow.cli.console import errors, fail
from pathflow.units import parse_size

if TYPE_CHECKING:
    from pathflow.cost import Cost

Yes = Annotated[bool, typer.Option("--yes", "-y", help=(
    "Start without asking when the estimated time is above an hour (without a terminal to "
    "ask on, such a run is refused unless --yes is given)."))]
MaxMemory = Annotated[str | None, typer.Option("--max-memory", metavar="SIZE", help=(
    "Refuse to start when the estimated memory exceeds SIZE, e.g. 8GB (default: the memory "
    "available now); a sweep also sizes its batches to it (records of a batch: a quarter of "
    "SIZE at most)."))]


def _interactive() -> bool:
    """Whether a question can be asked (standard input is a terminal)."""
    return sys.stdin.isatty()


def memory_limit(max_memory: str | None) -> float:
    """The bytes a run may take (`--max-memory`, else what is available)."""
    from pathflow.cost import available_memory

    if max_memory is None:
        return available_memory()
    return parse_size(max_memory, 1.0, "--max-memory")


def before_running(cost: Cost, what: str, quiet: bool, yes: bool, max_memory: str | None
                   ) -> None:
    """Refuse what cannot fit in memory, state the cost, and ask before what is estimated above
    an hour (refuse it without a terminal unless --yes)."""
    from pathflow.cost import CONFIRM_SECONDS, check_memory, describe

    check_memory(cost, memory_limit(max_memory), what, "available (--max-memory to change)"
                 if max_memory is None else "the limit (--max-memory)")
    line = f"{what}: {describe(cost)}"
    long = cost.seconds > CONFIRM_SECONDS
    if long and not yes and not _interactive():
        fail(f"{line}, above an hour; pass --yes to start it anyway (or a larger run.dt, a "
             "shorter run.duration)")
    if not quiet:
        errors.print(line, markup=False, highlight=False, soft_wrap=True)
    if long and not yes and not typer.confirm("Above an hour. Start it?", default=False,
                                              err=True):
        fail("not started; pass --yes to start without asking")


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
def progress(description: str, quiet: bool) -> Iterator[Callable[[float, float], None]]:
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
def preparing(description: str, quiet: bool) -> Iterator[Callable[[], None]]:
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
    spinning = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                        console=errors, transient=True)
    spinning.add_task(escape(description), total=None)
    spinning.start()
    try:
        yield spinning.stop
    finally:
        spinning.stop()


@contextmanager
def spinner(description: str, quiet: bool) -> Iterator[Callable[[str], None]]:
    """For work without a fraction done (a packet simulation, a calibration's phases): a spinner
    with the elapsed time; the yielded function names the current phase."""
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    with Progress(*columns, console=errors, transient=True, disable=quiet) as bar:
        task = bar.add_task(description, total=None)

        def phase(text: str) -> None:
            bar.update(task, description=text)

        yield phase
