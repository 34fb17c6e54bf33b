"""`pathflow analyze`: what a scenario's network predicts before anything is simulated: each
flow's max-min and proportionally fair rate and, for Reno, the optimum of Reno's utility at the
base round trips (`pathflow.analysis.fairness`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from pathflow.cli.console import console, setup_jax, user_errors
from pathflow.scenario import load_scenario
from pathflow.units import format_rate


def analyze(
    scenario_file: Annotated[Path, typer.Argument(metavar="SCENARIO.toml",
                                                  help="Scenario file (see run --help).")],
) -> None:
    """Predict each flow's rate from the network alone, in a second: max-min fair, proportionally
    fair and, for Reno, its own allocation (the optimum of -2 / (b T^2 x) at the base round
    trips: queues lengthen them, so a run's rates sit between this and proportional fairness
    where round trips differ). Single-path flows."""
    with user_errors():
        setup_jax(1)
        from pathflow.analysis.fairness import alpha_fair, max_min, network_of, reno_allocation

        scenario = load_scenario(scenario_file)
        network, controller, names = network_of(scenario)
        columns = {"max-min": max_min(network), "proportional": alpha_fair(network, 1.0)}
        transport = scenario.si.transport
        if transport.cc == "reno":
            assert network.base_rtt is not None
            columns["Reno (base RTT)"] = reno_allocation(network, network.base_rtt,
                                                         transport.mss,
                                                         transport.parameters["ack_ratio"])
    table = Table(title=f"{scenario.name}: rates predicted from the network alone",
                  title_justify="left")
    for column in ("flow", "src -> dst", *columns):
        table.add_column(column, justify="left" if column in ("flow", "src -> dst") else "right")
    shown = min(controller.size, 20)
    for flow in range(shown):
        table.add_row(str(flow), names[flow].replace("->", " -> "),
                      *(format_rate(float(rates[controller[flow]])) for rates in columns.values()))
    if controller.size > shown:
        table.add_row("...", f"{controller.size} flows", *("" for _ in columns))
    console.print(table)
