"""Execute every notebook of the book in parallel (one process per core) into the book's
jupyter-cache, so that `jupyter-book build` (execute_notebooks: cache) reads the fresh
outputs instead of executing the chapters one after another.

scripts/build_book.sh runs this on an emptied cache, so every output in the built book
comes from this run: nothing is reused from an earlier build. A notebook that fails here is
left out of the cache; the build then executes it itself and fails with its traceback.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import yaml
from jupyter_cache import get_cache
from jupyter_cache.executors import load_executor

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "_build" / ".jupyter_cache"  # Jupyter Book's default nb_execution_cache_path


def book_notebooks(toc: Path) -> list[Path]:
    """The .ipynb files the table of contents lists, in reading order."""
    found: list[Path] = []

    def walk(node):
        if isinstance(node, dict):
            name = node.get("file")
            if isinstance(name, str) and name.endswith(".ipynb"):
                found.append(ROOT / name)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(yaml.safe_load(toc.read_text()))
    return found


def main() -> int:
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    timeout = int(config.get("execute", {}).get("timeout", 900))
    notebooks = book_notebooks(ROOT / "_toc.yml")
    cache = get_cache(str(CACHE))
    for path in notebooks:
        cache.add_nb_to_project(str(path))
    logging.basicConfig(level=logging.WARNING)
    result = load_executor("local-parallel", cache).run_and_cache(
        timeout=timeout, allow_errors=False)
    print(f"executed {len(result.succeeded)} of {len(notebooks)} notebooks into {CACHE}")
    for uri in result.excepted + result.errored:
        print(f"FAILED here (the build re-executes it and shows why): {uri}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
