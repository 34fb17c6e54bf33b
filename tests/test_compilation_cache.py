"""The persistent compilation cache's bound (pathflow/compilation_cache.py): the programs stored
longest ago go first, subfolders (the traced programs) included, until the folder holds at most
the bound; `enable` looks at the folder at most once a day."""

from __future__ import annotations

import os
from pathlib import Path

from pathflow import compilation_cache

KB = 1024


def _files(folder: Path) -> dict[str, int]:
    """name -> size of every program file under `folder`, as the test wrote them."""
    return {path.name: path.stat().st_size for path in folder.rglob("*.bin")}


def _fill(folder: Path) -> None:
    """Six programs of 10 to 60 KB, the older the larger, half of them traced."""
    for age in range(6):
        path = folder / ("traced" if age % 2 else "") / f"p{age}.bin"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * (60 - 10 * age) * KB)
        os.utime(path, (1e9 - age * 100, 1e9 - age * 100))  # p0 the newest


def test_prune_removes_the_oldest_programs_down_to_the_bound(tmp_path: Path) -> None:
    _fill(tmp_path)
    removed = compilation_cache.prune(tmp_path, 100 * KB)
    # total 210 KB; oldest first: p5 (10 KB), p4 (20), p3 (30), p2 (40) leave 110 KB, p1 too
    assert removed == 150 * KB
    assert _files(tmp_path) == {"p0.bin": 60 * KB}
    assert compilation_cache.prune(tmp_path, 100 * KB) == 0  # already within the bound


def test_enable_prunes_at_most_once_a_day(tmp_path: Path) -> None:
    import jax

    before = jax.config.jax_compilation_cache_dir
    try:
        _fill(tmp_path)
        assert compilation_cache.enable(tmp_path, max_bytes=150 * KB) == tmp_path
        assert sum(_files(tmp_path).values()) <= 150 * KB
        kept = _files(tmp_path)
        _fill(tmp_path)  # the folder grows again within the day: left alone
        compilation_cache.enable(tmp_path, max_bytes=150 * KB)
        assert sum(_files(tmp_path).values()) == 210 * KB
        stamp = tmp_path / ".pruned"
        os.utime(stamp, (stamp.stat().st_mtime - compilation_cache.PRUNE_EVERY - 1,) * 2)
        compilation_cache.enable(tmp_path, max_bytes=150 * KB)  # a day later: pruned
        assert _files(tmp_path) == kept
    finally:
        jax.config.update("jax_compilation_cache_dir", before)
