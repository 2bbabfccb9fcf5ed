"""`python -m companion verify-head FILE ...` (Chapter 3's head files): prints each head's
rank and exact max error, exit status 0 when all pass and 2, with one line per failing file,
otherwise."""

import json
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from companion.__main__ import main
from companion.head_files import read_head_claims

ROOT = Path(__file__).resolve().parents[1]
HEAD = ROOT / "results" / "heads" / "paley_rows_23_nonnegative.json"  # the fastest (~2 s)


def test_verify_head_passes_and_prints_rank_and_exact_error(capsys):
    assert main(["verify-head", str(HEAD)]) == 0
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
    assert main(["verify-head", str(HEAD), str(doctored), str(broken), str(missing)]) == 2
    captured = capsys.readouterr()
    assert len(captured.out.strip().splitlines()) == 1  # the good head
    err = captured.err.strip().splitlines()
    assert len(err) == 3
    assert [line.split(":")[0] for line in err] == [str(doctored), str(broken), str(missing)]


def test_verify_head_needs_a_file():
    with pytest.raises(SystemExit) as exc:
        main(["verify-head"])
    assert exc.value.code == 2


def test_verify_head_as_a_process():
    proc = subprocess.run([sys.executable, "-m", "companion", "verify-head", str(HEAD)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "rank 23" in proc.stdout and "13/44" in proc.stdout
