"""Lemma C: D(x;z_0) >= prod_i c(g_i) D(x;z_k) along keys whose overlaps rise by g_1..g_k; the
best chain is worth rho_{n,eps}(G) = max over compositions of G of prod_i max(c(g_i), 0)
(chapter 3: ``lem-amplification``, ``def-best-chain``, ``lem-fekete``, ``prop-chain-growth``)."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from companion.bounds.gap_domination import domination_factor
from companion.checks import check_eps, check_int, check_length

__all__ = ["best_chain_factor", "best_chain", "brute_force_chain_factor",
           "log2_best_chain_factor", "chain_growth_rate", "chain_growth", "check_chain_growth"]

#: Largest total gap that :func:`brute_force_chain_factor` enumerates (2**(G-1) compositions).
MAX_BRUTE_FORCE_GAP = 20
#: Cost budget of the exact DP table rho(0..G): G**2 * bits(link weight) <= 2**31 (~130 MB).
DP_BUDGET = 2**31
#: Largest size in bits of an exact rho(G) (its denominator D**G has G * bits(D) bits).
MAX_EXACT_BITS = 2**20
#: Largest G_max of :func:`check_chain_growth` (~0.5 s at eps = 1/2).
MAX_CHECK_GAP = 4096


def _log(c: Fraction) -> float:
    """ln c for a positive Fraction of any size (float(c) overflows past ~1e308)."""
    return math.log(c.numerator) - math.log(c.denominator)


def link_factor(g, n: int = 3, eps=Fraction(1, 2)) -> Fraction:
    """max(c_{n,eps}(g), 0): what one link of gap g proves about D(z)/D(z')."""
    # a factor <= 0 proves nothing and must not be chained (two negative factors would
    # "prove" a positive ratio): clamped, such a chain is worth exactly 0
    return max(domination_factor(g, n, 2 * eps), Fraction(0))


class _ChainTable:
    """Exact DP table of rho(0..G) for one (n, eps), grown on demand: with eps = p/q, D = 2p,
    R[G] = rho(G) D**G is a max of products of the integers c(g) D**g (Python ints)."""

    def __init__(self, n: int, eps: Fraction):
        self.n, self.eps = n, eps
        self.D = 2 * eps.numerator
        self.weights = [0]  # W(g) = max(c(g), 0) * D**g, an int
        self.R = [1]  # R[G] = rho(G) * D**G; rho(0) = 1 (the empty chain)
        self.last = [0]  # last part of the optimal composition (0 for G = 0 or rho = 0)
        self.parts = [0]  # number of parts of the optimal composition
        self.max_part = self._max_useful_part()
        # R[G] grows by ~per_unit bits per unit of G: bits(D), or more for a tiny eps = p/q
        per_unit = max([self.D.bit_length()] + [
            -(-(link_factor(g, n, eps) * self.D**g).numerator.bit_length() // g)
            for g in range(1, self.max_part + 1)])
        self.dp_limit = math.isqrt(DP_BUDGET // per_unit)
        self._period = None  # (start a, period p, W[p]) once found; False: not found

    def dp_gap(self, G: int, what: str) -> int:
        """`G` if the exact DP may be grown to it (G**2 * bits <= DP_BUDGET), else raise."""
        if G > self.dp_limit:
            raise ValueError(f"G must be at most {self.dp_limit} for {what} at n = {self.n}, "
                             f"eps = {self.eps} (the exact DP's cost), got {G}")
        return G

    def period(self):
        """(a, p, W[p]) with R[H + p] = W[p] R[H] for every H >= a, or None: the DP depends
        on its last max_part values only, so max_part consecutive matches prove it."""
        if self._period is None:
            self._period = False
            P = self.max_part
            self.grow(min(P, self.dp_limit))
            p = max(range(1, P + 1), key=lambda g: (math.log2(self.weights[g]) / g
                                                    if self.weights[g] > 0 else -math.inf))
            w, run, t, limit = self.weights[p], 0, p, min(self.dp_limit, 4096)
            while t <= limit and w > 0:
                self.grow(t)
                run = run + 1 if self.R[t] == w * self.R[t - p] else 0
                if run >= P:
                    self._period = (t - p - P + 1, p, w)
                    break
                t += 1
        return self._period or None

    def reduce(self, G: int):
        """(H, k, w): R[G] = w**k R[H] with H in the DP table, grown to H (k = 0: H = G)."""
        found = self.period() if G > min(self.dp_limit, 4096) else None
        if found is None:
            H, k, w = self.dp_gap(G, "rho(G)"), 0, 1
        elif G < found[0] + found[1]:
            H, k, w = G, 0, 1
        else:
            a, p, w = found
            H = a + (G - a) % p
            k = (G - H) // p
        self.grow(H)
        return H, k, w

    def _max_useful_part(self) -> int:
        """Largest link in any optimal composition: with h = g - 2 eps and c(t) > 1, splitting
        g into (t, g - t) gains c(t) (h - t) / h > 1 exactly when h > c(t) t / (c(t) - 1)."""
        t, caps = 1, []
        while len(caps) < 64:
            c = link_factor(t, self.n, self.eps)
            if c > 1:
                caps.append(math.floor(2 * self.eps + c * t / (c - 1)))
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
        H, k, w = self.reduce(G)
        return Fraction(self.R[H] * w**k, self.D**G)

    def log2_rho(self, G: int) -> float:
        H, k, w = self.reduce(G)
        if self.R[H] == 0:
            return -math.inf
        return math.log2(self.R[H]) + k * math.log2(w) - G * math.log2(self.D)

    def chain(self, G: int) -> tuple[int, ...]:
        self.grow(self.dp_gap(G, "an explicit best chain"))
        gaps = []
        while G > 0 and self.R[G]:
            gaps.append(self.last[G])
            G -= self.last[G]
        return tuple(reversed(gaps))


@functools.cache
def chain_table(n: int, eps: Fraction) -> _ChainTable:
    """The cached DP table of (n, eps): .rho(G), .chain(G), .log2_rho(G) for checked G, n, eps
    (the core of the functions below, for the package's own calls)."""
    return _ChainTable(n, eps)


def best_chain_factor(G, n: int = 3, eps=Fraction(1, 2)) -> Fraction:
    """rho_{n,eps}(G), exact. Limit: G * bits(2p) <= 2**20 (eps = p/q; G <= 524288 at 1/2);
    past the DP's periodic regime rho(G + p) = c(p) rho(G) gives it in O(1) DP."""
    G, n, eps = check_int(G, "G (total gap)", 1), check_length(n), check_eps(eps)
    if G * (2 * eps.numerator).bit_length() > MAX_EXACT_BITS:
        raise ValueError(f"G must be at most {MAX_EXACT_BITS // (2 * eps.numerator).bit_length()}"
                         f" for an exact rho(G) at eps = {eps} (its denominator (2p)**G), got "
                         f"{G}; use log2_best_chain_factor")
    return chain_table(n, eps).rho(G)


def best_chain(G, n: int = 3, eps=Fraction(1, 2)) -> tuple[int, ...]:
    """An optimal composition of G with the fewest links (so the smallest witness family);
    () if rho(G) = 0. Limit: G**2 * bits(2p) <= 2**31 (G <= 32768 at eps = 1/2)."""
    G, n, eps = check_int(G, "G (total gap)", 1), check_length(n), check_eps(eps)
    return chain_table(n, eps).chain(G)


def brute_force_chain_factor(G, n: int = 3, eps=Fraction(1, 2)) -> Fraction:
    """rho_{n,eps}(G) by enumerating all 2**(G-1) compositions of G (G <= 20), exact."""
    G = check_int(G, "G (total gap)", 1)
    if G > MAX_BRUTE_FORCE_GAP:
        raise ValueError(f"G must be at most {MAX_BRUTE_FORCE_GAP} for brute force (2**(G-1) "
                         f"compositions), got {G}; use best_chain_factor")
    n, eps = check_length(n), check_eps(eps)
    factors = {g: link_factor(g, n, eps) for g in range(1, G + 1)}
    best = [0, 1]  # numerator, denominator of the best product so far

    # depth-first over every composition, each product an unreduced (num, den) pair of ints
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
    """log2 rho_{n,eps}(G) (-inf when rho = 0) from the exact ints, for any G (exact period)."""
    G, n, eps = check_int(G, "G (total gap)", 1), check_length(n), check_eps(eps)
    return chain_table(n, eps).log2_rho(G)


def _best_link(n: int, eps: Fraction, max_gap: int | None = None) -> tuple[int, float]:
    """(g*, ln lambda), lambda = max_g c(g)^(1/g): no g > 2 eps + 1/ln(lambda) + 2 can win
    (lambda^g / c(g) increases past it), so the scan stops there (or at max_gap)."""
    best_g, best, g = 0, -math.inf, 1
    while max_gap is None or g <= max_gap:
        if g > 3 and best > 0 and g > 2 * eps + 1 / best + 2:
            break
        c = link_factor(g, n, eps)
        if c > 0 and _log(c) / g > best:
            best_g, best = g, _log(c) / g
        g += 1
    return best_g, best


def chain_growth_rate(n: int = 3, eps=Fraction(1, 2), max_gap: int = 10_000) -> tuple[int, float]:
    """(g*, lambda): lim rho(G)^(1/G) = lambda = max_g c(g)^(1/g), attained at link length g*
    (rho is supermultiplicative and rho(G) <= lambda**G); links up to max_gap compared."""
    n, eps = check_length(n), check_eps(eps)
    best_g, log_rate = _best_link(n, eps, check_int(max_gap, "max_gap", 1))
    return best_g, _exp_rate(log_rate, eps)


def _exp_rate(log_rate: float, eps) -> float:
    if log_rate > 709:  # exp overflows a float past ~709.78
        raise ValueError(f"eps = {eps} gives a growth rate lambda = e**{log_rate:.6g}, beyond a "
                         "float; chain_growth(n, eps).best_factor holds lambda**best_link exactly")
    return math.exp(log_rate)


def log2_rho_table(G_max: int, n: int = 3, eps: Fraction = Fraction(1, 2)) -> np.ndarray:
    """log2 rho_{n,eps}(G) for G = 0..G_max (-inf where rho = 0) from the exact DP table."""
    table = chain_table(n, eps)
    table.grow(G_max)
    log2_D = math.log2(table.D)
    return np.array([math.log2(R) - G * log2_D if R > 0 else -math.inf
                     for G, R in enumerate(table.R[: G_max + 1])])


@dataclass(frozen=True)
class ChainGrowth:
    """kappa lambda^G <= rho_{n,eps}(G) <= lambda^G for G >= G0 = floor(2 eps) + 1, stored
    exactly as lambda**best_link = best_factor and kappa**best_link = kappa_power."""

    n: int
    eps: Fraction
    best_link: int  # g*: c(g*)^(1/g*) = max_g c(g)^(1/g)
    best_factor: Fraction  # c(g*) = lambda**g*
    first_positive: int  # G0 = floor(2 eps) + 1: rho(G) > 0 exactly when G >= G0
    kappa_power: Fraction  # kappa**g* = min_{G0 <= r < G0 + g*} rho(r)**g* / c(g*)**r

    @property
    def rate(self) -> float:
        """lambda = lim rho(G)^(1/G)."""
        return _exp_rate(_log(self.best_factor) / self.best_link, self.eps)

    @property
    def kappa(self) -> float:
        return float(self.kappa_power) ** (1 / self.best_link)


def chain_growth(n: int = 3, eps=Fraction(1, 2)) -> ChainGrowth:
    """The exact constants of kappa lambda^G <= rho_{n,eps}(G) <= lambda^G for G >= G0."""
    n, eps = check_length(n), check_eps(eps)
    g_star = _best_link(n, eps)[0]  # by floats; confirmed exactly below against every g
    c_star = link_factor(g_star, n, eps)
    # c(g)^(1/g) <= c(g*)^(1/g*) for every g: past 2 eps + 1/ln(lambda), lambda^g / c(g) grows
    for g in range(1, math.ceil(2 * eps + 1 / (_log(c_star) / g_star)) + 3):
        c = link_factor(g, n, eps)
        if c > 0 and c**g_star > c_star**g:
            raise ArithmeticError(f"g* = {g_star} is not a best link: c({g}) beats it")
    G0 = math.floor(2 * eps) + 1
    kappa_power = min(chain_table(n, eps).rho(r) ** g_star / c_star**r
                      for r in range(G0, G0 + g_star))
    return ChainGrowth(n, eps, g_star, c_star, G0, kappa_power)


def check_chain_growth(G_max: int, n: int = 3, eps=Fraction(1, 2)) -> int:
    """Assert exactly for 1 <= G <= G_max (<= 4096): rho(G) = 0 iff G < G0, else
    kappa^g* lambda^(g* G) <= rho(G)^g* <= lambda^(g* G). Returns G_max."""
    G_max = check_int(G_max, "G_max", 1, MAX_CHECK_GAP)
    growth = chain_growth(n, eps)
    g, c, kp = growth.best_link, growth.best_factor, growth.kappa_power
    for G in range(1, G_max + 1):
        rho = chain_table(growth.n, growth.eps).rho(G)
        if G < growth.first_positive:
            assert rho == 0, (G, rho)
        else:
            top = c**G
            assert rho > 0 and kp * top <= rho**g <= top, (G, rho)
    return G_max
