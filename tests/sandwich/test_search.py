"""sandwich/search: the numerical search for low-rank admissible factors and its exact rounding."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from companion.sandwich.matrix import (
    ratio_bounds,
)
from companion.sandwich.search import _rationalise, exact_head_from_search, search_ratio_factors

HALF = Fraction(1, 2)


def test_search_finds_low_rank_and_nonnegative_factors(single):
    b = ratio_bounds(single)
    res = search_ratio_factors(b, 13, seed=1, nonnegative=True, restarts=2, rounds=20)
    assert res.query_factor is not None and np.all(res.query_factor >= 0)
    head = exact_head_from_search(single, res)
    assert head.nonnegative and head.rank == 13 and head.max_error < HALF


def test_search_reports_failure_below_the_certified_bound(single):
    b = ratio_bounds(single)
    bound = single.certificate.bound.rank
    res = search_ratio_factors(b, bound - 1, seed=0, restarts=1, rounds=3)
    assert res.query_factor is None and res.worst_violation > 0
    with pytest.raises(ValueError, match="successful"):
        exact_head_from_search(single, res)


def test_rationalise_keeps_signs_and_rounds():
    out = _rationalise(np.array([[0.2, -0.3], [1e-9, 0.0]]), 1024)
    assert out[0, 0] == Fraction(205, 1024) and out[0, 1] == Fraction(-307, 1024)
    assert out[1, 0] == 0 and out[1, 1] == 0


def test_warm_start_from_an_admissible_matrix(single):
    """A start that is already admissible at the target rank is kept (one round, restart 0)."""
    b = ratio_bounds(single)
    res = search_ratio_factors(b, 9, seed=0, restarts=3, rounds=20)
    assert res.query_factor is not None, res
    X = res.query_factor @ res.key_factor.T
    M = X / np.diag(X)[:, None]
    warm = search_ratio_factors(b, 9, seed=5, restarts=1, rounds=1, start=M)
    assert warm.query_factor is not None and warm.restart == 0
    assert exact_head_from_search(single, warm).rank == 9


def test_bad_input(single):
    b = ratio_bounds(single)
    with pytest.raises(ValueError, match="rank must be an int in"):
        search_ratio_factors(b, 0)
    with pytest.raises(ValueError, match="rank must be an int in"):
        search_ratio_factors(b, 15)
    with pytest.raises(ValueError, match="margin"):
        search_ratio_factors(b, 5, margin=0)
    with pytest.raises(ValueError, match="start must be"):
        search_ratio_factors(b, 5, start=np.ones((3, 4)))
