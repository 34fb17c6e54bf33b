"""Files written whole or not at all: into a temporary name beside the target, then renamed.

A crash or a kill while writing leaves the previous file (or none) and a stray temporary file,
never a truncated result that looks complete (`os.replace` is atomic within one file system).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path

__all__ = ["write_atomically"]


def write_atomically(path: str | Path, write: Callable[[Path], None]) -> None:
    """Call `write(temporary)` and move the finished file to `path`."""
    path = Path(path)
    # the suffix stays last: writers such as matplotlib choose the format by it
    temporary = path.with_name(f".{path.stem}.{os.getpid()}.partial{path.suffix}")
    try:
        write(temporary)
        os.replace(temporary, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
