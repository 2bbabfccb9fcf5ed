"""Lemma C: amplification of gap domination along a chain of keys.

A chain of keys z_0, ..., z_k whose overlaps with the query rise by gaps g_1, ..., g_k gives
D(x;z_0) >= prod_i c(g_i) * D(x;z_k). The best chain for a total gap G is worth
rho_{n,eps}(G) = max over compositions G = g_1 + ... + g_k of prod_i max(c_{n,eps}(g_i), 0).

Serves chapter 3 (``lem-amplification``, ``def-best-chain``, ``lem-fekete``,
``prop-chain-growth``).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from .checks import check_eps, check_gap, check_length
from .gap_domination import gap_domination_factor

#: Largest total gap that :func:`brute_force_chain_factor` enumerates (2**(G-1) compositions).
MAX_BRUTE_FORCE_GAP = 20


def link_factor(g, n: int = 3, eps=Fraction(1, 2)) -> Fraction:
    """max(c_{n,eps}(g), 0): what one link of gap g proves about D(z)/D(z')."""
    # A factor <= 0 proves nothing (D >= 0 holds anyway) and must not be chained: multiplying
    # D(z0) >= c1 D(z1) by a negative c2 flips the second inequality, so two negative factors
    # would "prove" a positive ratio. Clamping at 0 makes such a chain worth exactly 0.
    return max(gap_domination_factor(g, n, eps), Fraction(0))


class _ChainTable:
    """Exact DP table of rho(0..G) for one (n, eps), grown on demand.

    All link factors share the denominator D = 2p (eps = p/q): c(g) = N_g / D with N_g an
    integer. A composition with k parts is worth prod N_g / D**k; multiplying by D**G turns
    every candidate into the integer prod_i N_{g_i} D**(g_i - 1), so the DP runs on Python ints
    (exact and fast) and rho(G) = R[G] / D**G.
    """

    def __init__(self, n: int, eps: Fraction):
        self.n, self.eps = n, eps
        self.D = 2 * eps.numerator
        self.weights = [0]  # W(g) = max(c(g), 0) * D**g, an int
        self.R = [1]  # R[G] = rho(G) * D**G; rho(0) = 1 (the empty chain)
        self.last = [0]  # last part of the optimal composition (0 for G = 0 or rho = 0)
        self.parts = [0]  # number of parts of the optimal composition
        self.max_part = self._max_useful_part()

    def _max_useful_part(self) -> int:
        """Largest link length any optimal composition can contain.

        With h = g - 2 eps and a step t with c(t) > 1, splitting g into (t, g - t) multiplies
        the chain by c(t) c(g-t) / c(g) = c(t) (h - t) / h, which exceeds 1 exactly when
        h > c(t) t / (c(t) - 1). Such a part is never in an optimal chain (the split is
        strictly better, all other factors being positive), so the DP may stop at the cap.
        """
        t, caps = 1, []
        while len(caps) < 64:
            c = link_factor(t, self.n, self.eps)
            if c > 1:
                bound = 2 * self.eps + c * t / (c - 1)  # largest allowed g satisfies g <= bound
                caps.append(math.floor(bound))
            t += 1
        return max(1, min(caps))

    def grow(self, G: int) -> None:
        for g in range(len(self.weights), min(G, self.max_part) + 1):
            w = link_factor(g, self.n, self.eps) * self.D**g
            assert w.denominator == 1
            self.weights.append(int(w))
        W = self.weights
        for total in range(len(self.R), G + 1):
            best, best_last, best_parts = 0, 0, 0
            for g in range(1, min(total, self.max_part) + 1):
                value = W[g] * self.R[total - g]
                if value == 0:
                    continue
                parts = self.parts[total - g] + 1
                # ties: fewer links (a smaller witness family), then the shorter last link
                if value > best or (value == best and parts < best_parts):
                    best, best_last, best_parts = value, g, parts
            self.R.append(best)
            self.last.append(best_last)
            self.parts.append(best_parts)

    def rho(self, G: int) -> Fraction:
        self.grow(G)
        return Fraction(self.R[G], self.D**G)

    def chain(self, G: int) -> tuple[int, ...]:
        self.grow(G)
        if self.R[G] == 0:
            return ()
        gaps = []
        while G > 0:
            gaps.append(self.last[G])
            G -= self.last[G]
        return tuple(reversed(gaps))


_TABLES: dict[tuple[int, Fraction], _ChainTable] = {}


def _table(n, eps) -> _ChainTable:
    key = (check_length(n), check_eps(eps))
    if key not in _TABLES:
        _TABLES[key] = _ChainTable(*key)
    return _TABLES[key]


def best_chain_factor(G, n: int = 3, eps=Fraction(1, 2)) -> Fraction:
    """rho_{n,eps}(G) = max over compositions G = g_1 + ... + g_k of prod max(c(g_i), 0), exact."""
    G = check_gap(G)
    return _table(n, eps).rho(G)


def best_chain(G, n: int = 3, eps=Fraction(1, 2)) -> tuple[int, ...]:
    """An optimal composition (g_1, ..., g_k) of G attaining rho_{n,eps}(G); () if rho(G) = 0.

    Among optimal compositions the one with fewest links is returned, so the witness family
    built on it is as small as possible; its prefixes are optimal chains for their own totals.
    """
    G = check_gap(G)
    return _table(n, eps).chain(G)


def chain_value(gaps, n: int = 3, eps=Fraction(1, 2)) -> Fraction:
    """prod_i max(c_{n,eps}(g_i), 0) for an explicit chain of gaps (exact)."""
    if isinstance(gaps, (str, bytes)) or not hasattr(gaps, "__iter__"):
        raise TypeError(f"gaps must be a sequence of ints >= 1, got {type(gaps).__name__}")
    gaps = [check_gap(g, "gaps[i]") for g in gaps]
    if not gaps:
        raise ValueError("gaps must hold at least one link (a chain of length >= 1)")
    return math.prod((link_factor(g, n, eps) for g in gaps), start=Fraction(1))


def compositions(G) -> itertools.chain:
    """Every composition of G (ordered tuples of ints >= 1 summing to G): 2**(G-1) of them."""
    G = check_gap(G)
    for cuts in range(2 ** (G - 1)):
        parts, start = [], 0
        for i in range(1, G):
            if cuts >> (i - 1) & 1:
                parts.append(i - start)
                start = i
        parts.append(G - start)
        yield tuple(parts)


def brute_force_chain_factor(G, n: int = 3, eps=Fraction(1, 2)) -> Fraction:
    """rho_{n,eps}(G) by enumerating all 2**(G-1) compositions of G (G <= 20), exact."""
    G = check_gap(G)
    if G > MAX_BRUTE_FORCE_GAP:
        raise ValueError(
            f"G must be at most {MAX_BRUTE_FORCE_GAP} for brute force (2**(G-1) compositions), "
            f"got {G}; use best_chain_factor"
        )
    n, eps = check_length(n), check_eps(eps)
    factors = {g: link_factor(g, n, eps) for g in range(1, G + 1)}
    best = [0, 1]  # numerator, denominator of the best product so far

    # Depth-first over every composition: each leaf is one composition, its product kept as
    # an unreduced (numerator, denominator) pair of ints so a leaf costs one multiplication.
    def visit(remaining: int, num: int, den: int) -> None:
        if remaining == 0:
            if num * best[1] > best[0] * den:
                best[0], best[1] = num, den
            return
        for g in range(1, remaining + 1):
            f = factors[g]
            visit(remaining - g, num * f.numerator, den * f.denominator)

    visit(G, 1, 1)
    return Fraction(best[0], best[1])


def log2_best_chain_factor(G, n: int = 3, eps=Fraction(1, 2)) -> float:
    """log2 rho_{n,eps}(G) as a float (-inf when rho = 0); exact ints underneath, no overflow."""
    G = check_gap(G)
    table = _table(n, eps)
    table.grow(G)
    if table.R[G] == 0:
        return -math.inf
    return math.log2(table.R[G]) - G * math.log2(table.D)


def chain_growth_rate(n: int = 3, eps=Fraction(1, 2), max_gap: int = 10_000) -> tuple[int, float]:
    """(g*, lambda): lim rho(G)^(1/G) = lambda = max_g c(g)^(1/g), attained at link length g*.

    rho is supermultiplicative and rho(G) <= lambda**G, so the limit equals this maximum.
    """
    n, eps = check_length(n), check_eps(eps)
    best_g, best = 0, -math.inf
    for g in range(1, max_gap + 1):
        c = link_factor(g, n, eps)
        if c > 0:
            rate = math.log(c) / g
            if rate > best:
                best_g, best = g, rate
    return best_g, math.exp(best)


def log2_rho_table(G_max: int, n: int = 3, eps=Fraction(1, 2)) -> np.ndarray:
    """log2 rho_{n,eps}(G) for G = 0..G_max as floats (rho(0) = 1; -inf where rho = 0),
    read off the exact integer DP table."""
    table = _table(n, eps)
    table.grow(int(G_max))
    log2_D = math.log2(table.D)
    return np.array([math.log2(R) - G * log2_D if R > 0 else -math.inf
                     for G, R in enumerate(table.R[: int(G_max) + 1])])
# --- the growth rate, with the care rho(1) = 0 needs ---------------------------------------
#
# rho(1) = 0 at eps = 1/2, so log rho is -inf at G = 1 and Fekete's lemma cannot be applied
# to log rho on all G >= 1 as it stands. What holds, for every n >= 3 and eps in (0, 1/2]:
# rho(G) > 0 exactly for G >= G0 = floor(2 eps) + 1, and with lambda = max_g c(g)^(1/g)
# attained at g*, kappa lambda^G <= rho(G) <= lambda^G for all G >= G0, where
# kappa = min over G0 <= r < G0 + g* of rho(r) / lambda^r > 0 (write G = k g* + r and glue k
# best links to an optimal chain for r). Hence rho(G)^(1/G) -> lambda.


@dataclass(frozen=True)
class ChainGrowth:
    """Constants of kappa lambda^G <= rho_{n,eps}(G) <= lambda^G (all G >= first_positive).

    lambda = best_factor**(1/best_link) is the growth rate; everything is stored exactly as
    powers: lambda**best_link = best_factor and kappa**best_link = kappa_power."""

    n: int
    eps: Fraction
    best_link: int  # g*: c(g*)^(1/g*) = max_g c(g)^(1/g)
    best_factor: Fraction  # c(g*) = lambda**g*
    first_positive: int  # G0 = floor(2 eps) + 1: rho(G) > 0 exactly when G >= G0
    kappa_power: Fraction  # kappa**g* = min_{G0 <= r < G0 + g*} rho(r)**g* / c(g*)**r

    @property
    def rate(self) -> float:
        """lambda = lim rho(G)^(1/G)."""
        return float(self.best_factor) ** (1 / self.best_link)

    @property
    def kappa(self) -> float:
        return float(self.kappa_power) ** (1 / self.best_link)


def _is_best_link(g_star: int, n: int, eps: Fraction) -> int:
    """Check exactly that c(g)^(1/g) <= c(g*)^(1/g*) for every g >= 1; return the last g
    compared one by one. Past g1 > 2 eps + 1/ln(lambda) the ratio lambda^g / c(g) increases
    (d/dg [g ln lambda - ln c(g)] = ln lambda - 1/(g - 2 eps) > 0), so checking up to g1
    covers all g."""
    c_star = link_factor(g_star, n, eps)
    g1 = math.ceil(2 * eps + 1 / math.log(float(c_star) ** (1 / g_star))) + 2
    for g in range(1, g1 + 1):
        c = link_factor(g, n, eps)
        if c > 0 and c**g_star > c_star**g:
            raise ArithmeticError(f"g* = {g_star} is not a best link: c({g}) beats it")
    return g1


def chain_growth(n: int = 3, eps=Fraction(1, 2)) -> ChainGrowth:
    """The exact constants of kappa lambda^G <= rho_{n,eps}(G) <= lambda^G for G >= G0."""
    n, eps = check_length(n), check_eps(eps)
    # candidate g* by floats over g <= 2 eps + 1/ln(lambda) + 2 (c(3) >= 2, so lambda > 1);
    # _is_best_link then confirms it exactly against every g
    g_star, best, g = 0, -math.inf, 1
    while g <= 3 or g <= 2 * eps + 1 / best + 2:
        c = link_factor(g, n, eps)
        if c > 0 and math.log(c) / g > best:
            g_star, best = g, math.log(c) / g
        g += 1
    _is_best_link(g_star, n, eps)
    c_star = link_factor(g_star, n, eps)
    G0 = math.floor(2 * eps) + 1
    kappa_power = min(best_chain_factor(r, n, eps) ** g_star / c_star**r
                      for r in range(G0, G0 + g_star))
    return ChainGrowth(n, eps, g_star, c_star, G0, kappa_power)


def check_chain_growth(G_max: int, n: int = 3, eps=Fraction(1, 2)) -> int:
    """Verify exactly, for every 1 <= G <= G_max: rho(G) = 0 iff G < G0, and
    kappa^g* lambda^(g* G) <= rho(G)^g* <= lambda^(g* G) for G >= G0 (integers/Fractions, no
    floats). Returns the number of G checked; raises AssertionError on a violation."""
    G_max = check_gap(G_max, "G_max")
    growth = chain_growth(n, eps)
    g, c, kp = growth.best_link, growth.best_factor, growth.kappa_power
    for G in range(1, G_max + 1):
        rho = best_chain_factor(G, n, eps)
        if G < growth.first_positive:
            assert rho == 0, (G, rho)
            continue
        assert rho > 0, (G, rho)
        power, top = rho**g, c**G
        assert kp * top <= power <= top, (G, rho)
    return G_max
