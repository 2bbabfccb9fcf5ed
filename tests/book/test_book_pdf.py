"""book/_ext/book_pdf.py without TeX: the site's address, the LaTeX renaming and numbering,
and the result tables read from their HTML (the whole PDF: tests/book/test_pdf.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "book" / "_ext"))
import book_pdf  # noqa: E402

from companion.book import Table  # noqa: E402


@pytest.mark.parametrize(("repository", "site"), [
    ("https://github.com/Owner/name", "https://owner.github.io/name/"),
    ("https://github.com/owner/name.git", "https://owner.github.io/name/"),
    ("https://github.com/owner/Owner.github.io", "https://owner.github.io/"),
    ("https://gitlab.com/owner/name", None),
    (None, None),
])
def test_site_url_is_the_github_pages_address(repository, site):
    assert book_pdf.site_url(repository) == site


TEX = "\n".join([
    r"\chapter{Orientation page}",
    r"\label{\detokenize{book/claims:top}}\label{\detokenize{book/claims::doc}}",
    r"\chapter{A chapter}",
    r"\label{\detokenize{notebooks/03_rank_bound:a}}\label{\detokenize{notebooks/03_rank_bound::doc}}",
    r"\label{notebooks/03_rank_bound:thm-x}",
    r"\begin{sphinxadmonition}{note}{Theorem 7 (the title)}",
    r"see {\hyperref[\detokenize{notebooks/03_rank_bound:thm-x}]{\sphinxcrossref{Theorem 7}}}",
    r"and {\hyperref[\detokenize{notebooks/03_rank_bound:other}]{\sphinxcrossref{Lemma 2}}}",
    r"\begin{document}",
])


def test_rename_tex_names_boxes_and_numbers_chapters_as_the_site():
    out = book_pdf.rename_tex(TEX, {"thm-x": "Theorem E"})
    assert r"\begin{sphinxadmonition}{note}{Theorem E (the title)}" in out
    assert r"\sphinxcrossref{Theorem E}" in out
    assert r"\sphinxcrossref{Lemma 2}" in out  # a label the names do not know keeps its text
    assert r"\setcounter{secnumdepth}{-1}\chapter{Orientation page}" in out
    assert (r"\setcounter{secnumdepth}{\companionsecnumdepth}\setcounter{chapter}{2}"
            r"\chapter{A chapter}") in out
    assert r"\edef\companionsecnumdepth{\arabic{secnumdepth}}" in out


def test_a_result_table_becomes_a_docutils_table():
    table = Table([{"m": 3, "bound": 0.5}, {"m": 4, "bound": None}], caption="c < d")
    node = book_pdf.companion_table(table._repr_html_())
    assert node is not None and node.next_node(book_pdf.nodes.title).astext() == "c < d"
    cells = [entry.astext() for entry in node.findall(book_pdf.nodes.entry)]
    assert cells == ["m", "bound", "3", "0.5", "4", "\u2013"]
    assert book_pdf.companion_table("<table><tr><td>x</td></tr></table>") is None
