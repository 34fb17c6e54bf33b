"""Speed of the pooled allocations of MPTCP connections (`pathflow analyze` prints them):
`fairness.pooled_alpha_fair`'s barrier method against SLSQP, scipy's general constrained
solver that it replaced, in one process, on the same problem.

Case: `examples/fattree_permutation.toml` (a random permutation, ECMP per subflow) on a k-ary
fat-tree with n ndiffports subflows per connection; proportional fairness (alpha = 1) of
connections that pool their paths. Printed: each solver's wall time, their ratio, and the
largest difference of a connection's total between the two (over the largest link's capacity).

    python benchmarks/bench_pooled.py                    # k = 8, 2 subflows: about 15 s
    python benchmarks/bench_pooled.py --k 8 --subflows 4 # SLSQP takes minutes here
    python benchmarks/bench_pooled.py --quick --json figures.json   # k = 4 (smoke)

A measurement, not a test: nothing here asserts on speed.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import scipy.optimize

from pathflow import load_scenario
from pathflow.analysis.fairness import Network, network_of, pooled_alpha_fair
from pathflow.compile import compile_scenario

EXAMPLE = Path(__file__).parents[1] / "examples" / "fattree_permutation.toml"


def slsqp_proportional(network: Network, connection: np.ndarray) -> np.ndarray:
    """The reference: sum_c count_c log y_c by SLSQP in the primal, rates in units of the
    smallest equal share of a link (as the barrier method's)."""
    used = network.routing * network.count[None, :]
    crossed = used.sum(axis=1)
    scale = float(np.min(network.capacity[crossed > 0] / crossed[crossed > 0]))
    _, owner = np.unique(connection, return_inverse=True)
    weight = np.bincount(owner, network.count) / np.bincount(owner)

    def objective(x: np.ndarray) -> tuple[float, np.ndarray]:
        total = np.maximum(np.bincount(owner, x), 1e-12)
        return -float(weight @ np.log(total)), -(weight / total)[owner]

    found = scipy.optimize.minimize(
        objective, np.full(owner.size, 0.5), jac=True, method="SLSQP",
        bounds=[(0.0, None)] * owner.size,
        constraints=[{"type": "ineq", "fun": lambda x: network.capacity / scale - used @ x,
                      "jac": lambda _: -used}],
        options={"ftol": 1e-14, "maxiter": 1000})
    return found.x * scale


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--subflows", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="k = 4 (a smoke run)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    if args.quick:
        args.k = 4
    scenario = load_scenario(EXAMPLE).with_updates({
        "topology.k": args.k, "transport.cc": "lia", "transport.subflows": args.subflows})
    compiled = compile_scenario(scenario)
    network, _, _ = network_of(compiled, subflows=True)
    connection = np.asarray(compiled.problem.subflow_flow)
    timed = {}
    for name, solve in (("barrier", lambda: pooled_alpha_fair(network, connection, 1.0)),
                        ("SLSQP", lambda: slsqp_proportional(network, connection))):
        start = time.perf_counter()
        rates = solve()
        timed[name] = (time.perf_counter() - start, np.bincount(connection, rates))
    (barrier, ours), (general, theirs) = timed["barrier"], timed["SLSQP"]
    print(f"k = {args.k} fat-tree, {connection.size} subflows of "
          f"{np.unique(connection).size} connections, proportional fairness, pooled")
    print(f"| solver | wall time |\n|---|---|\n| barrier | {barrier:.2f} s |\n"
          f"| SLSQP | {general:.2f} s |")
    print(f"SLSQP / barrier: {general / barrier:.1f}x; largest difference of a connection's "
          f"total: {np.max(np.abs(ours - theirs)) / network.capacity.max():.1e} of a link")
    if args.json:
        args.json.write_text(json.dumps({"cases": [{
            "case": f"k{args.k}", "subflows": int(connection.size), "barrier_s": barrier,
            "slsqp_s": general, "largest_difference": float(
                np.max(np.abs(ours - theirs)) / network.capacity.max())}]}, indent=2))


if __name__ == "__main__":
    main()
