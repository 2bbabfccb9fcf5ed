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
* makes the PDF read like the site: proof boxes titled "Proof" (sphinx-proof leaves their
  LaTeX title empty); boxes and references named as on the site (Theorem A, Lemma 3.2:
  book/_ext/paper_names.py), not sphinx-proof's book-wide numbers; the chapters numbered
  as the site numbers them (notebooks/NN_topic is Chapter NN; the orientation and back
  matter pages are unnumbered), so "Chapter 3" in the text is Chapter 3 of the PDF; and
  long tables (more than 30 rows, which LaTeX sets as a longtable) given column widths
  from their contents, where Sphinx would give them unbreakable columns wider than the page;
  result tables (companion.book.Table, HTML on the site) set as LaTeX tables with their
  captions instead of their aligned-text form, which wraps into noise at the page's width;
  a ``<br>`` in a table cell (the ledger) breaks the line, as on the site; and the cells
  the site folds whole (``hide-cell``: the audit trails) print their outputs, tables and
  figures, with their code left out as for ``hide-input`` (sphinx-jupyterbook-latex would
  leave the whole cell out);
* on every HTML page: gives the download menu the whole book ("Book (.pdf)") and renames
  the theme's ".pdf" entry, which prints the page, to "Print this page"; and loads
  ``companion-print.js``, which opens every folded block (proofs, code, the audit trail)
  while the page prints and loads its lazy images first.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlparse

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.transforms.post_transforms.images import ImageConverter
from sphinx.util import logging

sys.path.insert(0, str(Path(__file__).parent))
import paper_names  # noqa: E402  (book/_ext)

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


class _TableParser(HTMLParser):
    """The caption, head and rows of one ``companion.book.Table`` (its ``_repr_html_``)."""

    def __init__(self):
        super().__init__()
        self.caption, self.head, self.rows, self._cell, self._where = "", [], [], None, ""

    def handle_starttag(self, tag, attrs):
        if tag in ("caption", "thead", "tbody"):
            self._where = tag
        elif tag == "tr" and self._where == "tbody":
            self.rows.append([])
        elif tag in ("th", "td"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("th", "td") and self._cell is not None:
            text = "".join(self._cell).strip()
            (self.head if self._where == "thead" else self.rows[-1]).append(text)
            self._cell = None
        elif tag == "caption":
            self._where = ""

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)
        elif self._where == "caption":
            self.caption += data


def companion_table(html_text: str) -> nodes.table | None:
    """A docutils table for the HTML of a ``companion.book.Table``; None for other HTML."""
    if not html_text.lstrip().startswith('<table class="companion-table">'):
        return None
    parsed = _TableParser()
    parsed.feed(html_text)
    width = len(parsed.head)
    if not width or any(len(row) != width for row in parsed.rows):
        return None
    table = nodes.table(classes=["companion-table"])
    if parsed.caption.strip():
        table += nodes.title(text=parsed.caption.strip())
    group = nodes.tgroup(cols=width)
    table += group
    for _ in range(width):
        group += nodes.colspec(colwidth=1)

    def row(cells):
        line = nodes.row()
        for cell in cells:
            line += nodes.entry("", nodes.paragraph(text=cell))
        return line

    group += nodes.thead("", row(parsed.head))
    body = nodes.tbody()
    for cells in parsed.rows:
        body += row(cells)
    group += body
    return table


class ResultTables(SphinxPostTransform):
    """In the PDF, a notebook output that is a result table becomes a LaTeX table. Runs
    before myst-nb picks each output's form (its SelectMimeType, priority 4), which for
    LaTeX would pick the aligned text."""

    builders = ("latex",)
    default_priority = 3

    def run(self, **kwargs) -> None:
        for bundle in list(self.document.findall(
                lambda n: isinstance(n, nodes.container)
                and n.get("nb_element") == "mime_bundle")):
            for form in bundle.children:
                raw = form.next_node(nodes.raw) if form.get("mime_type") == "text/html" else None
                table = raw is not None and companion_table(raw.astext())
                if table:
                    bundle.replace_self(table)
                    break


class PrintFoldedOutputs(SphinxPostTransform):
    """A ``hide-cell`` cell prints as a ``hide-input`` one: its output without its code.
    Before sphinx-jupyterbook-latex drops hidden parts (its MystNbPostTransform, 400)."""

    builders = ("latex",)
    default_priority = 390

    def run(self, **kwargs) -> None:
        for cell in self.document.findall(nodes.container):
            if "tag_hide-cell" in cell["classes"]:
                cell["classes"] = [c for c in cell["classes"] if c != "tag_hide-cell"]
                cell["classes"].append("tag_hide-input")


class ReadLikeTheSite(SphinxPostTransform):
    """In the PDF: proof boxes titled "Proof" (and a dropdown "Proof" around one untitled),
    long tables with column widths, code in tables breakable, ``<br>`` a line break."""

    builders = ("latex",)
    default_priority = 900

    def run(self, **kwargs) -> None:
        from sphinx_proof.nodes import proof_node

        for node in list(self.document.findall(proof_node)):
            box = node.children[0] if node.children else None
            if not isinstance(box, nodes.admonition) or box.next_node(nodes.title):
                continue
            first = box.next_node(nodes.Text)
            if first is not None and first.astext().startswith("Proof. "):
                first.parent.replace(first, nodes.Text(first.astext()[len("Proof. "):]))
            box.insert(0, nodes.title("", "Proof"))
            fold = node.parent  # a dropdown "Proof" around it: its title would say it twice
            if (isinstance(fold, nodes.container) and fold.get("design_component") == "dropdown"
                    and isinstance(fold.children[0], nodes.rubric)
                    and fold.children[0].astext().strip() == "Proof"):
                fold.remove(fold.children[0])
        for table in list(self.document.findall(nodes.table)):
            give_column_widths(table)
            allow_code_breaks(table)
        for raw in list(self.document.findall(nodes.raw)):
            if "html" in raw.get("format", "").split() and re.fullmatch(
                    r"\s*<br\s*/?>\s*", raw.astext()):
                raw.replace_self(nodes.raw("", r"\newline{}", format="latex"))


def give_column_widths(table: nodes.table) -> None:
    """A table LaTeX sets as a longtable (more than 30 rows) and that has no column widths
    gets ragged-right columns as wide as the square root of their mean text length says
    (at least 10 % each)."""
    if "colwidths-given" in table["classes"]:
        return
    group = table.next_node(nodes.tgroup)
    if group is None:
        return
    rows = list(group.findall(nodes.row))
    specs = [c for c in group.children if isinstance(c, nodes.colspec)]
    if len(rows) <= 30 or not specs or any(
            len(row.children) != len(specs) for row in rows):
        return  # short (tabulary fits it), or cells spanning columns: left to Sphinx
    weights = [(sum(len(row.children[j].astext()) for row in rows) / len(rows)) ** 0.5
               for j in range(len(specs))]
    shares = [max(w / sum(weights), 0.10) for w in weights]
    shares = [s / sum(shares) for s in shares]
    spec = "".join(r">{\raggedright\arraybackslash}"
                   rf"p{{\dimexpr {s:.3f}\linewidth-2\tabcolsep\relax}}" for s in shares)
    table.parent.insert(table.parent.index(table), addnodes.tabular_col_spec(spec=spec))


def allow_code_breaks(table: nodes.table) -> None:
    """Code in a table's cells may break after / . : _ - (a long path or test id)."""
    for literal in list(table.findall(nodes.literal)):
        text = literal.astext()
        pieces = [p for p in re.split(r"(?<=[/.:_-])", text) if p]
        if len(pieces) > 1:
            for child in list(literal.children):
                literal.remove(child)
            for piece in pieces:
                literal += nodes.Text(piece)
                literal += nodes.raw("", r"\allowbreak{}", format="latex")


_BOX_CAPTION = re.compile(
    r"(\\label\{[^}]*:(?P<label>[\w-]+)\}\n\\begin\{sphinxadmonition\}\{note\}\{)"
    r"(?:[A-Z][a-z]+) [0-9.]+")
_BOX_REF = re.compile(
    r"(\\hyperref\[\\detokenize\{[^}]*:(?P<label>[\w-]+)\}\]\{\\sphinxcrossref\{)"
    r"(?:[A-Z][a-z]+) [0-9.]+(?=\}\})")
_CHAPTER = re.compile(r"^\\chapter\{.*\}\n\\label\{\\detokenize\{(?P<doc>[^}:]+):",
                      re.MULTILINE)
_NOTEBOOK = re.compile(r"notebooks/(\d\d)_")


def rename_tex(tex: str, names: dict[str, str]) -> str:
    """The book's LaTeX with boxes and references named as on the site, and its chapters
    numbered as the site numbers them (see the module's docstring)."""

    def name(match):
        new = names.get(match.group("label"))
        return match.group(1) + new if new else match.group(0)

    def chapter(match):
        number = _NOTEBOOK.match(match.group("doc"))
        if number is None:
            return "\\setcounter{secnumdepth}{-1}" + match.group(0)
        return (f"\\setcounter{{secnumdepth}}{{\\companionsecnumdepth}}"
                f"\\setcounter{{chapter}}{{{int(number.group(1)) - 1}}}" + match.group(0))

    tex = _BOX_REF.sub(name, _BOX_CAPTION.sub(name, tex))
    tex = _CHAPTER.sub(chapter, tex)
    return tex.replace("\\begin{document}", "\\edef\\companionsecnumdepth"
                       "{\\arabic{secnumdepth}}\n\\begin{document}", 1)


def name_like_the_site(app: Sphinx, exception) -> None:
    if exception is not None or app.builder.name != "latex":
        return
    names = paper_names.box_names(Path(app.srcdir))
    for tex in Path(app.outdir).glob("*.tex"):
        text = tex.read_text(encoding="utf-8")
        tex.write_text(rename_tex(text, names), encoding="utf-8")


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
    app.add_post_transform(ResultTables)
    app.add_post_transform(PrintFoldedOutputs)
    app.add_post_transform(ReadLikeTheSite)
    app.connect("build-finished", name_like_the_site)
    app.connect("doctree-read", add_online_link)
    app.connect("builder-inited", write_bbm_standin)
    # after sphinx-book-theme builds the menu (501) and pysource adds its .py entry (600)
    app.connect("html-page-context", update_download_menu, priority=605)
    app.add_js_file("companion-print.js")
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
