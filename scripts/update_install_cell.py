"""Write the install cell (the first code cell) of every chapter source from _config.yml.

Usage: python scripts/update_install_cell.py [--check] [FILE ...]   (default: every chapter)

The cell installs the companion from `repository.url`@`repository.branch` where it is not
importable (Colab, a bare kernel) and does nothing elsewhere (a local checkout, Binder). pip
adds only what is missing and keeps what the runtime has inside pyproject.toml's ranges;
book/reading.md says when Colab then wants a restart. After rewriting sources, regenerate
their executed twins (`bash scripts/execute_notebooks.sh`).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
HEADER = '# %% tags=["remove-cell"]'
TEMPLATE = '''\
# Colab or a bare kernel: install the companion (book/reading.md, "Three ways to run")
try:
    import companion  # noqa: F401
except ModuleNotFoundError:
    %pip install --quiet "companion @ git+{repo}@{branch}"
    import companion  # noqa: F401
'''


def repository() -> tuple[str, str]:
    """(url, branch) of `repository` in _config.yml: the one setting every launch path uses."""
    repo = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["repository"]
    return repo["url"].rstrip("/"), repo.get("branch", "main")


def cell_source() -> str:
    """The install cell as a notebook shows it."""
    url, branch = repository()
    return TEMPLATE.format(repo=url, branch=branch)


def rewrite(text: str) -> str:
    """`text` (a jupytext percent source) with its first code cell replaced by the cell,
    the magic commented out as jupytext writes it."""
    body = re.sub(r"(?m)^(\s*)(%\w)", r"\1# \2", cell_source())
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines)
                 if line.startswith("# %%") and "[markdown]" not in line)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("# %%")),
               len(lines))
    return "\n".join([*lines[:start], HEADER, *body.splitlines(), "", *lines[end:]]) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--check", action="store_true", help="report stale cells, change nothing")
    args = parser.parse_args(argv)
    stale = []
    for file in args.files or sorted((ROOT / "notebooks").glob("[0-9]*.py")):
        text = file.read_text(encoding="utf-8")
        if (new := rewrite(text)) != text:
            stale.append(file)
            if not args.check:
                file.write_text(new, encoding="utf-8")
    for file in stale:
        print(f"{'stale' if args.check else 'rewrote'} install cell: {file}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
