"""E2's data (chapter 7): token pools, distributions of length-3 sequences on them, and the
splits of train from test. A sequence is an index triple into a pool.

Distributions (:data:`HARD_DISTRIBUTIONS`; seeded, vectorised rejection samplers on the
pool's Gram matrix): uniform triples; ``gap1`` / ``gap2`` (a query whose two competitors
differ in overlap by exactly 1 or 2); ``tight`` (all cross overlaps within 1); ``partner``
(each query's lowest-overlap partner against another's); ``witness`` ((x, x̄, y) as in the
witness family, plus a quarter of pure (x, y, y)). The stored protocols' ``near_tie`` is
gap 1 drawn one triple at a time (:data:`TEST_DISTRIBUTIONS`).

Splits, the readings of the paper's "larger, disjoint train/test pools"
(:func:`disjoint_pool_split`, :func:`shared_pool_split`):

* disjoint *tokens*, ``pools="pairs"`` (reading X): random complementary pairs split by
  pairs, so both pools are closed under complement and witness triples exist on each side;
* disjoint *tokens*, ``pools="tokens"`` (the stored protocols A–I): distinct random tokens
  split 70/30, uniform and near-tie triples, seeded exactly as those runs were;
* disjoint *sequences* over one pool (readings S-code, S-random): every multiset of three
  tokens lands on the train or the test side by a seeded hash, whichever distribution drew it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from companion.checks import check_array, check_device, check_int, check_positive_int, check_tokens
from companion.core.task import split_pool, token_pool

__all__ = ["HARD_DISTRIBUTIONS", "TEST_DISTRIBUTIONS", "MAX_POOL", "MAX_SEQUENCES", "Split",
           "disjoint_pool_split", "shared_pool_split", "complement_closed_pool",
           "query_gaps", "PoolBits", "pool_inputs"]

HARD_DISTRIBUTIONS = ("uniform", "gap1", "gap2", "tight", "partner", "witness")
#: The stored protocols' distributions (``pools="tokens"``), train mixture and tests alike.
TEST_DISTRIBUTIONS = ("uniform", "near_tie")
#: Largest pool a configuration accepts: the samplers hold P x P int64 overlaps (2**12:
#: 128 MB each; the full runs use P <= 512).
MAX_POOL = 2**12
#: Most training or test sequences a configuration accepts (the full runs use <= 8000).
MAX_SEQUENCES = 10**5
#: Candidate rows a rejection sampler draws at most before it gives up (a distribution the
#: pool cannot supply must fail in seconds, not after 200 huge batches).
_MAX_CANDIDATES = 2 * 10**7


# --------------------------------------------------------------------------- distributions


def _multiset_codes(idx: np.ndarray, pool_size: int) -> np.ndarray:
    """One int per sequence, equal for two sequences iff they hold the same tokens (any
    order): the sorted indices in base `pool_size`."""
    s = np.sort(idx, axis=1)
    return (s[:, 0] * pool_size + s[:, 1]) * pool_size + s[:, 2]


def _shuffle_rows(idx: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Permute the three positions of every row independently (queries land anywhere)."""
    order = np.argsort(rng.random(idx.shape), axis=1)
    return np.take_along_axis(idx, order, axis=1)


def _rejection(draw, accept, count: int, rng, what: str) -> np.ndarray:
    """Draw candidate rows in vectorised batches until `count` pass `accept` (at most 200
    batches and _MAX_CANDIDATES rows in all)."""
    out, have = [], 0
    batch = max(1024, 4 * count)
    for _ in range(min(200, max(1, _MAX_CANDIDATES // batch))):
        cand = draw(batch)
        cand = cand[accept(cand)]
        out.append(cand)
        have += len(cand)
        if have >= count:
            return _shuffle_rows(np.concatenate(out)[:count], rng)
    raise ValueError(f"the pool has too few {what} triples: found {have} of {count}")


def _uniform_triples(pool_size: int, count: int, rng) -> np.ndarray:
    return rng.integers(0, pool_size, size=(count, 3))


def _gap_triples(gram, count: int, rng, gap: int = 1, one_at_a_time: bool = False
                 ) -> np.ndarray:
    """Triples of distinct tokens in which a designated query's two competitors differ in
    overlap by exactly `gap`, the query at any position.

    Batched (the readings): uniform over such triples. `one_at_a_time` (the stored
    protocols' near-ties, kept draw for draw): query x and a competitor z uniform, the other
    competitor uniform among the tokens at overlap gap `gap` from z's."""
    size = len(gram)
    if not one_at_a_time:
        def draw(b):
            return rng.integers(0, size, size=(b, 3))

        def accept(c):
            x, z, w = c.T
            distinct = (x != z) & (x != w) & (z != w)
            return distinct & (np.abs(gram[x, z] - gram[x, w]) == gap)

        return _rejection(draw, accept, count, rng, f"gap-{gap}")
    out = np.empty((count, 3), dtype=np.int64)
    filled, attempts = 0, 0
    while filled < count:
        attempts += 1
        if attempts > 50 * count + 1000:
            raise ValueError(f"a pool of {size} tokens has too few pairs at overlap gap {gap} "
                             "for near-ties")
        x, z = rng.integers(0, size, size=2)
        if x == z:
            continue
        cand = np.flatnonzero(np.abs(gram[x] - gram[x, z]) == gap)
        cand = cand[cand != x]
        if len(cand) == 0:
            continue
        z2 = cand[rng.integers(0, len(cand))]
        out[filled] = np.array([x, z, z2])[rng.permutation(3)]
        filled += 1
    return out


def _tight_triples(gram, count: int, rng) -> np.ndarray:
    """Distinct tokens whose three cross overlaps lie within 1 and are not all equal: every
    query's competitors tie or differ by 1, and at least two queries face a gap of exactly 1
    (a soft minimum has no slack anywhere)."""
    size = len(gram)

    def draw(b):
        return rng.integers(0, size, size=(b, 3))

    def accept(c):
        x, z, w = c.T
        o = np.stack([gram[x, z], gram[x, w], gram[z, w]], axis=1)
        return (x != z) & (x != w) & (z != w) & (o.max(1) - o.min(1) == 1)

    return _rejection(draw, accept, count, rng, "tight")


def _partners(gram, k: int = 4) -> np.ndarray:
    """For every pool token x, the indices of its k lowest-overlap other tokens: (P, k)."""
    g = np.asarray(gram, dtype=np.float64).copy()
    np.fill_diagonal(g, np.inf)
    return np.argsort(g, axis=1, kind="stable")[:, :k]


def _partner_triples(gram, count: int, rng, k: int = 4, min_gap: int = 2) -> np.ndarray:
    """Witness-like triples (x, z, z'): z one of x's k lowest-overlap partners, z' one of the
    partners of another token y, with <x, z'> >= <x, z> + `min_gap`. As in the witness family,
    every query prefers its own partner over others' by a margin that needs a weight ratio
    > 2 min_gap - 1, and different queries prefer different keys."""
    size = len(gram)
    part = _partners(gram, k)

    def draw(b):
        x = rng.integers(0, size, size=b)
        y = rng.integers(0, size, size=b)
        z = part[x, rng.integers(0, k, size=b)]
        w = part[y, rng.integers(0, k, size=b)]
        return np.stack([x, z, w], axis=1)

    def accept(c):
        x, z, w = c.T
        return (x != w) & (z != w) & (gram[x, w] - gram[x, z] >= min_gap)

    return _rejection(draw, accept, count, rng, "partner")


def _complement_index(pool: np.ndarray) -> np.ndarray:
    """For every pool token, the index of its complement in the pool, or -1: (P,)."""
    weights = 1 << np.arange(pool.shape[1], dtype=np.int64)
    where = {int(c): i for i, c in enumerate(pool @ weights)}
    return np.array([where.get(int(c), -1) for c in (1 - pool) @ weights], dtype=np.int64)


def _witness_triples(pool: np.ndarray, count: int, rng, pure_fraction: float = 0.25
                     ) -> np.ndarray:
    """Mixed (x, x̄, y) with y not in {x, x̄} (the query x must prefer its complement,
    overlap 0, over y: the direct links of Theorem E), and a `pure_fraction` of pure
    (x, y, y) with y != x, as the certificate needs; positions shuffled."""
    comp = _complement_index(pool)
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

    mixed = (_rejection(draw, accept, count - n_pure, rng, "witness")
             if count > n_pure else np.zeros((0, 3), dtype=np.int64))
    x = rng.integers(0, size, size=n_pure)
    y = (x + rng.integers(1, size, size=n_pure)) % size
    out = np.concatenate([mixed, _shuffle_rows(np.stack([x, y, y], axis=1), rng)])
    return out[rng.permutation(len(out))]


def _draw_triples(name: str, pool: np.ndarray, count: int, rng, gram) -> np.ndarray:
    """`count` triples of the named distribution (one of HARD_DISTRIBUTIONS) over `pool`."""
    if name == "uniform":
        return _uniform_triples(len(gram), count, rng)
    if name in ("gap1", "gap2"):
        return _gap_triples(gram, count, rng, int(name[-1]))
    if name == "tight":
        return _tight_triples(gram, count, rng)
    if name == "partner":
        return _partner_triples(gram, count, rng)
    return _witness_triples(pool, count, rng)


def complement_closed_pool(m: int, pairs: int, seed: int) -> np.ndarray:
    """`pairs` random complementary pairs {x, x̄} of width-m tokens: (2 pairs, m), token
    2i + 1 the complement of token 2i."""
    m = check_int(m, "m", 2, 62)
    check_positive_int(pairs, "pairs", upper=min(2 ** (m - 1), MAX_POOL // 2))
    half = token_pool(m - 1, pairs, seed)  # first bit fixed to 0 picks one token per pair
    x = np.concatenate([np.zeros((pairs, 1), dtype=np.int64), half], axis=1)
    return np.stack([x, 1 - x], axis=1).reshape(-1, m)


def query_gaps(seqs) -> np.ndarray:
    """For token sequences (S, 3, m): each query's |<x, z> - <x, z'>| over its two
    competitors, (S, 3). A sequence is a near-tie when some query's gap is 1."""
    s = check_tokens(seqs, "seqs", 3)
    if s.ndim != 3 or s.shape[1] != 3:
        raise ValueError(f"seqs must have shape (S, 3, m), got {s.shape}")
    g = np.einsum("sim,sjm->sij", s, s)
    out = np.empty(g.shape[:2], dtype=np.int64)
    for i in range(3):
        a, b = [j for j in range(3) if j != i]
        out[:, i] = np.abs(g[:, i, a] - g[:, i, b])
    return out


# --------------------------------------------------------------------------- splits


@dataclass(frozen=True)
class Split:
    """Train and test sequences as index triples into their pools (one pool, twice, for a
    shared-pool split)."""

    train_pool: np.ndarray  # (P_train, m)
    test_pool: np.ndarray  # (P_test, m)
    train_idx: np.ndarray  # (S_train, 3): the training sequences, the mixture's parts in order
    train_parts: dict  # mixture component -> its rows of train_idx (what the heads fit)
    test_idx: dict  # distribution -> (S_test, 3) into test_pool
    train_eval_idx: dict  # distribution -> fresh draws on train_pool (disjoint pairs only)


def _counts(n_train: int, train_mix: dict) -> dict:
    """Training sequences per mixture component, in proportion to the weights."""
    total = sum(train_mix.values())
    counts = {k: int(round(n_train * v / total)) for k, v in train_mix.items()}
    counts[next(iter(counts))] += n_train - sum(counts.values())
    return counts


def disjoint_pool_split(m: int, pool_size: int, train_fraction: float, n_train: int,
                        n_test: int, train_mix: dict, tests, seed: int = 0,
                        pools: str = "pairs") -> Split:
    """Disjoint train and test token pools (see the module docstring for `pools`), the
    training mixture on the train pool and each test distribution on the test pool; with
    pairs also the test distributions on the train pool (a comparison at equal difficulty).
    With tokens the mixture is {"uniform": 1 - f, "near_tie": f} and f is the near-tie share.
    Arguments as a validated configuration holds them (no checks here)."""
    if pools == "tokens":
        ss = np.random.SeedSequence([seed, m, pool_size])
        s_pool, s_split, s_tr, s_trn, s_te, s_ten = (int(s.generate_state(1)[0])
                                                     for s in ss.spawn(6))
        tr_pool, te_pool = split_pool(token_pool(m, pool_size, s_pool), train_fraction,
                                      s_split)
        g_tr, g_te = tr_pool @ tr_pool.T, te_pool @ te_pool.T
        n_near = int(round(train_mix.get("near_tie", 0.0) * n_train))
        parts = {}
        if n_train > n_near:
            parts["uniform"] = _uniform_triples(len(tr_pool), n_train - n_near,
                                                np.random.default_rng(s_tr))
        if n_near:
            parts["near_tie"] = _gap_triples(g_tr, n_near, np.random.default_rng(s_trn), 1,
                                             one_at_a_time=True)
        test = {"uniform": lambda: _uniform_triples(len(te_pool), n_test,
                                                    np.random.default_rng(s_te)),
                "near_tie": lambda: _gap_triples(g_te, n_test, np.random.default_rng(s_ten),
                                                 1, one_at_a_time=True)}
        return Split(tr_pool, te_pool, np.concatenate(list(parts.values())), parts,
                     {k: test[k]() for k in tests}, {})
    ss = np.random.SeedSequence([seed, m, pool_size, 11])
    s_pool, s_split, s_train, s_test = ss.spawn(4)
    pool = complement_closed_pool(m, pool_size // 2, int(s_pool.generate_state(1)[0]))
    n_pairs = pool_size // 2
    order = np.random.default_rng(s_split).permutation(n_pairs)
    k = int(round(train_fraction * n_pairs))
    tr_pool, te_pool = (pool.reshape(n_pairs, 2, m)[np.sort(ids)].reshape(-1, m)
                        for ids in (order[:k], order[k:]))
    g_tr, g_te = tr_pool @ tr_pool.T, te_pool @ te_pool.T
    rng = np.random.default_rng(s_train)
    parts = {d: _draw_triples(d, tr_pool, c, rng, g_tr)
             for d, c in _counts(n_train, train_mix).items() if c}
    rng = np.random.default_rng(s_test)
    test_idx = {d: _draw_triples(d, te_pool, n_test, rng, g_te) for d in tests}
    train_eval = {d: _draw_triples(d, tr_pool, n_test, rng, g_tr) for d in tests}
    return Split(tr_pool, te_pool, np.concatenate(list(parts.values())), parts, test_idx,
                 train_eval)


def _held_out(codes: np.ndarray, test_fraction: float, seed: int) -> np.ndarray:
    """Which multisets are held out for testing: a seeded hash (splitmix64) of each multiset
    code below `test_fraction`, so a sequence's side does not depend on who drew it."""
    with np.errstate(over="ignore"):
        z = codes.astype(np.uint64) + np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) / float(2**53) < test_fraction


def shared_pool_split(pool: np.ndarray, n_train: int, n_test: int, train_mix: dict, tests,
                      seed: int = 0, test_fraction: float = 0.3) -> Split:
    """One pool; every sequence (as a multiset) is on the test side with probability
    `test_fraction` (:func:`_held_out`). `n_train` training sequences are drawn (with
    replacement) from the mixture restricted to the train side, and up to `n_test` distinct
    test-side sequences per test distribution. Arguments as a validated configuration holds
    them (no checks here)."""
    size, m = pool.shape
    ss = np.random.SeedSequence([seed, m, size, 7])
    _, s_train, s_test, s_hash = ss.spawn(4)
    gram = pool @ pool.T
    hseed = int(s_hash.generate_state(1)[0])

    def side(name, count, rng, want_test):
        got, have = [], 0
        for _ in range(50):
            cand = _draw_triples(name, pool, 4 * count, rng, gram)
            keep = _held_out(_multiset_codes(cand, size), test_fraction, hseed) == want_test
            got.append(cand[keep])
            have += int(keep.sum())
            if have >= (3 * count if want_test else count):
                break
        return np.concatenate(got)

    rng = np.random.default_rng(s_train)
    parts = {}
    for name, c in _counts(n_train, train_mix).items():
        if c:
            idx = side(name, c, rng, False)
            if len(idx) < c:
                raise ValueError(f"n_train, train_mix: could not draw {c} training {name} "
                                 "sequences on the train side of the pool")
            parts[name] = idx[:c]
    rng = np.random.default_rng(s_test)
    test_idx = {}
    for name in tests:
        idx = side(name, n_test, rng, True)
        _, first = np.unique(_multiset_codes(idx, size), return_index=True)
        test_idx[name] = idx[np.sort(first)][:n_test]  # distinct test sequences
    return Split(pool, pool, np.concatenate(list(parts.values())), parts, test_idx, {})


# --------------------------------------------------------------------------- model inputs


@dataclass(frozen=True, eq=False)
class PoolBits:
    """A token pool's bits as a float tensor (P, m). A plain wrapper, so the training engine
    passes it through untouched while it batches the per-input index rows."""

    bits: object  # torch.Tensor


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
