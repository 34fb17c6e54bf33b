"""Test-wide fixtures."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _keep_cpu_affinity() -> Iterator[None]:
    """The command line pins itself to one CPU (`--threads`); in-process CLI tests must not
    leave the test process pinned."""
    cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    yield
    if cpus is not None:
        os.sched_setaffinity(0, cpus)
