"""Proposition F (dense softmax solves Min-IP at a constant temperature): exhaustive checks."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from companion.core.task import overlaps
from companion.softmax import _errors as errors
from companion.softmax import _overlap_profiles as overlap_profiles
from companion.softmax import _profile_sequences as profile_sequences
from companion.softmax import _saturation_width as saturation_width
from companion.softmax import _uniform_gap_error as uniform_gap_error
from companion.softmax import (
    count_profiles,
    error_bound,
    exact_threshold,
    max_error,
    max_error_brute_force,
    max_error_closed_form,
    max_error_closed_form_exact,
    max_error_exact,
    sufficient_threshold,
    threshold_closed_form,
    threshold_closed_form_terms,
    worst_gap,
    worst_profile,
)


def saturation_bound(beta, n):
    """(n-1)/(e beta): u e^{-beta u} <= 1/(e beta) bounds the max error for every width m."""
    return (n - 1) / (math.e * beta)


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
        # max over gaps d <= m of ln((n-1)(2d-1)) / d: where the profile with n-1 tokens at
        # gap d and one key at the minimum reaches error 1/2
        uniform = max(math.log((n - 1) * (2 * d - 1)) / d for d in range(1, m + 1))
        assert abs(exact_threshold(n, m) - uniform) <= 1e-9


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
    from companion.core.attention import softmax_attention
    from companion.core.constructions import softmax_min_ip_head
    from companion.core.task import query_target
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
    with pytest.raises(ValueError, match="m"):
        max_error(1.0, 3, 0)
    with pytest.raises(TypeError, match="m"):
        max_error(1.0, 3, 2.0)
    with pytest.raises(ValueError, match="tol"):
        exact_threshold(3, 2, tol=0.0)


# ----
# Proposition F in closed form: the worst profile, the exact threshold beta*(n, m), the
# saturation below beta = 1 and the gaps that matter from beta = 1 on, each checked against
# the exhaustive search over overlap profiles (floats) and in exact rational arithmetic.
NS = range(2, 9)
MS = range(1, 11)
# n = 7, 8 with m up to 10 mean up to C(18, 8) = 43,758 profiles per evaluation: seconds each
NS_SPLIT = [*range(2, 7), *(pytest.param(n, marks=pytest.mark.slow) for n in (7, 8))]
BETAS = (0.0, 0.1, 0.25, 0.5, 0.9, 1.0, math.log(4), 2.0, 3.0, 5.0, 9.0)


# ----------------------------------------------------------- the worst-profile theorem


@pytest.mark.parametrize("n", NS_SPLIT)
def test_closed_form_max_error_equals_exhaustive_search(n):
    """max over all inputs = max_{d <= m} (n-1) d / (e^{beta d} + n - 1), n <= 8, m <= 10."""
    for m in MS:
        for beta in BETAS:
            assert max_error_closed_form(beta, n, m) == pytest.approx(
                max_error(beta, n, m), rel=1e-12, abs=1e-15), (n, m, beta)


@pytest.mark.parametrize("n", NS)
def test_worst_profile_is_uniform_gap(n):
    """The exhaustive argmax is a uniform-gap profile: one overlap at the minimum, the other
    n - 1 (query included) equal, at the gap the closed form picks (ties aside)."""
    for m in (1, 3, 6):
        for beta in (0.0, 0.5, 1.0, 2.0):
            profile = worst_profile(beta, n, m)
            gaps = sorted(o - min(profile) for o in profile)
            d = worst_gap(beta, n, m)
            assert uniform_gap_error(beta, n, gaps[-1]) == pytest.approx(
                uniform_gap_error(beta, n, d), rel=1e-12)
            assert gaps == [0] + [gaps[-1]] * (n - 1), (n, m, beta, profile)


DECAYS = (Fraction(1), Fraction(9, 10), Fraction(2, 3), Fraction(1, 2), Fraction(1, 3),
          Fraction(2, 7), Fraction(1, 10))


@pytest.mark.parametrize("n", NS)
def test_worst_profile_theorem_in_exact_arithmetic(n):
    """At every rational e^{-beta} the exact maximum over all profiles equals the formula."""
    for m in range(1, 9):
        if count_profiles(n, m) > 20_000:
            continue
        for y in DECAYS:
            assert max_error_exact(y, n, m) == max_error_closed_form_exact(y, n, m), (n, m, y)


# ------------------------------------------------------------ the exact threshold


def test_threshold_values():
    ln = math.log
    assert threshold_closed_form(2, 1) == 0.0
    assert threshold_closed_form(3, 1) == pytest.approx(ln(2), abs=1e-15)
    for m in range(2, 50):
        assert threshold_closed_form(2, m) == pytest.approx(ln(3) / 2, abs=1e-15)
        assert threshold_closed_form(3, m) == pytest.approx(ln(6) / 2, abs=1e-15)
    for n in range(4, 40):
        for m in (1, 2, 3, 17):
            assert threshold_closed_form(n, m) == pytest.approx(ln(n - 1), abs=1e-15)
            # exactly ln 2 below the proposition's sufficient ln(2(n-1))
            assert sufficient_threshold(n) - threshold_closed_form(n, m) == pytest.approx(
                ln(2), abs=1e-12)


@pytest.mark.parametrize("n", list(range(2, 60)) + [100, 1000, 10**6])
def test_threshold_gap_is_the_maximiser(n):
    """beta* = max_{d <= m} ln((n-1)(2d-1))/d, and the maximiser is the closed form's gap."""
    for m in (1, 2, 3, 5, 10, 100):
        values = [math.log((n - 1) * (2 * d - 1)) / d for d in range(1, m + 1)]
        assert threshold_closed_form(n, m) == pytest.approx(max(values), abs=1e-14)
        d = threshold_closed_form_terms(n, m)[1]
        assert values[d - 1] == pytest.approx(max(values), abs=1e-14)


def test_gap_three_and_beyond_never_decide():
    """The proof's lemma: (2d-1)^2 < 3^d for every d >= 3 (so gap d loses to gap 2)."""
    assert all((2 * d - 1) ** 2 < 3**d for d in range(3, 2000))
    assert (2 * 2 - 1) ** 2 == 9 == 3**2  # at d = 2 the comparison is an equality


@pytest.mark.parametrize("n", NS_SPLIT)
def test_threshold_matches_bisection(n):
    for m in MS:
        assert threshold_closed_form(n, m) == pytest.approx(exact_threshold(n, m), abs=1e-9)


def _rational_between(lo: float, hi: float) -> Fraction:
    return Fraction((lo + hi) / 2).limit_denominator(10**12)


@pytest.mark.parametrize("n", NS)
def test_threshold_brackets_in_exact_arithmetic(n):
    """Just below beta* some input has error >= 1/2 and just above none has, decided exactly:
    y = e^{-beta} rational on either side of y* = N^{-1/d}, placed by exact comparison."""
    for m in range(1, 9):
        if count_profiles(n, m) > 20_000:
            continue
        N, d = threshold_closed_form_terms(n, m)
        y_star = N ** (-1 / d)
        for side, offset in (("below beta*", +1e-7), ("above beta*", -1e-7)):
            y = _rational_between(y_star, min(y_star + offset, 1.0))
            if side == "below beta*":
                if N == 1:  # n = 2, m = 1: beta* = 0, nothing lies below
                    continue
                assert y**d * N > 1  # y > y*, i.e. beta < beta*
                assert max_error_exact(y, n, m) >= Fraction(1, 2), (n, m, side)
            else:
                assert y**d * N < 1  # y < y*, i.e. beta > beta*
                assert max_error_exact(y, n, m) < Fraction(1, 2), (n, m, side)
        if d == 1 or N == 9:  # y* rational (N = 9, d = 2: y* = 1/3): error exactly 1/2 there
            y_star_exact = Fraction(1, N) if d == 1 else Fraction(1, 3)
            assert max_error_exact(y_star_exact, n, m) == Fraction(1, 2)


def test_n_two_below_ln_two_still_exact():
    """n = 2: ln(2(n-1)) = ln 2 < 1, so the proposition's proof (beta >= 1) does not cover
    beta in (ln 2, 1); the threshold theorem does: beta*(2, m) <= ln(3)/2 < ln 2."""
    for m in range(1, 12):
        assert threshold_closed_form(2, m) < math.log(2)
        assert max_error(0.70, 2, m) < 0.5  # 0.70 in (ln 2, 1)
    # and the exact threshold ln(3)/2 = 0.5493... is where it stops being exact (m >= 2)
    assert max_error(0.56, 2, 10) < 0.5 <= max_error(0.54, 2, 10)
    assert max_error(0.01, 2, 1) < 0.5 <= max_error(0.0, 2, 1)  # m = 1: beta* = 0


# --------------------------------------------------- below beta = 1: saturation in m


@pytest.mark.parametrize("n", [2, 3, 4, 6, 8])
@pytest.mark.parametrize("beta", [0.05, 0.1, 0.3, 0.5, 0.7, 0.99])
def test_max_error_saturates_below_the_bound(n, beta):
    """For beta > 0 the worst case is below (n-1)/(e beta) for every m and stops changing
    from m = saturation_width(beta, n) on."""
    m0 = saturation_width(beta, n)
    bound = saturation_bound(beta, n)
    plateau = max_error_closed_form(beta, n, m0)
    for m in range(1, m0 + 60):
        value = max_error_closed_form(beta, n, m)
        assert value < bound
        if m >= m0:
            assert value == plateau
        else:
            assert value < plateau


@pytest.mark.parametrize("beta", [0.3, 0.5, 0.7, 0.9])
def test_saturation_exhaustively_for_length_three(beta):
    """The same, from the exhaustive search over all profiles up to m = 30 (n = 3)."""
    m0 = saturation_width(beta, 3)
    assert m0 <= 10
    values = [max_error(beta, 3, m) for m in range(1, 31)]
    plateau = values[m0 - 1]
    assert all(v == pytest.approx(plateau, rel=1e-12) for v in values[m0 - 1:])
    assert all(v < plateau - 1e-9 for v in values[: m0 - 1])
    assert plateau < saturation_bound(beta, 3)


def test_only_beta_zero_grows_without_bound():
    for n in (2, 3, 5):
        for m in range(1, 40):
            assert max_error_closed_form(0.0, n, m) == pytest.approx((n - 1) * m / n, rel=1e-12)
    assert max_error(0.0, 3, 8) == pytest.approx(16 / 3, rel=1e-12)


# -------------------------------------------- from beta = 1 on: gaps 1 and 2 (n <= 15)


@pytest.mark.parametrize("n", range(2, 16))
def test_from_beta_one_only_gaps_one_and_two_matter(n):
    for beta in np.linspace(1.0, 8.0, 57):
        assert worst_gap(float(beta), n, 80) in (1, 2), (n, beta)
    # exactly, at rational e^{-beta} <= 1/e (beta >= 1): the max over all d <= 80 is the
    # max over d <= 2
    for y in (Fraction(367, 1000), Fraction(1, 3), Fraction(1, 5), Fraction(1, 50)):
        assert y < Fraction(1) / Fraction(math.e) - Fraction(1, 10**6)
        assert max_error_closed_form_exact(y, n, 80) == max_error_closed_form_exact(y, n, 2)


def test_length_three_column_constant_in_m_from_beta_one():
    """n = 3, beta >= 1: the exhaustive max error is the same for every m >= 2."""
    for beta in (1.0, 1.003, math.log(1 + math.sqrt(3)), 1.2, math.log(4), 2.0, 3.0):
        ref = max_error(beta, 3, 2)
        for m in range(3, 13):
            assert max_error(beta, 3, m) == pytest.approx(ref, rel=1e-12), (beta, m)


@pytest.mark.parametrize("n", range(2, 16))
def test_gap_one_is_worst_exactly_from_ln_one_plus_sqrt_n(n):
    """Gap 1 beats gap 2 iff e^beta >= 1 + sqrt(n); then m = 1 agrees with every m."""
    cross = math.log(1 + math.sqrt(n))
    for beta in (max(1.0, cross + 1e-6), cross + 0.3, cross + 3):
        assert worst_gap(beta, n, 40) == 1
        u = (n - 1) * math.exp(-beta)
        assert max_error_closed_form(beta, n, 40) == pytest.approx(u / (1 + u), rel=1e-12)
    if cross - 1e-6 >= 1.0:
        assert worst_gap(cross - 1e-6, n, 40) == 2


def test_large_n_counterexample_gap_three_matters_at_beta_one():
    """The n <= 15 condition is needed: at n = 20, beta = 1, gap 3 is worst (exhaustive)."""
    assert worst_gap(1.0, 20, 10) == 3
    assert max_error(1.0, 20, 3) > max_error(1.0, 20, 2) + 0.01
    assert max_error(1.0, 20, 3) == pytest.approx(max_error_closed_form(1.0, 20, 3), rel=1e-12)
    assert worst_gap(1.0, 101, 20) == 4


def test_bad_input():
    assert max_error_exact(0.5, 3, 2) == max_error_exact(Fraction(1, 2), 3, 2)  # read exactly
    with pytest.raises(TypeError, match="decay"):
        max_error_exact("1/2", 3, 2)
    with pytest.raises(ValueError, match="decay"):
        max_error_exact(float("nan"), 3, 2)
    with pytest.raises(ValueError, match="decay"):
        max_error_exact(Fraction(3, 2), 3, 2)
    with pytest.raises(ValueError, match="n"):
        threshold_closed_form(1, 3)
    with pytest.raises(ValueError, match="m"):
        threshold_closed_form(3, 0)



def test_huge_counts_and_temperatures_are_refused_at_once():
    import time

    t = time.process_time()
    with pytest.raises(ValueError, match="n=1000000, m=1000000"):
        count_profiles(10**6, 10**6)
    with pytest.raises(ValueError, match="beta"):
        max_error(1.7e308, 3, 4)
    assert time.process_time() - t < 1
    assert count_profiles(2000, 3) == math.comb(2003, 2000)  # exact, a Python int
