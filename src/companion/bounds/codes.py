"""Constant-weight codes S, the query sets of Theorem E (chapter 3, ``thm-exponential-rank``):
distinct weight-w words whose gaps G_xy = w - <x,y> are >= 2."""

from __future__ import annotations

import numpy as np

from companion.checks import check_int, check_tokens, has_repeated_row

__all__ = ["paley_hadamard_code", "paley_subset"]


def check_code(S, name: str = "S") -> tuple[np.ndarray, int]:
    """(S as an int array, weight w) for a constant-weight code of >= 2 distinct 0/1 words."""
    arr = check_tokens(S, name)
    if arr.ndim != 2:
        raise ValueError(f"{name} must have shape (|S|, m), got {arr.shape}")
    if len(arr) < 2:
        raise ValueError(f"{name} must hold at least 2 words, got {len(arr)}")
    weights = arr.sum(axis=1)
    if np.any(weights != weights[0]):
        raise ValueError(f"{name} must have constant weight (all |x| equal); found weights "
                         f"{sorted(set(weights.tolist()))}")
    if has_repeated_row(arr):
        raise ValueError(f"{name} must hold distinct words; found a repeated word")
    return arr, int(weights[0])


def _is_prime(q: int) -> bool:
    return q >= 2 and all(q % d for d in range(2, int(q**0.5) + 1))


def _paley_hadamard_matrix(q: int) -> np.ndarray:
    """Normalised Paley (type I) Hadamard matrix of order q + 1 for a prime q = 3 mod 4:
    H = I + [[0, 1^T], [-1, Q]], Q_ij = chi(j - i) (Legendre symbol), first row and column +1."""
    squares = {(i * i) % q for i in range(1, q)}
    chi = np.array([0] + [1 if d in squares else -1 for d in range(1, q)], dtype=np.int64)
    jacobsthal = chi[(np.arange(q)[None, :] - np.arange(q)[:, None]) % q]
    core = np.zeros((q + 1, q + 1), dtype=np.int64)
    core[0, 1:] = 1
    core[1:, 0] = -1
    core[1:, 1:] = jacobsthal
    H = np.eye(q + 1, dtype=np.int64) + core
    H = H * H[:, :1]  # make the first column +1
    return H * H[:1, :]  # then the first row


def paley_hadamard_code(q: int = 23, complements: bool = True) -> np.ndarray:
    """The q non-constant rows of the order-(q + 1) Paley Hadamard matrix as 0/1 words, and
    their complements: weight (q + 1)/2, every gap (q + 1)/4 or w (a complement pair)."""
    q = check_int(q, "q")
    if not (_is_prime(q) and q % 4 == 3 and q <= 1019):
        raise ValueError(f"q must be a prime = 3 mod 4 in [3, 1019] (Paley type I), got {q}")
    rows = (_paley_hadamard_matrix(q)[1:] > 0).astype(np.int64)
    return np.concatenate([rows, 1 - rows]) if complements else rows


def paley_subset(a: int, b: int, q: int = 23) -> np.ndarray:
    """The first a non-constant Paley rows and the complements of the first b of them."""
    code = paley_hadamard_code(q, complements=True)
    a, b = check_int(a, "a", 0, q), check_int(b, "b", 0, a)
    if a + b < 2:
        raise ValueError(f"a, b must give at least 2 words (a + b >= 2), got a={a}, b={b}")
    return np.concatenate([code[:a], code[q:q + b]])
