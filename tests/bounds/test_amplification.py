"""Lemma C: the best-chain factor rho_{n,eps}(G) (exact DP) against brute force, and its shape."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from companion.bounds.amplification import (
    best_chain,
    best_chain_factor,
    brute_force_chain_factor,
    chain_growth,
    chain_growth_rate,
    check_chain_growth,
    link_factor,
    log2_best_chain_factor,
)
from companion.bounds.gap_domination import gap_domination_factor


def chain_value(gaps, n: int = 3, eps=Fraction(1, 2)) -> Fraction:
    """prod_i max(c_{n,eps}(g_i), 0) for an explicit chain of gaps (the oracle)."""
    return math.prod((link_factor(g, n, eps) for g in gaps), start=Fraction(1))


def compositions(G):
    """Every composition of G (ordered tuples of ints >= 1 summing to G)."""
    for cuts in range(2 ** (G - 1)):
        parts, start = [], 0
        for i in range(1, G):
            if cuts >> (i - 1) & 1:
                parts.append(i - start)
                start = i
        parts.append(G - start)
        yield tuple(parts)


EPS = st.sampled_from([Fraction(1, 2), Fraction(2, 5), Fraction(1, 3), Fraction(1, 4),
                       Fraction(1, 10), Fraction(7, 20)])
N = st.integers(3, 9)


def test_dp_equals_brute_force_up_to_20():
    for G in range(1, 21):
        assert best_chain_factor(G) == brute_force_chain_factor(G), G


@settings(max_examples=60, deadline=None)
@given(G=st.integers(1, 13), n=N, eps=EPS)
def test_dp_equals_brute_force_any_n_eps(G, n, eps):
    assert best_chain_factor(G, n, eps) == brute_force_chain_factor(G, n, eps)


@settings(max_examples=60, deadline=None)
@given(G=st.integers(1, 12), n=N, eps=EPS)
def test_best_chain_is_optimal_and_shortest(G, n, eps):
    gaps = best_chain(G, n, eps)
    rho = best_chain_factor(G, n, eps)
    if rho == 0:
        assert gaps == ()
        return
    assert sum(gaps) == G and chain_value(gaps, n, eps) == rho
    optimal = [c for c in compositions(G) if chain_value(c, n, eps) == rho]
    assert len(gaps) == min(len(c) for c in optimal)


def test_small_values_at_eps_half():
    # c_{3,1/2}(g) = g - 1: a gap-1 link proves nothing, a gap-2 link only a factor 1.
    assert [best_chain_factor(G) for G in range(1, 13)] == [0, 1, 2, 3, 4, 5, 6, 9, 12, 16, 20, 27]
    assert best_chain(12) == (4, 4, 4)
    assert chain_value((1, 5)) == 0 and chain_value((2, 2, 2)) == 1


@settings(max_examples=80, deadline=None)
@given(G=st.integers(1, 60), n=N, eps=EPS)
def test_rho_is_monotone_in_G_n_and_eps(G, n, eps):
    rho = best_chain_factor(G, n, eps)
    assert best_chain_factor(G + 1, n, eps) >= rho
    assert best_chain_factor(G, n + 1, eps) >= rho
    smaller_eps = eps * Fraction(9, 10)
    assert best_chain_factor(G, n, smaller_eps) >= rho


@settings(max_examples=60, deadline=None)
@given(G=st.integers(1, 40), H=st.integers(1, 40), n=N, eps=EPS)
def test_rho_is_supermultiplicative(G, H, n, eps):
    # concatenating two chains is a chain: what concatenated codes rely on
    assert best_chain_factor(G + H, n, eps) >= best_chain_factor(G, n, eps) * best_chain_factor(
        H, n, eps)


def test_growth_rate_n3_eps_half():
    g_star, rate = chain_growth_rate(3)
    assert g_star == 5 and rate == pytest.approx(4 ** 0.2, rel=1e-12)
    # rho(G) <= rate**G always, with equality on multiples of the best link length
    for k in range(1, 25):
        assert best_chain_factor(5 * k) == 4**k
    for G in range(1, 200):
        assert log2_best_chain_factor(G) <= G * 0.4 + 1e-9


@settings(max_examples=40, deadline=None)
@given(n=N, eps=EPS, G=st.integers(1, 150))
def test_growth_rate_bounds_rho(n, eps, G):
    _, rate = chain_growth_rate(n, eps)
    assert log2_best_chain_factor(G, n, eps) <= G * __import__("math").log2(rate) + 1e-9


def test_link_factor_is_clamped_gap_domination_factor():
    for n in (3, 4, 7):
        for eps in (Fraction(1, 2), Fraction(1, 5)):
            for g in range(1, 10):
                assert link_factor(g, n, eps) == max(gap_domination_factor(g, n, eps), 0)
    assert link_factor(1) == 0 and link_factor(2) == 1


def test_exact_and_log2_agree_for_large_G():
    for n in (3, 4, 6, 10):
        rho = best_chain_factor(400, n)
        assert log2_best_chain_factor(400, n) == pytest.approx(
            __import__("math").log2(rho.numerator) - __import__("math").log2(rho.denominator),
            rel=1e-12)


@pytest.mark.parametrize("bad, exc, match", [
    (0, ValueError, "G"), (-3, ValueError, "G"), (1.5, TypeError, "G"), (True, TypeError, "G"),
])
def test_bad_gap(bad, exc, match):
    with pytest.raises(exc, match=match):
        best_chain_factor(bad)
    with pytest.raises(exc, match=match):
        brute_force_chain_factor(bad)


def test_bad_n_eps_and_sizes():
    with pytest.raises(ValueError, match=r"eps.*\(0, 1/2\]"):
        best_chain_factor(5, 3, Fraction(3, 5))
    with pytest.raises(ValueError, match="eps"):
        best_chain_factor(5, 3, 0)
    with pytest.raises(TypeError, match="eps"):
        best_chain_factor(5, 3, "1/2")
    with pytest.raises(ValueError, match="n"):
        best_chain_factor(5, 2)
    with pytest.raises(ValueError, match="at most 20"):
        brute_force_chain_factor(21)


def test_dp_limit_counts_the_link_weights_bits():
    """At a tiny eps = p/q the link weights carry ~bits(q) bits per unit of gap, not bits(2p):
    the exact DP's limit shrinks with them (it took > 20 s at G = 2681, eps = 5e-324), and
    stays 32768 at eps = 1/2."""
    import time

    start = time.perf_counter()
    with pytest.raises(ValueError, match=r"G must be at most 14\d\d for an explicit best chain"):
        best_chain(2681, eps=5e-324)
    assert time.perf_counter() - start < 5
    with pytest.raises(ValueError, match="G must be at most 32768"):
        best_chain(32769)


# ----
# The growth rate of the best chain factor, with the care rho(1) = 0 needs: rho(G) > 0
# exactly from G0 = floor(2 eps) + 1 on, and kappa lambda^G <= rho(G) <= lambda^G there, all
# checked in exact arithmetic.
CASES = [(n, eps) for n in (3, 4, 6, 10)
         for eps in (Fraction(1, 2), Fraction(2, 5), Fraction(1, 4), Fraction(1, 10))]


@pytest.mark.parametrize("n, eps", CASES)
def test_sandwich_holds_exactly(n, eps):
    assert check_chain_growth(120, n, eps) == 120


def test_constants_n3_eps_half():
    g = chain_growth(3)
    assert (g.best_link, g.best_factor, g.first_positive) == (5, 4, 2)
    assert best_chain_factor(1) == 0  # the reason Fekete needs G >= 2 here
    # kappa^5 = rho(2)^5 / 4^2 = 1/16: the pair (G0 = 2) is the weakest start
    assert g.kappa_power == Fraction(1, 16)
    assert g.rate == pytest.approx(4 ** 0.2, rel=1e-15)


@pytest.mark.parametrize("n, eps", CASES)
def test_first_positive_is_where_a_single_link_works(n, eps):
    g = chain_growth(n, eps)
    assert g.first_positive == (2 if eps == Fraction(1, 2) else 1)
    for G in range(1, 12):
        assert (best_chain_factor(G, n, eps) > 0) == (G >= g.first_positive)


@pytest.mark.parametrize("n, eps", CASES)
def test_limit_of_rho_to_the_one_over_G(n, eps):
    """rho(G)^(1/G) -> lambda, within log2(1/kappa)/G, at G = 600."""
    g = chain_growth(n, eps)
    assert g.rate == pytest.approx(chain_growth_rate(n, eps)[1], rel=1e-12)
    G = 600
    per_unit = log2_best_chain_factor(G, n, eps) / G
    assert math.log2(g.rate) + math.log2(g.kappa) / G - 1e-12 <= per_unit
    assert per_unit <= math.log2(g.rate) + 1e-12


def test_sandwich_check_can_fail():
    """A wrong kappa is caught: the check is not vacuous."""
    import dataclasses

    from companion.bounds import amplification

    real = amplification.chain_growth
    try:
        amplification.chain_growth = lambda n=3, eps=Fraction(1, 2): dataclasses.replace(
            real(n, eps), kappa_power=Fraction(1, 15))
        with pytest.raises(AssertionError):
            check_chain_growth(20)
    finally:
        amplification.chain_growth = real
