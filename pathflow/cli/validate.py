"""`pathflow validate`: the registered validation cases run into a report; exit code 1 when a
claimed check fails."""

from __future__ import annotations

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
)

if TYPE_CHECKING:
    from pathflow.validation.registry import Case


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
    with user_errors():
        check_writable(output, "--output")
        setup_jax(threads)
        from pathflow.validation.report import amount, run_cases, tally, verdict, write_report

        def announce(item: Case) -> None:
            errors.print(f"running {item.name}: {item.title}", highlight=False)

        try:
            results = run_cases(fast=fast, names=case, progress=announce)
        except ValueError as error:
            fail(str(error))
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
