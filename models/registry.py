"""The congestion controls and queue disciplines pathflow knows, each named once.

`CONTROLS` maps a scenario's `[transport] cc` to a `CongestionControl`: its fluid model (which
declares its parameters with units, defaults and ranges, and whether it sends by window or by
rate), the name of its sender in the packet-level reference simulator (None where there is
none), its ns-3 type (None where ns-3 has none) and whether it reacts to ECN marks. The scenario
vocabulary, its errors and `pathflow run --help` are generated from here; the packet simulator
and the ns-3 runner look their algorithms up here, and `tests/test_registry.py` fails when an
engine knows an algorithm the registry does not declare (or the other way round).

`DISCIPLINES` (from `models.aqm`) maps `[aqm] kind` to a queue discipline in the same way.

Adding a congestion control: see docs/architecture.md, "Adding a congestion control".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pathflow.models.aqm import DISCIPLINES, QueueDiscipline
from pathflow.models.base import CongestionModel
from pathflow.models.dcqcn import Dcqcn
from pathflow.models.dcqcn_plus import DcqcnPlus
from pathflow.models.dcqcn_static import DcqcnStatic
from pathflow.models.dctcp import Dctcp
from pathflow.models.mptcp import Balia, Lia, Olia, Uncoupled
from pathflow.models.parameters import Parameter
from pathflow.models.reno import Reno

__all__ = ["CONTROLS", "DISCIPLINES", "CongestionControl", "control", "discipline",
           "multipath_controls", "register"]


@dataclass(frozen=True)
class CongestionControl:
    """One congestion control as every engine knows it."""

    name: str
    model: type[CongestionModel]
    summary: str
    packet_sender: str | None  # the sender's name in validation.packet (layout.CC_CODES)
    ns3_type: str | None  # the ns-3 TypeId it is compared with
    ecn: bool  # reacts to ECN marks (a RED queue marks rather than drops by default)
    multipath: bool = False  # a connection may have several subflows (`[transport] subflows`)

    @property
    def sends(self) -> str:
        return self.model.sends

    @property
    def parameters(self) -> tuple[Parameter, ...]:
        return self.model.parameters

    def build(self, values: dict[str, Any]) -> CongestionModel:
        """The model object, with its structural parameters (choices) from `values`."""
        return self.model(**{p.name: values[p.name] for p in self.model.structure()})


CONTROLS: dict[str, CongestionControl] = {}


def register(entry: CongestionControl) -> CongestionControl:
    """Declare a congestion control (a name may be declared once)."""
    if entry.name in CONTROLS:
        raise ValueError(f"congestion control {entry.name!r} is already registered")
    names = tuple(p.name for p in entry.model.values())
    fields = tuple(entry.model.Params._fields)
    if names != fields:
        raise ValueError(f"{entry.name}: declared values {names} differ from Params {fields}")
    CONTROLS[entry.name] = entry
    return entry


register(CongestionControl(
    "reno", Reno, "TCP NewReno: AIMD on loss (Misra, Gong, Towsley 2000)",
    packet_sender="reno", ns3_type="ns3::TcpNewReno", ecn=False))
register(CongestionControl(
    "dctcp", Dctcp, "DCTCP: cut by the marked fraction (Alizadeh et al. 2010)",
    packet_sender="dctcp", ns3_type="ns3::TcpDctcp", ecn=True))
register(CongestionControl(
    "dcqcn", Dcqcn, "DCQCN: RoCEv2's rate-based control on ECN marks (Zhu et al. 2015; fluid "
    "model of Zhu et al. 2016)", packet_sender="dcqcn", ns3_type=None, ecn=True))
register(CongestionControl(
    "dcqcn+", DcqcnPlus, "DCQCN+: DCQCN whose rate-increase timer and steps follow the incast's "
    "scale (seed 001 section 4.3; mean-field model in docs/dcqcn_plus.md)",
    packet_sender="dcqcn+", ns3_type=None, ecn=True))
register(CongestionControl(
    "dcqcn+static", DcqcnStatic, "DCQCN+static: DCQCN with seed 001's testbed approximation of "
    "DCQCN+ (timer 3.1 x flownum us, step 256 / flownum Mb/s, cuts at most every 40 us)",
    packet_sender="dcqcn+static", ns3_type=None, ecn=True))
register(CongestionControl(
    "lia", Lia, "MPTCP with LIA coupling (RFC 6356)",
    packet_sender="lia", ns3_type=None, ecn=False, multipath=True))
register(CongestionControl(
    "olia", Olia, "MPTCP with OLIA coupling (Khalili et al. 2012)",
    packet_sender="olia", ns3_type=None, ecn=False, multipath=True))
register(CongestionControl(
    "balia", Balia, "MPTCP with BALIA coupling (Peng, Walid, Hwang, Low 2016)",
    packet_sender="balia", ns3_type=None, ecn=False, multipath=True))
register(CongestionControl(
    "uncoupled", Uncoupled, "MPTCP baseline: every subflow an independent Reno",
    packet_sender="uncoupled", ns3_type=None, ecn=False, multipath=True))


def multipath_controls() -> str:
    """The multipath congestion controls, quoted, for errors ("'lia', 'olia', ...")."""
    return ", ".join(repr(name) for name, entry in CONTROLS.items() if entry.multipath)


def control(name: str) -> CongestionControl:
    """The registry entry for `cc = name`; ValueError naming the allowed names."""
    if name not in CONTROLS:
        raise ValueError(f"unknown congestion control {name!r}; allowed: {', '.join(CONTROLS)}")
    return CONTROLS[name]


def discipline(name: str) -> QueueDiscipline:
    """The queue discipline for `[aqm] kind = name`; ValueError naming the allowed kinds."""
    if name not in DISCIPLINES:
        raise ValueError(f"unknown queue discipline {name!r}; allowed: {', '.join(DISCIPLINES)}")
    return DISCIPLINES[name]
