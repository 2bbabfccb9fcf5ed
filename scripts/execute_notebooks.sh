#!/usr/bin/env bash
# Regenerate executed .ipynb twins from their jupytext .py sources (all, or those given).
# Usage: bash scripts/execute_notebooks.sh [notebooks/NN_topic.py ...]
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-.venv/bin/python}" scripts/execute_notebooks.py "$@"
