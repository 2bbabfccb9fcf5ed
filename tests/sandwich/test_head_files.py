"""Head files (companion.sandwich.head_files): every committed head re-verifies from
scratch, doctored files are rejected, malformed files raise ValueError naming the field."""

import json
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from companion import cli
from companion.bounds.codes import paley_subset
from companion.bounds.witness import witness_family
from companion.sandwich.certificates import main
from companion.sandwich.head_files import (
    parse_rational,
    read_head_claims,
    verify_head_file,
    write_head_file,
)
from companion.sandwich.heads import build_exact_head
from companion.sandwich.matrix import indicator_factors, ratio_bounds, spread_factors

ROOT = Path(__file__).resolve().parents[2]
HEADS = sorted(p for p in (ROOT / "results" / "heads").glob("*.json")
               if not p.stem.endswith("_lower_bound"))  # certificates: test_certificates.py
SMALL_SPEC = {"code": "paley_subset", "q": 11, "a": 11, "b": 3, "n": 3, "eps": "1/2",
              "convention": "bidirectional"}


@pytest.fixture(scope="module")
def small_file(tmp_path_factory):
    fam = witness_family(paley_subset(11, 3, 11), 3, Fraction(1, 2))
    head = build_exact_head(fam, *spread_factors(ratio_bounds(fam)))
    path = tmp_path_factory.mktemp("heads") / "small.json"
    write_head_file(path, head, SMALL_SPEC, "nonnegative", "test: one-query spread")
    return path


def _doctor(src: Path, dst: Path, edit) -> Path:
    data = json.loads(src.read_text())
    edit(data)
    dst.write_text(json.dumps(data))
    return dst


def test_the_six_heads_are_committed():
    names = {p.stem for p in HEADS}
    for fam in ("e1_28", "paley_rows_23", "paley_code_46"):
        assert {f"{fam}_signed", f"{fam}_nonnegative"} <= names
    assert all(p.stat().st_size < 200_000 for p in HEADS)


@pytest.mark.parametrize("path", HEADS, ids=[p.stem for p in HEADS])
def test_committed_head_reverifies(path):
    report = verify_head_file(path)
    assert report.passed, report.problems
    assert report.max_error < Fraction(1, 2) and report.min_weight >= 0
    assert report.kernel_rank == report.rank
    fam = witness_family(paley_subset(report.family["a"], report.family["b"], 23), 3,
                         Fraction(1, 2))
    assert report.inputs == len(fam) and report.size == len(fam.S)
    # Theorem E + Lemma D' would be contradicted by an exact head below the bound
    assert report.rank >= fam.certificate.bound.rank


def test_small_file_passes(small_file):
    report = verify_head_file(small_file)
    assert report.passed and report.rank == 13 and report.kernel_rank == 13
    assert report.variant == "nonnegative" and report.inputs == 560
    assert "PASS" in report.summary()


def test_doctored_files_are_rejected(small_file, tmp_path):
    # one key feature raised: a ratio crosses its bound, the head errs by >= 1/2
    def raise_key(d):
        d["keys"][0]["features"][0] = "1000"

    r = verify_head_file(_doctor(small_file, tmp_path / "a.json", raise_key))
    assert not r.passed and any(">= 1/2" in p or "claimed" in p for p in r.problems)

    # the claimed max error changed by one part in a billion
    def claim(d):
        d["max_error"] = str(parse_rational(d["max_error"], "x") + Fraction(1, 10**9))

    r = verify_head_file(_doctor(small_file, tmp_path / "b.json", claim))
    assert not r.passed and any("claimed max error" in p for p in r.problems)

    # a negative feature in a file that claims nonnegative features
    def negative(d):
        d["keys"][1]["features"][1] = "-1/1000000"

    r = verify_head_file(_doctor(small_file, tmp_path / "c.json", negative))
    assert not r.passed and any("negative" in p for p in r.problems)

    # a weight driven negative
    def neg_weight(d):
        d["variant"] = "signed"
        d["keys"][0]["features"] = ["-5"] * len(d["keys"][0]["features"])

    r = verify_head_file(_doctor(small_file, tmp_path / "d.json", neg_weight))
    assert not r.passed and any("weight is negative" in p for p in r.problems)

    # a key token dropped
    r = verify_head_file(_doctor(small_file, tmp_path / "e.json", lambda d: d["keys"].pop()))
    assert not r.passed and any("no features" in p for p in r.problems)


def test_doctored_committed_head_is_rejected(tmp_path):
    src = ROOT / "results" / "heads" / "e1_28_signed.json"

    def edit(d):
        feats = d["keys"][0]["features"]
        feats[0] = str(parse_rational(feats[0], "x") + 1)

    report = verify_head_file(_doctor(src, tmp_path / "doctored.json", edit))
    assert not report.passed


@pytest.mark.parametrize("edit,match", [
    (lambda d: d.pop("queries"), "lacks the field 'queries'"),
    (lambda d: d.update(format="other"), "format"),
    (lambda d: d.update(variant="positive"), "variant"),
    (lambda d: d.update(rank=0), "rank must be an int >= 1"),
    (lambda d: d.update(max_error="0.4"), "max_error must be an exact rational"),
    (lambda d: d["keys"][0]["features"].__setitem__(0, "1/0"), "exact rational"),
    (lambda d: d["keys"][0].update(token="0101"), "string of 12 characters"),
    (lambda d: d["keys"][0]["features"].pop(), "list of 13 rationals"),
    (lambda d: d["queries"].pop(), "all 14 queries"),
    (lambda d: d["family"].update(code="hamming"), "family.code"),
    (lambda d: d["family"].update(eps="2"), "eps must lie in"),
    (lambda d: d["family"].update(convention="sideways"), "convention"),
])
def test_malformed_files_raise(small_file, tmp_path, edit, match):
    with pytest.raises(ValueError, match=match):
        verify_head_file(_doctor(small_file, tmp_path / "bad.json", edit))


def test_not_a_file_or_not_json(tmp_path):
    with pytest.raises(ValueError, match="existing head file"):
        verify_head_file(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="not a JSON head file"):
        verify_head_file(bad)


def test_write_refuses_a_false_nonnegative_claim(tmp_path):
    fam = witness_family(paley_subset(11, 3, 11), 3, Fraction(1, 2))
    Q, K = indicator_factors(ratio_bounds(fam))
    Q = Q.copy()
    Q[0, 1] = Fraction(-1, 10**6)
    head = build_exact_head(fam, Q, K)
    with pytest.raises(ValueError, match="negative feature"):
        write_head_file(tmp_path / "x.json", head, SMALL_SPEC, "nonnegative", "test")
    with pytest.raises(ValueError, match="variant"):
        write_head_file(tmp_path / "x.json", head, SMALL_SPEC, "mixed", "test")


def test_command_line_exit_status(small_file, tmp_path, capsys):
    assert main([str(small_file)]) == 0
    assert "PASS" in capsys.readouterr().out
    bad = _doctor(small_file, tmp_path / "bad.json", lambda d: d.update(max_error="1/3"))
    assert main([str(small_file), str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(str(bad)) and "FAIL" in err[0]
    assert main([str(tmp_path / "none.json")]) == 2
    assert main([]) == 2


# ----
# `python -m companion verify-head FILE ...` (Chapter 3's head files): prints each head's
# rank and exact max error, exit status 0 when all pass and 2, with one line per failing file,
# otherwise.
HEAD = ROOT / "results" / "heads" / "paley_rows_23_nonnegative.json"  # the fastest (~2 s)


def test_verify_head_passes_and_prints_rank_and_exact_error(capsys):
    assert cli.main(["verify-head", str(HEAD)]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    claims = read_head_claims(HEAD)
    assert len(out) == 1 and "PASS" in out[0]
    assert f"rank {claims['rank']}" in out[0]
    assert str(claims["max_error"]) in out[0] and claims["max_error"] == Fraction(13, 44)


def test_verify_head_fails_with_one_line_per_bad_file(tmp_path, capsys):
    data = json.loads(HEAD.read_text())
    data["max_error"] = "1/3"  # a false claim: the recomputed max error is 13/44
    doctored = tmp_path / "doctored.json"
    doctored.write_text(json.dumps(data))
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    missing = tmp_path / "missing.json"
    assert cli.main(["verify-head", str(HEAD), str(doctored), str(broken), str(missing)]) == 2
    captured = capsys.readouterr()
    assert len(captured.out.strip().splitlines()) == 1  # the good head
    err = captured.err.strip().splitlines()
    assert len(err) == 3
    assert [line.split(":")[0] for line in err] == [str(doctored), str(broken), str(missing)]


def test_verify_head_needs_a_file():
    with pytest.raises(SystemExit) as exc:
        cli.main(["verify-head"])
    assert exc.value.code == 2


def test_verify_head_as_a_process():
    proc = subprocess.run([sys.executable, "-m", "companion", "verify-head", str(HEAD)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "rank 23" in proc.stdout and "13/44" in proc.stdout


def test_long_rationals_and_odd_paths_are_one_line_errors(tmp_path, capsys):
    """Very long rationals are refused by their cost before the exact evaluation; a path too
    long for the file system and an oversized file give one line each, exit 2."""
    import time

    from companion.files import MAX_JSON_BYTES

    data = json.loads((ROOT / "results" / "heads" / "paley_rows_23_signed.json").read_text())
    data["queries"][0]["features"][0] = "1" * 3000 + "/7"
    long_head = tmp_path / "long.json"
    long_head.write_text(json.dumps(data))
    big = tmp_path / "big.json"
    big.write_text(" " * (MAX_JSON_BYTES + 1))
    t = time.process_time()
    assert main([str(long_head), str(tmp_path / ("x" * 5000)), str(big)]) == 2
    assert time.process_time() - t < 5
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 3
    assert "MAX_VERIFY_COST" in err[0] and "cannot be read" in err[1]
    assert "MAX_JSON_BYTES" in err[2]
