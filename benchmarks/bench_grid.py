"""Issue 15's benchmark: sweeps over any key, batched across axes, in one process and on a dask
cluster.

- ``flows``: the DCTCP incast over flow counts alone, ``pathflow sweep examples/incast_10g.toml
  --flows 80:2000:240`` (9 points), as a user runs it (``python -m pathflow`` in a subprocess);
  wall time per point.
- ``grid``: the issue's grid on the same scenario, ``--set aqm.threshold=20pkt,40pkt,65pkt --set
  topology.link_rate=10Gbps,40Gbps --seeds 4`` (216 points); wall time per point. Batching
  across axes (one compiled program per size bucket whichever key varies) should make a grid
  point cheaper than a flow-count point: ratio = flows per point / grid per point.
- ``one CPU``: the same grid with ``--threads 1``, against ``grid``, which runs its chunks side
  by side on every CPU (the default): what the CPUs beside the first are worth in one process.
- ``workers``: the same grid with ``--workers 2`` against the in-process ``grid`` run: the
  overhead of going through dask on this machine (start-up of the local cluster included).

All runs share one JAX compilation cache (a fresh HOME for the first run, reused after), so the
first pays the compilations; the order (flows, grid, one CPU, workers) is fixed. ``--quick``
(the smoke run): 20 ms scenario, flows 80:320:240, thresholds 20pkt and 65pkt, 2 seeds. This is
a measurement, not a test: nothing here asserts on speed.

Usage::

    python benchmarks/bench_grid.py                 # about 6 minutes on 2 cores
    python benchmarks/bench_grid.py --quick --json figures.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "examples" / "incast_10g.toml"


def timed(arguments: list[str], home: str) -> float:
    """Wall time of `python -m pathflow sweep ARGUMENTS` with HOME at `home`."""
    env = dict(os.environ)
    env.setdefault("MPLCONFIGDIR", str(Path.home() / ".config" / "matplotlib"))
    env["HOME"] = home  # `pathflow` keeps its JAX cache in ~/.cache/pathflow/jax
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pathflow", "sweep", *arguments, "-q", "-y"],
                          cwd=home, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"pathflow sweep failed ({done.returncode}): {done.stderr[-1500:]}")
    return wall


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run (small grid)")
    parser.add_argument("--json", type=Path, help="write the figures to this file")
    args = parser.parse_args(argv)
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory(prefix="bench-grid-") as home:
        scenario = str(SCENARIO)
        if args.quick:
            from pathflow.scenario import load_scenario

            path = Path(home) / "incast.toml"
            path.write_text(load_scenario(SCENARIO).with_updates(
                {"run.duration": "20ms"}).to_toml())
            scenario = str(path)
        flows = "80:320:240" if args.quick else "80:2000:240"
        thresholds = "20pkt,65pkt" if args.quick else "20pkt,40pkt,65pkt"
        seeds = "2" if args.quick else "4"
        counts = len(range(80, (320 if args.quick else 2000) + 1, 240))
        grid = [scenario, "--flows", flows, "--set", f"aqm.threshold={thresholds}",
                "--set", "topology.link_rate=10Gbps,40Gbps", "--seeds", seeds]
        points = counts * len(thresholds.split(",")) * 2 * int(seeds)
        cases: list[dict[str, Any]] = []
        for name, arguments, n in (("flows", [scenario, "--flows", flows], counts),
                                   ("grid", grid, points),
                                   ("one CPU", [*grid, "--threads", "1"], points),
                                   ("workers", [*grid, "--workers", "2"], points)):
            out = Path(home) / f"{name.replace(' ', '_')}.zarr"
            wall = timed([*arguments, "-o", str(out)], home)
            cases.append({"case": name, "command": " ".join(arguments), "points": n,
                          "wall_s": wall, "per_point_s": wall / n})
    by = {case["case"]: case for case in cases}
    print(f"{'case':<9}{'points':>7}{'wall s':>9}{'s per point':>13}  command")
    for case in cases:
        print(f"{case['case']:<9}{case['points']:>7}{case['wall_s']:>9.1f}"
              f"{case['per_point_s']:>13.3f}  {case['command']}")
    cheaper = by["flows"]["per_point_s"] / by["grid"]["per_point_s"]
    print(f"grid point vs flow-count point: {cheaper:.1f}x cheaper (batching across axes)")
    print(f"in-process on every CPU vs one: {by['one CPU']['wall_s'] / by['grid']['wall_s']:.2f}x "
          "faster (chunks side by side)")
    print(f"--workers 2 vs in-process: {by['workers']['wall_s'] / by['grid']['wall_s']:.2f}x the "
          "wall time (dask's overhead, local cluster start-up included)")
    if args.json:
        args.json.write_text(json.dumps({"cases": cases}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
