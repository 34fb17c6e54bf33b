"""Packet-level simulator benchmark: packet-hops per second, compile time, speed against ns-3.

Cases:

- ``star``: a 16-flow DCTCP star at 10 Gb/s (16 senders -> s0 -> r0, 5 us links, K = 65
  packets, 5 MB port buffer), 50 simulated ms;
- ``ecmp`` / ``spray``: the k = 4 fat-tree permutation of examples/fattree_permutation.toml
  (16 hosts, 48 cables, 1 Gb/s, DCTCP), 100 simulated ms, per-flow ECMP and per-packet spraying;
- ns-3 on each of the same scenarios and durations (one subprocess per case, run one after
  the other so that they do not share the CPU), for the speed ratio; the fat-tree runs on
  pathflow's own paths (per-flow ECMP paths, sprayed packets split as pathflow splits them).

A packet-hop is one packet serialised onto one link (data and ACKs alike). "first call" is the
first `simulate_packets` of the process: numba compilation when the on-disk cache is cold or
stale, else loading it; "run" is the best of `--repeat` later calls of the event loop alone.

Usage::

    python benchmarks/bench_packet.py                 # full run (about two minutes)
    python benchmarks/bench_packet.py --quick --no-ns3
    python benchmarks/bench_packet.py --json figures.json --repeat 3

This is a measurement, not a test: nothing here asserts on speed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pathflow
from pathflow.scenario import Scenario, load_scenario
from pathflow.validation.packet import simulate_packets

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
CASE_NAMES = ("star", "ecmp", "spray")


def star_16(duration: str) -> Scenario:
    return Scenario.from_dict({
        "name": "dctcp-star-16x10g",
        "topology": {"kind": "star", "senders": 16, "link_rate": "10Gbps", "delay": "5us",
                     "buffer": "5MB"},
        "aqm": {"kind": "ecn_step", "threshold": "65pkt"},
        "traffic": {"pattern": "incast", "flows": 16},
        "transport": {"cc": "dctcp"},
        "run": {"duration": duration},
    })


def build_scenarios(quick: bool) -> dict[str, Scenario]:
    fattree = load_scenario(EXAMPLES / "fattree_permutation.toml")
    duration = "10ms" if quick else "100ms"
    return {
        "star": star_16("5ms" if quick else "50ms"),
        "ecmp": fattree.with_updates({"routing.mode": "ecmp", "run.duration": duration}),
        "spray": fattree.with_updates({"routing.mode": "spray", "run.duration": duration}),
    }


@dataclass
class CaseResult:
    case: str
    links: int
    flows: int
    simulated_s: float
    first_call_s: float
    run_s: float
    events: int
    packet_hops: int
    hops_per_s: float
    events_per_s: float
    simulated_per_wall_s: float
    aggregate_gbps: float


def bench_case(case: str, scenario: Scenario, repeat: int) -> CaseResult:
    t0 = time.perf_counter()
    ds = simulate_packets(scenario)
    first = time.perf_counter() - t0
    runs = [ds.attrs["run_wall_s"]]
    for _ in range(max(repeat, 1)):
        runs.append(simulate_packets(scenario).attrs["run_wall_s"])
    best = min(runs[1:])
    hops, events = int(ds.attrs["packet_hops"]), int(ds.attrs["events"])
    rate = float(pathflow.metrics.throughput(ds).sum()) * 8 / 1e9
    simulated = scenario.si.run.duration
    return CaseResult(case, ds.sizes["link"], ds.sizes["flow"], simulated, first, best,
                      events, hops, hops / best, events / best, simulated / best, rate)


def bench_ns3(scenario: Scenario) -> dict[str, Any] | str:
    """ns-3 on `scenario`: wall time with start-up, its event loop alone, and the aggregate
    throughput in the packet simulator's units (delivered IP bytes; ns-3 counts payload)."""
    from pathflow.validation.ns3 import ns3_available, simulate_ns3

    if not ns3_available():
        return "ns-3 is not installed (pip install 'pathflow[ns3]')"
    t0 = time.perf_counter()
    ds = simulate_ns3(scenario, sample_interval=1e-3, timeout_s=1800)
    total = time.perf_counter() - t0
    packet = float(ds.attrs["packet_bytes"])
    payload = float(pathflow.metrics.throughput(ds).sum())
    rate = payload * packet / float(ds.attrs["mss_bytes"]) * 8 / 1e9
    return {"total_s": total, "simulation_s": float(ds.attrs["sim_wall_time_s"]),
            "aggregate_gbps": rate}


def format_table(results: Sequence[CaseResult], ns3: dict[str, dict[str, Any] | str] | None
                 ) -> str:
    width = 26
    names = [r.case for r in results]
    lines = [f"{'':{width}}" + "".join(f"{n:>16}" for n in names)]

    def row(label: str, values: Sequence[str]) -> None:
        lines.append(f"{label:{width}}" + "".join(f"{v:>16}" for v in values))

    row("links / flows", [f"{r.links} / {r.flows}" for r in results])
    row("simulated", [f"{r.simulated_s * 1e3:.0f} ms" for r in results])
    row("first call (compile/load)", [f"{r.first_call_s:.2f} s" for r in results])
    row("run (best)", [f"{r.run_s:.3f} s" for r in results])
    row("events", [f"{r.events:,}" for r in results])
    row("packet-hops", [f"{r.packet_hops:,}" for r in results])
    row("packet-hops per second", [f"{r.hops_per_s / 1e6:.2f} M" for r in results])
    row("events per second", [f"{r.events_per_s / 1e6:.2f} M" for r in results])
    row("simulated per wall second", [f"{r.simulated_per_wall_s:.3f}" for r in results])
    row("aggregate throughput", [f"{r.aggregate_gbps:.2f} Gb/s" for r in results])
    if ns3 is None:
        lines += ["", "ns-3: skipped (--no-ns3)"]
        return "\n".join(lines)
    runs = {case: value for case, value in ns3.items() if isinstance(value, dict)}
    for case, value in ns3.items():
        if isinstance(value, str):
            lines += ["", f"ns-3 ({case}): {value}"]
    if not runs:
        return "\n".join(lines)
    lines += ["", "ns-3 3.44 on the same scenarios (one subprocess each; speed-up = ns-3 time / "
              "packet simulator time):"]

    def cell(fill: Callable[[CaseResult, dict[str, Any]], str]) -> list[str]:
        return [fill(r, runs[r.case]) if r.case in runs else "-" for r in results]

    row("ns-3 total (start-up too)", cell(lambda r, n: f"{n['total_s']:.1f} s"))
    row("ns-3 simulation only", cell(lambda r, n: f"{n['simulation_s']:.2f} s"))
    row("ns-3 packet-hops/s", cell(lambda r, n: f"{r.packet_hops / n['simulation_s'] / 1e6:.3f} M"))
    row("speed-up, simulation only", cell(lambda r, n: f"{n['simulation_s'] / r.run_s:.0f} x"))
    row("speed-up, end to end", cell(lambda r, n: f"{n['total_s'] / r.first_call_s:.1f} x"))
    row("ns-3 aggregate throughput", cell(lambda r, n: f"{n['aggregate_gbps']:.2f} Gb/s"))
    lines += ["(ns-3 packet-hops/s counts the packet simulator's hops; end to end compares the "
              "first call with ns-3's total;", " throughput: delivered IP bytes after a quarter "
              "of the run, both engines)"]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short durations, a smoke run")
    parser.add_argument("--no-ns3", action="store_true", help="skip the ns-3 comparison")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the figures as JSON")
    parser.add_argument("--repeat", type=int, default=1, metavar="N",
                        help="timed runs per case after the first call (best is reported)")
    parser.add_argument("--cases", default=",".join(CASE_NAMES),
                        help=f"comma-separated subset of {', '.join(CASE_NAMES)}")
    args = parser.parse_args(argv)
    cases = [c for c in args.cases.split(",") if c]
    unknown = sorted(set(cases) - set(CASE_NAMES))
    if unknown:
        parser.error(f"unknown case(s): {', '.join(unknown)}")
    scenarios = build_scenarios(args.quick)
    print(f"pathflow packet benchmark -- {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}, python {sys.version.split()[0]}")
    results = [bench_case(case, scenarios[case], args.repeat) for case in cases]
    # One ns-3 run at a time: side by side they would share the CPU and slow each other.
    ns3 = None if args.no_ns3 else {case: bench_ns3(scenarios[case]) for case in cases}
    print(format_table(results, ns3))
    if args.json:
        args.json.write_text(json.dumps({"cases": [asdict(r) for r in results], "ns3": ns3},
                                        indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
