#!/usr/bin/env bash
# Regenerate executed .ipynb twins from their jupytext .py sources (all, or those given).
# Usage: bash scripts/execute_notebooks.sh [notebooks/NN_topic.py ...]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
files=("$@")
[ ${#files[@]} -gt 0 ] || files=(notebooks/[0-9]*.py)
for f in "${files[@]}"; do
  echo "== executing $f"
  "$PY" -m jupytext --to ipynb --update --execute --set-kernel python3 "$f"
done
