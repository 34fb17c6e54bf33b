"""The fluid models against closed-form steady states.

- DCTCP (Alizadeh et al. 2010, N synchronised flows on one link): Q_max = K + N and oscillation
  amplitude A = 0.5 sqrt(2 N (C RTT + K)), in packets, for the per-window model.
- Reno (Misra, Gong, Towsley 2000): the mean-field equilibrium on one marking link has
  p = 2 / (b W^2), b the ACK ratio.
"""

import math

import pytest

import pathflow
from helpers import PACKET, star
from pathflow.compile import compile_scenario

K = 65  # packets, Alizadeh et al.'s recommendation at 10 Gb/s


@pytest.mark.parametrize("flows", [2, 8, 32])
def test_dctcp_sawtooth(flows: int) -> None:
    scenario = star(flows, rate="10Gbps", delay="20us", buffer="2000pkt",
                    aqm={"kind": "ecn_step", "threshold": f"{K}pkt"}, duration="200ms",
                    transport={"min_cwnd": "1pkt"})
    compiled = compile_scenario(scenario)
    bdp = 1.25e9 * float(compiled.problem.path_base_rtt[0]) / PACKET  # C * RTT, packets
    assert bdp / 7 < K  # the analysis' condition for full throughput
    ds = pathflow.simulate(scenario)
    steady = ds.sel(time=ds.time > 0.1, link="s0->r0")
    q_max = float(steady.queue_max.max()) / PACKET
    q_min = float(steady.queue_min.min()) / PACKET
    amplitude = 0.5 * math.sqrt(2 * flows * (bdp + K))
    assert q_max == pytest.approx(K + flows, rel=0.10)
    assert q_max - q_min == pytest.approx(amplitude, rel=0.25)
    assert q_min > 0  # the queue never empties: full throughput
    assert float(pathflow.metrics.throughput(ds, warmup=0.1).sum()) >= 0.999 * 1.25e9


@pytest.mark.parametrize(("flows", "ack_ratio"), [(10, 1), (4, 1), (6, 2)])
def test_reno_equilibrium(flows: int, ack_ratio: int) -> None:
    scenario = star(flows, buffer="1000pkt", cc="reno", duration="8s",
                    aqm={"kind": "red", "min": "20pkt", "max": "400pkt", "pmax": 0.1,
                         "weight": 0.002, "ecn": True},
                    transport={"reaction": "mean", "ack_ratio": ack_ratio})
    ds = pathflow.simulate(scenario)
    steady = ds.sel(time=ds.time > 4)
    window = float(steady.cwnd.mean()) / PACKET
    bottleneck = steady.sel(link="s0->r0")
    marked = float(bottleneck.marks.sum() / bottleneck.link_arrival.sum())
    assert float(steady.cwnd.std()) / PACKET < 0.01  # settled to the equilibrium
    assert marked == pytest.approx(2 / (ack_ratio * window**2), rel=1e-3)
