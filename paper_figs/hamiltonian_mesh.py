"""Seed 004, Topology 1: throughput gain over TCP of MPTCP (BALIA) over VLAN-specific (VS) and
shared (NVS) Hamiltonian paths and over the shortest path, at low, medium and high load.

Jerome's thesis (UCF 2017, chapter 4) measured these gains in Mininet with Floodlight: VS > NVS
> MPTCP > TCP at every load, largest at medium load (+50, +47, +20 %). This script runs the same
experiment in pathflow (`pathflow.validation.cases.mesh`, which states what the thesis leaves
open and how each choice was made) with the fluid model and the packet-level reference, and
draws the gains beside the thesis's.

    python paper_figs/hamiltonian_mesh.py [--out paper_figs/hamiltonian_mesh.png]
        [--engines fluid,packet]

It prints, per load and scheme, the aggregate throughput and the gain over TCP of each engine
and the thesis's gain.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

DEFAULT_OUT = Path(__file__).resolve().with_name("hamiltonian_mesh.png")


def main(argv: list[str] | None = None) -> int:
    from pathflow.validation.cases.mesh import (
        LOADS,
        PUBLISHED,
        SCHEMES,
        gains,
        mesh_figure,
        throughputs,
    )

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--engines", default="fluid,packet", help="fluid and/or packet")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    results = {engine: throughputs(engine) for engine in args.engines.split(",")}
    print(f"{'load':<7} {'scheme':<6} {'thesis':>7}"
          + "".join(f" {engine + ' Mb/s':>12} {'gain':>7}" for engine in results))
    for load in LOADS:
        for scheme in SCHEMES:
            published = PUBLISHED[load].get(scheme)
            row = f"{load:<7} {scheme:<6} " + (f"{published:>+6.0f}%" if published is not None
                                               else f"{'-':>7}")
            for values in results.values():
                gain = gains(values)[load].get(scheme)
                row += f" {values[load][scheme] * 8 / 1e6:>12.2f} " + (
                    f"{gain:>+6.1f}%" if gain is not None else f"{'-':>7}")
            print(row)
    mesh_figure(results).savefig(args.out, dpi=120)
    print(f"wrote {args.out} in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
