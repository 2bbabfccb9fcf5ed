#!/usr/bin/env bash
# Print the path of a Python X.Y interpreter: pythonX.Y on PATH, else one that pyenv holds.
# Usage: bash scripts/find_python.sh 3.13
set -uo pipefail
want=$1
is_it() { "$1" -c "import sys; sys.exit(sys.version_info[:2] != tuple(map(int, '$want'.split('.'))))" 2>/dev/null; }
for candidate in "python$want" "$(pyenv root 2>/dev/null)"/versions/"$want".*/bin/"python$want"; do
  if is_it "$candidate"; then
    "$candidate" -c 'import sys; print(sys.executable)'
    exit 0
  fi
done
echo "no Python $want found (neither python$want on PATH nor under pyenv)" >&2
exit 1
