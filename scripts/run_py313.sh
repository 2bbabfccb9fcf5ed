#!/usr/bin/env bash
# Python 3.13 (Colab's Python) check: a fresh 3.13 venv with the companion (a wheel built from
# this checkout) and its test extras at the lock's versions, except torch, which is the CPU
# build of the oldest torch pyproject.toml admits (its range's floor: Colab's torch). Runs the
# unit tests (not nbval, not the browser, not the fuzz suite) and executes Chapter 1.
#
# torch: only a CPU build is installed (`torch==X.Y.0+cpu`, which no CUDA build can match):
# PyPI's Linux torch is the CUDA build (a 0.5 GB wheel that pulls ~2.5 GB of nvidia-* wheels).
# The CPU builds come from the PyTorch CPU index (PIP_EXTRA_INDEX_URL in the GitHub workflow).
# Where no CPU torch for Python 3.13 can be installed, the script says so and runs the test
# modules that do not need torch (the package imports torch lazily; those that do skip or are
# left out, named) and Chapter 1, whose exact checks need no torch.
#
# Env: PYTHON313 (default: python3.13 on PATH, else pyenv's), PY313_VENV (default: a temporary
# folder, removed at the end), PY313_TORCH (default torch==<floor>.0+cpu), REQUIRE_PY313_TORCH=1
# (fail instead of running without torch: set where the CPU index is reachable).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PYTHON313=${PYTHON313:-$(bash scripts/find_python.sh 3.13)}
export PYTHONHASHSEED=0 OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} PIP_DISABLE_PIP_VERSION_CHECK=1
start=$SECONDS

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
VENV=${PY313_VENV:-$work/venv}
"$PYTHON313" -m venv --clear "$VENV"
PY=$VENV/bin/python
"$PY" -c 'import sys; assert sys.version_info[:2] == (3, 13), sys.version'
echo "== Python $("$PY" -c 'import sys; print(sys.version.split()[0])') in $VENV"

# the lock without torch; the package's requirements (core + test extras) without torch
grep -viE '^torch==' constraints.txt >"$work/lock-without-torch.txt"
"$PY" - "$work" <<'PY'
import re, sys, tomllib
from pathlib import Path
project = tomllib.loads(Path("pyproject.toml").read_text())["project"]
extras = project["optional-dependencies"]
def expand(reqs):  # "companion[dask]" inside an extra means that extra's requirements
    for r in reqs:
        own = re.fullmatch(r"companion\[(.+)\]", r.strip())
        yield from (x for e in own[1].split(",") for x in expand(extras[e])) if own else [r]
reqs = list(expand(project["dependencies"] + extras["test"]))
Path(sys.argv[1], "requirements.txt").write_text(
    "\n".join(r for r in reqs if not re.match(r"torch\b", r)) + "\nnbclient\n")
floor = re.search(r">=\s*(\d+\.\d+)", next(r for r in reqs if re.match(r"torch\b", r)))[1]
Path(sys.argv[1], "torch-floor").write_text(floor)
PY
TORCH_SPEC=${PY313_TORCH:-torch==$(cat "$work/torch-floor").0+cpu}

pip_install() {  # (this machine's pip config warns about every absent local index: dropped)
  "$PY" -m pip install --quiet --constraint "$work/lock-without-torch.txt" "$@" 2>&1 |
    { grep -v "^WARNING: Location '.*' is ignored" || true; }
}
if pip_install --only-binary=:all: "$TORCH_SPEC" >"$work/torch.log" 2>&1; then
  HAVE_TORCH=1
  echo "== installed $TORCH_SPEC: $("$PY" -c 'import torch; print(torch.__version__)')"
else
  HAVE_TORCH=0
  grep -E "^ERROR" "$work/torch.log" | tail -n 2 || true
  if [ "${REQUIRE_PY313_TORCH:-0}" = 1 ]; then
    echo "== FAILED: REQUIRE_PY313_TORCH=1, but pip cannot install $TORCH_SPEC" >&2
    exit 1
  fi
  echo "== NO TORCH: pip cannot install $TORCH_SPEC (a CPU build for Python 3.13) from the"
  echo "   indexes configured here. PyPI's Linux torch is the CUDA build only; the CPU builds"
  echo "   live on the PyTorch CPU index, which this machine cannot reach. Running the tests"
  echo "   that need no torch (the others skip or are left out, named below) and Chapter 1."
fi
pip_install --requirement "$work/requirements.txt"
# a wheel built, as Colab's pip would, from a copy of this checkout (setuptools writes build/)
mkdir "$work/checkout"
git ls-files -z --cached --others --exclude-standard |
  tar --null --files-from=- --ignore-failed-read -cf - | tar -xf - -C "$work/checkout"
pip_install --no-deps "$work/checkout"
if [ "$HAVE_TORCH" = 1 ]; then "$PY" -m pip check; fi

cd "$work"   # import the installed companion, not ./src
modules=$("$PY" - "$ROOT/tests" "$HAVE_TORCH" <<'PY'
import importlib.util, sys
from pathlib import Path
tests, have_torch = Path(sys.argv[1]), sys.argv[2] == "1"
sys.path.insert(0, str(tests))
# the book's build tools (Sphinx, docutils) are not part of the package's install, as on
# Colab: the tests of the book's Sphinx extensions and of the built book need them
BOOK_TOOLS = {"docutils", "sphinx", "myst_nb", "jupyter_book", "sphinx_proof"}
for path in sorted(tests.rglob("test_*.py")):
    if not have_torch and path.name == "test_ledger.py":
        print("left out (collects every test file the ledger names, torch's too): "
              f"{path.name}", file=sys.stderr)
        continue
    try:
        spec = importlib.util.spec_from_file_location(path.stem, path)
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
    except ModuleNotFoundError as err:
        top = (err.name or "").split(".")[0]
        if top == "torch" and not have_torch:
            print(f"left out (imports torch): {path.name}", file=sys.stderr)
            continue
        if top in BOOK_TOOLS:
            print(f"left out (imports the book's build tools, {top}): {path.name}",
                  file=sys.stderr)
            continue
    except BaseException:  # pytest.skip at import, or a real error pytest will show
        pass
    print(path)
PY
)
deselect=()
if [ "$HAVE_TORCH" = 1 ]; then
  # this test compares torch with the lock's; here torch is the range's floor on purpose
  deselect=(--deselect tests/book/test_versions.py::test_the_installed_environment_is_the_locked_one)
fi
# shellcheck disable=SC2086
# the fuzz suite is left out here: it checks argument handling, which does not depend on the
# Python version, and it is the slowest part of the unit run (it runs in run_tests.sh)
"$PY" -m pytest $modules -m "not browser and not fuzz" -p no:cacheprovider -q -n "${PYTEST_WORKERS:-2}" \
  --rootdir "$ROOT" -c "$ROOT/pyproject.toml" "${deselect[@]}"

echo "== execute Chapter 1 on Python 3.13"
"$PY" - "$ROOT/notebooks/01_rank_one.py" <<'PY'
import sys
import jupytext
from nbclient import NotebookClient
nb = jupytext.read(sys.argv[1])
NotebookClient(nb, timeout=900, kernel_name="python3").execute()
print(f"executed {sum(c.cell_type == 'code' for c in nb.cells)} code cells of {sys.argv[1]}")
PY
echo "== Python 3.13 check done in $((SECONDS - start)) s (torch: $([ "$HAVE_TORCH" = 1 ] && echo "$TORCH_SPEC" || echo none))"
