"""The claims ledger (book/claims.yml, rendered by book/_ext/claims_ledger.py on
book/ledger.md) names only tests that exist and chapters that are in the book, lists every
claim of the paper, can never show "reproduced" for a claim whose test is gone, uses one closed
vocabulary of verdicts, links each row to its statement, and states E2 with the numbers of the
committed study; the figures carry the proof boxes' numbers and the ledger's verdicts."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "book" / "_ext"))
import claims_ledger as ledger  # noqa: E402
import paper_names  # noqa: E402

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
        assert shown == claim["verdict"], (claim["id"], shown)


@pytest.mark.parametrize("verdict", ["reproduced", "reproduced with our constant", "differs"])
def test_a_claim_whose_test_is_removed_is_never_shown_as_reproduced(verdict, chapters):
    claim = {
        "id": "x", "claim": "X", "paper": "p", "verdict": verdict, "ours": "7",
        "chapter": sorted(chapters)[0],
        "tests": ["tests/book/test_ledger.py::test_claims_file_is_well_formed",
                  "tests/book/test_ledger.py::test_that_was_removed"],
    }
    exists = lambda t: ledger.node_exists_statically(ROOT, t)  # noqa: E731
    assert ledger.shown_verdict(claim, chapters, exists) == "pending"
    assert ledger.unchecked_reasons(claim, chapters, exists) == [
        "test missing: tests/book/test_ledger.py::test_that_was_removed"]
    row = ledger.render_section([claim], "paper", chapters, exists)
    assert "{ledger-verdict}`x`" in row and "Shown as pending, unchecked:** test missing" in row
    assert ledger.counts([claim], chapters, exists)["paper"] == {"pending": 1}
    # with the test back, the verdict is shown as written
    claim["tests"] = claim["tests"][:1]
    assert ledger.shown_verdict(claim, chapters, exists) == verdict
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
    assert "book/ledger" in chapters, "add '- file: book/ledger' to _toc.yml"
    # the counts first, then each section, then what the verdicts mean
    order = [page.index("```{claims-ledger-counts}")] + [
        page.index(f"```{{claims-ledger}}\n:section: {s}\n") for s in ledger.SECTIONS] + [
        page.index("```{verdict-vocabulary}")]
    assert order == sorted(order), "book/ledger.md: counts, sections, vocabulary, in order"
    text = ledger.render_markdown(claims, chapters, lambda t: True)
    rows = re.findall(r"^:name: claim-(.+)$", text, flags=re.MULTILINE)
    assert rows == [c["id"] for s in ledger.SECTIONS for c in claims
                    if ledger.section_of(c) == s]  # every claim once, the paper's first
    assert [ledger.section_of(c) for c in claims].count("paper") >= len(PAPER_CLAIMS) - 1


def test_the_vocabulary_is_closed_and_every_row_uses_it(claims):
    assert {"reproduced", "reproduced with our constant", "reproduced on our family",
            "differs", "not reproduced", "open", "beyond the paper"} <= set(ledger.VERDICTS)
    assert {c["verdict"] for c in claims} <= set(ledger.VERDICTS)
    assert all(len(m.split()) >= 8 for m in ledger.VOCABULARY.values())  # defined in words
    # the protocols' labels are the only other verdict-like words, and their own set
    assert "refuted at convergence" in ledger.PROTOCOL_LABELS
    assert "refuted at convergence" not in ledger.VERDICTS
    counted = ledger.counts(claims, ledger.toc_docnames(ROOT), lambda t: True)
    assert sum(sum(c.values()) for c in counted.values()) == len(claims)
    assert set(counted["open"]) == {"open"} and set(counted["beyond"]) == {"beyond the paper"}


#: Where a row's text may name a prf label or a claim id: inside a role or a code span.
_ROLE_OR_CODE = re.compile(r"\{[\w:-]+\}`[^`]+`|`[^`]+`")
_LABEL = re.compile(r"\b(?:thm|lem|cor|prop|obs|def|ex)-[a-z0-9]+(?:-[a-z0-9]+)*\b")
_ASCII_MATHS = re.compile(r"<=|>=|\b\w_\w|\brho\b|\bsum_|\^[0-9{]")


def test_rows_show_no_raw_labels_and_no_ascii_maths(claims):
    ids = {c["id"] for c in claims}
    problems = []
    for claim in claims:
        for key in ("claim", "paper", "ours", "note"):
            text = " ".join(str(claim.get(key, "")).split())
            plain = re.sub(r"\$[^$]+\$", "§", _ROLE_OR_CODE.sub("§", text))
            raw = set(_LABEL.findall(plain)) | {i for i in ids if re.search(
                rf"(?<![\w-]){re.escape(i)}(?![\w-])", plain) and "-" in i}
            if raw:
                problems.append(f"{claim['id']}.{key}: raw labels {sorted(raw)}")
            if _ASCII_MATHS.search(plain):
                problems.append(f"{claim['id']}.{key}: maths outside $...$: "
                                f"{_ASCII_MATHS.search(plain).group(0)!r}")
    assert not problems, "\n".join(problems)


def test_every_row_links_the_box_that_states_it(claims):
    """Every result the paper states (Theorem A to Theorem G) has a row of that name, which
    links the box the book names so (Theorem E to Theorem E, not to its corollary); a row of
    a part of a result (Theorem A, at length 3) may link the companion's box that states it.
    Every proof label is a box of a chapter."""
    names = paper_names.box_names(ROOT)
    for claim in claims:
        if claim.get("proof"):
            assert claim["proof"] in names, (claim["id"], claim["proof"])
    for name in paper_names.PAPER_NAMES.values():
        rows = [c for c in claims if c["claim"] == name or c["claim"].startswith(name + ",")]
        linked = [c["id"] for c in rows if names.get(c.get("proof")) == name]
        assert linked, f"no ledger row of {name} links the box {name}: {rows}"
        for row in rows:
            if row["claim"] == name:
                assert names.get(row.get("proof")) == name, (
                    f"{row['id']} ({name}) links {names.get(row.get('proof'))}")


def test_proof_index_titles_set_their_maths_as_text():
    titles = [title for *_, title in paper_names._boxes(ROOT)]
    assert any("$" in t for t in titles), "no title with maths: the check checks nothing"
    for title in titles:
        text = paper_names.plain_maths(title)
        assert "$" not in text and "\\" not in text, (title, text)
    assert paper_names.plain_maths("Below $\\beta = 1$ ($n \\leq 15$)") == "Below β = 1 (n ≤ 15)"
    with pytest.raises(ValueError, match="as text"):
        paper_names.plain_maths("$\\frac{1}{2}$")


# ---------------------------------------------------------------- figures


def _svg_description(path: Path) -> dict:
    root = ElementTree.parse(path).getroot()
    found = [e.text for e in root.iter() if e.tag.endswith("}description")]
    assert found, f"{path.name}: no description in its metadata (redraw it)"
    return json.loads(found[0])


def test_the_figures_carry_the_books_numbers_and_verdicts(claims):
    """The headline figure's panel titles are its claims' ledger verdicts and its legend
    cites the corollary by the number the proof boxes have; the roadmap likewise. The drawing
    scripts read both at drawing time and record them: redraw a figure when this fails."""
    from PIL import Image

    names = paper_names.box_names(ROOT)
    by_id = {c["id"]: c for c in claims}
    head = _svg_description(ROOT / "book" / "figures" / "headline.svg")
    assert head["verdicts"] == {i: by_id[i]["verdict"] for i in head["verdicts"]}
    assert set(head["verdicts"]) == {"thm-e", "e2-transition"}
    assert head["names"] == {label: names[label] for label in head["names"]}
    roadmap = json.loads(Image.open(ROOT / "book" / "figures" / "roadmap.png").info[
        "Description"])
    assert roadmap["names"] == {label: names[label] for label in roadmap["names"]}
    assert {"lem-concatenation", "cor-every-width"} <= set(roadmap["names"])


# ---------------------------------------------------------------- E2 as measured


def _and(values) -> str:
    values = [str(v) for v in values]
    return ", ".join(values[:-1]) + " and " + values[-1]


def test_the_e2_rows_state_the_committed_study(claims):
    """The E2 rows say what results/e2_study/ holds: r* at 0.9 with its intervals, the widths
    of the climbs, the missing failing regime, the dense counts and where convergence at the
    checkpoint fails."""
    from companion.experiments.e2.rule import checkpoint_convergence

    study = ROOT / "results" / "e2_study"
    summary = json.loads((study / "e2_study_summary.json").read_text())
    rows = {c["id"]: c for c in claims}
    transition, dense = rows["e2-transition"], rows["e2-dense-exact"]
    text = " ".join(f"{transition['ours']} {transition['note']}".split())
    assert transition["verdict"] == "not reproduced"
    for arm, (kind, test) in summary["headlines"].items():
        fam = summary["arms"][arm][kind][test]
        lines = fam["per_size"]
        assert "{rule-label}`" + fam["verdict"] + "`" in text
        assert fam["verdict"] in ledger.PROTOCOL_LABELS
        assert " → ".join(str(s["r_star"]["0.9"]) for s in lines) in text, arm
        widths = [int(s["relative_width"]) for s in lines]
        assert f"over {_and(widths)} doublings" in text, (arm, widths)
        dense_exact = [sum(d >= summary["dense_exact_level"] for d in s["dense"])
                       for s in lines]
        if arm == "A":
            intervals = ", ".join("[" + ", ".join(f"{2 ** v:g}" for v in
                                                  s["interval_log2"]["0.9"]) + "]"
                                  for s in lines)
            assert f"95 % intervals {intervals}" in text
            rank_one = [s["median"][0] for s in lines]
            assert f"rank 1 already solves {min(rank_one):.2f}–{max(rank_one):.2f}" in text
            assert all(s["r50"] is None for s in lines)  # hence no absolute step can pass
            assert dense_exact == [9, 9, 9, 9] and "9 of 9 replicates at every width" in (
                dense["ours"])
        else:
            assert f"({', '.join(map(str, dense_exact))} of 9 replicates)" in text
            assert f"{', '.join(map(str, dense_exact))} of 9 at P = 14, 30, 62" in " ".join(
                dense["ours"].split())
    mlp = summary["arms"]["A"]["mlp"]["uniform"]["per_size"]
    assert (f"on {', '.join(str(sum(d >= 0.99 for d in s['dense'])) for s in mlp)} of 9 "
            "with MLP maps") in " ".join(dense["ours"].split())
    # the pages that state E2 state the same numbers (chapter 7, the claims page, the index)
    head = summary["arms"]["A"][summary["headlines"]["A"][0]][summary["headlines"]["A"][1]]
    ladder = " \\to ".join(str(s["r_star"]["0.9"]) for s in head["per_size"])
    intervals = ", ".join("$[" + ", ".join(f"{2 ** v:g}" for v in s["interval_log2"]["0.9"])
                          + "]$" for s in head["per_size"])
    for page in ("book/index.md", "book/claims.md", "notebooks/07_ood_scaling.py"):
        words = " ".join(re.sub(r"^# ?", "", line) for line in
                         (ROOT / page).read_text(encoding="utf-8").splitlines()).split()
        stated = " ".join(words)
        assert f"r^* = {ladder}" in stated and intervals in stated, page
        assert "8 \\to 64 \\to" not in stated or page.startswith("notebooks"), page  # earlier
    # convergence judged at the checkpoint (companion.experiments.e2.rule), arm A's headline
    run = json.loads((study / f"e2_study_A_{summary['headlines']['A'][0]}.json").read_text())
    points = checkpoint_convergence(run)
    flags = [(m, r) for m, g in points.items() for r, p in g.items() if r != "dense"]
    missing = [(m, r) for m, r in flags if not points[m][r]["converged"]]
    assert f"holds at {len(flags) - len(missing)} of the {len(flags)} points" in text
    assert missing == [(6, 1), (6, 2)] and "(not at m = 6, r = 1 and 2)" in text


def test_a_glued_value_in_a_claim_is_kept_as_written(chapters):
    """Chapter 3's windows are quoted in the ledger by {glue:text}`path::key:s`: the
    escaping must not touch the role's content (its path has underscores)."""
    role = "{glue:text}`/notebooks/03_rank_bound.ipynb::window-e1-real:s`"
    claim = {"id": "x", "claim": "X", "paper": "p", "verdict": "pending", "note": f"a_b {role}"}
    text = ledger.render_markdown([claim], chapters, lambda t: True)
    assert role in text and "a\\_b" in text
