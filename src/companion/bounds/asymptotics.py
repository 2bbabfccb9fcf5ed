"""How the certified rank bound grows with the width m (chapter 3: ``lem-concatenation``,
``prop-large-context-limit``, ``cor-every-width``): concatenated codes convolve their gap
distributions; the large-context limit L(m) lies between C(m, m//2)/m and C(m+1, w)/(m+1)."""

from __future__ import annotations

import functools
import math
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from companion.bounds.amplification import chain_table, log2_rho_table
from companion.bounds.code_search import search_code
from companion.bounds.codes import paley_hadamard_code
from companion.bounds.rank_bounds import certified_rank_bound
from companion.checks import (
    check_eps,
    check_instance,
    check_int,
    check_int_sequence,
    check_length,
)

__all__ = ["base_codes", "explicit_code_log2_bounds", "asymptotic_rows",
           "large_context_limit_log2_bounds", "every_width_rank_bound"]

#: Largest token width of the asymptotic curves (cost linear in m; the book goes to 1000).
MAX_WIDTH = 10_000
#: Largest max_size of a searched base code (the greedy search costs ~candidates x size x m).
MAX_BASE_SIZE = 2_000
#: Paley primes q = 3 mod 4 whose codes (width q + 1) serve as base codes.
PALEY_PRIMES = (7, 11, 19, 23, 31, 43)


def _check_bases(bases) -> list[BaseCode]:
    if isinstance(bases, (str, bytes)) or not isinstance(bases, (list, tuple)) or not bases:
        raise TypeError(f"bases must be a non-empty list of BaseCode, got {bases!r:.80}")
    return [check_instance(b, f"bases[{i}]", BaseCode) for i, b in enumerate(bases)]


def _check_widths(widths, low: int = 1) -> list[int]:
    return sorted(set(check_int_sequence(widths, "widths", low, MAX_WIDTH)))


def _gap_distribution(arr: np.ndarray) -> dict[int, int]:
    """{G: number of ordered pairs (x, y), diagonal included, with w - <x,y> = G}."""
    values, counts = np.unique(int(arr[0].sum()) - arr @ arr.T, return_counts=True)
    return {int(g): int(k) for g, k in zip(values, counts, strict=True)}


def _concatenate(d1: dict[int, int], d2: dict[int, int]) -> dict[int, int]:
    """Gap distribution of S1 x S2: gaps add, so the distributions convolve (exact)."""
    out: Counter = Counter()
    for g1, k1 in d1.items():
        for g2, k2 in d2.items():
            out[g1 + g2] += k1 * k2
    return dict(out)


def _trace_bound(dist: dict[int, int], n: int, eps) -> Fraction:
    """Theorem E's |S|^2 / sum_{x,y} rho(G_xy)^-2 from a gap distribution (G = 0: diagonal)."""
    size = dist[0]
    inv_sq = Fraction(size) + sum((k / chain_table(n, eps).rho(g) ** 2
                                   for g, k in dist.items() if g), Fraction(0))
    return Fraction(size) ** 2 / inv_sq


def _log2_sum_exp2(values: np.ndarray) -> float:
    top = np.max(values)
    return float(top + np.log2(np.sum(np.exp2(values - top))))


@dataclass(frozen=True)
class BaseCode:
    """A building block of concatenated codes: width, size, gap distribution."""

    name: str
    m: int
    size: int
    dist: dict

    @classmethod
    def from_code(cls, name: str, S: np.ndarray) -> BaseCode:
        """The base code of a constant-weight code the package built (Paley, search_code)."""
        return cls(name, S.shape[1], len(S), _gap_distribution(S))


def base_codes(n: int = 3, eps=Fraction(1, 2), widths=(12, 16, 20, 24, 28), seed: int = 0,
               max_size: int = 1000) -> list[BaseCode]:
    """The Paley codes (with and without complements) and, per width, the seeded search's code
    for this (n, eps). Limits: widths in [4, 64], max_size <= 2000."""
    widths = check_int_sequence(widths, "widths", 4, 64, allow_empty=True)
    max_size = check_int(max_size, "max_size", 2, MAX_BASE_SIZE)
    seed = check_int(seed, "seed", 0)
    out = []
    for q in PALEY_PRIMES:
        out.append(BaseCode.from_code(f"paley{q + 1}", paley_hadamard_code(q)))
        out.append(BaseCode.from_code(f"paley{q + 1}-rows", paley_hadamard_code(q, False)))
    for m in widths:
        found = search_code(int(m), n, eps, seed=seed, candidates=3 * max_size, max_size=max_size)
        out.append(BaseCode.from_code(f"greedy{m}", found.code))
    return out


def _plan(bases: list[BaseCode], m_max: int, n: int, eps) -> list[tuple[str, ...]]:
    """Per width m <= m_max, base codes of total width <= m maximising the sum of their log2
    bounds (unbounded knapsack; rho is supermultiplicative, so the product is certified)."""
    value = [float(np.log2(float(_trace_bound(b.dist, n, eps)))) for b in bases]
    best = [0.0] * (m_max + 1)
    plan: list[tuple[str, ...]] = [()] * (m_max + 1)
    for m in range(1, m_max + 1):
        best[m], plan[m] = best[m - 1], plan[m - 1]  # pad one zero column
        for b, v in zip(bases, value, strict=True):
            if b.m <= m and best[m - b.m] + v > best[m] + 1e-12:
                best[m], plan[m] = best[m - b.m] + v, plan[m - b.m] + (b.name,)
    return plan


def explicit_code_log2_bounds(bases: list[BaseCode], widths, n: int = 3, eps=Fraction(1, 2),
                              exact: bool = False) -> dict[int, float | Fraction]:
    """Theorem E's bound of the explicit concatenated code per width (widths in [1, 10000]):
    log2 by float convolution, or with `exact` the Fraction itself."""
    bases, widths = _check_bases(bases), _check_widths(widths)
    n, eps = check_length(n), check_eps(eps)
    plan = _plan(bases, widths[-1], n, eps)
    by_name = {b.name: b for b in bases}
    out: dict = {}
    if exact:
        for m in widths:
            dist = functools.reduce(_concatenate, (by_name[k].dist for k in plan[m]), {0: 1})
            out[m] = _trace_bound(dist, n, eps) if plan[m] else Fraction(1)
        return out
    probs = {b.name: np.bincount(list(b.dist), list(b.dist.values())) / b.size**2 for b in bases}
    log2_rho = log2_rho_table(widths[-1] // 2 + 1 + max(max(b.dist) for b in bases), n, eps)
    cache: dict[tuple[str, ...], np.ndarray] = {(): np.array([1.0])}  # plans share prefixes
    for m in widths:
        key = plan[m]
        start = max(i for i in range(len(key) + 1) if key[:i] in cache)
        for i in range(start, len(key)):
            cache[key[: i + 1]] = np.convolve(cache[key[:i]], probs[key[i]])
        p = cache[key]
        support = np.flatnonzero(p > 0)  # Theorem E in floats: log2 1 / sum_G p(G) rho(G)^-2
        out[m] = -_log2_sum_exp2(np.log2(p[support]) - 2 * log2_rho[support]) if key else 0.0
    return out


def _random_code_log2_estimate(m: int, log2_rho: np.ndarray) -> float:
    """ESTIMATE (not a certificate), log2 s / (1 + (s - 1) E) for a random weight-m//2 code:
    s = 1/(2 P(G <= 1)) words and E = E[rho(G)^-2; G >= 2]."""
    w = m // 2
    lf = np.concatenate([[0.0], np.cumsum(np.log2(np.arange(1, m + 1, dtype=np.float64)))])
    j = np.arange(0, w + 1)  # overlap <x,y> of two independent uniform weight-w words
    j = j[(w - j) <= (m - w)]
    log2_p = (lf[w] - lf[j] - lf[w - j]) + (lf[m - w] - lf[w - j] - lf[m - 2 * w + j]) - (
        lf[m] - lf[w] - lf[m - w])
    G = w - j
    good = G >= 2
    log2_E = _log2_sum_exp2(log2_p[good] - 2 * log2_rho[G[good]])
    log2_s = -1 - _log2_sum_exp2(log2_p[~good])
    # s / (1 + (s - 1) E) in log2, stable for astronomically large s
    if log2_s > 50:
        log2_term = log2_s + log2_E
    elif log2_s > 0:
        log2_term = float(np.log2(np.exp2(log2_s) - 1)) + log2_E
    else:
        return 0.0  # not even two words survive: the trivial bound 1
    return float(log2_s - float(np.logaddexp2(0.0, log2_term)))


def _large_context_lower_log2(m: int) -> float:
    """log2 C(m, m//2)/m, the Graham-Sloane LOWER bound on the limit L(m) (module docstring)."""
    k = m // 2
    log_binomial = math.lgamma(m + 1) - math.lgamma(k + 1) - math.lgamma(m - k + 1)
    return log_binomial / math.log(2) - math.log2(m)


@dataclass(frozen=True)
class AsymptoticRow:
    """log2 of: the certified bound of an explicit concatenated code, the random-code
    ESTIMATE, a lower bound on the large-context limit (Graham-Sloane size), the 2^m ceiling."""

    m: int
    n: int
    certified_log2: float
    plan: tuple[str, ...]
    estimate_log2: float
    large_context_lower_log2: float
    ceiling_log2: int


def asymptotic_rows(bases: list[BaseCode], widths, n: int = 3,
                    eps=Fraction(1, 2)) -> list[AsymptoticRow]:
    """One AsymptoticRow per width in [4, 10000] (floats from exact ints)."""
    bases, widths = _check_bases(bases), _check_widths(widths, 4)
    n, eps = check_length(n), check_eps(eps)
    certified = explicit_code_log2_bounds(bases, widths, n, eps)
    plan = _plan(bases, widths[-1], n, eps)
    log2_rho = log2_rho_table(widths[-1] // 2, n, eps)
    return [AsymptoticRow(m, n, certified[m], plan[m], _random_code_log2_estimate(m, log2_rho),
                          _large_context_lower_log2(m), m) for m in widths]


def large_context_limit_log2_bounds(m: int) -> tuple[float, float]:
    """log2 of (ceil(C(m, m//2)/m), floor(C(m+1, (m+1)//2)/(m+1))), the exact integers that
    pin L(m) = lim_{n->oo} of the best Theorem E bound at width m in [2, 10000]."""
    m = check_int(m, "m (token width)", 2, MAX_WIDTH)
    lower = -(-math.comb(m, m // 2) // m)
    return math.log2(lower), math.log2(math.comb(m + 1, (m + 1) // 2) // (m + 1))


def every_width_rank_bound(S, m: int, n: int = 3, eps=Fraction(1, 2)) -> Fraction:
    """``cor-every-width``: r >= B(S) ** (m // m0) at width m in [1, 10000], B(S) Theorem E's
    bound of the width-m0 code S, concatenated m // m0 times and zero-padded; exact."""
    bound = certified_rank_bound(S, n, eps).trace_bound
    m = check_int(m, "m", 1, MAX_WIDTH)
    return bound ** (m // np.shape(S)[1])
