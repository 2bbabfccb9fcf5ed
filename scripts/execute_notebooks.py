"""Regenerate executed .ipynb twins from their jupytext .py sources.

Usage: python scripts/execute_notebooks.py [notebooks/NN_topic.py ...]   (default: all)
Each twin is rebuilt from its source and executed top to bottom in a fresh kernel, with the
notebook's folder as working directory, so its stored outputs come from one real run.
"""

import sys
import time
from pathlib import Path

import jupytext
import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]


def execute(source: Path) -> None:
    nb = jupytext.read(source)
    nb.metadata["kernelspec"] = {
        "display_name": "Python 3",
        "language": "python",
        "name": "python3",
    }
    start = time.perf_counter()
    NotebookClient(
        nb,
        timeout=1800,
        kernel_name="python3",
        resources={"metadata": {"path": str(source.parent)}},
    ).execute()
    twin = source.with_suffix(".ipynb")
    nbformat.write(nb, twin)
    print(
        f"executed {source.relative_to(ROOT)} -> {twin.name} in {time.perf_counter() - start:.1f} s"
    )


if __name__ == "__main__":
    paths = [Path(p).resolve() for p in sys.argv[1:]] or sorted(
        (ROOT / "notebooks").glob("[0-9][0-9]_*.py")
    )
    for path in paths:
        execute(path)
