"""Corollary cor-every-width (chapter 3): the certified rank bound for every width m from one
base code and the concatenation lemma, checked against codes built column by column."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from companion.asymptotics import (
    concatenate_distributions,
    every_width_rank_bound,
    gap_distribution,
    trace_bound_from_distribution,
)
from companion.codes import paley_hadamard_code

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
