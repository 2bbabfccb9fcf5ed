"""Proposition F: dense softmax attention solves Min-IP with a constant temperature (chapter
4: ``prop-dense-softmax``, ``lem-overlap-profiles``).

The head of :func:`companion.core.constructions.softmax_min_ip_head` has error at most
(n-1) e^{-beta}; here its exact worst case max_{d<=m} (n-1)d/(e^{beta d}+n-1) over {0,1}^m and
the threshold beta*(n, m) = max_{d<=m} ln((n-1)(2d-1))/d, by enumeration and in closed form.
"""

from __future__ import annotations

import math
from fractions import Fraction
from itertools import combinations_with_replacement

import numpy as np

from companion.checks import check_beta, check_float, check_fraction, check_int, checked_comb
from companion.core.attention import softmax_attention
from companion.core.constructions import softmax_min_ip_head
from companion.core.task import check_convention, iter_sequences, query_index, query_target

__all__ = [
    "count_profiles", "max_error", "max_error_brute_force", "worst_profile", "error_bound",
    "sufficient_threshold", "exact_threshold", "max_error_closed_form", "worst_gap",
    "max_error_exact", "max_error_closed_form_exact", "threshold_closed_form_terms",
    "threshold_closed_form",
]

#: Most overlap profiles C(m+n, n), and profile entries C(m+n, n) * n (Python ints while
#: the rows are built; n = 204, m = 3 has 3e8), enumerated at once.
MAX_PROFILES = 2_000_000
MAX_PROFILE_ENTRIES = 2**24
#: Most C(m+n, n) * n * m that :func:`exact_threshold` bisects over (~40 passes; n = m = 8,
#: the book's largest, takes ~3 s), and its largest n; the smallest tolerance float64 resolves.
MAX_THRESHOLD_WORK = 4_000_000
MAX_THRESHOLD_LENGTH = 16
MIN_TOL = 1e-14

MAX_BRUTE_FORCE_BITS = 24  # largest n*m of the brute force over all 2**(n*m) sequences


def _check_nm(n, m, low_n: int = 2, profiles: bool = False) -> tuple[int, int]:
    """n >= low_n, m >= 1; with `profiles`, C(m+n, n) overlap profiles of n entries within
    MAX_PROFILES and MAX_PROFILE_ENTRIES."""
    n, m = check_int(n, "n (sequence length)", low_n), check_int(m, "m (token width)", 1)
    total = checked_comb(m + n, n, f"n={n}, m={m}") if profiles else 0
    if total > MAX_PROFILES or total * n > MAX_PROFILE_ENTRIES:
        raise ValueError(f"n={n}, m={m} give C(m+n, n) = {total} overlap profiles of n entries, "
                         f"above MAX_PROFILES={MAX_PROFILES} or MAX_PROFILE_ENTRIES="
                         f"{MAX_PROFILE_ENTRIES}; choose a smaller n or m")
    return n, m


def count_profiles(n: int, m: int) -> int:
    """Number of overlap profiles: sum over |x| = w <= m of multisets of n-1 overlaps in
    [0, w], i.e. C(m + n, n)."""
    n, m = _check_nm(n, m, 1)
    return checked_comb(m + n, n, f"n={n}, m={m}")


def _overlap_profiles(n: int, m: int) -> np.ndarray:
    """Every (|x|, sorted key overlaps) of a length-n sequence on {0,1}^m, shape (C(m+n, n), n)
    (``lem-overlap-profiles``: the head sees a key only through <x, x_p>, in any order)."""
    rows = [(w,) + keys for w in range(m + 1)
            for keys in combinations_with_replacement(range(w + 1), n - 1)]
    return np.array(rows, dtype=np.int64).reshape(-1, n)


def _profile_sequences(n: int, m: int, convention: str = "bidirectional") -> np.ndarray:
    """One length-n sequence per overlap profile: query 1^w 0^(m-w) and keys 1^o 0^(m-o)."""
    profiles = _overlap_profiles(n, m)
    ones = (np.arange(m)[None, :] < profiles[:, :, None]).astype(np.int64)  # (P, n, m)
    q = query_index(n, convention)
    seqs = np.empty_like(ones)
    seqs[:, q] = ones[:, 0]  # column 0 of a profile is the query's self-overlap
    seqs[:, [p for p in range(n) if p != q]] = ones[:, 1:]
    return seqs


def _errors(beta, sequences, convention: str = "bidirectional") -> np.ndarray:
    """|y - t| of Proposition F's head on each sequence (float64)."""
    head = softmax_min_ip_head(beta)
    y = softmax_attention(head, sequences, convention)
    return np.abs(y - query_target(sequences, convention))


def max_error(beta, n: int, m: int, convention: str = "bidirectional") -> float:
    """Exact worst case max |y - t| over all length-n inputs on {0,1}^m, by evaluating the
    head once per overlap profile (exhaustive by ``lem-overlap-profiles``)."""
    beta, (n, m) = check_beta(beta), _check_nm(n, m, 1, profiles=True)
    check_convention(convention)
    return float(_errors(beta, _profile_sequences(n, m, convention), convention).max())


def max_error_brute_force(beta, n: int, m: int, convention: str = "bidirectional",
                          chunk: int = 2**17) -> float:
    """The same worst case by running the head on every one of the 2**(n*m) sequences
    (streamed); a cross-check of the profile reduction, limited to n*m <= 24."""
    n, m = _check_nm(n, m, 1)
    if n * m > MAX_BRUTE_FORCE_BITS:
        raise ValueError(
            f"n*m must be at most {MAX_BRUTE_FORCE_BITS} for brute force (2**(n*m) sequences), "
            f"got n={n}, m={m}; use max_error (overlap profiles) instead")
    beta = check_beta(beta)
    check_convention(convention)
    chunk = check_int(chunk, "chunk", 1)
    return float(max(_errors(beta, seqs, convention).max()
                     for seqs in iter_sequences(n, m, chunk=chunk)))


def worst_profile(beta, n: int, m: int) -> tuple[int, ...]:
    """The overlap profile (|x|, key overlaps) where the worst case is attained."""
    beta, (n, m) = check_beta(beta), _check_nm(n, m, 1, profiles=True)
    errs = _errors(beta, _profile_sequences(n, m))
    return tuple(int(v) for v in _overlap_profiles(n, m)[int(np.argmax(errs))])


def error_bound(beta, n: int) -> float:
    """(n-1) e^{-beta}: Proposition F's bound on the error, valid for beta >= 1."""
    n = check_int(n, "n (sequence length)", 2)
    return (n - 1) * math.exp(-check_beta(beta))


def sufficient_threshold(n: int) -> float:
    """ln(2(n-1)): any beta above it has (n-1) e^{-beta} < 1/2, hence rounding is exact."""
    n = check_int(n, "n (sequence length)", 2)
    return math.log(2 * (n - 1))


def exact_threshold(n: int, m: int, tol: float = 1e-12) -> float:
    """beta*(n, m) = inf {beta : max error < 1/2} by bisection on [0, ln(2(n-1))] (each
    profile's error, a mean gap under weights e^{-beta d}, is nonincreasing in beta)."""
    n = check_int(n, "n (sequence length)", 2, MAX_THRESHOLD_LENGTH)
    m = check_int(m, "m (token width)", 1)
    tol = check_float(tol, "tol", MIN_TOL, 1, high_open=True)
    work = count_profiles(n, m) * n * m
    if work > MAX_THRESHOLD_WORK:
        raise ValueError(
            f"n={n}, m={m} give C(m+n, n) * n * m = {work} profile entries to bisect over, above "
            f"MAX_THRESHOLD_WORK={MAX_THRESHOLD_WORK}; use threshold_closed_form(n, m)")
    seqs = _profile_sequences(n, m)

    def worst(beta):
        return float(_errors(beta, seqs).max())

    lo, hi = 0.0, math.log(2 * (n - 1))
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


# --- closed forms (chapter 4's worst-profile theorem): the worst case over all inputs is
# attained by a uniform-gap profile U_d (one key at the minimum overlap, the other n-1
# positions at gap d): max error = max_{1<=d<=m} (n-1) d / (e^{beta d} + n - 1).

#: Largest m * bits(decay) of the exact scans over d <= m (cost ~ m**2 bits / 2).
MAX_EXACT_SCAN_BITS = 2**14
#: Largest C(m+n, n) * n of max_error_exact's exact profile loop.
MAX_EXACT_PROFILE_WORK = 10**6


def _check_exact(decay, n, m) -> tuple[Fraction, int, int]:
    """decay = e^{-beta} as an exact rational in (0, 1], n and m (m * bits(decay) <= 2**14)."""
    y = check_fraction(decay, "decay (= e^-beta)", 0, 1, low_open=True)
    bits = max(y.numerator.bit_length(), y.denominator.bit_length(), 1)
    n = check_int(n, "n (sequence length)", 2)
    return y, n, check_int(m, "m (token width)", 1, MAX_EXACT_SCAN_BITS // bits)


def _uniform_gap_error(beta, n: int, d: int) -> float:
    """Error of the uniform-gap profile U_d: (n-1) d / (e^{beta d} + n-1)."""
    # e^{-beta d} form: no overflow for large beta*d, and the same value as the head computes
    u = (n - 1) * math.exp(-beta * d)
    return d * u / (1 + u)


#: Widths up to which the closed forms scan every gap d <= m (~0.5 s); past it they stop at
#: the saturation width, which needs beta >= MIN_SATURATION_BETA to stay cheap.
MAX_GAP_SCAN = 100_000
MIN_SATURATION_BETA = 1e-4


def _check_scan(beta, n, m) -> tuple[float, int, int]:
    """beta, n, m of the closed forms: past m = MAX_GAP_SCAN, beta = 0 or >= MIN_SATURATION_BETA."""
    beta, (n, m) = check_beta(beta), _check_nm(n, m)
    if m > MAX_GAP_SCAN and 0 < beta < MIN_SATURATION_BETA:
        raise ValueError(
            f"m must be <= {MAX_GAP_SCAN} when 0 < beta < {MIN_SATURATION_BETA} (the worst gap "
            f"is then near 1/beta and costs that many steps to find), got m={m}, beta={beta}")
    return beta, n, m


def _gaps_to_scan(beta: float, n: int, m: int) -> int:
    """How many gaps d = 1.. the max over d <= m needs (beta > 0): all m, or past
    MAX_GAP_SCAN only up to the overall maximiser _saturation_width(beta, n)."""
    return m if m <= MAX_GAP_SCAN else min(m, _saturation_width(beta, n))


def max_error_closed_form(beta, n: int, m: int) -> float:
    """The exact worst case in closed form, max_{1<=d<=m} (n-1) d / (e^{beta d} + n - 1) (past
    m = 10**5 the scan stops where the terms saturate)."""
    beta, n, m = _check_scan(beta, n, m)
    if beta == 0:
        return _uniform_gap_error(beta, n, m)
    return max(_uniform_gap_error(beta, n, d) for d in range(1, _gaps_to_scan(beta, n, m) + 1))


def worst_gap(beta, n: int, m: int) -> int:
    """The smallest gap d in [1, m] whose uniform-gap profile attains the worst case (bounded
    cost like :func:`max_error_closed_form`)."""
    beta, n, m = _check_scan(beta, n, m)
    if beta == 0:
        return m  # (n-1) d / n increases with d
    values = [_uniform_gap_error(beta, n, d) for d in range(1, _gaps_to_scan(beta, n, m) + 1)]
    return 1 + int(np.argmax(values))


def _gap_profiles(n: int, m: int) -> list[list[int]]:
    """The gap vectors (d_p) = overlaps - min of all overlap profiles, each once (shifting a
    profile down by its minimum keeps its gaps, so those with minimum 0 list them all)."""
    rows = _overlap_profiles(n, m)
    return rows[rows.min(axis=1) == 0].tolist()


def max_error_exact(decay, n: int, m: int) -> Fraction:
    """The worst case over all length-n inputs on {0,1}^m at e^{-beta} = decay, in exact
    rational arithmetic: max over every overlap profile of sum d y^d / sum y^d (a float-free
    check of the worst-profile theorem)."""
    y, n, m = _check_exact(decay, n, m)
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
    """max_{1<=d<=m} (n-1) d y^d / (1 + (n-1) y^d) at y = decay: the theorem's value, exactly."""
    y, n, m = _check_exact(decay, n, m)
    return max(d * (n - 1) * y**d / (1 + (n - 1) * y**d) for d in range(1, m + 1))


def threshold_closed_form_terms(n: int, m: int) -> tuple[int, int]:
    """(N, d) with beta*(n, m) = ln(N) / d exactly, N = (n-1)(2d-1): ln(n-1) for m = 1 or
    n >= 4, ln(3)/2 for n = 2 and ln(6)/2 for n = 3 (m >= 2)."""
    n, m = _check_nm(n, m)
    d = 2 if m >= 2 and n <= 3 else 1  # at n = 4 gaps 1 and 2 tie: ln 3 = ln 9 / 2
    return (n - 1) * (2 * d - 1), d


def threshold_closed_form(n: int, m: int) -> float:
    """beta*(n, m) = max_{1<=d<=m} ln((n-1)(2d-1))/d, proven to equal ln(N)/d with (N, d) from
    threshold_closed_form_terms: the head's max error is < 1/2 exactly when beta > beta*."""
    N, d = threshold_closed_form_terms(n, m)
    return math.log(N) / d


def _saturation_width(beta, n: int) -> int:
    """The least width m_0 (beta > 0) from which the max error no longer changes with m: the
    smallest maximiser over d >= 1 of (n-1) d / (e^{beta d} + n - 1). The scan stops at the
    first d past 1/beta with (n-1) d e^{-beta d} <= the best so far (it decreases from there)."""
    best_d, best, d = 1, _uniform_gap_error(beta, n, 1), 1
    while True:
        d += 1
        value = _uniform_gap_error(beta, n, d)
        if value > best:
            best_d, best = d, value
        # <=, not <: with every term 0 (huge beta) a strict test would never stop
        if d >= 1 / beta and (n - 1) * d * math.exp(-beta * d) <= best:
            return best_d
