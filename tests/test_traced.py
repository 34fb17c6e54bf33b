"""Traced programs kept on disk (solvers/traced.py): a later process loads the program instead of
tracing it, with results bit for bit those of a traced run; a stored program that cannot be
read, or whose source changed, is traced anew, and loading one renews its date (the cache's
pruning removes programs by age, tests/test_compilation_cache.py); one that closes over a
network's data (the stability's) is kept per network."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

# Each step in a fresh process (the compilation cache and JAX's configuration are global):
# run a short DCTCP star with the cache in `folder` ("-": none), counting the programs traced
# for export; `mode` "edited" pretends the solver's source changed, and "stability"
# linearises a Reno/RED star at two link rates instead (the stability's derivatives program
# closes over its network's data: two networks of the same shapes must not share it).
_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    from pathflow import compilation_cache, simulate
    from pathflow.analysis.stability import linearize
    from pathflow.scenario import load_scenario
    from pathflow.solvers import traced

    folder, mode, out = sys.argv[1], sys.argv[2], sys.argv[3]
    if folder != "-":
        compilation_cache.enable(folder)
    traced_anew = []
    export = traced._export
    def watched(*args):
        traced_anew.append(1)
        return export(*args)
    traced._export = watched
    if mode == "edited":
        traced._source_digest = lambda: "the solver's source after an edit"
    scenario = load_scenario(sys.argv[4])
    if mode == "stability":
        scenario = scenario.with_updates({
            "transport.cc": "reno", "transport.reaction": "mean",
            "aqm": {"kind": "red", "min": "20pkt", "max": "200pkt", "pmax": 0.1, "ecn": True}})
        np.save(out, np.stack([linearize(scenario.with_updates({"topology.link_rate": rate})).a0
                               for rate in ("1Gbps", "2Gbps")]))
    else:
        np.save(out, simulate(scenario.with_updates({"run.duration": "20ms"})).queue.values)
    print(json.dumps({"traced": len(traced_anew)}))
""")


def _run(folder: str, mode: str, out: Path) -> tuple[int, np.ndarray]:
    done = subprocess.run([sys.executable, "-c", _SCRIPT, folder, mode, str(out),
                           str(ROOT / "examples" / "dctcp_star.toml")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])["traced"], np.load(out)


def test_a_later_process_loads_the_traced_program(tmp_path: Path) -> None:
    cache = str(tmp_path / "cache")
    traced, reference = _run("-", "allow", tmp_path / "plain.npy")
    assert traced == 0  # no cache: plain jit, nothing exported
    traced, first = _run(cache, "allow", tmp_path / "first.npy")
    assert traced == 2  # the initial carry and the step loop, exported once each
    stored = sorted((tmp_path / "cache" / "traced").glob("*.bin"))
    assert len(stored) == 2
    for path in stored:  # stored long ago: a load marks them as in use for the pruning
        os.utime(path, (1e9, 1e9))
    traced, second = _run(cache, "again", tmp_path / "second.npy")
    assert traced == 0  # loaded, not traced
    assert all(path.stat().st_mtime > 1e9 for path in stored)
    assert np.array_equal(first, reference) and np.array_equal(second, reference)

    for path in stored:  # unreadable: traced anew, same result
        path.write_bytes(b"not a program")
    traced, third = _run(cache, "allow", tmp_path / "third.npy")
    assert traced == 2 and np.array_equal(third, reference)

    traced, fourth = _run(cache, "edited", tmp_path / "fourth.npy")  # new source: new keys
    assert traced == 2 and np.array_equal(fourth, reference)
    assert len(list((tmp_path / "cache" / "traced").glob("*.bin"))) == 4



def test_the_stability_program_is_kept_per_network(tmp_path: Path) -> None:
    cache = str(tmp_path / "cache")
    traced, plain = _run("-", "stability", tmp_path / "plain.npy")
    assert traced == 0
    assert not np.allclose(plain[0], plain[1])  # the two networks' systems differ
    traced, first = _run(cache, "stability", tmp_path / "first.npy")
    assert traced == 2  # one program per network
    traced, second = _run(cache, "stability", tmp_path / "second.npy")
    assert traced == 0  # both loaded, each its own
    assert np.array_equal(first, plain) and np.array_equal(second, plain)
