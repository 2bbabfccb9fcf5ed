#!/usr/bin/env bash
# Run every test: unit and property tests, then nbval over every executed notebook (twice: on
# this CPU's code path and on torch's non-vectorised one), then
# (when _build/html exists, i.e. after scripts/build_book.sh) the browser tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
export PYTHONHASHSEED=0 OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
# two workers: the CI machine and the reference laptop have 2 cores; loadfile keeps each
# notebook's cells on one worker (one kernel per notebook)
WORKERS=${PYTEST_WORKERS:-2}
.venv/bin/python -m pytest tests -m "not browser" -n "$WORKERS" "$@"
NBVAL=(--nbval notebooks/ -n "$WORKERS" --dist loadfile
  --nbval-sanitize-with tests/nbval_sanitize.cfg --nbval-cell-timeout=900)
.venv/bin/python -m pytest "${NBVAL[@]}" "$@"
# again under another CPU code path: torch's non-vectorised kernels and MKL's vendor-neutral
# path. A stored output that depends on the processor's vector unit (AVX2, AVX-512, NEON)
# fails here on whatever machine introduces it (book/reading.md, "What 'reproduces' means")
ATEN_CPU_CAPABILITY=default MKL_CBWR=COMPATIBLE .venv/bin/python -m pytest "${NBVAL[@]}" "$@"
.venv/bin/python -m pytest tests -m browser "$@"
