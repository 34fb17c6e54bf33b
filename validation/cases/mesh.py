"""Seed 004, Topology 1: MPTCP (BALIA) over Hamiltonian paths in a five-switch mesh

Jerome, "Load-balancing in local and metro-area networks with MPTCP and OpenFlow" (MS thesis,
UCF 2017), chapter 4: five switches, edges S1-S2, S1-S3, S1-S4, S2-S3, S2-S5, S3-S5, S4-S5 at
10 Mb/s, eight hosts on 1 Gb/s links in two VLANs (100: H1, H3, H5, H6; 105: H2, H4, H7, H8),
client-server iperf sessions of 2 minutes. Four schemes, as throughput gains over regular TCP:
MPTCP with VLAN-specific Hamiltonian paths (VS), with shared ones (NVS), MPTCP on the
controller's shortest path, and TCP. Published (Topology 1, mean gain over TCP): low load VS
+20 %, NVS just under +20 %, MPTCP about +1 %; medium VS +50 %, NVS +47 %, MPTCP +20 %; high VS
+27 %, NVS +21 %, MPTCP +16 %; the thesis orders VS > NVS > MPTCP > TCP at every load.

What the thesis leaves open, chosen here (the figures are missing from the text we have): hosts
H2, H3, H4 and H7 sit on S1, S2, S2 and S3 (H1 on S1, H5 on S5, H6 and H8 on S4 are stated;
hosts on degree-3 switches give the 22 paths its link counts imply); 1 ms per link and
100-packet drop-tail buffers (not stated; Mininet's defaults, no delay and 1000 packets, would
make a round trip of over a second at 10 Mb/s); medium load is H1 serving H3, H5 and H6 (the
thesis's example) and H2 serving H4, H7 and H8, plus H5 -> H6 and H8 -> H7 (8 sessions, "about 6
to 8"); high load is every pair within a VLAN (12 sessions, "12-16"); the TCP baseline is Reno,
and the shortest path is the first in name order (Floodlight's Dijkstra); MPTCP on it has 3
subflows. Hamiltonian paths are drawn at random (`pathflow.hamiltonian`), so VS and NVS are
averaged over `SEEDS` draws. Runs are 20 s, the first 5 s warm-up.

Claims: the two engines agree on each aggregate throughput (10 %, as the fat-tree MPTCP
comparison: packet-level subflows sharing links split them less evenly than the mean field),
and at medium load, where the thesis's gains are largest, both Hamiltonian schemes beat TCP on
the shortest path in both engines. Reported, not claimed: the published gains, and the ordering
at low and high load, which neither engine reproduces (see the notes), and per load the
largest gain over TCP that any routing of the sessions allows (`ceiling`, a linear program):
at medium and high load the thesis's gains exceed it with this placement.
"""

from __future__ import annotations

import tempfile
from itertools import pairwise
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from pathflow import Scenario
from pathflow.validation.registry import CaseResult, Check, case

__all__ = ["HOSTS", "LOADS", "PUBLISHED", "SCHEMES", "gains", "mesh_figure", "scenario",
           "throughputs"]

SWITCH_EDGES = (("S1", "S2"), ("S1", "S3"), ("S1", "S4"), ("S2", "S3"), ("S2", "S5"),
                ("S3", "S5"), ("S4", "S5"))
ATTACHED = {"H1": "S1", "H2": "S1", "H3": "S2", "H4": "S2", "H5": "S5", "H6": "S4", "H7": "S3",
            "H8": "S4"}
HOSTS = tuple(ATTACHED)
VLANS = (("H1", "H3", "H5", "H6"), ("H2", "H4", "H7", "H8"))
LOADS: dict[str, tuple[tuple[str, str], ...]] = {
    "low": (("H3", "H6"), ("H4", "H8"), ("H1", "H5"), ("H2", "H7")),
    "medium": (("H3", "H1"), ("H5", "H1"), ("H6", "H1"), ("H4", "H2"), ("H7", "H2"),
               ("H8", "H2"), ("H5", "H6"), ("H8", "H7")),
    "high": tuple((a, b) for vlan in VLANS for i, a in enumerate(vlan) for b in vlan[i + 1:]),
}
SCHEMES: dict[str, tuple[dict[str, object], dict[str, object]]] = {  # transport, routing
    "VS": ({"cc": "balia"}, {"mode": "hamiltonian", "scheme": "vlan",
                             "vlans": [list(v) for v in VLANS]}),
    "NVS": ({"cc": "balia"}, {"mode": "hamiltonian", "scheme": "shared"}),
    "MPTCP": ({"cc": "balia", "subflows": 3}, {"mode": "shortest"}),
    "TCP": ({"cc": "reno"}, {"mode": "shortest"}),
}
PUBLISHED = {  # thesis, Topology 1: mean throughput gain over TCP (%)
    "low": {"VS": 20.0, "NVS": 19.5, "MPTCP": 1.0},
    "medium": {"VS": 50.0, "NVS": 47.0, "MPTCP": 20.0},
    "high": {"VS": 27.0, "NVS": 21.0, "MPTCP": 16.0},
}
SEEDS = (1, 2, 3, 4)  # Hamiltonian path draws averaged for VS and NVS
TOLERANCE = 0.10
MB = 1e6 / 8  # bytes/s per Mb/s


def scenario(scheme: str, load: str, seed: int, folder: Path) -> Scenario:
    """Topology 1 under `scheme` at `load` (module docstring); writes the edges into `folder`."""
    rows = ["src,dst,link_rate"] + [f"{a},{b},10Mbps" for a, b in SWITCH_EDGES]
    rows += [f"{host},{switch},1Gbps" for host, switch in ATTACHED.items()]
    (folder / "edges.csv").write_text("\n".join(rows) + "\n")
    transport, routing = SCHEMES[scheme]
    index = {host: i for i, host in enumerate(HOSTS)}
    return Scenario.from_dict({
        "name": f"seed004-topology1-{scheme}-{load}",
        "topology": {"kind": "graph", "edges": "edges.csv", "hosts": list(HOSTS),
                     "delay": "1ms", "buffer": "100pkt"},
        "aqm": {"kind": "droptail"},
        "traffic": {"pattern": "explicit",
                    "pairs": [[index[a], index[b]] for a, b in LOADS[load]]},
        "transport": transport, "routing": routing,
        "run": {"duration": "20s", "warmup": "5s", "seed": seed},
    }, base_dir=folder)


def throughputs(engine: str) -> dict[str, dict[str, float]]:
    """Aggregate steady throughput (bytes/s) per load and scheme, Hamiltonian schemes averaged
    over `SEEDS`."""
    from pathflow.metrics import throughput

    if engine == "fluid":
        from pathflow import simulate as run
    else:
        from pathflow.validation.packet import simulate_packets as run
    found: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as folder:
        for load in LOADS:
            found[load] = {}
            for scheme in SCHEMES:
                seeds = SEEDS if SCHEMES[scheme][1]["mode"] == "hamiltonian" else SEEDS[:1]
                found[load][scheme] = float(np.mean([
                    float(throughput(run(scenario(scheme, load, seed, Path(folder)))).sum())
                    for seed in seeds]))
    return found


def ceiling(load: str, scheme: str | None = None) -> float:
    """The largest aggregate throughput (bytes/s) `load`'s sessions could carry: a
    multicommodity maximum flow (a linear program) over every loop-free path between their
    hosts that crosses no other host, or, given a `scheme`, over the paths its routing gives
    them (averaged over `SEEDS` for the Hamiltonian schemes); the placement of the module
    docstring."""
    import networkx as nx
    from scipy.optimize import linprog

    from pathflow.routing import build_routes
    from pathflow.topology import build_network

    found = []
    for seed in SEEDS if scheme and SCHEMES[scheme][1]["mode"] == "hamiltonian" else SEEDS[:1]:
        with tempfile.TemporaryDirectory() as folder:
            setup = scenario(scheme or "TCP", load, seed, Path(folder))
            network = build_network(setup)
            routes = build_routes(setup, network) if scheme else None
        if routes is not None:
            columns = [list(links) for links in routes.paths]
        else:
            graph = nx.DiGraph()
            for index, link in enumerate(network.links):
                graph.add_edge(link.src, link.dst, index=index)
            columns = [[graph[u][v]["index"] for u, v in pairwise(nodes)]
                       for source, sink in LOADS[load]
                       for nodes in nx.all_simple_paths(graph, source, sink)
                       if not any(node in ATTACHED for node in nodes[1:-1])]
        usage = np.zeros((len(network.links), len(columns)))
        for column, links in enumerate(columns):
            usage[links, column] = 1.0
        capacity = np.array([link.capacity for link in network.links])
        found.append(-linprog(-np.ones(len(columns)), A_ub=usage, b_ub=capacity,
                              bounds=(0, None)).fun)
    return float(np.mean(found))


def gains(values: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """Throughput gain over TCP (%) per load and MPTCP scheme."""
    return {load: {scheme: 100 * (row[scheme] / row["TCP"] - 1) for scheme in row
                   if scheme != "TCP"} for load, row in values.items()}


def mesh_figure(results: dict[str, dict[str, dict[str, float]]]) -> Figure:
    """Gain over TCP per load: the thesis's bars beside each engine's."""
    fig = Figure(figsize=(9, 3.4))
    axes = fig.subplots(1, len(LOADS), sharey=True)
    sources = {"thesis (Jerome 2017)": PUBLISHED,
               **{engine: gains(values) for engine, values in results.items()}}
    width = 0.8 / len(sources)
    schemes = list(PUBLISHED["low"])
    for ax, load in zip(axes, LOADS, strict=True):
        for s, (label, table) in enumerate(sources.items()):
            ax.bar(np.arange(len(schemes)) + (s - (len(sources) - 1) / 2) * width,
                   [table[load][scheme] for scheme in schemes], width, label=label)
        ax.axhline(0, color="grey", lw=0.6)
        ax.set_xticks(np.arange(len(schemes)), schemes)
        ax.set_title(f"{load} load", fontsize=9)
    axes[0].set_ylabel("throughput gain over TCP (%)")
    axes[0].legend(fontsize=7)
    fig.suptitle("Seed 004, Topology 1: BALIA over Hamiltonian paths (VS, NVS), the shortest "
                 "path (MPTCP), and TCP", fontsize=10)
    fig.tight_layout()
    return fig


@case("hamiltonian_mesh", "Seed 004 Topology 1: MPTCP over Hamiltonian paths in a mesh",
      "packet")
def hamiltonian_mesh() -> CaseResult:
    """Fluid against packet-level aggregate throughput for every scheme and load (10 %); at
    medium load both Hamiltonian schemes above TCP in both engines; the thesis's gains and its
    ordering at low and high load reported (module docstring)."""
    results = {engine: throughputs(engine) for engine in ("fluid", "packet")}
    checks = []
    for load in LOADS:
        for scheme in SCHEMES:
            checks.append(Check(f"{scheme}, {load} load: aggregate throughput, fluid vs packet",
                                results["packet"][load][scheme] / MB,
                                results["fluid"][load][scheme] / MB, TOLERANCE, unit="Mb/s",
                                why="engines agree: packet-level subflows split shared links "
                                    "less evenly than the mean field"))
    for engine, values in results.items():
        gain = gains(values)
        for load in LOADS:
            for scheme, published in PUBLISHED[load].items():
                quantity = f"{engine}: {scheme} gain over TCP, {load} load"
                if load == "medium" and scheme in ("VS", "NVS"):
                    checks.append(Check.band(quantity, gain[load][scheme], 0.0, 100.0, "%",
                                             "above TCP, where the thesis's gains are largest "
                                             "(+47 and +50 %)"))
                else:
                    checks.append(Check(quantity, published, gain[load][scheme], None, "%",
                                        "absolute", why="not claimed: the thesis's gain is the "
                                        "reference; see the notes"))
    for load in LOADS:  # what no routing could exceed, against what the thesis measured
        for scheme, paths in ((None, "any routing allows"), ("VS", "VS's paths allow")):
            largest = 100 * (ceiling(load, scheme) / results["fluid"][load]["TCP"] - 1)
            checks.append(Check(
                f"largest gain {paths} over the fluid TCP, {load} load",
                PUBLISHED[load]["VS"], largest, None, "%", "absolute",
                why="not claimed: the thesis's VS gain is the reference; a linear program's "
                    "maximum flow (see the notes)"))
    rows = ["| load | scheme | thesis gain | fluid: Mb/s, gain | packet: Mb/s, gain |",
            "|---|---|---|---|---|"]
    for load in LOADS:
        for scheme in SCHEMES:
            cells = []
            for values in results.values():
                gain = gains(values)[load].get(scheme)
                cells.append(f"{values[load][scheme] / MB:.1f}"
                             + ("" if gain is None else f", {gain:+.0f} %"))
            published = PUBLISHED[load].get(scheme)
            rows.append(f"| {load} | {scheme} | "
                        + ("-" if published is None else f"{published:+.0f} %") + " | "
                        + " | ".join(cells) + " |")
    notes = "\n".join(rows) + (
        "\n\nBoth engines put the Hamiltonian schemes clearly above TCP only at medium load, "
        "where sessions crowd the shortest paths into S1 and S2 and the detours have capacity "
        "to spare. At low load the four sessions nearly fill what their shortest paths reach "
        "(the packet level's TCP leaves a little more idle, hence its small gains), and at "
        "high load every link is busy: a Hamiltonian subflow crosses up to four 10 Mb/s "
        "links where a shortest path crosses one or two, and BALIA, like LIA, keeps sending on "
        "such paths (coupled controls are not Pareto-optimal, Khalili et al. 2012), so the "
        "detours cost other sessions more than they carry. VS and NVS differ by less than the "
        "spread over path draws. The thesis's larger gains, at every load, are not explained by "
        "these models; what it leaves unstated (host placement, delays, buffers, the TCP "
        "variant, the pairs at medium and high load) is chosen in the module docstring. With "
        "these choices they are more than any routing could give: the rows 'largest gain any "
        "routing allows' bound the aggregate of every scheme by a maximum flow over every "
        "loop-free path of the sessions (a linear program, independent of both engines), and "
        "the thesis's VS gains at medium and high load (+50, +27 %) lie above it; at low load "
        "the Hamiltonian paths drawn are the limit ('VS's paths': their maximum flow is what "
        "TCP already carries, where other paths would allow +38 %). Where it "
        "measured more, its TCP baseline left capacity idle (Mininet's TCP at 10 Mb/s "
        "bottlenecks behind 1 Gb/s host links), or its hosts sat elsewhere: the thesis's text "
        "fits many placements, which bound the gains differently (48 without a session "
        "inside one switch; on 3 of them the thesis's VS gains are within what some routing "
        "allows at every load, against TCP as max-min fair shortest-path flows). MPTCP on "
        "the shortest path shares TCP's paths, which both engines' TCP fills, and BALIA takes "
        "no more than a TCP there, so it cannot gain in either engine on any placement: the "
        "thesis's +16 to +20 % for it imply a TCP baseline that left its own paths partly "
        "idle.")
    return CaseResult(checks, mesh_figure(results), notes)
