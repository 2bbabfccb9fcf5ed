"""Seeded search for constant-weight codes with a large Theorem E bound (chapter 3,
``thm-exponential-rank``): greedy random words with a minimum gap, then expurgation."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from companion.bounds.amplification import chain_table
from companion.bounds.rank_bounds import certified_rank_bound
from companion.checks import check_eps, check_int, check_int_sequence, check_length

__all__ = ["search_code"]

#: Limits on m, candidates and max_size: the greedy scan costs candidates x max_size x m.
MAX_SEARCH_WIDTH = 64
MAX_CANDIDATES = 10**5
MAX_CODE_SIZE = 2_000


@dataclass(frozen=True)
class CodeSearchResult:
    """A code found by the seeded search and the parameters that produced it."""

    code: np.ndarray
    weight: int
    min_gap: int
    seed: int
    greedy_size: int  # size before expurgation


def _greedy_code(m: int, w: int, min_gap: int, seed: int = 0, candidates: int = 4000,
                 max_size: int = 400) -> np.ndarray:
    """Seeded random weight-w words, each kept if its gap to every kept word is >= min_gap."""
    rng = np.random.default_rng(seed)
    idx = np.argsort(rng.random((candidates, m)), axis=1)[:, :w]
    words = np.zeros((candidates, m), dtype=np.int64)
    np.put_along_axis(words, idx, 1, axis=1)
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


def _expurgate(arr: np.ndarray, n: int = 3, eps=Fraction(1, 2)) -> np.ndarray:
    """Drop words while that raises Theorem E's bound |S|^2 / sum rho^-2: each step removes
    the word with the largest row sum (removing word i leaves sum - 2 row_i + 1)."""
    G = int(arr[0].sum()) - arr @ arr.T
    A = np.ones(G.shape)  # rho(G_xy)^-2, diagonal 1, inf where rho < 1
    for g in np.unique(G[~np.eye(len(arr), dtype=bool)]):  # greedy codes: every g >= 2
        r = chain_table(n, eps).rho(int(g))
        A[G == g] = float(1 / (r * r)) if r >= 1 else np.inf
    np.fill_diagonal(A, 1.0)
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
    """Over weights w (default m // 2) and minimum gaps 2..w, the expurgated greedy code of the
    largest certified bound (ties: the smaller). Limits: m <= 64, the MAX_* above."""
    m = check_int(m, "m", 4, MAX_SEARCH_WIDTH)
    n, eps, seed = check_length(n), check_eps(eps), check_int(seed, "seed", 0)
    weights = [m // 2] if weights is None else check_int_sequence(weights, "weights", 1, m - 1)
    candidates = check_int(candidates, "candidates", 1, MAX_CANDIDATES)
    max_size = check_int(max_size, "max_size", 2, MAX_CODE_SIZE)
    best = None
    for w in weights:
        for min_gap in range(2, w + 1):
            greedy = _greedy_code(m, w, min_gap, seed, candidates, max_size)
            if len(greedy) < 2:
                break
            code = _expurgate(greedy, n, eps)
            bound = certified_rank_bound(code, n, eps).trace_bound
            key = (bound, -len(code))
            if best is None or key > best[0]:
                best = (key, CodeSearchResult(code, w, min_gap, seed, len(greedy)))
    if best is None:
        raise ValueError(f"no code with at least 2 words and gaps >= 2 found for m = {m}")
    return best[1]
