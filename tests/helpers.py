"""Small scenarios built in code for the tests."""

from __future__ import annotations

from typing import Any

from pathflow import Scenario

PACKET = 1500.0

TINY_TOML = """
name = "tiny"
[topology]
kind = "star"
senders = 2
link_rate = "1Gbps"
delay = "10us"
buffer = "100pkt"
[aqm]
kind = "ecn_step"
threshold = "20pkt"
[transport]
cc = "dctcp"
[run]
duration = "20ms"
"""  # a 2-flow DCTCP star at 1 Gb/s, 20 ms: a scenario file the CLI runs in about a second


def star(senders: int = 2, *, rate: str = "100Mbps", delay: str = "62.5us",
         buffer: str = "425pkt", aqm: dict[str, Any] | None = None, cc: str = "dctcp",
         duration: str = "1s", flows: int | None = None, **sections: dict[str, Any]) -> Scenario:
    """An N:1 star; keyword sections (transport={...}, run={...}) are merged into the file."""
    data: dict[str, Any] = {
        "name": "test-star",
        "topology": {"kind": "star", "senders": senders, "link_rate": rate, "delay": delay,
                     "buffer": buffer},
        "aqm": aqm if aqm is not None else {"kind": "ecn_step", "threshold": "20pkt"},
        "traffic": {"pattern": "incast", "flows": flows or senders},
        "transport": {"cc": cc},
        "run": {"duration": duration},
    }
    for name, values in sections.items():
        data.setdefault(name, {}).update(values)
    return Scenario.from_dict(data)
