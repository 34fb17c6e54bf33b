"""Seed 003, Figure 5.2: queue occupancy of TCP and DCTCP on a 2-flow 100 Mb/s star.

Heller 2013 (PhD thesis, section 5.1, Figure 5.2) reproduces the DCTCP paper's queue figure
(Alizadeh et al., SIGCOMM 2010): two long-lived flows share a 100 Mb/s switch port; TCP (Reno,
drop-tail, 425-packet buffer) saw-tooths through hundreds of packets while DCTCP (ECN marking at
K = 20 packets) holds the queue between about 15 and 22 packets. This script redraws that figure
from pathflow's fluid model, with the measured hardware trace (and the Mininet-HiFi one) on top:

  (a) bottleneck queue against time: fluid TCP and fluid DCTCP, hardware DCTCP overlaid (its time
      shifted so that its steady part starts where the fluid statistics window starts), with a
      zoom on the DCTCP band;
  (b) CDF of the DCTCP queue: fluid vs hardware vs Mininet-HiFi.

Pinned inputs: `examples/reno_star.toml` and `examples/dctcp_star.toml` (only `run.duration`
is overridden) and the traces shipped in `pathflow.validation` (`hardware_dctcp_queue.csv`,
`mininet_dctcp_queue.csv`). It prints the numbers it plots (mean/min/max/p1/p99 per series,
in packets: fluid bytes / 1500, trace bytes / 1514, i.e. the traces' own packet counts).

    python paper_figs/dctcp_queue.py [--out paper_figs/dctcp_queue.png] [--duration 20]

The two fluid runs are independent, so they run in two processes by default (`--jobs 1` runs
them one after the other in this process).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr
from matplotlib.figure import Figure

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
DEFAULT_OUT = Path(__file__).resolve().with_name("dctcp_queue.png")
STATS = ("mean", "min", "max", "p1", "p99")
TRACE_SKIP = 5.0  # s after a trace's first sample: its start-up (the 36-packet first sample)
K_PACKETS = 20.0  # the ECN marking threshold of examples/dctcp_star.toml
BUFFER_PACKETS = 425.0  # the buffer of both example scenarios

COLORS = {"tcp": "#d62728", "dctcp": "#1f77b4", "hardware": "black", "mininet": "#2ca02c"}


@dataclass
class Series:
    """One queue series in packets, with the statistics printed for it (same window)."""

    label: str
    time: np.ndarray  # s
    packets: np.ndarray
    stats: dict[str, float]  # STATS over the steady window, packets
    steady_from: float  # s: start of the statistics window
    note: str = ""


def bottleneck_link(ds: xr.Dataset) -> str:
    """The link of tier 'bottleneck' (the star's s0->r0), found by tier, not by name."""
    return str(ds.link.values[list(ds.link_tier.values).index("bottleneck")])


def run_fluid(name: str, duration: float, warmup: float) -> dict[str, Any]:
    """Simulate `examples/<name>.toml` for `duration` s; return the bottleneck queue (packets),
    its statistics over t > `warmup`, the aggregate throughput and the invariant verdict.

    Returns plain arrays and numbers so that it can run in a worker process."""
    import pathflow
    from pathflow.invariants import report_of
    from pathflow.metrics import queue_stats, throughput

    scenario = pathflow.load_scenario(EXAMPLES / f"{name}.toml")
    scenario = scenario.with_updates({"run.duration": f"{duration:.12g}s"})
    started = time.perf_counter()
    ds = pathflow.simulate(scenario)
    elapsed = time.perf_counter() - started
    link = bottleneck_link(ds)
    packet = float(ds.attrs["packet_bytes"])
    stats = queue_stats(ds, warmup).sel(link=link)
    broken = list(report_of(ds).violations)
    return {
        "time": ds.time.values,
        "packets": ds.queue.sel(link=link).values / packet,
        "stats": {key: float(stats[key]) / packet for key in STATS},
        "throughput_mbps": float(throughput(ds, warmup).sum()) * 8e-6,
        "invariants": "all hold" if not broken else "VIOLATED: " + ", ".join(broken),
        "seconds": elapsed,
        "link": link,
    }


def fluid_series(duration: float, warmup: float, jobs: int) -> tuple[Series, Series]:
    """TCP (Reno) and DCTCP fluid runs, in parallel worker processes when `jobs` > 1."""
    names = ("reno_star", "dctcp_star")
    if jobs > 1:
        # spawn, not fork: JAX's runtime threads do not survive a fork
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=min(jobs, 2), mp_context=context) as pool:
            futures = [pool.submit(run_fluid, name, duration, warmup) for name in names]
            results = [future.result() for future in futures]
    else:
        results = [run_fluid(name, duration, warmup) for name in names]
    series = []
    for label, result in zip(("fluid TCP (Reno)", "fluid DCTCP"), results, strict=True):
        note = (f"{result['link']}, {result['throughput_mbps']:.1f} Mb/s, invariants "
                f"{result['invariants']}, simulated {duration:g} s in {result['seconds']:.1f} s")
        series.append(Series(label, result["time"], result["packets"], result["stats"], warmup,
                             note))
    return series[0], series[1]


def trace_series(name: str, label: str) -> Series:
    """A shipped DCTCP queue trace in its own packets (1514-byte frames), statistics from
    TRACE_SKIP s after its first sample."""
    from pathflow.metrics import queue_stats
    from pathflow.validation.traces import load_queue_trace, reference_path

    trace = load_queue_trace(reference_path(name))
    packet = float(trace.attrs["packet_bytes"])
    steady_from = float(trace.time[0]) + TRACE_SKIP
    stats = queue_stats(trace, steady_from).isel(link=0)
    time_s = trace.time.values
    return Series(label, time_s, trace.queue.isel(link=0).values / packet,
                  {key: float(stats[key]) / packet for key in STATS}, steady_from,
                  f"{name}, {time_s.size} samples at {1 / np.median(np.diff(time_s)):.0f} Hz")


def steady(series: Series) -> np.ndarray:
    """The samples of `series` inside its statistics window."""
    return series.packets[series.time > series.steady_from]


def print_table(all_series: list[Series], duration: float, warmup: float) -> None:
    """The plotted numbers: one row per series, packets."""
    print(f"Bottleneck queue, packets (fluid: t > {warmup:g} s of {duration:g} s; "
          f"traces: from {TRACE_SKIP:g} s after their first sample)")
    print(f"{'series':<22}" + "".join(f"{key:>8}" for key in STATS))
    for series in all_series:
        print(f"{series.label:<22}" + "".join(f"{series.stats[key]:8.1f}" for key in STATS))
    for series in all_series:
        print(f"  {series.label}: {series.note}")


def ecdf(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted values and their empirical cumulative probabilities."""
    x = np.sort(values)
    return x, np.arange(1, x.size + 1) / x.size


def draw(tcp: Series, dctcp: Series, hardware: Series, mininet: Series, duration: float,
         warmup: float, out: Path) -> Path:
    """The two-panel figure, written to `out` (PNG)."""
    fig = Figure(figsize=(13, 5.2), layout="constrained")
    left, right = fig.subplots(1, 2, width_ratios=[1.7, 1])

    # (a) queue against time; the hardware trace's steady part is shifted to start at `warmup`
    shift = hardware.steady_from - warmup
    keep = (hardware.time >= hardware.steady_from) & (hardware.time - shift <= duration)
    hw_time, hw_packets = hardware.time[keep] - shift, hardware.packets[keep]
    left.axvspan(0, warmup, color="0.93", lw=0)
    left.text(warmup / 2, BUFFER_PACKETS * 1.06, "start-up (not in statistics)", ha="center",
              va="center", fontsize=8, color="0.4")
    left.axhline(BUFFER_PACKETS, color="0.5", lw=0.8, ls="--")
    left.text(duration, BUFFER_PACKETS + 6, "buffer 425 pkt", ha="right", va="bottom",
              fontsize=8, color="0.4")
    left.plot(tcp.time, tcp.packets, color=COLORS["tcp"], lw=1.1,
              label="TCP (Reno), drop-tail: pathflow fluid")
    left.plot(dctcp.time, dctcp.packets, color=COLORS["dctcp"], lw=1.1,
              label="DCTCP, K = 20 pkt: pathflow fluid")
    left.plot(hw_time, hw_packets, ".", color=COLORS["hardware"], ms=2.5,
              label=f"DCTCP: hardware switch (time shifted by {-shift:+.1f} s)")
    left.set(xlim=(0, duration), ylim=(0, BUFFER_PACKETS * 1.12), xlabel="time (s)",
             ylabel="queue at the bottleneck (packets)")
    left.set_title("(a) Queue occupancy over time", loc="left", fontsize=11)
    left.legend(loc="lower left", bbox_to_anchor=(0.005, 0.1), fontsize=8.5, framealpha=0.95)

    zoom = left.inset_axes((0.56, 0.13, 0.42, 0.3))
    zoom.plot(dctcp.time, dctcp.packets, color=COLORS["dctcp"], lw=0.5, alpha=0.6)
    zoom.plot(hw_time, hw_packets, ".", color=COLORS["hardware"], ms=3)
    zoom.axhline(K_PACKETS, color="0.5", lw=0.7, ls=":")
    zoom.set(xlim=(0, duration), ylim=(10, 30))
    zoom.set_yticks([10, 15, 20, 25, 30])
    zoom.tick_params(labelsize=7)
    zoom.set_title("DCTCP zoomed (K = 20 dotted)", fontsize=8, pad=2)
    left.indicate_inset_zoom(zoom, edgecolor="0.5")

    # (b) distribution of the DCTCP queue
    for series, color, style in ((dctcp, COLORS["dctcp"], "-"),
                                 (hardware, COLORS["hardware"], "-"),
                                 (mininet, COLORS["mininet"], "--")):
        x, p = ecdf(steady(series))
        s = series.stats
        right.step(x, p, where="post", color=color, ls=style, lw=1.6,
                   label=f"{series.label}: mean {s['mean']:.1f}, "
                         f"range {s['min']:.1f}–{s['max']:.1f}")
    right.axvline(K_PACKETS, color="0.5", lw=0.8, ls=":")
    right.text(K_PACKETS + 0.2, 0.02, "K = 20", fontsize=8, color="0.4")
    right.set(xlim=(10, 30), ylim=(0, 1.01), xlabel="DCTCP queue (packets)",
              ylabel="fraction of samples ≤ x (CDF)")
    right.set_title("(b) DCTCP queue distribution", loc="left", fontsize=11)
    right.grid(alpha=0.3)
    right.legend(loc="upper left", fontsize=8.5, framealpha=0.95, title="packets, steady window",
                 title_fontsize=8.5)

    fig.suptitle("DCTCP vs TCP, 2 flows on a 100 Mb/s star (seed 003: Heller 2013, Fig. 5.2): "
                 "pathflow fluid model against hardware and Mininet-HiFi", fontsize=11.5)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=150)
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="PNG to write "
                        f"(default {DEFAULT_OUT.relative_to(ROOT)})")
    parser.add_argument("--duration", type=float, default=20.0,
                        help="simulated seconds of each fluid run (default 20)")
    parser.add_argument("--warmup", type=float, default=None,
                        help="start of the fluid statistics window, s (default duration / 4)")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                        help="processes for the two fluid runs (default: 2 where 2 cores)")
    args = parser.parse_args(argv)
    if args.duration <= 0:
        parser.error("--duration must be > 0")
    if args.warmup is None:
        args.warmup = args.duration / 4
    if not 0 <= args.warmup < args.duration:
        parser.error("--warmup must be in [0, duration)")
    return args


def main(argv: list[str] | None = None) -> int:
    """Simulate, print the statistics, draw the figure."""
    args = parse_args(argv)
    started = time.perf_counter()
    tcp, dctcp = fluid_series(args.duration, args.warmup, args.jobs)
    hardware = trace_series("hardware_dctcp_queue.csv", "hardware DCTCP")
    mininet = trace_series("mininet_dctcp_queue.csv", "Mininet-HiFi DCTCP")
    print_table([tcp, dctcp, hardware, mininet], args.duration, args.warmup)
    out = draw(tcp, dctcp, hardware, mininet, args.duration, args.warmup, args.out)
    print(f"wrote {out} in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
