"""The benchmarks still run (guards against bit-rot; they say nothing about speed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

ROWS = {
    "bench_engine.py": ("DCTCP star", "fat-tree k=8 ecmp", "fat-tree k=8 spray", "XLA compile",
                        "run, compiled (best)", "steps per second",
                        "simulated per wall second"),
    "bench_packet.py": ("packet-hops per second", "first call (compile/load)", "run (best)",
                        "ns-3: skipped (--no-ns3)"),
}


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(ROWS))
def test_quick_benchmark_runs(script: str, tmp_path: Path) -> None:
    figures = tmp_path / "figures.json"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), "--quick",
                           "--no-ns3", "--json", str(figures)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    for row in ROWS[script]:
        assert row in done.stdout, f"missing row {row!r} in:\n{done.stdout}"
    cases = json.loads(figures.read_text())["cases"]
    assert [case["case"] for case in cases] == ["star", "ecmp", "spray"]
    if script == "bench_packet.py":
        assert all(case["packet_hops"] > 0 for case in cases)
