"""Stacked table heads for chapter 8's open questions: signed kernels and several heads.

Two model classes beside :class:`companion.experiments.table_heads.TableKernelHeads` (E1's
NKA heads), with its conventions: every map is a lookup table over the family's T tokens,
M independent models share one tensor program (every parameter has a leading model
dimension), ranks are padded with masked, identically zero feature columns, so
:func:`companion.experiments.engine.train_batched` trains them unchanged.

* :class:`TableSignedHeads` -- one normalised head whose features may take any sign
  (``gexp``: phi = (1 + gain_scale g) exp(u) with free gains g starting at 0; ``raw``:
  phi = the table), so alpha_p(x, z) = <phi_Q(x), phi_K^(p)(z)> may be negative. Output
  y = sum_p alpha_p f_p / sum_p alpha_p + b(x): the *nonzero-denominator* convention.
  Initialised with TableKernelHeads' draws, so at step 0 model j computes what the NKA head
  of the same seed and rank computes.
* :class:`TableMultiHeads` -- H NKA heads (exp features) of rank r each, one query-dependent
  affine readout: y = sum_h <a_h(x), o_h> + b(x). Models may differ in r (padded columns)
  and in H (padded heads, masked to zero).

``export(j)`` gives model j as :class:`companion.core.exact.HeadTables`, which
:func:`companion.core.exact.exact_table_max_error` re-verifies without rounding.

Serves chapter 8 (``prf:prop-signed-certificate``, ``prf:prop-two-heads``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from companion.checks import check_bool, check_choice, check_float, check_int, check_int_sequence
from companion.core.exact import HeadTables
from companion.experiments.engine import check_model_size

__all__ = ["TableSignedHeads", "TableMultiHeads"]

SIGNED_PARAMETRISATIONS = ("gexp", "raw")
#: How signed features start: 'positive' (the NKA head of the same seed), 'columns'
#: (gexp: half the columns negated, alpha = K_plus - K_minus), 'symmetric' (raw: N(0, std^2)).
SIGN_INITS = ("positive", "columns", "symmetric")


def _pair_matmul(left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
    """out[m, x, p, z] = <left[m, x], right[m, p, z]> as a contiguous (M, T, P, T) table."""
    m, p, t, r = right.shape
    return torch.bmm(left, right.reshape(m, p * t, r).transpose(1, 2)).view(m, -1, p, t)


class _StackedTables(torch.nn.Module):
    """Shared bookkeeping: seeds, token count, length, query position, value width."""

    def __init__(self, seeds, num_tokens, length, query_position, d, positional, dtype):
        super().__init__()
        self.seeds = check_int_sequence(seeds, "seeds", 0)
        if not self.seeds:
            raise ValueError("seeds must hold at least one seed")
        self.num_tokens = check_int(num_tokens, "num_tokens", 1)
        self.length = check_int(length, "length", 1)
        self.query_position = check_int(query_position, "query_position", 0, self.length - 1)
        self.d = check_int(d, "d", 1)
        self.positional = check_bool(positional, "positional")
        if not any(dtype is t for t in (torch.float32, torch.float64)):
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
        self.parametrisation = check_choice(parametrisation, "parametrisation",
                                            SIGNED_PARAMETRISATIONS)
        self.gain_scale = check_float(gain_scale, "gain_scale", 0, 100, low_open=True)
        phi_std = check_float(phi_std, "phi_std", 0, 100, low_open=True)
        value_std = check_float(value_std, "value_std", 0, 100, low_open=True)
        check_choice(sign_init, "sign_init", SIGN_INITS)
        if sign_init == "symmetric" and parametrisation != "raw":
            raise ValueError("sign_init='symmetric' needs parametrisation='raw'")
        if sign_init == "columns" and parametrisation != "gexp":
            raise ValueError("sign_init='columns' needs parametrisation='gexp'")
        self.sign_init = sign_init
        self.ranks = check_int_sequence(ranks, "ranks", 1)
        if len(self.ranks) != len(self.seeds):
            raise ValueError(f"ranks and seeds must have the same length, got "
                             f"{len(self.ranks)} and {len(self.seeds)}")
        r_max = max(self.ranks)
        self.pad = r_max if pad_to is None else check_int(pad_to, "pad_to", r_max)
        m, p, t, r = self.num_models, self.num_positions, self.num_tokens, self.pad
        check_model_size(2 * m * t * (p + 1) * (r + d + 1),
                         "seeds/ranks x num_tokens x length x (rank + d)")
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
        j = check_int(j, "j", 0, self.num_models - 1)
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
        self.heads = check_int_sequence(heads, "heads", 1)
        self.ranks = check_int_sequence(ranks, "ranks", 1)
        if not len(self.heads) == len(self.ranks) == len(self.seeds):
            raise ValueError(f"heads, ranks and seeds must have the same length, got "
                             f"{len(self.heads)}, {len(self.ranks)} and {len(self.seeds)}")
        h_max, r_max = max(self.heads), max(self.ranks)
        self.pad_heads = h_max if pad_heads is None else check_int(pad_heads, "pad_heads", h_max)
        self.pad = r_max if pad_to is None else check_int(pad_to, "pad_to", r_max)
        phi_std = check_float(phi_std, "phi_std", 0, 100, low_open=True)
        value_std = check_float(value_std, "value_std", 0, 100, low_open=True)
        check_model_size(len(self.seeds) * self.pad_heads * num_tokens * (self.num_positions + 1)
                         * (self.pad + d + 1), "heads x ranks x seeds x num_tokens x (rank + d)")
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
        j = check_int(j, "j", 0, self.num_models - 1)
        r = self.ranks[j]
        heads = []
        with torch.no_grad():
            for h in range(self.heads[j]):
                qr, kr = self.q[j, h, :, :r].double(), self.k[j, h, :, :, :r].double()
                heads.append((torch.exp(qr - qr.max()).numpy(), torch.exp(kr - kr.max()).numpy(),
                              self.v[j, h].double().numpy(), self.a[j, h].double().numpy()))
            return HeadTables(heads=tuple(heads), bias=self.b[j].double().numpy(),
                              positional=self.positional, query_position=self.query_position)
