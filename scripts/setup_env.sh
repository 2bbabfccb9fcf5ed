#!/usr/bin/env bash
# Create .venv (if missing) and install the companion with every pinned dependency from the
# lock file constraints.txt. Idempotent: a second run only checks that the pins are met.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON_BIN=${PYTHON_BIN:-python3.11}
command -v "$PYTHON_BIN" >/dev/null 2>&1 || PYTHON_BIN=python3
"$PYTHON_BIN" - <<'PY'
import sys
if sys.version_info[:2] != (3, 11):
    sys.exit(f"Python 3.11 is required (the lock file is for it); found {sys.version.split()[0]}")
PY
[ -x .venv/bin/python ] || "$PYTHON_BIN" -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade "pip>=24"
# torch==2.13.0 from the lock: the CPU wheel (a range would let pip fetch a CUDA build)
.venv/bin/python -m pip install --quiet --disable-pip-version-check \
  --constraint constraints.txt --editable ".[dev]"
