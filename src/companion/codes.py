"""Constant-weight codes S: the query sets of the rank lower bound (Theorem E).

S is a set of distinct weight-w vectors of {0,1}^m; the gap of a pair is G_xy = w - <x,y>,
which is also <x, complement(y)>. Theorem E needs every pair to have G_xy >= 2 (overlap
<= w - 2) so that a chain proves a weight ratio >= 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from .task import check_tokens

#: Widest tokens the seeded code search handles (it stores overlaps of sampled words densely).
MAX_SEARCH_WIDTH = 64


def check_code(S, name: str = "S") -> tuple[np.ndarray, int]:
    """Return (S as an int array (|S|, m), weight w) after checking S is a constant-weight code
    of distinct 0/1 vectors with at least two words."""
    arr = check_tokens(S, name)
    if arr.ndim != 2:
        raise ValueError(f"{name} must have shape (|S|, m), got {arr.shape}")
    if len(arr) < 2:
        raise ValueError(f"{name} must hold at least 2 words, got {len(arr)}")
    weights = arr.sum(axis=1)
    if np.any(weights != weights[0]):
        raise ValueError(
            f"{name} must have constant weight (all |x| equal); found weights "
            f"{sorted(set(int(v) for v in weights))}"
        )
    if len(np.unique(arr, axis=0)) != len(arr):
        raise ValueError(f"{name} must hold distinct words; found a repeated word")
    return arr, int(weights[0])


def gap_matrix(S) -> np.ndarray:
    """G_xy = w - <x,y> = <x, complement(y)> for every ordered pair (0 on the diagonal)."""
    arr, w = check_code(S)
    return w - arr @ arr.T


def overlap_spectrum(S) -> dict[int, int]:
    """{overlap j: number of unordered pairs x != y of S with <x,y> = j}."""
    arr, _ = check_code(S)
    gram = arr @ arr.T
    iu = np.triu_indices(len(arr), k=1)
    values, counts = np.unique(gram[iu], return_counts=True)
    return {int(v): int(c) for v, c in zip(values, counts, strict=True)}


def _is_prime(q: int) -> bool:
    return q >= 2 and all(q % d for d in range(2, int(q**0.5) + 1))


def paley_hadamard_matrix(q: int = 23) -> np.ndarray:
    """Normalised Paley (type I) Hadamard matrix of order q + 1 for a prime q = 3 mod 4.

    H = I + [[0, 1^T], [-1, Q]] with Q the Jacobsthal matrix Q_ij = chi(j - i) (Legendre
    symbol); rows and columns are then signed so the first row and column are all +1.
    """
    if isinstance(q, bool) or not isinstance(q, (int, np.integer)):
        raise TypeError(f"q must be an int, got {type(q).__name__}")
    if not (_is_prime(int(q)) and q % 4 == 3 and q <= 1019):
        raise ValueError(f"q must be a prime = 3 mod 4 in [3, 1019] (Paley type I), got {q}")
    q = int(q)
    squares = {(i * i) % q for i in range(1, q)}
    chi = np.array([0] + [1 if d in squares else -1 for d in range(1, q)], dtype=np.int64)
    jacobsthal = chi[(np.arange(q)[None, :] - np.arange(q)[:, None]) % q]
    core = np.zeros((q + 1, q + 1), dtype=np.int64)
    core[0, 1:] = 1
    core[1:, 0] = -1
    core[1:, 1:] = jacobsthal
    H = np.eye(q + 1, dtype=np.int64) + core
    H = H * H[:, :1]  # make the first column +1
    H = H * H[:1, :]  # then the first row
    if not np.array_equal(H @ H.T, (q + 1) * np.eye(q + 1, dtype=np.int64)):
        raise AssertionError("Paley construction failed: H H^T != (q+1) I")
    return H


def paley_hadamard_code(q: int = 23, complements: bool = True) -> np.ndarray:
    """The q non-constant rows of the Paley Hadamard matrix of order q + 1, mapped +1 -> 1,
    -1 -> 0, followed (if `complements`) by their complements.

    Width m = q + 1, weight w = (q + 1)/2, pairwise overlaps (q + 1)/4 except 0 between a
    word and its complement; so every gap is (q + 1)/4 or w.
    """
    H = paley_hadamard_matrix(q)
    rows = (H[1:] > 0).astype(np.int64)
    code = np.concatenate([rows, 1 - rows]) if complements else rows
    m, w = q + 1, (q + 1) // 2
    arr, weight = check_code(code)
    gram = arr @ arr.T
    off = gram[~np.eye(len(arr), dtype=bool)]
    allowed = {0, m // 4} if complements else {m // 4}
    if weight != w or not set(np.unique(off).tolist()) <= allowed:
        raise AssertionError("Paley code does not have weight (q+1)/2 and overlaps in {0, (q+1)/4}")
    return arr


@dataclass(frozen=True)
class CodeSearchResult:
    """A code found by the seeded search and the parameters that produced it."""

    code: np.ndarray
    weight: int
    min_gap: int
    seed: int
    greedy_size: int  # size before expurgation


def random_weight_w_words(m: int, w: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """`count` uniformly random weight-w words of {0,1}^m (with possible repeats)."""
    keys = rng.random((count, m))
    idx = np.argsort(keys, axis=1)[:, :w]
    words = np.zeros((count, m), dtype=np.int64)
    np.put_along_axis(words, idx, 1, axis=1)
    return words


def greedy_code(m: int, w: int, min_gap: int, seed: int = 0, candidates: int = 4000,
                max_size: int = 400) -> np.ndarray:
    """Seeded greedy constant-weight code: scan random weight-w words, keep each whose gap
    w - <x,y> to every kept word is >= min_gap (so overlaps <= w - min_gap)."""
    for name, value in (("m", m), ("w", w), ("min_gap", min_gap), ("candidates", candidates),
                        ("max_size", max_size)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if not 2 <= m <= MAX_SEARCH_WIDTH:
        raise ValueError(
            f"m must be an int in [2, {MAX_SEARCH_WIDTH}] for the code search, got {m}")
    if not 1 <= w <= m - 1:
        raise ValueError(f"w (weight) must be an int in [1, m-1] = [1, {m - 1}], got {w}")
    if not 1 <= min_gap <= w:
        raise ValueError(f"min_gap must be an int in [1, w] = [1, {w}], got {min_gap}")
    if candidates < 1 or max_size < 2:
        raise ValueError("candidates must be >= 1 and max_size >= 2")
    rng = np.random.default_rng(seed)
    words = random_weight_w_words(m, w, candidates, rng)
    kept = np.zeros((max_size, m), dtype=np.int64)
    size = 0
    limit = w - min_gap
    for word in words:
        if size == max_size:
            break
        if size == 0 or (kept[:size] @ word).max() <= limit:
            kept[size] = word
            size += 1
    return kept[:size].copy()


def _inverse_square_rho_matrix(S: np.ndarray, n: int, eps) -> np.ndarray:
    """Float matrix rho(G_xy)^-2 (diagonal 1), inf where a pair has rho < 1."""
    from .amplification import best_chain_factor

    w = int(S[0].sum())
    G = w - S @ S.T
    out = np.ones(G.shape)
    for g in np.unique(G[~np.eye(len(S), dtype=bool)]):
        r = best_chain_factor(int(g), n, eps) if g >= 1 else Fraction(0)
        out[G == g] = float(1 / (r * r)) if r >= 1 else np.inf
    np.fill_diagonal(out, 1.0)
    return out


def expurgate(S, n: int = 3, eps=Fraction(1, 2)) -> np.ndarray:
    """Drop words while that raises Theorem E's bound |S|^2 / sum rho^-2: each step removes
    the word with the largest row sum (removing word i leaves sum - 2 row_i + 1)."""
    arr, _ = check_code(S)
    A = _inverse_square_rho_matrix(arr, n, eps)
    keep = np.ones(len(arr), dtype=bool)
    rows = A.sum(axis=1)
    total = rows.sum()
    while keep.sum() > 2:
        s = keep.sum()
        i = int(np.argmax(np.where(keep, rows, -np.inf)))
        new_total = total - 2 * rows[i] + 1
        if not np.isinf(total) and (s - 1) ** 2 * total <= s * s * new_total:
            break
        keep[i] = False
        rows = rows - A[:, i]
        total = new_total if not np.isinf(new_total) else A[np.ix_(keep, keep)].sum()
    return arr[keep]


def search_code(m: int, n: int = 3, eps=Fraction(1, 2), seed: int = 0, weights=None,
                candidates: int = 3000, max_size: int = 300) -> CodeSearchResult:
    """Seeded greedy + expurgation: for each weight w (default m // 2) and minimum gap
    2 <= min_gap <= w, build a greedy code and expurgate it; keep the code with the largest
    certified bound (Theorem E, exact; ties to the smaller code)."""
    from .rank_bounds import certified_rank_bound

    if isinstance(m, bool) or not isinstance(m, (int, np.integer)):
        raise TypeError(f"m must be an int, got {type(m).__name__}")
    if not 4 <= m <= MAX_SEARCH_WIDTH:
        raise ValueError(
            f"m must be an int in [4, {MAX_SEARCH_WIDTH}] for the code search, got {m}")
    weights = [m // 2] if weights is None else list(weights)
    best = None
    for w in weights:
        for min_gap in range(2, w + 1):
            greedy = greedy_code(m, w, min_gap, seed, candidates, max_size)
            if len(greedy) < 2:
                break
            code = expurgate(greedy, n, eps)
            bound = certified_rank_bound(code, n, eps).trace_bound
            key = (bound, -len(code))
            if best is None or key > best[0]:
                best = (key, CodeSearchResult(code, w, min_gap, seed, len(greedy)))
    if best is None:
        raise ValueError(f"no code with at least 2 words and gaps >= 2 found for m = {m}")
    return best[1]
