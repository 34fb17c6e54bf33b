"""The packet benchmark still runs (guards against bit-rot; it says nothing about speed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "bench_packet.py"
ROWS = ("packet-hops per second", "first call (compile/load)", "run (best)",
        "ns-3: skipped (--no-ns3)")


@pytest.mark.slow
def test_quick_packet_benchmark_runs(tmp_path: Path) -> None:
    figures = tmp_path / "figures.json"
    done = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--no-ns3", "--json",
                           str(figures)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    for row in ROWS:
        assert row in done.stdout, f"missing row {row!r} in:\n{done.stdout}"
    cases = json.loads(figures.read_text())["cases"]
    assert [case["case"] for case in cases] == ["star", "ecmp", "spray"]
    assert all(case["packet_hops"] > 0 for case in cases)
