"""Constant-weight codes S: the query sets of the rank lower bound (Theorem E).

S is a set of distinct weight-w vectors of {0,1}^m; the gap of a pair is G_xy = w - <x,y>,
which is also <x, complement(y)>. Theorem E needs every pair to have G_xy >= 2 (overlap
<= w - 2) so that a chain proves a weight ratio >= 1.

Serves chapter 3 (``thm-exponential-rank``): the query sets S of the witness family.
"""

from __future__ import annotations

import numpy as np

from companion.checks import check_int, check_tokens, has_repeated_row


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
    if has_repeated_row(arr):
        raise ValueError(f"{name} must hold distinct words; found a repeated word")
    return arr, int(weights[0])


def gap_matrix(S) -> np.ndarray:
    """G_xy = w - <x,y> = <x, complement(y)> for every ordered pair (0 on the diagonal)."""
    arr, w = check_code(S)
    return w - arr @ arr.T


def _is_prime(q: int) -> bool:
    return q >= 2 and all(q % d for d in range(2, int(q**0.5) + 1))


def paley_hadamard_matrix(q: int = 23) -> np.ndarray:
    """Normalised Paley (type I) Hadamard matrix of order q + 1 for a prime q = 3 mod 4.

    H = I + [[0, 1^T], [-1, Q]] with Q the Jacobsthal matrix Q_ij = chi(j - i) (Legendre
    symbol); rows and columns are then signed so the first row and column are all +1.
    """
    q = check_int(q, "q")
    if not (_is_prime(q) and q % 4 == 3 and q <= 1019):
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


def paley_subset(a: int, b: int, q: int = 23) -> np.ndarray:
    """The first a non-constant Paley rows and the complements of the first b of them."""
    a, b = check_int(a, "a", 0, q), check_int(b, "b", 0, a)
    if a + b < 2:
        raise ValueError(f"a, b must give at least 2 words (a + b >= 2), got a={a}, b={b}")
    code = paley_hadamard_code(q, complements=True)
    return np.concatenate([code[:a], code[q:q + b]])
