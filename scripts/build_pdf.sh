#!/usr/bin/env bash
# Build the whole book as one PDF with Jupyter Book's LaTeX builder (xelatex):
# _build/latex/<latex.latex_documents.targetname>.pdf (_config.yml), copied beside the site's
# index.html when the site is built (every page's download menu links it there).
#
# The outputs are those of the execution cache: after scripts/build_book.sh they are that
# build's fresh ones; a chapter the cache lacks (none built yet, or its source changed) is
# executed first, every chapter in parallel (scripts/prime_book_cache.py).
# Installs Debian's TeX Live and the tools the build and tests/book/test_pdf.py use when one
# is absent (needs root or sudo, and apt), like scripts/install_browser.sh: about 400 MB.
# Warnings are errors, as for the HTML; a LaTeX error stops at once and shows its log.
set -euo pipefail
cd "$(dirname "$0")/.."

# xelatex, latexmk; sphinx-jupyterbook-latex's class (texlive-latex-extra: tikz, pgfplots;
# texlive-fonts-recommended: rsfs); Sphinx's fonts for xelatex (FreeSerif etc.) and the maths
# font (Latin Modern Math); rsvg-convert for SVG figures; make (Sphinx's LaTeX Makefile);
# pdfinfo / pdftotext / pdftohtml / pdfimages for the page count and the test
PACKAGES="latexmk texlive-xetex texlive-latex-extra texlive-fonts-recommended fonts-freefont-otf
  fonts-lmodern librsvg2-bin make poppler-utils"
missing=""
for tool in xelatex latexmk rsvg-convert make pdftohtml kpsewhich; do
  command -v "$tool" >/dev/null 2>&1 || missing="$missing $tool"
done
if [ -z "$missing" ]; then
  for file in FreeSerif.otf latinmodern-math.otf rsfs10.tfm pgfplots.sty; do
    kpsewhich "$file" >/dev/null 2>&1 || missing="$missing $file"
  done
fi
if [ -n "$missing" ]; then
  echo "installing TeX Live (missing:$missing)"
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  # shellcheck disable=SC2086
  $SUDO apt-get install -y -qq --no-install-recommends $PACKAGES >/dev/null
fi

bash scripts/setup_env.sh
export PYTHONHASHSEED=0 OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
if [ ! -d _build/.jupyter_cache ]; then
  .venv/bin/python scripts/prime_book_cache.py
fi
# a stale .tex of another name would be built too (the Makefile builds every *.tex)
rm -rf _build/latex
export LATEXOPTS="-interaction=nonstopmode -halt-on-error -file-line-error"
export LATEXMKOPTS="-silent"
if ! .venv/bin/jupyter-book build . --builder pdflatex -W -n --keep-going; then
  for log in _build/latex/*.log; do
    [ -f "$log" ] && { echo "== the end of $log:"; tail -n 40 "$log"; }
  done
  exit 1
fi
name=$(.venv/bin/python -c 'import yaml; c = yaml.safe_load(open("_config.yml"))
print(c["latex"]["latex_documents"]["targetname"].removesuffix(".tex") + ".pdf")')
pdf="_build/latex/$name"
[ -f "$pdf" ] || { echo "no $pdf was written" >&2; exit 1; }
if [ -d _build/html ]; then
  cp "$pdf" "_build/html/$name"
  echo "copied into the site: _build/html/$name"
fi
echo "book PDF built: $pdf ($(pdfinfo "$pdf" | awk '/^Pages:/ {print $2}') pages)"
