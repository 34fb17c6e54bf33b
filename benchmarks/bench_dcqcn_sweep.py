"""Issue 10's benchmark: the default sweep (seed 001's RDMA incast, DCQCN and DCQCN+ side by side)
and its points against the packet-level reference.

- ``sweep``: ``pathflow sweep --flows 80:2000`` as a user runs it (25 flow counts x 2 controls):
  ``python -m pathflow`` in a subprocess whose HOME is an empty folder, so that the JAX
  compilation cache is cold; wall time (compile included) and the subprocess's peak RSS.
  Target: at most 60 s on the project's 2-core machine.
- ``points``: the sweep's scenario (``pathflow/scenarios/dcqcn_incast.toml`` in the sweep's
  ``DEFAULT_FORM``: each flow's cuts drawn, a host's flows as 4 sample paths; 200 ms) at N = 80
  and N = 640 for each control, one run at a time in this process: the fluid model end to end
  (``pathflow.simulate``; first call, compiling, and second call, compiled) against the packet
  level (``simulate_packets``, numba kernels loaded by a warm-up call first); ratio = packet /
  fluid (second call). The sweep's own time per point (its wall time / points) is printed beside.

``--quick`` (smoke run, a minute or two): flows 80:160:80, 2 ms runs, N = 80 only.
This is a measurement, not a test: nothing here asserts on speed.

Usage::

    python benchmarks/bench_dcqcn_sweep.py                 # about 3 minutes
    python benchmarks/bench_dcqcn_sweep.py --quick --json figures.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

CONTROLS = ("dcqcn", "dcqcn+")


def scenario(flows: int, cc: str, duration: str | None = None) -> Any:
    """The default sweep's scenario (`cli.sweep.default_sweep_scenario`) at `flows` flows
    under `cc`."""
    from pathflow.cli.sweep import default_sweep_scenario

    base = default_sweep_scenario().with_cc(cc)
    updates: dict[str, Any] = {"traffic.flows": flows}
    if duration is not None:
        updates |= {"run.duration": duration, "run.warmup": None}
    return base.with_updates(updates)


def sweep_case(quick: bool) -> dict[str, Any]:
    """`python -m pathflow sweep` with a cold JAX cache (fresh HOME)."""
    with tempfile.TemporaryDirectory(prefix="bench-dcqcn-sweep-") as tmp:
        env = dict(os.environ)
        env.setdefault("MPLCONFIGDIR", str(Path.home() / ".config" / "matplotlib"))
        env["HOME"] = tmp  # `pathflow` keeps its JAX cache in ~/.cache/pathflow/jax
        command = [sys.executable, "-m", "pathflow", "sweep", "--quiet", "--yes", "-o",
                   str(Path(tmp) / "sweep.nc")]
        if quick:
            path = Path(tmp) / "incast.toml"
            path.write_text(scenario(80, "dcqcn", "2ms").to_toml())
            command += [str(path), "--cc", ",".join(CONTROLS), "--flows", "80:160:80"]
            points = 2 * len(CONTROLS)
        else:
            command += ["--flows", "80:2000"]
            points = 25 * len(CONTROLS)
        start = time.perf_counter()
        done = subprocess.run(command, cwd=tmp, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"pathflow sweep failed ({done.returncode}): {done.stderr[-1500:]}")
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    return {"case": "sweep", "command": " ".join(command[2:]), "wall_s": wall,
            "points": points, "per_point_s": wall / points, "peak_rss_bytes": peak}


def point_case(flows: int, cc: str, duration: str | None) -> dict[str, Any]:
    """One point in both engines: fluid cold and compiled, packet with its kernels loaded."""
    import pathflow
    from pathflow.validation.packet import simulate_packets

    one = scenario(flows, cc, duration)
    fluid = []
    for _ in range(2):
        start = time.perf_counter()
        pathflow.simulate(one)
        fluid.append(time.perf_counter() - start)
    start = time.perf_counter()
    packets = simulate_packets(one)
    packet = time.perf_counter() - start
    return {"case": f"{cc} N={flows}", "fluid_first_s": fluid[0], "fluid_s": fluid[1],
            "packet_s": packet, "packet_events": int(packets.attrs.get("events", 0)),
            "ratio": packet / fluid[1]}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run (short runs, N = 80)")
    parser.add_argument("--json", type=Path, help="write the figures to this file")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")  # DCQCN without PFC etc. is not what is measured here
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    sweep = sweep_case(args.quick)
    print(f"sweep: {sweep['command']}\n  {sweep['points']} points, cold: {sweep['wall_s']:.1f} s "
          f"(target <= 60 s), {sweep['per_point_s']:.2f} s per point, peak RSS "
          f"{sweep['peak_rss_bytes'] / 1e9:.2f} GB")

    from pathflow.validation.packet import simulate_packets

    simulate_packets(scenario(8, "dcqcn", "0.1ms"))  # load (or compile) the numba kernels
    points = []
    print(f"{'point':<16}{'fluid first s':>14}{'fluid s':>10}{'packet s':>10}"
          f"{'ratio pkt/fluid':>17}")
    for flows in (80,) if args.quick else (80, 640):
        for cc in CONTROLS:
            point = point_case(flows, cc, "2ms" if args.quick else None)
            points.append(point)
            print(f"{point['case']:<16}{point['fluid_first_s']:>14.2f}{point['fluid_s']:>10.2f}"
                  f"{point['packet_s']:>10.2f}{point['ratio']:>16.1f}x")
    if args.json:
        args.json.write_text(json.dumps({"cases": [sweep, *points]}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
