"""Hotspots across hash seeds: which links ECMP makes hot, and how often.

Per-flow ECMP hashing (`pathflow.routing`) decides which flows share a fabric link, so whether a
link is hot is a matter of the hash seed. `seed_hotspots` runs one scenario under a batch of seeds
(`[run] seed`) as one batched solve (`pathflow.batch.compile_together` and `run_together`: one
compiled program, chunks of about 1 GB merged into one problem) and returns, per seed and link,
the steady-window load, and per link the probability over the seeds of being a bottleneck. The
seeds of a batch share one time step, the finest any of them needs (`compile_together`); where
that is each seed's own step, a seed's values are those of its run alone.

Scope: the seed is the scenario's `[run] seed`, which also draws the random parts of the traffic
(the `permutation` and `random` patterns, `start_jitter`); for those patterns the seeds vary the
traffic matrix as well as the hash, as a study of random permutations under ECMP does. Use a fixed
pattern (`stride`, `explicit`, `incast`, `one_to_one`) to vary the hash alone. Any routing mode
runs; under `spray`, `shortest` and a fixed pattern every seed gives the same answer. MPTCP
subflows hashed per subflow with the same seed need nothing more here: everything below is
per link, whatever the routes.

Definitions (per seed; steady window t > warmup, the scenario's `[run] warmup`, else the last
three quarters of the run, as `pathflow.metrics` uses):

- `utilization`: mean departure rate over capacity; `queue_mean`: mean queue (bytes).
- `bottleneck`: the link sends at capacity and holds a standing queue: mean utilization above
  `UTILIZATION` (0.95) and mean queue above `QUEUE_PACKETS` (1) packet, as
  `metrics.bottleneck_frequency` counts. In the fluid model a queue grows only where the
  arrivals exceed the capacity, so such a link is where the rates of the flows that cross it are
  held down (their controllers see its marks, drops or delay). Why not "the most utilized link
  on a flow's path": a flow alone at line rate runs every link of its path at 100 %, and the link
  after a bottleneck of the same capacity is as busy as the bottleneck itself, so utilization
  alone cannot tell which link limits; and under multipath routing (spraying, MPTCP subflows) a
  flow's rate is not its rate on any one link. The queue test needs neither paths nor per-path
  rates, so it means the same for single-path and multipath routes. Limits: a link that two
  flows held elsewhere fill almost exactly may keep a queue of a few packets and count; a
  loss-based control with a buffer far below the bandwidth-delay product may leave its
  bottleneck below 95 % and not count (DCTCP and data-centre buffers keep it near 100 %).
- Host links: a sender's NIC never queues in the fluid model (backpressure, `solvers.dde`), so it
  is never a bottleneck; a switch port to a host can be (an incast's receiver), but its load is
  set by the traffic pattern, not the hash. Every link keeps its values, flagged by the `host_link`
  coordinate (either end is a host); the summaries of ECMP load, `max_utilization` and
  `max_offered`, and the command line's table cover the fabric links (both ends switches) only.
- `offered`: flows offered to the link by the routes alone (`Routes.flows_per_link`: a flow
  counts with the share of it its paths across the link carry); `max_offered` is its largest
  value over fabric links, the "largest link load" of ECMP collision studies (2 or more: two
  flows hashed onto one link). `max_utilization` is the largest fabric-link utilization.
- `aggregate_throughput`: the sum of the flows' mean delivered rates (bytes/s).
- `violations`: the invariants the seed's run breaks (`pathflow.invariants`, as `simulate`
  checks them), "" when all hold.
- `bottleneck_probability`: per link, the fraction of seeds in which it is a bottleneck.

Validated by tests/test_hotspots.py: on a k = 4 fat-tree under ECMP the bottlenecks of every seed
agree with what the routes of `routing.build_routes` alone decide (a link no two flows share never
is one, a collision that is the only one on some flow's path always is, a shared link that max-min
fair rates leave below 90 % is not), spraying gives the same answer for every seed, a batch gives
each seed the utilization and queues of a run of that seed alone (`pathflow.simulate`), and
`pathflow run --seeds` prints the table and refuses bad input in one line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import xarray as xr

from pathflow.batch import Progress, compile_together, run_together
from pathflow.invariants import check_invariants
from pathflow.metrics import default_warmup, throughput
from pathflow.scenario import Scenario, ScenarioError

if TYPE_CHECKING:
    from pathflow.compile import Compiled

__all__ = ["QUEUE_PACKETS", "UTILIZATION", "seed_hotspots", "seed_list"]

UTILIZATION = 0.95  # a bottleneck sends above this fraction of its capacity ...
QUEUE_PACKETS = 1.0  # ... and holds a mean queue above this many packets


def seed_list(scenario: Scenario, seeds: int | list[int]) -> list[int]:
    """The seeds to run: N -> `[run] seed` .. `[run] seed` + N - 1; a list as given (distinct)."""
    if isinstance(seeds, int):
        if seeds < 1:
            raise ScenarioError(f"seeds: must be at least 1 (got {seeds})")
        first = scenario.si.run.seed
        return list(range(first, first + seeds))
    chosen = [int(s) for s in seeds]
    if not chosen or len(set(chosen)) != len(chosen):
        raise ScenarioError(f"seeds: need one or more distinct seeds (got {chosen})")
    return chosen


def seed_hotspots(scenario: Scenario, seeds: int | list[int], progress: Progress | None = None,
                  *, before_run: Callable[[list[Compiled]], None] | None = None
                  ) -> xr.Dataset:
    """Run `scenario` under every seed of `seeds` (see `seed_list`) as one batch and return the
    hotspot Dataset of the module docstring: dims `seed` and `link`. `progress(done, total)`
    counts seeds; `before_run` sees the compiled seeds before any runs (to state the cost, or
    refuse by raising)."""
    chosen = seed_list(scenario, seeds)
    compiled = compile_together([scenario.with_updates({"run.seed": s}) for s in chosen])
    if before_run is not None:
        before_run(compiled)
    rows: dict[int, dict[str, np.ndarray | float | str]] = {}
    first: xr.Dataset | None = None
    for chunk in run_together(compiled, progress):
        for c, ds in chunk:
            rows[c.scenario.si.run.seed] = _per_seed(c, ds)
            first = ds if first is None else first
    assert first is not None  # at least one seed ran
    return _combine(chosen, rows, first, scenario, set(compiled[0].network.hosts))


def _per_seed(compiled: Compiled, ds: xr.Dataset) -> dict[str, np.ndarray | float | str]:
    """What the Dataset keeps of one seed's run."""
    steady = ds.sel(time=ds.time > default_warmup(ds))
    utilization = steady.utilization.mean("time").values
    queue = steady.queue.mean("time").values
    packet = float(ds.attrs["packet_bytes"])
    offered = compiled.routes.flows_per_link(compiled.network)
    return {
        "utilization": utilization,
        "queue_mean": queue,
        "bottleneck": (utilization > UTILIZATION) & (queue > QUEUE_PACKETS * packet),
        "offered": np.array([offered.get(str(name), 0.0) for name in ds.link.values]),
        "aggregate_throughput": float(throughput(ds).sum()),
        "violations": _violations(compiled, ds),
    }


def _violations(compiled: Compiled, ds: xr.Dataset) -> str:
    """The invariants (`pathflow.invariants`) one seed's run breaks, as `pathflow.simulate`
    checks them: "" when all hold, else "name: detail; ..."."""
    report = check_invariants(ds, min_cwnd_bytes=compiled.scenario.si.min_cwnd_bytes)
    return "; ".join(f"{name}: {verdict.detail}" for name, verdict in report.violations.items())


def _fabric_max(values: xr.DataArray, fabric: np.ndarray) -> xr.DataArray:
    """Per seed, the largest value over fabric links (nan where the network has none)."""
    if not fabric.any():
        return xr.full_like(values.isel(link=0, drop=True), np.nan, dtype=float)
    return values.isel(link=np.flatnonzero(fabric)).max("link")


def _combine(seeds: list[int], rows: dict[int, dict[str, np.ndarray | float | str]],
             first: xr.Dataset, scenario: Scenario, hosts: set[str]) -> xr.Dataset:
    """The hotspot Dataset of the seeds' rows, in the order of `seeds`."""
    src, dst = first.link_src.values, first.link_dst.values
    host_link = np.array([str(a) in hosts or str(b) in hosts
                          for a, b in zip(src, dst, strict=True)])

    def stack(key: str) -> np.ndarray:
        return np.stack([np.asarray(rows[s][key]) for s in seeds])

    dims = ("seed", "link")
    out = xr.Dataset(
        {
            "utilization": (dims, stack("utilization"), {
                "units": "1", "long_name": "steady-window mean utilization"}),
            "queue_mean": (dims, stack("queue_mean"), {
                "units": "bytes", "long_name": "steady-window mean queue"}),
            "bottleneck": (dims, stack("bottleneck").astype(bool), {
                "units": "1", "long_name": f"utilization > {UTILIZATION} and mean queue > "
                                           f"{QUEUE_PACKETS:g} packet"}),
            "offered": (dims, stack("offered"), {
                "units": "flows", "long_name": "flows offered by the routes"}),
            "aggregate_throughput": ("seed", np.array([rows[s]["aggregate_throughput"]
                                                       for s in seeds]), {
                "units": "bytes/s", "long_name": "sum of the flows' mean delivered rates"}),
            "violations": ("seed", np.array([str(rows[s]["violations"]) for s in seeds]), {
                "long_name": "invariants broken (pathflow.invariants), empty when all hold"}),
        },
        coords={
            "seed": np.asarray(seeds),
            "link": first.link.values,
            "link_src": ("link", src),
            "link_dst": ("link", dst),
            "link_tier": ("link", first.link_tier.values),
            "capacity": ("link", first.capacity.values, {"units": "bytes/s"}),
            "host_link": ("link", host_link),
        },
    )
    fabric = ~host_link
    out["max_utilization"] = _fabric_max(out.utilization, fabric)
    out["max_utilization"].attrs = {"units": "1",
                                    "long_name": "largest fabric-link mean utilization"}
    out["max_offered"] = _fabric_max(out.offered, fabric)
    out["max_offered"].attrs = {"units": "flows",
                                "long_name": "largest number of flows offered to a fabric link"}
    out["bottleneck_probability"] = out.bottleneck.astype(float).mean("seed")
    out["bottleneck_probability"].attrs = {"units": "1",
                                           "long_name": "fraction of seeds with a bottleneck"}
    out.attrs = {key: first.attrs[key] for key in ("engine", "pathflow_version", "packet_bytes",
                                                   "sample_interval")}
    out.attrs.update({"scenario": scenario.to_toml(), "scenario_name": scenario.name,
                      "warmup_s": default_warmup(first), "flows": first.sizes["flow"],
                      "simulated_s": float(first.time[-1]), "bottleneck_utilization": UTILIZATION,
                      "bottleneck_queue_packets": QUEUE_PACKETS})
    return out

