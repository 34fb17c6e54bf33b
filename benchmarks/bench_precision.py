"""Issue 15, item 5: which of a sweep's per-point results float32 keeps within which tolerance of
float64, measured on the default sweep.

The default sweep (``pathflow sweep --flows 80:2000``: seed 001's RDMA incast, DCQCN and DCQCN+,
25 flow counts x 2 controls) runs once per precision as a user runs it (``python -m pathflow
sweep --precision P -y -q -o P.nc``, one after the other, each in its own process), and the two
Datasets are compared point by point:

- continuous summaries (throughput, Jain, queue and latency statistics, drops, windows, PFC's
  paused fraction, the cycle's swing and period): the largest relative difference
  ``|f32 - f64| / |f64|`` over the points, and the point where it is largest (where float64 gives
  exactly 0, the absolute difference instead, marked ``abs``);
- discrete ones (``state``, ``settled``, and whether ``below_standing`` and
  ``convergence_time`` are finite, i.e. whether the point converged at all): the points where
  the two precisions disagree, each with both values. Where both are finite, their relative
  difference joins the continuous column.

``--quick`` (the smoke run, about a minute): the same scenario at 2 ms, flows 80:160:80.
``--compare F64.nc F32.nc`` compares two saved sweeps without running anything. This is a
measurement, not a test (``tests/test_precision.py`` checks the stated tolerances on a small
sweep).

Usage::

    python benchmarks/bench_precision.py                   # about 2 x 65 s on the 2-core VM
    python benchmarks/bench_precision.py --quick --json figures.json
    python benchmarks/bench_precision.py --compare f64.nc f32.nc
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
PRECISIONS = ("float64", "float32")
# the summaries whose value is a category or a yes/no: compared point by point, not by size
DISCRETE = ("state", "settled")
# times that are inf where the point did not converge: finiteness is discrete, the time is not
MAYBE_INFINITE = ("below_standing", "convergence_time")


def run_sweep(precision: str, output: Path, quick: bool) -> dict[str, Any]:
    """`python -m pathflow sweep --precision P` into `output`; its wall time (compile
    included, with the JAX cache of whoever runs this: compare like with like)."""
    command = [sys.executable, "-m", "pathflow", "sweep", "--quiet", "--yes",
               "--precision", precision, "--keep", "series", "-o", str(output)]
    if quick:
        from pathflow.scenario import load_scenario

        short = output.with_name("incast_2ms.toml")
        base = load_scenario(ROOT / "pathflow" / "scenarios" / "dcqcn_incast.toml")
        short.write_text(base.with_updates({"run.duration": "2ms", "run.warmup": None}).to_toml())
        command += [str(short), "--cc", "dcqcn,dcqcn+", "--flows", "80:160:80"]
    else:
        command += ["--flows", "80:2000"]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=output.parent, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"pathflow sweep --precision {precision} failed "
                           f"({done.returncode}): {done.stderr[-1500:]}")
    return {"case": precision, "command": " ".join(command[2:]), "wall_s": wall}


def _where(ds: Any, index: tuple[int, ...]) -> str:
    """A point of the sweep in words: "dcqcn+ N=560"."""
    names = [str(ds[dim].values[i]) if dim != "flows" else f"N={int(ds[dim].values[i])}"
             for dim, i in zip(ds.state.dims, index, strict=True)]
    return " ".join(names)


def diverged(double: Any, single: Any) -> np.ndarray:
    """The points whose queue series is finite in one precision and not in the other (a run
    that blew up): their summaries are not a precision's round-off, so they are listed apart
    and left out of the differences."""
    def broken(ds: Any) -> np.ndarray:
        series = [d for d in ds.queue.dims if d in ("time", "link")]
        return np.asarray((~np.isfinite(ds.queue)).any(series).values)

    return broken(double) != broken(single)


def groups(ds: Any) -> list[tuple[str, np.ndarray]]:
    """The points by value of the sweep's first axis beside flows (by control in the default
    sweep), as masks over the summaries' shape, after "all"."""
    shape = ds.state.shape
    masks = [("all", np.ones(shape, bool))]
    others = [d for d in ds.state.dims if d != "flows"]
    if others:
        axis = ds.state.dims.index(others[0])
        for i, value in enumerate(ds[others[0]].values):
            mask = np.zeros(shape, bool)
            mask[(slice(None),) * axis + (i,)] = True
            masks.append((str(value), mask))
    return masks


def compare(double: Any, single: Any) -> dict[str, Any]:
    """Per summary of the two sweeps (xarray Datasets of the same grid) and per group of
    points (`groups`): the largest relative difference and its point; the points where a
    discrete result differs; and the points that diverged in one precision only."""
    from pathflow.sweeps import SUMMARIES

    blown = diverged(double, single)
    rows = []
    for name in SUMMARIES:
        if name not in double or name not in single:
            continue
        a = np.asarray(double[name].values, dtype=float)
        b = np.asarray(single[name].values, dtype=float)
        both_nan = np.isnan(a) & np.isnan(b)
        if both_nan.all():
            continue  # e.g. rounds in a sweep without rounds, windows of rate-based controls
        row: dict[str, Any] = {"metric": name, "groups": {}, "differ": []}
        if name in DISCRETE or name in MAYBE_INFINITE:
            differs = (a != b) if name in DISCRETE else (np.isfinite(a) != np.isfinite(b))
            differs &= ~both_nan & ~blown
            row["differ"] = [f"{_where(double, tuple(int(i) for i in idx))}: "
                             f"{_show(name, a[idx])} -> {_show(name, b[idx])}"
                             for idx in zip(*np.nonzero(differs), strict=True)]
            if name in DISCRETE:
                rows.append(row)
                continue
        finite = np.isfinite(a) & np.isfinite(b) & ~blown
        zero = finite & (a == 0)
        with np.errstate(invalid="ignore", divide="ignore"):
            rel = np.where(finite & ~zero, np.abs(b - a) / np.abs(a), 0.0)
            absolute = np.where(zero, np.abs(b - a), 0.0)
        for label, mask in groups(double):
            if not (finite & mask).any():
                continue
            masked = np.where(mask, rel, -1.0)
            worst = np.unravel_index(int(np.argmax(masked)), masked.shape)
            row["groups"][label] = {"max_rel": float(rel[worst]), "at": _where(double, worst),
                                    "max_abs_where_zero": float(absolute[mask].max())}
        rows.append(row)
    return {"rows": rows, "groups": [label for label, _ in groups(double)],
            "diverged": [_where(double, tuple(int(i) for i in idx))
                         for idx in zip(*np.nonzero(blown), strict=True)]}


def _show(name: str, value: float) -> str:
    """A discrete value in words (a state's name, inf as "not converged")."""
    from pathflow.verdict import STATES

    if name == "state" and math.isfinite(value):
        return STATES[int(value)]
    if math.isinf(value):
        return "inf (not converged)"
    return f"{value:.4g}"


def print_table(figures: dict[str, Any]) -> None:
    """metric | max rel diff per group (and where) | points that differ."""
    labels = figures["groups"]
    print(f"{'metric':<24}" + "".join(f"{'max rel diff ' + label:>34}" for label in labels)
          + "  points that differ")
    for row in figures["rows"]:
        cells = []
        for label in labels:
            group = row["groups"].get(label)
            if row["metric"] in DISCRETE or group is None:
                cells.append(f"{'-':>34}")
                continue
            text = f"{group['max_rel']:.2e} ({group['at']})"
            if group["max_abs_where_zero"] > 0:
                text += f" abs {group['max_abs_where_zero']:.2g}"
            cells.append(f"{text:>34}")
        differ = "; ".join(row["differ"]) if row["differ"] else "none"
        print(f"{row['metric']:<24}{''.join(cells)}  {differ}")
    print("diverged in one precision only (left out above): "
          + ("; ".join(figures["diverged"]) or "none"))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run (2 ms, 4 points)")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("F64.nc", "F32.nc"),
                        help="compare two saved sweeps instead of running them")
    parser.add_argument("--keep", type=Path, help="keep the two sweeps' files in this folder")
    parser.add_argument("--json", type=Path, help="write the figures to this file")
    args = parser.parse_args(argv)
    import xarray as xr

    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    cases: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-precision-") as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        if args.compare:
            files = list(args.compare)
        else:
            files = [folder / f"{precision}.nc" for precision in PRECISIONS]
            for precision, path in zip(PRECISIONS, files, strict=True):
                case = run_sweep(precision, path.resolve(), args.quick)
                cases.append(case)
                print(f"{precision}: {case['wall_s']:.1f} s  ({case['command']})")
        with xr.open_dataset(files[0], engine="h5netcdf") as double, \
                xr.open_dataset(files[1], engine="h5netcdf") as single:
            figures = compare(double.load(), single.load())
            points = int(double.state.size)
    print(f"float32 against float64 over {points} points")
    print_table(figures)
    cases.append({"case": "compare", "points": points, **figures})
    if args.json:
        args.json.write_text(json.dumps({"cases": cases}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
