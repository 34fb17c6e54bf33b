"""Step-size study: how far the fluid model's answers move when dt grows past the default.

The default dt is 1/20 of the smallest base round trip (1/10 for rate-based models;
``pathflow.compile.choose_grid``). For each
case the scenario is run with ``run.dt`` = default x {1, 2, 4, 8, 16, 32} and one fixed sample
interval (32 default steps, so every run records at the same instants and rates are means over
the same intervals), and the key outputs are compared with the default run's:

- aggregate throughput and Jain index (``pathflow.metrics.throughput``, steady window);
- the busiest link's queue mean and p99 (the default run's busiest link, ranked as
  ``pathflow.metrics.hotspots``; ``queue_stats``); errors relative to max(default, 1 packet);
- per-flow rates: median and largest relative error (relative to max(default rate, 1 % of the
  mean rate));
- convergence time (``convergence_time`` on that link), reported, not judged.

Two more runs per case: a control at dt / 2 (how far the default itself is from a finer
step, on the same sample grid: the floor below which a difference says nothing), and the
candidate rule's step, dt = (smallest base RTT + q_ref / C) / 30 (not below the default), where
q_ref / C is a queueing delay known before running: the ECN step threshold K (RED: its min
threshold; drop-tail: half the buffer) over the fastest link's capacity. Its sample interval is
the nearest whole number of its steps to the fixed one.

Per case it also prints the smallest base RTT, the mean RTT over the steady window (Dataset
variable ``rtt``, time x subflow: the mean over both, and the smallest per-subflow mean),
q_ref / C, and the largest
acceptable dt: the largest multiple such that it and every smaller one keep throughput, Jain and
the queue mean and p99 within 1 % and every flow's rate within 5 % ("strict"; "median": the median
flow's rate within 5 %; "resolved": every tolerance widened to twice the dt/2 control's error,
since where the default itself moves by more than the tolerance at dt/2 no step can meet it), as
ratios to the base RTT, the steady RTTs and base RTT + q_ref / C.

Cases: ``k8_ecmp`` (benchmarks/bench_speed.py's k = 8 DCTCP permutation, 10 Gb/s, 9 KB packets,
ECMP, 100 ms), ``k8_100g`` (the same at 100 Gb/s with 1,500 B packets, 20 ms),
``incast2000`` and ``incast80`` (the default sweep's incast, 20 ms), ``dctcp_star``
(examples/dctcp_star.toml, 2 s), ``reno_star`` (examples/reno_star.toml, its 5 s),
``sawtooth_N2``, ``sawtooth_N8``, ``sawtooth_N32`` (the closed-form DCTCP case of
validation/cases/closed_forms.py: N flows at 10 Gb/s, K = 65 packets, 200 ms).

Usage::

    python benchmarks/study_dt.py                      # every case (several minutes)
    python benchmarks/study_dt.py --quick              # short runs, dt x {1, 4, 16}
    python benchmarks/study_dt.py --cases dctcp_star,reno_star --json dt.json

A measurement: nothing is asserted. Runs on one CPU unless ``--cpus`` says otherwise.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
MULTIPLIERS = (1, 2, 4, 8, 16, 32)
QUICK_MULTIPLIERS = (1, 4, 16)
CASE_NAMES = ("k8_ecmp", "k8_100g", "incast2000", "incast80", "dctcp_star", "reno_star",
              "sawtooth_N2", "sawtooth_N8", "sawtooth_N32")
RULE_FRACTION = 1 / 30  # the candidate rule: dt = (base RTT + q_ref / C) / 30 (see the docstring)
TOLERANCE = {"throughput": 0.01, "jain": 0.01, "queue_mean": 0.01, "queue_p99": 0.01,
             "flow_rate_max": 0.05}


def build_case(name: str, quick: bool) -> Any:
    """The scenario of a case (``--quick``: a tenth of the duration, at least a few RTTs)."""
    from bench_speed import fattree, incast

    from pathflow.scenario import load_scenario

    if name == "k8_ecmp":
        scenario = fattree(8, "ecmp", "100ms")
    elif name == "k8_100g":
        scenario = fattree(8, "ecmp", "20ms", jumbo=False)
    elif name.startswith("incast"):
        scenario = incast(int(name.removeprefix("incast")), "20ms")
    elif name == "dctcp_star":
        scenario = load_scenario(EXAMPLES / "dctcp_star.toml")
    elif name == "reno_star":
        scenario = load_scenario(EXAMPLES / "reno_star.toml")
    elif name.startswith("sawtooth_N"):
        from pathflow.validation.cases.closed_forms import K_10G, _star

        flows = int(name.removeprefix("sawtooth_N"))
        scenario = _star(flows, aqm={"kind": "ecn_step", "threshold": f"{K_10G}pkt"},
                         transport={"cc": "dctcp", "min_cwnd": "1pkt"},
                         run={"duration": "200ms"})
    else:
        raise ValueError(f"unknown case {name!r}")
    if quick:
        scenario = scenario.with_updates({"run.duration": scenario.si.run.duration / 10})
    return scenario


def _relative(value: float, reference: float, floor: float) -> float:
    return abs(value - reference) / max(abs(reference), floor)


def measure(ds: Any, link: str, packet: float) -> dict[str, Any]:
    """The compared outputs of one run, on `link`."""
    from pathflow.metrics import convergence_time, jain_index, queue_stats, throughput

    rates = throughput(ds)
    stats = queue_stats(ds).sel(link=link)
    cut = 0.25 * float(ds.time[-1])
    rtt = ds.rtt.sel(time=ds.time > cut).mean("time").values
    return {
        "throughput": float(rates.sum()),
        "jain": jain_index(rates.values),
        "queue_mean": float(stats["mean"]),
        "queue_p99": float(stats["p99"]),
        "rates": rates.values.astype(float),
        "convergence_s": convergence_time(ds, link=link).time,
        "rtt_mean_s": float(np.mean(rtt)),
        "rtt_min_mean_s": float(np.min(rtt)),
        "packet": packet,
    }


def compare(run: dict[str, Any], ref: dict[str, Any]) -> dict[str, float]:
    """Errors of `run` against the default-dt run `ref` (fractions)."""
    packet = ref["packet"]
    floor = 0.01 * float(np.mean(ref["rates"])) if ref["rates"].size else 1.0
    errors = np.abs(run["rates"] - ref["rates"]) / np.maximum(np.abs(ref["rates"]), floor)
    return {
        "throughput": _relative(run["throughput"], ref["throughput"], 1.0),
        "jain": _relative(run["jain"], ref["jain"], 1e-9),
        "queue_mean": _relative(run["queue_mean"], ref["queue_mean"], packet),
        "queue_p99": _relative(run["queue_p99"], ref["queue_p99"], packet),
        "flow_rate_median": float(np.median(errors)) if errors.size else 0.0,
        "flow_rate_max": float(np.max(errors)) if errors.size else 0.0,
        "flows_over_5pct": int(np.sum(errors > 0.05)),
        "convergence": (_relative(run["convergence_s"], ref["convergence_s"], 1e-12)
                        if math.isfinite(ref["convergence_s"]) else math.nan),
    }


def acceptable(errors: dict[str, float], median: bool,
               floor: dict[str, float] | None = None) -> bool:
    """Within the study's tolerances (`median`: judge the median flow instead of every flow;
    `floor`: the dt/2 control's errors, each tolerance widened to twice the control's)."""
    keys = ["throughput", "jain", "queue_mean", "queue_p99", "flow_rate_max"]
    tolerance = dict(TOLERANCE)
    if median:
        keys[-1] = "flow_rate_median"
        tolerance["flow_rate_median"] = tolerance.pop("flow_rate_max")
    if floor is not None:
        tolerance = {k: max(v, 2 * floor.get(k, 0.0)) for k, v in tolerance.items()}
    return all(errors[k] <= tolerance[k] for k in keys)


def reference_queue(scenario: Any, ds: Any) -> tuple[float, str]:
    """The queueing delay the rule adds to the base RTT, known before running: the marking
    threshold K (ECN step), RED's min threshold, or half the buffer (drop-tail), over the
    fastest link's capacity (the smallest such delay in the network)."""
    kind = scenario.si.aqm.kind
    capacity = float(ds.capacity.max())
    try:
        aqm = scenario.si.aqm.parameters
        if kind == "ecn_step":
            return float(aqm["threshold"]) / capacity, "K/C"
        if kind == "red":
            return float(aqm["min"]) / capacity, "min_th/C"
    except (AttributeError, KeyError):
        return math.nan, "n/a"
    buffers = ds.buffer.values[np.isfinite(ds.buffer.values) & (ds.buffer.values > 0)]
    return 0.5 * float(buffers.min()) / capacity, "B/2C"


def study_case(name: str, multipliers: Sequence[int], quick: bool, control: bool,
               say: Callable[[str], None]) -> dict[str, Any]:
    """Run one case at every dt multiple (and the dt/2 control and the candidate rule's dt) and
    compare each with the default."""
    import pathflow
    from pathflow.compile import compile_scenario
    from pathflow.metrics import hotspots

    scenario = build_case(name, quick)
    compiled = compile_scenario(scenario)
    dt0 = float(compiled.dt)
    base_rtt = float(np.min(np.asarray(compiled.problem.path_base_rtt)))
    sample = dt0 * max(multipliers)
    packet = float(scenario.packet_bytes)

    def simulate(dt: float) -> tuple[Any, float]:
        updated = scenario.with_updates({"run.dt": dt, "run.sample": sample})
        start = time.perf_counter()
        ds = pathflow.simulate(updated)
        return ds, time.perf_counter() - start

    ds0, wall0 = simulate(dt0)
    link = str(hotspots(ds0, top=1).link.values[0])
    ref = measure(ds0, link, packet)
    queue_delay, queue_label = reference_queue(scenario, ds0)
    rule_dt = max(dt0, RULE_FRACTION * (base_rtt + (queue_delay if math.isfinite(queue_delay)
                                                     else 0.0)))
    plan: list[tuple[str, float]] = [(f"x{m:g}", dt0 * m) for m in multipliers]
    if control:
        plan.insert(0, ("x0.5", dt0 / 2))
    plan.append(("rule", rule_dt))
    runs: list[dict[str, Any]] = []
    for label, dt in plan:
        ds, wall = (ds0, wall0) if label == "x1" else simulate(dt)
        figures = measure(ds, link, packet)
        errors = compare(figures, ref)
        runs.append({"label": label, "dt_s": dt, "wall_s": wall,
                     **{k: v for k, v in figures.items() if k != "rates"}, "errors": errors,
                     "acceptable": acceptable(errors, False),
                     "acceptable_median": acceptable(errors, True)})
        say(f"{name} dt {label} ({dt * 1e6:.3f} us): {wall:.1f} s, queue "
            f"{figures['queue_mean'] / packet:.2f} pkt, flow max err {errors['flow_rate_max']:.3%}")

    control_errors = runs[0]["errors"] if control else None
    for run in runs:
        run["acceptable_resolved"] = acceptable(run["errors"], False, control_errors)

    def largest(key: str) -> float:
        best = dt0
        for run in runs:
            if not run["label"].startswith("x") or run["dt_s"] < dt0:
                continue
            if not run[key]:
                break
            best = run["dt_s"]
        return best

    out: dict[str, Any] = {
        "case": name, "duration_s": scenario.si.run.duration, "dt_default_s": dt0,
        "sample_s": sample, "link": link, "base_rtt_min_s": base_rtt,
        "rtt_mean_s": ref["rtt_mean_s"], "rtt_min_mean_s": ref["rtt_min_mean_s"],
        "queue_delay_s": queue_delay, "queue_delay_kind": queue_label, "rule_dt_s": rule_dt,
        "runs": runs, "largest_ok_dt_s": largest("acceptable"),
        "largest_ok_dt_median_s": largest("acceptable_median"),
        "largest_ok_dt_resolved_s": largest("acceptable_resolved"),
    }
    for key in ("largest_ok_dt_s", "largest_ok_dt_median_s", "largest_ok_dt_resolved_s"):
        dt = out[key]
        out[key.replace("_s", "") + "_over"] = {
            "base_rtt": dt / base_rtt, "steady_rtt_mean": dt / ref["rtt_mean_s"],
            "steady_rtt_min": dt / ref["rtt_min_mean_s"],
            "base_plus_queue": (dt / (base_rtt + queue_delay)
                                if math.isfinite(queue_delay) else math.nan),
        }
    return out


def format_case(result: dict[str, Any]) -> str:
    """One case's table."""
    us = 1e6
    lines = [
        f"{result['case']}: {result['duration_s'] * 1e3:g} ms simulated, busiest link "
        f"{result['link']}, default dt {result['dt_default_s'] * us:.3f} us, sample "
        f"{result['sample_s'] * us:.2f} us",
        f"  base RTT min {result['base_rtt_min_s'] * us:.2f} us; steady RTT mean "
        f"{result['rtt_mean_s'] * us:.2f} us (smallest subflow mean "
        f"{result['rtt_min_mean_s'] * us:.2f} us); {result['queue_delay_kind']} "
        f"{result['queue_delay_s'] * us:.2f} us; rule dt {result['rule_dt_s'] * us:.3f} us "
        f"(x{result['rule_dt_s'] / result['dt_default_s']:.1f})",
        "  dt     |   dt us  | wall s | thrpt err | Jain err | q mean err | q p99 err | "
        "flow med | flow max | >5% | conv err | q mean pkt | conv ms | ok",
    ]
    for run in result["runs"]:
        e = run["errors"]
        conv = run["convergence_s"] * 1e3
        ok = ("yes" if run["acceptable"] else "resolved" if run["acceptable_resolved"]
              else "median" if run["acceptable_median"] else "no")
        lines.append(
            f"  {run['label']:<6} | {run['dt_s'] * us:>8.3f} | {run['wall_s']:>6.1f} | "
            f"{e['throughput']:>9.3%} | {e['jain']:>8.3%} | {e['queue_mean']:>10.3%} | "
            f"{e['queue_p99']:>9.3%} | {e['flow_rate_median']:>8.3%} | "
            f"{e['flow_rate_max']:>8.3%} | {e['flows_over_5pct']:>3} | {e['convergence']:>8.2%} | "
            f"{run['queue_mean'] / run['packet']:>10.2f} | {conv:>7.2f} | {ok}")
    for key, label in (("largest_ok_dt", "strict (every flow <= 5 %)"),
                       ("largest_ok_dt_resolved", "resolved (tolerance or 2x the dt/2 control)"),
                       ("largest_ok_dt_median", "median flow <= 5 %")):
        ratios = result[key + "_over"]
        lines.append(
            f"  largest acceptable dt, {label}: {result[key + '_s'] * us:.3f} us = "
            f"{ratios['base_rtt']:.3f} base RTT, {ratios['steady_rtt_mean']:.3f} steady mean RTT, "
            f"{ratios['steady_rtt_min']:.3f} smallest steady RTT, "
            f"{ratios['base_plus_queue']:.3f} (base RTT + {result['queue_delay_kind']})")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the study and print one table per case and a summary."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="a tenth of each duration, dt x {1, 4, 16}")
    parser.add_argument("--cases", default=",".join(CASE_NAMES),
                        help=f"comma-separated subset of {','.join(CASE_NAMES)}")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the figures as JSON")
    parser.add_argument("--multipliers", metavar="M,M,...",
                        help="dt multiples of the default (default 1,2,4,8,16,32; --quick 1,4,16)")
    parser.add_argument("--no-control", action="store_true", help="skip the dt/2 control run")
    parser.add_argument("--cpus", type=int, default=1, metavar="N",
                        help="pin to N CPUs before JAX starts (0: all; default 1)")
    args = parser.parse_args(argv)
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = sorted(set(cases) - set(CASE_NAMES))
    if unknown:
        parser.error(f"unknown case(s) {unknown}; known: {','.join(CASE_NAMES)}")
    if args.cpus > 0 and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[:args.cpus]))
    sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_speed's scenarios
    multipliers = QUICK_MULTIPLIERS if args.quick else MULTIPLIERS
    if args.multipliers:
        multipliers = tuple(sorted({int(m) for m in args.multipliers.split(",")} | {1}))

    def say(text: str) -> None:
        print(f"[study_dt] {text}", file=sys.stderr, flush=True)

    results = []
    for name in cases:
        results.append(study_case(name, multipliers, args.quick, not args.no_control, say))
        print(format_case(results[-1]) + "\n", flush=True)
    print("summary: largest acceptable dt (strict / resolved / median flow) as a fraction of;"
          " the rule's run judged the same way")
    print(f"{'case':<14} {'base RTT':>20} {'steady mean RTT':>20} {'base + q_ref/C':>20}  "
          "rule dt / default: strict, resolved, median")
    for r in results:
        ratios = [r[k + "_over"] for k in ("largest_ok_dt", "largest_ok_dt_resolved",
                                           "largest_ok_dt_median")]
        rule = r["runs"][-1]
        verdicts = ", ".join("yes" if rule[k] else "no" for k in
                             ("acceptable", "acceptable_resolved", "acceptable_median"))
        print(f"{r['case']:<14} " + " ".join(
            f"{'/'.join(f'{x[k]:.3f}' for x in ratios):>20}" for k in
            ("base_rtt", "steady_rtt_mean", "base_plus_queue"))
            + f"  x{r['rule_dt_s'] / r['dt_default_s']:.1f}: {verdicts}")
    if args.json is not None:
        args.json.write_text(json.dumps({"quick": args.quick, "multipliers": multipliers,
                                         "tolerance": TOLERANCE, "cases": results},
                                        indent=2, default=float) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
