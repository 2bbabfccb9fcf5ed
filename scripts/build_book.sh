#!/usr/bin/env bash
# Build the whole book into _build/html with every notebook freshly executed.
# Warnings are errors (-W -n --keep-going) and a failing cell fails the build.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
export PYTHONHASHSEED=0 OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
.venv/bin/jupyter-book clean . >/dev/null
# fresh outputs: empty the execution cache, execute every chapter into it in parallel (one
# process per core; scripts/prime_book_cache.py), then build, reading the cache
rm -rf _build/.jupyter_cache
.venv/bin/python scripts/prime_book_cache.py
.venv/bin/jupyter-book build . --builder html -W -n --keep-going
echo "book built: _build/html/index.html"
