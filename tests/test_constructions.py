"""Theorem A's rank-1 head and Proposition F's softmax head, checked exactly or exhaustively."""

from fractions import Fraction

import numpy as np
import pytest

from companion import task
from companion.attention import kernel_attention, softmax_attention
from companion.constructions import rank_one_head, softmax_min_ip_head
from companion.verification import exhaustive_check


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


def test_exhaustive_check_refuses_huge_enumerations():
    with pytest.raises(ValueError, match="n\\*m <= 22"):
        exhaustive_check(rank_one_head(), 3, 9)
    with pytest.raises(ValueError, match="n must be"):
        exhaustive_check(rank_one_head(), 0, 2)
