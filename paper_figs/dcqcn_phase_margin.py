"""DCQCN's phase margin against the number of flows, per feedback delay (after Zhu et al.,
CoNEXT 2016, section 4: DCQCN's non-monotonic stability).

N DCQCN flows share one 40 Gb/s link with the conext2016 parameters (1 KB packets; the marking
line extended past Kmax as the paper's analysis extends it) and a fixed feedback delay
(`run.feedback_delay = "propagation"`). For each (N, delay) `pathflow.analysis.stability`
linearises the fluid model around its rest state and gives the phase margin and the critical
delay; the figure draws the phase margin against N for each delay (a negative margin: unstable)
and the critical delay against N. The paper's statements: at 85 us DCQCN is unstable for N = 10
and stable for N = 2 and 64.

With `--simulate` each grid point is also simulated (120 ms; the queue's swing over the last
40 ms against its mean: settled below 1 %, oscillating above 10 %) and the script prints where
the predicted and simulated verdicts agree.

    python paper_figs/dcqcn_phase_margin.py [--out paper_figs/dcqcn_phase_margin.png]
        [--flows 2,4,6,10,16,32,64] [--delays 4,25,50,85,100] [--simulate]

(about 8 s per grid point for the analysis, 10 to 20 s more per point with --simulate.)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

DEFAULT_OUT = Path(__file__).resolve().with_name("dcqcn_phase_margin.png")


def scenario(flows: int, delay: float) -> Any:
    """The CoNEXT 2016 setting with a feedback delay of `delay` seconds."""
    from pathflow.validation.cases.dcqcn import CAPACITY, PACKET, incast

    hop = (delay - 2 * (PACKET + 64) / (CAPACITY * PACKET)) / 4  # 4 hops, 2 serialisations
    return incast(flows, delay=f"{hop * 1e6!r}us", duration="120ms", aqm={"ramp": "extended"},
                  run={"feedback_delay": "propagation"})


def simulated_swing(flows: int, delay: float) -> float:
    """The queue's swing over the last 40 ms of a 120 ms run, relative to its mean."""
    import numpy as np

    import pathflow

    ds = pathflow.simulate(scenario(flows, delay)).sel(link="s0->r0")
    late = ds.queue.sel(time=ds.time > 0.08).values
    return float(np.ptp(late) / max(float(np.mean(late)), 1e-300))


def main(argv: list[str] | None = None) -> int:
    import warnings

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from pathflow.analysis.stability import stability

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--flows", default="2,4,6,10,16,32,64")
    parser.add_argument("--delays", default="4,25,50,85,100", help="feedback delays (us)")
    parser.add_argument("--simulate", action="store_true",
                        help="also simulate every point and compare the verdicts")
    args = parser.parse_args(argv)
    flows = [int(n) for n in args.flows.split(",")]
    delays = [float(d) * 1e-6 for d in args.delays.split(",")]
    warnings.filterwarnings("ignore", message="aqm.pfc")

    margin: dict[float, list[float]] = {}
    critical: list[float] = []
    agree, total = 0, 0
    print(f"{'N':>4} {'delay (us)':>10} {'phase margin (deg)':>19} {'critical delay (us)':>20}"
          + (f" {'simulated swing':>16} {'verdicts':>9}" if args.simulate else ""))
    for delay in delays:
        margin[delay] = []
        for n in flows:
            result = stability(scenario(n, delay))
            phase = float(result.phase_margin.item())
            margin[delay].append(phase)
            if delay == delays[0]:
                critical.append(float(result.critical_delay.item()))
            line = (f"{n:>4} {delay * 1e6:>10.0f} {phase:>19.2f} "
                    f"{float(result.critical_delay.item()) * 1e6:>20.1f}")
            if args.simulate:
                swing = simulated_swing(n, delay)
                stable = bool(result.stable.item())
                settled = swing < 0.01
                same = settled == stable or 0.01 <= swing <= 0.1
                agree, total = agree + same, total + 1
                line += f" {swing:>16.3f} {'agree' if same else 'DIFFER':>9}"
            print(line, flush=True)
    if args.simulate:
        print(f"verdicts agree at {agree} of {total} points (a swing between 1 % and 10 % counts "
              "as agreeing either way: a slowly decaying or slowly growing oscillation)")

    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for delay, values in margin.items():
        left.plot(flows, values, marker="o", label=f"{delay * 1e6:g} us")
    left.axhline(0.0, color="black", linewidth=0.8)
    left.set(xscale="log", xlabel="flows N", ylabel="phase margin (degrees)",
             title="DCQCN, 40 Gb/s, conext2016: phase margin")
    left.legend(title="feedback delay")
    right.plot(flows, [c * 1e6 for c in critical], marker="o")
    right.set(xscale="log", xlabel="flows N", ylabel="critical feedback delay (us)",
              title="delay at which the rest state turns unstable")
    for axis in (left, right):
        axis.set_xticks(flows, [str(n) for n in flows])
        axis.minorticks_off()
    figure.tight_layout()
    figure.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
