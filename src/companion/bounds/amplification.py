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

from companion.bounds.gap_domination import gap_domination_factor
from companion.checks import check_eps, check_gap, check_int, check_length

#: Largest total gap that :func:`brute_force_chain_factor` enumerates (2**(G-1) compositions).
MAX_BRUTE_FORCE_GAP = 20
#: Largest G that :func:`compositions` accepts (2**(G-1) compositions, each of length <= G).
MAX_COMPOSITION_GAP = 64
#: Cost budget of the exact DP table rho(0..G): it holds G integers of about G * bits(D) bits
#: (D = 2p for eps = p/q), i.e. ~G**2 bits(D) / 16 bytes, so G**2 * bits(D) <= DP_BUDGET keeps
#: it under ~130 MB and a few seconds (G <= 32768 at eps = 1/2).
DP_BUDGET = 2**31
#: Largest size in bits of an exact rho(G) (its denominator D**G has G * bits(D) bits; the
#: Fraction's gcd on such numbers takes ~0.5 s at this size).
MAX_EXACT_BITS = 2**20
#: Largest G_max of :func:`check_chain_growth` (exact comparisons of G-bit numbers for every
#: G: ~0.5 s at eps = 1/2).
MAX_CHECK_GAP = 4096


def _log(c: Fraction) -> float:
    """ln c for a positive Fraction of any size (float(c) overflows past ~1e308)."""
    return math.log(c.numerator) - math.log(c.denominator)


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
        # R[G] grows by about `per_unit` bits per unit of G: bits(D), or more when a link's
        # integer weight is larger (a tiny eps = p/q makes c(g) ~ q/p: ~1000 bits at 5e-324)
        per_unit = max([self.D.bit_length()] + [
            -(-(max(gap_domination_factor(g, n, eps), 0) * self.D**g).numerator.bit_length()
              // g) for g in range(1, self.max_part + 1)])
        self.dp_limit = math.isqrt(DP_BUDGET // per_unit)
        self._period = None  # (start a, period p, W[p]) once found; False: not found

    def dp_gap(self, G: int, what: str, name: str = "G") -> int:
        """`G` if the exact DP may be grown to it (G**2 * bits(D) <= DP_BUDGET), else raise."""
        if G > self.dp_limit:
            raise ValueError(
                f"{name} must be at most {self.dp_limit} for {what} at n = {self.n}, eps = "
                f"{self.eps} (the exact DP table costs ~G**2 * bits(link weight)/16 bytes), "
                f"got {G}")
        return G

    def period(self):
        """(a, p, W[p]) with R[H + p] = W[p] R[H] for every H >= a, or None.

        The DP is homogeneous in its last max_part values: if R[H + p] = W[p] R[H] holds for
        max_part consecutive H, the recurrence carries it to every larger H (each R[t] is the
        same max over values that are all scaled by W[p]). p is the best link (the largest
        W[g]**(1/g)); the identity is checked exactly on the integers, so a wrong p only means
        no period is found."""
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
        """(H, k, w): R[G] = w**k R[H] with H in the DP table (k = 0: G itself)."""
        found = self.period() if G > min(self.dp_limit, 4096) else None
        if found is None:
            return self.dp_gap(G, "rho(G)"), 0, 1
        a, p, w = found
        if G < a + p:
            return G, 0, 1
        H = a + (G - a) % p
        return H, (G - H) // p, w

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
        bits = G * self.D.bit_length()
        if bits > MAX_EXACT_BITS:
            raise ValueError(
                f"G must be at most {MAX_EXACT_BITS // self.D.bit_length()} for an exact rho(G) "
                f"at eps = {self.eps} (its denominator (2p)**G would have ~{bits} bits, limit "
                f"{MAX_EXACT_BITS}), got {G}; use log2_best_chain_factor")
        H, k, w = self.reduce(G)
        self.grow(H)
        return Fraction(self.R[H] * w**k, self.D**G)

    def log2_rho(self, G: int) -> float:
        H, k, w = self.reduce(G)
        self.grow(H)
        if self.R[H] == 0:
            return -math.inf
        return math.log2(self.R[H]) + k * math.log2(w) - G * math.log2(self.D)

    def chain(self, G: int) -> tuple[int, ...]:
        self.grow(self.dp_gap(G, "an explicit best chain"))
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
    """rho_{n,eps}(G) = max over compositions G = g_1 + ... + g_k of prod max(c(g_i), 0), exact.

    Limit: the exact value has ~G * log2(2p) bits (eps = p/q), so G * bits(2p) <= 2**20
    (G <= 524288 at eps = 1/2); larger G raise ValueError (use log2_best_chain_factor). Past
    the DP's periodic regime rho(G + p) = c(p) rho(G) (checked exactly) gives it in O(1) DP."""
    G = check_gap(G)
    return _table(n, eps).rho(G)


def best_chain(G, n: int = 3, eps=Fraction(1, 2)) -> tuple[int, ...]:
    """An optimal composition (g_1, ..., g_k) of G attaining rho_{n,eps}(G); () if rho(G) = 0.

    Among optimal compositions the one with fewest links is returned, so the witness family
    built on it is as small as possible; its prefixes are optimal chains for their own totals.
    Limit: G**2 * bits(2p) <= 2**31 (eps = p/q; G <= 32768 at eps = 1/2), the exact DP's cost.
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
    """Every composition of G (ordered tuples of ints >= 1 summing to G): 2**(G-1) of them.
    Limit: G <= 64 (:data:`MAX_COMPOSITION_GAP`)."""
    G = check_int(G, "G (total gap)", 1, MAX_COMPOSITION_GAP)
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
    """log2 rho_{n,eps}(G) as a float (-inf when rho = 0); exact ints underneath, no overflow.

    Any G: past the DP's periodic regime rho(G + p) = c(p) rho(G) (an identity checked exactly,
    see ``_ChainTable.period``) reduces G to the table, so the cost is bounded. Should no period
    appear, G is limited like :func:`best_chain` (G**2 * bits(2p) <= 2**31)."""
    G = check_gap(G)
    return _table(n, eps).log2_rho(G)


def chain_growth_rate(n: int = 3, eps=Fraction(1, 2), max_gap: int = 10_000) -> tuple[int, float]:
    """(g*, lambda): lim rho(G)^(1/G) = lambda = max_g c(g)^(1/g), attained at link length g*.

    rho is supermultiplicative and rho(G) <= lambda**G, so the limit equals this maximum.
    ``max_gap``: the longest link compared (any int >= 1; the cost is bounded regardless:
    past g > max(3, 2 eps + 1/ln(best so far) + 2) no longer link can win, see
    :func:`chain_growth`, so the scan stops there).
    """
    n, eps = check_length(n), check_eps(eps)
    max_gap = check_int(max_gap, "max_gap", 1)
    best_g, best = 0, -math.inf
    for g in range(1, max_gap + 1):
        if g > 3 and best > 0 and g > 2 * eps + 1 / best + 2:
            break
        c = link_factor(g, n, eps)
        if c > 0:
            rate = _log(c) / g
            if rate > best:
                best_g, best = g, rate
    return best_g, _exp_rate(best, eps)


def _exp_rate(log_rate: float, eps) -> float:
    if log_rate > 709:  # exp overflows a float past ~709.78
        raise ValueError(
            f"eps = {eps} gives a growth rate lambda = e**{log_rate:.6g}, beyond a float's "
            "range; chain_growth(n, eps).best_factor holds lambda**best_link exactly")
    return math.exp(log_rate)


def log2_rho_table(G_max: int, n: int = 3, eps=Fraction(1, 2)) -> np.ndarray:
    """log2 rho_{n,eps}(G) for G = 0..G_max as floats (rho(0) = 1; -inf where rho = 0),
    read off the exact integer DP table. Limit: G_max**2 * bits(2p) <= 2**31 (eps = p/q;
    G_max <= 32768 at eps = 1/2)."""
    G_max = check_int(G_max, "G_max", 0)
    table = _table(n, eps)
    table.grow(table.dp_gap(G_max, "log2_rho_table", "G_max"))
    log2_D = math.log2(table.D)
    return np.array([math.log2(R) - G * log2_D if R > 0 else -math.inf
                     for G, R in enumerate(table.R[: G_max + 1])])
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
        return _exp_rate(_log(self.best_factor) / self.best_link, self.eps)

    @property
    def kappa(self) -> float:
        return float(self.kappa_power) ** (1 / self.best_link)


def _is_best_link(g_star: int, n: int, eps: Fraction) -> int:
    """Check exactly that c(g)^(1/g) <= c(g*)^(1/g*) for every g >= 1; return the last g
    compared one by one. Past g1 > 2 eps + 1/ln(lambda) the ratio lambda^g / c(g) increases
    (d/dg [g ln lambda - ln c(g)] = ln lambda - 1/(g - 2 eps) > 0), so checking up to g1
    covers all g."""
    c_star = link_factor(g_star, n, eps)
    g1 = math.ceil(2 * eps + 1 / (_log(c_star) / g_star)) + 2
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
        if c > 0 and _log(c) / g > best:
            g_star, best = g, _log(c) / g
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
    floats). Returns the number of G checked; raises AssertionError on a violation.
    Limit: G_max <= 4096 (:data:`MAX_CHECK_GAP`)."""
    G_max = check_int(G_max, "G_max", 1, MAX_CHECK_GAP)
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
