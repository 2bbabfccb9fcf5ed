"""Pools and sequence distributions for the E2 readings in which feature rank can bind
(chapter 7, issue 10): where the paper's "larger, disjoint train/test pools" can mean
disjoint *tokens* or disjoint *sequences* over one pool.

* :func:`disjoint_pool_split` — disjoint token pools, closed under complement and split by
  complementary pairs, so witness triples exist on both sides (reading X).
* :func:`shared_pool_split` — one pool; train and test are disjoint sets of sequences (as
  multisets) over it, assigned by a seeded hash (:func:`held_out`) so the same sequence lands
  on the same side whichever distribution drew it (readings S-code, S-random).

Test distributions (:data:`HARD_DISTRIBUTIONS`, seeded vectorised rejection samplers on a
pool's Gram matrix): uniform triples; ``gap1``/``gap2`` (one query whose two competitors
differ in overlap by exactly 1 or 2); ``tight`` (all cross overlaps within 1); ``partner``
(each query's lowest-overlap partner against another's); ``witness`` ((x, x̄, y) as in the
witness family, plus a quarter of pure (x, y, y)).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..checks import (
    check_array,
    check_bool,
    check_choice,
    check_float,
    check_instance,
    check_int,
    check_positive_int,
    check_tokens,
)
from ..task import min_ip_targets, split_pool, token_pool

__all__ = ["HARD_DISTRIBUTIONS", "pool_gram", "multiset_codes", "uniform_triples",
           "gap_triples", "tight_triples", "partners", "partner_triples", "complement_index",
           "witness_triples", "draw_triples", "complement_closed_pool", "query_gaps",
           "SharedPoolData", "held_out", "shared_pool_split", "DisjointPoolData",
           "disjoint_pool_split", "check_triples", "MAX_POOL", "MAX_TRIPLES", "MAX_SEQUENCES"]

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


def _check_distributions(train_mix, test_distributions) -> tuple[dict, tuple]:
    """The training mixture {distribution: weight > 0 ...} and the test distributions."""
    if train_mix is None:
        train_mix = {"uniform": 1.0}
    if not isinstance(train_mix, Mapping) or not train_mix:
        raise TypeError(f"train_mix must be a non-empty dict distribution -> weight, got "
                        f"{train_mix!r:.80}")
    mix = {}
    for name, w in train_mix.items():
        if not isinstance(name, str) or name not in HARD_DISTRIBUTIONS:
            raise ValueError(f"train_mix: each distribution must be one of "
                             f"{HARD_DISTRIBUTIONS}, got {name!r:.80}")
        mix[name] = check_float(w, f"train_mix[{name!r}]", 0, 1e6)
    if sum(mix.values()) <= 0:
        raise ValueError("train_mix must give some distribution a positive weight")
    if isinstance(test_distributions, (str, bytes)) or not isinstance(
            test_distributions, Sequence):
        raise TypeError(f"test_distributions must be a sequence of distribution names, got "
                        f"{test_distributions!r:.80}")
    for name in test_distributions:
        if not isinstance(name, str) or name not in HARD_DISTRIBUTIONS:
            raise ValueError(f"test_distributions: each distribution must be one of "
                             f"{HARD_DISTRIBUTIONS}, got {name!r:.80}")
    return mix, tuple(test_distributions)


def _drawn(what: str, draw):
    """`draw()`, with a failure to find triples on a split's pool said in the split's
    arguments (the generators name their own `pool` / `gram`)."""
    try:
        return draw()
    except ValueError as exc:
        raise ValueError(f"{what}: {exc}") from exc

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


# --------------------------------------------------------------------------- shared pool


@dataclass(frozen=True)
class SharedPoolData:
    """One token pool; disjoint train / test sequence sets over it (pool indices)."""

    m: int
    pool: np.ndarray  # (P, m)
    train_idx: np.ndarray  # (S_train, 3)
    test_idx: dict  # distribution -> (S_test, 3), no multiset shared with train_idx
    train_parts: dict  # mixture component -> its rows of train_idx (for matched train curves)

    def targets(self, idx) -> np.ndarray:
        return min_ip_targets(self.pool[idx])


def held_out(codes, test_fraction: float, seed: int) -> np.ndarray:
    """Which multisets are held out for testing: a seeded hash (splitmix64) of each multiset
    code, compared with `test_fraction`. The same sequence lands on the same side whichever
    distribution drew it, so train and test are disjoint across all distributions."""
    c = check_array(codes, "codes")
    if c.size and (c.dtype.kind not in "biu" or c.min() < 0):
        raise ValueError("codes must be nonnegative integers (multiset codes)")
    test_fraction = check_float(test_fraction, "test_fraction", 0, 1)
    seed = check_int(seed, "seed", 0, 2**64 - 1)
    with np.errstate(over="ignore"):
        z = c.astype(np.uint64) + np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) / float(2**53) < test_fraction


def shared_pool_split(m: int, pool_size: int, n_train: int, n_test: int,
                      train_mix: dict | None = None, test_distributions=("uniform",),
                      seed: int = 0, pool=None, test_fraction: float = 0.3
                      ) -> SharedPoolData:
    """One pool of `pool_size` distinct width-m tokens (random, or `pool` if given); train and
    test are disjoint sets of sequences over it. Every sequence (as a multiset) is assigned to
    the test side with probability `test_fraction` by `held_out`; `n_train` training
    sequences are drawn (with replacement) from the mixture `train_mix` restricted to the
    train side, and up to `n_test` distinct test-side sequences per test distribution."""
    check_positive_int(m, "m", upper=62)
    check_positive_int(pool_size, "pool_size", upper=2**m)
    check_positive_int(n_train, "n_train", MAX_SEQUENCES)
    check_positive_int(n_test, "n_test", MAX_SEQUENCES)
    test_fraction = check_float(test_fraction, "test_fraction", 0, 1, low_open=True,
                                high_open=True)
    if pool is not None:
        pool = _check_pool(pool)
        if pool.shape != (pool_size, m):
            raise ValueError(f"pool must have shape (pool_size, m) = ({pool_size}, {m}), got "
                             f"{pool.shape}")
    elif pool_size > MAX_POOL:
        raise ValueError(f"pool_size must be at most MAX_POOL = {MAX_POOL}, got {pool_size}")
    train_mix, test_distributions = _check_distributions(train_mix, test_distributions)
    seed = check_int(seed, "seed", 0)
    ss = np.random.SeedSequence([seed, m, pool_size, 7])
    s_pool, s_train, s_test, s_hash = ss.spawn(4)
    if pool is None:
        pool = token_pool(m, pool_size, int(s_pool.generate_state(1)[0]))
    pool = np.asarray(pool)
    gram = pool_gram(pool)
    hseed = int(s_hash.generate_state(1)[0])

    def side(name, count, rng, want_test):
        got, have = [], 0
        for _ in range(50):
            cand = _drawn(f"pool_size={pool_size}, train_mix / test_distributions",
                          lambda: draw_triples(name, pool, 4 * count, rng, gram))
            keep = held_out(multiset_codes(cand, pool_size), test_fraction, hseed) == want_test
            got.append(cand[keep])
            have += int(keep.sum())
            if have >= (count if not want_test else 3 * count):
                break
        return np.concatenate(got)

    rng = np.random.default_rng(s_train)
    total = sum(train_mix.values())
    counts = {k: int(round(n_train * v / total)) for k, v in train_mix.items()}
    counts[next(iter(counts))] += n_train - sum(counts.values())
    parts = {}
    for name, c in counts.items():
        if c:
            idx = side(name, c, rng, False)
            if len(idx) < c:
                raise ValueError(f"n_train, train_mix: could not draw {c} training {name} "
                                 f"sequences on the train side of the pool")
            parts[name] = idx[:c]
    train_idx = np.concatenate(list(parts.values()))
    rng = np.random.default_rng(s_test)
    test_idx = {}
    for name in test_distributions:
        idx = side(name, n_test, rng, True)
        _, first = np.unique(multiset_codes(idx, pool_size), return_index=True)
        test_idx[name] = idx[np.sort(first)][:n_test]  # distinct test sequences
    return SharedPoolData(m, pool, train_idx, test_idx, parts)


@dataclass(frozen=True)
class DisjointPoolData:
    """Disjoint train / test token pools with sequences from several distributions."""

    m: int
    train_pool: np.ndarray
    test_pool: np.ndarray
    train_idx: np.ndarray
    test_idx: dict  # distribution -> (S, 3) into test_pool
    train_eval_idx: dict  # distribution -> (S, 3) into train_pool (fresh draws)
    train_parts: dict  # mixture component -> its rows of train_idx (what the heads fit)


def disjoint_pool_split(m: int, pool_size: int, train_fraction: float, n_train: int,
                        n_test: int, train_mix: dict | None = None,
                        test_distributions=HARD_DISTRIBUTIONS, seed: int = 0,
                        complement_closed: bool = True) -> DisjointPoolData:
    """Disjoint token pools (the stored protocols' reading) with the hard test distributions
    on the test pool, and the same distributions on the training pool for a train/test
    comparison at equal difficulty. With `complement_closed` the pool is made of
    complementary pairs and split by pairs, so both pools are closed under complement and
    witness triples exist on each side."""
    check_positive_int(m, "m", upper=30)
    check_positive_int(pool_size, "pool_size", upper=2**m)
    check_positive_int(pool_size, "pool_size", MAX_POOL)
    check_positive_int(n_train, "n_train", MAX_SEQUENCES)
    check_positive_int(n_test, "n_test", MAX_SEQUENCES)
    train_fraction = check_float(train_fraction, "train_fraction", 0, 1, low_open=True,
                                 high_open=True)
    train_mix, test_distributions = _check_distributions(train_mix, test_distributions)
    seed = check_int(seed, "seed", 0)
    complement_closed = check_bool(complement_closed, "complement_closed")
    if complement_closed:
        n_pairs = pool_size // 2
        k = int(round(train_fraction * n_pairs))
        if pool_size % 2 or not 0 < k < n_pairs or m < 2:
            raise ValueError(f"complement_closed needs m >= 2 and an even pool_size whose "
                             f"pairs train_fraction splits into two non-empty pools, got m = "
                             f"{m}, pool_size = {pool_size}, train_fraction = {train_fraction}")
    ss = np.random.SeedSequence([seed, m, pool_size, 11])
    s_pool, s_split, s_train, s_test = ss.spawn(4)
    if complement_closed:
        pool = complement_closed_pool(m, pool_size // 2, int(s_pool.generate_state(1)[0]))
        n_pairs = pool_size // 2
        k = int(round(train_fraction * n_pairs))
        order = np.random.default_rng(s_split).permutation(n_pairs)
        pick = lambda ids: pool.reshape(n_pairs, 2, m)[ids].reshape(-1, m)  # noqa: E731
        tr_pool, te_pool = pick(np.sort(order[:k])), pick(np.sort(order[k:]))
    else:
        pool = token_pool(m, pool_size, int(s_pool.generate_state(1)[0]))
        tr_pool, te_pool = _drawn("pool_size, train_fraction", lambda: split_pool(
            pool, train_fraction, int(s_split.generate_state(1)[0])))
    g_tr, g_te = pool_gram(tr_pool), pool_gram(te_pool)
    rng = np.random.default_rng(s_train)
    total = sum(train_mix.values())
    counts = {k: int(round(n_train * v / total)) for k, v in train_mix.items()}
    counts[next(iter(counts))] += n_train - sum(counts.values())
    what = "pool_size, train_fraction, train_mix / test_distributions"

    def draw(k, p, c, g):
        return _drawn(what, lambda: draw_triples(k, p, c, rng, g))

    parts = {k: draw(k, tr_pool, c, g_tr) for k, c in counts.items() if c}
    train_idx = np.concatenate(list(parts.values()))
    rng = np.random.default_rng(s_test)
    test_idx = {k: draw(k, te_pool, n_test, g_te) for k in test_distributions}
    train_eval = {k: draw(k, tr_pool, n_test, g_tr) for k in test_distributions}
    return DisjointPoolData(m, tr_pool, te_pool, train_idx, test_idx, train_eval, parts)
