"""XLA's CPU compiler options for the step loop, measured side by side in one process.

`solvers/run.py` compiles the step loop with `LOOP_OPTIONS`. This script compiles the loop of
a case twice, with option set A and option set B, and times them alternately from the same
saved state (the same steps, the same data, the same process: the machine's drift, which moves
a whole `bench_speed.py` run by 5 to 10 % on a shared machine, falls on both alike), so that an
option worth a few per cent can be told from noise. It prints the median time per step of each,
their ratio, and whether the two produce every array bit for bit the same.

- default: A = XLA's defaults, B = `LOOP_OPTIONS` (what the options are worth together);
- ``--without NAME``: A = `LOOP_OPTIONS` less NAME, B = `LOOP_OPTIONS` (what one is worth);
- ``--try NAME=VALUE``: A = `LOOP_OPTIONS`, B = `LOOP_OPTIONS` with NAME set (a candidate).

Cases are `bench_speed.py`'s (``ecmp``: the k = 8 fat-tree permutation at 10 Gb/s; ``100g``;
``incast``; ``mptcp``), at their finest step, after a warm-up of 2,000 steps. The process is
pinned to one CPU (`--cpus`), as `pathflow run` pins itself.

    python benchmarks/bench_xla_options.py                         # ecmp, 100g, incast
    python benchmarks/bench_xla_options.py --without xla_cpu_prefer_vector_width
    python benchmarks/bench_xla_options.py --try xla_cpu_enable_fast_min_max=true --cases ecmp

A measurement, not a test: nothing here asserts on speed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
WARM_STEPS = 2000
RECORDS = 10  # records per timed call (steps are split evenly among them)


def option_value(text: str) -> bool | int | str:
    """`true`/`false`, an integer, or the text itself."""
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    try:
        return int(text)
    except ValueError:
        return text


def option_sets(without: str | None, tried: str | None) -> tuple[dict, dict, str]:
    """(A, B, what B - A measures)."""
    from pathflow.solvers.run import LOOP_OPTIONS

    if without:
        if without not in LOOP_OPTIONS:
            raise SystemExit(f"--without: {without!r} is not one of LOOP_OPTIONS "
                             f"({', '.join(LOOP_OPTIONS)})")
        return ({k: v for k, v in LOOP_OPTIONS.items() if k != without}, dict(LOOP_OPTIONS),
                f"{without} (LOOP_OPTIONS with it / without it)")
    if tried:
        name, _, value = tried.partition("=")
        if not value:
            raise SystemExit("--try: give NAME=VALUE, e.g. xla_cpu_enable_fast_min_max=true")
        return (dict(LOOP_OPTIONS), {**LOOP_OPTIONS, name: option_value(value)},
                f"{name}={value} (LOOP_OPTIONS with it / without it)")
    return {}, dict(LOOP_OPTIONS), "LOOP_OPTIONS (with them / XLA's defaults)"


def measure(case: str, a: dict, b: dict, steps: int, rounds: int) -> dict[str, Any]:
    """Median seconds per step of the loop compiled with options `a` and with `b`."""
    from functools import partial

    import jax
    import numpy as np

    sys.path.insert(0, str(HERE))
    import bench_speed

    from pathflow.compile import compile_scenario
    from pathflow.solvers.dde import initial_carry, run_records

    compiled = compile_scenario(bench_speed.case_scenario(case, "50ms"))
    physics, problem, grid = compiled.physics, compiled.problem, compiled.grid

    def loop(options: dict) -> Any:
        @partial(jax.jit, compiler_options=options or None, donate_argnums=1)
        def advance(problem: Any, carry: Any, steps_per_record: int) -> Any:
            return run_records(physics, problem, grid, carry, RECORDS, steps_per_record, None)
        return advance

    loops = {"A": loop(a), "B": loop(b)}
    carry = jax.jit(lambda p: initial_carry(physics, p, grid))(problem)
    carry = loops["A"](problem, carry, WARM_STEPS // RECORDS)[0]
    saved = jax.tree.map(np.asarray, carry)
    per_record = max(1, steps // RECORDS)
    jax.block_until_ready(loops["B"](problem, jax.tree.map(jax.device_put, saved), 1))  # compile
    times: dict[str, list[float]] = {"A": [], "B": []}
    results: dict[str, Any] = {}
    for turn in range(rounds):
        for name in ("A", "B") if turn % 2 == 0 else ("B", "A"):
            start_carry = jax.block_until_ready(jax.tree.map(jax.device_put, saved))
            start = time.perf_counter()
            results[name] = jax.block_until_ready(loops[name](problem, start_carry,
                                                              per_record))
            times[name].append(time.perf_counter() - start)
    same = all(np.array_equal(np.asarray(x), np.asarray(y), equal_nan=True) for x, y in
               zip(jax.tree.leaves(results["A"]), jax.tree.leaves(results["B"]), strict=True))
    taken = per_record * RECORDS
    a_step, b_step = (float(np.median(times[n])) / taken for n in ("A", "B"))
    return {"case": case, "a_us_per_step": 1e6 * a_step, "b_us_per_step": 1e6 * b_step,
            "ratio_b_a": b_step / a_step, "bitwise_same": bool(same), "steps": taken,
            "rounds": rounds}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="ecmp,100g,incast",
                        help="bench_speed.py cases (default ecmp,100g,incast)")
    choice = parser.add_mutually_exclusive_group()
    choice.add_argument("--without", metavar="NAME", help="A: LOOP_OPTIONS less NAME")
    choice.add_argument("--try", dest="tried", metavar="NAME=VALUE",
                        help="B: LOOP_OPTIONS with NAME=VALUE")
    parser.add_argument("--steps", type=int, default=3000, help="steps per timed call")
    parser.add_argument("--rounds", type=int, default=12, help="timed calls of each")
    parser.add_argument("--cpus", type=int, default=1, help="CPUs to pin to (default 1)")
    parser.add_argument("--quick", action="store_true", help="ecmp, 200 steps, 2 rounds")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    if args.quick:
        args.cases, args.steps, args.rounds = "ecmp", 200, 2
    if hasattr(os, "sched_setaffinity"):  # before JAX starts its threads
        os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[: args.cpus]))
    a, b, what = option_sets(args.without, args.tried)
    print(f"XLA options, {what}; A = {a or 'XLA defaults'}; B = {b}")
    print(f"{'case':<8} {'A us/step':>10} {'B us/step':>10} {'B / A':>7}  bit for bit")
    rows = []
    for case in args.cases.split(","):
        row = measure(case, a, b, args.steps, args.rounds)
        rows.append(row)
        print(f"{case:<8} {row['a_us_per_step']:10.2f} {row['b_us_per_step']:10.2f} "
              f"{row['ratio_b_a']:7.3f}  {'yes' if row['bitwise_same'] else 'NO'}")
    if args.json:
        args.json.write_text(json.dumps({"options": {"A": a, "B": b}, "cases": rows},
                                        indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
