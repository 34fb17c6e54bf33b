"""The validation cases, one module per kind of truth; importing this package registers them all
(`pathflow.validation.registry`), in the order of the report.

- `closed_forms`: the fluid model against DCTCP's sawtooth analysis and Reno's equilibrium.
- `dcqcn`: DCQCN's fluid model against its own fixed point and the published stability results.
- `measured`: the fluid model and the packet-level simulator against the hardware DCTCP trace.
- `ns3`: the fluid model and the packet-level simulator against ns-3.
- `packet`: the fluid model against the packet-level reference (the error table of issue 3).
- `acks`: ACKs as load, fluid against packet level on a port loaded by other flows' ACKs.
- `incast`: the classic TCP incast (barrier-synchronised reads, timeouts), both engines against
  the published setup and statements.
- `calibration`: calibration against the packet-level reference and the hardware trace.
- `testbed`: seed 001's DCQCN testbed: a table calibration on DCQCN, DCQCN+static predicted.
- `mptcp`: OLIA against LIA in scenario C of Khalili et al. 2012 (closed forms; fluid and
  packet level).
- `subflows`: MPTCP permutation throughput against subflows on fat-trees (fluid against packet
  level).
- `mesh`: seed 004's Hamiltonian-path routing in a five-switch mesh (fluid against packet level;
  the thesis's gains reported).
"""

from importlib import import_module

# report order
MODULES = ("closed_forms", "dcqcn", "dcqcn_plus", "lossless", "measured", "ns3", "packet",
           "acks", "incast", "calibration", "testbed", "mptcp", "subflows", "mesh")

for _module in MODULES:
    import_module(f"{__name__}.{_module}")
