"""How E2's readings split train from test (chapter 7): the paper's "larger, disjoint
train/test pools" can mean disjoint *tokens* or disjoint *sequences* over one pool.

* :func:`disjoint_pool_split` — disjoint token pools, closed under complement and split by
  complementary pairs, so witness triples exist on both sides (reading X).
* :func:`shared_pool_split` — one pool; train and test are disjoint sets of sequences (as
  multisets) over it, assigned by a seeded hash (:func:`held_out`) so the same sequence lands
  on the same side whichever distribution drew it (readings S-code, S-random).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from companion.checks import (
    check_array,
    check_bool,
    check_float,
    check_int,
    check_positive_int,
    check_tokens,
)
from companion.core.task import min_ip_targets, split_pool, token_pool
from companion.experiments.e2.pools import (
    HARD_DISTRIBUTIONS,
    MAX_POOL,
    MAX_SEQUENCES,
    complement_closed_pool,
    draw_triples,
    multiset_codes,
    pool_gram,
)

__all__ = ["SharedPoolData", "held_out", "shared_pool_split", "DisjointPoolData",
           "disjoint_pool_split"]


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
        pool = check_tokens(pool, "pool", 2)
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
