"""pathflow: fluid-model congestion-control analysis over multipath networks, solved with JAX.

    >>> import pathflow
    >>> scenario = pathflow.load_scenario("scenario.toml")
    >>> ds = pathflow.simulate(scenario)          # xarray.Dataset: queue, flow_rate, cwnd, ...
    >>> pathflow.metrics.summarize(ds)
    >>> grid = pathflow.sweep(scenario, "80:2000", set={"aqm.threshold": "20pkt,40pkt"})

pathflow computes in float64 by default (DESIGN §4), so importing it enables JAX's x64 mode.
"""

from __future__ import annotations

import jax

jax.config.update("jax_enable_x64", True)

__version__ = "0.1.0"

from pathflow import dask_probe  # noqa: E402

dask_probe.defer()  # the first Dataset would otherwise import dask (0.7 s)

from pathflow import metrics, verdict  # noqa: E402
from pathflow.scenario import Scenario, ScenarioError, load_scenario  # noqa: E402
from pathflow.simulate import simulate  # noqa: E402
from pathflow.sweeps import sweep  # noqa: E402

__all__ = ["Scenario", "ScenarioError", "__version__", "load_scenario", "metrics", "simulate",
           "sweep", "verdict"]
