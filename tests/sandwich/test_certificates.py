"""Lower-bound certificate files (companion.sandwich.certificates): the committed ones
re-check from scratch and prove the ranks the book prints, for real features (the sharper
trace lemma) and nonnegative ones (Lemma N); tampered ones, an edited claim text included, are
rejected; `verify-head` checks both kinds; the Kneser matrix of E1's closed box."""

import json
import math
from collections import Counter
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from companion import cli
from companion.bounds.codes import paley_subset
from companion.bounds.rank_bounds import (
    near_orthogonal_rank_bound,
    sharp_rank_bound,
    shifted_trace_bound,
)
from companion.bounds.witness import witness_family
from companion.sandwich.certificates import (
    certificate_claim,
    kneser_box_matrix,
    verify_certificate_file,
    write_certificate_file,
)
from companion.sandwich.matrix import admissibility_violations, exact_rank, ratio_bounds
from companion.sandwich.windows import FAMILIES

ROOT = Path(__file__).resolve().parents[2]
HEADS = ROOT / "results" / "heads"
SMALL_SPEC = {"code": "paley_subset", "q": 11, "a": 11, "b": 3, "n": 3, "eps": "1/2",
              "convention": "bidirectional"}


@pytest.fixture(scope="module", params=("real", "nonnegative"))
def small_file(tmp_path_factory, request):
    folder = tmp_path_factory.mktemp("cert")
    return write_certificate_file(folder / f"small_{request.param}.json", SMALL_SPEC,
                                  request.param)


def _doctor(src: Path, dst: Path, edit) -> Path:
    data = json.loads(src.read_text())
    edit(data)
    dst.write_text(json.dumps(data))
    return dst


@pytest.mark.parametrize("name", FAMILIES)
def test_committed_real_certificate_rechecks_and_matches_the_family(name):
    report = verify_certificate_file(HEADS / f"{name}_lower_bound.json")
    assert report.passed and report.optimal and report.features == "real", report.problems
    spec = FAMILIES[name]
    fam = witness_family(paley_subset(spec["a"], spec["b"], spec["q"]), 3)
    bound = sharp_rank_bound(len(fam.S), dict(Counter(1 / r for r in
                                                      fam.certificate.rho.values())))
    assert (report.value, report.rank) == (bound.value, bound.rank)
    # the sharper lemma is D' without its "- 1", and strictness adds one more when the value
    # is an integer
    assert bound.value == fam.certificate.bound.sharpened_bound + 1
    assert bound.rank == math.floor(bound.value) + 1


@pytest.mark.parametrize("name", ["e1_28", "paley_rows_23"])
def test_committed_nonnegative_certificate_is_lemma_n(name):
    report = verify_certificate_file(HEADS / f"{name}_nonnegative_lower_bound.json")
    assert report.passed and report.features == "nonnegative", report.problems
    bounds = ratio_bounds(witness_family(paley_subset(FAMILIES[name]["a"],
                                                      FAMILIES[name]["b"]), 3))
    lemma = near_orthogonal_rank_bound(bounds.upper)
    assert (report.value, report.rank) == (lemma.beta_squared, lemma.rank)
    # the largest bound on these families is 1/rho(6) = 1/5 on both sides of a pair
    assert report.value == Fraction(1, 25) and report.rank == min(bounds.size, 26)


def test_the_lower_ends_the_book_prints():
    real = {n: verify_certificate_file(HEADS / f"{n}_lower_bound.json").rank for n in FAMILIES}
    assert real == {"e1_28": 22, "paley_rows_23": 19, "paley_code_46": 30}
    nonneg = {n: verify_certificate_file(HEADS / f"{n}_nonnegative_lower_bound.json").rank
              for n in ("e1_28", "paley_rows_23")}
    assert nonneg == {"e1_28": 26, "paley_rows_23": 23}
    # on the 46 words Lemma N proves only 26, below the real-features certificate's 30, so
    # no nonnegative certificate is kept there
    assert not (HEADS / "paley_code_46_nonnegative_lower_bound.json").exists()


def test_small_certificate_passes(small_file):
    report = verify_certificate_file(small_file)
    assert report.passed and report.pairs == 14 * 13
    assert report.optimal is (True if report.features == "real" else None)
    assert "PASS" in report.summary() and report.features in report.summary()


@pytest.mark.parametrize("edit,match", [
    (lambda d: d.update(rank=d["rank"] + 1), "claimed rank"),
    (lambda d: d.update(value=str(Fraction(d["value"]) + Fraction(1, 10**6))), "claimed value"),
    (lambda d: d.update(claim=d["claim"].replace(">= ", ">= 2")), "not what the file certifies"),
    (lambda d: d.update(argument="trust me"), "argument or lemma text"),
    (lambda d: d.update(lemma="Lemma Q"), "argument or lemma text"),
    (lambda d: d["ladders"].pop(), "have no ladder"),
    (lambda d: d["ladders"][0][2].reverse(), "complement"),
    (lambda d: d["ladders"][0].__setitem__(1, 2) or d["ladders"][1].__setitem__(1, 1),
     "complement"),  # the ladders of (0, 1) and (0, 2) swapped
])
def test_tampered_certificates_are_rejected(small_file, tmp_path, edit, match):
    report = verify_certificate_file(_doctor(small_file, tmp_path / "t.json", edit))
    assert not report.passed and any(match in p for p in report.problems), report.problems


def test_a_claim_edited_to_say_more_is_rejected(tmp_path):
    """Issue 36: a certificate whose free-text claim says "rank >= 25" while its numbers prove
    19 no longer passes."""
    src = HEADS / "paley_rows_23_lower_bound.json"
    doc = _doctor(src, tmp_path / "c.json", lambda d: d.update(claim=d["claim"].replace(
        ">= 19", ">= 25")))
    report = verify_certificate_file(doc)
    assert not report.passed and report.rank == 19
    assert certificate_claim("real", Fraction(1, 2), 19) in report.problems[0]


def test_a_shifted_c_changes_the_value(tmp_path):
    src = write_certificate_file(tmp_path / "r.json", SMALL_SPEC, "real")
    report = verify_certificate_file(_doctor(src, tmp_path / "c.json", lambda d: d.update(
        c="1/3")))
    assert not report.passed and any("claimed value" in p for p in report.problems)


def test_a_shortcut_ladder_is_rejected(tmp_path):
    # E1: the ladder of a complementary pair (gap 12, three links of 4) cut to one link of
    # gap 12: the family never tests that link, so it proves nothing
    def edit(d):
        for entry in d["ladders"]:
            if len(entry[2]) > 2:
                entry[2] = [entry[2][0], entry[2][-1]]
                return

    for stem in ("lower_bound", "nonnegative_lower_bound"):
        src = HEADS / f"e1_28_{stem}.json"
        report = verify_certificate_file(_doctor(src, tmp_path / "short.json", edit))
        assert not report.passed and any("lacks" in p for p in report.problems)


@pytest.mark.parametrize("edit,match", [
    (lambda d: d.update(format="companion/rank-lower-bound/v1"), "format"),
    (lambda d: d.pop("ladders"), "lacks the field 'ladders'"),
    (lambda d: d.update(features="signed"), "features must be one of"),
    (lambda d: d.update(remark="r >= 40"), "fields a certificate does not have"),
    (lambda d: d.update(value="0.1"), "exact rational"),
    (lambda d: d["queries"].pop(), "queries must list"),
    (lambda d: d["ladders"].append(d["ladders"][0]), "new ordered pair"),
    (lambda d: d["ladders"][0][2].append(10**6), "key indices"),
    (lambda d: d["keys"].__setitem__(0, "01"), "string of 12"),
    (lambda d: d["family"].update(code="hamming"), "family.code"),
])
def test_malformed_certificates_raise(small_file, tmp_path, edit, match):
    with pytest.raises(ValueError, match=match):
        verify_certificate_file(_doctor(small_file, tmp_path / "bad.json", edit))


def test_write_refuses_an_unknown_feature_class(tmp_path):
    with pytest.raises(ValueError, match="features"):
        write_certificate_file(tmp_path / "x.json", SMALL_SPEC, "signed")


def test_verify_head_checks_heads_and_certificates(small_file, tmp_path, capsys):
    head = HEADS / "paley_rows_23_nonnegative.json"
    cert = HEADS / "paley_rows_23_lower_bound.json"
    nonneg = HEADS / "paley_rows_23_nonnegative_lower_bound.json"
    assert cli.main(["verify-head", str(head), str(cert), str(nonneg)]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 3 and all("PASS" in line for line in out)
    assert "rank 23" in out[0] and "feature rank >= 19" in out[1]
    assert "nonnegative features" in out[2] and "feature rank >= 23" in out[2]
    bad = _doctor(small_file, tmp_path / "bad.json", lambda d: d.update(rank=d["rank"] + 1))
    broken = _doctor(small_file, tmp_path / "broken.json", lambda d: d.pop("keys"))
    assert cli.main(["verify-head", str(small_file), str(bad), str(broken)]) == 2
    captured = capsys.readouterr()
    assert len(captured.out.strip().splitlines()) == 1
    err = captured.err.strip().splitlines()
    assert [line.split(":")[0] for line in err] == [str(bad), str(broken)]


def test_kneser_matrix_reaches_the_closed_box_value_on_e1():
    spec = FAMILIES["e1_28"]
    bounds = ratio_bounds(witness_family(paley_subset(spec["a"], spec["b"], spec["q"]), 3))
    M = kneser_box_matrix(bounds)
    N = bounds.size
    off = [(x, y) for x in range(N) for y in range(N) if x != y]
    assert all(M[x, x] == 1 for x in range(N))
    assert all(0 <= M[x, y] <= bounds.upper[x, y] for x, y in off)  # the closed box
    assert exact_rank(M.tolist()) == 21
    assert shifted_trace_bound(M.tolist()) == (21, Fraction(1, 10))  # equality in the lemma
    # ... but it is not admissible: its entries 1/5 reach bounds a head must stay below
    problems = admissibility_violations(M, bounds)
    assert sum(">= 1/rho = 1/5" in p for p in problems) == sum(M[x, y] > 0 for x, y in off)
    # shrinking the entries below 1/5 (into the open box) gives full rank at once
    A = (M - np.eye(N, dtype=object)) * 5
    for s in (Fraction(1, 5) - Fraction(1, 10**6), Fraction(1, 6)):
        assert exact_rank((np.eye(N, dtype=object) + s * A).tolist()) == N
    with pytest.raises(ValueError, match="C\\(n, 2\\)"):
        kneser_box_matrix(ratio_bounds(witness_family(paley_subset(23, 0, 23), 3)))
