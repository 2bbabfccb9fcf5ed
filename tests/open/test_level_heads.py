"""Level heads (all length-3 inputs at small m) and the exact LP behind them."""

from fractions import Fraction

import numpy as np
import pytest

from companion.core.task import all_sequences, query_target
from companion.open.level_heads import (
    LevelSolution,
    level_feature_rank,
    level_lp,
    level_max_error,
    level_solution_head,
    min_level_degree,
)


def test_nka_level_heads_of_degree_one_for_small_weights():
    sol = level_lp(4, 1, "nka", Fraction(499, 1000))
    assert sol is not None and level_max_error(sol) < Fraction(1, 2)
    assert all(v >= 0 for row in sol.P for v in row) and sol.s >= 0
    assert level_lp(4, 0, "nka", Fraction(1, 2)) is None  # uniform attention cannot


@pytest.mark.slow
def test_degree_one_fails_from_weight_six():
    k, sol, proved = min_level_degree(6, "nka")
    assert (k, proved) == (2, [0, 1]) and level_max_error(sol) < Fraction(1, 2)


def test_level_max_error_rejects_a_doctored_solution():
    sol = level_lp(3, 1, "nka", Fraction(499, 1000))
    N = (tuple(v + 1 for v in sol.N[0]), sol.N[1])
    bad = LevelSolution(sol.w, sol.k, sol.kind, sol.P, N, sol.s, sol.S0)
    assert level_max_error(bad) >= Fraction(1, 2)
    negative = LevelSolution(sol.w, sol.k, "nka", ((-1,) * 4, (-1,) * 4), sol.N, sol.s, sol.S0)
    with pytest.raises(ValueError, match="NKA"):
        level_max_error(negative)


def test_level_head_is_exact_on_every_input():
    m = 3
    sols = {w: level_lp(w, 1, "nka", Fraction(499, 1000)) for w in range(m + 1)}
    head = level_solution_head(sols, m)
    seqs = all_sequences(3, m)
    from companion.core.attention import kernel_attention

    y = kernel_attention(head, seqs, exact=True)
    err = max(abs(Fraction(v) - int(t)) for v, t in zip(y, query_target(seqs)))
    assert err == max(level_max_error(s) for s in sols.values()) < Fraction(1, 2)


def test_level_bad_input():
    with pytest.raises(ValueError, match="kind"):
        level_lp(3, 1, "softmax")
    with pytest.raises(ValueError, match="pattern"):
        level_lp(2, 1, "pattern", pattern=np.ones((2, 2)))
    with pytest.raises(ValueError, match="error"):
        level_lp(2, 1, "nka", Fraction(3, 4))
    assert level_feature_rank(5, 1) == 7 and level_feature_rank(8, 2) == 38
    with pytest.raises(ValueError, match="m must"):
        level_feature_rank(0, 1)


def test_committed_exact_tables_match_a_recomputation():
    import json
    from pathlib import Path

    from companion.open.level_heads import exact_probe_tables

    stored = json.loads((Path(__file__).resolve().parents[2] / "results"
                         / "probes_exact.json").read_text())
    live = exact_probe_tables(4)
    for key in ("level", "overlap_heads"):
        rows = [r for r in stored[key] if r["w"] <= 4]
        assert rows == live[key], key
    # the statements the chapter makes from the stored rows (w <= 8)
    nka = {r["w"]: r["k"] for r in stored["level"] if r["kind"] == "nka"}
    assert nka == {1: 0, 2: 1, 3: 1, 4: 1, 5: 1, 6: 2, 7: 2, 8: 2}
    assert nka == {r["w"]: r["k"] for r in stored["level"] if r["kind"] == "positive"}
    assert [r["heads"] for r in stored["overlap_heads"]] == [1, 2, 2, 2, 2, 2, 2, 3]
