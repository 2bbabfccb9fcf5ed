#!/usr/bin/env bash
# Regenerate executed .ipynb twins from their jupytext .py sources (all, or those given).
# Usage: bash scripts/execute_notebooks.sh [notebooks/NN_topic.py ...]
set -euo pipefail
cd "$(dirname "$0")/.."
# the same environment as the build and the tests (scripts/build_book.sh, run_tests.sh)
export PYTHONHASHSEED=0 OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
exec "${PYTHON:-.venv/bin/python}" scripts/execute_notebooks.py "$@"
