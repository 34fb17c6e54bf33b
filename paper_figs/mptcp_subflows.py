"""Permutation throughput against the number of MPTCP subflows, on k = 4 and k = 8 fat-trees.

The datacenter MPTCP study (Raiciu et al., "Improving datacenter performance and robustness with
multipath TCP", SIGCOMM 2011, Figures 2 and 3) shows that on a fat-tree under a permutation
matrix single-path TCP with ECMP reaches well under the optimum (flows collide on core links),
and that MPTCP with per-subflow ECMP climbs towards it as the subflows increase: with 8 subflows
it is within a few percent. This script redraws that curve from pathflow: for each fat-tree size
k, each number of subflows n (ndiffports, each subflow hashed on its own) and each coupling
(LIA, OLIA, BALIA, uncoupled), the fraction of optimal is the aggregate steady throughput over
the hosts' total link rate, from the fluid model and the packet-level reference on the same
scenario (same hash seed, same paths). The validation case `mptcp_subflows`
(validation/cases/subflows.py) claims a subset of these points.

    python paper_figs/mptcp_subflows.py [--out paper_figs/mptcp_subflows.png]
        [--ks 4,8] [--subflows 1,2,4,8] [--engines fluid,packet] [--duration 300ms]

It prints one row per point: k, n, cc and the fraction of optimal per engine, and the largest
fluid-packet difference. Points run in parallel processes (`--jobs`, default: the CPU count).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from pathflow.validation.cases.subflows import CCS, fraction_of_optimal, subflows_figure

DEFAULT_OUT = Path(__file__).resolve().with_name("mptcp_subflows.png")


def _fraction(point: tuple[str, int, int, str, str, str]) -> float:
    return fraction_of_optimal(*point)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--ks", default="4,8", help="fat-tree sizes (even)")
    parser.add_argument("--subflows", default="1,2,4,8")
    parser.add_argument("--ccs", default=",".join(CCS))
    parser.add_argument("--engines", default="fluid,packet", help="fluid and/or packet")
    parser.add_argument("--duration", default="300ms")
    parser.add_argument("--rate", default="1Gbps")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)
    ks = [int(k) for k in args.ks.split(",")]
    counts = [int(n) for n in args.subflows.split(",")]
    ccs, engines = args.ccs.split(","), args.engines.split(",")
    points = [(e, k, n, cc, args.duration, args.rate)
              for k in ks for n in counts for cc in ccs for e in engines]
    started = time.perf_counter()
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        fractions = {point[:4]: value
                     for point, value in zip(points, pool.map(_fraction, points), strict=True)}
    print(f"{'k':>3} {'n':>3} {'cc':<10}" + "".join(f"{e:>9}" for e in engines))
    worst = 0.0
    for k in ks:
        for n in counts:
            for cc in ccs:
                row = [fractions[(e, k, n, cc)] for e in engines]
                print(f"{k:>3} {n:>3} {cc:<10}" + "".join(f"{v:>9.3f}" for v in row))
                if len(row) == 2:
                    worst = max(worst, abs(row[0] - row[1]))
    if len(engines) == 2:
        print(f"largest fluid-packet difference: {worst:.3f} of optimal")
    subflows_figure(fractions, args.rate).savefig(args.out, dpi=120)
    print(f"wrote {args.out} in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
