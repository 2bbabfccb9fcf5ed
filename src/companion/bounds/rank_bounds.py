"""Lemma D: rank M >= (tr M)^2 / ||M||_F^2; the sharper lemma for unit-diagonal 0 <= M <= u,
N^2 (1-c)^2 / (N (1-c)^2 + sum_{x != y} max(c, u_xy - c)^2), Lemma D' that minus 1; Theorem E:
r >= |S|^2 / sum rho(G_xy)^-2; Lemma N for nonnegative factors, r >= min(N, floor(1/beta^2) + 1)
(chapter 3: ``lem-trace-rank``, ``lem-nonneg-sharpening``, ``lem-shifted-trace``,
``thm-exponential-rank``, ``lem-near-orthogonal``, ``cor-nonnegative-rank``)."""

from __future__ import annotations

import bisect
import itertools
import math
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from companion.bounds.amplification import best_chain_factor
from companion.bounds.codes import check_code
from companion.checks import (
    check_bool,
    check_eps,
    check_exact,
    check_exact_array,
    check_fraction,
    check_instance,
    check_int,
    check_length,
)

__all__ = ["certified_rank_bound", "shifted_trace_bound", "sharp_rank_bound",
           "unit_diagonal_from_factors", "shifted_trace_attack", "random_matrix_survey",
           "near_orthogonal_rank_bound", "near_orthogonal_attack"]


#: Largest N of the exact matrix lemmas, and their most cost units: every entry cleared to an
#: integer over the common denominator, 1 + (bits/64)**2 units each (N x N x k for factors).
MAX_MATRIX_SIZE = 512
MAX_EXACT_COST = 10**7
#: Most distinct bounds u of :func:`sharp_rank_bound` (its scan sorts ~2K exact candidates).
MAX_DISTINCT_BOUNDS = 2**13


def _check_integers(values: list, name: str, work: int) -> tuple[list[int], int]:
    """(values times D, D) for D the common denominator of the exact `values`, if `work` times
    (1 + bits/64)**2 stays within MAX_EXACT_COST (bits: the largest cleared integer's)."""
    bits = int(64 * max(MAX_EXACT_COST / max(work, 1) - 1, 0) ** 0.5)
    D = 1
    for d in {v.denominator for v in values}:
        D = D * d // math.gcd(D, d)
        if D.bit_length() > bits:
            break
    ints = ([] if D.bit_length() > bits or any(abs(v.numerator).bit_length() > bits
                                              for v in values)
            else [v.numerator * (D // v.denominator) for v in values])
    if len(ints) < len(values) or max(map(abs, ints), default=0).bit_length() > bits:
        raise ValueError(f"{name}: {work} operations on entries of more than {bits} bits (over "
                         f"their common denominator) exceed MAX_EXACT_COST = {MAX_EXACT_COST}")
    return ints, D


def _check_square(M, name: str) -> list[list]:
    """M, a non-empty square matrix of N <= MAX_MATRIX_SIZE, as rows of ints / Fractions."""
    arr = check_exact_array(M, name, 2, MAX_MATRIX_SIZE**2)
    if arr.shape[0] != arr.shape[1] or not 0 < arr.shape[0] <= MAX_MATRIX_SIZE:
        raise ValueError(f"{name} must be a square N x N matrix, 1 <= N <= {MAX_MATRIX_SIZE}, "
                         f"got shape {arr.shape}")
    return arr.tolist()


def _trace_rank_bound(M):
    """Lemma D: (tr M)^2 / ||M||_F^2 <= rank M for a nonzero M: float for a float array, else
    exact (rows of ints / Fractions, an int or object array: Python ints, never int64)."""
    if isinstance(M, np.ndarray) and M.dtype.kind == "f":
        trace, frob = float(np.trace(M)), float(np.sum(M.astype(np.float64) ** 2))
    else:
        rows = [[Fraction(v) for v in row] for row in np.asarray(M, dtype=object).tolist()]
        trace = sum((row[i] for i, row in enumerate(rows)), Fraction(0))
        frob = sum((v * v for row in rows for v in row), Fraction(0))
    return trace * trace / frob


def _approximate_identity_bound(N: int, R) -> Fraction:
    """rank M >= N / (1 + (N-1)/R^2) for unit diagonal and |off-diagonal| <= 1/R (exact)."""
    return Fraction(N) / (1 + (N - 1) / (Fraction(R) ** 2))


def _sharp(N: int, counts: dict) -> tuple[Fraction, Fraction]:
    """The sharper lemma maximised exactly over c in [0, 1), and that c, for {u: pair count}:
    between breakpoints c = u/2 it is N^2 (1-c)^2 / Q(c), Q quadratic (one stationary point)."""
    us = sorted(u for u, k in counts.items() if k)
    # suffix sums over u (ascending) of k u and k u^2: Q(c) in O(log K) for any c
    suf_ku, suf_kuu = (list(itertools.accumulate((counts[u] * u**e for u in reversed(us)),
                                                 initial=Fraction(0)))[::-1] for e in (1, 2))
    P = sum(counts[u] for u in us)

    def coefficients(c: Fraction):  # Q = q2 c^2 + q1 c + q0
        first = bisect.bisect_right(us, 2 * c)
        return N + P, -2 * N - 2 * suf_ku[first], N + suf_kuu[first]

    def value(c: Fraction) -> Fraction:
        q2, q1, q0 = coefficients(c)
        return N * N * (1 - c) ** 2 / (q2 * c * c + q1 * c + q0)

    breaks = sorted({Fraction(0)} | {u / 2 for u in us if u < 2})
    candidates = set(breaks)
    for lo, hi in zip(breaks, breaks[1:] + [Fraction(1)], strict=True):
        q2, q1, q0 = coefficients((lo + hi) / 2)
        # d/dc (1-c)^2/Q = -(1-c)(2Q + (1-c)Q')/Q^2, and 2Q + (1-c)Q' is linear in c
        if q1 + 2 * q2 != 0 and lo < -(2 * q0 + q1) / (q1 + 2 * q2) < hi:
            candidates.add(-(2 * q0 + q1) / (q1 + 2 * q2))
    best = max(sorted(candidates), key=value)
    return value(best), best


@dataclass(frozen=True)
class MatrixBoundCase:
    """Lemmas D and D' on one random unit-diagonal matrix M = W W^T (rows of W normalised)."""

    kind: str  # "signed" (W normal) or "nonnegative" (W = |normal|**spread)
    N: int
    rank: int  # numerical rank of M (tolerance 1e-9)
    trace_bound: float  # Lemma D
    uniform_bound: float  # N / (1 + (N-1)/R^2) with 1/R the largest off-diagonal |entry|
    sharpened_bound: float  # Lemma D' (nan for signed matrices)


def random_matrix_survey(num_draws: int, rng: np.random.Generator) -> list[MatrixBoundCase]:
    """Lemmas D and D' on random unit-diagonal Gram matrices: per draw, N in [8, 48), a rank
    k <= N, a spread in {1, 2, 4, 8}, and one signed and one nonnegative matrix."""
    num_draws = check_int(num_draws, "num_draws", 1, 2_000)
    check_instance(rng, "rng", np.random.Generator)
    cases = []
    for _ in range(num_draws):
        N = int(rng.integers(8, 48))
        k = int(rng.integers(1, N + 1))
        V = rng.normal(size=(N, k))
        spread = float(rng.choice([1.0, 2.0, 4.0, 8.0]))
        for kind in ("signed", "nonnegative"):
            W = np.abs(V) ** spread if kind == "nonnegative" else V
            W = W / np.linalg.norm(W, axis=1, keepdims=True)
            M = W @ W.T
            np.fill_diagonal(M, 1.0)
            off = M[~np.eye(N, dtype=bool)]
            sharp = (float(_sharp(N, Counter(Fraction(v) for v in off.tolist()))[0] - 1)
                     if kind == "nonnegative" else np.nan)
            cases.append(MatrixBoundCase(kind, N, int(np.linalg.matrix_rank(M, tol=1e-9)),
                                         _trace_rank_bound(M), float(_approximate_identity_bound(
                                             N, 1 / Fraction(float(np.abs(off).max())))), sharp))
    return cases


def check_rank_bound_input(S, n, eps) -> tuple[np.ndarray, Counter]:
    """Validate (S, n, eps) for Theorem E; return (S array, {rho_xy: number of pairs x != y})."""
    arr, w = check_code(S)
    n, eps = check_length(n), check_eps(eps)
    gram = (arr.astype(np.float64) @ arr.T.astype(np.float64)).astype(np.int64)  # exact: BLAS
    gaps, counts = np.unique((w - gram)[~np.eye(len(arr), dtype=bool)], return_counts=True)
    rho = {g: best_chain_factor(g, n, eps) for g in gaps.tolist()}
    weak = sorted(g for g, r in rho.items() if r < 1)
    if weak:
        raise ValueError(f"S has pairs with gap G_xy = w - <x,y> in {weak}, too small for any "
                         f"chain: every pair needs rho_(n,eps)(G) >= 1 (at eps = 1/2: G >= 2, "
                         f"i.e. overlap <= w - 2 = {w - 2})")
    rho_counts: Counter = Counter()
    for g, k in zip(gaps.tolist(), counts.tolist(), strict=True):
        rho_counts[rho[g]] += k
    return arr, rho_counts


@dataclass(frozen=True)
class RankLowerBound:
    """Theorem E's trace_bound |S|^2 / sum rho_xy^-2 and Lemma D' at sharpened_c (exact), their
    ceilings, and `rank` the larger: bounds on r for any head with error < 1/2 on F(S)."""

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
    """Theorem E and Lemma D' from {rho_xy: count} over all pairs x != y (0 <= M_xy <= 1/rho)."""
    inv_sq = Fraction(size) + sum((k / (r * r) for r, k in rho_counts.items()), Fraction(0))
    trace = Fraction(size) ** 2 / inv_sq
    value, c = _sharp(size, Counter({1 / Fraction(r): k for r, k in rho_counts.items()}))
    return RankLowerBound(size, trace, math.ceil(trace), value - 1, c, math.ceil(value - 1))


def certified_rank_bound(S, n: int = 3, eps=Fraction(1, 2)) -> RankLowerBound:
    """Theorem E for a constant-weight code S, r >= |S|^2 / sum_{x,y} rho_{n,eps}(G_xy)^-2 with
    G_xy = w - <x,y>, and its Lemma D' sharpening; exact."""
    arr, rho_counts = check_rank_bound_input(S, n, eps)
    return rank_bound_from_rhos(len(arr), rho_counts)


def shifted_trace_bound(M, c=None) -> tuple[Fraction, Fraction]:
    """rank M >= N^2 (1-c)^2 / ||M - cJ||_F^2 for unit-diagonal M, c in [0, 1), exactly; c None:
    the better of 0 and c* = (s - f)/(N^2 - s) (s the sum of the entries, f = ||M||_F^2).
    Limits: N <= MAX_MATRIX_SIZE, N^2 (1 + bits/64)^2 <= MAX_EXACT_COST (bits: the entries'
    over their common denominator)."""
    rows = _check_square(M, "M")
    N = len(rows)
    if any(rows[i][i] != 1 for i in range(N)):
        raise ValueError("M must have unit diagonal (M[x,x] = 1) for the sharper lemma")
    c = None if c is None else check_fraction(c, "c", 0, 1, high_open=True)
    ints, D = _check_integers([v for row in rows for v in row], "M", N * N)
    s, f = Fraction(sum(ints), D), Fraction(sum(v * v for v in ints), D * D)

    def value(t: Fraction) -> Fraction:  # ||M - tJ||^2 = f - 2 t s + N^2 t^2 > 0 for M != J
        q = f - 2 * t * s + N * N * t * t
        return Fraction(N * N) * (1 - t) ** 2 / q if q else Fraction(1)

    if c is not None:
        return value(c), c
    candidates = [Fraction(0)]
    if N * N != s:
        c_star = (s - f) / (N * N - s)
        if 0 < c_star < 1:
            candidates.append(c_star)
    best = max(candidates, key=value)
    return value(best), best


@dataclass(frozen=True)
class SharpRankBound:
    """The sharper lemma over {M: unit diagonal, 0 <= M_xy <= u_xy} at its best c: closed_rank
    = ceil(value) for the box, rank = floor(value) + 1 (N at N) when every M_xy < u_xy."""

    size: int
    value: Fraction
    c: Fraction
    closed_rank: int
    rank: int


def sharp_rank_bound(N, off_diagonal_bounds) -> SharpRankBound:
    """The sharper lemma at its best c for bounds 0 <= M_xy <= u_xy: {u: ordered pairs x != y}
    covering all N(N-1) pairs, or an N x N array of bounds (diagonal ignored). Limits: N <=
    MAX_MATRIX_SIZE (array), K <= MAX_DISTINCT_BOUNDS distinct u and K (1 + bits/64)^2 <=
    MAX_EXACT_COST."""
    N = check_int(N, "N (matrix size)", 1)
    counts: Counter = Counter()
    if isinstance(off_diagonal_bounds, dict):
        if len(off_diagonal_bounds) > MAX_DISTINCT_BOUNDS:
            raise ValueError(f"off_diagonal_bounds must hold at most MAX_DISTINCT_BOUNDS = "
                             f"{MAX_DISTINCT_BOUNDS} bounds, got {len(off_diagonal_bounds)}")
        for u, k in off_diagonal_bounds.items():
            counts[check_exact(u, "off_diagonal_bounds key")] += check_int(
                k, "off_diagonal_bounds count", 0)
    else:
        rows = _check_square(off_diagonal_bounds, "off_diagonal_bounds")
        if len(rows) != N:
            raise ValueError(f"off_diagonal_bounds must be N x N = {N} x {N}, got "
                             f"{len(rows)} x {len(rows)}")
        counts.update(v for i, row in enumerate(rows) for j, v in enumerate(row) if i != j)
    if any(u < 0 for u in counts):
        raise ValueError("off_diagonal_bounds must be >= 0 (entries lie in [0, u])")
    if sum(counts.values()) != N * (N - 1):
        raise ValueError(f"off_diagonal_bounds must count all N(N-1) = {N * (N - 1)} ordered "
                         f"pairs, got {sum(counts.values())}")
    if len(counts) > MAX_DISTINCT_BOUNDS:
        raise ValueError(f"off_diagonal_bounds must hold at most MAX_DISTINCT_BOUNDS = "
                         f"{MAX_DISTINCT_BOUNDS} distinct bounds, got {len(counts)}")
    _check_integers(list(counts), "off_diagonal_bounds", len(counts))  # the cost of _sharp's sums
    value, c = _sharp(N, {Fraction(u): k for u, k in counts.items()})
    return SharpRankBound(N, value, c, math.ceil(value), N if value == N else math.floor(value) + 1)


def unit_diagonal_from_factors(A, B):
    """M = diag(A B^T)^-1 A B^T in Fractions (None if a diagonal entry is 0) for N x k factors:
    chapter 3's test matrices of rank <= k for ``lem-shifted-trace``. Limits: N <=
    MAX_MATRIX_SIZE, N^2 k (1 + bits/64)^2 <= MAX_EXACT_COST."""
    A, B = check_exact_array(A, "A", 2), check_exact_array(B, "B", 2)
    if A.shape != B.shape or not 0 < A.shape[0] <= MAX_MATRIX_SIZE or A.shape[1] == 0:
        raise ValueError(f"A and B must both be N x k, 1 <= N <= {MAX_MATRIX_SIZE}, k >= 1, got "
                         f"shapes {A.shape} and {B.shape}")
    work = A.shape[0] ** 2 * A.shape[1]
    (a, _), (b, _) = (_check_integers(F.ravel().tolist(), name, work)
                      for F, name in ((A, "A"), (B, "B")))
    G = np.array(a, dtype=object).reshape(A.shape) @ np.array(b, dtype=object).reshape(B.shape).T
    if any(G[i, i] == 0 for i in range(len(G))):
        return None  # the common denominators cancel in M
    return [[Fraction(v, G[i, i]) for v in row] for i, row in enumerate(G.tolist())]


def shifted_trace_attack(N: int, k: int, nonnegative: bool, gen, steps: int = 150):
    """Float factors A, B (N x k; |.| if nonnegative) by gradient ascent of the shifted trace
    bound of diag(AB^T)^-1 AB^T (chapter 3's attack on ``lem-shifted-trace``; gen: torch).
    Limits: N, k <= MAX_MATRIX_SIZE, steps <= 10**4."""
    import torch  # only this search needs torch; the exact bounds do not

    N, k = check_int(N, "N", 1, MAX_MATRIX_SIZE), check_int(k, "k", 1, MAX_MATRIX_SIZE)
    nonnegative, steps = check_bool(nonnegative, "nonnegative"), check_int(steps, "steps", 0, 10**4)
    check_instance(gen, "gen", torch.Generator)

    A = torch.randn(N, k, generator=gen, dtype=torch.float64, requires_grad=True)
    B = torch.randn(N, k, generator=gen, dtype=torch.float64, requires_grad=True)
    s = torch.zeros((), dtype=torch.float64, requires_grad=True)
    opt = torch.optim.Adam([A, B, s], lr=0.05)
    for _ in range(steps):
        a, b = (A.abs(), B.abs()) if nonnegative else (A, B)
        G = a @ b.T
        M = G / torch.diagonal(G)[:, None]
        c = torch.sigmoid(s) * 0.999
        loss = -(N * (1 - c)) ** 2 / ((M - c) ** 2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    a, b = (A.abs(), B.abs()) if nonnegative else (A, B)
    return a.detach().numpy(), b.detach().numpy()


# ------------------------------------------------- Lemma N: nonnegative near-orthogonality


@dataclass(frozen=True)
class NearOrthogonalRankBound:
    """Lemma N on a box 0 <= M_xy < u_xy with M = A B^T, A, B >= 0 of inner dimension r:
    beta_squared = max_{x != y} u_xy u_yx, rank = min(N, floor(1/beta^2) + 1) (N if beta = 0)."""

    size: int
    beta_squared: Fraction
    rank: int


def near_orthogonal_rank_bound(off_diagonal_bounds) -> NearOrthogonalRankBound:
    """r >= min(N, floor(1/beta^2) + 1) for every unit-diagonal M = A B^T, A, B >= 0 with
    0 <= M_xy < u_xy (strict), beta^2 = max u_xy u_yx: v_x = sqrt(A_x o B_x) are nonnegative
    unit vectors with <v_x, v_y> <= sqrt(M_xy M_yx) < beta, and any r + 1 of them in R^r have
    a pair >= 1/sqrt(r). `off_diagonal_bounds`: N x N (diagonal ignored), exact."""
    rows = [[Fraction(v) for v in row]
            for row in _check_square(off_diagonal_bounds, "off_diagonal_bounds")]
    N = len(rows)
    if N < 2:
        raise ValueError("off_diagonal_bounds must be at least 2 x 2 (a pair of queries)")
    if any(v < 0 for i, row in enumerate(rows) for j, v in enumerate(row) if i != j):
        raise ValueError("off_diagonal_bounds must be >= 0 (entries lie in [0, u))")
    beta2 = max(rows[i][j] * rows[j][i] for i in range(N) for j in range(N) if i != j)
    return NearOrthogonalRankBound(N, beta2, N if beta2 == 0 else min(N, math.floor(1 / beta2)
                                                                         + 1))


def near_orthogonal_attack(r: int, gen, steps: int = 2000, count=None):
    """`count` (default r + 1) nonnegative unit vectors in R^r pushed by Adam to make their
    largest pairwise inner product small (a soft maximum; chapter 3's attack on
    ``lem-near-orthogonal``; gen: a torch.Generator). Returns them as a float64 array."""
    import torch  # only this search needs torch

    r = check_int(r, "r", 1, 256)
    count = r + 1 if count is None else check_int(count, "count", 2, 1024)
    steps = check_int(steps, "steps", 1, 100_000)
    check_instance(gen, "gen", torch.Generator)
    X = torch.rand(count, r, generator=gen, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.Adam([X], lr=0.02)
    off = ~torch.eye(count, dtype=torch.bool)
    for step in range(steps):
        V = X.abs() / X.abs().norm(dim=1, keepdim=True).clamp_min(1e-12)
        sharpness = 50 + step / 10  # the soft maximum hardens as the search goes on
        loss = torch.logsumexp((V @ V.T)[off] * sharpness, 0) / sharpness
        opt.zero_grad()
        loss.backward()
        opt.step()
    V = X.detach().abs()
    return (V / V.norm(dim=1, keepdim=True)).numpy()
