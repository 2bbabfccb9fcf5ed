"""Colab, simulated: the install cell of Chapter 1 as committed, run against real pip in a
fresh venv that holds a Colab-like stack older than the lock (numpy 2.1, matplotlib 3.10,
pillow 11, fsspec 2025, a preinstalled torch), with numpy and PIL already imported as in
every fresh Colab kernel. The repository is a local git copy of this checkout (file://), so
nothing but the package registry is reached.

1. A fresh kernel: the install cell, then all of Chapter 1 in the same kernel (Colab's usual
   path). The cell must install the companion, keep every package of the stack that lies
   inside pyproject.toml's ranges (tqdm, preinstalled below the range's floor, is upgraded);
   then every cell of the chapter runs.
2. A second kernel: the cell now does nothing.

Slow (a venv, pip, three kernels), so it runs only when asked: bash scripts/simulate_colab.sh,
which chooses the Python and the torch (COLAB_PYTHON, COLAB_TORCH).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import update_install_cell as cell  # noqa: E402

pytestmark = pytest.mark.skipif(
    os.environ.get("COMPANION_COLAB_SIM") != "1",
    reason="slow (fresh venv, pip, three kernels): run bash scripts/simulate_colab.sh",
)

# Colab-like versions older than the lock; tqdm below pyproject's floor on purpose
STACK = {"numpy": "2.1.3", "matplotlib": "3.10.9", "pillow": "11.3.0", "fsspec": "2025.3.0",
         "tqdm": "4.65.0"}
PRELOADED = "import numpy, PIL.Image  # Colab has numpy and PIL loaded in every fresh kernel"
REPORT = (
    "import importlib.metadata as md, json\n"
    "names = ['companion', 'numpy', 'matplotlib', 'pillow', 'fsspec', 'tqdm', 'torch']\n"
    "print(json.dumps({n: md.version(n) for n in names}))"
)


def run(*args, **kwargs):
    return subprocess.run([str(a) for a in args], check=True, text=True, **kwargs)


def local_repository(dest: Path, branch: str) -> str:
    """This checkout's files (tracked and untracked, not ignored) as a one-commit git
    repository on `branch`; returns its file:// URL."""
    files = run("git", "-C", ROOT, "ls-files", "-z", "--cached", "--others",
                "--exclude-standard", capture_output=True).stdout.split("\0")
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    identity = ["-c", "user.name=colab-sim", "-c", "user.email=colab-sim@localhost"]
    run("git", "-C", dest, "init", "--quiet", "--initial-branch", branch)
    run("git", "-C", dest, "add", "--all")
    run("git", "-C", dest, *identity, "commit", "--quiet", "--message", "local copy")
    return dest.as_uri()


def execute(cells: list[str], workdir: Path):
    """Run code cells in a fresh kernel of the simulated runtime (found on JUPYTER_PATH);
    return the executed notebook. Any cell that raises fails the test."""
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    NotebookClient(nb, timeout=900, kernel_name="colab-sim",
                   resources={"metadata": {"path": str(workdir)}}).execute()
    return nb


def text_of(code_cell) -> str:
    assert not [o for o in code_cell.outputs if o.output_type == "error"], code_cell.outputs
    return "".join(o.get("text", "") for o in code_cell.outputs if o.output_type == "stream")


@pytest.fixture(scope="module")
def runtime(tmp_path_factory):
    """A fresh venv with the Colab-like stack, a kernel spec for it, and the local repo."""
    python = os.environ.get("COLAB_PYTHON", "python3.13")
    torch = os.environ["COLAB_TORCH"]
    tmp = tmp_path_factory.mktemp("colab")
    venv = tmp / "venv"
    run(python, "-m", "venv", venv)
    py = venv / "bin" / "python"
    # Colab's pip is recent; a venv's bundled one may predate git+file:// requirements
    run(py, "-m", "pip", "install", "--quiet", "--upgrade", "pip>=24.2")
    lock = [line for line in (ROOT / "constraints.txt").read_text().splitlines()
            if line.split("==")[0].lower() not in {*STACK, "torch"}]
    (tmp / "constraints.txt").write_text("\n".join(lock) + "\n")
    run(py, "-m", "pip", "install", "--quiet", "--only-binary=:all:",
        "--constraint", tmp / "constraints.txt", "ipykernel", torch,
        *[f"{name}=={version}" for name, version in STACK.items()])
    spec = tmp / "jupyter" / "kernels" / "colab-sim"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [str(py), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "colab-sim", "language": "python",
    }))
    (tmp / "repo").mkdir()
    (tmp / "content").mkdir()  # Colab's working folder: no repository files in it
    branch = cell.repository()[1]
    return {"py": py, "kernels": tmp / "jupyter", "repo": local_repository(tmp / "repo", branch),
            "branch": branch, "content": tmp / "content"}


@pytest.fixture
def kernel_env(runtime, monkeypatch):
    monkeypatch.setenv("JUPYTER_PATH", str(runtime["kernels"]))
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    return runtime


def chapter_one(runtime) -> list[str]:
    """Chapter 1's code cells as Colab opens them (the committed .ipynb), the install cell
    pointed at the local copy of the repository instead of repository.url."""
    nb = nbformat.read(ROOT / "notebooks" / "01_rank_one.ipynb", as_version=4)
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    assert code[0] == cell.cell_source().rstrip("\n"), (
        "01_rank_one.ipynb does not carry the current install cell: run "
        "python scripts/update_install_cell.py && bash scripts/execute_notebooks.sh")
    repo, branch = cell.repository()
    local = code[0].replace(f"git+{repo}@{branch}", f"git+{runtime['repo']}@{runtime['branch']}")
    assert local != code[0]
    return [local, *code[1:]]


def test_install_keeps_colabs_stack_then_chapter_1_runs(kernel_env):
    runtime = kernel_env
    py, content = runtime["py"], runtime["content"]
    cells = chapter_one(runtime)
    before = json.loads(run(py, "-c", REPORT.replace("'companion', ", ""),
                            capture_output=True).stdout)
    assert {k: before[k] for k in STACK} == STACK

    # 1. a fresh Colab kernel: numpy and PIL loaded, then the chapter from the top
    first = execute([PRELOADED, *cells, REPORT], content)
    assert "ERROR" not in text_of(first.cells[1])  # pip installed without complaint
    after = json.loads(text_of(first.cells[-1]))
    kept = ("numpy", "matplotlib", "pillow", "fsspec", "torch")
    assert {k: after[k] for k in kept} == {k: before[k] for k in kept}, "pip moved Colab's stack"
    assert after["tqdm"] != STACK["tqdm"] and after["companion"] == "0.1.0"
    for code_cell in first.cells:
        text_of(code_cell)  # no cell raised

    # 2. once installed, the cell does nothing
    assert text_of(execute([cells[0]], content).cells[0]) == ""
