"""E2 research prototypes (phase A, issue 10): protocols in which feature rank can bind.

Two new readings of the paper's "larger, disjoint train/test pools":

* **Shared pool** (`shared_pool_split`): one pool of P tokens; train and test are disjoint
  sets of *sequences* (as multisets: no permutation of a training sequence is a test
  sequence) over that pool. Every token is seen in training, so lookup-table maps
  (:class:`PoolTableKernelHeads`, as in E1) are legitimate; rank <= P always suffices
  (one indicator feature per key token), so the question is where below P it binds.
* **Exp-affine maps on disjoint token pools**: `companion.ood.MLPKernelHeads` with
  ``hidden=()`` gives phi(x) = exp(W x + c), the class that holds positive random features
  of the exact softmax kernel exp(-beta <x, z>); a low-rank failure is then not a failure
  to represent a generalising head.

Hard test distributions (all seeded, vectorised rejection samplers on a pool's Gram matrix):
`gap_triples` (one designated query whose two competitors differ by exactly `gap`),
`tight_triples` (every query's competitors within 1, at least two queries at gap exactly 1),
`partner_triples` (witness-like: the query's competitors are its own lowest-overlap partner
and another query's partner, higher by >= `min_gap`).

Imports of the public API (for the port into the restructured package):
``companion.task.{token_pool, split_pool, min_ip_targets, check_positive_int}``,
``companion.ood.{MLPKernelHeads, MLPSoftmaxHeads, PoolBits, pool_inputs,
exact_sequence_accuracy}``, ``companion.train.{ModelStack, train_batched}``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from .ood import (
    MLPKernelHeads,
    MLPSoftmaxHeads,
    PoolBits,
    exact_sequence_accuracy,
    pool_inputs,
)
from .task import check_positive_int, min_ip_targets, split_pool, token_pool
from .train import ModelStack, train_batched

READOUTS = ("learned", "overlap")
HARD_DISTRIBUTIONS = ("uniform", "gap1", "gap2", "tight", "partner", "witness")

# --------------------------------------------------------------------------- generators


def pool_gram(pool) -> np.ndarray:
    """Integer overlaps <x, z> between all pool tokens: (P, P)."""
    p = np.asarray(pool, dtype=np.int64)
    return p @ p.T


def multiset_codes(idx, pool_size: int) -> np.ndarray:
    """One int per sequence, equal for two sequences iff they hold the same tokens (any
    order): the sorted indices in base `pool_size`."""
    s = np.sort(np.asarray(idx, dtype=np.int64), axis=1)
    return (s[:, 0] * pool_size + s[:, 1]) * pool_size + s[:, 2]


def _shuffle_rows(idx: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Permute the three positions of every row independently (queries land anywhere)."""
    order = np.argsort(rng.random(idx.shape), axis=1)
    return np.take_along_axis(idx, order, axis=1)


def _rejection(draw, accept, count: int, rng, what: str, max_rounds: int = 200) -> np.ndarray:
    """Draw candidate rows in vectorised batches until `count` pass `accept`."""
    out, have = [], 0
    batch = max(1024, 4 * count)
    for _ in range(max_rounds):
        cand = draw(batch)
        cand = cand[accept(cand)]
        out.append(cand)
        have += len(cand)
        if have >= count:
            return _shuffle_rows(np.concatenate(out)[:count], rng)
    raise ValueError(f"pool has too few {what} triples: found {have} of {count}")


def uniform_triples(pool_size: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """`count` triples of pool indices drawn uniformly with replacement: (count, 3)."""
    return rng.integers(0, pool_size, size=(count, 3))


def gap_triples(gram, count: int, rng: np.random.Generator, gap: int = 1) -> np.ndarray:
    """Triples of distinct tokens in which a designated query's two competitors differ in
    overlap by exactly `gap` (then shuffled, so the query sits anywhere)."""
    g = np.asarray(gram)
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
    g = np.asarray(gram)
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
    g = np.asarray(gram).astype(np.float64).copy()
    np.fill_diagonal(g, np.inf)
    return np.argsort(g, axis=1, kind="stable")[:, :k]


def partner_triples(gram, count: int, rng: np.random.Generator, k: int = 4,
                    min_gap: int = 2) -> np.ndarray:
    """Witness-like triples (x, z, z'): z one of x's k lowest-overlap partners, z' one of the
    partners of another token y, with <x, z'> >= <x, z> + `min_gap`. As in the witness family,
    every query prefers its own partner over others' partners by a margin that needs a weight
    ratio > 2 * min_gap - 1, and different queries prefer different keys."""
    g = np.asarray(gram)
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
    p = np.asarray(pool, dtype=np.int64)
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

    mixed = _rejection(draw, accept, count - n_pure, rng, "witness") if count > n_pure else \
        np.zeros((0, 3), dtype=np.int64)
    x = rng.integers(0, size, size=n_pure)
    y = (x + rng.integers(1, size, size=n_pure)) % size
    pure = _shuffle_rows(np.stack([x, y, y], axis=1), rng)
    out = np.concatenate([mixed, pure])
    return out[rng.permutation(len(out))]


def draw_triples(name: str, pool, count: int, rng: np.random.Generator, gram=None
                 ) -> np.ndarray:
    """Triples from the named distribution (one of `HARD_DISTRIBUTIONS`) over `pool`."""
    gram = pool_gram(pool) if gram is None else gram
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
    check_positive_int(pairs, "pairs", upper=2 ** (m - 1))
    half = token_pool(m - 1, pairs, seed)  # first bit fixed to 0 picks one token per pair
    x = np.concatenate([np.zeros((pairs, 1), dtype=np.int64), half], axis=1)
    return np.stack([x, 1 - x], axis=1).reshape(-1, m)


def code_pool(m: int, words: int, low: int, high: int, seed: int = 0,
              candidates: int = 200_000) -> np.ndarray:
    """`words` weight-m/2 words whose pairwise overlaps all lie in [low, high], with their
    complements: (2 * words, m). In this pool every query x has one private best key x-bar
    (overlap 0) and every other key has overlap in [low, m/2 - low]: the identity-like
    structure of the witness family (Lemma D), with gaps >= low."""
    if m % 2:
        raise ValueError(f"m must be even for weight-m/2 words, got {m}")
    rng = np.random.default_rng(seed)
    w = m // 2
    kept = []
    for _ in range(candidates):
        word = np.zeros(m, dtype=np.int64)
        word[rng.choice(m, size=w, replace=False)] = 1
        if kept:
            ov = np.asarray(kept) @ word
            if ov.min() < low or ov.max() > high:
                continue
        kept.append(word)
        if len(kept) == words:
            x = np.asarray(kept)
            return np.stack([x, 1 - x], axis=1).reshape(-1, m)
    raise ValueError(f"found only {len(kept)} of {words} words with overlaps in [{low}, {high}]")


def query_gaps(seqs) -> np.ndarray:
    """For token sequences (S, 3, m): each query's |<x, z> - <x, z'>| over its two
    competitors: (S, 3)."""
    s = np.asarray(seqs, dtype=np.int64)
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
    with np.errstate(over="ignore"):
        z = np.asarray(codes, dtype=np.uint64) + np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15)
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
    check_positive_int(n_train, "n_train")
    check_positive_int(n_test, "n_test")
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must lie strictly in (0, 1), got {test_fraction}")
    if pool is not None and len(pool) != pool_size:
        raise ValueError(f"pool has {len(pool)} tokens, pool_size says {pool_size}")
    train_mix = {"uniform": 1.0} if train_mix is None else dict(train_mix)
    for name in list(train_mix) + list(test_distributions):
        if name not in HARD_DISTRIBUTIONS:
            raise ValueError(f"distribution must be one of {HARD_DISTRIBUTIONS}, got {name!r}")
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
            cand = draw_triples(name, pool, 4 * count, rng, gram)
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
                raise ValueError(f"could not draw {c} training {name} sequences")
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
        tr_pool, te_pool = split_pool(pool, train_fraction, int(s_split.generate_state(1)[0]))
    train_mix = {"uniform": 1.0} if train_mix is None else dict(train_mix)
    g_tr, g_te = pool_gram(tr_pool), pool_gram(te_pool)
    rng = np.random.default_rng(s_train)
    total = sum(train_mix.values())
    counts = {k: int(round(n_train * v / total)) for k, v in train_mix.items()}
    counts[next(iter(counts))] += n_train - sum(counts.values())
    train_idx = np.concatenate([draw_triples(k, tr_pool, c, rng, g_tr)
                                for k, c in counts.items() if c])
    rng = np.random.default_rng(s_test)
    test_idx = {k: draw_triples(k, te_pool, n_test, rng, g_te) for k in test_distributions}
    train_eval = {k: draw_triples(k, tr_pool, n_test, rng, g_tr) for k in test_distributions}
    return DisjointPoolData(m, tr_pool, te_pool, train_idx, test_idx, train_eval)


# --------------------------------------------------------------------------- table heads


def _gather_pairs(matrix, rows):
    """matrix[:, query, key_j] for rows (query, key_0, key_1, key_2): (M, N, 3)."""
    size = matrix.shape[-1]
    flat = (rows[:, :1] * size + rows[:, 1:]).reshape(-1)
    return matrix.reshape(matrix.shape[0], -1).index_select(1, flat).view(
        matrix.shape[0], rows.shape[0], 3)


def _check_readout(readout):
    if readout not in READOUTS:
        raise ValueError(f"readout must be one of {READOUTS}, got {readout!r}")
    return readout


class PoolTableKernelHeads(torch.nn.Module):
    """M stacked NKA heads whose maps are lookup tables over a shared pool of P tokens.

    alpha(x, z) = <phi_Q(x), phi_K(z)>, phi = exp(table) on the first r_i columns (masked to
    exactly 0 beyond). Readout "learned": f(x, z) = <a(x), v(z)> + b(x) with tables a, v in
    R^d; "overlap": f(x, z) = <x, z> (nothing learned but where to attend). Same forward
    contract as `companion.ood.MLPKernelHeads`: inputs (rows (N, 4), PoolBits) -> (M, N).
    """

    def __init__(self, pool_size: int, ranks: Sequence[int], seeds: Sequence[int],
                 readout: str = "overlap", value_dim: int = 16, phi_std: float = 1.0):
        super().__init__()
        self.pool_size = check_positive_int(pool_size, "pool_size")
        self.ranks = [check_positive_int(r, "r") for r in ranks]
        self.seeds = [int(s) for s in seeds]
        if len(self.ranks) != len(self.seeds) or not self.ranks:
            raise ValueError("ranks and seeds must be non-empty and of equal length")
        self.readout = _check_readout(readout)
        d = check_positive_int(value_dim, "value_dim")
        m_, p, r = len(self.ranks), self.pool_size, max(self.ranks)
        q = torch.zeros(m_, p, r)
        k = torch.zeros(m_, p, r)
        v = torch.zeros(m_, p, d)
        a = torch.zeros(m_, p, d)
        for i, (rank, s) in enumerate(zip(self.ranks, self.seeds)):
            g = torch.Generator().manual_seed(int(np.random.SeedSequence(
                [s, rank, p, 3]).generate_state(1)[0]))
            q[i, :, :rank] = torch.randn(p, rank, generator=g) * phi_std
            k[i, :, :rank] = torch.randn(p, rank, generator=g) * phi_std
            v[i] = torch.randn(p, d, generator=g)
            a[i] = torch.randn(p, d, generator=g) / math.sqrt(d)
        self.q, self.k = torch.nn.Parameter(q), torch.nn.Parameter(k)
        if self.readout == "learned":
            self.v, self.a = torch.nn.Parameter(v), torch.nn.Parameter(a)
            self.b = torch.nn.Parameter(torch.zeros(m_, p))
        mask = torch.arange(r)[None, :] < torch.tensor(self.ranks)[:, None]
        self.register_buffer("mask_add", torch.zeros(m_, r).masked_fill(~mask, -math.inf))

    @property
    def num_models(self) -> int:
        return len(self.ranks)

    def kernel(self) -> torch.Tensor:
        """alpha on all pool pairs, up to a positive factor per (model, query): (M, P, P)."""
        q = self.q + self.mask_add[:, None, :]
        k = self.k + self.mask_add[:, None, :]
        phi_q = torch.exp(q - q.detach().amax(-1, keepdim=True))
        phi_k = torch.exp(k - k.detach().amax(dim=(-2, -1), keepdim=True))
        return torch.bmm(phi_q, phi_k.transpose(1, 2))

    def forward(self, inputs):
        rows, pool = inputs
        alpha = _gather_pairs(self.kernel(), rows)
        if self.readout == "overlap":
            f = _gather_pairs((pool.bits @ pool.bits.T).unsqueeze(0), rows)
            bias = 0.0
        else:
            f = _gather_pairs(torch.bmm(self.a, self.v.transpose(1, 2)), rows)
            bias = self.b[:, rows[:, 0]]
        return (alpha * f).sum(-1) / alpha.sum(-1).clamp_min(1e-30) + bias


class PoolTableSoftmaxHeads(torch.nn.Module):
    """M stacked dense softmax heads with table scores q(x), k(z) in R^score_dim over the
    pool: alpha = exp(<q(x), k(z)>). Readouts as in `PoolTableKernelHeads`."""

    def __init__(self, pool_size: int, seeds: Sequence[int], score_dim: int,
                 readout: str = "overlap", value_dim: int = 16, qk_std: float = 0.2):
        super().__init__()
        self.pool_size = check_positive_int(pool_size, "pool_size")
        self.seeds = [int(s) for s in seeds]
        self.readout = _check_readout(readout)
        s_dim = check_positive_int(score_dim, "score_dim")
        d = check_positive_int(value_dim, "value_dim")
        m_, p = len(self.seeds), self.pool_size
        q, k = torch.zeros(m_, p, s_dim), torch.zeros(m_, p, s_dim)
        v, a = torch.zeros(m_, p, d), torch.zeros(m_, p, d)
        for i, s in enumerate(self.seeds):
            g = torch.Generator().manual_seed(int(np.random.SeedSequence(
                [s, p, 5]).generate_state(1)[0]))
            q[i] = torch.randn(p, s_dim, generator=g) * qk_std
            k[i] = torch.randn(p, s_dim, generator=g) * qk_std
            v[i] = torch.randn(p, d, generator=g)
            a[i] = torch.randn(p, d, generator=g) / math.sqrt(d)
        self.q, self.k = torch.nn.Parameter(q), torch.nn.Parameter(k)
        if self.readout == "learned":
            self.v, self.a = torch.nn.Parameter(v), torch.nn.Parameter(a)
            self.b = torch.nn.Parameter(torch.zeros(m_, p))

    @property
    def num_models(self) -> int:
        return len(self.seeds)

    def forward(self, inputs):
        rows, pool = inputs
        w = torch.softmax(_gather_pairs(torch.bmm(self.q, self.k.transpose(1, 2)), rows), -1)
        if self.readout == "overlap":
            f = _gather_pairs((pool.bits @ pool.bits.T).unsqueeze(0), rows)
            return (w * f).sum(-1)
        f = _gather_pairs(torch.bmm(self.a, self.v.transpose(1, 2)), rows)
        return (w * f).sum(-1) + self.b[:, rows[:, 0]]


# --------------------------------------------------------------------------- sweeps


def accuracy_by_position_gap(pred, seqs) -> dict:
    """Per-query accuracy (|y - t| < 1/2) split by the query's competitor gap: {gap: acc}."""
    p = np.asarray(pred, dtype=np.float64).reshape(-1, 3)
    t = min_ip_targets(seqs)
    gaps = query_gaps(seqs)
    ok = np.abs(p - t) < 0.5
    return {int(g): float(ok[gaps == g].mean()) for g in np.unique(gaps)}


def _stack(kind: str, *, ranks, seeds, groups, m, pool_size, readout, value_dim, phi_std,
           qk_std, hidden, feature, dense: bool):
    parts, keys = [], []
    for group in groups:
        rr = [r for r in group for _ in seeds]
        sd = [s for _ in group for s in seeds]
        if kind == "table":
            parts.append(PoolTableKernelHeads(pool_size, rr, sd, readout, value_dim, phi_std))
        else:
            parts.append(MLPKernelHeads(m, rr, sd, hidden, value_dim, feature, "01", False,
                                        readout))
        keys += [(r, s) for r, s in zip(rr, sd)]
    if dense:
        if kind == "table":
            parts.append(PoolTableSoftmaxHeads(pool_size, seeds, m, readout, value_dim, qk_std))
        else:
            parts.append(MLPSoftmaxHeads(m, seeds, hidden, value_dim, qk_std, "01", False,
                                         readout))
        keys += [("dense", s) for s in seeds]
    return ModelStack(parts), keys


def run_protocol(kind: str, *, m: int, train: tuple, evals: dict, ranks, seeds, groups=None,
                 readout="overlap", steps=1500, lr=1e-2, final_lr_fraction=0.02,
                 value_dim=16, phi_std=1.0, qk_std=0.2, hidden=(), feature="exp",
                 dense=True, gap_breakdown=False) -> dict:
    """Train every (rank, seed) head of kind "table" (shared pool) or "mlp" (maps of the
    bits; hidden=() is exp-affine) and the dense heads as one program; evaluate exact-sequence
    accuracy on each named evaluation set.

    train = (pool, idx); evals = {name: (pool, idx)}. Returns
    {"acc": {name: {key: acc}}, "train_max_error": {key: e}, "wall_s": t} with keys
    "r<rank>/s<seed>" and "dense/s<seed>".
    """
    t0, c0 = time.perf_counter(), time.process_time()
    groups = [list(ranks)] if groups is None else groups
    pool, idx = train
    model, keys = _stack(kind, ranks=ranks, seeds=list(seeds), groups=groups, m=m,
                         pool_size=len(pool), readout=readout, value_dim=value_dim,
                         phi_std=phi_std, qk_std=qk_std, hidden=tuple(hidden), feature=feature,
                         dense=dense)
    tr_in = pool_inputs(pool, idx)
    y = torch.as_tensor(min_ip_targets(pool[idx]).reshape(-1), dtype=torch.float32)
    res = train_batched(model, tr_in, y, steps=steps, lr=lr,
                        final_lr_fraction=final_lr_fraction, seed=0)
    names = [f"r{k[0]}/s{k[1]}" if k[0] != "dense" else f"dense/s{k[1]}" for k in keys]
    out = {"acc": {}, "train_max_error": dict(zip(names, res.best_max_error.tolist()))}
    if gap_breakdown:
        out["by_gap"] = {}
    with torch.no_grad():
        for name, (epool, eidx) in evals.items():
            pred = res.model(pool_inputs(epool, eidx))
            acc = exact_sequence_accuracy(pred, min_ip_targets(epool[eidx]))
            out["acc"][name] = dict(zip(names, acc.tolist()))
            if gap_breakdown:
                out["by_gap"][name] = {
                    n: accuracy_by_position_gap(pred[i].numpy(), epool[eidx])
                    for i, n in enumerate(names)}
    out["wall_s"] = time.perf_counter() - t0
    out["cpu_s"] = time.process_time() - c0  # one thread: CPU time is robust to a busy machine
    return out


def table(result: dict, name: str, ranks, seeds) -> np.ndarray:
    """(len(ranks) + 1, len(seeds)) accuracies on evaluation set `name`; last row dense."""
    acc = result["acc"][name]
    rows = [[acc[f"r{r}/s{s}"] for s in seeds] for r in ranks]
    if f"dense/s{seeds[0]}" in acc:
        rows.append([acc[f"dense/s{s}"] for s in seeds])
    return np.asarray(rows)


def transition_and_sharpness(ranks, acc, threshold: float = 0.9):
    """(first rank whose median accuracy over seeds >= threshold or None, largest rise of the
    median between neighbouring ranks, the rank where that rise ends)."""
    med = np.median(np.asarray(acc)[: len(ranks)], axis=1)
    trans = next((int(r) for r, a in zip(ranks, med) if a >= threshold), None)
    if len(med) < 2:
        return trans, 0.0, None
    d = np.diff(med)
    j = int(np.argmax(d))
    return trans, float(d[j]), int(ranks[j + 1])


RULE_THRESHOLD = 0.9
RULE_LOW = 0.5
RULE_DENSE_EXACT = 0.99


def curve_rule(ranks, acc, train_acc=None, threshold: float = RULE_THRESHOLD,
               low: float = RULE_LOW) -> dict:
    """The pre-registered rule (docs-draft/e2_rule.md) on one accuracy curve.

    ranks: increasing run ranks (grid and refinement); acc (len(ranks), seeds). Returns the
    stay-above transition rank r_star on the doubling grid and refined over all run ranks,
    the first-crossing rank, r50 (largest run rank below r_star with median <= low), the
    width log2(r_star / r50) in doublings, `sharp` (width <= 1), J = a(r*) - a(r*/2),
    the largest grid rise and, with train_acc, the train curve's r_star and the
    decomposition over the grid ranks below r_star (all grid ranks if none): the share of the
    missing test accuracy that is capacity (1 - train) rather than generalisation
    (train - test), and `limit` = "rank" if that share >= 1/2, else "generalisation"."""
    ranks = [int(r) for r in ranks]
    if ranks != sorted(set(ranks)):
        raise ValueError(f"ranks must be strictly increasing, got {ranks}")
    med = np.median(np.asarray(acc, dtype=np.float64), axis=1)
    if len(med) != len(ranks):
        raise ValueError(f"acc must have one row per rank ({len(ranks)}), got {len(med)}")
    grid = [i for i, r in enumerate(ranks) if r & (r - 1) == 0]

    def stay_above(idx):
        for k, i in enumerate(idx):
            if all(med[j] >= threshold for j in idx[k:]):
                return i
        return None

    i_grid = stay_above(grid)
    out = {"threshold": threshold, "median": med.tolist(), "ranks": ranks,
           "r_star": None if i_grid is None else ranks[i_grid],
           "r_first": next((r for r, a in zip(ranks, med) if a >= threshold), None),
           "r_star_refined": None, "r50": None, "width": None, "sharp": False, "J": None}
    gm = med[grid]
    if len(grid) > 1:
        d = np.diff(gm)
        j = int(np.argmax(d))
        out["largest_grid_rise"] = float(d[j])
        out["largest_grid_rise_at"] = ranks[grid[j + 1]]
    if i_grid is not None:
        r_star = ranks[i_grid]
        all_idx = list(range(len(ranks)))
        i_ref = stay_above(all_idx)
        if i_ref is not None and ranks[i_ref] > r_star // 2:
            out["r_star_refined"] = ranks[i_ref]
        else:
            out["r_star_refined"] = r_star
        # the running maximum: a rank-r class contains every smaller rank, so a dip below an
        # earlier rank's accuracy is an optimisation failure and must not make a curve sharp
        env = np.maximum.accumulate(med)
        lows = [i for i in range(len(ranks)) if ranks[i] < out["r_star_refined"]
                and env[i] <= low]
        if lows:
            out["r50"] = ranks[lows[-1]]
            out["width"] = float(np.log2(out["r_star_refined"] / out["r50"]))
            out["sharp"] = out["width"] <= 1.0
        if r_star > 1 and (r_star // 2) in ranks:
            out["J"] = float(med[i_grid] - med[ranks.index(r_star // 2)])
    if train_acc is not None:
        tr = np.median(np.asarray(train_acc, dtype=np.float64), axis=1)
        out["train_median"] = tr.tolist()
        tr_rule = curve_rule(ranks, train_acc, None, threshold, low)
        out["train_r_star"] = tr_rule["r_star"]
        below = [i for i in grid if out["r_star"] is None or ranks[i] < out["r_star"]]
        if below:
            i = below[-1]
            out["r_minus"] = ranks[i]
            out["train_at_r_minus"] = float(tr[i])
            out["gap_at_r_minus"] = float(tr[i] - med[i])
            # what is missing from a perfect test score below the transition, split into
            # capacity (1 - train) and generalisation (train - test), summed over those ranks
            cap = float(sum(max(0.0, 1.0 - tr[j]) for j in below))
            gen = float(sum(max(0.0, tr[j] - med[j]) for j in below))
            out["capacity_share"] = cap / (cap + gen) if cap + gen > 0 else None
            out["limit"] = "rank" if cap >= gen else "generalisation"
    return out


def dense_exact(dense_acc, level: float = RULE_DENSE_EXACT) -> dict:
    """Dense seeds counted exact (test accuracy >= level) and at exactly 1.0."""
    a = np.asarray(dense_acc, dtype=np.float64)
    return {"exact": int((a >= level).sum()), "perfect": int((a == 1.0).sum()),
            "seeds": int(a.size), "all_exact": bool((a >= level).all())}


def verdict(sizes: list[dict]) -> dict:
    """The rule's verdict from per-size results in increasing size order; each item has
    "size", "rule" (from `curve_rule`) and "dense" (from `dense_exact`)."""
    sharp = [s for s in sizes if s["rule"]["sharp"] and s["dense"]["all_exact"]]
    stars = [s["rule"]["r_star"] for s in sharp]
    for i in range(len(sharp) - 2):
        if stars[i:i + 3] == [8, 16, 64]:
            return {"verdict": "reproduced", "reason": "sharp at 8, 16, 64; dense exact"}
    with_t = [s for s in sizes if s["rule"]["r_star"] is not None]
    if len(with_t) < 3:
        reason = f"a transition at only {len(with_t)} of {len(sizes)} sizes"
    elif sum(s["rule"]["sharp"] for s in with_t) < 3:
        reason = "transitions not sharp (width > 1 doubling or no low regime)"
    elif len(sharp) < 3:
        reason = "dense not exact on every seed where the transition is sharp"
    elif any(b < a for a, b in zip(stars, stars[1:])) or stars[-1] < 4 * stars[0]:
        reason = f"transition does not move by >= 4x: {stars}"
    else:
        return {"verdict": "reproduced with our sizes", "reason": f"sharp at {stars}"}
    return {"verdict": "differs", "reason": reason}


def all_tokens_pool(m: int) -> np.ndarray:
    """All 2**m tokens (the full cube) as a pool."""
    codes = np.arange(2**m, dtype=np.int64)
    return ((codes[:, None] >> np.arange(m - 1, -1, -1)) & 1).astype(np.int64)


__all__ = [
    "DisjointPoolData",
    "HARD_DISTRIBUTIONS", "PoolBits", "PoolTableKernelHeads",
    "PoolTableSoftmaxHeads", "READOUTS", "SharedPoolData", "accuracy_by_position_gap",
    "all_tokens_pool", "code_pool", "complement_closed_pool", "complement_index", "curve_rule",
    "dense_exact", "disjoint_pool_split", "draw_triples", "gap_triples", "held_out",
    "multiset_codes", "partner_triples", "partners", "pool_gram", "query_gaps", "run_protocol",
    "shared_pool_split", "table", "tight_triples", "transition_and_sharpness", "uniform_triples",
    "verdict", "witness_triples",
]
