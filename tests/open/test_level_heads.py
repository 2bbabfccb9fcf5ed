"""Level heads (all length-3 inputs at small m) and the exact LP behind them."""

from fractions import Fraction
from itertools import combinations

import numpy as np
import pytest

from companion.core.attention import KernelAttentionHead, kernel_attention
from companion.core.task import all_sequences, query_target
from companion.open.level_heads import LevelSolution, level_feature_rank, min_level_degree
from companion.open.level_heads import _level_lp as level_lp
from companion.open.level_heads import _level_max_error as level_max_error
from companion.open.signed import newton_coefficients


def level_solution_head(solutions: dict, m: int) -> KernelAttentionHead:
    """Level solutions {w: LevelSolution} (w = 0..m) as a head on {0,1}^m with monomial
    features x_J z_J, |J| <= k (position-dependent keys: two blocks) and one-hot values over
    all 2^m tokens (the scores depend on the overlap): the oracle for exhaustive checks."""
    k = max(sol.k for sol in solutions.values())
    monomials = [J for j in range(k + 1) for J in combinations(range(m), j)]
    B, T = len(monomials), 2 ** m
    coef = {(w, p): (newton_coefficients(sol.P[p]) + [Fraction(0)] * (k + 1))[:k + 1]
            for w, sol in solutions.items() for p in range(2)}
    allz = (np.arange(T)[:, None] >> np.arange(m)) & 1

    def mono(tok):
        return np.array([int(all(tok[i] for i in J)) for J in monomials], dtype=np.int64)

    def per_query(x, width, row_of):
        x = np.asarray(x, dtype=np.int64)
        out = np.empty(x.shape[:-1] + (width,), dtype=object)
        view = out.reshape(-1, width)
        for row, tok in enumerate(x.reshape(-1, m)):
            view[row] = row_of(tok, solutions[int(tok.sum())])
        return out

    def query_row(tok, sol):
        mx, w = mono(tok), int(tok.sum())
        return [coef[(w, p)][len(J)] * int(mx[i]) for p in range(2)
                for i, J in enumerate(monomials)] + [sol.s]

    def readout_row(tok, sol):
        ov = (allz @ tok).tolist()
        return [sol.N[p][a] / sol.P[p][a] if sol.P[p][a] != 0 else Fraction(0)
                for p in range(2) for a in ov] + [sol.S0 / sol.s if sol.s else Fraction(0)]

    def key_features(z, p):
        z = np.asarray(z, dtype=np.int64)
        out = np.zeros(z.shape[:-1] + (2 * B + 1,), dtype=np.int64)
        view = out.reshape(-1, 2 * B + 1)
        for row, tok in enumerate(z.reshape(-1, m)):
            if p == 0:
                view[row, -1] = 1
            else:
                view[row, (p - 1) * B:p * B] = mono(tok)
        return out

    def values(z, p):
        z = np.asarray(z, dtype=np.int64)
        out = np.zeros(z.shape[:-1] + (2 * T + 1,), dtype=np.int64)
        if p == 0:
            out[..., -1] = 1
        else:
            np.put_along_axis(out, ((p - 1) * T + z @ 2 ** np.arange(m))[..., None], 1, axis=-1)
        return out

    return KernelAttentionHead(
        rank=2 * B + 1, query_features=lambda x: per_query(x, 2 * B + 1, query_row),
        key_features=key_features, values=values,
        readout_weights=lambda x: per_query(x, 2 * T + 1, readout_row),
        readout_bias=lambda x: np.zeros(np.shape(x)[:-1], dtype=np.int64))


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


def test_level_head_is_exact_on_every_input():
    m = 3
    sols = {w: level_lp(w, 1, "nka", Fraction(499, 1000)) for w in range(m + 1)}
    head = level_solution_head(sols, m)
    seqs = all_sequences(3, m)
    y = kernel_attention(head, seqs, exact=True)
    err = max(abs(Fraction(v) - int(t)) for v, t in zip(y, query_target(seqs)))
    assert err == max(level_max_error(s) for s in sols.values()) < Fraction(1, 2)


def test_level_bad_input():
    with pytest.raises(ValueError, match="kind"):
        min_level_degree(3, "softmax")
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
