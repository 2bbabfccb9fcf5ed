"""Numerical search for low-rank admissible ratio matrices (Chapter 3, the sandwich's upper
ends): float factors found by L-BFGS (signed) or HALS (nonnegative), rounded to rationals
and re-checked exactly by :func:`companion.sandwich.heads.build_exact_head`. Search results
are never trusted: only the exact check of the rounded head counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from companion.bounds.witness import WitnessFamily
from companion.checks import check_float, check_int_sequence
from companion.sandwich.heads import ExactHead, build_exact_head
from companion.sandwich.matrix import (
    MAX_FACTOR_ENTRIES,
    RatioBounds,
    admissibility_violations,
    ratio_bounds,
    ratio_matrix_of_factors,
)

#: Denominators tried, in order, when rounding float factors to rationals.
ROUNDING_DENOMINATORS = (2**10, 2**14, 2**20, 2**30)
#: Most restarts x rounds of one search (each round is one L-BFGS run or HALS sweep of an
#: |S| x |S| matrix; the searches behind results/heads use 4 x 30).
MAX_SEARCH_ROUNDS = 10_000
#: Most denominators :func:`exact_head_from_search` tries (each try is an exact check).
MAX_DENOMINATORS = 16


# --------------------------------------------------------------------------- numerical search


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


def _signed_search(upper, r, rng, margin, floor, rounds, torch, start=None):
    N = len(upper)
    U = torch.tensor(upper, dtype=torch.float64)
    hi, lo = U * (1 - margin), U * floor
    off = 1 - torch.eye(N, dtype=torch.float64)
    init = rng.uniform(0, 1, (2, N, r)) / np.sqrt(r) if start is None else start
    A = torch.tensor(init[0], requires_grad=True)
    B = torch.tensor(init[1], requires_grad=True)
    opt = torch.optim.LBFGS([A, B], max_iter=500, line_search_fn="strong_wolfe",
                            tolerance_grad=1e-14, tolerance_change=1e-16, history_size=50)

    def closure():
        opt.zero_grad()
        X = A @ B.T
        loss = ((torch.diagonal(X) - 1) ** 2).sum() + (
            (torch.relu(X - hi) ** 2 + torch.relu(lo - X) ** 2) * off).sum()
        loss.backward()
        return loss

    worst = np.inf
    for _ in range(rounds):
        opt.step(closure)
        Q, K = A.detach().numpy().copy(), B.detach().numpy().copy()
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


def _warm_start(start, rank: int):
    """Rank-`rank` truncation (SVD) of a matrix, as a (2, N, rank) factor pair; None passes."""
    if start is None:
        return None
    X = np.asarray(start, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] != X.shape[1] or not np.all(np.isfinite(X)):
        raise ValueError(f"start must be a finite square matrix, got shape {X.shape}")
    u, sv, vt = np.linalg.svd(X)
    root = np.sqrt(sv[:rank])
    return np.stack([u[:, :rank] * root, vt[:rank].T * root])


def search_ratio_factors(bounds: RatioBounds, rank: int, seed: int = 0, nonnegative=False,
                         restarts: int = 4, rounds: int = 30, margin: float = 2e-3,
                         floor: float = 1e-4, start=None) -> SearchResult:
    """Look for float factors Q, K (|S| x rank) with Q K^T admissible, entries kept in
    [floor u, (1 - margin) u] off the diagonal so rounding to rationals keeps them inside.

    Signed: L-BFGS on sum (diag - 1)^2 + hinge^2 outside the box (torch, float64, one
    thread). Nonnegative: alternating projections between the box and nonnegative rank-r
    matrices (one HALS sweep per projection). Seeded; each restart draws a new start;
    `start` (an N x N matrix, e.g. an admissible M of higher rank) seeds the first signed
    restart with its rank-`rank` truncation.
    """
    if not isinstance(bounds, RatioBounds):
        raise TypeError(f"bounds must be RatioBounds, got {type(bounds).__name__}")
    N = bounds.size
    if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) or not 1 <= rank <= N:
        raise ValueError(f"rank must be an int in [1, |S|] = [1, {N}], got {rank!r}")
    for name, v in (("restarts", restarts), ("rounds", rounds), ("seed", seed)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise ValueError(f"{name} must be an int >= 0, got {v!r}")
    if restarts * rounds > MAX_SEARCH_ROUNDS:
        raise ValueError(f"restarts x rounds = {restarts * rounds} exceeds MAX_SEARCH_ROUNDS = "
                         f"{MAX_SEARCH_ROUNDS}")
    margin = check_float(margin, "margin", 0, 1, low_open=True, high_open=True)
    floor = check_float(floor, "floor", 0, 1, low_open=True, high_open=True)
    if start is not None and np.shape(start) != (N, N):
        raise ValueError(f"start must be an |S| x |S| = {N} x {N} matrix, got shape "
                         f"{np.shape(start)}")
    upper = bounds.upper_float()
    rng = np.random.default_rng(seed)
    worst = np.inf
    if not nonnegative:
        import torch

        torch.set_num_threads(1)
    for restart in range(restarts):
        if nonnegative:
            Q, K, v = _nonnegative_search(upper, int(rank), rng, margin, floor, rounds)
        else:
            Q, K, v = _signed_search(upper, int(rank), rng, margin, floor, rounds, torch,
                                     _warm_start(start, int(rank)) if restart == 0 else None)
        worst = min(worst, v)
        if Q is not None:
            return SearchResult(int(rank), bool(nonnegative), int(seed), Q, K, restart, v)
    return SearchResult(int(rank), bool(nonnegative), int(seed), None, None, None, worst)


def rationalise(factor: np.ndarray, denominator: int) -> np.ndarray:
    """Round every entry to the nearest multiple of 1/denominator (exact Fractions); a
    nonnegative entry stays nonnegative. Limit: MAX_FACTOR_ENTRIES = 2**16 entries."""
    if isinstance(denominator, bool) or not isinstance(denominator, (int, np.integer)) or (
            denominator < 1):
        raise ValueError(f"denominator must be an int >= 1, got {denominator!r}")
    if isinstance(factor, (str, bytes)) or factor is None:
        raise TypeError(f"factor must be an array of floats, got {type(factor).__name__}")
    try:
        arr = np.asarray(factor, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"factor must be a rectangular array of real numbers ({exc})") from exc
    if arr.size > MAX_FACTOR_ENTRIES:
        raise ValueError(f"factor has {arr.size} entries, above MAX_FACTOR_ENTRIES = "
                         f"{MAX_FACTOR_ENTRIES}")
    if not np.all(np.isfinite(arr)) or not np.all(np.isfinite(arr * float(denominator))):
        raise ValueError("factor must hold finite floats (also after scaling by denominator)")
    out = np.empty(arr.shape, dtype=object)
    for idx, v in np.ndenumerate(arr):
        out[idx] = Fraction(int(round(v * denominator)), int(denominator))
    return out


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
        Q, K = rationalise(Qf, den), rationalise(Kf, den)
        try:
            M = ratio_matrix_of_factors(Q, K)
        except ValueError:
            continue
        if not admissibility_violations(M, bounds):
            return build_exact_head(family, Q, K)
    raise ValueError(f"no denominator in denominators = {tuple(denominators)} keeps the rounded "
                     "M admissible")
