"""Every registered validation case (closed forms, measured data, ns-3) as a test.

The cases themselves (references, tolerances and their reasons) live in
`pathflow/validation/cases/`; `pathflow validate` runs the same functions into a report.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from pathflow.cli import app
from pathflow.validation.ns3_runner import ns3_available
from pathflow.validation.registry import load_cases

CASES = load_cases()


def _marks(source: str) -> list[pytest.MarkDecorator]:
    if source == "ns-3":
        return [pytest.mark.ns3, pytest.mark.skipif(not ns3_available(), reason="needs ns3")]
    return []


@pytest.mark.parametrize("name", [pytest.param(name, marks=_marks(c.source))
                                  for name, c in CASES.items()])
def test_case(name: str) -> None:
    result = CASES[name].run()
    assert result.checks, f"{name} checks nothing"
    failed = [f"{c.quantity}: pathflow {c.value:.4g} vs {c.reference:.4g} {c.unit}, error "
              f"{c.error:.3g} > tolerance {c.tolerance:.3g}" for c in result.checks if not c.passed]
    assert not failed, "; ".join(failed)


def test_report_and_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The report machinery on the quickest case: markdown row, figure, Dataset, exit code."""
    out = tmp_path / "report.md"
    result = CliRunner().invoke(app, ["validate", "--case", "dctcp_hardware", "-o", str(out),
                                      "--threads", "0"])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "| dctcp_hardware | measured | queue mean |" in text
    assert (tmp_path / "report" / "dctcp_hardware.png").stat().st_size > 5_000
    assert out.with_suffix(".nc").exists()
    bad = CliRunner().invoke(app, ["validate", "--case", "nope", "-o", str(out)])
    assert bad.exit_code == 2 and "unknown validation case 'nope'" in bad.output


def test_fast_selection_excludes_ns3() -> None:
    fast = {name for name, c in CASES.items() if c.fast}
    assert fast and all(CASES[name].source != "ns-3" for name in fast)
    assert {c.name for c in CASES.values() if not c.fast} >= {"dctcp_star_ns3", "reno_star_ns3"}


def test_shipped_hardware_trace_is_the_published_one() -> None:
    """Guards the copied data: the thesis reports a queue between about 15 and 22 packets."""
    from pathflow.metrics import queue_stats
    from pathflow.validation.traces import load_queue_trace, reference_path

    trace = load_queue_trace(reference_path("hardware_dctcp_queue.csv"))
    stats = queue_stats(trace, warmup=10.0).sel(link="bottleneck") / 1514
    assert float(stats["min"]) >= 15 and float(stats["max"]) <= 22.1
