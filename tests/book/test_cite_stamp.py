"""book/_ext/cite_stamp.py: the citation made from CITATION.cff and the build stamp, also
for a build without git (an sdist) or without a commit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "book" / "_ext"))
import cite_stamp  # noqa: E402

CFF = {
    "title": "A Book: with a colon",
    "type": "software",
    "version": "1.2",
    "date-released": "2031-02-03",
    "repository-code": "https://example.org/a/book",
    "license": "MIT",
    "authors": [{"family-names": "Noether", "given-names": "Emmy Amalie"}, {"name": "Team X"}],
    "references": [{"type": "article", "title": "On Things", "year": 2030, "journal": "J",
                    "authors": [{"family-names": "Hilbert", "given-names": "David"}]},
                   {"type": "article", "title": "A Preprint", "year": 2029,
                    "notes": "Preprint.", "authors": [{"name": "Someone"}]}],
}


def test_bibtex_names_persons_and_entities_and_each_reference():
    text = cite_stamp.bibtex(CFF)
    assert text.count("@") == 3 and text.count("{") == text.count("}")
    assert text.startswith("@software{noether2031book,")
    assert "author = {Noether, Emmy Amalie and {Team X}}" in text
    assert "@article{hilbert2030things," in text and "journal = {J}" in text
    assert "@misc{someone2029preprint," in text  # no journal: not an @article
    assert "note = {Preprint.}" in text and "note = {License: MIT}" in text
    assert all(len(line) <= 80 for line in text.splitlines())


def test_reference_text_reads_like_the_cff():
    assert cite_stamp.reference_text(CFF) == (
        "Noether, E. A. & Team X (2031). A Book: with a colon (version 1.2) "
        "[Computer software]. https://example.org/a/book")


def test_the_books_own_citation_file_makes_a_citation():
    cff = cite_stamp.read_citation(ROOT)
    assert cff["title"] in cite_stamp.bibtex(cff) and cff["title"] in cite_stamp.reference_text(cff)


def test_a_build_outside_git_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1893456000")  # 2030-01-01
    stamp = cite_stamp.build_stamp(tmp_path)
    assert stamp == {"date": "2030-01-01", "commit": None, "commit_date": None, "dirty": False}
    assert cite_stamp.stamp_text(stamp) == (
        "Built on 2030-01-01 outside a git checkout: no commit recorded.")
    assert "href" not in cite_stamp.stamp_html(stamp, "https://github.com/o/n")
    monkeypatch.setenv("PATH", str(tmp_path))  # no git program at all
    assert cite_stamp.build_stamp(ROOT)["commit"] is None


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def test_a_build_from_git_names_the_commit_and_uncommitted_changes(tmp_path):
    if subprocess.run(["git", "--version"], capture_output=True).returncode != 0:
        pytest.skip("git is not installed")
    _git(tmp_path, "init", "-q")
    (tmp_path / "page.md").write_text("one\n")
    _git(tmp_path, "add", "page.md")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    head = _git(tmp_path, "rev-parse", "HEAD")
    stamp = cite_stamp.build_stamp(tmp_path)
    assert stamp["commit"] == head and not stamp["dirty"]
    text = cite_stamp.stamp_text(stamp)
    assert f"from commit {head[:7]} (" in text and "uncommitted" not in text
    assert f'/commit/{head}">{head[:7]}</a>' in cite_stamp.stamp_html(stamp, "https://github.com/o/n")
    (tmp_path / "page.md").write_text("two\n")
    assert cite_stamp.stamp_text(cite_stamp.build_stamp(tmp_path)).endswith(
        "with uncommitted changes.")
