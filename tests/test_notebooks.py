"""Every notebook in notebooks/ executes without an error (DESIGN §2: "exploration notebooks,
executed by the test suite").

Each notebook runs top to bottom in a "python3" kernel with notebooks/ as its working directory,
as a reader would run it. The kernel is pinned to the interpreter running the tests: a "python3"
kernelspec found elsewhere (a user's or the system's Jupyter) may start a Python without pathflow,
so the test writes its own kernelspec for `sys.executable` into a temporary directory and puts
that first on JUPYTER_PATH.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
KERNEL = "python3"
TIMEOUT = 600  # s per cell


@pytest.fixture(scope="module")
def kernel_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Environment for the kernel: JUPYTER_PATH whose "python3" kernelspec runs this Python."""
    from ipykernel.kernelspec import install

    prefix = tmp_path_factory.mktemp("jupyter")
    spec_dir = Path(install(kernel_name=KERNEL, prefix=str(prefix)))
    assert (spec_dir / "kernel.json").read_text().find(sys.executable.replace("\\", "\\\\")) >= 0
    runtime = tmp_path_factory.mktemp("jupyter-runtime")
    return {"JUPYTER_PATH": str(spec_dir.parents[1]), "JUPYTER_RUNTIME_DIR": str(runtime)}


def test_kernelspec_is_this_python(kernel_env: dict[str, str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from jupyter_client.kernelspec import KernelSpecManager

    for key, value in kernel_env.items():
        monkeypatch.setenv(key, value)
    spec = KernelSpecManager().get_kernel_spec(KERNEL)
    assert spec.argv[0] == sys.executable


@pytest.mark.parametrize("path", sorted(NOTEBOOKS.glob("*.ipynb")), ids=lambda p: p.name)
def test_notebook_executes(path: Path, kernel_env: dict[str, str],
                           monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in kernel_env.items():
        monkeypatch.setenv(key, value)
    notebook = nbformat.read(path, as_version=4)
    assert not any(cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code"), \
        f"{path.name}: commit notebooks without outputs"
    client = nbclient.NotebookClient(notebook, kernel_name=KERNEL, timeout=TIMEOUT,
                                     resources={"metadata": {"path": str(NOTEBOOKS)}})
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as error:  # names the cell and the traceback
        pytest.fail(f"{path.name}: {error}", pytrace=False)
    errors = [output for cell in notebook.cells if cell.cell_type == "code"
              for output in cell.outputs if output.output_type == "error"]
    assert not errors, errors
