"""Linux's loss recovery in the packet-level reference (`[transport] recovery = "linux"`:
RACK-TLP, RFC 8985, and PRR in recovery, RFC 6937) against bounds worked out from the protocol
and the links (no value taken from a run).

One Reno flow of S segments slow-starts through a 20-packet drop-tail port (100 Mb/s behind a
1 Gb/s host link) and overshoots it: while the port is full every other segment is dropped.
Where the burst takes the block's last segments, no three SACKed segments lie above them, and
with the duplicate-ACK threshold (`recovery = "rfc6675"`) they wait for the 200 ms RTO. RACK-TLP
probes 2 srtt + 2 ms after the last ACK instead: the probe's SACK marks them lost, and the block
arrives within its serialisation plus a few round trips behind the full port.
"""

from __future__ import annotations

import numpy as np
import pytest

from pathflow import Scenario
from pathflow.scenario import ScenarioError
from pathflow.validation.packet import simulate_packets

MSS = 1500.0
BOTTLENECK = 100e6 / 8  # bytes/s
DELAY = 62.5e-6  # s per link
BUFFER = 20  # packets
ACCESS = 1e9 / 8  # bytes/s
BASE_RTT = 4 * DELAY + (MSS + 64) * (1 / ACCESS + 1 / BOTTLENECK)
WORST_RTT = BASE_RTT + BUFFER * MSS / BOTTLENECK  # behind a full port
PTO = 2 * WORST_RTT + 2e-3  # the probe timeout after the last ACK, at most (rack.py)
RTO_MIN = 0.2  # s
SIZES = range(40, 100, 3)  # segments: blocks that end before, in and after the overshoot


def _block(segments: int, recovery: str) -> Scenario:
    return Scenario.from_dict({
        "name": "rack",
        "topology": {"kind": "star", "senders": 1, "link_rate": "100Mbps", "delay": "62.5us",
                     "buffer": f"{BUFFER}pkt", "links": [{"tier": "access",
                                                          "link_rate": "1Gbps"}]},
        "aqm": {"kind": "droptail"},
        "traffic": {"pattern": "incast", "flows": 1, "size": f"{segments * MSS:g}B"},
        "transport": {"cc": "reno", "recovery": recovery},
        "run": {"duration": "400ms"},
    })


Block = tuple[float, float, float, float]


def _completion(segments: int, recovery: str) -> Block:
    """(completion time s, timeouts, drops at the port and retransmissions, in packets) of the
    block."""
    ds = simulate_packets(_block(segments, recovery), sample_interval=1e-4, host_jitter=0.0)
    drops = float(ds.drops.sel(link="s0->r0").sum()) * 1e-4 / MSS
    return (float(ds.completion_time.values[0]), float(ds.timeouts.values[-1, 0]), drops,
            float(ds.resent.values[-1, 0]) / MSS)


@pytest.fixture(scope="module")
def blocks() -> dict[str, list[Block]]:
    return {recovery: [_completion(s, recovery) for s in SIZES]
            for recovery in ("rfc6675", "linux")}


def test_the_blocks_overshoot_the_port(blocks: dict[str, list[Block]]) -> None:
    drops = np.array([block[2] for block in blocks["linux"]])
    assert np.all(drops[-5:] >= 5)  # the larger blocks lose many segments of one window


def test_a_lost_tail_waits_for_the_rto_without_rack(blocks: dict[str, list[Block]]) -> None:
    done = np.array([block[0] for block in blocks["rfc6675"]])
    assert np.any(done >= RTO_MIN), "no block lost its tail: the scenario tests nothing"


def test_rack_tlp_repairs_every_block_without_a_timeout(blocks: dict[str, list[Block]]) -> None:
    """Serialisation at the bottleneck, the round trip that detects the overshoot, one probe
    timeout and the round trips of the retransmissions (each behind at most a full port); the
    lost segments are resent once each, and the probe may resend the last one (RFC 8985 7.3)."""
    for segments, (completion, timeouts, drops, resent) in zip(SIZES, blocks["linux"],
                                                                 strict=True):
        assert timeouts == 0
        assert drops <= resent <= drops + 1
        bound = segments * MSS / BOTTLENECK + PTO + 4 * WORST_RTT
        assert completion <= bound, (segments, completion, bound)


def test_linux_recovery_needs_sack() -> None:
    spec = {"topology": {"kind": "star", "senders": 1}, "traffic": {"pattern": "incast"},
            "transport": {"cc": "reno", "sack": False, "recovery": "linux"}}
    with pytest.raises(ScenarioError, match=r"transport\.recovery"):
        _ = Scenario.from_dict(spec).si
    spec["transport"] = {"cc": "reno", "recovery": "fast"}
    with pytest.raises(ScenarioError, match=r"transport\.recovery"):
        _ = Scenario.from_dict(spec).si
