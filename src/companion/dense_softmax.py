"""Proposition F: dense softmax attention solves Min-IP with m-dimensional scores and a
constant temperature.

The head of :func:`companion.constructions.softmax_min_ip_head`: scores <-beta x, z>, values
v(z) = z, readout <x, o>. Its output is y = sum_p w_p <x, x_p> with w_p proportional to
exp(-beta <x, x_p>), so y - t = sum_p w_p d_p >= 0 with gaps d_p = <x, x_p> - t; for
beta >= 1 the error is at most (n-1) e^{-beta}, below 1/2 once beta > ln(2(n-1)).

This module measures the head's exact worst case over *all* length-n inputs on {0,1}^m and
the exact temperature threshold beta*(n, m) where that worst case drops below 1/2.

Serves chapter 4 (``prop-dense-softmax``, ``lem-overlap-profiles``).
"""

from __future__ import annotations

import math
from itertools import combinations_with_replacement

import numpy as np

from .attention import softmax_attention
from .checks import check_beta, check_float, check_int
from .constructions import softmax_min_ip_head
from .task import check_convention, iter_sequences, query_index, query_target

#: Largest number of overlap profiles C(m+n, n) enumerated at once.
MAX_PROFILES = 2_000_000

#: Largest n*m for the brute-force enumeration of all 2**(n*m) sequences.
MAX_BRUTE_FORCE_BITS = 24


def count_profiles(n: int, m: int) -> int:
    """Number of overlap profiles: sum over |x| = w <= m of multisets of n-1 overlaps in
    [0, w], i.e. C(m + n, n)."""
    n = check_int(n, "n (sequence length)", 1)
    m = check_int(m, "m (token width)", 1)
    return math.comb(m + n, n)


def overlap_profiles(n: int, m: int) -> np.ndarray:
    """Every achievable (|x|, sorted key overlaps) for the query x of a length-n sequence on
    {0,1}^m: int array (C(m+n, n), n), column 0 the query's self-overlap |x|.

    Why this is exhaustive for Proposition F's head: its logits -beta <x, x_p> and scores
    <x, x_p> depend on a key only through the overlap <x, x_p>, and softmax attention is
    invariant under permuting the keys, so the output (and the target min_p <x, x_p>) is a
    function of |x| and the multiset of key overlaps. For |x| = w every overlap in [0, w] is
    achieved by some key, independently per key, so the profiles are exactly the pairs
    (w, multiset of n-1 values in [0, w]).
    """
    total = count_profiles(n, m)
    if total > MAX_PROFILES:
        raise ValueError(
            f"n={n}, m={m} give C(m+n, n) = {total} overlap profiles, above MAX_PROFILES="
            f"{MAX_PROFILES}; choose a smaller m or n"
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
    Proposition F at beta = ln(2(n-1))).
    """
    n = check_int(n, "n (sequence length)", 2)
    m = check_int(m, "m (token width)", 1)
    tol = check_float(tol, "tol", 0, 1, low_open=True, high_open=True)
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


def uniform_gap_threshold(n: int, m: int) -> float:
    """max over gaps 1 <= d <= m of ln((n-1)(2d-1)) / d: where the profile with n-1 tokens at
    gap d (the query's own slot among them) and one key at the minimum reaches error 1/2.

    A lower bound on beta*(n, m) by construction; the chapter checks numerically that it is
    the exact threshold (an observation, not a theorem).
    """
    n = check_int(n, "n (sequence length)", 3)
    m = check_int(m, "m (token width)", 1)
    return max(math.log((n - 1) * (2 * d - 1)) / d for d in range(1, m + 1))
