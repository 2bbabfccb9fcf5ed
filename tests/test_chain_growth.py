"""The growth rate of the best chain factor, with the care rho(1) = 0 needs: rho(G) > 0
exactly from G0 = floor(2 eps) + 1 on, and kappa lambda^G <= rho(G) <= lambda^G there, all
checked in exact arithmetic."""

import math
from fractions import Fraction

import pytest

from companion.amplification import (
    best_chain_factor,
    chain_growth,
    chain_growth_rate,
    check_chain_growth,
    log2_best_chain_factor,
)

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

    from companion import amplification

    real = amplification.chain_growth
    try:
        amplification.chain_growth = lambda n=3, eps=Fraction(1, 2): dataclasses.replace(
            real(n, eps), kappa_power=Fraction(1, 15))
        with pytest.raises(AssertionError):
            check_chain_growth(20)
    finally:
        amplification.chain_growth = real
