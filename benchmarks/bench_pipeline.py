"""Pipeline speed targets (issue: 'make test' <= 10 min on 2 cores, Chapter 1 <= 60 s).

Measures, in one run on this machine: the execution time of every chapter (fresh kernel, as
the book build does) and the wall time of the unit-test and nbval stages of
scripts/run_tests.sh. Prints each against its target; it is a report, not a test.

Usage: .venv/bin/python benchmarks/bench_pipeline.py [--skip-tests]
"""

import subprocess
import sys
import time
from pathlib import Path

import jupytext
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
CHAPTER_TARGET_S = {"01": 60, "02": 90, "03": 90, "04": 90, "05": 60, "06": 180, "07": 180}
TEST_TARGET_S = 600


def time_notebook(source: Path) -> float:
    nb = jupytext.read(source)
    start = time.perf_counter()
    NotebookClient(nb, timeout=1800, kernel_name="python3",
                   resources={"metadata": {"path": str(source.parent)}}).execute()
    return time.perf_counter() - start


def time_command(args: list[str]) -> tuple[float, int]:
    start = time.perf_counter()
    rc = subprocess.run(args, cwd=ROOT).returncode
    return time.perf_counter() - start, rc


def main() -> None:
    rows = []
    for source in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py")):
        seconds = time_notebook(source)
        target = CHAPTER_TARGET_S.get(source.name[:2], 90)
        rows.append((source.stem, seconds, target))
    if "--skip-tests" not in sys.argv:
        py = str(ROOT / ".venv" / "bin" / "python")
        unit, rc1 = time_command([py, "-m", "pytest", "-q", "tests", "-m", "not browser",
                                  "-n", "2"])
        nbval, rc2 = time_command([py, "-m", "pytest", "-q", "--nbval", "notebooks/", "-n", "2",
                                   "--dist", "loadfile", "--nbval-sanitize-with",
                                   "tests/nbval_sanitize.cfg"])
        rows.append((f"unit tests (exit {rc1})", unit, None))
        rows.append((f"nbval (exit {rc2})", nbval, None))
        rows.append(("tests total", unit + nbval, TEST_TARGET_S))
    print(f"{'stage':<28} {'seconds':>8} {'target':>7} {'ratio':>6}")
    for name, seconds, target in rows:
        ratio = f"{seconds / target:6.2f}" if target else ""
        print(f"{name:<28} {seconds:8.1f} {target or '':>7} {ratio}")


if __name__ == "__main__":
    main()
