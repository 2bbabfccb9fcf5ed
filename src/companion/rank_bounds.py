"""Lemma D (approximate identity), Lemma D' (nonnegative sharpening) and Theorem E.

Lemma D: rank(M) >= (tr M)^2 / ||M||_F^2 for every real square M (|tr M| <= ||M||_* <=
sqrt(rank M) ||M||_F). Lemma D': if M >= 0 has unit diagonal and off-diagonal entries <= u_xy,
then rank(M) >= N^2 (1-c)^2 / (N (1-c)^2 + sum_{x != y} max(c, u_xy - c)^2) - 1 for every
c in [0, 1/2]. Theorem E: a head with error < 1/2 on the witness family F(S) has feature rank
r >= |S|^2 / sum_{x,y} rho(G_xy)^-2.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction
from numbers import Rational

import numpy as np

from .amplification import best_chain_factor
from .codes import check_code
from .gap_domination import check_eps, check_length


def _square_matrix(M, name: str = "M") -> np.ndarray:
    if isinstance(M, (str, bytes)) or M is None:
        raise TypeError(f"{name} must be a square matrix of real numbers, got {type(M).__name__}")
    arr = np.asarray(M)
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1] or arr.shape[0] == 0:
        raise ValueError(f"{name} must be a non-empty square matrix (N x N), got shape {arr.shape}")
    if arr.dtype != object and not np.issubdtype(arr.dtype, np.number):
        raise TypeError(f"{name} must hold real numbers, got dtype {arr.dtype}")
    if arr.dtype == object:
        if not all(isinstance(v, (Rational, float)) and not isinstance(v, bool)
                   for v in arr.ravel()):
            raise TypeError(f"{name} with dtype object must hold ints or Fractions")
    elif np.iscomplexobj(arr) or not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must hold finite real numbers")
    return arr


def trace_rank_bound(M):
    """Lemma D: (tr M)^2 / ||M||_F^2 <= rank(M). Exact Fraction for int or Fraction entries,
    float for float entries."""
    arr = _square_matrix(M)
    exact = arr.dtype == object or np.issubdtype(arr.dtype, np.integer)
    if exact:
        entries = [Fraction(v) for v in arr.ravel()]
        trace = sum((Fraction(v) for v in np.diagonal(arr)), Fraction(0))
        frob = sum((v * v for v in entries), Fraction(0))
    else:
        trace, frob = float(np.trace(arr)), float(np.sum(arr.astype(np.float64) ** 2))
    if frob == 0:
        raise ValueError("M must be nonzero (||M||_F > 0) for the trace bound")
    return trace * trace / frob


def approximate_identity_bound(N, R) -> Fraction:
    """rank(M) >= N / (1 + (N-1)/R^2) for unit diagonal and |off-diagonal| <= 1/R (exact)."""
    if isinstance(N, bool) or not isinstance(N, (int, np.integer)):
        raise TypeError(f"N must be an int, got {type(N).__name__}")
    if N < 1:
        raise ValueError(f"N (matrix size) must be an int >= 1, got {N}")
    if isinstance(R, bool) or not isinstance(R, (Rational, float)):
        raise TypeError(f"R must be a real number, got {type(R).__name__}")
    if not (math.isfinite(R) and R > 0):
        raise ValueError(f"R must be a finite number > 0, got {R}")
    R = Fraction(R)
    return Fraction(int(N)) / (1 + (int(N) - 1) / (R * R))


def _sharpened_value(N: int, counts: dict[Fraction, int], c: Fraction) -> Fraction:
    num = N * N * (1 - c) ** 2
    den = N * (1 - c) ** 2 + sum((k * max(c, u - c) ** 2 for u, k in counts.items()),
                                 Fraction(0))
    return num / den - 1


def nonnegative_rank_bound(N, off_diagonal_bounds) -> tuple[Fraction, Fraction]:
    """Lemma D' optimised exactly over c in [0, 1/2]: returns (bound, c*).

    `off_diagonal_bounds` maps an upper bound u on an off-diagonal entry to the number of
    ordered off-diagonal pairs with that bound (a dict), or is an N x N array of bounds whose
    diagonal is ignored. The bound is exact: between consecutive breakpoints c = u/2 the
    objective is (1-c)^2 / Q(c) with Q quadratic, whose only stationary point is rational.
    """
    if isinstance(N, bool) or not isinstance(N, (int, np.integer)) or N < 1:
        raise ValueError(f"N (matrix size) must be an int >= 1, got {N!r}")
    N = int(N)
    if isinstance(off_diagonal_bounds, dict):
        counts = Counter({Fraction(u): int(k) for u, k in off_diagonal_bounds.items()})
    else:
        arr = _square_matrix(off_diagonal_bounds, "off_diagonal_bounds")
        if arr.shape[0] != N:
            raise ValueError(f"off_diagonal_bounds must be N x N = {N} x {N}, got {arr.shape}")
        counts = Counter(Fraction(v) for i, row in enumerate(arr.tolist())
                         for j, v in enumerate(row) if i != j)
    if any(u < 0 for u in counts) or any(k < 0 for k in counts.values()):
        raise ValueError("off_diagonal_bounds must be >= 0 with nonnegative counts")
    if sum(counts.values()) > N * (N - 1):
        raise ValueError(f"off_diagonal_bounds counts more than N(N-1) = {N * (N - 1)} pairs")
    half = Fraction(1, 2)
    us = sorted(counts)
    # suffix sums over u (ascending) of k, k u, k u^2: Q(c) in O(log B) for any c
    suf_k, suf_ku, suf_kuu = [0] * (len(us) + 1), [Fraction(0)] * (len(us) + 1), [Fraction(0)] * (
        len(us) + 1)
    for idx in range(len(us) - 1, -1, -1):
        u, k = us[idx], counts[us[idx]]
        suf_k[idx] = suf_k[idx + 1] + k
        suf_ku[idx] = suf_ku[idx + 1] + k * u
        suf_kuu[idx] = suf_kuu[idx + 1] + k * u * u
    P = suf_k[0]

    def coefficients(c: Fraction):
        # pairs with u > 2c contribute (u - c)^2, the others c^2: Q = q2 c^2 + q1 c + q0
        first = bisect.bisect_right(us, 2 * c)
        return N + P, -2 * N - 2 * suf_ku[first], N + suf_kuu[first]

    def value(c: Fraction) -> Fraction:
        q2, q1, q0 = coefficients(c)
        return N * N * (1 - c) ** 2 / (q2 * c * c + q1 * c + q0) - 1

    breaks = sorted({Fraction(0), half} | {u / 2 for u in us if u / 2 < half})
    candidates = set(breaks)
    for lo, hi in zip(breaks, breaks[1:], strict=False):
        q2, q1, q0 = coefficients((lo + hi) / 2)
        # d/dc (1-c)^2/Q = -(1-c)(2Q + (1-c)Q')/Q^2, and 2Q + (1-c)Q' is linear in c.
        if q1 + 2 * q2 != 0:
            c_star = -(2 * q0 + q1) / (q1 + 2 * q2)
            if lo < c_star < hi:
                candidates.add(c_star)
    best_c = max(sorted(candidates), key=value)
    return value(best_c), best_c


def check_rank_bound_input(S, n, eps):
    """Validate (S, n, eps) for Theorem E; return (S array, w, G matrix, rho dict by G)."""
    arr, w = check_code(S)
    n, eps = check_length(n), check_eps(eps)
    G = w - arr @ arr.T
    off = G[~np.eye(len(arr), dtype=bool)]
    rho = {int(g): best_chain_factor(int(g), n, eps) for g in np.unique(off)}
    weak = sorted(g for g, r in rho.items() if r < 1)
    if weak:
        raise ValueError(
            f"S has pairs with gap G_xy = w - <x,y> in {weak}, too small for any chain: every "
            f"pair needs rho_(n,eps)(G) >= 1 (at eps = 1/2: G >= 2, i.e. overlap <= w - 2 = "
            f"{w - 2})"
        )
    return arr, w, G, rho


@dataclass(frozen=True)
class RankLowerBound:
    """Certified lower bounds on the feature rank r of any head solving F(S) with error < 1/2.

    trace_bound: Theorem E via Lemma D, |S|^2 / sum_{x,y} rho(G_xy)^-2 (exact);
    sharpened_bound: via Lemma D' at c = sharpened_c (exact); the *_rank fields are the
    integer consequences ceil(.) and `rank` the larger of the two.
    """

    size: int
    trace_bound: Fraction
    trace_rank: int
    sharpened_bound: Fraction
    sharpened_c: Fraction
    sharpened_rank: int

    @property
    def rank(self) -> int:
        return max(self.trace_rank, self.sharpened_rank, 1)


def rank_bound_from_rhos(size: int, rho_counts: dict[Fraction, int]) -> RankLowerBound:
    """Theorem E and Lemma D' from the multiset of per-pair chain factors rho_xy (x != y):
    M[x,y] lies in [0, 1/rho_xy], diagonal 1."""
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
        raise ValueError(f"size (|S|) must be an int >= 1, got {size!r}")
    inv_sq = Fraction(int(size))  # diagonal terms count 1
    bounds: Counter = Counter()
    for r, k in rho_counts.items():
        r = Fraction(r)
        if r < 1:
            raise ValueError(f"every pair needs rho >= 1 (a chain proving a ratio >= 1), got {r}")
        inv_sq += k / (r * r)
        bounds[1 / r] += int(k)
    trace = Fraction(int(size)) ** 2 / inv_sq
    sharp, c = nonnegative_rank_bound(int(size), dict(bounds))
    return RankLowerBound(int(size), trace, math.ceil(trace), sharp, c, math.ceil(sharp))


def rank_bound_from_gap_counts(size: int, gap_counts: dict[int, int], n: int = 3,
                               eps=Fraction(1, 2)) -> RankLowerBound:
    """Theorem E and Lemma D' from the multiset of off-diagonal gaps (ordered pairs), each
    pair using its best chain rho_{n,eps}(G)."""
    n, eps = check_length(n), check_eps(eps)
    rho_counts: Counter = Counter()
    for g, k in gap_counts.items():
        r = best_chain_factor(int(g), n, eps)
        if r < 1:
            raise ValueError(f"gap_counts has gap {g} with rho = {r} < 1: too small for any chain")
        rho_counts[r] += int(k)
    return rank_bound_from_rhos(size, dict(rho_counts))


def certified_rank_bound(S, n: int = 3, eps=Fraction(1, 2)) -> RankLowerBound:
    """Theorem E for a constant-weight code S: r >= |S|^2 / sum_{x,y in S} rho_{n,eps}(G_xy)^-2,
    with G_xy = w - <x,y>; also the Lemma D' sharpening. Exact Fractions."""
    arr, _, G, _ = check_rank_bound_input(S, n, eps)
    off = G[~np.eye(len(arr), dtype=bool)]
    values, counts = np.unique(off, return_counts=True)
    gap_counts = dict(zip(values.tolist(), counts.tolist(), strict=True))
    return rank_bound_from_gap_counts(len(arr), gap_counts, n, eps)


# --- asymptotics: explicit concatenated codes, random-code estimate, large-n limit ----------

def gap_distribution(S) -> dict[int, int]:
    """{G: number of ordered pairs (x, y) of S, diagonal included, with w - <x,y> = G}."""
    arr, w = check_code(S)
    values, counts = np.unique(w - arr @ arr.T, return_counts=True)
    return {int(g): int(k) for g, k in zip(values, counts, strict=True)}


def concatenate_distributions(d1: dict[int, int], d2: dict[int, int]) -> dict[int, int]:
    """Gap distribution of the concatenated code S1 x S2 = {(x1, x2)}: gaps add, so the
    distribution is the convolution of the two (exact ints)."""
    out: Counter = Counter()
    for g1, k1 in d1.items():
        for g2, k2 in d2.items():
            out[g1 + g2] += k1 * k2
    return dict(out)


def trace_bound_from_distribution(dist: dict[int, int], n: int = 3,
                                  eps=Fraction(1, 2)) -> Fraction:
    """Theorem E's |S|^2 / sum_{x,y} rho(G_xy)^-2 from a gap distribution (G = 0: diagonal)."""
    size = dist.get(0, 0)
    if size < 1:
        raise ValueError("dist must count the diagonal pairs under G = 0 (|S| >= 1 of them)")
    rho_counts = Counter()
    for g, k in dist.items():
        if g != 0:
            rho_counts[best_chain_factor(int(g), n, eps)] += k
    inv_sq = Fraction(size) + sum((k / (r * r) for r, k in rho_counts.items()), Fraction(0))
    if any(r < 1 for r in rho_counts):
        raise ValueError("dist has a gap too small for any chain (rho < 1)")
    return Fraction(size) ** 2 / inv_sq


def log2_rho_table(G_max: int, n: int = 3, eps=Fraction(1, 2)) -> np.ndarray:
    """log2 rho_{n,eps}(G) for G = 0..G_max as floats (rho(0) = 1; -inf where rho = 0),
    read off the exact integer DP table."""
    from .amplification import _table

    table = _table(n, eps)
    table.grow(int(G_max))
    log2_D = math.log2(table.D)
    return np.array([math.log2(R) - G * log2_D if R > 0 else -math.inf
                     for G, R in enumerate(table.R[: int(G_max) + 1])])


def _log2_sum_exp2(values: np.ndarray) -> float:
    top = np.max(values)
    return float(top + np.log2(np.sum(np.exp2(values - top))))


def log2_trace_bound(prob: np.ndarray, log2_rho: np.ndarray) -> float:
    """log2 of 1 / sum_G p(G) rho(G)^-2 (Theorem E with pairs drawn uniformly, p(0) = 1/|S|),
    for a float distribution p over G = 0..len(p)-1; used where the exact ints are too slow."""
    support = np.flatnonzero(prob > 0)
    if np.any(np.isinf(log2_rho[support])):
        raise ValueError("prob puts mass on a gap with rho = 0")
    return -_log2_sum_exp2(np.log2(prob[support]) - 2 * log2_rho[support])


@dataclass(frozen=True)
class BaseCode:
    """A code used as a building block of concatenated codes: width, size, gap distribution."""

    name: str
    m: int
    size: int
    dist: dict

    @classmethod
    def from_code(cls, name: str, S) -> BaseCode:
        arr, _ = check_code(S)
        return cls(name, arr.shape[1], len(arr), gap_distribution(arr))


def explicit_code_plan(bases: list[BaseCode], m_max: int, n: int = 3,
                       eps=Fraction(1, 2)) -> list[tuple[str, ...]]:
    """For every width m <= m_max, a multiset of base codes of total width <= m (the rest is
    zero padding) maximising the sum of their log2 bounds (unbounded knapsack). Concatenation
    gives an explicit code whose bound is at least the product (rho is supermultiplicative)."""
    if not bases:
        raise ValueError("bases must hold at least one BaseCode")
    value = [float(np.log2(float(trace_bound_from_distribution(b.dist, n, eps)))) for b in bases]
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
    """Theorem E bound of the concatenated explicit code chosen by explicit_code_plan, for
    each width: log2 as a float (float convolution) or, with exact=True, the exact Fraction."""
    widths = sorted(set(int(m) for m in widths))
    plan = explicit_code_plan(bases, widths[-1], n, eps)
    by_name = {b.name: b for b in bases}
    out: dict = {}
    if exact:
        for m in widths:
            dist = {0: 1}
            for name in plan[m]:
                dist = concatenate_distributions(dist, by_name[name].dist)
            out[m] = trace_bound_from_distribution(dist, n, eps) if plan[m] else Fraction(1)
        return out
    probs = {}
    for b in bases:
        p = np.zeros(max(b.dist) + 1)
        for g, k in b.dist.items():
            p[g] = k / b.size**2
        probs[b.name] = p
    log2_rho = log2_rho_table(widths[-1] // 2 + 1 + max(max(b.dist) for b in bases), n, eps)
    cache: dict[tuple[str, ...], np.ndarray] = {(): np.array([1.0])}
    for m in widths:
        key = plan[m]
        if key not in cache:
            p = np.array([1.0])
            for i, name in enumerate(key):  # reuse the longest cached prefix
                if key[: i + 1] in cache:
                    p = cache[key[: i + 1]]
                    continue
                p = np.convolve(p, probs[name])
                cache[key[: i + 1]] = p
            cache[key] = p
        p = cache[key]
        out[m] = log2_trace_bound(p, log2_rho[: len(p)]) if key else 0.0
    return out


_LOG2_FACTORIALS = np.zeros(1)


def _log2_binomial_table(m: int) -> np.ndarray:
    """log2 k! for k = 0..m (at least), cached and grown on demand."""
    global _LOG2_FACTORIALS
    if len(_LOG2_FACTORIALS) <= m:
        _LOG2_FACTORIALS = np.concatenate(
            [[0.0], np.cumsum(np.log2(np.arange(1, 2 * m + 2, dtype=np.float64)))])
    return _LOG2_FACTORIALS


def random_code_log2_estimate(m: int, n: int = 3, eps=Fraction(1, 2), w: int | None = None,
                              log2_rho: np.ndarray | None = None) -> float:
    """ESTIMATE (not a certificate) of log2 of Theorem E's bound for a random weight-w code
    expurgated to gaps >= 2: with p_bad = P(G <= 1) for two random words, take
    s = 1/(2 p_bad) words and E = E[rho(G)^-2; G >= 2]; estimate s / (1 + (s - 1) E)."""
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 4:
        raise ValueError(f"m must be an int >= 4, got {m!r}")
    w = m // 2 if w is None else int(w)
    if not 2 <= w <= m - 1:
        raise ValueError(f"w (weight) must be an int in [2, m-1] = [2, {m - 1}], got {w}")
    lf = _log2_binomial_table(m)
    j = np.arange(0, w + 1)  # overlap <x,y> of two independent uniform weight-w words
    valid = (w - j) <= (m - w)
    j = j[valid]
    log2_p = (lf[w] - lf[j] - lf[w - j]) + (lf[m - w] - lf[w - j] - lf[m - 2 * w + j]) - (
        lf[m] - lf[w] - lf[m - w])
    G = w - j
    if log2_rho is None:
        log2_rho = log2_rho_table(w, n, eps)
    good = G >= 2
    log2_E = _log2_sum_exp2(log2_p[good] - 2 * log2_rho[G[good]])
    log2_bad = _log2_sum_exp2(log2_p[~good])
    log2_s = -1 - log2_bad
    # s / (1 + (s - 1) E) in log2, stable for astronomically large s
    if log2_s > 50:
        log2_term = log2_s + log2_E
    elif log2_s > 0:
        log2_term = float(np.log2(np.exp2(log2_s) - 1)) + log2_E
    else:
        return 0.0  # not even two words survive: the estimate is the trivial bound 1
    log2_den = float(np.logaddexp2(0.0, log2_term))
    return float(log2_s - log2_den)


def large_context_log2_limit(m: int) -> float:
    """log2 of C(m, m//2)/m: the Graham-Sloane code (weight-m//2 words with sum of positions
    = a mod m, the largest class) has all gaps >= 2 and at least this many words; as n -> inf
    every rho(G >= 2) -> inf, so Theorem E's bound for it tends to its size."""
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 2:
        raise ValueError(f"m must be an int >= 2, got {m!r}")
    k = int(m) // 2
    log_binomial = math.lgamma(m + 1) - math.lgamma(k + 1) - math.lgamma(m - k + 1)
    return log_binomial / math.log(2) - math.log2(m)


#: Paley primes q = 3 mod 4 whose codes (width q + 1) serve as base codes.
PALEY_PRIMES = (7, 11, 19, 23, 31, 43)


def base_codes(n: int = 3, eps=Fraction(1, 2), widths=(12, 16, 20, 24, 28), seed: int = 0,
               max_size: int = 1000) -> list[BaseCode]:
    """Explicit building blocks for concatenated codes: the Paley codes (with and without
    complements) and, for each width, the seeded greedy + expurgation code for this (n, eps)."""
    from .codes import paley_hadamard_code, search_code

    out = []
    for q in PALEY_PRIMES:
        out.append(BaseCode.from_code(f"paley{q + 1}", paley_hadamard_code(q)))
        out.append(BaseCode.from_code(f"paley{q + 1}-rows", paley_hadamard_code(q, False)))
    for m in widths:
        found = search_code(int(m), n, eps, seed=seed, candidates=3 * max_size, max_size=max_size)
        out.append(BaseCode.from_code(f"greedy{m}", found.code))
    return out


@dataclass(frozen=True)
class AsymptoticRow:
    """log2 of: the certified bound of an explicit concatenated code, the random-code
    ESTIMATE, the large-context limit (Graham-Sloane size), and the 2^m ceiling."""

    m: int
    n: int
    certified_log2: float
    plan: tuple[str, ...]
    estimate_log2: float
    large_context_log2: float
    ceiling_log2: int


def asymptotic_rows(bases: list[BaseCode], widths, n: int = 3,
                    eps=Fraction(1, 2)) -> list[AsymptoticRow]:
    """One AsymptoticRow per width (floats from exact ints; see explicit_code_log2_bounds)."""
    widths = sorted(set(int(m) for m in widths))
    certified = explicit_code_log2_bounds(bases, widths, n, eps)
    plan = explicit_code_plan(bases, widths[-1], n, eps)
    log2_rho = log2_rho_table(widths[-1] // 2, n, eps)
    return [AsymptoticRow(m, n, certified[m], plan[m],
                          random_code_log2_estimate(m, n, eps, log2_rho=log2_rho),
                          large_context_log2_limit(m), m) for m in widths]
