"""The `pathflow` command: run a scenario, sweep flow counts, validate, calibrate, analyze.

Errors in the user's input print one line naming the field and what is allowed, and exit with
code 2; nothing already computed is lost (a sweep writes its finished points before it stops).

One module per command; `console` and `progress` hold what the commands share. The commands
import what they compute with (the packet simulator, plots, the validation package) inside their
bodies, so that `pathflow --help` does not load it.
"""

from __future__ import annotations

import sys
import warnings
from typing import Annotated

import typer

from pathflow import __version__
from pathflow.cli import analyze, calibrate, run, sweep, validate
from pathflow.cli.console import console, show_warning
from pathflow.vocabulary import REFERENCE

__all__ = ["app", "main"]

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  pretty_exceptions_enable=False,
                  help="pathflow: fluid-model congestion-control analysis (Reno, DCTCP, MPTCP, "
                       "DCQCN) over multipath networks, solved with JAX; a packet-level "
                       "reference simulator; calibration against measured queues.")


def _version(value: bool) -> None:
    if value:
        console.print(f"pathflow {__version__}")
        raise typer.Exit()


@app.callback()
def _main(version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                                 help="Print the version and exit.")] = False
          ) -> None:
    """pathflow: fluid-model congestion-control analysis over multipath networks."""
    warnings.showwarning = show_warning  # e.g. a scenario's warnings, as they are met


# in the order `pathflow --help` lists them; `run --help` ends with every scenario key
app.command(epilog=REFERENCE)(run.run)
app.command()(sweep.sweep)
app.command()(validate.validate)
app.command()(calibrate.calibrate)
app.command()(analyze.analyze)


def main() -> None:
    """The console script: Ctrl-C outside a command's own handling exits with 130, as a shell
    reports an interrupted program, without a traceback."""
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
