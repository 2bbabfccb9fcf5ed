"""The Min-IP task: t_i(X) = min_j <x_i, x_j> over a sequence X of Boolean tokens.

Sequences are integer arrays of shape (..., n, m) with entries in {0, 1}; the query is
position 0 ("bidirectional", the paper's position 1) or position n-1 ("causal" final query,
which attends to every earlier token and itself). Both see the whole sequence, so the target
is the same function of the sequence; only the query's position differs.

Serves chapter 1 (the task, ``thm-rank-one``) and every chapter after it.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from companion.checks import (
    check_choice,
    check_int,
    check_positive_int,
    check_tokens,
    has_repeated_row,
)

CONVENTIONS = ("bidirectional", "causal")

#: Largest number of sequences :func:`all_sequences` materialises at once (2**22 ≈ 4.2M).
MAX_ENUMERATED_SEQUENCES = 2**22


def check_convention(convention: str) -> str:
    """'bidirectional' (query first) or 'causal' (query last)."""
    return check_choice(convention, "convention", CONVENTIONS)


def query_index(n: int, convention: str = "bidirectional") -> int:
    """Index (0-based) of the query in a length-n sequence under `convention`."""
    check_convention(convention)
    return 0 if convention == "bidirectional" else n - 1


def overlaps(sequences) -> np.ndarray:
    """Gram matrices <x_i, x_j> of shape (..., n, n)."""
    x = check_tokens(sequences)
    return x @ np.swapaxes(x, -1, -2)


def min_ip_targets(sequences) -> np.ndarray:
    """Min-IP targets t_i = min_j <x_i, x_j> (j = i included) for every position: (..., n)."""
    return overlaps(sequences).min(axis=-1)


def query_target(sequences, convention: str = "bidirectional") -> np.ndarray:
    """Target at the query position of each sequence: shape (...)."""
    x = check_tokens(sequences)
    i = query_index(x.shape[-2], convention)
    return (x[..., i : i + 1, :] @ np.swapaxes(x, -1, -2))[..., 0, :].min(axis=-1)


def all_tokens(m: int) -> np.ndarray:
    """All 2**m tokens of {0,1}^m in binary counting order, shape (2**m, m)."""
    check_positive_int(m, "m", upper=22)
    codes = np.arange(2**m, dtype=np.int64)
    return ((codes[:, None] >> np.arange(m - 1, -1, -1)) & 1).astype(np.int64)


def count_sequences(n: int, m: int) -> int:
    """Number of length-n sequences over {0,1}^m, i.e. 2**(n*m). Limit: n * m <= 2**24 (the
    count then has up to 16 Mbit, 2 MB)."""
    check_positive_int(n, "n")
    check_positive_int(m, "m")
    if n * m > 2**24:
        raise ValueError(f"n * m must be at most 2**24 (the count 2**(n*m) would have n*m "
                         f"bits), got n={n}, m={m}")
    return 2 ** (n * m)


def all_sequences(n: int, m: int, max_sequences: int = MAX_ENUMERATED_SEQUENCES) -> np.ndarray:
    """Every length-n sequence over {0,1}^m, shape (2**(n*m), n, m); refuses large sizes.

    Use :func:`iter_sequences` to stream larger enumerations in chunks.
    """
    total = count_sequences(n, m)
    max_sequences = check_int(max_sequences, "max_sequences", 1)
    if total > max_sequences:
        shown = f" = {total}" if n * m <= 64 else ""  # 2**(n m) in full can be 10**5 digits
        raise ValueError(
            f"all_sequences(n={n}, m={m}) would hold 2**{n * m}{shown} sequences, above "
            f"max_sequences={max_sequences}; use iter_sequences to stream it in chunks"
        )
    return next(iter_sequences(n, m, chunk=total))


def iter_sequences(n: int, m: int, chunk: int = 2**18) -> Iterator[np.ndarray]:
    """Stream every length-n sequence over {0,1}^m in chunks of at most `chunk` sequences."""
    check_positive_int(n, "n")
    check_positive_int(m, "m")
    check_positive_int(chunk, "chunk", upper=2**24)
    if n * m > 40:
        raise ValueError(f"n*m must be at most 40 for an exhaustive enumeration, got {n * m}")
    total = count_sequences(n, m)
    shifts = np.arange(n * m - 1, -1, -1, dtype=np.int64)
    for start in range(0, total, chunk):
        codes = np.arange(start, min(start + chunk, total), dtype=np.int64)
        yield ((codes[:, None] >> shifts) & 1).reshape(-1, n, m)


def token_pool(m: int, size: int, seed: int) -> np.ndarray:
    """`size` distinct tokens of {0,1}^m drawn uniformly without replacement (seeded)."""
    check_positive_int(m, "m", upper=62)
    check_positive_int(size, "size", upper=2**m)
    rng = np.random.default_rng(check_int(seed, "seed", 0))
    if m <= 20:
        codes = rng.choice(2**m, size=size, replace=False)
    else:  # rejection sampling: the space is too large to permute
        seen: set[int] = set()
        while len(seen) < size:
            for c in rng.integers(0, 2**m, size=2 * (size - len(seen)), dtype=np.int64):
                if len(seen) < size:
                    seen.add(int(c))
        codes = np.array(sorted(seen), dtype=np.int64)
        rng.shuffle(codes)
    return ((np.asarray(codes, dtype=np.int64)[:, None] >> np.arange(m - 1, -1, -1)) & 1).astype(
        np.int64
    )


def split_pool(pool, train_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Split a token pool into disjoint (train, test) pools; both are non-empty."""
    tokens = check_tokens(pool, "pool")
    if tokens.ndim != 2:
        raise ValueError(f"pool must have shape (size, m), got {tokens.shape}")
    if not isinstance(train_fraction, (float, int)) or not 0.0 < train_fraction < 1.0:
        raise ValueError(
            f"train_fraction must lie strictly between 0 and 1, got {train_fraction!r}"
        )
    if has_repeated_row(tokens):
        raise ValueError("pool must hold distinct tokens (duplicates would leak across the split)")
    k = int(round(train_fraction * len(tokens)))
    if not 0 < k < len(tokens):
        raise ValueError(
            f"train_fraction={train_fraction} leaves an empty split of a pool of {len(tokens)}"
        )
    order = np.random.default_rng(check_int(seed, "seed", 0)).permutation(len(tokens))
    return tokens[order[:k]], tokens[order[k:]]


#: Largest count * n * m (int64 entries, 8 bytes each) :func:`sample_sequences` returns:
#: 2**25 entries are 256 MB; E2's largest draw (10**5 sequences of length 3 at width 62)
#: has 1.9e7.
MAX_SAMPLED_ENTRIES = 2**25


def sample_sequences(pool, n: int, count: int, seed: int) -> np.ndarray:
    """`count` length-n sequences of tokens drawn uniformly with replacement from `pool`.
    Limit: count * n * m <= MAX_SAMPLED_ENTRIES = 2**25."""
    tokens = check_tokens(pool, "pool")
    if tokens.ndim != 2:
        raise ValueError(f"pool must have shape (size, m), got {tokens.shape}")
    check_positive_int(n, "n")
    check_positive_int(count, "count")
    if count * n * tokens.shape[1] > MAX_SAMPLED_ENTRIES:
        raise ValueError(f"count * n * m = {count} * {n} * {tokens.shape[1]} token entries "
                         f"exceed MAX_SAMPLED_ENTRIES = {MAX_SAMPLED_ENTRIES}; choose a smaller "
                         "count or n")
    rng = np.random.default_rng(check_int(seed, "seed", 0))
    idx = rng.integers(0, len(tokens), size=(count, n))
    return tokens[idx]
