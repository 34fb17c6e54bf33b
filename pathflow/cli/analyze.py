"""`pathflow analyze`: what a scenario's network predicts before anything is simulated: each
flow's max-min and proportionally fair rate; for Reno, the optimum of Reno's utility at the base
round trips; and the model's rest state where it has one (`pathflow.analysis`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import numpy as np
import typer
from rich.table import Table

from pathflow.cli.console import console, setup_jax, user_errors
from pathflow.scenario import Scenario, ScenarioError, load_scenario
from pathflow.units import format_bytes, format_rate


def analyze(
    scenario_file: Annotated[Path, typer.Argument(metavar="SCENARIO.toml",
                                                  help="Scenario file (see run --help).")],
) -> None:
    """Predict each flow's rate from the network alone, in a second: max-min fair, proportionally
    fair, for Reno its own allocation (the optimum of -2 / (b T^2 x) at the base round trips;
    queues lengthen them) and, where the model has one (Reno with reaction = "mean", DCQCN, on
    RED or DCQCN marking), its rest state: rates and the queues that hold them. Single-path
    flows."""
    with user_errors():
        setup_jax(1)
        scenario = load_scenario(scenario_file)
        names, columns, queues = _predictions(scenario)
    table = Table(title=f"{scenario.name}: rates predicted from the network alone",
                  title_justify="left")
    for column in ("flow", "src -> dst", *columns):
        table.add_column(column, justify="left" if column in ("flow", "src -> dst") else "right")
    shown = min(len(names), 20)
    for flow in range(shown):
        table.add_row(str(flow), names[flow].replace("->", " -> "),
                      *(format_rate(float(rates[flow])) for rates in columns.values()))
    if len(names) > shown:
        table.add_row("...", f"{len(names)} flows", *("" for _ in columns))
    console.print(table)
    console.print(f"Rest state: {queues}")


def _predictions(scenario: Scenario) -> tuple[list[str], dict[str, np.ndarray], str]:
    """Per flow: its "src->dst" and each prediction's rate (bytes/s); the rest state's
    non-empty queues, or why there is none, in words."""
    from pathflow.analysis.equilibrium import equilibrium
    from pathflow.analysis.fairness import alpha_fair, max_min, network_of, reno_allocation
    from pathflow.compile import compile_scenario

    network, controller, names = network_of(compile_scenario(scenario))
    columns = {"max-min": max_min(network)[controller],
               "proportional": alpha_fair(network, 1.0)[controller]}
    transport = scenario.si.transport
    if transport.cc == "reno":
        assert network.base_rtt is not None
        columns["Reno (base RTT)"] = reno_allocation(
            network, network.base_rtt, transport.mss, transport.parameters["ack_ratio"]
        )[controller]
    try:
        rest = equilibrium(scenario)
    except ScenarioError as why:  # the table stands without it; say why it is missing
        return names, columns, f"none derived ({why})"
    columns["rest state"] = rest.rate.values
    loaded = rest.queue.values > 0
    queues = ", ".join(f"{link} {format_bytes(float(q))}" for link, q in
                       zip(rest.link.values[loaded], rest.queue.values[loaded], strict=True))
    return names, columns, queues or "no queue"
