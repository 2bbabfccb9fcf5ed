"""Proposition F (dense softmax solves Min-IP at a constant temperature): exhaustive checks."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from companion.dense_softmax import (
    count_profiles,
    error_bound,
    errors,
    exact_threshold,
    max_error,
    max_error_brute_force,
    overlap_profiles,
    profile_sequences,
    sufficient_threshold,
    uniform_gap_threshold,
    worst_profile,
)
from companion.task import overlaps

SMALL = [(3, 1), (3, 2), (3, 4), (3, 6), (4, 2), (4, 3), (5, 2), (5, 3)]


@pytest.mark.parametrize("n,m", SMALL)
@pytest.mark.parametrize("convention", ["bidirectional", "causal"])
def test_profile_reduction_matches_brute_force(n, m, convention):
    """The overlap-profile worst case equals the worst case over all 2**(n*m) sequences."""
    for beta in (0.0, 0.4, 1.0, math.log(4), 3.0):
        reduced = max_error(beta, n, m, convention)
        brute = max_error_brute_force(beta, n, m, convention)
        assert abs(reduced - brute) <= 1e-12


@pytest.mark.parametrize("n,m", [(3, 5), (4, 4), (6, 3)])
def test_profiles_are_the_achievable_overlaps(n, m):
    profiles = overlap_profiles(n, m)
    assert len(profiles) == count_profiles(n, m) == math.comb(m + n, n)
    assert len({p.tobytes() for p in profiles}) == len(profiles)
    seqs = profile_sequences(n, m)
    gram = overlaps(seqs)
    assert np.array_equal(gram[:, 0, :], profiles)  # query row: |x| then the key overlaps


@pytest.mark.parametrize("n,m", [(3, 3), (3, 5), (4, 3), (5, 3)])
@pytest.mark.parametrize("beta", [1.0, 1.2, 2.0, 4.0])
def test_bound_holds_exhaustively_brute_force(n, m, beta):
    assert max_error_brute_force(beta, n, m) <= error_bound(beta, n)


@settings(max_examples=120, deadline=None)
@given(beta=st.floats(1.0, 30.0), n=st.integers(3, 6), m=st.integers(1, 8))
def test_bound_holds_for_beta_at_least_one(beta, n, m):
    # y - t is computed as a difference of floats of size <= m: allow a few ulps of m, which
    # matters only at large beta where the bound itself is within 1e-9 relative of tight.
    assert max_error(beta, n, m) <= error_bound(beta, n) + 8 * np.finfo(float).eps * m


def test_bound_needs_beta_at_least_one():
    """Below beta = 1 the bound is not a theorem, and indeed it fails at large gaps."""
    assert max_error(0.1, 3, 8) > error_bound(0.1, 3)


@pytest.mark.parametrize("n", [3, 4, 5, 6])
def test_exact_threshold_below_sufficient(n):
    for m in range(1, 9):
        beta_star = exact_threshold(n, m)
        assert 0 < beta_star < sufficient_threshold(n)
        assert max_error(beta_star + 1e-6, n, m) < 0.5 <= max_error(beta_star - 1e-6, n, m)


@pytest.mark.parametrize("n", [3, 4, 5, 7])
def test_exact_threshold_is_the_uniform_gap_profile(n):
    for m in range(1, 7):
        assert abs(exact_threshold(n, m) - uniform_gap_threshold(n, m)) <= 1e-9


def test_max_error_monotone_in_beta_and_m():
    betas = np.linspace(0, 6, 61)
    for n in (3, 4):
        rows = np.array([[max_error(float(b), n, m) for b in betas] for m in range(1, 7)])
        assert np.all(np.diff(rows, axis=1) <= 1e-15)
        assert np.all(np.diff(rows, axis=0) >= -1e-15)


@pytest.mark.parametrize("n", [3, 4, 5])
def test_gap_one_profile_is_worst_at_large_beta(n):
    """(n-1) tokens at gap 1 give error (n-1)e^-b / (1 + (n-1)e^-b); at large beta that is
    the worst case (at beta = 0 the worst is the largest gap instead)."""
    for beta in (2.0, 3.0, 6.0):
        u = (n - 1) * math.exp(-beta)
        assert abs(max_error(beta, n, 5) - u / (1 + u)) <= 1e-12
        assert worst_profile(beta, n, 5)[0] - min(worst_profile(beta, n, 5)) == 1
    assert worst_profile(0.0, n, 5) == (5, 0) + (5,) * (n - 2)


def test_errors_are_nonnegative_overestimates():
    seqs = profile_sequences(4, 3)
    from companion.attention import softmax_attention
    from companion.constructions import softmax_min_ip_head
    from companion.task import query_target
    y = softmax_attention(softmax_min_ip_head(0.7), seqs)
    assert np.all(y - query_target(seqs) >= -1e-12)
    assert np.allclose(errors(0.7, seqs), y - query_target(seqs))


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("beta", [-0.5, float("nan"), float("inf")])
def test_bad_beta_value(beta):
    with pytest.raises(ValueError, match="beta"):
        max_error(beta, 3, 2)
    with pytest.raises(ValueError, match="beta"):
        error_bound(beta, 3)


@pytest.mark.parametrize("beta", ["1", None, True])
def test_bad_beta_type(beta):
    with pytest.raises(TypeError, match="beta"):
        max_error(beta, 3, 2)


def test_bad_sizes():
    with pytest.raises(ValueError, match="n\\*m must be at most 24"):
        max_error_brute_force(1.0, 3, 9)
    with pytest.raises(ValueError, match="MAX_PROFILES"):
        max_error(1.0, 10, 60)
    with pytest.raises(ValueError, match="n"):
        exact_threshold(1, 3)
    with pytest.raises(ValueError, match="n"):
        uniform_gap_threshold(2, 3)
    with pytest.raises(ValueError, match="m"):
        max_error(1.0, 3, 0)
    with pytest.raises(TypeError, match="m"):
        max_error(1.0, 3, 2.0)
    with pytest.raises(ValueError, match="tol"):
        exact_threshold(3, 2, tol=0.0)
