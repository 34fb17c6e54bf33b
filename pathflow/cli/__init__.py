"""The `pathflow` command: run a scenario, sweep flow counts, validate, calibrate, analyze.

Errors in the user's input print one line naming the field and what is allowed, and exit with
code 2; nothing already computed is lost (a sweep writes its finished points before it stops).

One module per command; `console` and `progress` hold what the commands share. The commands
import what they compute with (the packet simulator, plots, the validation package) inside their
bodies, so that `pathflow --help` does not load it.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
import warnings
from typing import Annotated, NoReturn

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
    reports an interrupted program, without a traceback. The process ends as soon as the
    command is done (`_exit`)."""
    try:
        app()
    except SystemExit as done:
        _exit(done.code)
    except KeyboardInterrupt:
        _exit(130)
    _exit(0)


def _exit(code: object) -> NoReturn:
    """End the process with `code` as `sys.exit` would, without the interpreter's teardown:
    freeing JAX's client and the few thousand modules a command loads, one object at a time,
    took 0.3 to 0.4 s of every command (`pathflow analyze` on the k = 8 fat-tree: 5.0 -> 4.6 s).
    The exit handlers still run and the output is flushed; what a command writes is complete
    when it returns (files are written whole and moved into place, `pathflow.atomic`, the
    sweep's store point by point). Where another thread still runs, the usual exit, which
    waits for it."""
    if any(thread.is_alive() and not thread.daemon for thread in threading.enumerate()
           if thread is not threading.current_thread()):
        sys.exit(code)
    if code is None or isinstance(code, int):
        status = code or 0
    else:  # sys.exit("message"): the message on stderr, status 1
        print(code, file=sys.stderr)
        status = 1
    atexit._run_exitfuncs()  # CPython's, as at a normal exit: temporary folders, logging
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe, a closed stream
            stream.flush()
    os._exit(status)
