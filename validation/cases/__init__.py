"""The validation cases, one module per kind of truth; importing this package registers them all
(`pathflow.validation.registry`).

- `fluid`: the fluid model against closed forms, the hardware DCTCP trace and ns-3.
- `packet`: the packet-level reference simulator against ns-3 and the hardware trace, and the
  fluid model against the packet-level reference (the fluid-versus-packet error table).
- `calibration`: calibration against the packet-level reference and the hardware trace.
"""

from pathflow.validation.cases import calibration, fluid, packet

__all__ = ["calibration", "fluid", "packet"]
