"""The whole-book PDF (scripts/build_pdf.sh) holds the book: every page of _toc.yml, every
proof box, every figure, named and numbered as on the site, each page linking back to its
HTML, with the cite section and the build stamp.

The PDF is read with poppler's tools (pdftohtml -xml: its outline, text and links;
pdfimages: its raster images), which scripts/build_pdf.sh installs with TeX Live. The
counts are compared with the sources, not with numbers written here: the proofs are the
``{prf:proof}`` directives of the pages in _toc.yml, the figures their image outputs and
``{figure}`` directives. Without the PDF or poppler the tests skip, except in CI (env var CI
set), where they fail. Run: `pytest tests/book/test_pdf.py` after `bash scripts/build_pdf.sh`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
PDF = ROOT / "_build" / "latex" / (
    CONFIG["latex"]["latex_documents"]["targetname"].removesuffix(".tex") + ".pdf")

sys.path.insert(0, str(ROOT / "book" / "_ext"))
import book_pdf  # noqa: E402
import cite_stamp  # noqa: E402
import paper_names  # noqa: E402


def _unavailable(reason: str):
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; CI is set, so the PDF tests must run")
    pytest.skip(reason)


def toc() -> tuple[str, list[tuple[str, list[str]]]]:
    """The root page and, per part, its chapters' pages (a chapter's sections follow it)."""
    data = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))

    def files(node) -> list[str]:
        found = [node["file"]] if "file" in node else []
        for child in node.get("sections", []):
            found += files(child)
        return found

    parts = [(part.get("caption", ""), [f for ch in part["chapters"] for f in files(ch)])
             for part in data["parts"]]
    return data["root"], parts


def _docname(file: str) -> str:
    return file.removesuffix(".ipynb").removesuffix(".md")


def _source(docname: str) -> Path:
    for suffix in (".py", ".md"):  # a notebook's jupytext source, or a prose page
        if (ROOT / f"{docname}{suffix}").is_file():
            return ROOT / f"{docname}{suffix}"
    raise AssertionError(f"no source for {docname}")


@pytest.fixture(scope="module")
def pdf() -> dict:
    if not PDF.is_file():
        _unavailable(f"no book PDF at {PDF} (run scripts/build_pdf.sh)")
    for tool in ("pdftohtml", "pdfimages"):
        if shutil.which(tool) is None:
            _unavailable(f"{tool} (poppler-utils) is not installed")
    xml = subprocess.run(["pdftohtml", "-xml", "-i", "-q", "-stdout", str(PDF)],
                         capture_output=True, text=True, check=True).stdout
    root = ET.fromstring(xml)
    lines = ["".join(t.itertext()).strip() for t in root.iter("text")]
    images = subprocess.run(["pdfimages", "-list", str(PDF)], capture_output=True, text=True,
                            check=True).stdout.splitlines()[2:]

    def outline(node, depth=0):
        items = []
        for child in node:
            if child.tag == "item":
                items.append((depth, (child.text or "").strip()))
            elif child.tag == "outline":
                items += outline(child, depth + 1)
        return items

    return {
        "pages": len(root.findall("page")),
        "lines": lines,
        "text": " ".join(" ".join(lines).split()),
        "links": {a.get("href") for a in root.iter("a")},
        "outline": outline(root.find("outline")) if root.find("outline") is not None else [],
        "images": [row.split()[2] for row in images if len(row.split()) > 2],
    }


def test_the_readme_links_the_published_pdf():
    """The README's link to the PDF is where the Pages deploy puts it for repository.url."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\((https://[^)\s]+\.pdf)\)", readme)
    assert links == [book_pdf.site_url(CONFIG["repository"]["url"]) + PDF.name], links


def test_every_part_and_chapter_of_the_toc_is_in_the_outline(pdf):
    """The PDF's bookmarks: the parts of _toc.yml in order, and one per chapter (a
    chapter's sections are bookmarks one level down)."""
    data = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    parts = [re.sub(r"^[IVXLC]+ ", "", text) for depth, text in pdf["outline"] if depth == 0]
    assert parts == [part["caption"] for part in data["parts"]], parts
    chapters = [text for depth, text in pdf["outline"] if depth == 1]
    assert len(chapters) == sum(len(part["chapters"]) for part in data["parts"]), chapters


def test_every_page_links_to_its_html(pdf):
    """Under every page's title: the same page on the published site."""
    root, parts = toc()
    base = book_pdf.site_url(CONFIG["repository"]["url"])
    wanted = {base} | {f"{base}{_docname(f)}.html" for _, files in parts for f in files}
    missing = sorted(wanted - pdf["links"])
    assert not missing, f"pages without their online link: {missing}"


def test_chapters_are_numbered_as_on_the_site(pdf):
    """notebooks/NN_topic is Chapter NN (its running footer says so); no other page is a
    numbered chapter, so "Chapter 3" in the text is Chapter 3 of the PDF."""
    _, parts = toc()
    notebooks = {int(m.group(1)) for _, files in parts for f in files
                 if (m := re.match(r"notebooks/(\d\d)_", f))}
    footers = {int(n) for n in re.findall(r"\bChapter (\d+)\. ", pdf["text"])}
    assert footers == notebooks, (sorted(footers), sorted(notebooks))


def test_every_proof_is_in_the_pdf(pdf):
    """As many "Proof" boxes as the pages have proofs, folded ones (dropdowns) included."""
    root, parts = toc()
    pages = [root] + [_docname(f) for _, files in parts for f in files]
    proofs = sum(len(re.findall(r"```\{prf:proof\}", _source(p).read_text(encoding="utf-8")))
                 for p in pages)
    assert proofs > 0
    shown = sum(1 for line in pdf["lines"] if line == "Proof")
    assert shown == proofs, f"{shown} proof boxes in the PDF, {proofs} in the sources"


def test_boxes_and_references_carry_the_sites_names(pdf):
    names = set(paper_names.box_names(ROOT).values())
    missing = sorted(n for n in names if n not in pdf["text"])
    assert not missing, f"box names absent from the PDF: {missing}"
    bare = re.findall(r"\b(?:Theorem|Lemma|Proposition|Corollary|Observation|Definition) "
                      r"\d+\b(?![.\d])", pdf["text"])
    assert not bare, f"sphinx-proof's book-wide numbers in the PDF: {sorted(set(bare))}"


def _figures() -> tuple[int, int]:
    """(figures, raster figures) of the pages in _toc.yml: image outputs of the executed
    notebooks that are not removed, and ``{figure}`` directives of the prose pages."""
    root, parts = toc()
    figures = raster = 0
    for page in [root] + [_docname(f) for _, files in parts for f in files]:
        notebook = ROOT / f"{page}.ipynb"
        if notebook.is_file():
            for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
                tags = cell.get("metadata", {}).get("tags", [])
                if cell["cell_type"] != "code" or {"remove-cell", "remove-output"} & set(tags):
                    continue
                for output in cell.get("outputs", []):
                    kinds = [k for k in output.get("data", {}) if k.startswith("image/")]
                    figures += bool(kinds)
                    raster += bool(kinds) and "image/svg+xml" not in kinds
        else:
            text = (ROOT / f"{page}.md").read_text(encoding="utf-8")
            found = re.findall(r"^(?:```|:::)\{figure\} *(\S+)", text, re.MULTILINE)
            figures += len(found)
            raster += sum(not f.lower().endswith(".svg") for f in found)
    return figures, raster


def test_every_figure_is_in_the_pdf(pdf):
    """Every figure, folded ones (the audit trails) included, is a numbered figure of the
    PDF, and every raster one is an image in it (SVG figures are drawn as vectors)."""
    figures, raster = _figures()
    captions = re.findall(r"\bFig\. (?:\d+\.)?\d+: ", pdf["text"])
    assert len(captions) == figures, f"{len(captions)} figure captions, {figures} figures"
    assert pdf["images"].count("image") == raster, (
        f"{pdf['images'].count('image')} images in the PDF, {raster} raster figures")


def test_the_pdf_has_the_cite_section_and_the_build_stamp(pdf):
    cff = cite_stamp.read_citation(ROOT)
    assert "Cite this book" in pdf["text"]
    key = re.match(r"@\w+\{(\w+),", cite_stamp.bibtex(cff))
    assert key and key.group(1) in pdf["text"], "the BibTeX is not in the PDF"
    assert re.search(r"Built on \d{4}-\d{2}-\d{2} (from commit [0-9a-f]{7}|outside a git)",
                     pdf["text"]), "no build stamp on the title page"
    print(f"{PDF.name}: {pdf['pages']} pages")
