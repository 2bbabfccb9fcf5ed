#!/usr/bin/env bash
# Colab, simulated (tests/book/test_colab.py): Chapter 1's install cell against real pip in a fresh
# venv holding a Colab-like stack older than the lock, the repository served from a local git
# copy of this checkout; then the rest of Chapter 1 in the same kernel, as on Colab; then the
# restart message, provoked by a package pip must upgrade after it was imported.
#
# Colab runs Python 3.13 with its own torch. The simulation uses Python 3.13 and the CPU build
# of the oldest torch pyproject.toml admits when pip can install that here (the GitHub
# workflow, through the PyTorch CPU index). Elsewhere no CPU torch for 3.13 can be had (PyPI's
# Linux torch is the multi-GB CUDA build), so it says so and uses Python 3.11 with the lock's
# CPU torch: the cell, pip and the stack are then checked, on the older Python.
# Env: RUNNER_PYTHON (default .venv/bin/python): a Python with pytest, nbclient and pyyaml;
# REQUIRE_PY313_TORCH=1: fail rather than fall back to Python 3.11.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNNER_PYTHON=${RUNNER_PYTHON:-.venv/bin/python}
[ -x "$RUNNER_PYTHON" ] || bash scripts/setup_env.sh
start=$SECONDS
floor=$(sed -nE 's/^ *"torch>=([0-9]+\.[0-9]+).*/\1/p' pyproject.toml)
locked=$(sed -nE 's/^torch==([0-9.]+)$/\1/p' constraints.txt)
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
if py313=$(bash scripts/find_python.sh 3.13) &&
   "$py313" -m pip download --quiet --no-deps --only-binary=:all: -d "$probe" \
     "torch==$floor.0+cpu" >"$probe/log" 2>&1; then
  export COLAB_PYTHON=$py313 COLAB_TORCH="torch==$floor.0+cpu"
else
  grep -E "^ERROR" "$probe/log" 2>/dev/null | tail -n 2 || true
  if [ "${REQUIRE_PY313_TORCH:-0}" = 1 ]; then
    echo "== FAILED: REQUIRE_PY313_TORCH=1, but no CPU torch==$floor.0 for Python 3.13" >&2
    exit 1
  fi
  echo "== no CPU torch for Python 3.13 can be installed here (PyPI's Linux torch is the CUDA"
  echo "   build; the PyTorch CPU index is not reachable): simulating on Python 3.11 with the"
  echo "   lock's CPU torch instead of Colab's Python 3.13"
  COLAB_PYTHON=$(bash scripts/find_python.sh 3.11)
  export COLAB_PYTHON COLAB_TORCH="torch==$locked+cpu"
fi
echo "== Colab simulation: $COLAB_PYTHON, $COLAB_TORCH"
COMPANION_COLAB_SIM=1 OMP_NUM_THREADS=1 "$RUNNER_PYTHON" -m pytest tests/book/test_colab.py \
  -p no:cacheprovider -q -rA "$@"
echo "== Colab simulation done in $((SECONDS - start)) s"
