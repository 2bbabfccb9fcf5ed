"""The whole book as one PDF (Jupyter Book 1's LaTeX builder), and the site's ways to it.

``bash scripts/build_pdf.sh`` runs ``jupyter-book build . --builder pdflatex``, which writes
``_build/latex/<latex.latex_documents.targetname>.pdf`` (``_config.yml``), and copies it
into the site beside ``index.html``. This extension

* in the PDF: puts under every page's title a link to the same page of the published site,
  which is ``https://OWNER.github.io/NAME/`` for ``repository.url`` ``github.com/OWNER/NAME``
  (GitHub Pages; see README.md, "Publishing"); draws SVG figures through ``rsvg-convert``
  into vector PDF (the LaTeX builder takes no SVG; ImageMagick's converter would rasterise
  them and is not installed); and supplies ``bbm.sty``, which sphinx-jupyterbook-latex's
  document class loads for macros the book never uses, when TeX Live lacks it (Debian
  ships it only in the 1.4 GB texlive-fonts-extra), as a one-line stand-in;
* on every HTML page: gives the download menu the whole book ("Book (.pdf)") and renames
  the theme's ".pdf" entry, which prints the page, to "Print this page"; and loads
  ``companion-print.js``, which opens every folded block (proofs, code, the audit trail)
  while the page prints and loads its lazy images first.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlparse

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.transforms.post_transforms.images import ImageConverter
from sphinx.util import logging

logger = logging.getLogger(__name__)

DOWNLOAD_GROUP = "download-buttons"
PRINT_LABEL = "download-pdf-button"  # sphinx-book-theme's window.print() entry
BOOK_PDF_LABEL = "download-book-pdf-button"
BBM_STANDIN = (
    "% Stand-in written by book/_ext/book_pdf.py: jupyterBook.cls loads bbm for \\mathbbm,\n"
    "% which the book does not use; \\mathbb draws the same letters.\n"
    "\\ProvidesPackage{bbm}[2026/12/01 stand-in]\n"
    "\\providecommand{\\mathbbm}{\\mathbb}\n"
)


def pdf_name(app: Sphinx) -> str:
    """The whole-book PDF's file name: latex_documents' target with .pdf."""
    return Path(app.config.latex_documents[0][1]).with_suffix(".pdf").name


def site_url(repository_url: str | None) -> str | None:
    """The GitHub Pages address of a github.com repository, with a trailing slash."""
    if not repository_url:
        return None
    parts = urlparse(repository_url)
    path = [p for p in parts.path.split("/") if p]
    if parts.hostname != "github.com" or len(path) < 2:
        return None
    owner, name = path[0], path[1].removesuffix(".git")
    if name.lower() == f"{owner.lower()}.github.io":
        return f"https://{name.lower()}/"
    return f"https://{owner.lower()}.github.io/{name}/"


# ------------------------------------------------------------------ the PDF


class SvgToPdf(ImageConverter):
    """SVG figures as vector PDF for the LaTeX builder, by librsvg's rsvg-convert."""

    conversion_rules = [("image/svg+xml", "application/pdf")]

    def is_available(self) -> bool:
        return shutil.which("rsvg-convert") is not None

    def convert(self, _from: str, _to: str) -> bool:
        subprocess.run(["rsvg-convert", "--format=pdf", f"--output={_to}", _from], check=True)
        return True


def add_online_link(app: Sphinx, doctree: nodes.document) -> None:
    """Under the page's title, in the PDF only: where the page is on the published site."""
    base = site_url((app.config.html_theme_options or {}).get("repository_url"))
    section = next((n for n in doctree.children if isinstance(n, nodes.section)), None)
    if base is None or section is None or not section.children:
        return
    docname = app.env.docname
    url = base if docname == app.config.root_doc else f"{base}{docname}.html"
    link = nodes.reference("", url, refuri=url)
    only = addnodes.only(expr="latex")
    only += nodes.paragraph("", "", nodes.emphasis("", "Online: "), link,
                            classes=["companion-online"])
    section.insert(1, only)  # after the title


def write_bbm_standin(app: Sphinx) -> None:
    if app.builder.name != "latex":
        return
    found = shutil.which("kpsewhich") and subprocess.run(
        ["kpsewhich", "bbm.sty"], capture_output=True, text=True).stdout.strip()
    if not found:
        Path(app.outdir, "bbm.sty").write_text(BBM_STANDIN, encoding="utf-8")


# ------------------------------------------------------------------ the HTML pages


def update_download_menu(app: Sphinx, pagename, templatename, context, doctree) -> None:
    for group in context.get("header_buttons", []):
        if group.get("label") != DOWNLOAD_GROUP:
            continue
        buttons = group["buttons"]
        for button in buttons:
            if button.get("label") == PRINT_LABEL:
                button.update(text="Print this page", icon="fas fa-print",
                              tooltip="Print this page, every folded proof and block open "
                              "(or save it as a PDF from the print dialog)")
        buttons.insert(0, {
            "type": "link",
            "url": context["pathto"](pdf_name(app), 1),
            "text": "Book (.pdf)",
            "icon": "fas fa-file-pdf",
            "tooltip": "Download the whole book as one PDF (built by LaTeX)",
            "label": BOOK_PDF_LABEL,
        })
        return


def setup(app: Sphinx) -> dict:
    app.add_post_transform(SvgToPdf)
    app.connect("doctree-read", add_online_link)
    app.connect("builder-inited", write_bbm_standin)
    # after sphinx-book-theme builds the menu (501) and pysource adds its .py entry (600)
    app.connect("html-page-context", update_download_menu, priority=605)
    app.add_js_file("companion-print.js")
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
