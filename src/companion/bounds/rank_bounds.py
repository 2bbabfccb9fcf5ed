"""Lemma D (approximate identity), Lemma D' (nonnegative sharpening) and Theorem E.

Lemma D: rank(M) >= (tr M)^2 / ||M||_F^2 for every real square M (|tr M| <= ||M||_* <=
sqrt(rank M) ||M||_F). Lemma D': if M >= 0 has unit diagonal and off-diagonal entries <= u_xy,
then rank(M) >= N^2 (1-c)^2 / (N (1-c)^2 + sum_{x != y} max(c, u_xy - c)^2) - 1 for every
c in [0, 1/2]. Theorem E: a head with error < 1/2 on the witness family F(S) has feature rank
r >= |S|^2 / sum_{x,y} rho(G_xy)^-2.

Serves chapter 3 (``lem-trace-rank``, ``lem-nonneg-sharpening``, ``thm-exponential-rank``).
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction
from numbers import Rational

import numpy as np

from companion.bounds.amplification import best_chain_factor
from companion.bounds.codes import check_code
from companion.checks import check_eps, check_fraction, check_instance, check_int, check_length


def _square_matrix(M, name: str = "M") -> np.ndarray:
    if isinstance(M, (str, bytes)) or M is None:
        raise TypeError(f"{name} must be a square matrix of real numbers, got {type(M).__name__}")
    try:
        arr = np.asarray(M)
    except (ValueError, TypeError) as exc:  # ragged nested lists
        raise TypeError(f"{name} must be a rectangular N x N matrix ({exc})") from exc
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
    if exact:  # tolist(): Python ints and Fractions, never an int64 product
        rows = [[Fraction(v) for v in row] for row in arr.tolist()]
        trace = sum((row[i] for i, row in enumerate(rows)), Fraction(0))
        frob = sum((v * v for row in rows for v in row), Fraction(0))
    else:
        trace, frob = float(np.trace(arr)), float(np.sum(arr.astype(np.float64) ** 2))
    if frob == 0:
        raise ValueError("M must be nonzero (||M||_F > 0) for the trace bound")
    return trace * trace / frob


def approximate_identity_bound(N, R) -> Fraction:
    """rank(M) >= N / (1 + (N-1)/R^2) for unit diagonal and |off-diagonal| <= 1/R (exact)."""
    N = check_int(N, "N (matrix size)", 1)
    R = check_fraction(R, "R", 0, low_open=True)
    return Fraction(int(N)) / (1 + (int(N) - 1) / (R * R))


def _pair_counts(counts, name: str, low=0) -> Counter:
    """A dict {bound: number of ordered pairs} as a Counter of Fractions (each bound >= low,
    exact) and ints >= 0, naming `name` when it is not one."""
    if not isinstance(counts, dict):
        raise TypeError(f"{name} must be a dict {{bound: number of pairs}}, got "
                        f"{type(counts).__name__}")
    out: Counter = Counter()
    for u, k in counts.items():
        out[check_fraction(u, f"{name} key", low)] += check_int(k, f"{name}[{u!r:.40}]", 0)
    return out


def sharpened_value(N: int, counts: dict[Fraction, int], c: Fraction) -> Fraction:
    """Lemma D' at one c: N^2 (1-c)^2 / (N (1-c)^2 + sum_u k_u max(c, u - c)^2) - 1, with k_u
    off-diagonal pairs bounded by u (exact); :func:`nonnegative_rank_bound` maximises it."""
    N, counts = check_int(N, "N", 1), _pair_counts(counts, "counts")
    c = check_fraction(c, "c", 0, 1, high_open=True)
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
    N = check_int(N, "N (matrix size)", 1)
    if isinstance(off_diagonal_bounds, dict):
        counts = _pair_counts(off_diagonal_bounds, "off_diagonal_bounds", None)
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
            R = 1 / Fraction(float(np.abs(M[~np.eye(N, dtype=bool)]).max()))
            sharp = float(nonnegative_rank_bound(N, M)[0]) if kind == "nonnegative" else np.nan
            cases.append(MatrixBoundCase(kind, N, int(np.linalg.matrix_rank(M, tol=1e-9)),
                                         trace_rank_bound(M),
                                         float(approximate_identity_bound(N, R)), sharp))
    return cases


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
    size = check_int(size, "size (|S|)", 1)
    inv_sq = Fraction(int(size))  # diagonal terms count 1
    bounds: Counter = Counter()
    rho_counts = _pair_counts(rho_counts, "rho_counts")
    if sum(rho_counts.values()) > size * (size - 1):
        raise ValueError(f"rho_counts counts more than size (size - 1) = {size * (size - 1)} "
                         "ordered pairs")
    for r, k in rho_counts.items():
        if r < 1:
            raise ValueError(f"rho_counts: every pair needs rho >= 1 (a chain proving a ratio "
                             f">= 1), got {r}")
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
    size, gap_counts = check_int(size, "size (|S|)", 1), _pair_counts(gap_counts, "gap_counts", 1)
    if any(g.denominator != 1 for g in gap_counts):
        raise ValueError(f"gap_counts keys must be int gaps >= 1, got {sorted(gap_counts)[:5]}")
    if sum(gap_counts.values()) > size * (size - 1):
        raise ValueError(f"gap_counts counts more than size (size - 1) = {size * (size - 1)} "
                         "ordered pairs")
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


# --------------------------------------------------------------------------- the sharper lemma


def _exact_square(M, name: str) -> list[list[Fraction]]:
    """M as rows of Fractions (ints, Fractions and floats are all converted exactly)."""
    arr = _square_matrix(M, name)
    return [[Fraction(v) if isinstance(v, (Rational, float)) else Fraction(float(v))
             for v in row] for row in arr.tolist()]


def shifted_trace_bound(M, c=None) -> tuple[Fraction, Fraction]:
    """The sharper lemma on one matrix: rank M >= N^2 (1-c)^2 / ||M - cJ||_F^2 for unit-diagonal
    M and c in [0, 1). Returns (bound, c) exactly; with c None, the best c, which is 0 or the
    one stationary point c* = (s - f)/(N^2 - s) (s the sum of the entries, f = ||M||_F^2)."""
    rows = _exact_square(M, "M")
    N = len(rows)
    if any(rows[i][i] != 1 for i in range(N)):
        raise ValueError("M must have unit diagonal (M[x,x] = 1) for the sharper lemma")
    s = sum((v for row in rows for v in row), Fraction(0))
    f = sum((v * v for row in rows for v in row), Fraction(0))

    def value(t: Fraction) -> Fraction:  # ||M - tJ||^2 = f - 2 t s + N^2 t^2 > 0 for M != J
        q = f - 2 * t * s + N * N * t * t
        return Fraction(N * N) * (1 - t) ** 2 / q if q else Fraction(1)

    if c is not None:
        c = check_fraction(c, "c", 0, 1, high_open=True)
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
    """The sharper lemma over the box {M: unit diagonal, 0 <= M_xy <= u_xy}.

    value = max_{c in [0,1)} N^2 (1-c)^2 / (N (1-c)^2 + sum_{x != y} max(c, u_xy - c)^2),
    reached at c. closed_rank = ceil(value) bounds the rank of every M in the box; rank
    bounds it for every M with M_xy < u_xy strictly (a head's ratio matrix): value is then
    exceeded unless M = I, so rank = floor(value) + 1 (N when value = N).
    """

    size: int
    value: Fraction
    c: Fraction
    closed_rank: int
    rank: int


def sharp_rank_bound(N, off_diagonal_bounds) -> SharpRankBound:
    """The sharper lemma maximised exactly over c for entry bounds 0 <= M_xy <= u_xy.

    `off_diagonal_bounds`: {u: number of ordered pairs x != y bounded by u} covering all
    N(N-1) pairs, or an N x N array of bounds (diagonal ignored). With t = c/(1-c) the
    denominator over (1-c)^2 is Phi(t) = N + sum_u k_u max(t, u - (1-u) t)^2, convex and
    piecewise quadratic in t >= 0 with kinks t = u/(2-u) (c = u/2); its minimum is a kink or
    the one stationary point of a piece, t* = sum_A k u (1-u) / (sum_A k (1-u)^2 + sum_B k)
    (A: pairs whose upper branch is active, B: the rest), and value = N^2 / min Phi.
    """
    N = check_int(N, "N (matrix size)", 1)
    if isinstance(off_diagonal_bounds, dict):
        counts: Counter = Counter()
        for u, k in off_diagonal_bounds.items():
            counts[check_fraction(u, "off_diagonal_bounds key", 0)] += check_int(
                k, "off_diagonal_bounds count", 0)
    else:
        rows = _exact_square(off_diagonal_bounds, "off_diagonal_bounds")
        if len(rows) != N:
            raise ValueError(f"off_diagonal_bounds must be N x N = {N} x {N}, got "
                             f"{len(rows)} x {len(rows)}")
        counts = Counter(v for i, row in enumerate(rows) for j, v in enumerate(row) if i != j)
        if any(u < 0 for u in counts):
            raise ValueError("off_diagonal_bounds must be >= 0 (entries lie in [0, u])")
    if sum(counts.values()) != N * (N - 1):
        raise ValueError(f"off_diagonal_bounds must count all N(N-1) = {N * (N - 1)} ordered "
                         f"pairs, got {sum(counts.values())}")
    counts = {u: k for u, k in counts.items() if k}
    kink = {u: u / (2 - u) for u in counts if u < 2}  # u >= 2: the upper branch always wins

    def phi(t: Fraction) -> Fraction:
        return N + sum((k * max(t, u - (1 - u) * t) ** 2 for u, k in counts.items()),
                       Fraction(0))

    points = sorted({Fraction(0)} | set(kink.values()))
    candidates = set(points)
    for lo, hi in zip(points, points[1:] + [None], strict=True):
        mid = lo + 1 if hi is None else (lo + hi) / 2
        upper = [u for u in counts if u not in kink or kink[u] > mid]
        num = sum((counts[u] * u * (1 - u) for u in upper), Fraction(0))
        den = sum((counts[u] * (1 - u) ** 2 for u in upper), Fraction(0)) + sum(
            (k for u, k in counts.items() if u not in upper), 0)
        if den > 0 and lo < num / den and (hi is None or num / den < hi):
            candidates.add(num / den)
    t = min(sorted(candidates), key=phi)
    value = Fraction(N * N) / phi(t)
    rank = N if value == N else math.floor(value) + 1
    return SharpRankBound(N, value, t / (1 + t), math.ceil(value), rank)


def unit_diagonal_from_factors(A, B):
    """M = diag(A B^T)^-1 A B^T in Fractions, a unit-diagonal matrix of rank <= the inner
    dimension (None if a diagonal entry of A B^T is 0): chapter 3's test matrices for
    ``lem-shifted-trace``."""
    A = [[Fraction(v) for v in row] for row in A]
    B = [[Fraction(v) for v in row] for row in B]
    G = [[sum((a * b for a, b in zip(r, s, strict=True)), Fraction(0)) for s in B] for r in A]
    if any(G[i][i] == 0 for i in range(len(G))):
        return None
    return [[v / G[i][i] for v in row] for i, row in enumerate(G)]


def shifted_trace_attack(N: int, k: int, nonnegative: bool, gen, steps: int = 150):
    """Float factors A, B (N x k; |.| when nonnegative) found by gradient ascent on the shifted
    trace bound N^2 (1-c)^2 / ||M - cJ||_F^2 of M = diag(AB^T)^-1 AB^T, pushing it towards its
    rank k: the adversary of chapter 3's attack on ``lem-shifted-trace`` (the bound is then
    recomputed exactly on rounded factors). `gen` is a seeded torch.Generator."""
    import torch  # only this search needs torch; the exact bounds do not

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

