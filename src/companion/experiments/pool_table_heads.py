"""Lookup-table heads over one shared token pool (E2 readings S-code and S-random, chapter 7):
every token is seen in training, so a table per token is a legitimate map, as in E1.

:class:`PoolTableKernelHeads` — M stacked NKA heads, alpha(x, z) = <phi_Q(x), phi_K(z)> with
phi = exp(table) on the first r columns (exactly 0 beyond: masked rank padding).
:class:`PoolTableSoftmaxHeads` — M dense heads, alpha = exp(<q(x), k(z)>), q, k in R^m.
Readout "learned": f(x, z) = <a(x), v(z)> + b(x); "overlap": f(x, z) = <x, z>, so the
attention alone must select the minimum. Forward contract as
:class:`~companion.experiments.mlp_heads.MLPKernelHeads`: inputs (rows (N, 4), PoolBits) from
:func:`~companion.experiments.e2.data.pool_inputs` -> (M, N).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

from companion.checks import check_choice, check_float, check_int_sequence, check_positive_int
from companion.experiments.engine import check_model_size

__all__ = ["READOUTS", "PoolTableKernelHeads", "PoolTableSoftmaxHeads"]

READOUTS = ("learned", "overlap")


def _gather_pairs(matrix, rows):
    """matrix[:, query, key_j] for rows (query, key_0, key_1, key_2): (M, N, 3)."""
    size = matrix.shape[-1]
    flat = (rows[:, :1] * size + rows[:, 1:]).reshape(-1)
    return matrix.reshape(matrix.shape[0], -1).index_select(1, flat).view(
        matrix.shape[0], rows.shape[0], 3)


def _check_readout(readout):
    return check_choice(readout, "readout", READOUTS)


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
        self.ranks = check_int_sequence(ranks, "ranks", 1)
        self.seeds = check_int_sequence(seeds, "seeds", 0)
        if len(self.ranks) != len(self.seeds) or not self.ranks:
            raise ValueError(f"ranks and seeds must be non-empty and of equal length, got "
                             f"{len(self.ranks)} and {len(self.seeds)}")
        self.readout = _check_readout(readout)
        d = check_positive_int(value_dim, "value_dim")
        phi_std = check_float(phi_std, "phi_std", 0, 100, low_open=True)
        m_, p, r = len(self.ranks), self.pool_size, max(self.ranks)
        check_model_size(m_ * p * (2 * r + 2 * d + 1), "pool_size, ranks, seeds and value_dim"
                         " (PoolTableKernelHeads)")
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
        self.seeds = check_int_sequence(seeds, "seeds", 0)
        if not self.seeds:
            raise ValueError("seeds must name at least one model")
        self.readout = _check_readout(readout)
        s_dim = check_positive_int(score_dim, "score_dim")
        d = check_positive_int(value_dim, "value_dim")
        qk_std = check_float(qk_std, "qk_std", 0, 100, low_open=True)
        m_, p = len(self.seeds), self.pool_size
        check_model_size(m_ * p * (2 * s_dim + 2 * d + 1), "pool_size, seeds, score_dim and "
                         "value_dim (PoolTableSoftmaxHeads)")
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
