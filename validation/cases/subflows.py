"""MPTCP permutation throughput against the number of subflows on fat-trees, both engines

The datacenter MPTCP study (Raiciu et al., "Improving datacenter performance and robustness with
multipath TCP", SIGCOMM 2011, Figures 2 and 3): on a fat-tree under a permutation, single-path
TCP with ECMP stays well under the optimum (flows collide on core links), and MPTCP with every
subflow hashed on its own (ndiffports) climbs towards it as the subflows increase. Here: k = 4
and k = 8 fat-trees at 1 Gb/s (5 us links, drop-tail, 100-packet buffers), one long-lived
connection per host (seed 1's permutation and hashes, the same in both engines), 300 ms; the
fraction of optimal is the aggregate steady throughput over the hosts' total link rate.

Claimed, as issue 9 states them: the fluid model and the packet-level reference agree within 5 %
of optimal at every point (k = 4: n = 1, 2, 4, 8 subflows for LIA, OLIA, BALIA and uncoupled
subflows; k = 8: n = 1 and 8 for LIA and uncoupled, the couplings farthest apart at k = 4), and
in both engines the fraction rises with n: by at least 0.2 from one subflow to eight, and never
falls by more than 0.02 (the packet level's run-to-run noise at k = 4) from n to 2n.

Measured 2026-11-25 (the full k = 8 grid, `paper_figs/mptcp_subflows.py --ks 8`, 123 s on two
cores): 0.51 of optimal with one subflow in both engines, 0.86 to 0.90 with eight (fluid) and
0.86 to 0.87 (packet level); the largest fluid-packet difference 0.035 (uncoupled, n = 8).
Uncoupled subflows take most with eight subflows: each is a Reno, so a connection takes up to
eight shares where its subflows meet other connections' on a core link.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from matplotlib.figure import Figure

from pathflow import Scenario
from pathflow.validation.registry import CaseResult, Check, case

__all__ = ["CCS", "fraction_of_optimal", "scenario", "subflows_figure"]

CCS = ("lia", "olia", "balia", "uncoupled")
AGREEMENT = 0.05  # of optimal: the issue's
RISE = 0.2  # of optimal, from one subflow to eight
NOISE = 0.02  # of optimal: the largest fall from n to 2n taken for noise
# the points claimed: (k, subflow counts, couplings)
GRID = ((4, (1, 2, 4, 8), CCS), (8, (1, 8), ("lia", "uncoupled")))
DURATION, RATE = "300ms", "1Gbps"
_STYLE = {"fluid": "-o", "packet": "--s"}


def scenario(k: int, subflows: int, cc: str, duration: str = DURATION, rate: str = RATE
             ) -> Scenario:
    """A k-ary fat-tree permutation of long-lived MPTCP connections (drop-tail, 100 packets)."""
    return Scenario.from_dict({
        "name": f"mptcp-k{k}-n{subflows}-{cc}",
        "topology": {"kind": "fattree", "k": k, "link_rate": rate, "delay": "5us",
                     "buffer": "100pkt"},
        "aqm": {"kind": "droptail"},
        "traffic": {"pattern": "permutation"},
        "transport": {"cc": cc, "subflows": subflows},
        "routing": {"mode": "ecmp"},
        "run": {"duration": duration, "seed": 1},
    })


def fraction_of_optimal(engine: str, k: int, subflows: int, cc: str, duration: str = DURATION,
                        rate: str = RATE) -> float:
    """Aggregate steady throughput over the hosts' total link rate, for one engine and point."""
    from pathflow.metrics import summarize

    point = scenario(k, subflows, cc, duration, rate)
    if engine == "fluid":
        from pathflow.simulate import simulate

        ds = simulate(point)
    else:
        from pathflow.validation.packet import simulate_packets

        ds = simulate_packets(point)
    return summarize(ds).aggregate_throughput / (ds.sizes["flow"] * point.si.topology.link_rate)


def subflows_figure(fractions: dict[tuple[str, int, int, str], float], rate: str = RATE
                    ) -> Figure:
    """Fraction of optimal against subflows, a panel per fat-tree size; `fractions` is keyed
    by (engine, k, subflows, cc)."""
    ks = sorted({k for _, k, _, _ in fractions})
    fig = Figure(figsize=(5 * len(ks), 4))
    axes = fig.subplots(1, len(ks), squeeze=False)[0]
    for ax, k in zip(axes, ks, strict=True):
        keys = [key for key in fractions if key[1] == k]
        counts = sorted({n for _, _, n, _ in keys})
        ccs = [cc for cc in CCS if any(key[3] == cc for key in keys)]
        engines = [e for e in _STYLE if any(key[0] == e for key in keys)]
        for i, cc in enumerate(ccs):
            for engine in engines:
                values = [fractions[(engine, k, n, cc)] for n in counts]
                ax.plot(counts, values, _STYLE[engine], color=f"C{i}", ms=4,
                        label=f"{cc} ({engine})")
        ax.set_xscale("log", base=2)
        ax.set_xticks(counts, [str(n) for n in counts])
        ax.set_ylim(0, 1.05)
        ax.set_xlabel("subflows per connection")
        ax.set_ylabel("throughput, fraction of optimal")
        ax.set_title(f"k = {k} fat-tree, permutation, {rate}")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7, ncol=2, loc="lower right")
    fig.tight_layout()
    return fig


def _checks(fractions: dict[tuple[str, int, int, str], Any]) -> list[Check]:
    checks = []
    for k, counts, ccs in GRID:
        for cc in ccs:
            for n in counts:
                checks.append(Check(
                    f"k = {k}, {n} {cc} subflow(s): fraction of optimal, packet / fluid",
                    fractions[("packet", k, n, cc)], fractions[("fluid", k, n, cc)], AGREEMENT,
                    scale="absolute", why="the issue's 5 % of optimal"))
            for engine in ("fluid", "packet"):
                ladder = [fractions[(engine, k, n, cc)] for n in counts]
                checks.append(Check.band(
                    f"k = {k}, {cc}, {engine}: gain from 1 to {counts[-1]} subflows",
                    ladder[-1] - ladder[0], RISE, 1.0,
                    why=f"at least {RISE} of optimal (single-path ECMP collides)"))
                if len(ladder) > 2:
                    checks.append(Check.band(
                        f"k = {k}, {cc}, {engine}: smallest change from n to 2n subflows",
                        min(b - a for a, b in pairwise(ladder)), -NOISE,
                        1.0, why=f"never falls by more than {NOISE} of optimal (noise)"))
    return checks


@case("mptcp_subflows", "MPTCP permutation throughput against subflows (Raiciu et al. 2011)",
      "packet level", fast=False)
def mptcp_subflows() -> CaseResult:
    """Fraction of optimal against subflows on k = 4 and k = 8 fat-trees, the fluid model
    against the packet-level reference; points, claims and tolerances in the module text."""
    fractions = {(engine, k, n, cc): fraction_of_optimal(engine, k, n, cc)
                 for k, counts, ccs in GRID for n in counts for cc in ccs
                 for engine in ("fluid", "packet")}
    return CaseResult(_checks(fractions), subflows_figure(fractions))
