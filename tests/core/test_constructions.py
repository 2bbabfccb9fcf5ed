"""Theorem A's rank-1 head and Proposition F's softmax head, checked exactly or exhaustively."""

from fractions import Fraction

import numpy as np
import pytest

from companion.core import task
from companion.core.attention import kernel_attention, kernel_attention_integer, softmax_attention
from companion.core.constructions import (
    rank_one_head,
    rank_one_length_three_worst_inputs,
    softmax_min_ip_head,
)
from companion.core.exact import exhaustive_check


def length_three_error(w: int, a: int, b: int) -> Fraction:
    """The oracle: y - t of the rank-1 head on a length-3 input with |x| = w and key overlaps
    a, b (0 <= a, b <= w) is (2a + 2b - w)/3 - min(a, b)."""
    return Fraction(2 * a + 2 * b - w, 3) - min(a, b)


@pytest.mark.parametrize("convention", task.CONVENTIONS)
@pytest.mark.parametrize("n", [1, 2])
@pytest.mark.parametrize("m", range(1, 8))
def test_rank_one_head_is_exact_at_lengths_one_and_two(n, m, convention):
    result = exhaustive_check(rank_one_head(), n, m, convention)
    assert result.sequences == 2 ** (n * m)
    assert result.exact == result.sequences and result.max_error == 0


@pytest.mark.parametrize("m", range(1, 6))
def test_rank_one_head_fails_at_length_three_with_error_m_over_three(m):
    result = exhaustive_check(rank_one_head(), 3, m)
    # y = (2a + 2b - |x|)/3; the worst input is x = 1^m, z = 0, z' = x: error m/3
    assert result.max_error == Fraction(m, 3)
    # it still rounds correctly everywhere at m = 1 (error 1/3), and fails from m = 2 on
    assert (result.within_half == result.sequences) == (m == 1)


def test_rank_one_length_three_formula():
    x, z, zp = np.array([1, 1, 0, 1]), np.array([0, 1, 1, 0]), np.array([1, 1, 1, 1])
    y = kernel_attention(rank_one_head(), np.array([[x, z, zp]]), exact=True)[0]
    assert y == Fraction(2 * (x @ z) + 2 * (x @ zp) - x.sum(), 3)


@pytest.mark.parametrize("beta", [1.0, 2.0, 4.0])
@pytest.mark.parametrize("n", [2, 3, 4])
def test_softmax_head_error_within_bound(beta, n):
    seqs = task.all_sequences(n, 3)
    for convention in task.CONVENTIONS:
        err = softmax_attention(softmax_min_ip_head(beta), seqs, convention) - task.query_target(
            seqs, convention)
        assert np.all(err >= -1e-12)  # the head never undershoots the minimum
        assert err.max() <= (n - 1) * np.exp(-beta) + 1e-12


def test_softmax_head_solves_min_ip_above_the_threshold():
    beta = np.log(2 * 2) + 0.01
    seqs = task.all_sequences(3, 5)
    err = np.abs(softmax_attention(softmax_min_ip_head(beta), seqs) - task.query_target(seqs))
    assert err.max() < 0.5


@pytest.mark.parametrize("beta, exc", [(-1.0, ValueError), (float("nan"), ValueError),
                                       (float("inf"), ValueError), ("2", TypeError)])
def test_softmax_head_rejects_bad_beta(beta, exc):
    with pytest.raises(exc, match="beta"):
        softmax_min_ip_head(beta)



# ----
# Theorem A's rank-1 head at length 3: its largest error over all inputs is exactly m/3, for
# every m, attained on exactly three sequences (proved in chapter 1; checked here exhaustively
# over all 2**(3m) sequences for m <= 7 and over all (|x|, <x,z>, <x,z'>) up to m = 60).
@pytest.mark.parametrize("convention", task.CONVENTIONS)
@pytest.mark.parametrize("m", [*range(1, 7), pytest.param(7, marks=pytest.mark.slow)])
def test_max_error_is_m_over_three_on_every_input(m, convention):
    head, maximisers = rank_one_head(), []
    for batch in task.iter_sequences(3, m):
        num, den = kernel_attention_integer(head, batch, convention)
        gap = np.abs(num - task.query_target(batch, convention) * den)  # |y - t| den
        assert np.all(den > 0)
        assert np.all(3 * gap <= m * den)  # |y - t| <= m/3 everywhere, in integers
        maximisers.extend(batch[3 * gap == m * den])  # |y - t| = m/3 exactly
    # the bound is attained, so the maximum is m/3
    assert maximisers
    expected = rank_one_length_three_worst_inputs(m)
    if convention == "causal":
        expected = expected[:, ::-1]  # the query is last
    assert sorted(map(lambda s: s.tobytes(), np.array(maximisers))) == sorted(
        map(lambda s: s.tobytes(), expected))


def test_worst_inputs_and_their_signs():
    for m in (1, 4, 9, 30):
        X = rank_one_length_three_worst_inputs(m)
        y = kernel_attention(rank_one_head(), X, exact=True)
        t = task.query_target(X)
        assert [yi - int(ti) for yi, ti in zip(y, t, strict=True)] == [
            Fraction(m, 3), Fraction(m, 3), -Fraction(m, 3)]


def test_formula_over_all_overlap_triples():
    """Over every achievable (w, a, b), 0 <= a, b <= w <= m, the error lies in [-m/3, m/3]
    and hits the ends only at (m, 0, m), (m, m, 0) and (m, 0, 0): vectorised integers
    (3 (y - t) = 2a + 2b - w - 3 min(a, b)) up to m = 60, Fractions up to m = 12."""
    for m in range(1, 61):
        w, a, b = np.meshgrid(*(np.arange(m + 1),) * 3, indexing="ij")
        ok = (a <= w) & (b <= w)
        three_e = 2 * a + 2 * b - w - 3 * np.minimum(a, b)
        assert np.all(np.abs(three_e[ok]) <= m)
        ends = np.argwhere(ok & (np.abs(three_e) == m))
        assert sorted(map(tuple, ends.tolist())) == sorted([(m, 0, m), (m, m, 0), (m, 0, 0)])
    for m in range(1, 13):
        errors = [length_three_error(w, a, b) for w in range(m + 1)
                  for a in range(w + 1) for b in range(w + 1)]
        assert max(map(abs, errors)) == Fraction(m, 3)


def test_formula_matches_the_head():
    rng = np.random.default_rng(0)
    X = rng.integers(0, 2, size=(500, 3, 9))
    y = kernel_attention(rank_one_head(), X, exact=True)
    t = task.query_target(X)
    for seq, yi, ti in zip(X, y, t, strict=True):
        x, z, zp = seq
        assert yi - int(ti) == length_three_error(int(x.sum()), int(x @ z), int(x @ zp))


def test_bad_input():
    with pytest.raises(ValueError, match="m"):
        rank_one_length_three_worst_inputs(0)
