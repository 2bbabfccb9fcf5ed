"""E2's data: disjoint token pools and length-3 sequences on them (chapter 7).

Tokens of width m are drawn from a seeded pool that is split into *disjoint* train and test
pools; length-3 sequences are built within each pool as indices into it, uniformly or as
near-ties (the two other tokens' overlaps with a query differ by one: the hardest case for a
soft minimum). :func:`pool_inputs` turns them into the stacked heads' inputs, one row per
(sequence, query position). Used by :mod:`companion.experiments.e2.protocols`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from companion.checks import (
    check_array,
    check_device,
    check_float,
    check_int,
    check_positive_int,
    check_tokens,
)
from companion.core.task import min_ip_targets, split_pool, token_pool

#: Most sampled sequences per call (count, n_train, n_test); the E2 configurations use a few
#: thousand.
MAX_SAMPLES = 100_000

#: The test distributions every E2 sweep evaluates.
TEST_DISTRIBUTIONS = ("uniform", "near_tie")


def sample_index_triples(pool_size: int, count: int, seed: int) -> np.ndarray:
    """`count` length-3 sequences as indices into a pool, uniform with replacement: (count, 3).

    `pool[sample_index_triples(len(pool), count, seed)]` equals
    `companion.core.task.sample_sequences(pool, 3, count, seed)`. Limit: count <= 10**5
    (:data:`MAX_SAMPLES`), pool_size <= 2**62 (numpy draws int64 indices).
    """
    check_positive_int(pool_size, "pool_size", upper=2**62)
    check_positive_int(count, "count", upper=MAX_SAMPLES)
    return np.random.default_rng(check_int(seed, "seed", 0)).integers(0, pool_size, size=(count, 3))


def near_tie_triples(pool, count: int, seed: int, gap: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Length-3 sequences with a near-tie: for a designated query x, the two other tokens'
    overlaps with x differ by exactly `gap` (the hardest case for a soft minimum).

    Returns (indices (count, 3) into `pool`, query position (count,)). Tokens are distinct pool
    indices within a sequence; their order is shuffled so the query sits at any position.
    """
    tokens = check_tokens(pool, "pool")
    if tokens.ndim != 2:
        raise ValueError(f"pool must have shape (size, m), got {tokens.shape}")
    check_positive_int(count, "count", upper=MAX_SAMPLES)
    check_positive_int(gap, "gap")
    size = len(tokens)
    if size < 3:
        raise ValueError(f"pool must hold at least 3 tokens for near-tie triples, got {size}")
    gram = tokens @ tokens.T
    rng = np.random.default_rng(check_int(seed, "seed", 0))
    out = np.empty((count, 3), dtype=np.int64)
    qpos = np.empty(count, dtype=np.int64)
    filled, attempts = 0, 0
    while filled < count:
        attempts += 1
        if attempts > 50 * count + 1000:
            raise ValueError(
                f"pool of {size} tokens has too few pairs at overlap gap {gap} for near-ties"
            )
        x, z = rng.integers(0, size, size=2)
        if x == z:
            continue
        cand = np.flatnonzero(np.abs(gram[x] - gram[x, z]) == gap)
        cand = cand[cand != x]
        if len(cand) == 0:
            continue
        z2 = cand[rng.integers(0, len(cand))]
        order = rng.permutation(3)
        triple = np.array([x, z, z2])[order]
        out[filled] = triple
        qpos[filled] = int(np.flatnonzero(order == 0)[0])
        filled += 1
    return out, qpos


@dataclass(frozen=True)
class E2Data:
    """Disjoint token pools for one width m and the sequences (as pool indices) on each."""

    m: int
    train_pool: np.ndarray  # (P_train, m)
    test_pool: np.ndarray  # (P_test, m)
    train_idx: np.ndarray  # (S_train, 3) into train_pool
    test_idx: dict  # distribution name -> (S_test, 3) into test_pool

    def train_targets(self) -> np.ndarray:
        return min_ip_targets(self.train_pool[self.train_idx])

    def test_targets(self, distribution: str) -> np.ndarray:
        return min_ip_targets(self.test_pool[self.test_idx[distribution]])


def make_e2_data(m: int, pool_size: int, train_fraction: float = 0.7, n_train: int = 1000,
                 n_test: int = 1000, near_tie_fraction: float = 0.0, seed: int = 0) -> E2Data:
    """Draw a pool of distinct width-m tokens, split it into disjoint train/test pools, and
    sample sequences within each: `n_train` training sequences (a `near_tie_fraction` of them
    near-ties) and `n_test` test sequences per test distribution (uniform and near-tie).
    Limits: n_train, n_test <= 10**5 (:data:`MAX_SAMPLES`)."""
    check_positive_int(m, "m", upper=62)
    check_positive_int(pool_size, "pool_size")
    if pool_size > 2**m:
        raise ValueError(f"pool_size must be at most 2**m = {2**m} for m = {m}, got {pool_size}")
    train_fraction = check_float(train_fraction, "train_fraction", 0, 1, low_open=True,
                                 high_open=True)
    near_tie_fraction = check_float(near_tie_fraction, "near_tie_fraction", 0, 1)
    check_positive_int(n_train, "n_train", upper=MAX_SAMPLES)
    check_positive_int(n_test, "n_test", upper=MAX_SAMPLES)
    seed = check_int(seed, "seed", 0)
    k = int(round(train_fraction * pool_size))
    if min(k, pool_size - k) < 3:
        raise ValueError(
            f"pool_size={pool_size} with train_fraction={train_fraction} leaves a pool of fewer "
            f"than 3 tokens; pool_size must give each side at least 3 tokens"
        )
    ss = np.random.SeedSequence([seed, m, pool_size])
    s_pool, s_split, s_tr, s_trn, s_te, s_ten = (int(s.generate_state(1)[0]) for s in ss.spawn(6))
    pool = token_pool(m, pool_size, s_pool)
    train_pool, test_pool = split_pool(pool, train_fraction, s_split)
    n_near = int(round(near_tie_fraction * n_train))
    parts = []
    if n_train - n_near > 0:
        parts.append(sample_index_triples(len(train_pool), n_train - n_near, s_tr))
    if n_near > 0:
        parts.append(near_tie_triples(train_pool, n_near, s_trn)[0])
    train_idx = np.concatenate(parts)
    test_idx = {
        "uniform": sample_index_triples(len(test_pool), n_test, s_te),
        "near_tie": near_tie_triples(test_pool, n_test, s_ten)[0],
    }
    return E2Data(m, train_pool, test_pool, train_idx, test_idx)


@dataclass(frozen=True, eq=False)
class PoolBits:
    """A token pool's bits as a float tensor (P, m). A plain wrapper, so the training engine
    passes it through untouched while it batches the per-input index rows."""

    bits: object  # torch.Tensor


def is_near_tie(sequences, gap: int = 1) -> np.ndarray:
    """For each length-3 sequence (S, 3, m): does some position i see its two other tokens at
    overlaps that differ by exactly `gap`? The test that :func:`near_tie_triples` builds in."""
    seqs = check_tokens(sequences, "sequences", min_ndim=3)
    if seqs.ndim != 3 or seqs.shape[1] != 3:
        raise ValueError(f"sequences must have shape (S, 3, m), got {seqs.shape}")
    gap = check_positive_int(gap, "gap")
    gram = np.einsum("sim,sjm->sij", seqs, seqs)
    tie = np.zeros(len(seqs), dtype=bool)
    for i in range(3):
        a, b = [j for j in range(3) if j != i]
        tie |= np.abs(gram[:, i, a] - gram[:, i, b]) == gap
    return tie


def pool_inputs(pool, idx, device="cpu"):
    """Model inputs for sequences given as pool indices (S, 3): a tuple
    (rows (3S, 4) long, PoolBits). Row 3s + i is (query index, the three token indices) for
    position i of sequence s, so the N = 3S inputs line up with `min_ip_targets(...).ravel()`.
    """
    check_device(device)
    pool = check_array(pool, "pool", 2)
    idx = np.asarray(check_array(idx, "idx"), dtype=np.int64)
    if idx.ndim != 2 or idx.shape[1] != 3:
        raise ValueError(f"idx must have shape (S, 3), got {idx.shape}")
    if idx.size and (idx.min() < 0 or idx.max() >= len(pool)):
        raise ValueError(f"idx must hold pool indices in [0, {len(pool) - 1}], got values in "
                         f"[{idx.min()}, {idx.max()}]")
    rows = np.concatenate([idx[:, :, None], np.broadcast_to(idx[:, None, :], idx.shape + (3,))],
                          axis=-1).reshape(-1, 4)
    bits = torch.as_tensor(pool, dtype=torch.float32, device=device)
    return (torch.as_tensor(rows, dtype=torch.long, device=device), PoolBits(bits))
