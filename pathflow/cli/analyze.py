"""`pathflow analyze`: what a scenario's network predicts before anything is simulated: each
flow's max-min and proportionally fair rate; for a control with a utility of its own (Reno,
DCTCP, uncoupled subflows, OLIA) its optimum at the base round trips; the model's rest state where
it has one, and whether that rest state is stable, with its margins and the time to settle
(`pathflow.analysis`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, NamedTuple

import numpy as np
import typer
import xarray as xr
from rich.table import Table

from pathflow.cli.console import console, setup_jax, user_errors
from pathflow.scenario import Scenario, ScenarioError, load_scenario
from pathflow.units import format_bytes, format_rate, format_time


def analyze(
    scenario_file: Annotated[Path, typer.Argument(metavar="SCENARIO.toml",
                                                  help="Scenario file (see run --help).")],
) -> None:
    """Predict each flow's rate from the network alone, in a second: max-min fair,
    proportionally fair, for Reno and DCTCP their own allocation (the optimum of their utility
    at the base round trips; queues lengthen them) and, where the model has one (Reno and DCTCP
    with reaction = "mean", DCQCN; on RED or DCQCN marking, and Reno and DCTCP on the ECN
    step), its rest state (rates and the queues that hold them) and, on marking ramps, its
    linear stability per bottleneck: stable or not, the rightmost root, the time to settle or
    the period of the oscillation, the phase margin, the critical loop delay and the gain
    margin. MPTCP connections (LIA, OLIA, BALIA, uncoupled; a path per subflow): the max-min
    and proportionally fair allocations with each connection pooling its paths, uncoupled
    subflows' and OLIA's own allocation (LIA and BALIA over several paths maximise no utility,
    which it says), their rest state and its stability."""
    with user_errors(scenario_file):
        # every CPU: no fluid steps here, and the stability margins' eigenproblems run a
        # batch per core (on one core the k = 8 fat-tree's margins took 2.4 s, not 1.3)
        setup_jax(0)
        scenario = load_scenario(scenario_file)
        names, columns, queues, stable, no_own = _predictions(scenario)
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
    if no_own:
        console.print(no_own)
    console.print(f"Rest state: {queues}")
    if isinstance(stable, str):
        console.print(f"Linear stability: {stable}")
    elif stable is not None:
        console.print(_stability_table(stable))
        for part in stable.component.values[stable.neutral.values > 0]:
            console.print(f"{_shortened(str(stable.links.values[part]))}: the rest state is "
                          "one of a line of "
                          f"them ({int(stable.neutral.values[part])} neutral direction(s): the "
                          "queued links' flow sets are linearly dependent, so queue can shift "
                          "among them without changing any flow's signal); its roots at 0 are "
                          "left out of the verdict")


# the controls with an allocation of their own (LIA and BALIA on single paths alone)
_OWN_NAMES = {"reno": "Reno", "dctcp": "DCTCP", "uncoupled": "uncoupled", "olia": "OLIA",
              "lia": "LIA", "balia": "BALIA"}
# a rest state's residual above which it is shown as approximate: rests found measured up to
# 3e-5 (OLIA's smoothed sliding mode on a k = 4 fat-tree; LIA's there 7e-6), stalls 1e-3 and up
_INEXACT = 1e-4


def _shortened(links: str) -> str:
    """A part's queued links, the first two and how many where there are more than three."""
    names = links.split(", ")
    return links if len(names) <= 3 else f"{', '.join(names[:2])}, ... ({len(names)} queues)"


def _stability_table(result: xr.Dataset) -> Table:
    """One row per bottleneck (connected part of the network) of `analysis.stability`."""
    table = Table(title="Linear stability of the rest state (root: rightmost characteristic "
                  "root, 1/s; settles: to 10 % of a small perturbation; PM: phase margin; GM: "
                  "gain margin)", title_justify="left")
    for column in ("queues", "flows", "verdict", "root", "settles", "period", "PM",
                   "critical delay", "GM"):
        table.add_column(column, justify="left" if column in ("queues", "verdict") else "right",
                         no_wrap=column == "root")
    for part in result.component.values:
        row = result.sel(component=part)
        stable, period = bool(row.stable), float(row.period)
        critical, gain = float(row.critical_delay), float(row.gain_margin)
        table.add_row(
            _shortened(str(row.links.item())), f"{float(row.flows):g}",
            "stable" if stable else "unstable",
            f"{float(row.root_real):.4g}{float(row.root_imag):+.4g}j",
            format_time(float(row.settling_time)) if stable else "never",
            format_time(period) if np.isfinite(period) else "none",
            f"{float(row.phase_margin):.3g} deg",
            format_time(critical) if np.isfinite(critical) else "-",
            f"{gain:.3g}" if np.isfinite(gain) else "inf")
    return table


class _Predictions(NamedTuple):
    names: list[str]  # per flow, "src->dst"
    columns: dict[str, np.ndarray]  # per prediction, each flow's rate (bytes/s)
    queues: str  # the rest state's non-empty queues, or why there is none, in words
    stable: xr.Dataset | str | None  # its stability, or why there is none (None: no rest)
    own: str  # why the control has no allocation of its own ("" where it has one or none)


def _predictions(scenario: Scenario) -> _Predictions:
    """What `analyze` prints of `scenario`."""
    from pathflow.analysis.equilibrium import equilibrium, rest_state
    from pathflow.analysis.fairness import (
        fair_allocations,
        multipath,
        network_of,
        own_allocation,
        per_flow,
    )
    from pathflow.analysis.stability import stability
    from pathflow.analysis.utility import rest_asymmetry
    from pathflow.compile import compile_scenario

    compiled = compile_scenario(scenario)
    names = [f"{flow.src}->{flow.dst}" for flow in compiled.routes.flows]
    pooled = " (pooled)" if multipath(compiled) else ""  # connections over several paths
    fair = fair_allocations(compiled)
    columns = {f"max-min{pooled}": fair["max_min"], f"proportional{pooled}": fair["proportional"]}
    network, _, _ = network_of(compiled, subflows=True)
    assert network.base_rtt is not None
    cc = scenario.si.transport.cc
    own = own_allocation(network, network.base_rtt, scenario,
                         np.asarray(compiled.problem.subflow_flow))
    if own is not None:
        columns[f"{_OWN_NAMES[cc]} (base RTT)"] = per_flow(compiled, own)
    no_own = "" if own is not None or cc not in _OWN_NAMES else (
        f"{_OWN_NAMES[cc]} over several paths has no allocation of its own: the prices at "
        "which its subflows rest are no utility's gradient, so its rest is no utility's "
        "optimum (pathflow.analysis.utility)")
    try:
        found = rest_state(scenario, compiled)
    except ScenarioError as why:  # the table stands without it; say why it is missing
        return _Predictions(names, columns, f"none derived ({why})", None, no_own)
    if no_own:
        asymmetric = rest_asymmetry(compiled, found.rate, found.rtt)
        no_own += f"; at the rest state their Jacobian is {asymmetric:.0%} from symmetric"
    rest = equilibrium(scenario, found)
    columns["rest state"] = rest.rate.values
    loaded = rest.queue.values > 0
    queues = ", ".join(f"{link} {format_bytes(float(q))}" for link, q in
                       zip(rest.link.values[loaded], rest.queue.values[loaded], strict=True))
    if rest.attrs["acks"] == "left out":
        queues = (f"{queues or 'no queue'} (ACKs left out: no rest state found with their "
                  "load; the simulation has them)")
    if rest.attrs["residual"] > _INEXACT:
        queues = (f"approximate (the root solver stalled at a residual of "
                  f"{rest.attrs['residual']:.1e}; 0 at a rest state): {queues or 'no queue'}")
    try:
        stable: xr.Dataset | str = stability(scenario, rest=found)
    except ScenarioError as why:  # a rest state without a linearisation (the ECN step)
        stable = f"none derived ({why})"
    return _Predictions(names, columns, queues or "no queue", stable, no_own)
