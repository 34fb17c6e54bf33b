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


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--nightly", action="store_true",
                     help="also run the long profiles (tests marked nightly)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--nightly"):
        return
    skip = pytest.mark.skip(reason="long profile: run with --nightly")
    for item in items:
        if "nightly" in item.keywords:
            item.add_marker(skip)
