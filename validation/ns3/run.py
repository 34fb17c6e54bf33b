"""The parent side of an ns-3 run: start the child process on a scenario, wait for it, turn its
failures into one readable RuntimeError and its arrays into a Dataset."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import xarray as xr

from pathflow.validation.ns3.config import Ns3Config
from pathflow.validation.ns3.dataset import to_dataset

__all__ = ["EXIT_NO_NS3", "ns3_available", "run_ns3"]

# The child's exit status when it cannot import ns-3's bindings (told apart from a crash).
EXIT_NO_NS3 = 3

# The child runs as a module of this package (`python -m`), not by file path: it imports its
# sibling modules, so it needs pathflow importable, as this process has it.
_CHILD_MODULE = f"{__package__}.child"


def ns3_available() -> bool:
    """True if the ns-3 Python bindings are installed (checked without importing them,
    which would take ~10 s and pull ns-3's global state into this process)."""
    return importlib.util.find_spec("ns") is not None


def run_ns3(config: Ns3Config, timeout_s: float | None = None) -> xr.Dataset:
    """Run one scenario in a fresh subprocess and return its sampled time series.

    Raises RuntimeError if ns-3 is not installed, the subprocess fails or times out.
    """
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="pathflow-ns3-") as tmp:
        cfg_path = Path(tmp) / "config.json"
        out_path = Path(tmp) / "result.npz"
        cfg_path.write_text(config.to_json())
        if config.pcap_path is not None:
            # ns-3 aborts if it cannot open the capture file; create its directory here.
            config.pcap_path.parent.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", _CHILD_MODULE, str(cfg_path), str(out_path)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired as exc:
            raise RuntimeError(
                f"ns-3 run exceeded timeout_s={timeout_s}:\n{_tail(exc.stderr)}"
            ) from exc
        if proc.returncode == EXIT_NO_NS3:
            raise RuntimeError(
                f"ns-3 Python bindings are not importable by {sys.executable} "
                f"(pip install 'ns3==3.44.post0'):\n{_tail(proc.stderr)}"
            )
        if proc.returncode != 0 or not out_path.exists():
            raise RuntimeError(
                f"ns-3 subprocess failed (exit code {proc.returncode}):\n"
                f"{_tail(proc.stderr) or _tail(proc.stdout)}"
            )
        with np.load(out_path, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    return to_dataset(config, arrays, wall_time_s=time.perf_counter() - t0)


def _tail(text: str | bytes | None, lines: int = 25) -> str:
    """The last `lines` lines of the child's output that say what went wrong."""
    if text is None:
        return ""
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    # cppyy prints these on every import of ns-3; they are noise, not errors.
    kept = [ln for ln in text.splitlines() if "Failed to materialize symbols" not in ln]
    # On a fatal error cppyy appends a long gdb backtrace after " *** Break *** "; the
    # ns-3 message (NS_FATAL / NS_ASSERT) sits just above it.
    brk = next((i for i, ln in enumerate(kept) if "*** Break ***" in ln), None)
    if brk is not None:
        kept = kept[: brk + 1]
    return "\n".join(kept[-lines:])

