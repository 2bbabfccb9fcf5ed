"""Numerical search for low-rank admissible ratio matrices (Chapter 3, the sandwich's upper
ends): float factors by Douglas-Rachford splitting between the box and the rank-r matrices
(signed) or by HALS (nonnegative), rounded to rationals; only the exact check of the rounded
head (:func:`companion.sandwich.heads.build_exact_head`) counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from companion.bounds.witness import WitnessFamily
from companion.checks import (
    check_array,
    check_float,
    check_instance,
    check_int,
    check_int_sequence,
)
from companion.sandwich.heads import ExactHead, build_exact_head
from companion.sandwich.matrix import (
    RatioBounds,
    admissibility_violations,
    ratio_bounds,
    ratio_matrix_of_factors,
)

__all__ = ["search_ratio_factors", "exact_head_from_search"]

#: Denominators tried, in order, when rounding float factors to rationals.
ROUNDING_DENOMINATORS = (2**10, 2**14, 2**20, 2**30)
#: Most restarts x rounds of one search (a round: 100 Douglas-Rachford steps, one SVD each,
#: or 100 HALS sweeps) and most denominators tried (an exact check each).
MAX_SEARCH_ROUNDS = 10_000
MAX_DENOMINATORS = 16


@dataclass(frozen=True)
class SearchResult:
    """Float factors (Q, K) with Q K^T admissible up to the margin (rows normalised), the
    restart and round that found them; None factors when the search failed."""

    rank: int
    nonnegative: bool
    seed: int
    query_factor: np.ndarray | None
    key_factor: np.ndarray | None
    restart: int | None
    worst_violation: float


def _violation(X, upper, margin, floor):
    N = len(X)
    off = ~np.eye(N, dtype=bool)
    d = np.diag(X)
    if np.any(d <= 0):
        return np.inf
    Xn = X / d[:, None]
    return float(max(np.max(Xn[off] - upper[off] * (1 - margin / 2)),
                     np.max(upper[off] * floor / 2 - Xn[off])))


def _signed_search(upper, r, rng, margin, floor, rounds, start=None):
    """Douglas-Rachford for a point of the box [floor u, (1 - margin) u] (unit diagonal) of
    rank r: Y <- Y + P_rank(2 P_box(Y) - Y) - P_box(Y); factors of the rank-r part of P_box(Y)
    once its rows, normalised, clear the bounds."""
    hi, lo = upper * (1 - margin), upper * floor
    np.fill_diagonal(hi, 1.0)
    np.fill_diagonal(lo, 1.0)
    Y = rng.uniform(lo, hi) if start is None else np.array(start, dtype=np.float64)
    worst = np.inf
    for _ in range(rounds):
        for _ in range(100):
            B = np.clip(Y, lo, hi)
            U, sv, Vt = np.linalg.svd(2 * B - Y)
            Y += (U[:, :r] * sv[:r]) @ Vt[:r] - B
        U, sv, Vt = np.linalg.svd(np.clip(Y, lo, hi))
        root = np.sqrt(sv[:r])
        Q, K = U[:, :r] * root, Vt[:r].T * root
        worst = min(worst, _violation(Q @ K.T, upper, margin, floor))
        if worst < 0:
            return Q, K, worst
    return None, None, worst


def _hals(X, W, H):
    """One sweep of HALS: nonnegative least squares for W, then H, in X ~ W H^T."""
    for A, B, T in ((W, H, X), (H, W, X.T)):
        BtB, TB = B.T @ B, T @ B
        for i in range(A.shape[1]):
            A[:, i] = np.maximum(1e-12, A[:, i] + (TB[:, i] - A @ BtB[:, i])
                                 / max(BtB[i, i], 1e-12))


def _nonnegative_search(upper, r, rng, margin, floor, rounds):
    N = len(upper)
    hi, lo = upper * (1 - margin), upper * floor
    W, H = rng.uniform(0, 1, (N, r)), rng.uniform(0, 1, (N, r))
    worst = np.inf
    for _ in range(rounds * 100):
        X = W @ H.T
        worst = min(worst, _violation(X, upper, margin, floor))
        if worst < 0:
            return W, H, worst
        Y = np.clip(X, lo, hi)
        np.fill_diagonal(Y, 1.0)
        _hals(Y, W, H)
    return None, None, worst


def search_ratio_factors(bounds: RatioBounds, rank: int, seed: int = 0, nonnegative=False,
                         restarts: int = 4, rounds: int = 30, margin: float = 2e-3,
                         floor: float = 1e-4, start=None) -> SearchResult:
    """Float factors Q, K (|S| x rank) with Q K^T admissible, off-diagonal entries in [floor u,
    (1 - margin) u]: Douglas-Rachford between the box and the rank-r matrices (signed) or HALS
    projections (nonnegative). Seeded; `start` (N x N) seeds the first signed restart."""
    N = check_instance(bounds, "bounds", RatioBounds).size
    rank = check_int(rank, "rank", 1, N)
    seed = check_int(seed, "seed", 0)
    restarts, rounds = check_int(restarts, "restarts", 0), check_int(rounds, "rounds", 0)
    if restarts * rounds > MAX_SEARCH_ROUNDS:
        raise ValueError(f"restarts x rounds = {restarts * rounds} exceeds MAX_SEARCH_ROUNDS = "
                         f"{MAX_SEARCH_ROUNDS}")
    margin = check_float(margin, "margin", 0, 1, low_open=True, high_open=True)
    floor = check_float(floor, "floor", 0, 1, low_open=True, high_open=True)
    if start is not None:
        start = check_array(start, "start", 2).astype(np.float64)
        if start.shape != (N, N) or not np.all(np.isfinite(start)):
            raise ValueError(f"start must be a finite |S| x |S| = {N} x {N} matrix, got shape "
                             f"{start.shape}")
    upper = np.vectorize(float, otypes=[np.float64])(bounds.upper)
    rng = np.random.default_rng(seed)
    worst = np.inf
    for restart in range(restarts):
        if nonnegative:
            Q, K, v = _nonnegative_search(upper, rank, rng, margin, floor, rounds)
        else:
            Q, K, v = _signed_search(upper, rank, rng, margin, floor, rounds,
                                     start if restart == 0 else None)
        worst = min(worst, v)
        if Q is not None:
            return SearchResult(rank, bool(nonnegative), seed, Q, K, restart, v)
    return SearchResult(rank, bool(nonnegative), seed, None, None, None, worst)


def _rationalise(factor: np.ndarray, denominator: int) -> np.ndarray:
    """Every entry rounded to the nearest multiple of 1/denominator (a Fraction, sign kept)."""
    return np.array([Fraction(round(v * denominator), denominator)
                     for v in factor.ravel().tolist()], dtype=object).reshape(factor.shape)


def exact_head_from_search(family: WitnessFamily, result: SearchResult,
                           denominators=ROUNDING_DENOMINATORS) -> ExactHead:
    """Round a search result's factors (rows of Q scaled so diag(Q K^T) = 1 first) with the
    smallest denominator that leaves M admissible, then build and check the head exactly."""
    if not isinstance(result, SearchResult) or result.query_factor is None:
        raise ValueError("result must be a successful SearchResult (query_factor not None)")
    denominators = check_int_sequence(denominators, "denominators", 1)
    if len(denominators) > MAX_DENOMINATORS:
        raise ValueError(f"denominators must hold at most {MAX_DENOMINATORS} values, got "
                         f"{len(denominators)}")
    bounds = ratio_bounds(family)
    if np.shape(result.query_factor)[0] != bounds.size:
        raise ValueError(f"result must come from a search on this family (|S| = "
                         f"{bounds.size}), got factors of shape {np.shape(result.query_factor)}")
    Qf, Kf = result.query_factor, result.key_factor
    Qf = Qf / np.einsum("ij,ij->i", Qf, Kf)[:, None]
    for den in denominators:
        Q, K = _rationalise(Qf, den), _rationalise(Kf, den)
        try:
            M = ratio_matrix_of_factors(Q, K)
        except ValueError:
            continue
        if not admissibility_violations(M, bounds):
            return build_exact_head(family, Q, K)
    raise ValueError(f"no denominator in denominators = {tuple(denominators)} keeps the rounded "
                     "M admissible")
