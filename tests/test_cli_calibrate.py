"""`pathflow calibrate`: a fit to the hardware trace on a small budget (the fitted scenario, the
plot, the report, the losses), a netCDF result as the trace, and bad input (traces, options,
inapplicable parameters, outputs): one line naming the file or option, exit code 2."""

from __future__ import annotations

import re
import socket
from pathlib import Path

import dpkt
import numpy as np
import pytest
import xarray as xr
from typer.testing import CliRunner, Result

import pathflow
from helpers import TINY_TOML
from pathflow.cli import app
from pathflow.compile import compile_scenario
from pathflow.validation.traces import reference_path

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
DCTCP_STAR = EXAMPLES / "dctcp_star.toml"
HARDWARE = reference_path("hardware_dctcp_queue.csv")
# tests/test_calibration.py's FAST budget: ~20 s on one CPU
FAST = ["--duration", "0.5s", "--starts", "2", "--steps", "15", "--fallback-starts", "1",
        "--fallback-evaluations", "40"]
runner = CliRunner()



def table_row(output: str, name: str) -> list[str]:
    """The cells of a parameter's row of the fitted-parameters table."""
    row = next(line for line in output.splitlines() if line.startswith(f"│ {name} "))
    return [cell.strip() for cell in row.strip().strip("│").split("│")]


def losses(output: str) -> tuple[float, float]:
    match = re.search(r"Loss: (\S+) pkt\^2 before, (\S+) pkt\^2 after", output)
    assert match is not None, output
    return float(match[1]), float(match[2])


def one_line_error(result: Result, pattern: str) -> None:
    """Exit code 2 and one line, `error: ...` matching `pattern`, no traceback."""
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert lines[0].startswith("error: ") and re.search(pattern, lines[0]), lines[0]
    assert "Traceback" not in result.output


def test_calibrate_the_hardware_trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The seed 003 star against the hardware switch with base_rtt and threshold, from K 20 %
    below the scenario's (as the calibration_hardware case): default outputs land in the
    current directory."""
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["calibrate", str(DCTCP_STAR), str(HARDWARE),
                                 "--fit", "base_rtt,threshold", "--initial", "threshold=16",
                                 *FAST, "--report", "fit.md"])
    assert result.exit_code == 0, result.output
    before, after = losses(result.stdout)
    assert after < 0.6 * before, result.stdout
    assert re.search(r"after \(\d+ % lower\)", result.stdout)

    threshold = table_row(result.stdout, "threshold")
    assert threshold[1] == "pkt" and "nelder-mead" in threshold[6]
    printed_k = float(threshold[2].rstrip("*"))
    assert 19.0 < printed_k < 21.5  # from 16: the scenario's K = 20, the fit 20.2 +- 0.8
    assert 0 < float(threshold[3]) < 2  # +- 1 sd, packets
    base_rtt = table_row(result.stdout, "base_rtt")
    assert base_rtt[1] == "ms" and base_rtt[4] == "[0, 2]" and base_rtt[5] == "0"
    extra = float(base_rtt[2].rstrip("*")) * 1e-3

    fitted_path = tmp_path / "dctcp_star_fitted.toml"
    fitted = pathflow.load_scenario(fitted_path)
    threshold = fitted.si.aqm.parameters["threshold"]
    assert threshold / fitted.si.transport.mss == pytest.approx(printed_k, abs=5e-3)
    start = pathflow.load_scenario(DCTCP_STAR)
    added = (np.asarray(compile_scenario(fitted).problem.path_base_rtt)
             - np.asarray(compile_scenario(start).problem.path_base_rtt))
    assert np.allclose(added, extra, atol=1e-7)  # the printed extra base RTT, 4 digits
    assert fitted.spec.run.duration == start.spec.run.duration  # not the fit's 0.5 s
    assert fitted_path.read_text().startswith("# calibrated by")

    png = tmp_path / "dctcp_star_fitted.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 50_000
    assert "| threshold | pkt |" in (tmp_path / "fit.md").read_text()
    for phase in ("compiling", "gradient phase", "derivative-free fallback", "uncertainty"):
        assert phase in result.stderr  # progress: one line per phase, on stderr
    assert "Traceback" not in result.output


def test_calibrate_a_netcdf_result_with_units_in_options(tmp_path: Path) -> None:
    """A packet-simulator result written by `run -o` is a trace; it is recognised by content
    (no .nc suffix here). Bounds and the start take quantities with units."""
    scenario = tmp_path / "tiny.toml"
    scenario.write_text(TINY_TOML)
    trace = tmp_path / "packets.result"
    made = runner.invoke(app, ["run", str(scenario), "--engine", "packet", "-o", str(trace),
                               "-q"])
    assert made.exit_code == 0, made.output
    out = tmp_path / "out" / "fit.toml"
    out.parent.mkdir()
    result = runner.invoke(app, [
        "calibrate", str(scenario), str(trace), "--fit", "threshold", "-o", str(out),
        "--bounds", "threshold=15pkt:37.5KB", "--initial", "threshold=21", "--starts", "1",
        "--steps", "2", "--fallback-starts", "1", "--fallback-evaluations", "8", "-q"])
    assert result.exit_code == 0, result.output
    assert "tiny against packets.result: queue of s0->r0" in result.stdout
    row = table_row(result.stdout, "threshold")
    assert row[4] == "[15, 25]" and row[5] == "21"  # 37.5 KB = 25 packets of 1500 B
    before, after = losses(result.stdout)
    assert after <= before
    assert (tmp_path / "out" / "fit.png").stat().st_size > 10_000  # next to the output
    assert 15 <= pathflow.load_scenario(out).si.aqm.parameters["threshold"] / 1500 <= 25
    assert result.stderr == ""  # --quiet


def truncated_pcap(path: Path) -> Path:
    """A tcpdump capture of three TCP segments whose last record is cut off."""
    with path.open("wb") as f:
        writer = dpkt.pcap.Writer(f, linktype=dpkt.pcap.DLT_EN10MB)
        for i in range(3):
            ip = dpkt.ip.IP(src=socket.inet_aton("10.0.0.1"), dst=socket.inet_aton("10.0.0.2"),
                            p=6, data=dpkt.tcp.TCP(sport=5000, dport=80, data=b"x" * 1000))
            writer.writepkt(bytes(dpkt.ethernet.Ethernet(type=dpkt.ethernet.ETH_TYPE_IP,
                                                         data=ip)), ts=i * 1e-3)
    path.write_bytes(path.read_bytes()[:-100])
    return path


def truncated_netcdf(path: Path) -> Path:
    xr.Dataset({"queue": (("time", "link"), np.ones((50, 1)))},
               coords={"time": np.arange(50.0), "link": ["s0->r0"]}).to_netcdf(path)
    path.write_bytes(path.read_bytes()[:600])
    return path


TRACES = {
    "truncated-pcap": (truncated_pcap, "truncated.pcap", "a packet capture gives per-flow "
                                                         "rates .* but no queue"),
    "wrong-columns": (lambda p: p.write_text("t,q,extra\n0,1,2\n"), "columns.csv",
                      r"line 1: header 't,q,extra', expected 'time,queue'"),
    "three-columns": (lambda p: p.write_text("0,1,2\n1,2,3\n"), "three.csv",
                      r"line 1: expected 2 columns \(time in s, queue in packets\), got 3"),
    "empty": (lambda p: p.write_text(""), "empty.csv", "empty file"),
    "missing": (lambda p: None, "missing.csv", "no such file"),
    "truncated-netcdf": (truncated_netcdf, "cut.nc", "cannot read netCDF"),
    "netcdf-without-queue": (lambda p: xr.Dataset({"rate": ("time", [1.0, 2.0])}).to_netcdf(p),
                             "rates.nc", r"no 'queue' variable \(variables: rate\)"),
    "too-short": (lambda p: p.write_text("".join(f"{i},20\n" for i in range(10))), "short.csv",
                  "the trace has 7 samples after its warmup .* need at least 20"),
}


@pytest.mark.parametrize("case", sorted(TRACES))
def test_bad_trace_is_one_line_naming_the_file(tmp_path: Path, case: str) -> None:
    make, name, pattern = TRACES[case]
    path = tmp_path / name
    make(path)
    result = runner.invoke(app, ["calibrate", str(DCTCP_STAR), str(path), "--fit", "threshold",
                                 "-o", str(tmp_path / "fit.toml")])
    one_line_error(result, f"^error: {re.escape(str(path))}: .*{pattern}")
    assert not (tmp_path / "fit.toml").exists()


DROPTAIL = DCTCP_STAR.read_text().replace('kind = "ecn_step"\nthreshold = "20pkt"',
                                          'kind = "droptail"')
ALLOWED = "allowed: base_rtt, g, threshold, ack_ratio, init_cwnd, capacity"
OPTIONS = {
    "unknown-fit": (["--fit", "base_rtt,gain"],
                    f"--fit: unknown calibration parameter 'gain'; {ALLOWED}"),
    "no-fit": ([], f"--fit: name the parameters to fit, comma-separated; {ALLOWED}"),
    "bounds-without-colon": (["--fit", "threshold", "--bounds", "threshold=10"],
                             "--bounds: expected NAME=LOW:HIGH"),
    "bounds-without-name": (["--fit", "threshold", "--bounds", "10:30"],
                            "--bounds: expected NAME=LOW:HIGH"),
    "bounds-unknown-name": (["--fit", "threshold", "--bounds", "K=10:30"],
                            f"--bounds: unknown calibration parameter 'K'; {ALLOWED}"),
    "bounds-not-fitted": (["--fit", "threshold", "--bounds", "g=0.01:0.2"],
                          r"--bounds: 'g' is not fitted \(--fit threshold\)"),
    "bounds-bad-unit": (["--fit", "base_rtt", "--bounds", "base_rtt=0:2pkt"],
                        "--bounds base_rtt: unknown time unit 'pkt'.* allowed: s, ms"),
    "bounds-reversed": (["--fit", "threshold", "--bounds", "threshold=30:10"],
                        "bounds of 'threshold': need finite lower < upper"),
    "initial-outside": (["--fit", "base_rtt", "--initial", "base_rtt=5ms"],
                        r"starting value out of bounds: base_rtt = 0.005 s outside "
                        r"\[0, 0.002\] s"),
    "loss": (["--fit", "threshold", "--loss", "l2"],
             "--loss: unknown loss 'l2'; allowed: auto, quantiles, moments"),
    "duration-without-unit": (["--fit", "threshold", "--duration", "0.5"],
                              "--duration: cannot read '0.5'; expected a number and one of s"),
    "output-directory-missing": (["--fit", "threshold", "-o", "{tmp}/nowhere/fit.toml"],
                                 "--output: directory '.*nowhere' does not exist"),
    "plot-is-a-directory": (["--fit", "threshold", "--plot", "{tmp}"],
                            "--plot: '.*' is a directory, not a file"),
    "plot-without-format": (["--fit", "threshold", "--plot", "{tmp}/fit"],
                            r"--plot: '.*fit' needs an image suffix \(one of .*\.png"),
    "model-link": (["--fit", "threshold", "--link", "s9->r0"],
                   "link 's9->r0' is not in the scenario; links: h0->s0, "),
}


@pytest.mark.parametrize("case", sorted(OPTIONS))
def test_bad_option_is_one_line_naming_what_is_allowed(tmp_path: Path, case: str) -> None:
    args, pattern = OPTIONS[case]
    args = [arg.replace("{tmp}", str(tmp_path)) for arg in args]
    if "-o" not in args:
        args += ["-o", str(tmp_path / "fit.toml")]
    result = runner.invoke(app, ["calibrate", str(DCTCP_STAR), str(HARDWARE), *args])
    one_line_error(result, pattern)
    assert not (tmp_path / "fit.toml").exists()


def test_threshold_on_a_droptail_scenario(tmp_path: Path) -> None:
    scenario = tmp_path / "droptail.toml"
    scenario.write_text(DROPTAIL)
    result = runner.invoke(app, ["calibrate", str(scenario), str(HARDWARE), "--fit",
                                 "base_rtt,threshold", "-o", str(tmp_path / "fit.toml")])
    one_line_error(result, "'threshold' applies to aqm.kind = 'ecn_step', not 'droptail'")


def test_help_lists_the_parameters() -> None:
    result = runner.invoke(app, ["calibrate", "--help"])
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    for name in ("base_rtt", "g", "threshold", "ack_ratio", "init_cwnd", "capacity", "--bounds",
                 "NAME=LOW:HIGH", "--initial", "--trace-warmup", "--report"):
        assert name in text
