"""Traced programs kept on disk, beside JAX's persistent compilation cache.

The persistent compilation cache (`pathflow.compilation_cache`) skips XLA's compiling, but not
what comes before it: tracing the solver's Python into a program and lowering it, which JAX
does anew in every process to compute the cache's key. For a fresh process that is most of
what is left once the program is compiled: 0.35 s of the 2,000-flow incast's 0.77 s end to end
(0.15 s of it the solve). `cached(name, static, jitted)` keeps the traced program itself
(`jax.export`, serialized StableHLO) under `<compilation cache>/traced/`, keyed by everything
the program depends on: `name` and `static` (the physics, grid and segment length), the
arguments' tree, shapes and dtypes, the compiler options, JAX's version and backend, and a
digest of the source of `pathflow.solvers` and `pathflow.models`, so that editing the physics
retraces. A later process loads it and calls it under `jax.jit` (whose lowering is a call to
the loaded program), so only the compiled program, from the persistent cache, is left to load.
A program that closes over data rather than taking it as arguments (`analysis.stability`'s
derivatives, its network's matrices) puts a `fingerprint` of that data in `static`.

Only where the persistent compilation cache is on (the command line turns it on; scripts call
`pathflow.compilation_cache.enable()`); otherwise, and wherever a stored program cannot be
read, the function is traced as usual. Results are bit for bit the same either way
(tests/test_traced.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import threading
from collections.abc import Callable, Hashable
from functools import lru_cache
from pathlib import Path
from typing import Any

import jax
import numpy as np

__all__ = ["cached", "fingerprint"]

_FOLDER = "traced"


def _folder() -> Path | None:
    """Where traced programs live: inside the persistent compilation cache, if it is on."""
    directory = jax.config.jax_compilation_cache_dir
    return Path(directory) / _FOLDER if directory else None


@lru_cache(maxsize=1)
def _source_digest() -> str:
    """A digest of the code a traced program is made of (the solvers and the models)."""
    import pathflow.models

    roots = [Path(__file__).parent, *map(Path, pathflow.models.__path__)]
    digest = hashlib.sha256()
    for path in sorted(path for root in roots for path in root.rglob("*.py")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def fingerprint(value: Any) -> str:
    """A digest of `value` for `cached`'s `static`, where a program closes over data: arrays by
    dtype, shape and bytes, mappings by sorted key, sequences and pytrees item by item, and
    anything else by its repr (which must then say all that the program depends on)."""
    digest = hashlib.sha256()

    def walk(item: Any) -> None:
        if isinstance(item, (np.ndarray, jax.Array, np.generic)):
            array = np.asarray(item)
            digest.update(f"{array.dtype}{array.shape}".encode())
            digest.update(np.ascontiguousarray(array).tobytes())
        elif isinstance(item, dict):
            for key in sorted(item, key=repr):
                digest.update(repr(key).encode())
                walk(item[key])
        elif isinstance(item, (list, tuple)):
            digest.update(f"{type(item).__name__}[{len(item)}]".encode())
            for entry in item:
                walk(entry)
        elif isinstance(item, (str, bytes, int, float, bool, type(None))):
            digest.update(repr(item).encode())
        else:
            leaves, tree = jax.tree.flatten(item)
            if len(leaves) == 1 and leaves[0] is item:  # not a pytree: its repr
                digest.update(f"{type(item).__qualname__}:{item!r}".encode())
            else:
                digest.update(str(tree).encode())
                for leaf in leaves:
                    walk(leaf)

    walk(value)
    return digest.hexdigest()


def _signature(leaves: list[Any]) -> tuple[tuple[Any, np.dtype, bool], ...]:
    """Each argument's shape, dtype and weak typing: what a traced program is specific to.
    Computed on every call (a run's 70 segments, 85 arguments each), so dtypes stay objects:
    their names cost 7 times as much."""
    out = []
    for leaf in leaves:
        dtype = getattr(leaf, "dtype", None)
        out.append((np.shape(leaf), np.result_type(leaf) if dtype is None else dtype,
                    bool(getattr(leaf, "weak_type", False))))
    return tuple(out)


def _key(name: str, static: Hashable, options: dict[str, Any], tree: Any,
         signature: tuple[Any, ...]) -> str:
    text = repr((name, static, sorted(options.items()), str(tree), signature, jax.__version__,
                 jax.default_backend(), _source_digest()))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _export(function: Callable, tree: Any, leaves: list[Any]) -> tuple[Any, Any]:
    """Trace `function` on flat arguments: the exported program and its output's tree."""
    found: list[Any] = []

    def flat(*values: Any) -> list[Any]:
        outputs, out_tree = jax.tree.flatten(function(*jax.tree.unflatten(tree, values)))
        found.append(out_tree)
        return outputs

    return jax.export.export(jax.jit(flat))(*leaves), found[0]


def _store(path: Path, exported: Any, out_tree: Any) -> None:
    """Written whole or not at all (another process, or thread, may be writing the same
    program)."""
    partial = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.part")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial.write_bytes(pickle.dumps((bytes(exported.serialize()), out_tree)))
        partial.replace(path)
    except OSError:  # a read-only cache: the run goes on without storing
        partial.unlink(missing_ok=True)


def _load(path: Path) -> tuple[Any, Any] | None:
    try:
        serialized, out_tree = pickle.loads(path.read_bytes())
        loaded = jax.export.deserialize(bytearray(serialized)), out_tree
    except Exception:  # missing, truncated or from another JAX: trace anew
        return None
    with contextlib.suppress(OSError):  # in use: the cache's pruning removes programs by age
        os.utime(path)
    return loaded


def cached(name: str, static: Hashable, function: Callable, donate: int | None = None,
           options: dict[str, Any] | None = None) -> Callable:
    """`jax.jit(function, donate_argnums=donate, compiler_options=options)` (a function of
    pytrees; `donate`: the argument whose buffers the call may reuse), whose traced program is
    kept on disk per argument shapes (module docstring)."""
    options = options or {}
    jitted = jax.jit(function, donate_argnums=() if donate is None else donate,
                     compiler_options=options or None)
    programs: dict[tuple[Any, ...], Callable] = {}

    def call(*args: Any) -> Any:
        folder = _folder()
        if folder is None:
            return jitted(*args)
        leaves, tree = jax.tree.flatten(args)
        signature = _signature(leaves)
        program = programs.get((folder, tree, signature))
        if program is None:
            key = _key(name, static, options, tree, signature)
            program = programs[(folder, tree, signature)] = _program(
                folder / f"{key}.bin", function, args, tree, leaves, donate, options, jitted)
        return program(leaves)

    return call


def _program(path: Path, function: Callable, args: tuple[Any, ...], tree: Any,
             leaves: list[Any], donate: int | None, options: dict[str, Any], jitted: Callable
             ) -> Callable[[list[Any]], Any]:
    """The program stored at `path`, or traced, stored and then run; `jitted` where JAX
    cannot export it (the plain call then raises whatever tracing raised)."""
    loaded = _load(path)
    if loaded is None:
        try:
            loaded = _export(function, tree, leaves)
        except Exception:
            return lambda values: jitted(*jax.tree.unflatten(tree, values))
        _store(path, *loaded)
    exported, out_tree = loaded
    if donate is None:
        donated: tuple[int, ...] = ()
    else:
        before = sum(len(jax.tree.leaves(arg)) for arg in args[:donate])
        donated = tuple(range(before, before + len(jax.tree.leaves(args[donate]))))
    # one placement for every argument: a carry that comes back committed to the device (from
    # the ring's re-filing) would otherwise compile the program a second time
    device = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    run = jax.jit(exported.call, in_shardings=device, donate_argnums=donated,
                  compiler_options=options or None)
    return lambda values: jax.tree.unflatten(out_tree, run(*values))
