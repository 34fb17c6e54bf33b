"""The paper-figure scripts run end to end and plot what the papers report.

`paper_figs/dctcp_queue.py` (seed 003, Figure 5.2) is run as a user runs it, with a short
duration: it must write a real PNG and print fluid DCTCP statistics inside the hardware band
(the thesis reports a hardware queue between about 15 and 22 packets; [13, 24] allows for
the fluid model's smoothing and for sampling).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "paper_figs" / "dctcp_queue.py"
STATS = ("mean", "min", "max", "p1", "p99")
HARDWARE_BAND = (13.0, 24.0)  # packets


def parse_row(output: str, label: str) -> dict[str, float]:
    """The statistics row printed for `label` (columns in STATS order)."""
    for line in output.splitlines():
        if line.startswith(label) and not line.startswith(f"{label}:"):
            numbers = line[len(label):].split()
            if len(numbers) == len(STATS):
                return dict(zip(STATS, map(float, numbers), strict=True))
    raise AssertionError(f"no statistics row for {label!r} in:\n{output}")


@pytest.fixture(scope="module")
def dctcp_figure(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("figs") / "dctcp_queue.png"
    done = subprocess.run([sys.executable, str(SCRIPT), "--out", str(out), "--duration", "3"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return out, done.stdout


def test_dctcp_figure_is_written(dctcp_figure: tuple[Path, str]) -> None:
    out, _ = dctcp_figure
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert out.stat().st_size > 50_000  # two panels of curves, not an empty canvas


def test_fluid_dctcp_queue_in_hardware_band(dctcp_figure: tuple[Path, str]) -> None:
    _, output = dctcp_figure
    fluid = parse_row(output, "fluid DCTCP")
    low, high = HARDWARE_BAND
    for key, value in fluid.items():
        assert low <= value <= high, (key, value, output)
    hardware = parse_row(output, "hardware DCTCP")
    assert abs(fluid["mean"] - hardware["mean"]) <= 2.0, (fluid, hardware)


def test_tcp_queue_is_hundreds_of_packets(dctcp_figure: tuple[Path, str]) -> None:
    """TCP's queue stays at hundreds of packets, within the 425-packet drop-tail buffer: an
    order of magnitude above DCTCP's."""
    _, output = dctcp_figure
    tcp = parse_row(output, "fluid TCP (Reno)")
    assert tcp["min"] >= 200 and tcp["max"] <= 425 + 1e-6
    assert tcp["mean"] >= 10 * parse_row(output, "fluid DCTCP")["mean"]
    assert "VIOLATED" not in output


def test_mptcp_permutation_throughput_climbs_with_subflows(tmp_path: Path) -> None:
    """paper_figs/mptcp_subflows.py on k = 4: single-path ECMP collides on core links (well
    under the optimum), 4 LIA subflows per connection recover most of it (Raiciu et al. 2011).
    ACKs are load: a host's link carries its data and the ACKs of what it receives (an ACK of
    64 bytes per 2 segments of 1,500), so data fills at most 1 / (1 + 64 / 3000) of it; the
    ACK-loaded host ports and the ACKs' queueing cost 4 subflows more (0.86 of the link rate in
    the fluid model, 0.84 at packet level per the README)."""
    out = tmp_path / "mptcp_subflows.png"
    done = subprocess.run([sys.executable, str(ROOT / "paper_figs" / "mptcp_subflows.py"),
                           "--out", str(out), "--ks", "4", "--subflows", "1,4", "--ccs", "lia",
                           "--engines", "fluid", "--duration", "150ms", "--jobs", "1"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {int(line.split()[1]): float(line.split()[3]) for line in done.stdout.splitlines()
            if line.split()[:1] == ["4"]}
    assert rows[1] < 0.8 and rows[4] > rows[1] + 0.2 and rows[4] <= 1 / (1 + 64 / 3000)
    assert out.stat().st_size > 10_000


def test_dcqcn_incast_figure_at_the_starting_point(tmp_path: Path) -> None:
    """paper_figs/dcqcn_incast.py with one sweep per table (the documented starting point, no
    fit): the figure is written and both tables' errors are printed."""
    out = tmp_path / "dcqcn_incast.png"
    done = subprocess.run([sys.executable, str(ROOT / "paper_figs" / "dcqcn_incast.py"),
                           "--out", str(out), "--max-evaluations", "1"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("max_buffer_after_5s_bytes: rms log-error") == 2
    assert "DCQCN+static predicted" in done.stdout
    assert out.stat().st_size > 10_000
