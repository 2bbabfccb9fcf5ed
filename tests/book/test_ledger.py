"""The claims ledger (book/claims.yml, rendered by book/_ext/claims_ledger.py on
book/ledger.md) names only tests that exist and chapters that are in the book, lists every
claim of the paper, and can never show "reproduced" for a claim whose test is gone."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "book" / "_ext"))
import claims_ledger as ledger  # noqa: E402

# Every claim of the paper (THEORY.md, EXPERIMENTS.md): a row may be added, never dropped.
PAPER_CLAIMS = {
    "thm-a", "thm-a-length-3", "obs-a-prime", "lem-b-mediant", "lem-b-gap-domination",
    "lem-c", "lem-d", "lem-d-prime", "thm-e", "thm-e-generality", "thm-e-long-context",
    "prop-f", "thm-g", "theory-table", "e1-witness", "e1-low-rank-fails",
    "e1-rank-32-solves", "e2-transition", "e2-dense-exact",
}


@pytest.fixture(scope="module")
def claims() -> list[dict]:
    return ledger.load_claims(ROOT)


@pytest.fixture(scope="module")
def chapters() -> set[str]:
    return ledger.toc_docnames(ROOT)


@pytest.fixture(scope="module")
def collected(claims) -> set[str]:
    """Node ids pytest itself collects from every test file the ledger names."""
    files = sorted({ledger.split_nodeid(t)[0] for c in claims for t in c.get("tests") or []})
    files = [f for f in files if (ROOT / f).is_file()]
    if not files:
        return set()
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "-o", "addopts=", *files],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, f"collecting {files} failed:\n{result.stdout}\n{result.stderr}"
    return {line.strip() for line in result.stdout.splitlines() if "::" in line}


def collected_has(collected: set[str], nodeid: str) -> bool:
    return nodeid in collected or any(c.startswith(nodeid + "[") for c in collected)


def test_claims_file_is_well_formed(claims):
    assert not ledger.schema_problems(claims), ledger.schema_problems(claims)


def test_every_claim_of_the_paper_has_a_row(claims):
    missing = PAPER_CLAIMS - {c["id"] for c in claims}
    assert not missing, f"book/claims.yml lost rows: {sorted(missing)}"


def test_every_named_test_exists(claims, collected):
    named = [t for c in claims for t in c.get("tests") or []]
    missing = [t for t in named if not collected_has(collected, t)]
    assert not missing, "book/claims.yml names tests pytest does not collect:\n" + "\n".join(
        missing
    )


def test_the_builds_static_check_agrees_with_pytest(claims, collected):
    for nodeid in [t for c in claims for t in c.get("tests") or []]:
        assert ledger.node_exists_statically(ROOT, nodeid) == collected_has(collected, nodeid), (
            nodeid
        )


def test_every_named_chapter_is_in_the_toc(claims, chapters):
    named = {c["chapter"] for c in claims if c.get("chapter")}
    assert not named - chapters, f"chapters not in _toc.yml: {sorted(named - chapters)}"


def test_non_pending_verdicts_are_backed_and_shown_as_written(claims, chapters, collected):
    for claim in claims:
        shown = ledger.shown_verdict(claim, chapters, lambda t: collected_has(collected, t))
        if claim["verdict"] == "pending":
            assert shown == "pending"
            continue
        assert claim.get("tests"), f"{claim['id']} is {claim['verdict']!r} with no test"
        assert shown.startswith(claim["verdict"]), (claim["id"], shown)


@pytest.mark.parametrize("verdict", ["reproduced", "reproduced with our constant", "differs"])
def test_a_claim_whose_test_is_removed_is_never_shown_as_reproduced(verdict, chapters):
    claim = {
        "id": "x", "claim": "X", "paper": "p", "verdict": verdict, "ours": "7",
        "chapter": sorted(chapters)[0],
        "tests": ["tests/book/test_ledger.py::test_claims_file_is_well_formed",
                  "tests/book/test_ledger.py::test_that_was_removed"],
    }
    exists = lambda t: ledger.node_exists_statically(ROOT, t)  # noqa: E731
    shown = ledger.shown_verdict(claim, chapters, exists)
    assert shown.startswith(
        "pending (unchecked: test missing: tests/book/test_ledger.py::test_that")
    row = ledger.render_markdown([claim], chapters, exists).splitlines()[-1]
    assert f"| {verdict}" not in row and "pending (unchecked" in row
    # with the test back, the verdict is shown as written
    claim["tests"] = claim["tests"][:1]
    assert ledger.shown_verdict(claim, chapters, exists).startswith(verdict)
    # no test at all, or a chapter that left the book, is just as unbacked
    assert ledger.shown_verdict({**claim, "tests": []}, chapters, exists).startswith("pending")
    assert ledger.shown_verdict({**claim, "chapter": "notebooks/99_gone"}, chapters,
                                exists).startswith("pending")


def test_static_check_sees_files_classes_functions_and_parameters(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text(
        "def test_f():\n    pass\n\nclass TestC:\n    def test_m(self):\n        pass\n"
    )
    exists = lambda t: ledger.node_exists_statically(tmp_path, t)  # noqa: E731
    assert exists("tests/test_x.py::test_f")
    assert exists("tests/test_x.py::test_f[1-2]")
    assert exists("tests/test_x.py::TestC::test_m")
    assert not exists("tests/test_x.py::test_m")
    assert not exists("tests/test_x.py::TestC::test_f")
    assert not exists("tests/test_x.py::test_g")
    assert not exists("tests/test_y.py::test_f")
    assert not exists("tests/test_x.py")


def test_schema_problems_are_reported():
    bad = [
        {"id": "a", "claim": "A", "paper": "p", "verdict": "proven"},
        {"id": "a", "claim": "B", "paper": "p", "verdict": "differs"},
        {"id": "c", "claim": "C", "verdict": "pending", "colour": "red"},
    ]
    text = "\n".join(ledger.schema_problems(bad))
    assert "'proven' not one of" in text
    assert "needs 'ours'" in text
    assert "duplicate id" in text
    assert "missing 'paper'" in text
    assert "unknown keys ['colour']" in text


def test_the_ledger_page_renders_the_data_and_is_in_the_book(claims, chapters):
    page = (ROOT / "book" / "ledger.md").read_text(encoding="utf-8")
    assert "```{claims-ledger}" in page, "book/ledger.md must render the ledger directive"
    assert "book/ledger" in chapters, "add '- file: book/ledger' to _toc.yml"
    table = ledger.render_markdown(claims, chapters, lambda t: True).splitlines()
    assert len(table) == 2 + len(claims)
    for line, claim in zip(table[2:], claims, strict=True):
        assert f"(`{claim['id']}`)" in line


def test_a_glued_value_in_a_claim_is_kept_as_written(chapters):
    """Chapter 3's windows are quoted in the ledger by {glue:text}`path::key:s`: the cell
    escaping must not touch the role's content (its path has underscores)."""
    role = "{glue:text}`/notebooks/03_rank_bound.ipynb::window-e1-real:s`"
    claim = {"id": "x", "claim": "X", "paper": "p", "verdict": "pending", "note": f"a_b {role}"}
    row = ledger.render_markdown([claim], chapters, lambda t: True).splitlines()[-1]
    assert role in row and "a\\_b" in row
