"""The child process of an ns-3 run, `python -m pathflow.validation.ns3.child CONFIG OUT`: it
imports ns-3's bindings, compiles `simulation.cc` with cppyy, fills its `Params` from the
`Ns3Config` JSON in CONFIG, runs the simulation and saves the samples to OUT (an .npz that
`pathflow.validation.ns3.dataset` reads). ns-3 keeps global state, so only this process, fresh
for every scenario, ever imports it."""

from __future__ import annotations

import itertools
import os
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from pathflow.validation import ns3
from pathflow.validation.ns3.config import Ns3Config
from pathflow.validation.ns3.run import EXIT_NO_NS3

SIMULATION_SOURCE = "simulation.cc"  # package data next to this module


def simulation_source() -> str:
    """The C++ of the simulation, as shipped with the package."""
    return resources.files(ns3).joinpath(SIMULATION_SOURCE).read_text(encoding="utf-8")


def _run(argv: list[str]) -> int:
    """Simulate the configuration in file argv[0] and save its samples to argv[1]; the
    exit status."""
    cfg_path, out_path = Path(argv[0]), Path(argv[1])
    cfg = Ns3Config.from_json(cfg_path.read_text())
    try:
        from ns import ns  # noqa: F401  (loads the ns-3 libraries and headers into cppyy)
    except (ImportError, SystemExit) as exc:  # the `ns` stub calls exit() if ns3 is broken
        print(f"cannot import ns-3 bindings: {exc!r}", file=sys.stderr)
        return EXIT_NO_NS3
    import cppyy

    cppyy.cppdef(simulation_source())
    gbl = cppyy.gbl.pathflow_ns3
    std = cppyy.gbl.std
    p = gbl.Params()
    p.aqm = cfg.aqm
    p.cc = cfg.cc
    p.flows = cfg.flows
    p.durationS = float(cfg.duration_s)
    p.thresholdPackets = float(cfg.threshold_packets)
    p.redMin = float(cfg.red_min_packets)
    p.redMax = float(cfg.red_max_packets)
    p.redPmax = float(cfg.red_pmax)
    p.redWeight = float(cfg.red_weight)
    p.packetBytes = cfg.packet_bytes
    if cfg.start_times_s is not None:
        p.startTimes = std.vector["double"](list(cfg.start_times_s))
    p.sampleIntervalS = float(cfg.sample_interval_s)
    p.seed = cfg.seed
    p.dctcpG = float(cfg.dctcp_g)
    p.delAckCount = cfg.delayed_ack_count
    p.initialCwnd = cfg.initial_cwnd_packets
    p.minRtoS = float(cfg.min_rto_s)
    p.sack = bool(cfg.sack)
    p.blockBytes = float(cfg.block_bytes)
    p.rounds = cfg.rounds
    if cfg.delayed_ack_timeout_s is not None:
        p.delAckTimeoutS = float(cfg.delayed_ack_timeout_s)
    p.sockBufBytes = _socket_buffer_bytes(cfg)
    if cfg.pcap_path is not None:
        p.pcapFile = str(cfg.pcap_path.resolve())
        p.pcapLink = cfg.bottleneck_link
    for name, values in _flat_layout(cfg).items():
        element = ("std::string" if name == "nodeNames"
                   else "double" if name in _DOUBLE_VECTORS else "int")
        setattr(p, name, std.vector[element](values))
    p.routing = cfg.layout().routing
    p.ackFirst = cfg.network is not None
    ports = cfg.ports()
    # Hosts never drop (see HostQueueDisc in simulation.cc): far more room than any switch port.
    p.hostQueuePackets = max(100000, 10 * max(buffer for _, _, buffer in ports.values()))

    runner = gbl.Runner(p)
    runner.Build()
    runner.Run()

    n, n_links, n_flows = runner.nSamples, len(runner.linkNames), cfg.flows

    def arr(vec: Any, cols: int) -> np.ndarray:
        return _vector_to_numpy(vec).reshape(n, cols)

    np.savez(
        out_path,
        time=_vector_to_numpy(runner.time),
        link_names=np.array([str(s) for s in runner.linkNames]),
        queue=arr(runner.queueBytes, n_links),
        tx=arr(runner.txBytes, n_links),
        drop=arr(runner.dropBytes, n_links),
        mark=arr(runner.markBytes, n_links),
        rx=arr(runner.rxBytes, n_flows),
        cwnd=arr(runner.cwnd, n_flows),
        rtt=arr(runner.rtt, n_flows),
        alpha=arr(runner.alpha, n_flows),
        sim_wall_time_s=np.float64(runner.simWallS),
        unrouted=np.float64(runner.unroutedPackets),
        aqm_desc=np.array(str(runner.aqmDesc)),
        block_done=_vector_to_numpy(runner.blockDone).reshape(-1, cfg.rounds),
        rounds_start=np.float64(runner.roundsStart),
    )
    return 0


def _socket_buffer_bytes(cfg: Ns3Config) -> float:
    """Socket buffers: 4x (path BDP + buffers the window may fill), at least 4 MiB and at
    most 1 GiB, so that neither buffer ever limits a flow."""
    if cfg.network is None:
        # Star and dumbbell: one shared bottleneck buffer (unchanged since the first runner).
        path_bytes = (cfg.link_rate_bps / 8 * cfg.base_rtt_s
                      + cfg.buffer_packets * cfg.packet_bytes)
    else:
        # A network's flow may queue at every switch port along its path.
        ports, hosts = cfg.ports(), set(cfg.network.hosts)
        path_bytes = 0.0
        for path in cfg.network.paths:
            hops = list(itertools.pairwise(path.nodes))
            rate = max(ports[hop][0] for hop in hops)
            queued = sum(ports[hop][2] for hop in hops if hop[0] not in hosts)
            path_bytes = max(path_bytes, rate / 8 * cfg.path_base_rtt_s(path.nodes)
                             + queued * cfg.packet_bytes)
    return float(min(max(4 * 2**20, 4 * path_bytes), 2**30))


_DOUBLE_VECTORS = frozenset({"cableRateAB", "cableRateBA", "cableDelay", "pathWeight"})


def _flat_layout(cfg: Ns3Config) -> dict[str, list[Any]]:
    """`cfg.layout()` as the flat vectors of the C++ `Params` (node indices, SI values)."""
    net = cfg.layout()
    index = {name: i for i, name in enumerate(net.nodes)}
    hosts = set(net.hosts)
    out: dict[str, list[Any]] = {
        "nodeNames": list(net.nodes),
        "nodeIsSwitch": [int(name not in hosts) for name in net.nodes],
        "flowSrc": [index[src] for src, _ in net.flows],
        "flowDst": [index[dst] for _, dst in net.flows],
    }
    ports = cfg.ports()
    cables: dict[str, list[Any]] = {key: [] for key in (
        "cableA", "cableB", "cableRateAB", "cableRateBA", "cableDelay", "cableBufAB",
        "cableBufBA")}
    for c in net.cables:
        rate_ab, delay, buffer_ab = ports[(c.a, c.b)]
        rate_ba, _, buffer_ba = ports[(c.b, c.a)]
        for key, value in (("cableA", index[c.a]), ("cableB", index[c.b]),
                           ("cableRateAB", float(rate_ab)), ("cableRateBA", float(rate_ba)),
                           ("cableDelay", float(delay)), ("cableBufAB", int(buffer_ab)),
                           ("cableBufBA", int(buffer_ba))):
            cables[key].append(value)
    out.update(cables)
    paths: dict[str, list[Any]] = {key: [] for key in (
        "pathFlow", "pathWeight", "pathStart", "pathEnd", "pathNodes")}
    for path in net.paths:
        paths["pathFlow"].append(path.flow)
        paths["pathWeight"].append(float(path.weight))
        paths["pathStart"].append(len(paths["pathNodes"]))
        paths["pathNodes"] += [index[name] for name in path.nodes]
        paths["pathEnd"].append(len(paths["pathNodes"]))
    out.update(paths)
    return out


def _vector_to_numpy(vec: Any) -> np.ndarray:
    """A copy of a C++ std::vector<double> as a numpy array."""
    size = int(vec.size())
    if size == 0:
        return np.zeros(0)
    # Zero-copy view of the std::vector buffer; iterating it from Python is ~100x slower.
    view = vec.data()
    view.reshape((size,))
    return np.frombuffer(view, dtype=np.float64, count=size).copy()


def main() -> None:
    """The process entry point: `_run` on the command line, then exit at once."""
    code = _run(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: cppyy/ns-3 destructors at exit are slow and can crash.
    os._exit(code)


if __name__ == "__main__":
    main()
