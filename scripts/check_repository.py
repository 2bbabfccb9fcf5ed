"""Refuse to publish a book whose links point at another repository.

Usage: python3 scripts/check_repository.py https://github.com/OWNER/NAME [BRANCH]

The arguments are the repository and branch the workflow runs in and deploys from
(`https://github.com/${{ github.repository }}` and `${{ github.ref_name }}` in
.github/workflows/book.yml). Exit 1, saying what to change, when `repository.url` in
_config.yml (the one setting the launch buttons, the repository button and the notebooks'
install cell derive from) is a placeholder or another repository, when `repository.branch`
is not the deployed branch, or when CITATION.cff's `repository-code` disagrees. Standard
library only: it runs before anything is installed, so a deploy fails in seconds, not after
the build.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLACEHOLDER_PARTS = {"owner", "user", "username", "org", "organisation", "organization", "repo",
                     "repository", "name", "project", "example", "placeholder"}


def top_level_value(text: str, section: str | None, key: str) -> str:
    """The value of `key` (inside the top-level mapping `section`, if given) of a simple YAML
    file: enough for _config.yml's repository.url and CITATION.cff's repository-code."""
    lines = text.splitlines()
    if section is not None:
        start = next((i for i, line in enumerate(lines) if re.match(rf"{section}:\s*$", line)),
                     None)
        if start is None:
            raise ValueError(f"no top-level '{section}:' section")
        block = []
        for line in lines[start + 1:]:
            if line.strip() and not line.startswith((" ", "\t", "#")):
                break
            block.append(line)
        lines = [line.strip() for line in block]
    for line in lines:
        match = re.match(rf"{key}:\s*(.*?)\s*(#.*)?$", line)
        if match:
            return match[1].strip("'\"")
    raise ValueError(f"no '{key}:' found")


def is_placeholder(url: str) -> bool:
    parts = normalise(url).removeprefix("https://").split("/")
    return len(parts) != 3 or any(
        part in PLACEHOLDER_PARTS or part.startswith("your") or "example" in part
        or re.search(r"[<>{}$]", part)
        for part in parts
    )


def normalise(url: str) -> str:
    return url.strip().rstrip("/").removesuffix(".git").lower()


def problems(expected: str, branch: str | None = None, root: Path = ROOT) -> list[str]:
    config = (root / "_config.yml").read_text(encoding="utf-8")
    url = top_level_value(config, "repository", "url")
    found = []
    if is_placeholder(url):
        found.append(f"_config.yml: repository.url {url!r} is a placeholder")
    elif normalise(url) != normalise(expected):
        found.append(f"_config.yml: repository.url is {url!r}, but this is {expected!r}")
    configured_branch = top_level_value(config, "repository", "branch")
    if branch is not None and configured_branch != branch:
        found.append(f"_config.yml: repository.branch is {configured_branch!r}, but the book "
                     f"is deployed from {branch!r}")
    citation = top_level_value((root / "CITATION.cff").read_text(encoding="utf-8"), None,
                               "repository-code")
    if normalise(citation) != normalise(url):
        found.append(f"CITATION.cff: repository-code {citation!r} != repository.url {url!r}")
    return found


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2) or not argv[0].startswith("https://"):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    found = problems(*argv)
    for problem in found:
        print(f"error: {problem}", file=sys.stderr)
    if found:
        print(
            f"Set repository (url, branch) in _config.yml and repository-code in CITATION.cff "
            f"to {argv[0]}, run python scripts/update_install_cell.py and "
            "bash scripts/execute_notebooks.sh, and commit (README.md, 'Publishing').",
            file=sys.stderr,
        )
        return 1
    print(f"repository.url is {argv[0]}: launch buttons and install cells point here")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
