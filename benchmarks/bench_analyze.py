"""Speed of `pathflow analyze` (issue 12: "on the k = 8 fat-tree under 5 s"), against a fluid run.

Case: the k = 8 fat-tree (128 hosts, 80 switches) under a random permutation of 128 Reno flows
(mean-field reaction) at 10 Gb/s, 2 us links, 1,500 B packets, 1,000-packet buffers and RED
with ECN (min 30, max 300 packets, pmax 0.1) on every switch port, ECMP, 64 B ACKs. Its rest
state (ACKs as load) holds 84 queues; the stability analysis finds them in one connected part
of 284 variables (windows, queues and RED's averages).

Measured, each in a subprocess of its own (`python -m pathflow ...`, as a user runs it):

- `pathflow analyze` end to end, cold (HOME pointed at an empty folder, so JAX's persistent
  compilation cache, `pathflow.compilation_cache`, starts empty) and again with that cache,
  `--repeat` times (the median and the range: a run's wall time moves by a few tenths of a
  second from run to run on this shared machine);
- `pathflow run` of the same scenario for `--duration` (default 100 ms) with the same cache, the
  reference: what a user would otherwise do to see whether and how fast it settles.

Then, in this process, the analysis's phases: the rest state (`analysis.equilibrium`), the
linearisation (JAX Jacobians of the model's field, compiling included), the characteristic
roots and the margins of every part, one after the other (`analysis.stability` runs the roots
beside the margins).

    python benchmarks/bench_analyze.py                 # about a minute
    python benchmarks/bench_analyze.py --k 4           # a smaller fat-tree
    python benchmarks/bench_analyze.py --quick --json figures.json   # k = 4, 10 ms (smoke)

A measurement, not a test: nothing here asserts on speed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def scenario(k: int) -> Any:
    from pathflow.scenario import load_scenario

    return load_scenario(ROOT / "examples" / "fattree_permutation.toml").with_updates({
        "name": f"fattree-k{k}-reno-red", "topology.k": k, "topology.link_rate": "10Gbps",
        "topology.delay": "2us", "topology.buffer": "1000pkt",
        "aqm": {"kind": "red", "min": "30pkt", "max": "300pkt", "pmax": 0.1, "ecn": True},
        "transport.cc": "reno", "transport.reaction": "mean"})


def timed(command: list[str], home: str) -> float:
    env = {**os.environ, "HOME": home,
           "MPLCONFIGDIR": str(Path.home() / ".config" / "matplotlib")}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pathflow", *command], cwd=home, env=env,
                          capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"pathflow {command[0]} failed: {done.stderr[-1500:]}")
    return wall


def phases(k: int) -> dict[str, float]:
    """Seconds of each phase of the analysis, in this process."""
    import numpy as np

    from pathflow.analysis import stability as st
    from pathflow.analysis.equilibrium import rest_state

    out: dict[str, float] = {}
    start = time.perf_counter()
    rest = rest_state(scenario(k))
    out["rest state"] = time.perf_counter() - start
    start = time.perf_counter()
    closed = st._Closed(rest)
    whole = closed.linearize()
    classes = closed.classes(whole)
    reduced, differences = st._by_symmetry(whole, classes, len(closed.keys))
    parts = [st._restrict(reduced, part) for part in st._components(reduced)]
    out["linearisation"] = time.perf_counter() - start
    subsystems = [*parts, *differences.values()]
    start = time.perf_counter()
    rightmost = max(float(np.max(st.characteristic_roots(sub).real, initial=-np.inf))
                    for sub in subsystems)
    out["roots"] = time.perf_counter() - start
    start = time.perf_counter()
    for sub in subsystems:
        st.loop_margins(sub)
    out["margins"] = time.perf_counter() - start
    print(f"  {len(parts)} parts, the largest {max(p.a0.shape[0] for p in parts)} variables; "
          f"rightmost root {rightmost:.1f} /s")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=8, help="fat-tree arity (default 8)")
    parser.add_argument("--duration", default="100ms", help="the reference run's duration")
    parser.add_argument("--repeat", type=int, default=5,
                        help="cached analyses to time (default 5; the median is reported)")
    parser.add_argument("--quick", action="store_true", help="k = 4 and a 10 ms reference run")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    if args.quick:
        args.k, args.duration, args.repeat = 4, "10ms", 1
    with tempfile.TemporaryDirectory(prefix="bench-analyze-") as home:
        path = Path(home) / "scenario.toml"
        path.write_text(scenario(args.k).with_updates({"run.duration": args.duration}).to_toml())
        cold = timed(["analyze", str(path)], home)
        repeats = sorted(timed(["analyze", str(path)], home) for _ in range(args.repeat))
        cached = repeats[len(repeats) // 2]
        timed(["run", str(path), "-o", str(Path(home) / "warm.nc")], home)  # compile, cache
        run = timed(["run", str(path), "-o", str(Path(home) / "run.nc")], home)
    print(f"k = {args.k} fat-tree, Reno on RED, permutation ({os.cpu_count()} CPUs)")
    print(f"  {'pathflow analyze, cold cache':<40} {cold:7.1f} s")
    print(f"  {'pathflow analyze, cached':<40} {cached:7.1f} s   (median of {len(repeats)}: "
          f"{repeats[0]:.2f} to {repeats[-1]:.2f} s)")
    print(f"  {f'pathflow run, {args.duration}, cached':<40} {run:7.1f} s"
          f"   (run / analyze: {run / cached:.1f}x)")
    split = phases(args.k)
    for name, seconds in split.items():
        print(f"    {name:<38} {seconds:7.2f} s")
    if args.json:
        args.json.write_text(json.dumps({"cases": [{
            "case": f"k{args.k}", "analyze_cold_s": cold, "analyze_cached_s": cached,
            "analyze_cached_runs_s": repeats,
            "run_s": run, "duration": args.duration, "phases_s": split}]}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
