"""The benchmarks still run (guards against bit-rot; they say nothing about speed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# script -> (arguments after --quick, rows the table must show, the JSON's case names)
RUNS: dict[str, tuple[tuple[str, ...], tuple[str, ...], list[str]]] = {
    "bench_analyze.py": ((), ("pathflow analyze, cold cache", "pathflow analyze, cached",
                              "run / analyze", "rest state", "margins"), ["k4"]),
    "bench_dcqcn_sweep.py": ((), ("4 points, cold", "target <= 60 s", "ratio pkt/fluid"),
                             ["sweep", "dcqcn N=80", "dcqcn+ N=80"]),
    "bench_grid.py": ((), ("s per point", "grid point vs flow-count point",
                           "in-process on every CPU vs one", "--workers 2 vs in-process"),
                      ["flows", "grid", "one CPU", "workers"]),
    "bench_engine.py": (("--no-ns3",),
                        ("DCTCP star", "fat-tree k=8 ecmp", "fat-tree k=8 spray", "XLA compile",
                         "run, compiled (best)", "steps per second", "simulated per wall second"),
                        ["star", "ecmp", "spray"]),
    "bench_memory.py": ((), ("estimate", "est/grown"), ["star"]),
    "bench_packet.py": (("--no-ns3",),
                        ("packet-hops per second", "first call (compile/load)", "run (best)",
                         "ns-3: skipped (--no-ns3)"),
                        ["star", "ecmp", "spray"]),
    "bench_pooled.py": ((), ("barrier", "SLSQP / barrier"), ["k4"]),
    "bench_precision.py": ((), ("float32 against float64", "aggregate_throughput", "state",
                                "diverged in one precision only"),
                           ["float64", "float32", "compare"]),
    "bench_speed.py": (("--cases", "incast,seeds"),
                       ("fluid wall s", "packet wall s", "ratio pkt/fluid", "seeds (4 vs 1)",
                        ">= 10x", "<= 4x one"),
                       ["incast", "seeds"]),
    "bench_xla_options.py": ((), ("XLA options", "B / A", "bit for bit"), ["ecmp"]),
}


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(RUNS))
def test_quick_benchmark_runs(script: str, tmp_path: Path) -> None:
    # The timeout only catches a hung benchmark: on a fresh clone the first of these compiles
    # the packet simulator's numba kernels (about 4 minutes on 2 loaded cores).
    arguments, rows, names = RUNS[script]
    figures = tmp_path / "figures.json"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), "--quick",
                           *arguments, "--json", str(figures)],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    for row in rows:
        assert row in done.stdout, f"missing row {row!r} in:\n{done.stdout}"
    cases = json.loads(figures.read_text())["cases"]
    assert [case["case"] for case in cases] == names
    assert all("error" not in case for case in cases), cases
    if script == "bench_packet.py":
        assert all(case["packet_hops"] > 0 for case in cases)
    if script == "bench_speed.py":
        incast = cases[0]
        assert incast["fluid"]["end_to_end_s"] > 0 and incast["packet"]["packet_hops"] > 0
        assert cases[1]["batch"]["seeds"] == 4
    if script == "bench_xla_options.py":  # the options change the speed, never a result
        assert all(case["bitwise_same"] for case in cases), cases
