"""The memory estimate before a run (`pathflow.cost`) against what the process takes.

Each case runs in a fresh process: the scenario compiled (`compile_scenario`, or the sweep's
points), then the run or sweep while a thread samples the process's resident memory every 3 ms.
Reported: the estimate (`cost.estimate` / `cost.estimate_sweep`, with its parts), the growth
of resident memory from just before the run to its peak, and their ratio (above 1: the estimate
is the larger). A run's growth includes what the first run in a process pays once (XLA's
runtime, the compiled program) and is therefore what `--max-memory` has to cover.

Cases:

- ``star``: `examples/dctcp_star.toml` as written (DCTCP, 10 s).
- ``incast``: `examples/incast_10g.toml` at 2,000 flows (DCTCP, classes of exchangeable flows
  run as representatives: the Dataset expands them).
- ``dcqcn80``, ``dcqcn2000``: one point of the default sweep (`cli.sweep.default_sweep_scenario`,
  DCQCN, 200 ms) at 80 and 2,000 flows.
- ``sweep1``, ``sweep``: the default sweep (`pathflow.sweep`, DCQCN and DCQCN+, 25 flow counts)
  one batch at a time and with a batch per CPU side by side.

``--quick`` (smoke run, about 15 s): ``star`` only. This is a measurement, not a test:
nothing here asserts.

Usage::

    python benchmarks/bench_memory.py                  # about 3 minutes on 2 CPUs
    python benchmarks/bench_memory.py --cases star,sweep1 --json memory.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CASES = ("star", "incast", "dcqcn80", "dcqcn2000", "sweep1", "sweep")


def _resident() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _peak_growth(work: Any) -> float:
    """The growth of resident memory (bytes) from now to its peak while `work()` runs."""
    samples: list[int] = []
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            samples.append(_resident())
            time.sleep(0.003)

    base = _resident()
    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        work()
    finally:
        done.set()
        thread.join()
    return max([base, *samples]) - base


def measure(case: str) -> dict[str, Any]:
    """One case, in this process (`main` gives each a process of its own)."""
    import pathflow
    from pathflow import cost
    from pathflow.cli.sweep import default_sweep_scenario
    from pathflow.compile import compile_scenario

    if case.startswith("sweep"):
        parallel = 1 if case == "sweep1" else cost.usable_cpus()
        estimated: list[cost.Cost] = []

        def before_run(points: list[Any]) -> None:
            estimated.append(cost.estimate_sweep(points, False, parallel=parallel))

        growth = _peak_growth(lambda: pathflow.sweep(
            default_sweep_scenario(), "80:2000", set={"transport.cc": ["dcqcn", "dcqcn+"]},
            before_run=before_run, parallel=parallel))
        estimate = estimated[0]
    else:
        scenario = {
            "star": lambda: pathflow.load_scenario(ROOT / "examples" / "dctcp_star.toml"),
            "incast": lambda: pathflow.load_scenario(
                ROOT / "examples" / "incast_10g.toml").with_updates({"traffic.flows": 2000}),
            "dcqcn80": lambda: default_sweep_scenario().with_cc("dcqcn").with_updates(
                {"traffic.flows": 80}),
            "dcqcn2000": lambda: default_sweep_scenario().with_cc("dcqcn").with_updates(
                {"traffic.flows": 2000}),
        }[case]()
        estimate = cost.estimate(compile_scenario(scenario))
        growth = _peak_growth(lambda: pathflow.simulate(scenario))
    return {"case": case, "estimate_mb": estimate.memory / 1e6,
            "records_mb": estimate.record_bytes / 1e6,
            "history_mb": estimate.history_bytes / 1e6, "other_mb": estimate.other_bytes / 1e6,
            "growth_mb": growth / 1e6, "ratio": estimate.memory / growth}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default=",".join(CASES), help="comma separated")
    parser.add_argument("--quick", action="store_true", help="the star only (a smoke run)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--case", help=argparse.SUPPRESS)  # one case, in this process
    args = parser.parse_args()
    if args.case:
        print(json.dumps(measure(args.case)))
        return
    print(f"# load {os.getloadavg()[0]:.1f}, {os.cpu_count()} CPUs")
    print(f"{'case':10s} {'estimate':>9s} {'records':>8s} {'ring':>7s} {'other':>7s} "
          f"{'growth':>8s} {'est/grown':>9s}")
    rows = []
    for case in ["star"] if args.quick else args.cases.split(","):
        if case not in CASES:
            parser.error(f"--cases: unknown case {case!r}; known: {', '.join(CASES)}")
        done = subprocess.run([sys.executable, __file__, "--case", case], check=True,
                              capture_output=True, text=True, cwd=ROOT)
        row = json.loads(done.stdout.strip().splitlines()[-1])
        rows.append(row)
        print(f"{case:10s} {row['estimate_mb']:7.0f}MB {row['records_mb']:6.0f}MB "
              f"{row['history_mb']:5.0f}MB {row['other_mb']:5.0f}MB {row['growth_mb']:6.0f}MB "
              f"{row['ratio']:9.2f}", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"cases": rows}, indent=1))


if __name__ == "__main__":
    main()
