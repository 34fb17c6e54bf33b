"""The command line: results, errors (one line, exit code 2, no traceback), help and version."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import xarray as xr
from typer.testing import CliRunner

from helpers import TINY_TOML
from pathflow.cli import app

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
runner = CliRunner()



def write(tmp_path: Path, text: str, name: str = "s.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_run_prints_summary_and_writes_dataset(tmp_path: Path) -> None:
    out = tmp_path / "r.nc"
    result = runner.invoke(app, ["run", str(write(tmp_path, TINY_TOML)), "-o", str(out), "-q",
                                 "--plot", str(tmp_path / "r.png")])
    assert result.exit_code == 0, result.output
    for needle in ("h0 -> r0", "Jain", "s0->r0", "Convergence", "Invariants", "all hold"):
        assert needle in result.output
    assert result.output.startswith("tiny: 2 flows, 6 links, 20 ms simulated (fluid model, dt =")
    ds = xr.open_dataset(out)
    assert ds.queue.attrs["units"] == "bytes"
    assert set(ds.dims) >= {"time", "link", "flow", "subflow"}
    assert "invariants" in ds.attrs and "tiny" in ds.attrs["scenario"]
    assert (tmp_path / "r.png").stat().st_size > 10_000


def test_run_packet_engine(tmp_path: Path) -> None:
    """--engine packet: the packet simulator's Dataset, the same table and outputs."""
    out = tmp_path / "p.nc"
    result = runner.invoke(app, ["run", str(write(tmp_path, TINY_TOML)), "--engine", "packet", "-q",
                                 "-o", str(out), "--plot", str(tmp_path / "p.png")])
    assert result.exit_code == 0, result.output
    header = " ".join(result.output.split("Flows (steady window)")[0].split())
    assert header.startswith("tiny: 2 flows, 6 links, 20 ms simulated (packet simulator, ")
    assert "packet hops" in header and "sampled every 10 us" in header
    for needle in ("h0 -> r0", "h1 -> r0", "Jain", "Convergence", "all hold", f"wrote {out}"):
        assert needle in result.output
    bottleneck = next(line for line in result.output.splitlines() if line.startswith("│ s0->r0"))
    assert "100.0%" in bottleneck and "pkt" in bottleneck
    ds = xr.open_dataset(out)
    assert ds.attrs["engine"] == "pathflow packet" and ds.attrs["packet_hops"] > 1000
    assert ds.queue.attrs["units"] == "bytes" and set(ds.dims) >= {"time", "link", "flow"}
    queue = ds.queue.sel(link="s0->r0", time=ds.time > 5e-3) / 1500
    assert 10 < float(queue.mean()) < 25  # DCTCP holds the queue near K = 20 packets
    assert (tmp_path / "p.png").stat().st_size > 10_000


@pytest.mark.parametrize(("args", "message"), [
    (["--engine", "ns3"], "error: --engine: unknown engine 'ns3'; allowed: fluid, packet"),
    (["--engine", "packet", "--check-dt"], "error: --check-dt: applies to --engine fluid only"),
    (["--plot", "out"], "error: --plot: 'out' needs an image suffix (one of "),
])
def test_bad_engine_is_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    result = runner.invoke(app, ["run", str(write(tmp_path, TINY_TOML)), *args,
                                 "-o", str(tmp_path / "r.nc")])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(message), result.output
    assert not (tmp_path / "r.nc").exists()


BAD = [
    ("unknown key", TINY_TOML.replace('cc = "dctcp"', 'cc = "dctcp"\ncolor = "red"'),
     "transport.color: unknown key"),
    ("unknown cc", TINY_TOML.replace('cc = "dctcp"', 'cc = "cubic"'), "transport.cc"),
    ("negative rate", TINY_TOML.replace('"1Gbps"', '"-1Gbps"'), "topology.link_rate"),
    ("unit-less rate", TINY_TOML.replace('"1Gbps"', "1000000000"), "topology.link_rate"),
    ("zero buffer", TINY_TOML.replace('"100pkt"', '"0pkt"'), "topology.buffer"),
    ("unknown kind", TINY_TOML.replace('kind = "star"', 'kind = "ring"'), "topology.kind"),
    ("threshold above buffer", TINY_TOML.replace('"20pkt"', '"200pkt"'), "aqm.threshold"),
    ("missing senders", TINY_TOML.replace("senders = 2\n", ""), "topology"),
    ("unit-less rto_min", TINY_TOML.replace('cc = "dctcp"', 'cc = "dctcp"\nrto_min = 200'),
     "transport.rto_min"),
    ("delayed ACK beyond 500 ms",
     TINY_TOML.replace('cc = "dctcp"', 'cc = "dctcp"\ndelayed_ack_timeout = "1s"'),
     "transport.delayed_ack_timeout"),
]


@pytest.mark.parametrize(("case", "text", "field"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_one_line_naming_the_field(tmp_path: Path, case: str, text: str,
                                                field: str) -> None:
    result = runner.invoke(app, ["run", str(write(tmp_path, text)), "-q"])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert field in lines[0] and lines[0].startswith("error:")
    assert "Traceback" not in result.output


def test_unknown_cc_lists_the_allowed_values(tmp_path: Path) -> None:
    result = runner.invoke(app, ["run", str(write(tmp_path, BAD[1][1])), "-q"])
    assert "'reno'" in result.output and "'dctcp'" in result.output


def test_disconnected_graph(tmp_path: Path) -> None:
    write(tmp_path, "src,dst\na,s1\nb,s1\nc,s2\nd,s2\n", "edges.csv")
    text = TINY_TOML.replace('kind = "star"\nsenders = 2', 'kind = "graph"\nedges = "edges.csv"')
    result = runner.invoke(app, ["run", str(write(tmp_path, text)), "-q"])
    assert result.exit_code == 2
    assert "topology.edges" in result.output and "not connected" in result.output


def test_graph_file_runs(tmp_path: Path) -> None:
    write(tmp_path, "src,dst,link_rate\na,s1,1Gbps\nb,s1,1Gbps\ns1,s2,500Mbps\nc,s2,1Gbps\n",
          "edges.csv")
    text = TINY_TOML.replace('kind = "star"\nsenders = 2', 'kind = "graph"\nedges = "edges.csv"')
    text = text.replace("[transport]", '[traffic]\npattern = "explicit"\npairs = [[0, 2], [1, 2]]'
                                       "\n[transport]")
    result = runner.invoke(app, ["run", str(write(tmp_path, text)), "-q"])
    assert result.exit_code == 0, result.output
    assert "s1->s2" in result.output  # the 500 Mb/s link is the hotspot


def test_missing_file_and_bad_toml(tmp_path: Path) -> None:
    result = runner.invoke(app, ["run", str(tmp_path / "nope.toml")])
    assert result.exit_code == 2 and "cannot read" in result.output
    result = runner.invoke(app, ["run", str(write(tmp_path, "[topology\nkind="))])
    assert result.exit_code == 2 and "not valid TOML" in result.output


def test_no_traceback_from_the_real_command(tmp_path: Path) -> None:
    path = write(tmp_path, BAD[0][1])
    done = subprocess.run([sys.executable, "-m", "pathflow", "run", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "Traceback" not in done.stderr
    assert "unknown key 'color'" in done.stderr


_ENDING = """
import atexit, sys, threading, time
from pathflow.cli import _exit
atexit.register(lambda: print(" handler", end=""))
print("buffered", end="")
how = sys.argv[1]
if how == "thread":
    threading.Thread(target=lambda: (time.sleep(0.3), print(" thread", end=""))).start()
    _exit(3)
_exit(None if how == "none" else int(how) if how.isdigit() else how)
"""


@pytest.mark.parametrize(("how", "status", "out", "err"), [
    ("none", 0, "buffered handler", ""), ("4", 4, "buffered handler", ""),
    ("no such thing", 1, "buffered handler", "no such thing\n"),
    ("thread", 3, "buffered thread handler", "")])
def test_the_command_ends_as_sys_exit_would(how: str, status: int, out: str, err: str
                                            ) -> None:
    """The console script ends without the interpreter's teardown (`cli._exit`), keeping what
    `sys.exit` does: the status (None: 0; a number; a message: on stderr, status 1), the exit
    handlers, the buffered output, and, while another thread runs, waiting for it."""
    done = subprocess.run([sys.executable, "-c", _ENDING, how], capture_output=True,
                          text=True, timeout=120)
    assert (done.returncode, done.stdout, done.stderr) == (status, out, err)


def test_help_documents_every_key() -> None:
    result = runner.invoke(app, ["run", "--help"])
    assert result.exit_code == 0
    from pathflow.scenario import _ScenarioModel

    for section, field in _ScenarioModel.model_fields.items():
        annotation = field.annotation
        keys = getattr(annotation, "model_fields", {})
        for key in keys:
            assert key in result.output, f"[{section}] {key} missing from run --help"


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.startswith("pathflow 0.")


def test_examples_are_valid() -> None:
    from pathflow import load_scenario

    for path in EXAMPLES.glob("*.toml"):
        load_scenario(path)
