"""Pools and sequence distributions for the E2 readings in which feature rank can bind
(chapter 7). How train and test are split lives in :mod:`companion.experiments.e2.splits`.

Test distributions (:data:`HARD_DISTRIBUTIONS`, seeded vectorised rejection samplers on a
pool's Gram matrix): uniform triples; ``gap1``/``gap2`` (one query whose two competitors
differ in overlap by exactly 1 or 2); ``tight`` (all cross overlaps within 1); ``partner``
(each query's lowest-overlap partner against another's); ``witness`` ((x, x̄, y) as in the
witness family, plus a quarter of pure (x, y, y)).
"""

from __future__ import annotations

import numpy as np

from companion.checks import (
    check_array,
    check_choice,
    check_float,
    check_instance,
    check_int,
    check_positive_int,
    check_tokens,
)
from companion.core.task import token_pool

__all__ = ["HARD_DISTRIBUTIONS", "pool_gram", "multiset_codes", "uniform_triples",
           "gap_triples", "tight_triples", "partners", "partner_triples", "complement_index",
           "witness_triples", "draw_triples", "complement_closed_pool", "query_gaps",
           "check_triples", "MAX_POOL", "MAX_TRIPLES", "MAX_SEQUENCES"]

HARD_DISTRIBUTIONS = ("uniform", "gap1", "gap2", "tight", "partner", "witness")

#: Largest pool accepted: the generators hold P x P int64 overlaps (2**12: 128 MB each; the
#: full runs use P <= 512).
MAX_POOL = 2**12
#: Most triples one generator call draws (the splits draw 4 x n_train or n_test at a time).
MAX_TRIPLES = 4 * 10**5
#: Most training or test sequences a split accepts (the full runs use <= 4000).
MAX_SEQUENCES = 10**5
#: Candidate rows a rejection sampler draws at most before it gives up (a distribution the
#: pool cannot supply must fail in seconds, not after 200 huge batches).
_MAX_CANDIDATES = 2 * 10**7

# --------------------------------------------------------------------------- argument checks


def _check_pool(pool, name: str = "pool") -> np.ndarray:
    p = check_tokens(pool, name, 2)
    if p.ndim != 2:
        raise ValueError(f"{name} must be a (P, m) array of 0/1 tokens, got shape {p.shape}")
    if len(p) > MAX_POOL:
        raise ValueError(f"{name} must hold at most MAX_POOL = {MAX_POOL} tokens, got {len(p)}")
    return p


def _check_gram(gram, name: str = "gram") -> np.ndarray:
    g = check_array(gram, name, 2)
    if g.shape[0] != g.shape[1] or not 1 <= g.shape[0] <= MAX_POOL:
        raise ValueError(f"{name} must be a square (P, P) overlap matrix with 1 <= P <= "
                         f"{MAX_POOL}, got shape {g.shape}")
    if g.dtype.kind == "f" and not np.isfinite(g).all():
        raise ValueError(f"{name} must hold finite overlaps, found NaN or infinity")
    return g


def _check_count(count, name: str = "count") -> int:
    return check_int(count, name, 0, MAX_TRIPLES)


def _check_rng(rng) -> np.random.Generator:
    return check_instance(rng, "rng", np.random.Generator)


def check_triples(idx, name: str, pool_size: int) -> np.ndarray:
    """`idx` as an int64 (S, 3) array of indices into a pool of `pool_size` tokens."""
    pool_size = check_int(pool_size, "pool_size", 1, 2**20)
    a = check_array(idx, name, 2)
    if a.shape[1] != 3:
        raise ValueError(f"{name} must have shape (S, 3) (index triples), got {a.shape}")
    if a.dtype.kind == "f" and a.size and not (np.isfinite(a).all() and (a == np.round(a)).all()):
        raise ValueError(f"{name} must hold integer pool indices")
    if a.size and (a.min() < 0 or a.max() >= pool_size):
        raise ValueError(f"{name} must hold pool indices in [0, {pool_size - 1}]")
    return a.astype(np.int64)


# --------------------------------------------------------------------------- generators


def pool_gram(pool) -> np.ndarray:
    """Integer overlaps <x, z> between all pool tokens: (P, P)."""
    p = _check_pool(pool)
    return p @ p.T


def multiset_codes(idx, pool_size: int) -> np.ndarray:
    """One int per sequence, equal for two sequences iff they hold the same tokens (any
    order): the sorted indices in base `pool_size`."""
    s = np.sort(check_triples(idx, "idx", pool_size), axis=1)
    return (s[:, 0] * pool_size + s[:, 1]) * pool_size + s[:, 2]


def _shuffle_rows(idx: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Permute the three positions of every row independently (queries land anywhere)."""
    order = np.argsort(rng.random(idx.shape), axis=1)
    return np.take_along_axis(idx, order, axis=1)


def _rejection(draw, accept, count: int, rng, what: str, max_rounds: int = 200,
               source: str = "gram") -> np.ndarray:
    """Draw candidate rows in vectorised batches until `count` pass `accept` (at most
    `max_rounds` batches and _MAX_CANDIDATES rows in all)."""
    out, have = [], 0
    batch = max(1024, 4 * count)
    for _ in range(min(max_rounds, max(1, _MAX_CANDIDATES // batch))):
        cand = draw(batch)
        cand = cand[accept(cand)]
        out.append(cand)
        have += len(cand)
        if have >= count:
            return _shuffle_rows(np.concatenate(out)[:count], rng)
    raise ValueError(f"{source} (the pool) has too few {what} triples: found {have} of {count}")


def uniform_triples(pool_size: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """`count` triples of pool indices drawn uniformly with replacement: (count, 3)."""
    pool_size = check_int(pool_size, "pool_size", 1, 2**62)
    count = _check_count(count)
    _check_rng(rng)
    return rng.integers(0, pool_size, size=(count, 3))


def gap_triples(gram, count: int, rng: np.random.Generator, gap: int = 1) -> np.ndarray:
    """Triples of distinct tokens in which a designated query's two competitors differ in
    overlap by exactly `gap` (then shuffled, so the query sits anywhere)."""
    g = _check_gram(gram)
    count = _check_count(count)
    _check_rng(rng)
    gap = check_int(gap, "gap", 0, 2**31)
    size = len(g)

    def draw(b):
        return rng.integers(0, size, size=(b, 3))

    def accept(c):
        x, z, w = c.T
        distinct = (x != z) & (x != w) & (z != w)
        return distinct & (np.abs(g[x, z] - g[x, w]) == gap)

    return _rejection(draw, accept, count, rng, f"gap-{gap}")


def tight_triples(gram, count: int, rng: np.random.Generator) -> np.ndarray:
    """Triples of distinct tokens whose three cross overlaps lie within 1 of each other and
    are not all equal: every query's competitors tie or differ by 1, and at least two of the
    three queries face a gap of exactly 1 (a soft minimum has no slack anywhere)."""
    g = _check_gram(gram)
    count = _check_count(count)
    _check_rng(rng)
    size = len(g)

    def draw(b):
        return rng.integers(0, size, size=(b, 3))

    def accept(c):
        x, z, w = c.T
        o = np.stack([g[x, z], g[x, w], g[z, w]], axis=1)
        span = o.max(1) - o.min(1)
        return (x != z) & (x != w) & (z != w) & (span == 1)

    return _rejection(draw, accept, count, rng, "tight")


def partners(gram, k: int = 4) -> np.ndarray:
    """For every pool token x, the indices of its k lowest-overlap other tokens: (P, k)."""
    g = _check_gram(gram).astype(np.float64)
    k = check_int(k, "k", 1, max(1, len(g) - 1))
    if len(g) < 2:
        raise ValueError("gram must cover at least 2 tokens (a token's partners are others)")
    np.fill_diagonal(g, np.inf)
    return np.argsort(g, axis=1, kind="stable")[:, :k]


def partner_triples(gram, count: int, rng: np.random.Generator, k: int = 4,
                    min_gap: int = 2) -> np.ndarray:
    """Witness-like triples (x, z, z'): z one of x's k lowest-overlap partners, z' one of the
    partners of another token y, with <x, z'> >= <x, z> + `min_gap`. As in the witness family,
    every query prefers its own partner over others' partners by a margin that needs a weight
    ratio > 2 * min_gap - 1, and different queries prefer different keys."""
    g = _check_gram(gram)
    count = _check_count(count)
    _check_rng(rng)
    min_gap = check_int(min_gap, "min_gap", -2**31, 2**31)
    size = len(g)
    part = partners(g, k)

    def draw(b):
        x = rng.integers(0, size, size=b)
        y = rng.integers(0, size, size=b)
        z = part[x, rng.integers(0, k, size=b)]
        w = part[y, rng.integers(0, k, size=b)]
        return np.stack([x, z, w], axis=1)

    def accept(c):
        x, z, w = c.T
        return (x != w) & (z != w) & (g[x, w] - g[x, z] >= min_gap)

    return _rejection(draw, accept, count, rng, "partner")


def complement_index(pool) -> np.ndarray:
    """For every pool token, the index of its complement in the pool, or -1: (P,)."""
    p = _check_pool(pool)
    if p.shape[1] > 62:
        raise ValueError(f"pool tokens must have width m <= 62, got {p.shape[1]}")
    weights = 1 << np.arange(p.shape[1], dtype=np.int64)
    codes = p @ weights
    where = {int(c): i for i, c in enumerate(codes)}
    comp = (1 - p) @ weights
    return np.array([where.get(int(c), -1) for c in comp], dtype=np.int64)


def witness_triples(pool, count: int, rng: np.random.Generator, pure_fraction: float = 0.25
                    ) -> np.ndarray:
    """Witness-like triples from a pool closed under complement: mixed (x, x-bar, y) with
    y not in {x, x-bar} (the query x must prefer its complement, overlap 0, over y, overlap
    <x, y>: the direct links of Theorem E), and a `pure_fraction` of pure sequences
    (x, y, y) with y != x, as the certificate needs. Shuffled positions."""
    comp = complement_index(pool)
    count = _check_count(count)
    _check_rng(rng)
    pure_fraction = check_float(pure_fraction, "pure_fraction", 0, 1)
    have = np.flatnonzero(comp >= 0)
    if len(have) < 4:
        raise ValueError("witness triples need a pool with at least 2 complementary pairs")
    size = len(comp)
    n_pure = int(round(pure_fraction * count))

    def draw(b):
        x = have[rng.integers(0, len(have), size=b)]
        y = rng.integers(0, size, size=b)
        return np.stack([x, comp[x], y], axis=1)

    def accept(c):
        x, xb, y = c.T
        return (y != x) & (y != xb)

    mixed = (_rejection(draw, accept, count - n_pure, rng, "witness", source="pool")
             if count > n_pure else np.zeros((0, 3), dtype=np.int64))
    x = rng.integers(0, size, size=n_pure)
    y = (x + rng.integers(1, size, size=n_pure)) % size
    pure = _shuffle_rows(np.stack([x, y, y], axis=1), rng)
    out = np.concatenate([mixed, pure])
    return out[rng.permutation(len(out))]


def draw_triples(name: str, pool, count: int, rng: np.random.Generator, gram=None
                 ) -> np.ndarray:
    """Triples from the named distribution (one of `HARD_DISTRIBUTIONS`) over `pool`."""
    check_choice(name, "name", HARD_DISTRIBUTIONS)
    pool = _check_pool(pool)
    count = _check_count(count)
    _check_rng(rng)
    gram = pool_gram(pool) if gram is None else _check_gram(gram)
    if len(gram) != len(pool):
        raise ValueError(f"gram must be ({len(pool)}, {len(pool)}) like the pool, got "
                         f"{gram.shape}")
    if name == "uniform":
        return uniform_triples(len(gram), count, rng)
    if name == "gap1":
        return gap_triples(gram, count, rng, 1)
    if name == "gap2":
        return gap_triples(gram, count, rng, 2)
    if name == "tight":
        return tight_triples(gram, count, rng)
    if name == "partner":
        return partner_triples(gram, count, rng)
    if name == "witness":
        return witness_triples(pool, count, rng)
    raise ValueError(f"distribution must be one of {HARD_DISTRIBUTIONS}, got {name!r}")


def complement_closed_pool(m: int, pairs: int, seed: int) -> np.ndarray:
    """`pairs` random complementary pairs {x, x-bar} of width-m tokens: (2 * pairs, m),
    token 2i + 1 the complement of token 2i."""
    m = check_int(m, "m", 2, 62)
    check_positive_int(pairs, "pairs", upper=min(2 ** (m - 1), MAX_POOL // 2))
    half = token_pool(m - 1, pairs, seed)  # first bit fixed to 0 picks one token per pair
    x = np.concatenate([np.zeros((pairs, 1), dtype=np.int64), half], axis=1)
    return np.stack([x, 1 - x], axis=1).reshape(-1, m)


def query_gaps(seqs) -> np.ndarray:
    """For token sequences (S, 3, m): each query's |<x, z> - <x, z'>| over its two
    competitors: (S, 3)."""
    s = check_tokens(seqs, "seqs", 3)
    if s.ndim != 3 or s.shape[1] != 3:
        raise ValueError(f"seqs must have shape (S, 3, m), got {s.shape}")
    g = np.einsum("sim,sjm->sij", s, s)
    out = np.empty(g.shape[:2], dtype=np.int64)
    for i in range(3):
        a, b = [j for j in range(3) if j != i]
        out[:, i] = np.abs(g[:, i, a] - g[:, i, b])
    return out
