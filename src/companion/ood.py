"""E2 — out-of-distribution scaling: does a rank-r head generalise Min-IP to unseen tokens?

Tokens of width m are drawn from a seeded pool that is split into *disjoint* train and test
pools; length-3 sequences are built within each pool and every position is a query (three
targets per sequence). Heads map tokens to features with small MLPs of the bits, so a trained
head can be evaluated on tokens it never saw. A sequence counts as solved when all three
rounded outputs equal their integer targets (|y - t| < 1/2): *exact-sequence accuracy*.

Sequences are stored as indices into their pool: a head computes its maps once per pool token
and gathers them per sequence, which keeps a whole sweep cheap.

Models are *stacked*: `MLPKernelHeads` holds M independent NKA heads (every parameter has a
leading model dimension, feature rank padded to the largest rank of the stack and masked), and
`MLPSoftmaxHeads` holds M dense softmax heads (scores in R^m). `run_e2_sweep` trains every
(rank, seed) head of a rank group, and the dense heads, as one tensor program each with
:func:`companion.train.train_batched`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .task import check_positive_int, check_tokens, min_ip_targets, split_pool, token_pool

TEST_DISTRIBUTIONS = ("uniform", "near_tie")
FEATURES = ("exp", "softplus")
ENCODINGS = ("01", "pm1")
READOUTS = ("learned", "overlap")

#: Book quick mode: three widths, r = 1..128, 3 seeds, sized for <= 3 min on 2 cores.
#: (Protocol H of `E2_PROTOCOLS`; the threshold 0.9 was fixed before any sweep was run.)
E2_QUICK: dict = {
    "widths": [8, 10, 12],
    "pool_sizes": [256, 256, 256],
    "train_fraction": 0.7,
    "n_train": 3000,
    "n_test": 1000,
    "near_tie_fraction": 0.5,
    "ranks": [1, 2, 4, 8, 16, 32, 64, 128],
    "rank_groups": [[1, 2, 4, 8, 16], [32, 64, 128]],
    "seeds": [0, 1, 2],
    "hidden": [32],
    "value_dim": 16,
    "feature": "exp",
    "encoding": "01",
    "skip": False,
    "readout": "learned",
    "steps": 1500,
    "lr": 1e-2,
    "final_lr_fraction": 0.02,
    "threshold": 0.9,
    "data_seed": 0,
}

#: Full size (CLI `python -m companion e2`): the widths of the protocol table, bigger pools,
#: more sequences and seeds, wider MLPs, longer training.
E2_FULL: dict = {
    **E2_QUICK,
    "widths": [8, 12, 16],
    "pool_sizes": [256, 1024, 2048],
    "n_train": 8000,
    "n_test": 2000,
    "hidden": [64],
    "seeds": [0, 1, 2, 3, 4],
    "steps": 3000,
}


# --------------------------------------------------------------------------- data


def _check_fraction(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    return float(value)


def sample_index_triples(pool_size: int, count: int, seed: int) -> np.ndarray:
    """`count` length-3 sequences as indices into a pool, uniform with replacement: (count, 3).

    `pool[sample_index_triples(len(pool), count, seed)]` equals
    `companion.task.sample_sequences(pool, 3, count, seed)`.
    """
    check_positive_int(pool_size, "pool_size")
    check_positive_int(count, "count")
    return np.random.default_rng(seed).integers(0, pool_size, size=(count, 3))


def near_tie_triples(pool, count: int, seed: int, gap: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Length-3 sequences with a near-tie: for a designated query x, the two other tokens'
    overlaps with x differ by exactly `gap` (the hardest case for a soft minimum).

    Returns (indices (count, 3) into `pool`, query position (count,)). Tokens are distinct pool
    indices within a sequence; their order is shuffled so the query sits at any position.
    """
    tokens = check_tokens(pool, "pool")
    if tokens.ndim != 2:
        raise ValueError(f"pool must have shape (size, m), got {tokens.shape}")
    check_positive_int(count, "count")
    check_positive_int(gap, "gap")
    size = len(tokens)
    if size < 3:
        raise ValueError(f"pool must hold at least 3 tokens for near-tie triples, got {size}")
    gram = tokens @ tokens.T
    rng = np.random.default_rng(seed)
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
    near-ties) and `n_test` test sequences per test distribution (uniform and near-tie)."""
    check_positive_int(m, "m", upper=62)
    check_positive_int(pool_size, "pool_size")
    if pool_size > 2**m:
        raise ValueError(f"pool_size must be at most 2**m = {2**m} for m = {m}, got {pool_size}")
    train_fraction = _check_fraction(train_fraction, "train_fraction")
    if not 0.0 < train_fraction < 1.0:
        raise ValueError(f"train_fraction must lie strictly in (0, 1), got {train_fraction}")
    near_tie_fraction = _check_fraction(near_tie_fraction, "near_tie_fraction")
    if not 0.0 <= near_tie_fraction <= 1.0:
        raise ValueError(f"near_tie_fraction must lie in [0, 1], got {near_tie_fraction}")
    check_positive_int(n_train, "n_train")
    check_positive_int(n_test, "n_test")
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


def pool_inputs(pool, idx, device="cpu"):
    """Model inputs for sequences given as pool indices (S, 3): a tuple
    (rows (3S, 4) long, PoolBits). Row 3s + i is (query index, the three token indices) for
    position i of sequence s, so the N = 3S inputs line up with `min_ip_targets(...).ravel()`.
    """
    import torch

    idx = np.asarray(idx, dtype=np.int64)
    if idx.ndim != 2 or idx.shape[1] != 3:
        raise ValueError(f"idx must have shape (S, 3), got {idx.shape}")
    rows = np.concatenate([idx[:, :, None], np.broadcast_to(idx[:, None, :], idx.shape + (3,))],
                          axis=-1).reshape(-1, 4)
    bits = torch.as_tensor(np.asarray(pool), dtype=torch.float32, device=device)
    return (torch.as_tensor(rows, dtype=torch.long, device=device), PoolBits(bits))


# --------------------------------------------------------------------------- models


def _model_seed(*parts) -> int:
    return int(np.random.SeedSequence([int(p) for p in parts]).generate_state(1)[0])


def _check_hidden(hidden) -> tuple[int, ...]:
    if isinstance(hidden, (str, bytes)) or not isinstance(hidden, Sequence):
        raise TypeError(f"hidden must be a sequence of layer widths, got {type(hidden).__name__}")
    return tuple(check_positive_int(h, "hidden") for h in hidden)


def _check_seeds(seeds) -> list[int]:
    if isinstance(seeds, (str, bytes)) or not isinstance(seeds, Sequence) or len(seeds) == 0:
        raise TypeError("seeds must be a non-empty sequence of ints")
    for s in seeds:
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 0:
            raise ValueError(f"seeds must be ints >= 0, got {s!r}")
    return [int(s) for s in seeds]


def _torch():
    import torch

    return torch


class _StackedMLP:
    """Helpers shared by the stacked heads: per-model init from a per-model seed."""

    @staticmethod
    def _init_layers(m: int, hidden: tuple[int, ...], out: int, seed: int, out_std: float):
        torch = _torch()
        gen = torch.Generator().manual_seed(seed)
        dims = (m,) + hidden
        layers = []
        for a, b in zip(dims[:-1], dims[1:], strict=False):
            layers.append((torch.randn(a, b, generator=gen) * math.sqrt(2.0 / a),
                           torch.zeros(b)))
        layers.append((torch.randn(dims[-1], out, generator=gen) * out_std / math.sqrt(dims[-1]),
                       torch.zeros(out)))
        return layers


def _build(cls_self, m, hidden, outs: list[list[int]], seeds_per_model, out_std):
    """Stack per-model layers into (M, in, out) parameters; `outs[i]` are block widths that
    model i uses, padded with zeros up to the stack's block widths."""
    torch = _torch()
    nn = torch.nn
    pad_widths = [max(o[j] for o in outs) for j in range(len(outs[0]))]
    per_model = []
    for o, s in zip(outs, seeds_per_model, strict=False):
        layers = _StackedMLP._init_layers(m, hidden, sum(o), s, out_std)
        w, b = layers[-1]
        # split the output layer into blocks and pad each block to the stack's width
        wb, bb, start = [], [], 0
        for width, pad in zip(o, pad_widths, strict=False):
            wb.append(torch.nn.functional.pad(w[:, start:start + width], (0, pad - width)))
            bb.append(torch.nn.functional.pad(b[start:start + width], (0, pad - width)))
            start += width
        layers[-1] = (torch.cat(wb, 1), torch.cat(bb, 0))
        per_model.append(layers)
    cls_self.weights = nn.ParameterList(
        [nn.Parameter(torch.stack([pm[i][0] for pm in per_model])) for i in range(len(hidden) + 1)])
    cls_self.biases = nn.ParameterList(
        [nn.Parameter(torch.stack([pm[i][1] for pm in per_model])) for i in range(len(hidden) + 1)])
    return pad_widths


def _trunk(module, bits):
    """The stacked MLP of `module` on the pool bits: (P, m) -> (M, P, out)."""
    torch = _torch()
    x = 2 * bits - 1 if module.encoding == "pm1" else bits
    x = x.unsqueeze(0).expand(module.weights[0].shape[0], -1, -1)
    h = x
    for w, b in zip(module.weights[:-1], module.biases[:-1], strict=False):
        h = torch.relu(torch.baddbmm(b.unsqueeze(1), h, w))
    out = torch.baddbmm(module.biases[-1].unsqueeze(1), h, module.weights[-1])
    if module.skip is not None:  # affine shortcut from the bits (starts at zero)
        out = out + torch.bmm(x, module.skip)
    return out


def _init_options(module, m, encoding, skip, out_width, readout="learned"):
    torch = _torch()
    if readout not in READOUTS:
        raise ValueError(f"readout must be one of {READOUTS}, got {readout!r}")
    module.readout = readout
    if encoding not in ENCODINGS:
        raise ValueError(f"encoding must be one of {ENCODINGS}, got {encoding!r}")
    if not isinstance(skip, bool):
        raise TypeError(f"skip must be a bool, got {type(skip).__name__}")
    module.encoding = encoding
    num = module.weights[0].shape[0]
    module.skip = (torch.nn.Parameter(torch.zeros(num, m, out_width))
                   if skip and module.hidden else None)


def _pairs(matrix, rows):
    """Gather matrix[:, query, key_j] for every row (query, key_0, key_1, key_2): (M, N, 3)."""
    size = matrix.shape[-1]
    flat = (rows[:, :1] * size + rows[:, 1:]).reshape(-1)
    return matrix.reshape(matrix.shape[0], -1).index_select(1, flat).view(
        matrix.shape[0], rows.shape[0], 3)


def _scores(module, bits, a, v, b, rows):
    """Per-token scores f(x, x_p) (M, N, 3) and readout bias b(x) (M, N). Learned readout:
    f = <a(x), v(z)>. Overlap readout (the constructions' form, nothing learned): v(z) = z,
    a(x) = x, b = 0, so f(x, z) = <x, z> and the head must only learn where to attend."""
    torch = _torch()
    if module.readout == "overlap":
        f = _pairs((bits @ bits.T).unsqueeze(0), rows).expand(a.shape[0], -1, -1)
        return f, torch.zeros_like(f[..., 0])
    return _pairs(torch.bmm(a, v.transpose(1, 2)), rows), b[:, rows[:, 0]]


def _make_modules():
    torch = _torch()
    nn = torch.nn

    class MLPKernelHeads(nn.Module):
        """M stacked NKA heads on Boolean tokens; head i has feature rank `ranks[i]`.

        One MLP per head (m -> hidden -> ...) produces, per token, the query features
        phi_Q (r), key features phi_K (r), values v (d), readout weights a (d) and bias b.
        Features are nonnegative (`exp`, shifted by a constant that cancels in the normalised
        head, or `softplus`); feature columns beyond a head's rank are masked to exactly 0.
        `hidden=()` gives affine maps of the bits (exp-affine features: Performer-style
        positive random features of a softmax kernel lie in this class).
        Forward: inputs from :func:`pool_inputs` (N = 3S rows) -> predictions (M, N).
        """

        def __init__(self, m: int, ranks: Sequence[int], seeds: Sequence[int],
                     hidden: Sequence[int] = (64,), value_dim: int = 16, feature: str = "exp",
                     encoding: str = "01", skip: bool = False, readout: str = "learned"):
            super().__init__()
            self.m = check_positive_int(m, "m")
            if isinstance(ranks, (str, bytes)) or not isinstance(ranks, Sequence) or not ranks:
                raise TypeError("ranks must be a non-empty sequence of ints")
            self.ranks = [check_positive_int(r, "r") for r in ranks]
            self.seeds = _check_seeds(seeds)
            if len(self.seeds) != len(self.ranks):
                raise ValueError(
                    f"seeds must have one entry per rank ({len(self.ranks)}), "
                    f"got {len(self.seeds)}")
            self.hidden = _check_hidden(hidden)
            self.value_dim = check_positive_int(value_dim, "value_dim")
            if feature not in FEATURES:
                raise ValueError(f"feature must be one of {FEATURES}, got {feature!r}")
            self.feature = feature
            d = self.value_dim
            outs = [[r, r, d, d, 1] for r in self.ranks]
            seeds_pm = [_model_seed(s, r, m, 1) for s, r in zip(
                self.seeds, self.ranks, strict=True)]
            self.r_max, *_ = _build(self, m, self.hidden, outs, seeds_pm, out_std=1.0)
            _init_options(self, m, encoding, skip, 2 * self.r_max + 2 * d + 1, readout)
            mask = torch.zeros(len(self.ranks), self.r_max, dtype=torch.bool)
            for i, r in enumerate(self.ranks):
                mask[i, :r] = True
            self.register_buffer("mask", mask)

        @property
        def num_models(self) -> int:
            return len(self.ranks)

        def token_maps(self, bits):
            """Per-token maps (M, P, ·): phi_Q, phi_K (nonnegative, masked), v, a, b."""
            out = _trunk(self, bits)
            r, d = self.r_max, self.value_dim
            pq, pk = out[..., :r], out[..., r:2 * r]
            v, a, b = out[..., 2 * r:2 * r + d], out[..., 2 * r + d:2 * r + 2 * d], out[..., -1]
            mask = self.mask.unsqueeze(1)
            if self.feature == "exp":
                pq = pq.masked_fill(~mask, float("-inf"))
                pk = pk.masked_fill(~mask, float("-inf"))
                # per-query and per-model constant shifts: they cancel in the normalised head
                phi_q = torch.exp(pq - pq.amax(dim=-1, keepdim=True).detach())
                phi_k = torch.exp(pk - pk.amax(dim=(-2, -1), keepdim=True).detach())
            else:
                phi_q = torch.nn.functional.softplus(pq) * mask
                phi_k = torch.nn.functional.softplus(pk) * mask
            return phi_q, phi_k, v, a, b

        def forward(self, inputs):
            rows, pool = inputs
            phi_q, phi_k, v, a, b = self.token_maps(pool.bits)
            # all (query, key) pairs of the pool at once (dense GEMMs), then gather the pairs
            # the rows need: far cheaper than gathering r-vectors per row
            kernel = torch.bmm(phi_q, phi_k.transpose(1, 2))  # (M, P, P)
            alpha = _pairs(kernel, rows)  # (M, N, 3)
            f, bias = _scores(self, pool.bits, a, v, b, rows)
            return (alpha * f).sum(-1) / alpha.sum(-1).clamp_min(1e-30) + bias

    class MLPSoftmaxHeads(nn.Module):
        """M stacked dense softmax heads: alpha(x, z) = exp(<q(x), k(z)>) with q, k in R^m,
        values and readout from the same kind of MLP of the bits. Same forward contract as
        `MLPKernelHeads`."""

        def __init__(self, m: int, seeds: Sequence[int], hidden: Sequence[int] = (64,),
                     value_dim: int = 16, score_std: float = 0.2, encoding: str = "01",
                     skip: bool = False, readout: str = "learned"):
            super().__init__()
            self.m = check_positive_int(m, "m")
            self.seeds = _check_seeds(seeds)
            self.hidden = _check_hidden(hidden)
            self.value_dim = check_positive_int(value_dim, "value_dim")
            d = self.value_dim
            outs = [[m, m, d, d, 1] for _ in self.seeds]
            _build(self, m, self.hidden, outs, [_model_seed(s, 0, m, 2) for s in self.seeds],
                   out_std=score_std)
            _init_options(self, m, encoding, skip, 2 * m + 2 * d + 1, readout)

        @property
        def num_models(self) -> int:
            return len(self.seeds)

        def forward(self, inputs):
            rows, pool = inputs
            out = _trunk(self, pool.bits)
            m, d = self.m, self.value_dim
            q, k = out[..., :m], out[..., m:2 * m]
            v, a, b = out[..., 2 * m:2 * m + d], out[..., 2 * m + d:2 * m + 2 * d], out[..., -1]
            w = torch.softmax(_pairs(torch.bmm(q, k.transpose(1, 2)), rows), dim=-1)
            f, bias = _scores(self, pool.bits, a, v, b, rows)
            return (w * f).sum(-1) + bias

    return MLPKernelHeads, MLPSoftmaxHeads


MLPKernelHeads, MLPSoftmaxHeads = _make_modules()


# --------------------------------------------------------------------------- evaluation


def exact_sequence_accuracy(predictions, targets) -> np.ndarray:
    """Fraction of sequences whose three outputs all lie within 1/2 of their integer targets.

    predictions (M, 3S) or (M, S, 3); targets (S, 3) -> (M,) accuracies.
    """
    pred = np.asarray(predictions.detach().cpu() if hasattr(predictions, "detach") else predictions,
                      dtype=np.float64)
    tgt = np.asarray(targets, dtype=np.float64)
    if tgt.ndim != 2 or tgt.shape[1] != 3:
        raise ValueError(f"targets must have shape (S, 3), got {tgt.shape}")
    pred = pred.reshape(pred.shape[0], tgt.shape[0], 3)
    return (np.abs(pred - tgt[None]) < 0.5).all(axis=-1).mean(axis=-1)


def transition_rank(ranks: Sequence[int], accuracy, threshold: float):
    """First rank whose median accuracy over seeds reaches `threshold`, or None.

    accuracy: (len(ranks), seeds) array-like.
    """
    threshold = _check_fraction(threshold, "threshold")
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must lie in (0, 1], got {threshold}")
    acc = np.asarray(accuracy, dtype=np.float64)
    if acc.ndim != 2 or acc.shape[0] != len(ranks):
        raise ValueError(f"accuracy must have shape (len(ranks), seeds), got {acc.shape}")
    for r, row in zip(ranks, acc, strict=False):
        if np.median(row) >= threshold:
            return int(r)
    return None


# --------------------------------------------------------------------------- sweep


def check_e2_config(config: dict) -> dict:
    """Validate an E2 sweep configuration; returns a normalised copy."""
    if not isinstance(config, dict):
        raise TypeError(f"config must be a dict, got {type(config).__name__}")
    cfg = {**E2_QUICK, **config}
    widths = cfg["widths"]
    if isinstance(widths, (str, bytes)) or not isinstance(widths, Sequence) or not widths:
        raise TypeError("widths must be a non-empty list of ints (token widths m)")
    cfg["widths"] = [check_positive_int(m, "m", upper=62) for m in widths]
    if len(cfg["pool_sizes"]) != len(cfg["widths"]):
        raise ValueError("pool_sizes must have one entry per width")
    cfg["ranks"] = [check_positive_int(r, "r") for r in cfg["ranks"]]
    groups = cfg.get("rank_groups") or [cfg["ranks"]]
    flat = sorted(r for g in groups for r in g)
    if flat != sorted(cfg["ranks"]):
        raise ValueError("rank_groups must partition ranks (every rank exactly once)")
    cfg["rank_groups"] = [[int(r) for r in g] for g in groups]
    cfg["seeds"] = _check_seeds(cfg["seeds"])
    cfg["hidden"] = list(_check_hidden(cfg["hidden"]))
    for key in ("n_train", "n_test", "steps", "value_dim"):
        check_positive_int(cfg[key], key)
    tf = _check_fraction(cfg["train_fraction"], "train_fraction")
    if not 0.0 < tf < 1.0:
        raise ValueError(f"train_fraction must lie strictly in (0, 1), got {tf}")
    if cfg["feature"] not in FEATURES:
        raise ValueError(f"feature must be one of {FEATURES}, got {cfg['feature']!r}")
    if cfg["encoding"] not in ENCODINGS:
        raise ValueError(f"encoding must be one of {ENCODINGS}, got {cfg['encoding']!r}")
    if cfg["readout"] not in READOUTS:
        raise ValueError(f"readout must be one of {READOUTS}, got {cfg['readout']!r}")
    if not isinstance(cfg["skip"], bool):
        raise TypeError(f"skip must be a bool, got {type(cfg['skip']).__name__}")
    for key in ("lr", "final_lr_fraction", "near_tie_fraction"):
        _check_fraction(cfg[key], key)
    transition_rank([1], [[1.0]], cfg["threshold"])  # validates threshold
    return cfg


def build_e2_models(m: int, cfg: dict):
    """The stacked models for one width: one `MLPKernelHeads` per rank group (every rank of the
    group x every seed, padded to the group's largest rank) and one `MLPSoftmaxHeads` (every
    seed), concatenated with `companion.train.ModelStack`. Also returns the (rank or "dense",
    seed) key of every model row."""
    from .train import ModelStack

    seeds = cfg["seeds"]
    parts, keys = [], []
    for group in cfg["rank_groups"]:
        parts.append(MLPKernelHeads(m, [r for r in group for _ in seeds], seeds * len(group),
                                    cfg["hidden"], cfg["value_dim"], cfg["feature"],
                                    cfg["encoding"], cfg["skip"], cfg["readout"]))
        keys += [(r, s) for r in group for s in seeds]
    parts.append(MLPSoftmaxHeads(m, seeds, cfg["hidden"], cfg["value_dim"],
                                 encoding=cfg["encoding"], skip=cfg["skip"],
                                 readout=cfg["readout"]))
    keys += [("dense", s) for s in seeds]
    return ModelStack(parts), keys


def run_e2_sweep(config: dict, device="cpu", progress=False) -> dict:
    """Train, for each width, every (rank, seed) NKA head and every dense head as one tensor
    program; return a JSON-serialisable dict with test exact-sequence accuracies per test
    distribution, train accuracies, transition ranks and dense accuracies per seed."""
    torch = _torch()
    from .train import train_batched

    cfg = check_e2_config(config)
    seeds, ranks = cfg["seeds"], cfg["ranks"]
    out = {"config": cfg, "widths": {}}
    bar = None
    if progress:  # one bar over the widths (a per-step bar would flood notebook output)
        from tqdm import tqdm

        bar = tqdm(total=len(cfg["widths"]), desc="E2 sweep (widths)")
    for m, pool_size in zip(cfg["widths"], cfg["pool_sizes"], strict=False):
        data = make_e2_data(m, pool_size, cfg["train_fraction"], cfg["n_train"], cfg["n_test"],
                            cfg["near_tie_fraction"], cfg["data_seed"])
        train_in = pool_inputs(data.train_pool, data.train_idx, device)
        y_train = data.train_targets()
        targets = torch.as_tensor(y_train.reshape(-1), dtype=torch.float32, device=device)
        model, keys = build_e2_models(m, cfg)
        res = train_batched(model, train_in, targets, steps=cfg["steps"], lr=cfg["lr"],
                            final_lr_fraction=cfg["final_lr_fraction"], seed=cfg["data_seed"],
                            device=device, progress=False)
        model = res.model
        with torch.no_grad():
            tr = exact_sequence_accuracy(model(train_in), y_train)
            te = {name: exact_sequence_accuracy(
                      model(pool_inputs(data.test_pool, data.test_idx[name], device)),
                      data.test_targets(name)) for name in TEST_DISTRIBUTIONS}
        row = {key: i for i, key in enumerate(keys)}

        def table(values, row=row):
            return [[float(values[row[(r, s)]]) for s in seeds] for r in ranks]

        acc = {name: table(te[name]) for name in TEST_DISTRIBUTIONS}
        out["widths"][str(m)] = {
            "pool_train": len(data.train_pool), "pool_test": len(data.test_pool),
            "ranks": ranks,
            "accuracy": acc,
            "train_accuracy": table(tr),
            "train_max_error": table(res.best_max_error.numpy()),
            "dense": {name: [float(te[name][row[("dense", s)]]) for s in seeds]
                      for name in TEST_DISTRIBUTIONS},
            "dense_train_accuracy": [float(tr[row[("dense", s)]]) for s in seeds],
            "transition_r": {name: transition_rank(ranks, acc[name], cfg["threshold"])
                             for name in TEST_DISTRIBUTIONS},
        }
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    return out


# --------------------------------------------------------------------------- summaries, protocols


def summarise_e2(result: dict) -> list[dict]:
    """One row per width: median test accuracy per rank (each test distribution), the
    transition rank, train accuracy and the train-test gap at the largest rank, and the dense
    heads' accuracy (min over seeds) — what the chapter's tables print."""
    rows = []
    for m, e in sorted(result["widths"].items(), key=lambda kv: int(kv[0])):
        ranks = e["ranks"]
        row = {"m": int(m), "ranks": ranks, "pool_train": e["pool_train"],
               "pool_test": e["pool_test"]}
        for name in TEST_DISTRIBUTIONS:
            acc = np.asarray(e["accuracy"][name])
            row[f"median_{name}"] = [float(np.median(a)) for a in acc]
            row[f"transition_{name}"] = e["transition_r"][name]
            row[f"dense_min_{name}"] = float(min(e["dense"][name]))
            med = np.asarray(row[f"median_{name}"])
            row[f"largest_step_{name}"] = float(np.max(np.diff(med))) if len(med) > 1 else 0.0
        train = np.asarray(e["train_accuracy"])
        row["median_train"] = [float(np.median(a)) for a in train]
        row["dense_min_train"] = float(min(e["dense_train_accuracy"]))
        row["dense_exact_seeds"] = {name: sum(a == 1.0 for a in e["dense"][name])
                                    for name in TEST_DISTRIBUTIONS}
        rows.append(row)
    return rows


_SHARED = {"pool_sizes": [256, 256, 256], "n_train": 3000, "hidden": [32], "lr": 0.01,
           "steps": 1500, "near_tie_fraction": 0.5}

#: Every E2 protocol we ran and stored (results/e2_protocols/<name>.json), as changes to
#: `E2_QUICK`; the chapter tabulates all of them, kept or not.
E2_PROTOCOLS: dict = {
    "A_uniform_training": {**_SHARED, "widths": [8, 12, 16], "near_tie_fraction": 0.0},
    "E_mlp_skip_pm1": {"widths": [8, 12, 16], "pool_sizes": [256, 512, 512], "n_train": 3000,
                       "hidden": [64], "lr": 0.03, "steps": 1000, "encoding": "pm1",
                       "skip": True, "near_tie_fraction": 0.5},
    "F_mlp_1500steps": {**_SHARED, "widths": [8, 12, 16]},
    "G_overlap_readout": {**_SHARED, "widths": [8, 12, 16], "readout": "overlap"},
    "H_widths_8_10_12": {**_SHARED, "widths": [8, 10, 12]},
    "I_pools_512": {**_SHARED, "widths": [8, 10, 12], "pool_sizes": [256, 512, 512]},
}


def protocol_path(out_dir, name: str):
    """File of one protocol's results: `out_dir/<name>.json`."""
    from pathlib import Path

    if not isinstance(name, str) or not name.replace("_", "").isalnum():
        raise ValueError(f"name must be a non-empty identifier (letters, digits, _), got {name!r}")
    return Path(out_dir) / f"{name}.json"


def run_e2_protocol(name: str, changes: dict, out_dir="results/e2_protocols", base=None,
                    device="cpu", progress=False, restart=False) -> dict:
    """Run one protocol (`changes` to `base`, default `E2_QUICK`) as a full E2 sweep and store
    it at `out_dir/<name>.json` in the CLI's format (a `companion.sweeps.ResultStore` whose
    unit "sweep" is the `run_e2_sweep` result). An existing file for the same configuration is
    reused, not recomputed."""
    from .sweeps import ResultStore

    if not isinstance(changes, dict):
        raise TypeError(f"changes must be a dict, got {type(changes).__name__}")
    config = check_e2_config({**(E2_QUICK if base is None else base), **changes})
    store = ResultStore(protocol_path(out_dir, name), config, restart=restart)
    if not store.done("sweep"):
        store.put("sweep", run_e2_sweep(config, device=device, progress=progress))
    return store.get("sweep")


def load_e2_protocols(out_dir="results/e2_protocols") -> dict:
    """Every stored protocol result under `out_dir`: {name: run_e2_sweep result}, by name."""
    import json
    from pathlib import Path

    found = {}
    for path in sorted(Path(out_dir).glob("*.json")):
        with open(path) as fh:
            res = json.load(fh)["units"]["sweep"]
        # JSON files store keys sorted as strings ("12" < "8"): restore the config's order
        res["widths"] = {str(m): res["widths"][str(m)] for m in res["config"]["widths"]}
        found[path.stem] = res
    return found
