"""The Min-IP task t_i(X) = min_j <x_i, x_j> on 0/1 sequences (..., n, m) (chapter 1,
``thm-rank-one``); the query is position 0 ("bidirectional") or n-1 ("causal")."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from companion.checks import check_choice, check_int, check_tokens

__all__ = ["CONVENTIONS", "min_ip_targets", "query_target", "count_sequences", "all_sequences"]

CONVENTIONS = ("bidirectional", "causal")

#: Largest number of sequences :func:`all_sequences` materialises at once (2**22 ≈ 4.2M).
MAX_ENUMERATED_SEQUENCES = 2**22


def check_convention(convention: str) -> str:
    """'bidirectional' (query first) or 'causal' (query last)."""
    return check_choice(convention, "convention", CONVENTIONS)


def query_index(n: int, convention: str = "bidirectional") -> int:
    """Index (0-based) of the query in a length-n sequence under `convention`."""
    return 0 if convention == "bidirectional" else n - 1


def overlaps(x: np.ndarray) -> np.ndarray:
    """Gram matrices <x_i, x_j> of shape (..., n, n)."""
    return x @ np.swapaxes(x, -1, -2)


def token_index(tokens) -> dict[bytes, int]:
    """Row k of a (T, m) token array by its int64 bytes: {t.tobytes(): k}."""
    return {t.tobytes(): k for k, t in enumerate(np.asarray(tokens, dtype=np.int64))}


def token_ids(index: dict[bytes, int], z) -> np.ndarray:
    """The ids (...,) of tokens z (..., m) in a :func:`token_index`."""
    z = np.asarray(z, dtype=np.int64)
    flat = z.reshape(-1, z.shape[-1])
    return np.array([index[t.tobytes()] for t in flat], dtype=np.int64).reshape(z.shape[:-1])


def min_ip_targets(sequences) -> np.ndarray:
    """Min-IP targets t_i = min_j <x_i, x_j> (j = i included) for every position: (..., n)."""
    return overlaps(check_tokens(sequences)).min(axis=-1)


def query_target(sequences, convention: str = "bidirectional") -> np.ndarray:
    """Target at the query position of each sequence: shape (...)."""
    x = check_tokens(sequences)
    i = query_index(x.shape[-2], check_convention(convention))
    return (x[..., i : i + 1, :] @ np.swapaxes(x, -1, -2))[..., 0, :].min(axis=-1)


def _bits(codes: np.ndarray, width: int) -> np.ndarray:
    """Integer codes as rows of `width` bits, most significant first."""
    return (codes[:, None] >> np.arange(width - 1, -1, -1, dtype=np.int64)) & 1


def all_tokens(m: int) -> np.ndarray:
    """All 2**m tokens of {0,1}^m in binary counting order, shape (2**m, m)."""
    return _bits(np.arange(2**m, dtype=np.int64), m)


def _check_counts(n, m) -> tuple[int, int]:
    """n, m >= 1 with n * m <= 2**24 (the count 2**(n*m) has n*m bits)."""
    n, m = check_int(n, "n", 1), check_int(m, "m", 1)
    if n * m > 2**24:
        raise ValueError(f"n * m must be at most 2**24 (the count 2**(n*m) would have n*m "
                         f"bits), got n={n}, m={m}")
    return n, m


def count_sequences(n: int, m: int) -> int:
    """Number of length-n sequences over {0,1}^m, 2**(n*m); n * m <= 2**24."""
    n, m = _check_counts(n, m)
    return 2 ** (n * m)


def all_sequences(n: int, m: int, max_sequences: int = MAX_ENUMERATED_SEQUENCES) -> np.ndarray:
    """Every length-n sequence over {0,1}^m, shape (2**(n*m), n, m), at most `max_sequences`."""
    n, m = _check_counts(n, m)
    max_sequences = check_int(max_sequences, "max_sequences", 1, 2**24)
    if n * m > max_sequences.bit_length() - 1:
        raise ValueError(f"all_sequences(n={n}, m={m}) would hold 2**{n * m} sequences, above "
                         f"max_sequences={max_sequences}; use iter_sequences")
    return next(iter_sequences(n, m, chunk=2 ** (n * m)))


def iter_sequences(n: int, m: int, chunk: int = 2**18) -> Iterator[np.ndarray]:
    """Stream every length-n sequence over {0,1}^m in chunks of at most `chunk` sequences."""
    total = 2 ** (n * m)
    for start in range(0, total, chunk):
        codes = np.arange(start, min(start + chunk, total), dtype=np.int64)
        yield _bits(codes, n * m).reshape(-1, n, m)


def token_pool(m: int, size: int, seed: int) -> np.ndarray:
    """`size` distinct tokens of {0,1}^m drawn uniformly without replacement (seeded)."""
    rng = np.random.default_rng(seed)
    if m <= 20 or 2 * size > 2**m:  # a dense draw: permute (rejection would never end)
        codes = rng.choice(2**m, size=size, replace=False)
    else:  # rejection sampling: the space is too large to permute
        seen: set[int] = set()
        while len(seen) < size:
            for c in rng.integers(0, 2**m, size=2 * (size - len(seen)), dtype=np.int64):
                if len(seen) < size:
                    seen.add(int(c))
        codes = np.array(sorted(seen), dtype=np.int64)
        rng.shuffle(codes)
    return _bits(np.asarray(codes, dtype=np.int64), m)


def split_pool(pool, train_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Split a pool of distinct tokens into disjoint, non-empty (train, test) pools."""
    k = int(round(train_fraction * len(pool)))
    order = np.random.default_rng(seed).permutation(len(pool))
    return pool[order[:k]], pool[order[k:]]
