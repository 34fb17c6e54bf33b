"""`simulate_packets`: a scenario in, a packet-level Dataset out (the same variables as fluid
results, with the invariant report in attrs)."""

from __future__ import annotations

import time
from dataclasses import replace

import xarray as xr

from pathflow.invariants import check_invariants, warn_violations
from pathflow.metrics import store_warmup
from pathflow.scenario import Scenario
from pathflow.validation.packet import layout as L
from pathflow.validation.packet.build import Options, build, default_delayed_ack, window_values
from pathflow.validation.packet.dataset import to_dataset
from pathflow.validation.packet.engine import run

__all__ = ["simulate_packets"]

_RETRIES = 6
HOST_JITTER = 0.01  # see the docstring of simulate_packets


def simulate_packets(scenario: Scenario, *, sample_interval: float | None = None,
                     min_rto: float | None = None, delayed_ack: int | None = None,
                     delack_timeout: float | None = None, seed: int | None = None,
                     ack_bytes: float | None = None, header_bytes: float = 0.0,
                     host_jitter: float = HOST_JITTER, sack: bool | None = None,
                     recovery: str | None = None) -> xr.Dataset:
    """Run `scenario` in the packet-level reference simulator.

    Parameters
    ----------
    sample_interval: s between samples (default: `[run] sample`, else the fluid model's record
        budget, at least 10 us).
    min_rto: lower bound of the retransmission timeout, s (default `[transport] rto_min`, 200 ms
        as Linux and ns-3).
    delayed_ack: the receiver acknowledges every this many in-order segments (default: 2, or
        `transport.ack_ratio` b when b is an integer >= 2, so that growing once per ACK gives
        the fluid model's 1/b segment per RTT; see `cc`).
    delack_timeout: delayed-ACK timer, s (default `[transport] delayed_ack_timeout`; unset
        there, min(40 ms, min_rto / 5), as the ns-3 runner).
    seed: spraying, RED and host-jitter randomness (default `[run] seed`).
    ack_bytes: wire size of a pure ACK (default `[transport] ack_size`, 64 bytes unless set, as
        the fluid model; ns-3's are 52).
    header_bytes: link-layer framing added to every packet's serialisation time but not to
        byte counts (default 0; ns-3's point-to-point links add 2).
    host_jitter: before a host NIC puts a data packet on the wire it waits a random time,
        uniform in [0, host_jitter x the packet's serialisation time) (default 0.01). Hosts
        and links in a simulation are otherwise perfectly periodic, and with access links as
        fast as the bottleneck a sender can lock a competitor out for good: its packets
        always refill the slot a departure frees, so only the other flow's packets meet a
        full drop-tail buffer (Floyd and Jacobson's phase effects; ns-2 added random
        "overhead" to its TCP senders for this reason). 1 % breaks such locks within about a
        hundred packet times and costs a NIC-limited flow 0.5 % of its line rate. 0 gives
        ns-3's perfectly periodic hosts.
    sack: SACK with RFC 6675 recovery, or NewReno (default `[transport] sack`, true as Linux
        and ns-3); window-based senders only (`sack.py`).
    recovery: with SACK, "rfc6675" (losses known by DupThresh SACKed segments, cwnd =
        ssthresh in recovery) or "linux" (RACK-TLP, `rack.py`, and PRR in recovery: Linux's
        since 4.18) (default `[transport] recovery`, "rfc6675").

    Returns a Dataset with the variables of `pathflow.results` (engine "pathflow packet");
    `attrs["invariants"]` holds the invariant report as JSON text (`invariants.report_of`), and
    `events`, `packet_hops`, `wall_time_s` describe the run.
    """
    t0 = time.perf_counter()
    values = window_values(scenario)  # refuses, in one line, what the senders cannot run
    stack = scenario.si.transport
    if min_rto is None:
        min_rto = stack.rto_min
    if delack_timeout is None:  # the scenario's, unless only min_rto was given here
        delack_timeout = (stack.delayed_ack_timeout
                          if scenario.spec.transport.delayed_ack_timeout is not None
                          else min(0.04, min_rto / 5))
    options = Options(
        sample_interval=sample_interval or 0.0,
        min_rto=float(min_rto),
        delayed_ack=int(delayed_ack or default_delayed_ack(
            values["ack_ratio"])),
        delack_timeout=float(delack_timeout),
        sack=bool(stack.sack if sack is None else sack),
        recovery=str(stack.recovery if recovery is None else recovery),
        seed=int(scenario.si.run.seed if seed is None else seed),
        ack_bytes=float(scenario.si.transport.ack_size if ack_bytes is None else ack_bytes),
        header_bytes=float(header_bytes),
        host_jitter=float(host_jitter),
    )
    if options.delayed_ack < 1 or options.min_rto <= 0 or options.delack_timeout <= 0:
        raise ValueError("delayed_ack must be >= 1, min_rto and delack_timeout > 0")
    for attempt in range(_RETRIES):
        built = build(scenario, options)
        t_run = time.perf_counter()
        status = run(built.sim)
        run_wall = time.perf_counter() - t_run
        if status == L.STATUS_OK:
            break
        if attempt == _RETRIES - 1:
            raise RuntimeError(f"packet simulator: pools still too small after {_RETRIES} "
                               f"enlargements (status {status})")
        options = replace(built.options, pool_scale=options.pool_scale * 2)
    ds = to_dataset(built, {"wall_time_s": time.perf_counter() - t0, "run_wall_s": run_wall})
    store_warmup(ds, scenario.si.run)
    packet = scenario.si.transport.mss
    floor = min(built.sim.cfg.min_cwnd, 1.0) * packet  # 1 segment after an RTO
    checked = ds
    if header_bytes > 0:  # framing takes link time that departures (packet bytes) do not count
        checked = ds.assign_coords(capacity=ds.capacity * packet / (packet + header_bytes))
    report = check_invariants(checked, min_cwnd_bytes=floor)
    ds.attrs["invariants"] = report.to_json()
    warn_violations(report)
    return ds
