"""How the certified rank bound grows with the token width m (chapter 3, ``lem-concatenation``
and the asymptotics of ``thm-exponential-rank``).

Gap distributions of codes and their concatenation (gaps add, so distributions convolve),
Theorem E's bound from a distribution, an explicit concatenated code per width (a knapsack
over base codes: Paley codes and the seeded search's codes), a random-code ESTIMATE and the
large-context limit, pinned to an interval ({prf:ref}`prop-large-context-limit`), and the
bound for every width from one base code ({prf:ref}`cor-every-width`).

The large-context limit: for a code S with all gaps >= 2, rho_{n,1/2}(G) >= c(G) = (n-2)(G-1)
>= n-2, so Theorem E's bound lies between |S|^2 / (|S| + |S|(|S|-1)/(n-2)^2) and |S|, and the
best bound at width m tends to L(m) = max_w A(m, w), A(m, w) = the largest weight-w code with
all gaps >= 2. The Graham-Sloane classes (positions summing to a fixed residue mod m) give
A(m, w) >= C(m, w)/m; no two words share w - 1 ones, so A(m, w) <= C(m, w-1)/w. Hence
ceil(C(m, m//2)/m) <= L(m) <= floor(C(m+1, (m+1)//2)/(m+1)), less than one bit apart.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from companion.bounds.amplification import best_chain_factor, log2_rho_table
from companion.bounds.code_search import search_code
from companion.bounds.codes import check_code, paley_hadamard_code
from companion.checks import check_instance, check_int, check_int_sequence, checked_comb

#: Largest token width the asymptotic curves accept (m_max, widths, m): their cost is linear
#: in m (knapsack, convolutions, factorial tables) and the book goes to m = 1000.
MAX_WIDTH = 10_000
#: Largest max_size of a searched base code (the greedy search costs ~candidates x max_size x m).
MAX_BASE_SIZE = 2_000


def _check_dist(dist, name: str) -> dict[int, int]:
    """A gap distribution {G: count} with ints G >= 0 and counts >= 1."""
    if not isinstance(dist, dict) or not dist:
        raise TypeError(f"{name} must be a non-empty dict {{gap: count}}, got {dist!r:.80}")
    return {check_int(g, f"{name} key (gap)", 0): check_int(k, f"{name}[{g}] (count)", 1)
            for g, k in dist.items()}


def _check_bases(bases) -> list[BaseCode]:
    if isinstance(bases, (str, bytes)) or not isinstance(bases, (list, tuple)) or not bases:
        raise TypeError(f"bases must be a non-empty list of BaseCode, got {bases!r:.80}")
    return [check_instance(b, f"bases[{i}]", BaseCode) for i, b in enumerate(bases)]


def _check_widths(widths) -> list[int]:
    if isinstance(widths, np.ndarray):
        widths = widths.tolist()
    if isinstance(widths, range) and len(widths) > MAX_WIDTH:
        raise ValueError(f"widths must hold at most {MAX_WIDTH} widths in [1, {MAX_WIDTH}]")
    return sorted(set(check_int_sequence(list(widths) if isinstance(widths, range) else widths,
                                         "widths", 1, MAX_WIDTH)))


def gap_distribution(S) -> dict[int, int]:
    """{G: number of ordered pairs (x, y) of S, diagonal included, with w - <x,y> = G}."""
    arr, w = check_code(S)
    values, counts = np.unique(w - arr @ arr.T, return_counts=True)
    return {int(g): int(k) for g, k in zip(values, counts, strict=True)}


def concatenate_distributions(d1: dict[int, int], d2: dict[int, int]) -> dict[int, int]:
    """Gap distribution of the concatenated code S1 x S2 = {(x1, x2)}: gaps add, so the
    distribution is the convolution of the two (exact ints)."""
    d1, d2 = _check_dist(d1, "d1"), _check_dist(d2, "d2")
    out: Counter = Counter()
    for g1, k1 in d1.items():
        for g2, k2 in d2.items():
            out[g1 + g2] += k1 * k2
    return dict(out)


def trace_bound_from_distribution(dist: dict[int, int], n: int = 3,
                                  eps=Fraction(1, 2)) -> Fraction:
    """Theorem E's |S|^2 / sum_{x,y} rho(G_xy)^-2 from a gap distribution (G = 0: diagonal)."""
    dist = _check_dist(dist, "dist")
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


def _log2_sum_exp2(values: np.ndarray) -> float:
    top = np.max(values)
    return float(top + np.log2(np.sum(np.exp2(values - top))))


def log2_trace_bound(prob: np.ndarray, log2_rho: np.ndarray) -> float:
    """log2 of 1 / sum_G p(G) rho(G)^-2 (Theorem E with pairs drawn uniformly, p(0) = 1/|S|),
    for a float distribution p over G = 0..len(p)-1; used where the exact ints are too slow."""
    prob, log2_rho = _float_vector(prob, "prob"), _float_vector(log2_rho, "log2_rho")
    if len(log2_rho) < len(prob):
        raise ValueError(f"log2_rho must have an entry for every gap of prob (>= {len(prob)}), "
                         f"got {len(log2_rho)}")
    if np.any(np.isnan(prob)) or np.any(prob < 0) or not np.any(prob > 0):
        raise ValueError("prob must be finite probabilities >= 0, not all 0")
    if np.any(np.isnan(log2_rho)) or np.any(log2_rho == np.inf):
        raise ValueError("log2_rho must hold finite values or -inf (rho = 0)")
    support = np.flatnonzero(prob > 0)
    if np.any(np.isinf(log2_rho[support])):
        raise ValueError("prob puts mass on a gap with rho = 0")
    return -_log2_sum_exp2(np.log2(prob[support]) - 2 * log2_rho[support])


def _float_vector(x, name: str) -> np.ndarray:
    if isinstance(x, (str, bytes)) or x is None:
        raise TypeError(f"{name} must be a 1-d float array, got {type(x).__name__}")
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a 1-d float array ({exc})") from exc
    if arr.ndim != 1 or len(arr) == 0:
        raise ValueError(f"{name} must be a non-empty 1-d array, got shape {arr.shape}")
    return arr


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
    gives an explicit code whose bound is at least the product (rho is supermultiplicative).
    Limit: m_max <= 10000 (:data:`MAX_WIDTH`)."""
    bases = _check_bases(bases)
    m_max = check_int(m_max, "m_max", 0, MAX_WIDTH)
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
    each width: log2 as a float (float convolution) or, with exact=True, the exact Fraction.
    Limit: widths in [1, 10000] (:data:`MAX_WIDTH`)."""
    bases, widths = _check_bases(bases), _check_widths(widths)
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
    s = 1/(2 p_bad) words and E = E[rho(G)^-2; G >= 2]; estimate s / (1 + (s - 1) E).
    Limit: m <= 10000 (:data:`MAX_WIDTH`)."""
    m = check_int(m, "m", 4, MAX_WIDTH)
    w = m // 2 if w is None else check_int(w, "w (weight, at most m-1)", 2, m - 1)
    lf = _log2_binomial_table(m)
    j = np.arange(0, w + 1)  # overlap <x,y> of two independent uniform weight-w words
    valid = (w - j) <= (m - w)
    j = j[valid]
    log2_p = (lf[w] - lf[j] - lf[w - j]) + (lf[m - w] - lf[w - j] - lf[m - 2 * w + j]) - (
        lf[m] - lf[w] - lf[m - w])
    G = w - j
    if log2_rho is None:
        log2_rho = log2_rho_table(w, n, eps)
    log2_rho = _float_vector(log2_rho, "log2_rho")
    if len(log2_rho) <= w:
        raise ValueError(f"log2_rho must cover gaps 0..w = {w}, got {len(log2_rho)} entries")
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


def large_context_lower_log2(m: int) -> float:
    """log2 of C(m, m//2)/m, a LOWER bound on the n -> oo limit L(m) of the best bound at
    width m: the Graham-Sloane code (weight-m//2 words with sum of positions = a mod m, the
    largest class) has all gaps >= 2 and at least this many words, and as n -> oo Theorem E's
    bound of a code with all gaps >= 2 tends to its size. See large_context_limit_bounds for
    the interval that contains L(m)."""
    m = check_int(m, "m", 2)
    k = m // 2
    log_binomial = math.lgamma(m + 1) - math.lgamma(k + 1) - math.lgamma(m - k + 1)
    return log_binomial / math.log(2) - math.log2(m)


#: Paley primes q = 3 mod 4 whose codes (width q + 1) serve as base codes.
PALEY_PRIMES = (7, 11, 19, 23, 31, 43)


def base_codes(n: int = 3, eps=Fraction(1, 2), widths=(12, 16, 20, 24, 28), seed: int = 0,
               max_size: int = 1000) -> list[BaseCode]:
    """Explicit building blocks for concatenated codes: the Paley codes (with and without
    complements) and, for each width, the seeded greedy + expurgation code for this (n, eps).
    Limits: widths in [4, 64] (the search's), max_size <= 2000 (:data:`MAX_BASE_SIZE`)."""
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


@dataclass(frozen=True)
class AsymptoticRow:
    """log2 of: the certified bound of an explicit concatenated code, the random-code
    ESTIMATE, a lower bound on the large-context limit (Graham-Sloane size), and the 2^m
    ceiling."""

    m: int
    n: int
    certified_log2: float
    plan: tuple[str, ...]
    estimate_log2: float
    large_context_lower_log2: float
    ceiling_log2: int


def asymptotic_rows(bases: list[BaseCode], widths, n: int = 3,
                    eps=Fraction(1, 2)) -> list[AsymptoticRow]:
    """One AsymptoticRow per width (floats from exact ints; see explicit_code_log2_bounds).
    Limit: widths in [4, 10000] (:data:`MAX_WIDTH`)."""
    bases, widths = _check_bases(bases), _check_widths(widths)
    if widths[0] < 4:
        raise ValueError(f"widths must be >= 4 (the random-code estimate needs m >= 4), "
                         f"got {widths[0]}")
    certified = explicit_code_log2_bounds(bases, widths, n, eps)
    plan = explicit_code_plan(bases, widths[-1], n, eps)
    log2_rho = log2_rho_table(widths[-1] // 2, n, eps)
    return [AsymptoticRow(m, n, certified[m], plan[m],
                          random_code_log2_estimate(m, n, eps, log2_rho=log2_rho),
                          large_context_lower_log2(m), m) for m in widths]


# --------------------------------------------------------------------------- n -> oo

#: Most words C(m, w) that :func:`max_code_size_gap_two` searches exhaustively (m = 9, w = 3
#: takes seconds; m = 9, w = 4, with 126 words, takes minutes).
MAX_EXACT_WORDS = 84


def graham_sloane_code(m: int, w: int, residue: int) -> np.ndarray:
    """All weight-w words of {0,1}^m whose positions (0..m-1) sum to `residue` mod m.

    Every two of them have gap >= 2: words at gap 1 differ by moving one 1 from position i
    to j != i, which changes the sum by j - i, not 0 mod m. Shape (size, m); may be empty."""
    m = check_int(m, "m (token width)", 2)
    w = check_int(w, "w (weight)", 1, m - 1)
    residue = check_int(residue, "residue", 0, m - 1)
    if math.comb(m, w) > 2**22:
        raise ValueError(f"C(m, w) = {math.comb(m, w)} words is too many to list; choose a "
                         "smaller m")
    rows = [c for c in itertools.combinations(range(m), w) if sum(c) % m == residue]
    code = np.zeros((len(rows), m), dtype=np.int64)
    for i, c in enumerate(rows):
        code[i, list(c)] = 1
    return code


def code_size_lower_bound(m: int, w: int) -> int:
    """ceil(C(m, w)/m) <= A(m, w): the largest of the m Graham-Sloane classes has this many."""
    m = check_int(m, "m (token width)", 2)
    w = check_int(w, "w (weight)", 1, m - 1)
    return -(-checked_comb(m, w, f"m={m}, w={w}") // m)


def code_size_upper_bound(m: int, w: int) -> int:
    """A(m, w) <= floor(C(m, w-1)/w): each (w-1)-subset lies in at most one codeword (two
    words sharing w-1 ones have gap 1) and each codeword contains w of them."""
    m = check_int(m, "m (token width)", 2)
    w = check_int(w, "w (weight)", 1, m - 1)
    return checked_comb(m, w - 1, f"m={m}, w={w}") // w


#: Largest width of :func:`large_context_limit_bounds`: it takes two binomials per weight
#: w < m, ~m**2 digit operations in all (0.1 s at m = 1000, the book's largest; 35 s at
#: m = 10**4).
MAX_LIMIT_WIDTH = 2_000


def large_context_limit_bounds(m: int) -> tuple[int, int]:
    """(lower, upper) with lower <= L(m) <= upper, L(m) = lim_{n->oo} of the best Theorem E
    bound at width m = max_w A(m, w): ceil(C(m, m//2)/m) and max_w floor(C(m, w-1)/w).
    Width m in [2, MAX_LIMIT_WIDTH]."""
    m = check_int(m, "m (token width)", 2, MAX_LIMIT_WIDTH)
    lower = max(code_size_lower_bound(m, w) for w in range(1, m))
    upper = max(code_size_upper_bound(m, w) for w in range(1, m))
    return lower, upper


def large_context_limit_log2_bounds(m: int) -> tuple[float, float]:
    """log2 of large_context_limit_bounds(m) (computed from the exact integers)."""
    lower, upper = large_context_limit_bounds(m)
    return math.log2(lower), math.log2(upper)


def max_code_size_gap_two(m: int, w: int) -> int:
    """A(m, w) exactly, by an exhaustive branch-and-bound clique search over all weight-w
    words (C(m, w) <= MAX_EXACT_WORDS): the largest set with every pairwise overlap <= w - 2."""
    m = check_int(m, "m (token width)", 2)
    w = check_int(w, "w (weight)", 1, m - 1)
    if checked_comb(m, w, f"m={m}, w={w}") > MAX_EXACT_WORDS:
        raise ValueError(f"C(m, w) = {math.comb(m, w)} words exceeds MAX_EXACT_WORDS = "
                         f"{MAX_EXACT_WORDS} for the exhaustive search; choose smaller m or w")
    words = [sum(1 << i for i in c) for c in itertools.combinations(range(m), w)]
    N = len(words)
    # adjacency as bitsets: i ~ j when the two words may both be in the code (overlap <= w-2)
    adj = [sum(1 << j for j in range(N) if j != i and bin(words[i] & words[j]).count("1") <= w - 2)
           for i in range(N)]
    best = 0

    def colour_bound(cand: int) -> int:
        """Greedy colouring of the candidate set: a clique uses at most one vertex per colour."""
        colours, rest = 0, cand
        while rest:
            colours += 1
            avail = rest
            while avail:
                v = avail & -avail
                i = v.bit_length() - 1
                rest &= ~v
                avail &= ~v & ~adj[i]
        return colours

    def expand(size: int, cand: int) -> None:
        nonlocal best
        if cand == 0:
            best = max(best, size)
            return
        if size + colour_bound(cand) <= best:
            return
        while cand:
            if size + bin(cand).count("1") <= best:
                return
            v = cand & -cand
            i = v.bit_length() - 1
            expand(size + 1, cand & adj[i])
            cand &= ~v

    expand(0, (1 << N) - 1)
    return best


def every_width_rank_bound(S, m: int, n: int = 3, eps=Fraction(1, 2)) -> Fraction:
    """Corollary ``cor-every-width`` (chapter 3): a head that solves F(S') at width m has
    r >= B(S) ** (m // m0), where S is a base code of width m0 and B(S) its Theorem E bound.

    S' is S concatenated m // m0 times, padded with zero columns (they change no overlap);
    by ``lem-concatenation`` its bound is at least B(S) ** (m // m0). Exact (a Fraction);
    since m // m0 >= (m - m0 + 1) / m0, this is >= 2^{(log2 B(S) / m0)(m - m0 + 1)}.
    Limit: m in [1, 10000] (:data:`MAX_WIDTH`).
    """
    arr, _ = check_code(S)
    m = check_int(m, "m", 1, MAX_WIDTH)
    base = trace_bound_from_distribution(gap_distribution(arr), n, eps)
    return base ** (m // arr.shape[1])
