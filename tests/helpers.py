"""Small scenarios built in code for the tests."""

from __future__ import annotations

import itertools
import threading
from pathlib import Path
from typing import Any

import pytest

from pathflow import Scenario, batch

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


def mesh(folder: Path, subflows: int, mode: str, **extra: Any) -> Scenario:
    """Hosts A and B on a four-switch mesh: A - S1, S1 - S2, S1 - S3, S2 - S3, S2 - S4, S3 - S4,
    S4 - B (two disjoint two-switch routes between S1 and S4, and two longer ones via S2 - S3)."""
    (folder / "mesh.csv").write_text(
        "src,dst,link_rate\nA,S1,1Gbps\nB,S4,1Gbps\nS1,S2,10Mbps\nS1,S3,10Mbps\nS2,S3,10Mbps\n"
        "S2,S4,10Mbps\nS3,S4,10Mbps\n")
    return Scenario.from_dict({
        "topology": {"kind": "graph", "edges": "mesh.csv", "hosts": ["A", "B"]},
        "aqm": {"kind": "droptail"},
        "traffic": {"pattern": "explicit", "pairs": [[0, 1]]},
        "transport": {"cc": "lia" if subflows > 1 else "reno", "subflows": subflows},
        "routing": {"mode": mode}, **extra}, base_dir=folder)


def interrupt_second_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sweep's second chunk raises KeyboardInterrupt (Ctrl-C) instead of running, once the
    first has run (at once where chunks run one after another; where they run side by side,
    `pathflow sweep` on several CPUs, it waits for the first)."""
    real = batch.solve_together
    calls = itertools.count()
    first_ran = threading.Event()

    def interrupt_second(*args, **kwargs):  # type: ignore[no-untyped-def]
        if next(calls) == 1:
            first_ran.wait(timeout=600)
            raise KeyboardInterrupt
        try:
            return real(*args, **kwargs)
        finally:
            first_ran.set()

    monkeypatch.setattr(batch, "solve_together", interrupt_second)
