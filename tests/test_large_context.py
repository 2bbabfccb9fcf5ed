"""The n -> oo limit of Theorem E: the bound of a code tends to its size, so the best bound
tends to L(m) = max_w A(m, w); ceil(C(m, m//2)/m) <= L(m) <= max_w floor(C(m, w-1)/w)."""

import math

import numpy as np
import pytest

from companion.asymptotics import (
    code_size_lower_bound,
    code_size_upper_bound,
    graham_sloane_code,
    large_context_limit_bounds,
    large_context_limit_log2_bounds,
    large_context_lower_log2,
    max_code_size_gap_two,
)
from companion.codes import gap_matrix
from companion.rank_bounds import certified_rank_bound

SMALL = [(m, w) for m in range(4, 10) for w in range(2, m // 2 + 1) if math.comb(m, w) <= 84]


@pytest.mark.parametrize("m, w", SMALL)
def test_exact_code_sizes_lie_between_the_bounds(m, w):
    A = max_code_size_gap_two(m, w)
    assert code_size_lower_bound(m, w) <= A <= code_size_upper_bound(m, w)
    best_class = max(len(graham_sloane_code(m, w, r)) for r in range(m))
    assert code_size_lower_bound(m, w) <= best_class <= A


def test_known_values_of_A():
    # A(n, 4, w) from the tables of constant-weight codes (Brouwer et al.)
    assert max_code_size_gap_two(7, 3) == 7
    assert max_code_size_gap_two(8, 4) == 14
    assert max_code_size_gap_two(9, 3) == 12


@pytest.mark.parametrize("m, w", [(6, 3), (7, 3), (8, 4), (10, 5), (11, 4)])
def test_graham_sloane_classes_have_all_gaps_at_least_two(m, w):
    sizes = 0
    for r in range(m):
        code = graham_sloane_code(m, w, r)
        sizes += len(code)
        if len(code) >= 2:
            G = gap_matrix(code)
            assert np.all(G[~np.eye(len(code), dtype=bool)] >= 2)
    assert sizes == math.comb(m, w)  # the classes partition the weight-w words


def test_the_book_column_is_not_the_limit():
    """log2(C(m, m/2)/m) is a lower bound on the limit; at m = 8 the limit is 14 > 70/8."""
    assert large_context_lower_log2(8) == pytest.approx(math.log2(70 / 8))
    assert max_code_size_gap_two(8, 4) == 14 > 70 / 8
    for m in range(2, 400):
        lo, hi = large_context_limit_log2_bounds(m)
        assert large_context_lower_log2(m) <= lo + 1e-12
        assert lo <= hi < lo + 1  # pinned within one bit


def test_limit_interval_closed_forms():
    for m in range(2, 300):
        lo, hi = large_context_limit_bounds(m)
        assert lo == -(-math.comb(m, m // 2) // m)
        assert hi == math.comb(m + 1, (m + 1) // 2) // (m + 1)


def test_theorem_e_bound_tends_to_the_code_size():
    """For a code with all gaps >= 2: |S|^2/(|S| + |S|(|S|-1)/(n-2)^2) <= bound <= |S|."""
    code = graham_sloane_code(8, 4, 0)
    S = len(code)
    for n in (3, 4, 10, 100, 10**4):
        b = certified_rank_bound(code, n).trace_bound
        assert S * S / (S + S * (S - 1) / (n - 2) ** 2) <= b <= S
    assert certified_rank_bound(code, 10**6).trace_bound > S - 1e-3


def test_bad_input():
    with pytest.raises(ValueError, match="MAX_EXACT_WORDS"):
        max_code_size_gap_two(9, 4)
    with pytest.raises(ValueError, match="w"):
        code_size_upper_bound(6, 6)
    with pytest.raises(ValueError, match="residue"):
        graham_sloane_code(6, 3, 6)
    with pytest.raises(TypeError, match="m"):
        large_context_limit_bounds(8.0)
