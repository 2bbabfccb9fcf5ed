"""Stacked table heads for the open questions: signed kernels and several heads.

Two model classes beside :class:`companion.heads.TableKernelHeads` (E1's NKA heads), with
the same conventions — every map is a lookup table over the family's T distinct tokens, M
independent models share one tensor program, every parameter has a leading model dimension,
ranks are padded with masked (identically zero) feature columns — so
:func:`companion.train.train_batched` trains them unchanged:

* :class:`TableSignedHeads` — one normalised head whose features may take any sign
  (``gexp``: phi = gain * exp(u), gains free; ``raw``: phi = the table), so
  alpha_p(x, z) = <phi_Q(x), phi_K^(p)(z)> may be negative. Output
  y = sum_p alpha_p f_p / sum_p alpha_p + b(x): the *nonzero-denominator* convention (the
  head counts on a family when every denominator there is nonzero; see the chapter).
  Initialised at exp(N(0, phi_std^2)) (gains 1) — the same features as the NKA head of the
  same seed, so both classes start from the same function and differ only in what
  training may do.
* :class:`TableMultiHeads` — H NKA heads (exp features) of rank r each, combined by a
  query-dependent affine readout over their outputs:
  y = sum_h <a_h(x), o_h> + b(x), o_h = sum_p w^h_p v^h_p(x_p). Models may differ in r
  (padded columns) and in H (padded heads, whose contribution is masked to zero).

:func:`exact_table_outputs` re-evaluates exported tables in exact rational arithmetic
(every float64 is a dyadic rational), so "solves" can be re-verified without rounding.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np
import torch

SIGNED_PARAMETRISATIONS = ("gexp", "raw")
#: How signed features start: 'positive' (the NKA head of the same seed), 'columns'
#: (gexp: half the columns negated, alpha = K_plus - K_minus), 'symmetric' (raw: N(0, std^2)).
SIGN_INITS = ("positive", "columns", "symmetric")

__all__ = [
    "SIGNED_PARAMETRISATIONS",
    "TableSignedHeads",
    "TableMultiHeads",
    "HeadTables",
    "exact_table_outputs",
    "exact_table_max_error",
]


def _check_int(value, name: str, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < low or (high is not None and value > high):
        rng = f"[{low}, {high}]" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be an int in {rng}, got {value}")
    return int(value)


def _check_ints(values, name: str, low: int) -> list[int]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or len(values) == 0:
        raise TypeError(f"{name} must be a non-empty sequence of ints")
    return [_check_int(v, f"{name}[{i}]", low) for i, v in enumerate(values)]


def _pair_matmul(left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
    """out[m, x, p, z] = <left[m, x], right[m, p, z]> as a contiguous (M, T, P, T) table."""
    m, p, t, r = right.shape
    return torch.bmm(left, right.reshape(m, p * t, r).transpose(1, 2)).view(m, -1, p, t)


class _StackedTables(torch.nn.Module):
    """Shared bookkeeping: seeds, token count, length, query position, value width."""

    def __init__(self, seeds, num_tokens, length, query_position, d, positional, dtype):
        super().__init__()
        self.seeds = _check_ints(seeds, "seeds", 0)
        self.num_tokens = _check_int(num_tokens, "num_tokens", 1)
        self.length = _check_int(length, "length", 1)
        self.query_position = _check_int(query_position, "query_position", 0, self.length - 1)
        self.d = _check_int(d, "d", 1)
        if not isinstance(positional, bool):
            raise TypeError(f"positional must be a bool, got {type(positional).__name__}")
        self.positional = positional
        if dtype not in (torch.float32, torch.float64):
            raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype}")
        self.dtype = dtype
        self.num_positions = self.length if positional else 1

    @property
    def num_models(self) -> int:
        return len(self.seeds)

    def _flat_index(self, token_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Query ids (N,) and flat query-major (query, position, key) indices (N * n,)."""
        if not isinstance(token_ids, torch.Tensor) or token_ids.dtype != torch.long:
            raise TypeError("token_ids must be an int64 torch.Tensor of shape (N, n)")
        if token_ids.ndim != 2 or token_ids.shape[1] != self.length:
            raise ValueError(
                f"token_ids must have shape (N, {self.length}), got {tuple(token_ids.shape)}"
            )
        if len(token_ids) and (int(token_ids.min()) < 0 or int(token_ids.max()) >= self.num_tokens):
            raise ValueError(f"token_ids must lie in [0, {self.num_tokens - 1}]")
        n, t = self.length, self.num_tokens
        x = token_ids[:, self.query_position]
        pos = (torch.arange(n) if self.positional else torch.zeros(n, dtype=torch.long)).to(
            token_ids.device)
        flat = (x[:, None] * (self.num_positions * t) + pos[None, :] * t + token_ids).reshape(-1)
        return x, flat

    def _check_tokens(self, tokens) -> np.ndarray:
        tokens = np.asarray(tokens)
        if tokens.ndim != 2 or len(tokens) != self.num_tokens:
            raise ValueError(f"tokens must have shape ({self.num_tokens}, m), got {tokens.shape}")
        return tokens


class TableSignedHeads(_StackedTables):
    """M signed normalised heads of feature ranks ``ranks``; features of any sign.

    Tables q (M, T, R), k (M, P, T, R) with R = ``pad_to`` or max(ranks); model j uses its
    first r_j columns, the rest are multiplied by a 0/1 mask (no gradient, never change).
    ``gexp`` (default): phi = (1 + gain_scale * g) * exp(table), g (same shapes) starting
    at 0 — the NKA head's parametrisation with a free sign and scale per entry (gain_scale
    sets how fast the gains move under Adam; 0.1 trains about as well as the NKA heads);
    ``raw``: phi = table, started at exp(draw). Values v (M, P, T, d), readout a (M, T, d),
    bias b (M, T). Init: the draws of :class:`companion.heads.TableKernelHeads` in the same
    order (tables N(0, phi_std^2), values N(0, value_std^2), readout N(0, 1/d), bias 0), so at
    initialisation model j computes what the NKA head of the same seed and rank computes.

    Forward: y = sum_p alpha_p f_p / sum_p alpha_p + b(x) with alpha_p = <q(x), k_p(x_p)>
    and f_p = <a(x), v_p(x_p)>. A denominator that is exactly 0 is replaced by ``tiny`` (the
    output is then huge and the loss pushes away from the pole); exact re-verification
    (:func:`exact_table_outputs`) rejects any head with a vanishing denominator.
    """

    tiny = 1e-12

    def __init__(
        self,
        ranks: Sequence[int],
        seeds: Sequence[int],
        num_tokens: int,
        length: int = 3,
        *,
        query_position: int = 0,
        d: int = 16,
        positional: bool = True,
        pad_to: int | None = None,
        phi_std: float = 1.0,
        value_std: float = 1.0,
        parametrisation: str = "gexp",
        gain_scale: float = 0.1,
        sign_init: str = "positive",
        dtype: torch.dtype = torch.float32,
    ):
        super().__init__(seeds, num_tokens, length, query_position, d, positional, dtype)
        if parametrisation not in SIGNED_PARAMETRISATIONS:
            raise ValueError(f"parametrisation must be one of {SIGNED_PARAMETRISATIONS}, "
                             f"got {parametrisation!r}")
        self.parametrisation = parametrisation
        if isinstance(gain_scale, bool) or not isinstance(gain_scale, (int, float)) or not (
                0 < gain_scale <= 100):
            raise ValueError(f"gain_scale must be a number in (0, 100], got {gain_scale!r}")
        self.gain_scale = float(gain_scale)
        if sign_init not in SIGN_INITS:
            raise ValueError(f"sign_init must be one of {SIGN_INITS}, got {sign_init!r}")
        if sign_init == "symmetric" and parametrisation != "raw":
            raise ValueError("sign_init='symmetric' needs parametrisation='raw'")
        if sign_init == "columns" and parametrisation != "gexp":
            raise ValueError("sign_init='columns' needs parametrisation='gexp'")
        self.sign_init = sign_init
        self.ranks = _check_ints(ranks, "ranks", 1)
        if len(self.ranks) != len(self.seeds):
            raise ValueError(f"ranks and seeds must have the same length, got "
                             f"{len(self.ranks)} and {len(self.seeds)}")
        r_max = max(self.ranks)
        self.pad = r_max if pad_to is None else _check_int(pad_to, "pad_to", r_max)
        m, p, t, r = self.num_models, self.num_positions, self.num_tokens, self.pad
        q = torch.zeros(m, t, r, dtype=dtype)
        k = torch.zeros(m, p, t, r, dtype=dtype)
        v = torch.zeros(m, p, t, d, dtype=dtype)
        a = torch.zeros(m, t, d, dtype=dtype)
        for j, (seed, rj) in enumerate(zip(self.seeds, self.ranks)):
            g = torch.Generator().manual_seed(seed)
            q[j, :, :rj] = torch.randn(t, rj, generator=g, dtype=dtype) * phi_std
            k[j, :, :, :rj] = torch.randn(p, t, rj, generator=g, dtype=dtype) * phi_std
            v[j] = torch.randn(p, t, d, generator=g, dtype=dtype) * value_std
            a[j] = torch.randn(t, d, generator=g, dtype=dtype) / math.sqrt(d)
        mask = (torch.arange(r)[None, :] < torch.tensor(self.ranks)[:, None]).to(dtype)
        self.register_buffer("mask", mask)
        if parametrisation == "raw":  # phi = the table itself
            if sign_init == "positive":  # started at exp(draw), the NKA head's features
                q, k = torch.exp(q) * mask[:, None, :], torch.exp(k) * mask[:, None, None, :]
        else:  # phi = gain * exp(u), gain = 1 + gain_scale * g with g starting at 0
            q_gain = torch.zeros(m, t, r, dtype=dtype)
            if sign_init == "columns":  # the upper half of a model's columns starts at
                for j, rj in enumerate(self.ranks):  # gain -1: alpha = K_plus - K_minus
                    q_gain[j, :, (rj + 1) // 2:rj] = -2.0 / self.gain_scale
            self.q_gain = torch.nn.Parameter(q_gain)
            self.k_gain = torch.nn.Parameter(torch.zeros(m, p, t, r, dtype=dtype))
        self.q, self.k = torch.nn.Parameter(q), torch.nn.Parameter(k)
        self.v, self.a = torch.nn.Parameter(v), torch.nn.Parameter(a)
        self.b = torch.nn.Parameter(torch.zeros(m, t, dtype=dtype))

    def features(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Feature tables phi_Q (M, T, R) and phi_K (M, P, T, R), any sign, padding 0."""
        mq, mk = self.mask[:, None, :], self.mask[:, None, None, :]
        if self.parametrisation == "raw":
            return self.q * mq, self.k * mk
        gq, gk = self._gains()
        return gq * torch.exp(self.q) * mq, gk * torch.exp(self.k) * mk

    def _gains(self):
        return 1 + self.gain_scale * self.q_gain, 1 + self.gain_scale * self.k_gain

    def _kernel(self):
        """kern (M, T, P, T) query-major and a log-scale (M, P, T) per (position, key):
        alpha = kern * exp(scale), up to a positive factor per (model, query) that cancels.
        (gexp: exponents are max-shifted per row, so exp never overflows.)"""
        if self.parametrisation == "raw":
            phi_q, phi_k = self.features()
            return _pair_matmul(phi_q, phi_k), None
        mq, mk = self.mask[:, None, :], self.mask[:, None, None, :]
        q_shift = self.q.detach().amax(-1, keepdim=True)
        k_shift = self.k.detach().amax(-1, keepdim=True)
        gq, gk = self._gains()
        phi_q = gq * torch.exp(self.q - q_shift) * mq
        phi_k = gk * torch.exp(self.k - k_shift) * mk
        return _pair_matmul(phi_q, phi_k), k_shift.squeeze(-1)

    def _gathered_alpha(self, flat: torch.Tensor, rows: int) -> torch.Tensor:
        """alpha at the flat (query, position, key) indices, rescaled per row: (M, N, n)."""
        kern, scale = self._kernel()
        m, n = kern.shape[0], self.length
        alpha = kern.reshape(m, -1).index_select(1, flat).view(m, rows, n)
        if scale is None:
            return alpha
        sc = scale.reshape(m, -1).index_select(1, flat % scale[0].numel()).view(m, rows, n)
        return alpha * torch.exp(sc - sc.amax(-1, keepdim=True))

    def pair_tables(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(alpha, scores), each (M, P, T, T) indexed [model, position, query x, key z]."""
        phi_q, phi_k = self.features()
        alpha = _pair_matmul(phi_q, phi_k).permute(0, 2, 1, 3)
        scores = _pair_matmul(self.a, self.v).permute(0, 2, 1, 3)
        return alpha, scores

    def denominators(self, token_ids: torch.Tensor) -> torch.Tensor:
        """sum_p alpha_p on every input, up to a positive factor per input: (M, N)."""
        x, flat = self._flat_index(token_ids)
        return self._gathered_alpha(flat, len(x)).sum(-1)

    def forward(self, token_ids: torch.Tensor) -> torch.Tensor:
        x, flat = self._flat_index(token_ids)
        alpha = self._gathered_alpha(flat, len(x))
        m, n = alpha.shape[0], self.length
        sc = _pair_matmul(self.a, self.v).reshape(m, -1).index_select(1, flat).view(m, -1, n)
        den = alpha.sum(-1)
        den = torch.where(den == 0, torch.full_like(den, self.tiny), den)
        return (alpha * sc).sum(-1) / den + self.b.index_select(1, x)

    def export(self, j: int) -> HeadTables:
        """Model j's tables in float64 numpy (the head the exact verifier checks)."""
        j = _check_int(j, "j", 0, self.num_models - 1)
        r = self.ranks[j]
        with torch.no_grad():
            if self.parametrisation == "raw":
                phi_q, phi_k = self.q[j, :, :r].double(), self.k[j, :, :, :r].double()
            else:  # constant shifts cancel in the normalisation
                qu, ku = self.q[j, :, :r].double(), self.k[j, :, :, :r].double()
                gq = 1 + self.gain_scale * self.q_gain[j, :, :r].double()
                gk = 1 + self.gain_scale * self.k_gain[j, :, :, :r].double()
                phi_q = gq * torch.exp(qu - qu.max())
                phi_k = gk * torch.exp(ku - ku.max())
            return HeadTables(
                heads=((phi_q.numpy(), phi_k.numpy(),
                        self.v[j].double().numpy(), self.a[j].double().numpy()),),
                bias=self.b[j].double().numpy(), positional=self.positional,
                query_position=self.query_position)


class TableMultiHeads(_StackedTables):
    """M models, model j = ``heads[j]`` NKA heads of feature rank ``ranks[j]`` each.

    Raw tables q (M, H, T, R), k (M, H, P, T, R) with H = max heads, R = max rank; features
    exp(raw) on a model's own heads and columns, exactly 0 elsewhere. Per head: values
    v (M, H, P, T, d), readout a (M, H, T, d); one bias b (M, T) per model. Output
    y = sum_h <a_h(x), o_h> + b(x), each o_h a normalised convex combination of its values
    (log-space, max-shifted, as in TableKernelHeads). Init per model from its seed: for each
    head q, k ~ N(0, phi_std^2) (own columns), then for each head v ~ N(0, value_std^2),
    a ~ N(0, 1/(d H)); with H = 1 these are exactly TableKernelHeads' draws.
    """

    def __init__(
        self,
        heads: Sequence[int],
        ranks: Sequence[int],
        seeds: Sequence[int],
        num_tokens: int,
        length: int = 3,
        *,
        query_position: int = 0,
        d: int = 16,
        positional: bool = True,
        pad_heads: int | None = None,
        pad_to: int | None = None,
        phi_std: float = 1.0,
        value_std: float = 1.0,
        dtype: torch.dtype = torch.float32,
    ):
        super().__init__(seeds, num_tokens, length, query_position, d, positional, dtype)
        self.heads = _check_ints(heads, "heads", 1)
        self.ranks = _check_ints(ranks, "ranks", 1)
        if not len(self.heads) == len(self.ranks) == len(self.seeds):
            raise ValueError(f"heads, ranks and seeds must have the same length, got "
                             f"{len(self.heads)}, {len(self.ranks)} and {len(self.seeds)}")
        h_max, r_max = max(self.heads), max(self.ranks)
        self.pad_heads = h_max if pad_heads is None else _check_int(pad_heads, "pad_heads", h_max)
        self.pad = r_max if pad_to is None else _check_int(pad_to, "pad_to", r_max)
        m, hh, p, t, r = self.num_models, self.pad_heads, self.num_positions, self.num_tokens, \
            self.pad
        q = torch.zeros(m, hh, t, r, dtype=dtype)
        k = torch.zeros(m, hh, p, t, r, dtype=dtype)
        v = torch.zeros(m, hh, p, t, d, dtype=dtype)
        a = torch.zeros(m, hh, t, d, dtype=dtype)
        for j, (seed, hj, rj) in enumerate(zip(self.seeds, self.heads, self.ranks)):
            g = torch.Generator().manual_seed(seed)
            for h in range(hj):
                q[j, h, :, :rj] = torch.randn(t, rj, generator=g, dtype=dtype) * phi_std
                k[j, h, :, :, :rj] = torch.randn(p, t, rj, generator=g, dtype=dtype) * phi_std
            for h in range(hj):
                v[j, h] = torch.randn(p, t, d, generator=g, dtype=dtype) * value_std
                a[j, h] = torch.randn(t, d, generator=g, dtype=dtype) / math.sqrt(d * hj)
        self.q, self.k = torch.nn.Parameter(q), torch.nn.Parameter(k)
        self.v, self.a = torch.nn.Parameter(v), torch.nn.Parameter(a)
        self.b = torch.nn.Parameter(torch.zeros(m, t, dtype=dtype))
        col = torch.arange(r)[None, :] < torch.tensor(self.ranks)[:, None]        # (M, R)
        head = torch.arange(hh)[None, :] < torch.tensor(self.heads)[:, None]      # (M, H)
        self.register_buffer("head_mask", head.to(dtype))
        # additive mask on the raw tables: 0 on a model's own columns, -inf on its padded
        # columns (exp(-inf) = 0). Padded heads keep finite (all-zero, never trained) tables
        # so their normalisation stays defined; head_mask removes their output.
        self.register_buffer("mask_add", torch.zeros(m, hh, r, dtype=dtype).masked_fill(
            ~col[:, None, :].expand(m, hh, r), -math.inf))

    def _kernel(self):
        """kern (M*H, T, P, T) and log-shift (M*H, P, T): alpha = kern * exp(shift) up to a
        factor per (model, head, query) that cancels in that head's normalisation."""
        m, hh, p, t, r = self.num_models, self.pad_heads, self.num_positions, self.num_tokens, \
            self.pad
        q = (self.q + self.mask_add[:, :, None, :]).reshape(m * hh, t, r)
        k = (self.k + self.mask_add[:, :, None, None, :]).reshape(m * hh, p, t, r)
        q_shift = q.detach().amax(-1, keepdim=True)
        k_shift = k.detach().amax(-1, keepdim=True)
        kern = _pair_matmul(torch.exp(q - q_shift), torch.exp(k - k_shift))
        return kern, k_shift.squeeze(-1)

    def head_outputs(self, token_ids: torch.Tensor) -> torch.Tensor:
        """<a_h(x), o_h> for every head: (M, H, N); padded heads give 0."""
        x, flat = self._flat_index(token_ids)
        m, hh, n = self.num_models, self.pad_heads, self.length
        kern, shift = self._kernel()
        la = torch.log(kern.reshape(m * hh, -1).index_select(1, flat).clamp_min(1e-30))
        la = la + shift.reshape(m * hh, -1).index_select(1, flat % shift[0].numel())
        la = la.view(m * hh, -1, n)
        a = self.a.reshape(m * hh, self.num_tokens, self.d)
        v = self.v.reshape(m * hh, self.num_positions, self.num_tokens, self.d)
        sc = _pair_matmul(a, v).reshape(m * hh, -1).index_select(1, flat).view(m * hh, -1, n)
        w = torch.exp(la - la.detach().amax(-1, keepdim=True))
        out = ((w * sc).sum(-1) / w.sum(-1)).view(m, hh, -1)
        return out * self.head_mask[:, :, None]

    def forward(self, token_ids: torch.Tensor) -> torch.Tensor:
        x, _ = self._flat_index(token_ids)
        return self.head_outputs(token_ids).sum(1) + self.b.index_select(1, x)

    def export(self, j: int) -> HeadTables:
        """Model j's heads in float64 numpy: features exp(raw - max) (the constant shift
        cancels in each head's normalisation), values, readouts and the bias."""
        j = _check_int(j, "j", 0, self.num_models - 1)
        r = self.ranks[j]
        heads = []
        with torch.no_grad():
            for h in range(self.heads[j]):
                qr, kr = self.q[j, h, :, :r].double(), self.k[j, h, :, :, :r].double()
                heads.append((torch.exp(qr - qr.max()).numpy(), torch.exp(kr - kr.max()).numpy(),
                              self.v[j, h].double().numpy(), self.a[j, h].double().numpy()))
            return HeadTables(heads=tuple(heads), bias=self.b[j].double().numpy(),
                              positional=self.positional, query_position=self.query_position)


class HeadTables:
    """A trained model as plain tables: heads = ((phi_Q (T, r), phi_K (P, T, r),
    v (P, T, d), a (T, d)), ...), bias (T,); P = n if positional else 1.
    y = sum_h [sum_p alpha^h_p <a_h(x), v^h_p(x_p)> / sum_p alpha^h_p] + b(x)."""

    def __init__(self, heads, bias, positional: bool, query_position: int):
        if not heads:
            raise ValueError("heads must hold at least one head")
        self.heads = tuple(tuple(np.asarray(t, dtype=np.float64) for t in h) for h in heads)
        for i, (fq, fk, v, a) in enumerate(self.heads):
            if fq.ndim != 2 or fk.ndim != 3 or v.ndim != 3 or a.ndim != 2:
                raise ValueError(f"head {i}: tables must be (T, r), (P, T, r), (P, T, d), (T, d)")
            if fk.shape[1:] != (fq.shape[0], fq.shape[1]) or v.shape[:2] != fk.shape[:2] \
                    or a.shape != (fq.shape[0], v.shape[2]):
                raise ValueError(f"head {i}: table shapes {fq.shape}, {fk.shape}, {v.shape}, "
                                 f"{a.shape} do not fit together")
        self.bias = np.asarray(bias, dtype=np.float64)
        self.positional = bool(positional)
        self.query_position = int(query_position)

    @property
    def ranks(self) -> tuple[int, ...]:
        return tuple(h[0].shape[1] for h in self.heads)


def _dyadic(arr: np.ndarray) -> tuple[np.ndarray, int]:
    """Exact integer form of a float64 array: (ints as an object array, K) with
    arr == ints / 2^K entry by entry (every finite float64 is a dyadic rational)."""
    arr = np.asarray(arr, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError("tables must hold finite numbers")
    fr = [Fraction(v) for v in arr.ravel().tolist()]
    K = max((f.denominator.bit_length() - 1 for f in fr), default=0)
    ints = np.empty(arr.shape, dtype=object)
    ints.reshape(-1)[:] = [f.numerator << (K - (f.denominator.bit_length() - 1)) for f in fr]
    return ints, K


def exact_table_outputs(tables: HeadTables, token_ids) -> tuple[list[Fraction], list[tuple]]:
    """Outputs of ``tables`` on every row of ``token_ids`` (N, n) in exact arithmetic.

    Every float64 table entry is the dyadic rational it stores; each table is scaled to
    integers by one power of two, alpha and scores are computed as exact integers for every
    (query, position, key) pair, and y = sum_h N_h / D_h + b(x) is formed with Fractions.
    Returns (outputs, denominators) with denominators[i] = (D_1, ..., D_H) of row i (exact).
    Raises ValueError on a vanishing denominator (the head then does not define an output
    there, so it does not count as a solution).
    """
    if not isinstance(tables, HeadTables):
        raise TypeError(f"tables must be a HeadTables, got {type(tables).__name__}")
    ids = np.asarray(token_ids)
    if ids.ndim != 2 or not np.issubdtype(ids.dtype, np.integer):
        raise ValueError(f"token_ids must be an int array of shape (N, n), got {ids.shape}")
    n, qp = ids.shape[1], tables.query_position
    if not 0 <= qp < n:
        raise ValueError(f"query_position {qp} does not fit sequences of length {n}")
    t = tables.heads[0][0].shape[0]
    if ids.min() < 0 or ids.max() >= t:
        raise ValueError(f"token_ids must lie in [0, {t - 1}]")
    bias_int, bias_k = _dyadic(tables.bias)
    pos = np.arange(n) if tables.positional else np.zeros(n, dtype=np.int64)
    x = ids[:, qp]
    per_head = []  # (D as object (N,), N as object (N,), scale exponents)
    for h, (fq, fk, v, a) in enumerate(tables.heads):
        if tables.positional and fk.shape[0] != n:
            raise ValueError(f"positional tables need P = n = {n} key tables, got {fk.shape[0]}")
        (Q, kq), (Kt, kk), (V, kv), (A, ka) = (_dyadic(t_) for t_ in (fq, fk, v, a))
        # integer pair tables: alpha[x, p, z] * 2^(kq+kk), score[x, p, z] * 2^(ka+kv)
        P = Kt.shape[0]
        alpha = Q.dot(Kt.reshape(P * t, -1).T).reshape(t, P, t)
        score = A.dot(V.reshape(P * t, -1).T).reshape(t, P, t)
        al = np.stack([alpha[x, pos[p], ids[:, p]] for p in range(n)], -1)
        sc = np.stack([score[x, pos[p], ids[:, p]] for p in range(n)], -1)
        den = al.sum(-1)
        num = (al * sc).sum(-1)
        bad = [i for i, d in enumerate(den.tolist()) if d == 0]
        if bad:
            raise ValueError(f"head {h} has a vanishing denominator on the input "
                             f"{ids[bad[0]].tolist()}")
        per_head.append((den, num, kq + kk, ka + kv))
    outputs, dens = [], []
    for i in range(len(ids)):
        y = Fraction(int(bias_int[x[i]]), 1 << bias_k)
        row_dens = []
        for den, num, k_alpha, k_score in per_head:
            y += Fraction(int(num[i]), int(den[i]) << k_score)
            row_dens.append(Fraction(int(den[i]), 1 << k_alpha))
        outputs.append(y)
        dens.append(tuple(row_dens))
    return outputs, dens


def exact_table_max_error(tables: HeadTables, token_ids, targets) -> Fraction:
    """max_i |y_i - t_i| over the rows, exactly (see :func:`exact_table_outputs`)."""
    targets = np.asarray(targets)
    ids = np.asarray(token_ids)
    if targets.shape != (len(ids),):
        raise ValueError(f"targets must have shape ({len(ids)},), got {targets.shape}")
    outputs, _ = exact_table_outputs(tables, ids)
    return max(abs(y - Fraction(int(t))) for y, t in zip(outputs, targets.tolist()))
