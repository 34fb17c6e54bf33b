"""Engine benchmark: compile time, run time and throughput of the fluid solver, against ns-3.

Cases (see benchmarks/README.md):

- ``star``: the seed 003 DCTCP star (examples/dctcp_star.toml), 10 simulated seconds;
- ``ecmp`` / ``spray``: a k = 8 fat-tree (128 hosts) at 10 Gb/s under a random permutation of
  128 DCTCP flows, 100 simulated ms, with per-flow ECMP hashing and with packet spraying;
- ns-3 on the same star and duration (in a subprocess), for the speed ratio.

For each fluid case it times, with ``time.perf_counter``: building the problem
(``compile_scenario``), lowering and compiling ``solvers.dde.integrate`` ahead of time
(``.lower().compile()``), and the compiled whole run (outputs ``block_until_ready``). The first call
of the compiled program is a warm-up and is not timed.

Usage::

    python benchmarks/bench_engine.py              # full run (several minutes on a laptop CPU)
    python benchmarks/bench_engine.py --quick      # short durations, a smoke run
    python benchmarks/bench_engine.py --no-ns3 --json figures.json
    python benchmarks/bench_engine.py --cpus 1     # pin to one core (see README: threading)

This is a measurement, not a test: nothing here asserts on speed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import jax

import pathflow  # enables float64 before any array is made
from pathflow.compile import compile_scenario
from pathflow.scenario import Scenario, load_scenario
from pathflow.solvers.dde import integrate

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

# The fat-tree case: examples/fattree_permutation.toml scaled to k = 8 and 10 Gb/s.
FATTREE_UPDATES: dict[str, Any] = {
    "name": "fattree-k8-permutation",
    "topology.k": 8,
    "topology.link_rate": "10Gbps",
    "topology.delay": "2us",
    "topology.buffer": "300KB",
    "aqm.threshold": "65pkt",
}

FULL_DURATIONS = {"star": "10s", "fattree": "100ms"}
QUICK_DURATIONS = {"star": "0.5s", "fattree": "1ms"}
CASE_NAMES = ("star", "ecmp", "spray")


@dataclass
class CaseResult:
    """The figures of one fluid case (SI units: seconds, bytes)."""

    case: str
    label: str
    links: int
    paths: int
    hops: int
    flows: int
    dt_s: float
    steps: int
    records: int
    history_steps: int
    simulated_s: float
    build_s: float
    lower_s: float
    compile_s: float
    first_call_s: float
    run_s: float
    run_all_s: list[float]
    steps_per_s: float
    us_per_step: float
    sim_s_per_wall_s: float
    xla_bytes: int
    peak_rss_bytes: int


@dataclass
class Ns3Result:
    """ns-3 on the star: wall time of the subprocess (start-up included) and of the run alone."""

    simulated_s: float
    wall_total_s: float
    wall_sim_s: float | None
    peak_rss_bytes: int


def _peak_rss_bytes(who: int = resource.RUSAGE_SELF) -> int:
    """Peak resident set size so far (Linux reports KiB, macOS bytes)."""
    peak = resource.getrusage(who).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def build_scenarios(quick: bool) -> dict[str, Scenario]:
    """The benchmark's scenarios by case name."""
    durations = QUICK_DURATIONS if quick else FULL_DURATIONS
    star = load_scenario(EXAMPLES / "dctcp_star.toml").with_updates(
        {"run.duration": durations["star"]})
    fattree = load_scenario(EXAMPLES / "fattree_permutation.toml").with_updates(
        {**FATTREE_UPDATES, "run.duration": durations["fattree"]})
    return {
        "star": star,
        "ecmp": fattree.with_updates({"routing.mode": "ecmp"}),
        "spray": fattree.with_updates({"routing.mode": "spray"}),
    }


def _label(case: str, scenario: Scenario) -> str:
    duration = scenario.spec.run.duration
    if case == "star":
        return f"DCTCP star {duration}"
    return f"fat-tree k=8 {case} {duration}"


def _timed(function: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    value = function()
    return value, time.perf_counter() - start


def bench_case(case: str, scenario: Scenario, repeat: int) -> CaseResult:
    """Build, compile and run one scenario; the run time is the best of `repeat` runs."""
    compiled, build_s = _timed(lambda: compile_scenario(scenario))
    physics, problem, grid = compiled.physics, compiled.problem, compiled.grid
    lowered, lower_s = _timed(lambda: integrate.lower(physics, problem, grid))
    program, compile_s = _timed(lowered.compile)
    _, first_call_s = _timed(lambda: jax.block_until_ready(program(problem)))
    runs = [_timed(lambda: jax.block_until_ready(program(problem)))[1] for _ in range(repeat)]
    run_s = min(runs)
    memory = program.memory_analysis()
    xla_bytes = 0 if memory is None else int(memory.argument_size_in_bytes
                                             + memory.output_size_in_bytes
                                             + memory.temp_size_in_bytes)
    paths, hops = (int(n) for n in problem.path_hops.shape)
    return CaseResult(
        case=case, label=_label(case, scenario), links=problem.n_links, paths=paths, hops=hops,
        flows=problem.n_subflows, dt_s=compiled.dt, steps=grid.steps, records=grid.records,
        history_steps=grid.history, simulated_s=grid.steps * compiled.dt, build_s=build_s,
        lower_s=lower_s, compile_s=compile_s, first_call_s=first_call_s, run_s=run_s,
        run_all_s=runs, steps_per_s=grid.steps / run_s, us_per_step=run_s / grid.steps * 1e6,
        sim_s_per_wall_s=grid.steps * compiled.dt / run_s, xla_bytes=xla_bytes,
        peak_rss_bytes=_peak_rss_bytes(),
    )


def bench_ns3(scenario: Scenario) -> Ns3Result | str:
    """ns-3 on `scenario`, or a one-line reason why it did not run."""
    try:
        from pathflow.validation.ns3 import ns3_available, simulate_ns3
    except ImportError as error:  # pragma: no cover - depends on the install
        return f"not run: {error}"
    if not ns3_available():
        return "not run: the ns3 package is not installed"
    try:
        ds, outer_s = _timed(lambda: simulate_ns3(scenario))
    except RuntimeError as error:
        return f"failed: {str(error).splitlines()[0]}"
    sim = ds.attrs.get("sim_wall_time_s")
    return Ns3Result(simulated_s=scenario.si.run.duration,
                     wall_total_s=float(ds.attrs.get("wall_time_s", outer_s)),
                     wall_sim_s=None if sim is None else float(sim),
                     peak_rss_bytes=_peak_rss_bytes(resource.RUSAGE_CHILDREN))


def ratios(star: CaseResult, ns3: Ns3Result) -> dict[str, float]:
    """How many times faster pathflow is than ns-3 on the star (> 1: pathflow is faster)."""
    out = {
        "ns3_total_over_pathflow_compile_plus_run": ns3.wall_total_s
        / (star.build_s + star.lower_s + star.compile_s + star.run_s),
        "ns3_total_over_pathflow_run": ns3.wall_total_s / star.run_s,
    }
    if ns3.wall_sim_s is not None:
        out["ns3_sim_over_pathflow_run"] = ns3.wall_sim_s / star.run_s
    return out


# --- formatting -------------------------------------------------------------------------------

def _num(value: float, unit: str, digits: int = 3) -> str:
    """`value` to `digits` significant figures (thousands separated) with its unit."""
    if value is None or not math.isfinite(value):
        return f"n/a {unit}"
    if value == 0:
        return f"0 {unit}"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    return f"{value:,.{decimals}f} {unit}"


def _seconds(value: float) -> str:
    if abs(value) < 1e-3:
        return _num(value * 1e6, "us")
    if abs(value) < 1:
        return _num(value * 1e3, "ms")
    return _num(value, "s")


def _mib(value: float) -> str:
    return _num(value / 2**20, "MiB")


ROWS: list[tuple[str, Callable[[CaseResult], str]]] = [
    ("links / paths x hops / flows",
     lambda r: f"{r.links} lk / {r.paths}x{r.hops} / {r.flows} fl"),
    ("simulated time", lambda r: _seconds(r.simulated_s)),
    ("dt", lambda r: _seconds(r.dt_s)),
    ("steps", lambda r: f"{r.steps:,} steps"),
    ("history ring", lambda r: f"{r.history_steps:,} steps"),
    ("build problem (compile_scenario)", lambda r: _seconds(r.build_s)),
    ("trace + lower", lambda r: _seconds(r.lower_s)),
    ("XLA compile", lambda r: _seconds(r.compile_s)),
    ("first call (warm-up)", lambda r: _seconds(r.first_call_s)),
    ("run, compiled (best)", lambda r: _seconds(r.run_s)),
    ("steps per second", lambda r: _num(r.steps_per_s, "steps/s")),
    ("time per step", lambda r: _num(r.us_per_step, "us/step")),
    ("simulated per wall second", lambda r: _num(r.sim_s_per_wall_s, "sim-s/s")),
    ("XLA buffers (args+out+temp)", lambda r: _mib(r.xla_bytes)),
    ("peak RSS of process so far", lambda r: _mib(r.peak_rss_bytes)),
]


def format_table(results: Sequence[CaseResult], ns3: Ns3Result | str | None,
                 header: str) -> str:
    """The printed report: one row per figure, one column per case, then ns-3 and the ratios."""
    names = [name for name, _ in ROWS]
    cells = [[fmt(r) for r in results] for _, fmt in ROWS]
    width0 = max(len(n) for n in names) + 2
    widths = [max(len(r.label), *(len(row[i]) for row in cells)) + 2
              for i, r in enumerate(results)]
    lines = [header, ""]
    lines.append("".ljust(width0) + "".join(r.label.rjust(w) for r, w in zip(results, widths,
                                                                             strict=True)))
    lines.append("-" * (width0 + sum(widths)))
    for name, row in zip(names, cells, strict=True):
        lines.append(name.ljust(width0) + "".join(c.rjust(w) for c, w in zip(row, widths,
                                                                             strict=True)))
    if ns3 is None:
        return "\n".join(lines)
    lines += ["", "ns-3 on the same DCTCP star"]
    if isinstance(ns3, str):
        lines.append(f"  {ns3}")
        return "\n".join(lines)
    sim = "n/a s (attr missing)" if ns3.wall_sim_s is None else _seconds(ns3.wall_sim_s)
    ns3_rows = [
        ("simulated time", _seconds(ns3.simulated_s)),
        ("wall, total (incl. start-up)", _seconds(ns3.wall_total_s)),
        ("wall, simulation only", sim),
        ("simulated per wall second (sim only)",
         _num(ns3.simulated_s / ns3.wall_sim_s, "sim-s/s") if ns3.wall_sim_s else "n/a sim-s/s"),
        ("peak RSS of ns-3 child", _mib(ns3.peak_rss_bytes)),
    ]
    star = next((r for r in results if r.case == "star"), None)
    if star is not None:
        figures = ratios(star, ns3)
        ns3_rows += [
            ("speed-up, ns-3 total / pathflow build+compile+run",
             _num(figures["ns3_total_over_pathflow_compile_plus_run"], "x")),
            ("speed-up, ns-3 total / pathflow run",
             _num(figures["ns3_total_over_pathflow_run"], "x")),
            ("speed-up, ns-3 sim only / pathflow run",
             _num(figures.get("ns3_sim_over_pathflow_run", math.nan), "x")),
        ]
    name_width = max(len(n) for n, _ in ns3_rows) + 2
    value_width = max(len(v) for _, v in ns3_rows)
    lines += [f"  {n.ljust(name_width)}{v.rjust(value_width)}" for n, v in ns3_rows]
    return "\n".join(lines)


def pin_cpus(count: int) -> list[int]:
    """Restrict this process (and the ns-3 child) to its first `count` allowed CPUs.

    Must run before JAX starts its CPU backend: XLA sizes its intra-op thread pool from the
    CPUs the process may use. Returns the CPUs kept."""
    if not hasattr(os, "sched_setaffinity"):
        raise SystemExit("--cpus needs os.sched_setaffinity (Linux)")
    keep = sorted(os.sched_getaffinity(0))[:count]
    os.sched_setaffinity(0, set(keep))
    return keep


def environment() -> dict[str, Any]:
    """Versions and hardware, for the header and the JSON."""
    device = jax.devices()[0]
    return {
        "python": platform.python_version(),
        "jax": jax.__version__,
        "pathflow": pathflow.__version__,
        "backend": jax.default_backend(),
        "device": str(device.device_kind),
        "cpus": os.cpu_count(),
        "cpus_allowed": (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                         else os.cpu_count()),
        "machine": platform.machine(),
        "x64": bool(jax.config.jax_enable_x64),
        "load_average_1min": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print (and optionally save) its figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="short durations (star 0.5 s, fat-tree 1 ms) for a smoke run")
    parser.add_argument("--no-ns3", action="store_true", help="skip the ns-3 comparison")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the figures as JSON")
    parser.add_argument("--repeat", type=int, default=1, metavar="N",
                        help="time N compiled runs per case and keep the fastest (default 1)")
    parser.add_argument("--cpus", type=int, metavar="N",
                        help="pin the process to N CPUs before JAX starts (Linux)")
    parser.add_argument("--cases", default=",".join(CASE_NAMES),
                        help=f"comma-separated subset of {','.join(CASE_NAMES)}")
    args = parser.parse_args(argv)
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = sorted(set(cases) - set(CASE_NAMES))
    if unknown or args.repeat < 1 or (args.cpus is not None and args.cpus < 1):
        parser.error(f"unknown case(s) {unknown}" if unknown
                     else "--repeat and --cpus must be >= 1")
    if args.cpus is not None:
        pin_cpus(args.cpus)

    env = environment()
    header = (f"pathflow engine benchmark{' (--quick)' if args.quick else ''}: jax {env['jax']}, "
              f"{env['backend']} ({env['device']}), {env['cpus_allowed']} of {env['cpus']} CPUs, "
              f"{'float64' if env['x64'] else 'float32'}, load {env['load_average_1min']:.1f}")
    scenarios = build_scenarios(args.quick)
    results = []
    for case in cases:
        print(f"[bench] {case}: {_label(case, scenarios[case])} ...", file=sys.stderr, flush=True)
        results.append(bench_case(case, scenarios[case], args.repeat))
    ns3: Ns3Result | str | None = None
    if not args.no_ns3:
        print("[bench] ns-3 on the star ...", file=sys.stderr, flush=True)
        ns3 = bench_ns3(scenarios["star"])
    print(format_table(results, ns3, header))

    if args.json is not None:
        star = next((r for r in results if r.case == "star"), None)
        payload: dict[str, Any] = {
            "quick": args.quick, "repeat": args.repeat, "environment": env,
            "cases": [asdict(r) for r in results],
            "ns3": ns3 if isinstance(ns3, str | None) else asdict(ns3),
            "ratios": (ratios(star, ns3) if isinstance(ns3, Ns3Result) and star is not None
                       else None),
        }
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
