"""Stacked (batched) attention heads over a finite family of tokens, for experiment E1.

The lower bound quantifies over *arbitrary* maps of the tokens, so E1's strongest test
parameterises every map as a lookup table over the family's T distinct tokens:

* :class:`TableKernelHeads` — M normalised nonnegative kernel-attention (NKA) heads with
  feature ranks r_1..r_M, padded to R = max r with masked (identically zero) features.
  Nonnegative features ``exp`` or ``softplus`` of raw tables; key maps and values may depend
  on the position; readout weights and bias are tables over the query token.
* :class:`TableSoftmaxHeads` — M dense softmax heads, alpha(x, z) = exp(<q(x), k(z)>) with
  q, k tables in R^score_dim (the paper's m-dimensional scores).

Inputs are ``token_ids`` (N, n) int64: the sequence's tokens as indices into the family's
token list. Both classes evaluate the head once per distinct (query token, position, key
token) triple the inputs use — alpha_p(x, z) and f_p(x, z) = <a(x), v_p(z)> — and read them
per sequence (:mod:`companion.experiments.pair_readout`: on the witness family 1,636 triples
instead of all 13,068, and only the 28 query tokens), which is exact and much cheaper than
per-sequence features. :meth:`pair_tables` still gives the full (M, P, T, T) tables for
inspection. Weights are normalised in log space (max-shifted), so ``exp`` features cannot
overflow. Every model is initialised from its own seed, independently of the others
and of the padding, so a model computes the same maths alone or in any stack (in floats:
equal up to rounding, see :mod:`companion.experiments.engine`).

Serves chapter 6 (E1 on the witness family of ``thm-exponential-rank``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

from companion.checks import check_bool, check_choice, check_float, check_int, check_int_sequence
from companion.core.attention import KernelAttentionHead
from companion.experiments.engine import check_model_size
from companion.experiments.pair_readout import (
    make_pair_plan,
    pair_readout,
    pair_values,
    rank_blocks,
    ranked_pair_values,
    shifted_exp,
)

__all__ = ["TableKernelHeads", "TableSoftmaxHeads", "group_ranks", "FEATURES"]

FEATURES = ("exp", "softplus")


def _pair_matmul(left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
    """out[m, x, p, z] = <left[m, x], right[m, p, z]>: one bmm, contiguous (M, T, P, T)
    ("query-major": every (query, position, key) triple of a model is one flat index)."""
    num_models, p, t, r = right.shape
    out = torch.bmm(left, right.reshape(num_models, p * t, r).transpose(1, 2))
    return out.view(num_models, -1, p, t)


class _TableHeads(torch.nn.Module):
    def __init__(self, seeds, num_tokens, length, query_position, d, positional, dtype):
        super().__init__()
        self.seeds = check_int_sequence(seeds, "seeds", 0)
        self.num_tokens = check_int(num_tokens, "num_tokens", 1)
        self.length = check_int(length, "length", 1)
        self.query_position = check_int(query_position, "query_position", 0, self.length - 1)
        self.d = check_int(d, "d", 1)
        self.positional = check_bool(positional, "positional")
        if not isinstance(dtype, torch.dtype) or dtype not in (torch.float32, torch.float64):
            raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype}")
        self.dtype = dtype
        self.num_positions = self.length if positional else 1

    @property
    def num_models(self) -> int:
        return len(self.seeds)

    def _check_ids(self, token_ids: torch.Tensor) -> torch.Tensor:
        if not isinstance(token_ids, torch.Tensor) or token_ids.dtype != torch.long:
            raise TypeError("token_ids must be an int64 torch.Tensor of shape (N, n)")
        if token_ids.ndim != 2 or token_ids.shape[1] != self.length:
            raise ValueError(
                f"token_ids must have shape (N, {self.length}), got {tuple(token_ids.shape)}"
            )
        return token_ids

    def pair_tables(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(log_alpha, scores), each (M, P, T, T) indexed [model, position, query x, key z]:
        log alpha_p(x, z) up to an additive constant per (model, query x) — which cancels in
        the normalisation — and f_p(x,z) = <a(x), v_p(z)>."""
        return (self._log_alpha_x().permute(0, 2, 1, 3), self._scores_x().permute(0, 2, 1, 3))

    def _log_alpha_x(self) -> torch.Tensor:
        """log alpha as a query-major (M, T, P, T) table."""
        raise NotImplementedError

    def forward(self, token_ids: torch.Tensor) -> torch.Tensor:
        ids = self._check_ids(token_ids)
        queries, plan = self._plan_for(ids)
        num_models, pt = self.num_models, self.num_positions * self.num_tokens
        values, shift = self._pair_weights(queries, plan)
        scores = pair_values(self.a.index_select(1, queries), self.v.reshape(num_models, pt, -1),
                             plan)
        return pair_readout(values, scores, self.b, plan, self._mode, shift)

    def _plan_for(self, ids: torch.Tensor):
        """(used query tokens, PairPlan) of these inputs, built once per input tensor: the
        heads are evaluated only at the (query, position, key) triples the inputs use."""
        cached = self.__dict__.get("_plan_cache")
        if cached is not None and cached[0] is ids and cached[1] == ids._version:
            return cached[2]
        n, t = self.length, self.num_tokens
        x = ids[:, self.query_position]
        queries, x_rank = torch.unique(x, sorted=True, return_inverse=True)
        pos = (
            torch.arange(n, device=ids.device)
            if self.positional
            else torch.zeros(n, dtype=torch.long, device=ids.device)
        )
        pt = self.num_positions * t
        # (query, position p, key z) as (row, column) of a (Q, P*T) table of the used queries
        flat = x_rank[:, None] * pt + pos[None, :] * t + ids
        plan = make_pair_plan(flat, len(queries), pt, bias_idx=x, shift_period=pt)
        self.__dict__["_plan_cache"] = (ids, ids._version, (queries, plan))
        return queries, plan

    def gathered_log_alpha(self, flat: torch.Tensor) -> torch.Tensor:
        """log alpha at flat query-major (query, position, key) indices: (M, len(flat))."""
        log_alpha = self._log_alpha_x()
        return log_alpha.reshape(log_alpha.shape[0], -1).index_select(1, flat)

    def _values_tables(self, gens, std_v, std_a):
        M, p, t, d = self.num_models, self.num_positions, self.num_tokens, self.d
        v = torch.zeros(M, p, t, d, dtype=self.dtype)
        a = torch.zeros(M, t, d, dtype=self.dtype)
        for j, g in enumerate(gens):
            v[j] = torch.randn(p, t, d, generator=g, dtype=self.dtype) * std_v
            a[j] = torch.randn(t, d, generator=g, dtype=self.dtype) * std_a
        self.v = torch.nn.Parameter(v)
        self.a = torch.nn.Parameter(a)
        self.b = torch.nn.Parameter(torch.zeros(M, t, dtype=self.dtype))

    def _scores_x(self) -> torch.Tensor:
        return _pair_matmul(self.a, self.v)


class TableKernelHeads(_TableHeads):
    """M table-parameterised NKA heads of feature ranks ``ranks`` (one per seed in ``seeds``).

    Raw tables q (M, T, R), k (M, P, T, R) with R = ``pad_to`` or max(ranks); features
    phi = feature(raw) on the first r_j columns of model j and exactly 0 on the rest (masked:
    the padded columns get no gradient and never change). Init: raw tables and values
    N(0, phi_std²), readout N(0, 1/d), bias 0, each model from ``torch.Generator`` seeded by
    its seed.
    """

    def __init__(
        self,
        ranks: Sequence[int],
        seeds: Sequence[int],
        num_tokens: int,
        length: int = 3,
        *,
        query_position: int = 0,
        d: int = 16,
        feature: str = "exp",
        positional: bool = True,
        pad_to: int | None = None,
        phi_std: float = 1.0,
        value_std: float = 1.0,
        dtype: torch.dtype = torch.float32,
    ):
        super().__init__(seeds, num_tokens, length, query_position, d, positional, dtype)
        phi_std, value_std = (check_float(phi_std, "phi_std", 0),
                              check_float(value_std, "value_std", 0))
        self.ranks = check_int_sequence(ranks, "ranks", 1)
        if len(self.ranks) != len(self.seeds):
            raise ValueError(
                f"ranks and seeds must have the same length, got {len(self.ranks)} "
                f"and {len(self.seeds)}"
            )
        self.feature = check_choice(feature, "feature", FEATURES)
        r_max = max(self.ranks)
        self.pad = r_max if pad_to is None else check_int(pad_to, "pad_to", r_max)
        M, p, t, r = self.num_models, self.num_positions, self.num_tokens, self.pad
        check_model_size(M * t * (p + 1) * (r + self.d + 1),
                         "seeds/ranks x num_tokens x length x (rank + d)")
        gens = [torch.Generator().manual_seed(s) for s in self.seeds]
        q = torch.zeros(M, t, r, dtype=dtype)
        k = torch.zeros(M, p, t, r, dtype=dtype)
        for j, (g, rj) in enumerate(zip(gens, self.ranks)):
            q[j, :, :rj] = torch.randn(t, rj, generator=g, dtype=dtype) * phi_std
            k[j, :, :, :rj] = torch.randn(p, t, rj, generator=g, dtype=dtype) * phi_std
        self.q = torch.nn.Parameter(q)
        self.k = torch.nn.Parameter(k)
        self._values_tables(gens, value_std, 1.0 / math.sqrt(d))
        mask = torch.arange(r)[None, :] < torch.tensor(self.ranks)[:, None]
        self.register_buffer("mask", mask)
        self._blocks = rank_blocks(self.ranks)  # runs of equal rank (see ranked_pair_values)
        # additive mask: 0 on a model's own columns, -inf on its padding (exp(-inf) = 0)
        mask_add = torch.zeros(M, r, dtype=dtype).masked_fill(~mask, -math.inf)
        self.register_buffer("mask_add", mask_add)

    def features(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Nonnegative feature tables phi_Q (M, T, R) and phi_K (M, P, T, R); masked columns 0."""
        mq, mk = self.mask[:, None, :], self.mask[:, None, None, :]
        if self.feature == "exp":
            q, k = self._masked_raw()
            return torch.exp(q), torch.exp(k)
        f = torch.nn.functional.softplus
        return f(self.q) * mq, f(self.k) * mk

    def _masked_raw(self):
        return self.q + self.mask_add[:, None, :], self.k + self.mask_add[:, None, None, :]

    _mode = "log_kernel"

    def _pair_weights(self, queries, plan):
        """Kernel values (M, U) at the plan's pairs and their log-shift (M, U) or None."""
        num_models, pt = self.num_models, self.num_positions * self.num_tokens
        if self.feature == "exp":
            q = self.q.index_select(1, queries)
            # max over the model's own columns; cancels per query (q), shifts log alpha (k)
            q_shift = (q.detach() + self.mask_add[:, None, :]).amax(-1, keepdim=True)
            k_shift = (self.k.detach() + self.mask_add[:, None, None, :]).amax(-1)
            mask = self.mask.to(q.dtype)
            phi_q = shifted_exp(q, q_shift, mask[:, None, :])
            phi_k = shifted_exp(self.k, k_shift.unsqueeze(-1), mask[:, None, None, :])
            values = ranked_pair_values(phi_q, phi_k.reshape(num_models, pt, -1), plan,
                                        self._blocks)
            return values, k_shift.reshape(num_models, pt).index_select(1, plan.shift_idx)
        phi_q, phi_k = self.features()
        phi_q = phi_q.index_select(1, queries)
        return ranked_pair_values(phi_q, phi_k.reshape(num_models, pt, -1), plan,
                                  self._blocks), None

    def _kernel(self):
        """kern (M, T, P, T) query-major and log-shift (M, P, T) with alpha = kern * exp(shift),
        up to a factor per (model, query) that cancels in the normalisation."""
        if self.feature == "exp":
            q, k = self._masked_raw()
            q_shift = q.detach().amax(-1, keepdim=True)  # (M, T, 1): cancels per query
            k_shift = k.detach().amax(-1, keepdim=True)  # (M, P, T, 1)
            kern = _pair_matmul(torch.exp(q - q_shift), torch.exp(k - k_shift))
            return kern, k_shift.squeeze(-1)
        phi_q, phi_k = self.features()
        return _pair_matmul(phi_q, phi_k), None

    def gathered_log_alpha(self, flat):
        kern, shift = self._kernel()
        M = kern.shape[0]
        la = torch.log(kern.reshape(M, -1).index_select(1, flat).clamp_min(1e-30))
        if shift is not None:  # shift depends on (position, key): flat index mod P*T
            la = la + shift.reshape(M, -1).index_select(1, flat % shift[0].numel())
        return la

    def _log_alpha_x(self):
        kern, shift = self._kernel()
        log_alpha = torch.log(kern.clamp_min(1e-30))
        return log_alpha if shift is None else log_alpha + shift[:, None]

    def to_kernel_head(self, j: int, tokens):
        """Model j as a :class:`companion.core.attention.KernelAttentionHead` on the 0/1 tokens
        ``tokens`` (T, m) its tables index (float64 numpy maps), so the package's reference
        evaluators and the witness certificate tools can inspect a trained head."""
        j = check_int(j, "j", 0, self.num_models - 1)
        tokens = np.asarray(tokens, dtype=np.int64)
        if tokens.ndim != 2 or len(tokens) != self.num_tokens:
            raise ValueError(f"tokens must have shape ({self.num_tokens}, m), got {tokens.shape}")
        weights = 2 ** np.arange(tokens.shape[1], dtype=object)
        code = {int(np.dot(t.astype(object), weights)): i for i, t in enumerate(tokens)}
        r = self.ranks[j]
        with torch.no_grad():
            qr, kr = self.q[j, :, :r].double(), self.k[j, :, :, :r].double()
            if self.feature == "exp":  # shifted by constants, which cancel in the normalisation
                q, k = torch.exp(qr - qr.max()), torch.exp(kr - kr.max())
            else:
                q, k = torch.nn.functional.softplus(qr), torch.nn.functional.softplus(kr)
            q, k = q.numpy(), k.numpy()
            v, a, b = (t.detach().double().numpy() for t in (self.v[j], self.a[j], self.b[j]))
        pos = (lambda p: p) if self.positional else (lambda p: 0)

        def ids(z):
            z = np.asarray(z, dtype=np.int64)
            flat = z.reshape(-1, z.shape[-1]).astype(object) @ weights
            return np.array([code[int(c)] for c in flat], dtype=np.int64).reshape(z.shape[:-1])

        return KernelAttentionHead(
            rank=r,
            query_features=lambda x: q[ids(x)],
            key_features=lambda z, p: k[pos(p)][ids(z)],
            values=lambda z, p: v[pos(p)][ids(z)],
            readout_weights=lambda x: a[ids(x)],
            readout_bias=lambda x: b[ids(x)],
        )


class TableSoftmaxHeads(_TableHeads):
    """M dense softmax heads: alpha_p(x, z) = exp(<q(x), k_p(z)>), q, k tables in R^score_dim.

    Init: q, k ~ N(0, qk_std²) — a small std (0.2) keeps the initial logits near 0 so that
    gradients flow through every position; std 1 starts with saturated, nearly one-hot
    weights (see the chapter). Values N(0, 1), readout N(0, 1/d), bias 0.
    """

    def __init__(
        self,
        seeds: Sequence[int],
        num_tokens: int,
        length: int = 3,
        *,
        score_dim: int = 24,
        query_position: int = 0,
        d: int = 16,
        positional: bool = False,
        qk_std: float = 0.2,
        value_std: float = 1.0,
        dtype: torch.dtype = torch.float32,
    ):
        super().__init__(seeds, num_tokens, length, query_position, d, positional, dtype)
        qk_std, value_std = (check_float(qk_std, "qk_std", 0),
                             check_float(value_std, "value_std", 0))
        self.score_dim = check_int(score_dim, "score_dim", 1)
        M, p, t, s = self.num_models, self.num_positions, self.num_tokens, self.score_dim
        check_model_size(M * t * (p + 1) * (s + self.d + 1),
                         "seeds x num_tokens x length x (score_dim + d)")
        gens = [torch.Generator().manual_seed(sd) for sd in self.seeds]
        q = torch.zeros(M, t, s, dtype=dtype)
        k = torch.zeros(M, p, t, s, dtype=dtype)
        for j, g in enumerate(gens):
            q[j] = torch.randn(t, s, generator=g, dtype=dtype) * qk_std
            k[j] = torch.randn(p, t, s, generator=g, dtype=dtype) * qk_std
        self.q = torch.nn.Parameter(q)
        self.k = torch.nn.Parameter(k)
        self._values_tables(gens, value_std, 1.0 / math.sqrt(d))

    _mode = "logits"

    def _log_alpha_x(self):
        return _pair_matmul(self.q, self.k)

    def _pair_weights(self, queries, plan):
        k = self.k.reshape(self.num_models, self.num_positions * self.num_tokens, -1)
        return pair_values(self.q.index_select(1, queries), k, plan), None


def group_ranks(ranks: Sequence[int], overhead: float = 48.0) -> list[list[int]]:
    """Partition distinct ranks into contiguous groups, each padded to its largest rank.

    Minimises sum over groups of (models in group × padded rank) + overhead × groups — padded
    feature columns cost compute, every group costs a fixed per-step overhead (kernel launches,
    small-tensor bookkeeping). Exact dynamic programme over the sorted distinct ranks.
    """
    rs = sorted(set(check_int_sequence(ranks, "ranks", 1)))
    if isinstance(overhead, bool) or not isinstance(overhead, (int, float)) or not overhead >= 0:
        raise ValueError(f"overhead must be a real number >= 0, got {overhead!r}")
    n = len(rs)
    best = [0.0] + [math.inf] * n
    cut = [0] * (n + 1)
    for j in range(1, n + 1):
        for i in range(j):
            cost = best[i] + (j - i) * rs[j - 1] + overhead
            if cost < best[j]:
                best[j], cut[j] = cost, i
    groups, j = [], n
    while j > 0:
        groups.append(rs[cut[j] : j])
        j = cut[j]
    return groups[::-1]
