"""xarray's dask checks deferred (`pathflow.dask_probe`): no import of dask for a Dataset of
numpy arrays with an index, and dask-backed Datasets as before. Each case in a fresh
interpreter, where what is imported is the process's own."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def test_a_dataset_of_numpy_arrays_does_not_import_dask() -> None:
    out = _run("""
        import sys
        import numpy as np
        import xarray as xr
        import pathflow
        ds = xr.Dataset({"queue": ("time", np.arange(3.0))}, coords={"time": [0.0, 1.0, 2.0]})
        print(float(ds.queue.sum()), "dask" in sys.modules)
    """)
    assert out == "3.0 False"


def test_dask_arrays_stay_dask_arrays_before_and_after_the_first_dataset() -> None:
    out = _run("""
        import numpy as np
        import xarray as xr
        import pathflow
        plain = xr.Dataset({"a": ("x", np.arange(4.0))})  # the probe answered without dask
        import dask.array as da
        lazy = xr.Dataset({"a": ("x", da.arange(4.0, chunks=2))})
        print(lazy.a.chunks, float(lazy.a.sum().compute()), xr.DataArray(lazy.a.data).chunks,
              float(plain.a.chunk(2).sum().compute()))
    """)
    assert out == "((2, 2),) 6.0 ((2, 2),) 6.0"
