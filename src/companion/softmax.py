"""Proposition F: dense softmax attention solves Min-IP with m-dimensional scores and a
constant temperature.

The head of :func:`companion.core.constructions.softmax_min_ip_head`: scores <-beta x, z>, values
v(z) = z, readout <x, o>. Its output is y = sum_p w_p <x, x_p> with w_p proportional to
exp(-beta <x, x_p>), so y - t = sum_p w_p d_p >= 0 with gaps d_p = <x, x_p> - t; for
beta >= 1 the error is at most (n-1) e^{-beta}, below 1/2 once beta > ln(2(n-1)).

This module measures the head's exact worst case over *all* length-n inputs on {0,1}^m and
the exact temperature threshold beta*(n, m) where that worst case drops below 1/2, and gives
both in closed form (proved in chapter 4): the worst case is max_{d<=m} (n-1)d/(e^{beta d}+n-1)
and beta*(n, m) = max_{d<=m} ln((n-1)(2d-1))/d, i.e. ln(n-1) for m = 1 or n >= 4, ln(3)/2 for
n = 2 and ln(6)/2 for n = 3 (m >= 2).

Serves chapter 4 (``prop-dense-softmax``, ``lem-overlap-profiles``).
"""

from __future__ import annotations

import math
from fractions import Fraction
from itertools import combinations_with_replacement

import numpy as np

from companion.checks import check_beta, check_float, check_int, checked_comb
from companion.core.attention import softmax_attention
from companion.core.constructions import softmax_min_ip_head
from companion.core.task import check_convention, iter_sequences, query_index, query_target

#: Largest number of overlap profiles C(m+n, n) enumerated at once.
MAX_PROFILES = 2_000_000
#: Largest C(m+n, n) * n (profiles x entries, each a Python int while the rows are built):
#: n = 204, m = 3 has only 1.5e6 profiles but 3e8 entries (over 10 GB). The book's largest,
#: n = m = 8, has 102960; the slow test's n = 8, m = 10 has 350064.
MAX_PROFILE_ENTRIES = 2**24

#: Largest C(m+n, n) * n * m (profiles x entries) that :func:`exact_threshold` bisects over:
#: ~40 evaluations of every profile; n = m = 8 (the book's largest, 823680) takes ~3 s and
#: n = 8, m = 10 (3500640, the slow test's largest) ~15 s. The cost also grows with n beyond
#: this count, hence the cap on n (n = 40, m = 3 took 7 s at 1.5e6).
MAX_THRESHOLD_WORK = 4_000_000
MAX_THRESHOLD_LENGTH = 16
#: Smallest bisection tolerance: below ~1e-15 the bracket [lo, hi] (hi <= ln(2(n-1))) stops
#: shrinking in float64 and the bisection would never end.
MIN_TOL = 1e-14

#: Largest n*m for the brute-force enumeration of all 2**(n*m) sequences.
MAX_BRUTE_FORCE_BITS = 24


def count_profiles(n: int, m: int) -> int:
    """Number of overlap profiles: sum over |x| = w <= m of multisets of n-1 overlaps in
    [0, w], i.e. C(m + n, n)."""
    n = check_int(n, "n (sequence length)", 1)
    m = check_int(m, "m (token width)", 1)
    return checked_comb(m + n, n, f"n={n}, m={m}")


def overlap_profiles(n: int, m: int) -> np.ndarray:
    """Every achievable (|x|, sorted key overlaps) for the query x of a length-n sequence on
    {0,1}^m: int array (C(m+n, n), n), column 0 the query's self-overlap |x|.

    Why this is exhaustive for Proposition F's head: its logits -beta <x, x_p> and scores
    <x, x_p> depend on a key only through the overlap <x, x_p>, and softmax attention is
    invariant under permuting the keys, so the output (and the target min_p <x, x_p>) is a
    function of |x| and the multiset of key overlaps. For |x| = w every overlap in [0, w] is
    achieved by some key, independently per key, so the profiles are exactly the pairs
    (w, multiset of n-1 values in [0, w]). Limits: C(m+n, n) <= MAX_PROFILES and
    C(m+n, n) * n <= MAX_PROFILE_ENTRIES.
    """
    total = count_profiles(n, m)
    if total > MAX_PROFILES:
        raise ValueError(
            f"n={n}, m={m} give C(m+n, n) = {total} overlap profiles, above MAX_PROFILES="
            f"{MAX_PROFILES}; choose a smaller m or n"
        )
    if total * n > MAX_PROFILE_ENTRIES:
        raise ValueError(
            f"n={n}, m={m} give C(m+n, n) * n = {total * n} profile entries, above "
            f"MAX_PROFILE_ENTRIES={MAX_PROFILE_ENTRIES}; choose a smaller n or m"
        )
    rows = [(w,) + keys for w in range(m + 1)
            for keys in combinations_with_replacement(range(w + 1), n - 1)]
    return np.array(rows, dtype=np.int64).reshape(-1, n)


def profile_sequences(n: int, m: int, convention: str = "bidirectional") -> np.ndarray:
    """One concrete length-n sequence per overlap profile: query 1^w 0^(m-w) and keys
    1^o 0^(m-o) (so <x, key> = o): shape (C(m+n, n), n, m)."""
    check_convention(convention)
    profiles = overlap_profiles(n, m)
    ones = (np.arange(m)[None, :] < profiles[:, :, None]).astype(np.int64)  # (P, n, m)
    q = query_index(n, convention)
    seqs = np.empty_like(ones)
    seqs[:, q] = ones[:, 0]  # column 0 of a profile is the query's self-overlap
    seqs[:, [p for p in range(n) if p != q]] = ones[:, 1:]
    return seqs


def errors(beta, sequences, convention: str = "bidirectional") -> np.ndarray:
    """|y - t| of Proposition F's head on each sequence (float64)."""
    head = softmax_min_ip_head(check_beta(beta))
    y = softmax_attention(head, sequences, convention)
    return np.abs(y - query_target(sequences, convention))


def max_error(beta, n: int, m: int, convention: str = "bidirectional") -> float:
    """Exact worst case max |y - t| over all length-n inputs on {0,1}^m, by evaluating the
    head once per overlap profile (see :func:`overlap_profiles` for why that is exhaustive)."""
    n = check_int(n, "n (sequence length)", 1)
    m = check_int(m, "m (token width)", 1)
    return float(errors(beta, profile_sequences(n, m, convention), convention).max())


def max_error_brute_force(beta, n: int, m: int, convention: str = "bidirectional",
                          chunk: int = 2**17) -> float:
    """The same worst case by running the head on every one of the 2**(n*m) sequences
    (streamed); a cross-check of the profile reduction, limited to n*m <= 24."""
    n = check_int(n, "n (sequence length)", 1)
    m = check_int(m, "m (token width)", 1)
    if n * m > MAX_BRUTE_FORCE_BITS:
        raise ValueError(
            f"n*m must be at most {MAX_BRUTE_FORCE_BITS} for brute force (2**(n*m) sequences), "
            f"got n={n}, m={m}; use max_error (overlap profiles) instead"
        )
    check_beta(beta)
    return float(max(errors(beta, seqs, convention).max()
                     for seqs in iter_sequences(n, m, chunk=chunk)))


def worst_profile(beta, n: int, m: int) -> tuple[int, ...]:
    """The overlap profile (|x|, key overlaps) where the worst case is attained."""
    errs = errors(beta, profile_sequences(n, m))
    return tuple(int(v) for v in overlap_profiles(n, m)[int(np.argmax(errs))])


def error_bound(beta, n: int) -> float:
    """(n-1) e^{-beta}: Proposition F's bound on the error, valid for beta >= 1."""
    n = check_int(n, "n (sequence length)", 2)
    return (n - 1) * math.exp(-check_beta(beta))


def sufficient_threshold(n: int) -> float:
    """ln(2(n-1)): any beta above it has (n-1) e^{-beta} < 1/2, hence rounding is exact."""
    n = check_int(n, "n (sequence length)", 2)
    return math.log(2 * (n - 1))


def exact_threshold(n: int, m: int, tol: float = 1e-12) -> float:
    """beta*(n, m) = inf {beta : max error < 1/2}, by bisection on [0, ln(2(n-1))].

    Valid because each profile's error is the mean gap under weights proportional to
    e^{-beta d}, whose derivative in beta is minus the variance of the gaps (<= 0): the worst
    case is nonincreasing in beta. Raises if the bracket fails (that would refute
    Proposition F at beta = ln(2(n-1))). Limits: n <= 16, C(m+n, n) * n * m <= 4 * 10**6
    (:data:`MAX_THRESHOLD_WORK`) and tol in [1e-14, 1) (:data:`MIN_TOL`); past them
    :func:`threshold_closed_form` gives the same value.
    """
    n = check_int(n, "n (sequence length)", 2, MAX_THRESHOLD_LENGTH)
    m = check_int(m, "m (token width)", 1)
    tol = check_float(tol, "tol", MIN_TOL, 1, high_open=True)
    work = count_profiles(n, m) * n * m
    if work > MAX_THRESHOLD_WORK:
        raise ValueError(
            f"n={n}, m={m} give C(m+n, n) * n * m = {work} profile entries to bisect over, above "
            f"MAX_THRESHOLD_WORK={MAX_THRESHOLD_WORK}; use threshold_closed_form(n, m)")
    seqs = profile_sequences(n, m)

    def worst(beta):
        return float(errors(beta, seqs).max())

    lo, hi = 0.0, sufficient_threshold(n)
    if worst(lo) < 0.5:
        return 0.0
    if not worst(hi) < 0.5:
        raise ArithmeticError(f"max error at beta = ln(2(n-1)) is not below 1/2 for n={n}, m={m}")
    while hi - lo > tol:
        mid = (lo + hi) / 2
        if worst(mid) < 0.5:
            hi = mid
        else:
            lo = mid
    return hi


# --- closed forms: the worst profile, the exact threshold and saturation ------------------
#
# Theorem (worst profile). For n >= 2, m >= 1, beta >= 0 the worst case over all inputs is
# attained by a *uniform-gap profile* U_d: one key at the minimum overlap and the other n-1
# positions (the query's own slot among them) at gap d, for some 1 <= d <= m:
#     max error = max_{1<=d<=m} (n-1) d / (e^{beta d} + n - 1).
# Proof sketch (the chapter has it in full): with lam the right-hand side, every d in [1, m]
# has (d - lam) e^{-beta d} <= lam/(n-1); a profile has z >= 1 positions at gap 0 and at most
# n-1 at gaps in [1, m], so sum_p (d_p - lam) e^{-beta d_p} <= -z lam + lam <= 0, i.e. its
# error sum_p d_p e^{-beta d_p} / sum_p e^{-beta d_p} is at most lam.


def _check_decay(decay) -> Fraction:
    """e^{-beta} as an exact rational in (0, 1]."""
    if isinstance(decay, bool) or not isinstance(decay, (int, Fraction)):
        raise TypeError(f"decay (= e^-beta) must be an int or Fraction, got {type(decay).__name__}")
    decay = Fraction(decay)
    if not 0 < decay <= 1:
        raise ValueError(f"decay (= e^-beta) must lie in (0, 1], got {decay}")
    return decay


def uniform_gap_error(beta, n: int, d: int) -> float:
    """Error of the uniform-gap profile U_d (one key at the minimum, the other n-1 positions
    at gap d): (n-1) d e^{-beta d} / (1 + (n-1) e^{-beta d}) = (n-1) d / (e^{beta d} + n-1)."""
    beta = check_beta(beta)
    n = check_int(n, "n (sequence length)", 2)
    d = check_int(d, "d (gap)", 1)
    # e^{-beta d} form: no overflow for large beta*d, and the same value as the head computes
    u = (n - 1) * math.exp(-beta * d)
    return d * u / (1 + u)


#: Largest d * bits(decay) of an exact power y**d (~1 Mbit numbers, well under a second).
MAX_EXACT_POWER_BITS = 2**20
#: Largest m * bits(decay) of the exact scans over d <= m (cost ~ m**2 bits / 2).
MAX_EXACT_SCAN_BITS = 2**14
#: Largest C(m+n, n) * n of max_error_exact's exact profile loop.
MAX_EXACT_PROFILE_WORK = 10**6


def _decay_bits(y: Fraction) -> int:
    return max(y.numerator.bit_length(), y.denominator.bit_length(), 1)


def _uniform_gap_error_exact(y: Fraction, n: int, d: int) -> Fraction:
    """uniform_gap_error at e^{-beta} = y, exactly: (n-1) d y^d / (1 + (n-1) y^d)."""
    u = (n - 1) * y**d
    return d * u / (1 + u)


#: Widths up to which the closed forms scan every gap d <= m (~0.5 s); past it they stop at
#: saturation_width(beta, n), which needs beta >= MIN_SATURATION_BETA to stay cheap.
MAX_GAP_SCAN = 100_000
MIN_SATURATION_BETA = 1e-4


def _gaps_to_scan(beta: float, n: int, m: int) -> int:
    """How many gaps d = 1.. the max over d <= m needs (beta > 0): all m of them, or past
    MAX_GAP_SCAN only up to the overall maximiser saturation_width(beta, n)."""
    if m <= MAX_GAP_SCAN:
        return m
    if beta < MIN_SATURATION_BETA:
        raise ValueError(
            f"m must be <= {MAX_GAP_SCAN} when 0 < beta < {MIN_SATURATION_BETA} (the worst gap "
            f"is then near 1/beta and costs that many steps to find), got m={m}, beta={beta}")
    return min(m, saturation_width(beta, n))


def max_error_closed_form(beta, n: int, m: int) -> float:
    """The exact worst case of Proposition F's head over all length-n inputs on {0,1}^m, in
    closed form: max_{1<=d<=m} (n-1) d / (e^{beta d} + n - 1) (the worst-profile theorem).
    Any m: at beta = 0 the terms increase (the max is at d = m), and past m = 10**5 the scan
    stops at :func:`saturation_width` (m > 10**5 then needs beta >= 1e-4)."""
    beta = check_beta(beta)
    n = check_int(n, "n (sequence length)", 2)
    m = check_int(m, "m (token width)", 1)
    if beta == 0:
        return uniform_gap_error(beta, n, m)
    return max(uniform_gap_error(beta, n, d) for d in range(1, _gaps_to_scan(beta, n, m) + 1))


def worst_gap(beta, n: int, m: int) -> int:
    """The smallest gap d in [1, m] whose uniform-gap profile attains the worst case (bounded
    cost like :func:`max_error_closed_form`)."""
    beta = check_beta(beta)
    n = check_int(n, "n (sequence length)", 2)
    m = check_int(m, "m (token width)", 1)
    if beta == 0:
        return m  # (n-1) d / n increases with d
    values = [uniform_gap_error(beta, n, d) for d in range(1, _gaps_to_scan(beta, n, m) + 1)]
    return 1 + int(np.argmax(values))


def _gap_profiles(n: int, m: int) -> list[list[int]]:
    """The gap vectors (d_p) = overlaps - min of all overlap profiles, each once.

    A profile with minimum t > 0 has the same gaps as the profile shifted down by t (query
    weight |x| - t, key overlaps minus t), so the profiles with minimum 0 already list every
    gap vector."""
    rows = overlap_profiles(n, m)
    return rows[rows.min(axis=1) == 0].tolist()


def max_error_exact(decay, n: int, m: int) -> Fraction:
    """The worst case over all length-n inputs on {0,1}^m at e^{-beta} = decay, in exact
    rational arithmetic: max over every overlap profile of sum d y^d / sum y^d.

    An independent check of the worst-profile theorem and of beta*(n, m) that uses no floats
    (choose a rational decay y; beta = -ln y). Limits: m * bits(decay) <= 2**14 and
    C(m+n, n) * n <= 10**6 (:data:`MAX_EXACT_PROFILE_WORK`)."""
    y = _check_decay(decay)
    n = check_int(n, "n (sequence length)", 2)
    m = check_int(m, "m (token width)", 1, MAX_EXACT_SCAN_BITS // _decay_bits(y))
    if count_profiles(n, m) * n > MAX_EXACT_PROFILE_WORK:
        raise ValueError(f"n={n}, m={m} give C(m+n, n) * n = {count_profiles(n, m) * n} exact "
                         f"profile terms, above {MAX_EXACT_PROFILE_WORK}; use "
                         "max_error_closed_form_exact(decay, n, m)")
    p, q = y.numerator, y.denominator
    # scale every weight y^d by q^m: integer weights p^d q^(m-d), ratios unchanged
    weight = [p**d * q ** (m - d) for d in range(m + 1)]
    best_num, best_den = 0, 1
    for gaps in _gap_profiles(n, m):
        num = sum(d * weight[d] for d in gaps)
        den = sum(weight[d] for d in gaps)
        if num * best_den > best_num * den:
            best_num, best_den = num, den
    return Fraction(best_num, best_den)


def max_error_closed_form_exact(decay, n: int, m: int) -> Fraction:
    """max_{1<=d<=m} _uniform_gap_error_exact(decay, n, d): the theorem's value, exactly.
    Limit: m * bits(decay) <= 2**14 (:data:`MAX_EXACT_SCAN_BITS`)."""
    y = _check_decay(decay)
    n = check_int(n, "n (sequence length)", 2)
    m = check_int(m, "m (token width)", 1, MAX_EXACT_SCAN_BITS // _decay_bits(y))
    return max(_uniform_gap_error_exact(y, n, d) for d in range(1, m + 1))


def threshold_gap(n: int, m: int) -> int:
    """The gap d whose uniform profile decides beta*(n, m): 1 when m = 1 or n >= 4, else 2.

    (At n = 4 gaps 1 and 2 tie: ln 3 = ln 9 / 2; the smaller gap is returned.)"""
    n = check_int(n, "n (sequence length)", 2)
    m = check_int(m, "m (token width)", 1)
    return 2 if m >= 2 and n <= 3 else 1


def threshold_closed_form_terms(n: int, m: int) -> tuple[int, int]:
    """(N, d) with beta*(n, m) = ln(N) / d exactly: N = (n-1)(2d-1), d = threshold_gap(n, m).

    So beta*(n, 1) = ln(n-1); for m >= 2, beta*(2, m) = ln(3)/2, beta*(3, m) = ln(6)/2 and
    beta*(n, m) = ln(n-1) for n >= 4."""
    d = threshold_gap(n, m)
    return (n - 1) * (2 * d - 1), d


def threshold_closed_form(n: int, m: int) -> float:
    """beta*(n, m) = max_{1<=d<=m} ln((n-1)(2d-1))/d, proven to equal ln(N)/d with (N, d) from
    threshold_closed_form_terms: the head's max error is < 1/2 exactly when beta > beta*."""
    N, d = threshold_closed_form_terms(n, m)
    return math.log(N) / d


def saturation_bound(beta, n: int) -> float:
    """(n-1)/(e beta): for beta > 0 the max error is below this for every width m, because
    u e^{-beta u} <= 1/(e beta) for all u >= 0."""
    beta = check_beta(beta)
    n = check_int(n, "n (sequence length)", 2)
    if beta == 0:
        raise ValueError("beta must be > 0 for the saturation bound (at beta = 0 the worst case "
                         "(n-1)m/n grows without bound in m)")
    return (n - 1) / (math.e * beta)


def saturation_width(beta, n: int) -> int:
    """The least width m_0 from which the max error no longer changes with m (beta > 0):
    the smallest maximiser over all d >= 1 of (n-1) d / (e^{beta d} + n - 1).

    The search stops at the first d past 1/beta with (n-1) d e^{-beta d} below the best value
    so far: from there on (n-1) d e^{-beta d} decreases and bounds every later term.
    Limit: beta >= 1e-4 (:data:`MIN_SATURATION_BETA`; the scan runs past 1/beta)."""
    beta = check_beta(beta)
    n = check_int(n, "n (sequence length)", 2)
    if beta == 0:
        raise ValueError("beta must be > 0: at beta = 0 the worst case grows with m forever")
    if beta < MIN_SATURATION_BETA:
        raise ValueError(f"beta must be >= {MIN_SATURATION_BETA} for saturation_width (the scan "
                         f"runs past 1/beta = {1 / beta:.3g} gaps), got {beta}")
    best_d, best, d = 1, uniform_gap_error(beta, n, 1), 1
    while True:
        d += 1
        value = uniform_gap_error(beta, n, d)
        if value > best:
            best_d, best = d, value
        # <=, not <: with every term 0 (huge beta) a strict test would never stop
        if d >= 1 / beta and (n - 1) * d * math.exp(-beta * d) <= best:
            return best_d
