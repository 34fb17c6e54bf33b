"""float32 (for GPUs) against float64 (the default) on the seed 003 DCTCP star."""

import pytest

import pathflow
from helpers import PACKET, star
from pathflow.invariants import report_of
from pathflow.metrics import queue_stats, throughput


def test_float32_agrees_with_float64() -> None:
    results = {}
    for precision in ("float64", "float32"):
        ds = pathflow.simulate(star(duration="1.5s", run={"precision": precision}))
        assert str(ds.queue.dtype) == precision
        report = report_of(ds)
        assert report.ok, report
        stats = queue_stats(ds, warmup=0.5).sel(link="s0->r0")
        results[precision] = (float(stats["mean"]) / PACKET, float(stats["max"]) / PACKET,
                              float(throughput(ds, warmup=0.5).sum()))
    double, single = results["float64"], results["float32"]
    assert single[0] == pytest.approx(double[0], rel=0.01)
    assert single[1] == pytest.approx(double[1], rel=0.01)
    assert single[2] == pytest.approx(double[2], rel=1e-3)
