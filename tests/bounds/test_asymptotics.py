"""Unit tests of the size limits and bounded algorithms found by the fuzz suite (issue 16):
each call that used to exhaust memory or run for minutes now answers quickly or raises a
ValueError that names the argument and states the limit."""

from __future__ import annotations

import math
import time
from fractions import Fraction

import numpy as np
import pytest

from companion.bounds import amplification as amp
from companion.bounds.asymptotics import (
    MAX_WIDTH,
    base_codes,
    concatenate_distributions,
    every_width_rank_bound,
    explicit_code_plan,
    gap_distribution,
    log2_trace_bound,
    random_code_log2_estimate,
    trace_bound_from_distribution,
)
from companion.bounds.codes import check_code, paley_hadamard_code
from companion.checks import has_repeated_row

H = Fraction(1, 2)


@pytest.mark.parametrize("n, eps", [(3, H), (4, Fraction(1, 4)), (6, Fraction(1, 3)),
                                    (10, H), (3, Fraction(1, 1000)), (5, Fraction(999, 2000))])
def test_periodic_regime_matches_the_dp(n, eps):
    """R[G + p] = W[p] R[G] from the detected start on, and the shortcut past G = 4096 gives
    the plain DP's exact values."""
    full = amp._ChainTable(n, eps)
    full.grow(4500)
    a, p, w = amp._ChainTable(n, eps).period()
    for G in range(a, 4500 - p):
        assert full.R[G + p] == w * full.R[G]
    fast = amp._ChainTable(n, eps)
    for G in (4097, 4400, 4499):
        H_, k, w_ = fast.reduce(G)
        assert H_ < 4096 and k > 0
        assert fast.rho(G) == Fraction(full.R[G], full.D**G)


def test_huge_gaps_are_cheap_and_exact():
    start = time.perf_counter()
    # rho(5k) = 4**k at n = 3, eps = 1/2 (the notebook's identity), far past the DP table
    assert amp.log2_best_chain_factor(5 * 10**8) == pytest.approx(2 * 10**8, rel=1e-12)
    assert amp.log2_best_chain_factor(10**30) == pytest.approx(4e29, rel=1e-12)
    assert amp.best_chain_factor(5 * 20_000) == 4**20_000
    assert amp.chain_growth_rate(max_gap=10**9) == amp.chain_growth_rate()
    assert time.perf_counter() - start < 5


def test_log2_agrees_with_exact_below_the_limit():
    for G in (1, 2, 7, 100, 4097, 5003):
        exact = amp.best_chain_factor(G)
        log2 = amp.log2_best_chain_factor(G)
        if exact == 0:
            assert log2 == -math.inf
        else:
            assert log2 == pytest.approx(
                math.log2(exact.numerator) - math.log2(exact.denominator), abs=1e-9)


@pytest.mark.parametrize("call, limit", [
    (lambda: amp.best_chain_factor(10**7), "524288"),
    (lambda: amp.best_chain(40_000), "32768"),
    (lambda: amp.log2_rho_table(10**6), "32768"),
    (lambda: amp.compositions(65), "64"),
    (lambda: amp.check_chain_growth(10**5), "4096"),
])
def test_limits_are_stated(call, limit):
    with pytest.raises(ValueError, match=limit):
        result = call()
        next(iter(result))  # compositions is a generator: checked on first use


def test_types_checked_where_they_were_not():
    with pytest.raises(TypeError, match="max_gap"):
        amp.chain_growth_rate(max_gap=2.5)
    with pytest.raises(TypeError, match="G_max"):
        amp.log2_rho_table(None)


def test_tiny_eps_has_a_float_overflow_message():
    with pytest.raises(ValueError, match="eps"):
        amp.chain_growth_rate(eps=5e-324)
    growth = amp.chain_growth(eps=5e-324)  # exact constants still available
    assert growth.best_factor > 10**300


def test_repeated_rows_linear_time():
    wide = np.ones((3, 10**6), dtype=np.int8)
    start = time.perf_counter()
    assert has_repeated_row(wide)
    assert not has_repeated_row(np.eye(5, dtype=np.int64))
    assert time.perf_counter() - start < 2  # np.unique(axis=0) took ~30 s here
    with pytest.raises(ValueError, match="distinct"):
        check_code(wide)


def test_asymptotics_limits_and_checks():
    with pytest.raises(ValueError, match="m_max"):
        explicit_code_plan(base_codes(widths=(12,), max_size=20), MAX_WIDTH + 1)
    with pytest.raises(ValueError, match="m"):
        random_code_log2_estimate(10**9)
    with pytest.raises(ValueError, match="max_size"):
        base_codes(widths=(12,), max_size=10**6)
    with pytest.raises(TypeError, match="d1"):
        concatenate_distributions(None, {0: 1})
    with pytest.raises(TypeError, match="dist"):
        trace_bound_from_distribution([])
    with pytest.raises(ValueError, match="log2_rho"):
        log2_trace_bound(np.array([0.5, 0.25, 0.25]), np.array([0.0, 1.0]))
    assert concatenate_distributions({0: 2, 2: 2}, {0: 1}) == {0: 2, 2: 2}


# ----
# Corollary cor-every-width (chapter 3): the certified rank bound for every width m from one
# base code and the concatenation lemma, checked against codes built column by column.
PALEY20 = paley_hadamard_code(19)  # 38 words of width 20


def _bound_of(code: np.ndarray) -> Fraction:
    return trace_bound_from_distribution(gap_distribution(code), 3)


def test_base_code_is_the_papers_kind_and_its_bound_is_exact():
    assert PALEY20.shape == (38, 20)
    base = _bound_of(PALEY20)
    assert isinstance(base, Fraction) and 11 < base < 12
    assert every_width_rank_bound(PALEY20, 20) == base
    assert every_width_rank_bound(PALEY20, 39) == base  # one copy, 19 zero columns


def test_below_the_base_width_the_bound_is_trivial():
    for m in (1, 5, 19):
        assert every_width_rank_bound(PALEY20, m) == 1


@pytest.mark.parametrize("pad", [0, 3, 19])
def test_two_copies_built_column_by_column_certify_at_least_the_square(pad):
    """The code (x1, x2, 0...0) is built as an array and its bound computed from scratch:
    the corollary's value never exceeds it (concatenation can only gain)."""
    words = np.array([np.concatenate([a, b, np.zeros(pad, dtype=a.dtype)])
                      for a in PALEY20 for b in PALEY20])
    built = _bound_of(words)
    claimed = every_width_rank_bound(PALEY20, 40 + pad)
    assert claimed == _bound_of(PALEY20) ** 2
    assert built >= claimed


def test_three_copies_through_the_convolved_distribution():
    dist = gap_distribution(PALEY20)
    three = concatenate_distributions(concatenate_distributions(dist, dist), dist)
    assert trace_bound_from_distribution(three, 3) >= every_width_rank_bound(PALEY20, 60)


def test_the_rate_stated_in_the_book_holds_for_every_width_up_to_1000():
    """r >= 2^{0.1772 (m - 19)} for every m (chapter 3 prints the rate rounded down)."""
    for m in range(1, 1001):
        bound = every_width_rank_bound(PALEY20, m)
        log2 = math.log2(bound.numerator) - math.log2(bound.denominator)
        assert log2 >= 0.1772 * (m - 19) - 1e-9, m


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="m"):
        every_width_rank_bound(PALEY20, 0)
    with pytest.raises(ValueError):
        every_width_rank_bound(PALEY20[:1], 20)
