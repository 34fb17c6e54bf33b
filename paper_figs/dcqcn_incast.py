"""Seed 001, Figures 9 and 10: DCQCN and DCQCN+static incasts on the 10 Gb/s testbed.

The thesis (section 6.3) measured, for N = 80..720 flows from 8 senders into one receiver, the
maximum switch buffer after 5 s and the mean ib_send_lat latency: DCQCN stops converging (a
buffer above 200 KB) from about 320 flows and collapses at 720 (buffer full, 1.8 ms), while the
DCQCN+ approximation its NICs could run stays far lower. This script calibrates the fluid model's
unstated parameters (Kmin, Kmax, Pmax, the receiver's CNP capacity, an extra base RTT) on the
DCQCN table only (`pathflow.validation.cases.testbed`: the documented starting point, 100 ms
runs), predicts the DCQCN+static table with the same switch and NIC limits without refitting,
and draws both against the measurements: maximum buffer after warm-up and latency versus N, log
scale, the 200 KB criterion marked.

    python paper_figs/dcqcn_incast.py [--out paper_figs/dcqcn_incast.png]
        [--max-evaluations 40]

It prints the fitted values, the latency offset and, per table, every row's measured and model
values with their ratio and the rms log-errors. `--max-evaluations 1` draws the starting point
(one sweep per table, about 20 s).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

DEFAULT_OUT = Path(__file__).resolve().with_name("dcqcn_incast.png")


def main(argv: list[str] | None = None) -> int:
    from pathflow.validation.calibration.table_result import comparison_figure
    from pathflow.validation.cases.testbed import EVALUATIONS, testbed_run

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--max-evaluations", type=int, default=EVALUATIONS,
                        help="sweeps of the calibration at most (1: the starting point)")
    args = parser.parse_args(argv)
    if args.max_evaluations < 1:
        parser.error(f"--max-evaluations: must be >= 1, got {args.max_evaluations}")
    started = time.perf_counter()
    run = testbed_run(args.max_evaluations)
    for line in run.fit.lines():
        print(line)
    print("DCQCN+static predicted (transport.cc = dcqcn+static, nothing refitted):")
    for line in run.static.lines():
        print(line)
    comparison_figure([run.dcqcn, run.static], ["DCQCN (fit)", "DCQCN+static (prediction)"],
                      title="Seed 001 testbed: 8 senders -> 1 receiver, 10 Gb/s, 5.1 MB buffer"
                      ).savefig(args.out, dpi=120)
    print(f"wrote {args.out} in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
