"""E2's data (chapter 7): token pools, distributions of length-3 sequences (index triples into
a pool; seeded rejection samplers on the pool's Gram matrix, see :func:`draw_triples`) and the
splits of train from test: disjoint tokens by complementary pairs (reading X) or by distinct
random tokens (the stored protocols), disjoint *sequences* over one pool (S-*), and the
converged study's hashed three-way splits (:func:`study_split`); the explicit
complement-power heads scored on them, in integers.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import torch

from companion.checks import check_array, check_device, check_int, check_tokens
from companion.core.task import all_tokens, overlaps, split_pool, token_pool

__all__ = ["TEST_DISTRIBUTIONS", "query_gaps", "pool_inputs", "complement_power_rank",
           "complement_power_head_accuracy"]

#: The stored protocols' distributions, train mixture and tests alike.
TEST_DISTRIBUTIONS = ("uniform", "near_tie")
#: Every distribution a configuration may name ("complement": the decisive study's test).
DISTRIBUTIONS = ("uniform", "gap1", "gap2", "witness", "near_tie", "complement")
#: Largest pool a configuration accepts (the samplers hold P x P int64 overlaps).
MAX_POOL = 2**12
#: Most training or test sequences a configuration accepts (the full runs use <= 8000).
MAX_SEQUENCES = 10**5
#: Candidate rows a rejection sampler draws at most (an impossible distribution fails fast).
_MAX_CANDIDATES = 2 * 10**7


def multiset_codes(idx: np.ndarray, pool_size: int) -> np.ndarray:
    """One int per sequence, equal iff two sequences hold the same tokens in any order."""
    s = np.sort(idx, axis=1)
    return (s[:, 0] * pool_size + s[:, 1]) * pool_size + s[:, 2]


def _shuffle_rows(idx: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Permute the three positions of every row independently (queries land anywhere)."""
    order = np.argsort(rng.random(idx.shape), axis=1)
    return np.take_along_axis(idx, order, axis=1)


def _rejection(draw, accept, count: int, rng, what: str) -> np.ndarray:
    """Draw candidate rows in batches until `count` pass `accept`; positions shuffled."""
    out, batch = [], max(1024, 4 * count)
    for _ in range(min(200, max(1, _MAX_CANDIDATES // batch))):
        cand = draw(batch)
        out.append(cand[accept(cand)])
        if sum(map(len, out)) >= count:
            return _shuffle_rows(np.concatenate(out)[:count], rng)
    raise RuntimeError(f"the pool has too few {what} triples: found {sum(map(len, out))} of "
                       f"{count}")


def _overlap(pool: np.ndarray, x: np.ndarray, z: np.ndarray) -> np.ndarray:
    """<pool[x], pool[z]> row by row (no P x P Gram matrix: arm A's cube at m = 14)."""
    return np.einsum("im,im->i", pool[x], pool[z])


def _near_tie_triples(gram, count: int, rng) -> np.ndarray:
    """The stored protocols' near-ties, draw for draw: query x and competitor z uniform, the
    other competitor uniform among the tokens at overlap gap 1 from z's; positions permuted."""
    out = []
    for _ in range(50 * count + 1001):
        if len(out) == count:
            return np.array(out, dtype=np.int64).reshape(count, 3)
        x, z = rng.integers(0, len(gram), size=2)
        cand = np.flatnonzero(np.abs(gram[x] - gram[x, z]) == 1)
        cand = cand[cand != x]
        if x != z and len(cand):
            out.append(np.array([x, z, cand[rng.integers(0, len(cand))]])[rng.permutation(3)])
    raise RuntimeError(f"a pool of {len(gram)} tokens has too few near-ties (overlap gap 1)")


def complement_index(pool: np.ndarray) -> np.ndarray:
    """For every pool token, the index of its complement in the pool, or -1: (P,)."""
    weights = 1 << np.arange(pool.shape[1], dtype=np.int64)
    where = {int(c): i for i, c in enumerate(pool @ weights)}
    return np.array([where.get(int(c), -1) for c in (1 - pool) @ weights], dtype=np.int64)


def _complement_triples(pool: np.ndarray, count: int, rng, meets: bool) -> np.ndarray:
    """(x, x̄, y), y not in {x, x̄}; ``meets``: y also meets both x and x̄ (the decisive
    study's complement test, on which query-independent mixing fails)."""
    comp = complement_index(pool)
    have = np.flatnonzero(comp >= 0)

    def draw(b):
        x = have[rng.integers(0, len(have), size=b)]
        return np.stack([x, comp[x], rng.integers(0, len(comp), size=b)], axis=1)

    def accept(c):
        o = _overlap(pool, c[:, 0], c[:, 2])
        return (c[:, 2] != c[:, 0]) & (c[:, 2] != c[:, 1]) & (
            (o >= 1) & (o <= pool[c[:, 2]].sum(1) - 1) | (not meets))

    return _rejection(draw, accept, count, rng, "complement" if meets else "witness")


def draw_triples(name: str, pool: np.ndarray, count: int, rng, gram) -> np.ndarray:
    """`count` triples over `pool`: uniform; ``gap1`` / ``gap2`` (three distinct tokens, the
    first's two competitors differ in overlap by exactly 1 or 2); ``witness``: mixed (x, x̄,
    y), y not in {x, x̄} (the direct links of Theorem E), and a quarter pure (x, y, y), y != x,
    as the certificate needs; ``complement``; the stored protocols' ``near_tie`` (gap 1, drawn
    one triple at a time, on the pool's Gram matrix `gram`, which only it reads)."""
    if name == "uniform":
        return rng.integers(0, len(pool), size=(count, 3))
    if name == "near_tie":
        return _near_tie_triples(gram, count, rng)
    if name in ("gap1", "gap2"):  # a query x whose competitors differ in overlap by the gap
        def accept(c):
            x, z, w = c.T
            return ((x != z) & (x != w) & (z != w)
                    & (np.abs(_overlap(pool, x, z) - _overlap(pool, x, w)) == int(name[-1])))

        return _rejection(lambda b: rng.integers(0, len(pool), size=(b, 3)), accept, count,
                          rng, f"gap-{name[-1]}")
    if name == "complement":
        return _complement_triples(pool, count, rng, True)
    n_pure = int(round(0.25 * count))
    mixed = _complement_triples(pool, count - n_pure, rng, False)
    x = rng.integers(0, len(pool), size=n_pure)
    y = (x + rng.integers(1, len(pool), size=n_pure)) % len(pool)
    out = np.concatenate([mixed, _shuffle_rows(np.stack([x, y, y], axis=1), rng)])
    return out[rng.permutation(len(out))]


def complement_closed_pool(m: int, pairs: int, seed: int) -> np.ndarray:
    """`pairs` random complementary pairs of width-m tokens, token 2i + 1 the complement of 2i."""
    half = token_pool(m - 1, pairs, seed)  # first bit fixed to 0 picks one token per pair
    x = np.concatenate([np.zeros((pairs, 1), dtype=np.int64), half], axis=1)
    return np.stack([x, 1 - x], axis=1).reshape(-1, m)


def query_gaps(seqs) -> np.ndarray:
    """For token sequences (S, 3, m): each query's |<x, z> - <x, z'>| over its two
    competitors, (S, 3). A sequence is a near-tie when some query's gap is 1."""
    s = check_tokens(seqs, "seqs", 3)
    if s.ndim != 3 or s.shape[1] != 3:
        raise ValueError(f"seqs must have shape (S, 3, m), got {s.shape}")
    return gaps(s)


def gaps(seqs: np.ndarray) -> np.ndarray:
    """:func:`query_gaps` without the checks."""
    g = np.einsum("sim,sjm->sij", seqs, seqs)
    return np.abs(g[:, [0, 1, 2], [1, 0, 0]] - g[:, [0, 1, 2], [2, 2, 1]])


def _data(train_pool, test_pool, parts: dict, tests: dict, train_evals: dict) -> dict:
    """The sequences of one size, as :func:`~.pipeline.e2_data` returns them."""
    train = np.concatenate(list(parts.values()))
    evals = {f"test/{k}": (test_pool, v) for k, v in tests.items()}
    evals.update({f"fit/{k}": (train_pool, v) for k, v in parts.items()})
    evals["fit/all"] = (train_pool, train)
    evals.update({f"train/{k}": (train_pool, v) for k, v in train_evals.items()})
    return {"train": (train_pool, train), "val": {}, "evals": evals,
            "pool_train": len(train_pool), "pool_test": len(test_pool)}


def _counts(n_train: int, train_mix: dict) -> dict:
    """Training sequences per mixture component, in proportion to the weights."""
    total = sum(train_mix.values())
    counts = {k: int(round(n_train * v / total)) for k, v in train_mix.items()}
    counts[next(iter(counts))] += n_train - sum(counts.values())
    return counts


def disjoint_pool_split(m: int, pool_size: int, train_fraction: float, n_train: int,
                        n_test: int, train_mix: dict, tests, seed: int = 0,
                        pools: str = "pairs") -> dict:
    """Disjoint train and test pools (:func:`_data`): ``pools="pairs"`` splits complementary
    pairs (tests also drawn on the train pool); ``"tokens"`` distinct random tokens, seeded as
    the stored protocols were (``near_tie``'s weight is the near-tie share)."""
    if pools == "tokens":
        seeds = [int(s.generate_state(1)[0])
                 for s in np.random.SeedSequence([seed, m, pool_size]).spawn(6)]
        tr_pool, te_pool = split_pool(token_pool(m, pool_size, seeds[0]), train_fraction,
                                      seeds[1])
        n_near = int(round(train_mix.get("near_tie", 0.0) * n_train))
        counts = {"uniform": n_train - n_near, "near_tie": n_near}

        def rng(side, name):  # side 0: train, 1: test
            return np.random.default_rng(seeds[2 + 2 * side + (name == "near_tie")])
    else:
        s_pool, s_split, *sides = np.random.SeedSequence([seed, m, pool_size, 11]).spawn(4)
        pool = complement_closed_pool(m, pool_size // 2, int(s_pool.generate_state(1)[0]))
        n_pairs = pool_size // 2
        order = np.random.default_rng(s_split).permutation(n_pairs)
        k = int(round(train_fraction * n_pairs))
        tr_pool, te_pool = (pool.reshape(n_pairs, 2, m)[np.sort(ids)].reshape(-1, m)
                            for ids in (order[:k], order[k:]))
        counts, gens = _counts(n_train, train_mix), [np.random.default_rng(s) for s in sides]

        def rng(side, name):
            return gens[side]
    g_tr, g_te = tr_pool @ tr_pool.T, te_pool @ te_pool.T
    parts = {d: draw_triples(d, tr_pool, c, rng(0, d), g_tr) for d, c in counts.items() if c}
    test_idx = {d: draw_triples(d, te_pool, n_test, rng(1, d), g_te) for d in tests}
    train_eval = ({} if pools == "tokens" else
                  {d: draw_triples(d, tr_pool, n_test, rng(1, d), g_tr) for d in tests})
    return _data(tr_pool, te_pool, parts, test_idx, train_eval)


def unit_hash(codes: np.ndarray, seed: int) -> np.ndarray:
    """A seeded splitmix64 hash of each integer code, as a float in [0, 1)."""
    with np.errstate(over="ignore"):
        z = codes.astype(np.uint64) + np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) / float(2**53)


def shared_pool_split(pool: np.ndarray, n_train: int, n_test: int, train_mix: dict, tests,
                      seed: int = 0, test_fraction: float = 0.3) -> dict:
    """One pool, each multiset held out with probability `test_fraction` (:func:`_data`): held
    out where its hash is below it, so a sequence's side does not depend on who drew it."""
    size, m = pool.shape
    _, *streams, s_hash = np.random.SeedSequence([seed, m, size, 7]).spawn(4)
    train_rng, test_rng = (np.random.default_rng(s) for s in streams)
    gram, hseed = pool @ pool.T, int(s_hash.generate_state(1)[0])

    def side(name, count, rng, test):  # `count` training or up to `count` distinct test ones
        got = []
        for _ in range(50):
            cand = draw_triples(name, pool, 4 * count, rng, gram)
            got.append(cand[(unit_hash(multiset_codes(cand, size), hseed) < test_fraction)
                            == test])
            if sum(map(len, got)) >= (3 * count if test else count):
                break
        idx = np.concatenate(got)
        if test:
            _, first = np.unique(multiset_codes(idx, size), return_index=True)
            return idx[np.sort(first)][:count]
        if len(idx) < count:
            raise RuntimeError(f"n_train, train_mix: could not draw {count} training {name} "
                               "sequences on the train side of the pool")
        return idx[:count]

    parts = {name: side(name, c, train_rng, False)
             for name, c in _counts(n_train, train_mix).items() if c}
    return _data(pool, pool, parts, {d: side(d, n_test, test_rng, True) for d in tests}, {})


def _check_indices(idx, size: int) -> np.ndarray:
    """`idx` checked as a non-empty (S, 3) int array of indices into a pool of `size` tokens."""
    rows = check_array(idx, "idx", 2)
    if (rows.shape[1] != 3 or not len(rows) or rows.dtype.kind not in "biu"
            or rows.min() < 0 or rows.max() >= size):
        raise ValueError(f"idx must be a non-empty (S, 3) array of integer indices into the "
                         f"{size} pool tokens, got shape {rows.shape}")
    return rows.astype(np.int64)


@dataclass(frozen=True, eq=False)
class PoolBits:
    """A pool's bits (P, m) as a float tensor: the engine passes it through as it batches rows."""

    bits: object  # torch.Tensor


def pool_inputs(pool, idx, device="cpu"):
    """Model inputs for sequences as pool indices (S, 3): (rows (3S, 4) long, PoolBits); row
    3s + i is (query, the three tokens) for position i of sequence s, as `min_ip_targets`."""
    check_device(device)
    pool = check_array(pool, "pool", 2)
    return pool_rows(pool, _check_indices(idx, len(pool)), device)


def pool_rows(pool: np.ndarray, idx: np.ndarray, device) -> tuple:
    """:func:`pool_inputs` without the checks (the units')."""
    rows = np.concatenate([idx[:, :, None], np.broadcast_to(idx[:, None, :], idx.shape + (3,))],
                          axis=-1).reshape(-1, 4)
    bits = torch.as_tensor(pool, dtype=torch.float32, device=device)
    return (torch.as_tensor(rows, dtype=torch.long, device=device), PoolBits(bits))


def sequence_targets(pool: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Min-IP targets (S, 3) of the sequences pool[idx] (0/1 int64 pools: no checks)."""
    return overlaps(pool[idx]).min(axis=-1)


# --------------------------------------------------------------------------- the study's splits

_SHARES = {"A": (0.6, 0.8), "B": (0.7, 0.8)}  # cumulative train, validation shares


def sylvester_code(n: int) -> np.ndarray:
    """The n - 1 non-constant rows of the order-n Sylvester-Hadamard matrix as 0/1 words,
    then their complements: (2n - 2, n); distinct words overlap in n/4, complements in 0."""
    h = np.ones((1, 1), dtype=np.int64)
    while len(h) < n:
        h = np.block([[h, h], [h, -h]])
    rows = (h[1:] > 0).astype(np.int64)
    return np.concatenate([rows, 1 - rows])


def _sides(keys: np.ndarray, arm: str, split: int, salt: int) -> np.ndarray:
    """0 train, 1 validation, 2 test for each key, by a seeded hash of the key."""
    u = unit_hash(keys, int(np.random.SeedSequence([split, salt, 27]).generate_state(1)[0]))
    first, second = _SHARES[arm]
    return (u >= first).astype(np.int64) + (u >= second)


def study_split(arm: str, m: int, split: int, n_train: int, n_eval: int,
                complement: bool = False) -> dict:
    """The converged study's sequences of one size and split, as :func:`_data` lays them out
    ("val": the validation sets). A: the cube {0,1}^m, complementary pairs hashed to train /
    validation / test (60 / 20 / 20), uniform and near-tie ("witness", gap 1) triples drawn
    on each side, and with ``complement`` (the decisive study) complement triples too, drawn
    after them so the others stay the same; B: the Sylvester pool of order m, every multiset
    of three words on one side (70 / 10 / 20); held out: all, and those with a complementary
    pair ("witness")."""
    if arm == "A":
        tokens = all_tokens(m)
        codes = np.arange(2**m, dtype=np.int64)
        side = _sides(np.minimum(codes, codes ^ (2**m - 1)), arm, split, m)
        pools = [tokens[side == k] for k in range(3)]
        plan = [(0, "uniform", n_train), (1, "uniform", n_eval), (1, "gap1", n_eval),
                (2, "uniform", n_eval), (2, "gap1", n_eval)]
        plan += [(1, "complement", n_eval), (2, "complement", n_eval)] if complement else []
        rngs = np.random.SeedSequence([split, m, 1]).spawn(len(plan))
        draw = [(pools[k], draw_triples(name, pools[k], count, np.random.default_rng(rngs[i]),
                                        None)) for i, (k, name, count) in enumerate(plan)]
        names = ("uniform", "witness", "complement")
        return {"train": draw[0], "val": dict(zip(names, draw[1:3] + draw[5:6])),
                "evals": {f"test/{n}": d for n, d in zip(names, draw[3:5] + draw[6:])},
                "pool_train": len(pools[0]), "pool_test": len(pools[2])}
    pool = sylvester_code(m)
    p = len(pool)
    idx = np.array(list(itertools.combinations_with_replacement(range(p), 3)), dtype=np.int64)
    side = _sides(multiset_codes(idx, p), arm, split, m)
    comp = (idx[:, :, None] % (p // 2) == idx[:, None, :] % (p // 2)) & (
        idx[:, :, None] != idx[:, None, :])  # word i's complement is word i + P/2
    pair = comp.any(axis=(1, 2))
    return {"train": (pool, idx[side == 0]), "val": {"uniform": (pool, idx[side == 1])},
            "evals": {"test/uniform": (pool, idx[side == 2]),
                      "test/witness": (pool, idx[(side == 2) & pair])},
            "pool_train": p, "pool_test": p}


# --------------------------------------------------------------------------- explicit heads


def complement_power_rank(m: int, k: int) -> int:
    """Feature rank of the complement-power kernel of degree k on width-m tokens:
    sum_{j <= k} C(m, j) (its multilinear monomials of degree <= k)."""
    m, k = check_int(m, "m", 1, 62), check_int(k, "k", 0, 62)
    return sum(math.comb(m, j) for j in range(min(k, m) + 1))


def complement_power_head_accuracy(pool, idx, k: int) -> Fraction:
    """Exact-sequence accuracy, in integers, of the head alpha(x, z) = (2<x, 1 - z> + 1)^k
    (overlap readout, rank :func:`complement_power_rank`) on the triples ``idx`` of ``pool``."""
    tokens = check_tokens(pool, "pool", 2)
    k = check_int(k, "k", 0, 6)
    if tokens.ndim != 2 or len(tokens) > MAX_POOL:
        raise ValueError(f"pool must be a (P, m) array of 0/1 tokens with P <= {MAX_POOL}, got "
                         f"shape {tokens.shape}")
    rows = _check_indices(idx, len(tokens))
    m = tokens.shape[1]
    if len(tokens) * (2 * m + 1) ** k * 3 * m >= 2**62:
        raise ValueError("k and the width make the integer weights too large for int64")
    gram = tokens @ tokens.T
    weight = (2 * (tokens @ (1 - tokens).T) + 1) ** k
    q, z = rows[:, :, None], rows[:, None, :]  # (S, 3, 1) queries, (S, 1, 3) their tokens
    a = weight[q, z]
    num, den = (a * gram[q, z]).sum(2), a.sum(2)
    # |num/den - t| < 1/2  <=>  |2 num - 2 t den| < den, in integers
    solved = (np.abs(2 * num - 2 * sequence_targets(tokens, rows) * den) < den).all(1)
    return Fraction(int(solved.sum()), len(rows))
