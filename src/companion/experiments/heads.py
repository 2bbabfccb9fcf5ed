"""M independent attention heads as one torch module, y = sum_p alpha_p f_p / sum_p alpha_p +
b(x) per model (chapters 6-8). :class:`HeadConfig` picks the maps (``table``, ``pool``, ``mlp``),
the attention (``kernel``: NKA, padded ranks, optionally several heads; ``softmax``; ``signed``)
and the readout (``learned`` <a(x), v(z)>, ``overlap`` <x, z>); each model has its own seed."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from companion.checks import check_bool, check_choice, check_float, check_int, check_int_sequence
from companion.core.attention import KernelAttentionHead
from companion.core.exact import HeadTables
from companion.core.task import token_ids, token_index
from companion.experiments.pair_readout import (
    make_pair_plan,
    pair_readout,
    pair_values,
    rank_blocks,
    ranked_pair_values,
    shifted_exp,
)

__all__ = ["HeadConfig"]  # the boundary: the configuration e1, probes, maps and e2 build

FEATURES = ("exp", "softplus")
#: Chapter 9's maps of the linear-attention literature, for table kernel heads (the table is
#: the learned projection u of a one-hot token): elu(u) + 1, relu(u), Hedgehog [softmax(u),
#: softmax(-u)] on the first R // 2 columns of a rank-R head (:mod:`companion.experiments.maps`).
MAP_FEATURES = ("elu1", "relu", "hedgehog")
ENCODINGS = ("01", "pm1")
READOUTS = ("learned", "overlap")
#: The attentions each kind of maps takes.
ATTENTIONS = {"table": ("kernel", "softmax", "signed"), "pool": ("kernel", "softmax"),
              "mlp": ("kernel", "softmax")}
#: Most parameters one stack may hold (2**25 floats: ~1 GB with Adam's moments in float64).
MAX_PARAMETERS = 2**25


@dataclass(frozen=True)
class HeadConfig:
    """M stacked heads, one per seed (built by the factories below): ``ranks``, ``heads`` per
    model. Init: tables N(0, phi_std^2) (softmax N(0, qk_std^2)), values N(0, value_std^2),
    readout N(0, 1/(d H)), bias 0, MLPs He (``affine_values``: the hidden layers feed only
    phi_Q, phi_K; v, a, b are affine in the bits); signed phi = (1 + gain_scale g) exp(u), sign_init
    'positive' (the NKA head of the same seed) or 'columns' (half the columns negated)."""

    maps: str
    attention: str
    seeds: tuple[int, ...]
    ranks: tuple[int, ...] = ()
    heads: tuple[int, ...] | None = None
    num_tokens: int = 1
    m: int = 1
    length: int = 3
    query_position: int = 0
    positional: bool = True
    d: int = 16
    pad_to: int | None = None
    pad_heads: int | None = None
    feature: str = "exp"
    score_dim: int = 24
    phi_std: float = 1.0
    value_std: float = 1.0
    qk_std: float = 0.2
    readout: str = "learned"
    gain_scale: float = 0.1
    sign_init: str = "positive"
    hidden: tuple[int, ...] = (64,)
    encoding: str = "01"
    skip: bool = False
    affine_values: bool = False
    dtype: torch.dtype = torch.float32

    def __post_init__(self):
        put = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731
        check_choice(self.maps, "maps", tuple(ATTENTIONS))
        for name, choices in (("attention", ATTENTIONS[self.maps]), ("readout", READOUTS),
                              ("feature", FEATURES + MAP_FEATURES), ("encoding", ENCODINGS),
                              ("sign_init", ("positive", "columns")),
                              ("dtype", (torch.float32, torch.float64))):
            check_choice(getattr(self, name), name, choices)
        put("seeds", tuple(check_int_sequence(self.seeds, "seeds", 0, 2**63 - 1)))
        put("ranks", () if self.attention == "softmax" else self.ranks)
        for name in ("ranks", "heads")[:1 + (self.heads is not None)]:
            put(name, tuple(check_int_sequence(getattr(self, name), name, 1,
                                               allow_empty=self.attention == "softmax")))
            if len(getattr(self, name)) not in (0, len(self.seeds)):
                raise ValueError(f"{name} must hold one entry per seed, got {getattr(self, name)}")
        put("hidden", tuple(check_int_sequence(self.hidden, "hidden", 1, allow_empty=True)))
        for name in ("num_tokens", "m", "length", "d", "score_dim"):
            put(name, check_int(getattr(self, name), name, 1))
        put("query_position", check_int(self.query_position, "query_position", 0,
                                        self.length - 1))
        for name, least in (("pad_to", max(self.ranks or (self.score_dim,))),
                            ("pad_heads", max(self.heads or (1,)))):
            if getattr(self, name) is not None:
                put(name, check_int(getattr(self, name), name, least))
        for name in ("phi_std", "value_std", "qk_std", "gain_scale"):
            put(name, check_float(getattr(self, name), name, 0.0, 100.0, low_open=True))
        for name in ("positional", "skip", "affine_values"):
            put(name, check_bool(getattr(self, name), name))
        if (self.heads is not None or self.feature in MAP_FEATURES) and (
                (self.maps, self.attention) != ("table", "kernel")
                or self.heads is not None and self.feature in MAP_FEATURES):
            raise ValueError(f"heads and feature {self.feature!r} are for table kernel heads "
                             "only (feature: single heads)")
        # the one cost guard, reached from every configuration that builds models: a
        # parameter count that would exhaust memory
        width = self.pad_to or max(self.ranks, default=self.score_dim)
        if self.maps == "mlp":
            dims = [self.m, *self.hidden, 2 * width + 2 * self.d + 1]
            count = len(self.seeds) * sum((a + 1) * b for a, b in zip(dims, dims[1:]))
        else:
            positions = self.length if self.maps == "table" and self.positional else 1
            gains = 2 if self.attention == "signed" else 1  # signed heads train gains
            count = (gains * len(self.seeds) * (self.pad_heads or max(self.heads or (1,)))
                     * self.num_tokens * (positions + 1) * (width + self.d + 1))
        if count > MAX_PARAMETERS:
            raise ValueError(f"seeds, ranks, heads, num_tokens, length, hidden, d, score_dim and "
                             f"pad_to give ~{count} parameters, above MAX_PARAMETERS = "
                             f"{MAX_PARAMETERS}; use fewer or smaller models")


def _pair_matmul(left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
    """out[m, x, p, z] = <left[m, x], right[m, p, z]>: one bmm, contiguous (M, T, P, T)
    ("query-major": every (query, position, key) triple of a model is one flat index)."""
    num_models, p, t, r = right.shape
    out = torch.bmm(left, right.reshape(num_models, p * t, r).transpose(1, 2))
    return out.view(num_models, -1, p, t)


def _exp_kernel(q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """_pair_matmul of exp(q), exp(k), each max-shifted over its last axis; and k's shift."""
    k_shift = k.detach().amax(-1, keepdim=True)
    kern = _pair_matmul(torch.exp(q - q.detach().amax(-1, keepdim=True)), torch.exp(k - k_shift))
    return kern, k_shift.squeeze(-1)


def _gather_pairs(matrix, rows):
    """matrix[:, query, key_j] for rows (query, key_0, key_1, key_2): (M, N, 3)."""
    size = matrix.shape[-1]
    flat = (rows[:, :1] * size + rows[:, 1:]).reshape(-1)
    return matrix.reshape(matrix.shape[0], -1).index_select(1, flat).view(
        matrix.shape[0], rows.shape[0], 3)


_POINTWISE = {"softplus": torch.nn.functional.softplus,
              "elu1": lambda u: torch.nn.functional.elu(u) + 1, "relu": torch.relu}


def _model_seed(*parts) -> int:
    return int(np.random.SeedSequence([int(p) for p in parts]).generate_state(1)[0])


class StackedHeads(torch.nn.Module):
    """The M heads of a :class:`HeadConfig`; ``model(inputs)`` returns predictions (M, N).
    Parameters (leading dimension M): tables q, k, values v, readout a, bias b (signed 'gexp'
    also q_gain, k_gain); MLP maps ``weights``, ``biases`` per layer, optionally ``skip``."""

    tiny = 1e-12  # a signed head's vanishing denominator is replaced by this

    def __init__(self, config: HeadConfig):
        super().__init__()
        c = self.config = config
        self.seeds, self.ranks = list(c.seeds), list(c.ranks)
        self.num_tokens, self.length, self.d = c.num_tokens, c.length, c.d
        self.query_position, self.positional, self.feature = (c.query_position, c.positional,
                                                              c.feature)
        self.num_positions = c.length if c.maps == "table" and c.positional else 1
        widths = self.ranks or [c.score_dim] * len(self.seeds)
        self._blocks = rank_blocks(widths)  # runs of equal rank (see ranked_pair_values)
        if c.maps == "mlp":
            self._init_mlp(widths)
        else:
            self._init_tables(widths)

    @property
    def num_models(self) -> int:
        return len(self.seeds)

    # ------------------------------------------------------------------ initialisation

    def _init_tables(self, widths):
        c, dtype = self.config, self.config.dtype
        m, p, t, d = self.num_models, self.num_positions, self.num_tokens, self.d
        per_model = list(c.heads or [1] * m)
        hh = c.pad_heads or max(per_model)
        r = self.pad = c.pad_to or max(widths)
        std = c.qk_std if c.attention == "softmax" else c.phi_std
        q = torch.zeros(m, hh, t, r, dtype=dtype)
        k = torch.zeros(m, hh, p, t, r, dtype=dtype)
        v = torch.zeros(m, hh, p, t, d, dtype=dtype)
        a = torch.zeros(m, hh, t, d, dtype=dtype)
        e1_single = c.maps == "table" and c.attention != "signed" and c.heads is None
        for j, (rj, hj) in enumerate(zip(widths, per_model)):
            g = torch.Generator().manual_seed(self.seeds[j] if c.maps != "pool" else _model_seed(
                self.seeds[j], *((rj, t, 3) if c.attention == "kernel" else (t, 5))))
            for h in range(hj):
                q[j, h, :, :rj] = torch.randn(t, rj, generator=g, dtype=dtype) * std
                k[j, h, :, :, :rj] = torch.randn(p, t, rj, generator=g, dtype=dtype) * std
            for h in range(hj):
                v[j, h] = torch.randn(p, t, d, generator=g, dtype=dtype) * c.value_std
                a[j, h] = (torch.randn(t, d, generator=g, dtype=dtype) * (1.0 / math.sqrt(d))
                           if e1_single else  # x * (1/sqrt d), x / sqrt d: may differ in
                           torch.randn(t, d, generator=g, dtype=dtype) / math.sqrt(d * hj))
                # the last bit, and committed results keep each variant's own
        if c.heads is None:  # one head: no head axis; pool maps: no position axis
            q, k, v, a = q[:, 0], k[:, 0], v[:, 0], a[:, 0]
            if c.maps == "pool":
                k, v = k[:, 0], v[:, 0]
        own = torch.arange(r)[None, :] < torch.tensor(widths)[:, None]  # (M, R)
        if c.attention == "signed":
            self.register_buffer("mask", own.to(dtype))
            q_gain = torch.zeros(m, t, r, dtype=dtype)  # gain = 1 + gain_scale * g, g = 0
            if c.sign_init == "columns":  # the upper half of a model's columns starts
                for j, rj in enumerate(widths):  # at gain -1: alpha = K_plus - K_minus
                    q_gain[j, :, (rj + 1) // 2:rj] = -2.0 / c.gain_scale
            self.q_gain = torch.nn.Parameter(q_gain)
            self.k_gain = torch.nn.Parameter(torch.zeros(m, p, t, r, dtype=dtype))
        self.q, self.k = torch.nn.Parameter(q), torch.nn.Parameter(k)
        if c.readout == "learned":
            self.v, self.a = torch.nn.Parameter(v), torch.nn.Parameter(a)
            self.b = torch.nn.Parameter(torch.zeros(m, t, dtype=dtype))
        if c.attention == "kernel":
            self.register_buffer("mask", own)
            # 0 on a model's own columns, -inf on its padding; padded heads keep finite zero
            # tables (defined normalisation) and head_mask removes their output
            self.register_buffer("mask_add",
                                 torch.zeros(m, r, dtype=dtype).masked_fill(~own, -math.inf))
            if c.heads is not None:
                self.pad_heads = hh
                heads = torch.arange(hh)[None, :] < torch.tensor(c.heads)[:, None]
                self.register_buffer("head_mask", heads.to(dtype))

    def _init_mlp(self, widths):
        c, nn = self.config, torch.nn
        kernel, m, d = c.attention == "kernel", c.m, c.d
        out_std = 1.0 if kernel else c.qk_std
        pad = self.pad = max(widths)
        dims = (m,) + c.hidden
        per_model = []
        for j, w in enumerate(widths):
            gen = torch.Generator().manual_seed(
                _model_seed(self.seeds[j], *((w, m, 1) if kernel else (0, m, 2))))
            layers = [(torch.randn(a, b, generator=gen) * math.sqrt(2.0 / a), torch.zeros(b))
                      for a, b in zip(dims[:-1], dims[1:])]  # He initialisation
            weight = torch.randn(dims[-1], 2 * w + 2 * d + 1, generator=gen) * out_std / \
                math.sqrt(dims[-1])
            # the output blocks (phi_Q, phi_K, v, a, b), each padded to the stack's width
            parts = [nn.functional.pad(part, (0, to - part.shape[1]))
                     for part, to in zip(weight.split([w, w, d, d, 1], 1), (pad, pad, d, d, 1))]
            if c.affine_values:  # v, a, b from the bits: N(0, 1 / m) like an affine head's
                parts[2:] = []
                layers.append((torch.randn(m, 2 * d + 1, generator=gen) / math.sqrt(m),
                               torch.zeros(2 * d + 1)))
            layers.insert(len(dims) - 1, (torch.cat(parts, 1), torch.zeros(sum(
                p.shape[1] for p in parts))))
            per_model.append(layers)
        self.weights, self.biases = (nn.ParameterList(
            [nn.Parameter(torch.stack([pm[i][part] for pm in per_model]))
             for i in range(len(per_model[0]))]) for part in (0, 1))
        self.affine = len(per_model[0]) > len(dims)  # the last layer: v, a, b from the bits
        self.skip = (nn.Parameter(torch.zeros(self.num_models, m, 2 * pad + 2 * d + 1))
                     if c.skip and c.hidden else None)
        if kernel:
            self.register_buffer("mask", torch.arange(pad)[None, :]
                                 < torch.tensor(widths)[:, None])

    # ------------------------------------------------------------------ forward

    def forward(self, inputs) -> torch.Tensor:
        c = self.config
        if c.maps == "pool":
            return self._pool_forward(*inputs)
        if c.maps == "mlp":
            rows, pool = inputs
            size = len(pool.bits)
            plan = self._plan(rows, size, lambda: make_pair_plan(
                rows[:, :1] * size + rows[:, 1:], size, size, bias_idx=rows[:, 0]))
            left, right, v, a, b = self.token_maps(pool.bits)
            mode = "kernel" if c.attention == "kernel" else "logits"
            return self._pair_readout(plan, left, right, a, v, b, mode, bits=pool.bits)
        if c.heads is not None:
            x, _ = self._flat_index(inputs)
            return self.head_outputs(inputs).sum(1) + self.b.index_select(1, x)
        if c.attention == "signed":
            return self._signed_forward(inputs)
        return self._table_forward(inputs)

    def _plan(self, key: torch.Tensor, tag, build):
        """One pair plan per input tensor, built on first use; the last four are kept (a
        training set and the sets a validation monitor reads between its steps)."""
        cache = self.__dict__.setdefault("_plan_cache", {})
        cached = cache.get(id(key))
        if cached is not None and cached[0] is key and cached[1:3] == (key._version, tag):
            return cached[3]
        if len(cache) >= 4:
            cache.pop(next(iter(cache)))
        cache[id(key)] = (key, key._version, tag, plan := build())
        return plan

    def _pair_readout(self, plan, left, right, a, v, b, mode, shift=None, bits=None):
        values = ranked_pair_values(left, right, plan, self._blocks)
        if self.config.readout == "overlap":  # v(z) = z, a(x) = x, b = 0
            scores, b = pair_values(bits.unsqueeze(0), bits.unsqueeze(0), plan), None
        else:
            scores = pair_values(a, v, plan)
        return pair_readout(values, scores, b, plan, mode, shift)

    def _table_forward(self, ids):
        """Single-head table maps, evaluated at the (query, position, key) triples in use."""

        def build():
            n, t = self.length, self.num_tokens
            x = ids[:, self.query_position]
            queries, x_rank = torch.unique(x, sorted=True, return_inverse=True)
            pos = (torch.arange(n, device=ids.device) if self.positional
                   else torch.zeros(n, dtype=torch.long, device=ids.device))
            pt = self.num_positions * t
            # (query, position, key) as (row, column) of a (Q, P*T) table of the used queries
            flat = x_rank[:, None] * pt + pos[None, :] * t + ids
            return queries, make_pair_plan(flat, len(queries), pt, bias_idx=x, shift_period=pt)

        queries, plan = self._plan(ids, None, build)
        num_models, pt = self.num_models, self.num_positions * self.num_tokens
        shift = None
        if self.config.attention == "softmax":
            left, right, mode = self.q.index_select(1, queries), self.k, "logits"
        elif self.feature == "exp":
            q = self.q.index_select(1, queries)
            # max over the model's own columns; cancels per query (q), shifts log alpha (k)
            q_shift = (q.detach() + self.mask_add[:, None, :]).amax(-1, keepdim=True)
            k_shift = (self.k.detach() + self.mask_add[:, None, None, :]).amax(-1)
            mask = self.mask.to(q.dtype)
            left = shifted_exp(q, q_shift, mask[:, None, :])
            right = shifted_exp(self.k, k_shift.unsqueeze(-1), mask[:, None, None, :])
            shift = k_shift.reshape(num_models, pt).index_select(1, plan.shift_idx)
            mode = "log_kernel"
        else:
            left, right = self.features()
            left, mode = left.index_select(1, queries), "log_kernel"
        return self._pair_readout(plan, left, right.reshape(num_models, pt, -1),
                                  self.a.index_select(1, queries),
                                  self.v.reshape(num_models, pt, -1), self.b, mode, shift)

    def _pool_forward(self, rows, pool):
        if self.config.attention == "softmax":
            w = torch.softmax(_gather_pairs(torch.bmm(self.q, self.k.transpose(1, 2)), rows), -1)
        else:
            w = _gather_pairs(self.kernel(), rows)
        if self.config.readout == "overlap":
            f = _gather_pairs((pool.bits @ pool.bits.T).unsqueeze(0), rows)
            bias = None
        else:
            f = _gather_pairs(torch.bmm(self.a, self.v.transpose(1, 2)), rows)
            bias = self.b[:, rows[:, 0]]
        if self.config.attention == "softmax":
            y = (w * f).sum(-1)
            return y if bias is None else y + bias
        return (w * f).sum(-1) / w.sum(-1).clamp_min(1e-30) + (0.0 if bias is None else bias)

    def _flat_index(self, token_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Query ids (N,) and flat query-major (query, position, key) indices (N * n,)."""
        n, t = self.length, self.num_tokens
        x = token_ids[:, self.query_position]
        pos = (torch.arange(n) if self.positional else torch.zeros(n, dtype=torch.long)).to(
            token_ids.device)
        flat = (x[:, None] * (self.num_positions * t) + pos[None, :] * t + token_ids).reshape(-1)
        return x, flat

    def _signed_forward(self, ids):
        x, flat = self._flat_index(ids)
        kern, scale = self._signed_kernel()
        m, n, rows = kern.shape[0], self.length, len(x)
        alpha = kern.reshape(m, -1).index_select(1, flat).view(m, rows, n)
        # rescaled per input (the shifts depend on position and key)
        sc = scale.reshape(m, -1).index_select(1, flat % scale[0].numel()).view(m, rows, n)
        alpha = alpha * torch.exp(sc - sc.amax(-1, keepdim=True))
        sc = _pair_matmul(self.a, self.v).reshape(m, -1).index_select(1, flat).view(m, -1, n)
        den = alpha.sum(-1)
        den = torch.where(den == 0, torch.full_like(den, self.tiny), den)
        return (alpha * sc).sum(-1) / den + self.b.index_select(1, x)

    def _signed_kernel(self):
        """kern (M, T, P, T) query-major and a log-scale (M, P, T): alpha = kern * exp(scale)
        up to a factor per query; exponents max-shifted."""
        mq, mk = self.mask[:, None, :], self.mask[:, None, None, :]
        q_shift = self.q.detach().amax(-1, keepdim=True)
        k_shift = self.k.detach().amax(-1, keepdim=True)
        gq, gk = self._gains()
        phi_q = gq * torch.exp(self.q - q_shift) * mq
        phi_k = gk * torch.exp(self.k - k_shift) * mk
        return _pair_matmul(phi_q, phi_k), k_shift.squeeze(-1)

    def _gains(self):
        s = self.config.gain_scale
        return 1 + s * self.q_gain, 1 + s * self.k_gain

    # ------------------------------------------------------------------ inspection

    def features(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Feature tables phi_Q (M, T, R) and phi_K (M, P, T, R) of single-head kernel or
        signed table heads; padded columns 0."""
        mq, mk = self.mask[:, None, :], self.mask[:, None, None, :]
        if self.config.attention == "signed":
            gq, gk = self._gains()
            return gq * torch.exp(self.q) * mq, gk * torch.exp(self.k) * mk
        if self.feature == "exp":
            return (torch.exp(self.q + self.mask_add[:, None, :]),
                    torch.exp(self.k + self.mask_add[:, None, None, :]))
        if self.feature == "hedgehog":
            return self._hedgehog(self.q), self._hedgehog(self.k)
        f = _POINTWISE[self.feature]
        return f(self.q) * mq, f(self.k) * mk

    def _hedgehog(self, u: torch.Tensor) -> torch.Tensor:
        """[softmax(u_:h), softmax(-u_:h)] in columns [0, 2h) of a rank-R model, h = R // 2."""
        half = torch.tensor(self.ranks, device=u.device)[:, None] // 2  # (M, 1)
        col = torch.arange(u.shape[-1], device=u.device)[None, :]
        shape = (u.shape[0],) + (1,) * (u.ndim - 2) + (u.shape[-1],)
        off = torch.zeros(col.shape[-1], dtype=u.dtype, device=u.device).expand(
            len(half), -1).masked_fill(col >= half, -math.inf).reshape(shape)
        first = torch.softmax(u + off, -1)
        second = torch.softmax(-u + off, -1)
        index = (col - half).clamp_min(0).reshape(shape).expand_as(u)
        upper = ((col >= half) & (col < 2 * half)).to(u.dtype).reshape(shape)
        return first + second.gather(-1, index) * upper

    def pair_tables(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Single-head table kernel or softmax heads: (log alpha_p(x, z) up to a constant per
        query, f_p(x, z) = <a(x), v_p(z)>), each (M, P, T, T) [model, position, x, z]."""
        if self.config.attention == "softmax":
            log_alpha = _pair_matmul(self.q, self.k)
        elif self.feature == "exp":
            # q's shift cancels per query
            kern, shift = _exp_kernel(self.q + self.mask_add[:, None, :],
                                      self.k + self.mask_add[:, None, None, :])
            log_alpha = torch.log(kern.clamp_min(1e-30)) + shift[:, None]
        else:
            log_alpha = torch.log(_pair_matmul(*self.features()).clamp_min(1e-30))
        scores = _pair_matmul(self.a, self.v)
        return log_alpha.permute(0, 2, 1, 3), scores.permute(0, 2, 1, 3)

    def head_outputs(self, token_ids: torch.Tensor) -> torch.Tensor:
        """Several-head models: <a_h(x), o_h> for every head, (M, H, N); padded heads give 0.
        Each o_h is a normalised convex combination of the head's values (log space)."""
        x, flat = self._flat_index(token_ids)
        m, hh, p, t, r = (self.num_models, self.pad_heads, self.num_positions, self.num_tokens,
                          self.pad)
        n = self.length
        q = (self.q + self.mask_add[:, None, None, :]).reshape(m * hh, t, r)
        k = (self.k + self.mask_add[:, None, None, None, :]).reshape(m * hh, p, t, r)
        kern, shift = _exp_kernel(q, k)
        la = torch.log(kern.reshape(m * hh, -1).index_select(1, flat).clamp_min(1e-30))
        la = la + shift.reshape(m * hh, -1).index_select(1, flat % shift[0].numel())
        la = la.view(m * hh, -1, n)
        a = self.a.reshape(m * hh, t, self.d)
        v = self.v.reshape(m * hh, p, t, self.d)
        sc = _pair_matmul(a, v).reshape(m * hh, -1).index_select(1, flat).view(m * hh, -1, n)
        w = torch.exp(la - la.detach().amax(-1, keepdim=True))
        out = ((w * sc).sum(-1) / w.sum(-1)).view(m, hh, -1)
        return out * self.head_mask[:, :, None]

    def kernel(self) -> torch.Tensor:
        """Pool kernel heads: alpha on all pool pairs, up to a positive factor per (model,
        query): (M, P, P)."""
        q = self.q + self.mask_add[:, None, :]
        k = self.k + self.mask_add[:, None, :]
        phi_q = torch.exp(q - q.detach().amax(-1, keepdim=True))
        phi_k = torch.exp(k - k.detach().amax(dim=(-2, -1), keepdim=True))
        return torch.bmm(phi_q, phi_k.transpose(1, 2))

    def token_maps(self, bits):
        """MLP maps per pool token (M, P, ·): phi_Q, phi_K (kernel: nonnegative, masked; softmax:
        the scores q, k), v, a, b."""
        x = 2 * bits - 1 if self.config.encoding == "pm1" else bits
        x = x.unsqueeze(0).expand(self.num_models, -1, -1)
        h, last = x, len(self.weights) - 1 - self.affine
        for w, b in zip(self.weights[:last], self.biases[:last]):
            h = torch.relu(torch.baddbmm(b.unsqueeze(1), h, w))
        out = torch.baddbmm(self.biases[last].unsqueeze(1), h, self.weights[last])
        if self.affine:
            out = torch.cat([out, torch.baddbmm(self.biases[-1].unsqueeze(1), x,
                                                 self.weights[-1])], -1)
        if self.skip is not None:  # affine shortcut from the bits (starts at zero)
            out = out + torch.bmm(x, self.skip)
        r, d = self.pad, self.d
        # split, not slices: a slice's backward zero-fills the whole output once per slice
        pq, pk, v, a, b = out.split([r, r, d, d, 1], dim=-1)
        b = b.squeeze(-1)
        if self.config.attention == "softmax":
            return pq, pk, v, a, b
        mask = self.mask.unsqueeze(1)
        if self.feature == "exp":
            # shifts per query and model (max over its own columns): cancel in the normalised head
            own = mask.to(pq.dtype)
            off = torch.zeros_like(own).masked_fill_(~mask, float("-inf"))  # (M, 1, R)
            q_shift = (pq.detach() + off).amax(-1, keepdim=True)
            k_shift = (pk.detach() + off).amax((-2, -1), keepdim=True)
            return shifted_exp(pq, q_shift, own), shifted_exp(pk, k_shift, own), v, a, b
        f = torch.nn.functional.softplus
        return f(pq) * mask, f(pk) * mask, v, a, b

    def export(self, j: int) -> HeadTables:
        """Model j of table kernel, signed or several-head heads as float64 tables for
        :func:`companion.core.exact.exact_table_max_error` (exp shifts cancel per head)."""
        c = self.config
        r = self.ranks[j]
        heads = []
        with torch.no_grad():
            for h in range(c.heads[j] if c.heads else 1):
                q, k, v, a = (t[(j, h) if c.heads else j] for t in (self.q, self.k, self.v, self.a))
                qr, kr = q[..., :r].double(), k[..., :r].double()
                if c.attention == "kernel" and self.feature in MAP_FEATURES:
                    phi_q, phi_k = (t[j, ..., :r].double() for t in self.features())
                elif c.attention == "kernel" and self.feature == "softplus":
                    phi_q, phi_k = (torch.nn.functional.softplus(qr),
                                    torch.nn.functional.softplus(kr))
                else:
                    phi_q, phi_k = torch.exp(qr - qr.max()), torch.exp(kr - kr.max())
                    if c.attention == "signed":
                        phi_q = phi_q * (1 + c.gain_scale * self.q_gain[j, :, :r].double())
                        phi_k = phi_k * (1 + c.gain_scale * self.k_gain[j, ..., :r].double())
                heads.append((phi_q.numpy(), phi_k.numpy(), v.double().numpy(),
                              a.double().numpy()))
            return HeadTables(heads=tuple(heads), bias=self.b[j].double().numpy(),
                              positional=self.positional, query_position=self.query_position)

    def to_kernel_head(self, j: int, tokens) -> KernelAttentionHead:
        """Model j of single-head table kernel heads as a float64 :class:`companion.core.
        attention.KernelAttentionHead` on the 0/1 tokens (T, m) its tables index."""
        (q, k, v, a), = self.export(j).heads
        b = self.b[j].detach().double().numpy()
        index = token_index(tokens)
        pos = (lambda p: p) if self.positional else (lambda p: 0)

        def ids(z):
            return token_ids(index, z)

        return KernelAttentionHead(
            rank=self.ranks[j],
            query_features=lambda x: q[ids(x)],
            key_features=lambda z, p: k[pos(p)][ids(z)],
            values=lambda z, p: v[pos(p)][ids(z)],
            readout_weights=lambda x: a[ids(x)],
            readout_bias=lambda x: b[ids(x)],
        )


# ---------------------------------------------------------------------- the sweeps' factories


def table_kernel_heads(ranks, seeds, num_tokens, length=3, **options) -> StackedHeads:
    """E1's NKA heads (table maps, one head of rank ``ranks[j]`` per seed)."""
    return StackedHeads(HeadConfig("table", "kernel", seeds, ranks, num_tokens=num_tokens,
                                   length=length, **options))


def table_softmax_heads(seeds, num_tokens, length=3, *, positional=False,
                        **options) -> StackedHeads:
    """E1's dense softmax heads; q, k ~ N(0, qk_std^2) (a small std keeps early logits near 0)."""
    return StackedHeads(HeadConfig("table", "softmax", seeds, num_tokens=num_tokens,
                                   length=length, positional=positional, **options))


def signed_heads(ranks, seeds, num_tokens, length=3, **options) -> StackedHeads:
    """Chapter 8's signed heads; 'gexp' starts as the NKA head of the same seed and rank."""
    return StackedHeads(HeadConfig("table", "signed", seeds, ranks, num_tokens=num_tokens,
                                   length=length, **options))


def multi_heads(heads, ranks, seeds, num_tokens, length=3, **options) -> StackedHeads:
    """Chapter 8's models of ``heads[j]`` NKA heads of rank ``ranks[j]`` each."""
    return StackedHeads(HeadConfig("table", "kernel", seeds, ranks, heads, num_tokens=num_tokens,
                                   length=length, **options))


def pool_kernel_heads(pool_size: int, ranks: Sequence[int], seeds: Sequence[int],
                      readout: str = "overlap", value_dim: int = 16) -> StackedHeads:
    """E2's NKA heads with table maps over a shared pool (every token seen in training)."""
    return StackedHeads(HeadConfig("pool", "kernel", seeds, ranks, num_tokens=pool_size,
                                   d=value_dim, readout=readout))


def pool_softmax_heads(pool_size: int, seeds: Sequence[int], score_dim: int,
                       readout: str = "overlap", value_dim: int = 16) -> StackedHeads:
    """E2's dense heads with table scores in R^score_dim over a shared pool."""
    return StackedHeads(HeadConfig("pool", "softmax", seeds, num_tokens=pool_size, d=value_dim,
                                   score_dim=score_dim, readout=readout))


def mlp_kernel_heads(m: int, ranks: Sequence[int], seeds: Sequence[int],
                     hidden: Sequence[int] = (64,), value_dim: int = 16, feature: str = "exp",
                     encoding: str = "01", skip: bool = False, readout: str = "learned",
                     affine_values: bool = False) -> StackedHeads:
    """E2's NKA heads on m-bit tokens (``hidden=()``: affine maps of the bits)."""
    return StackedHeads(HeadConfig("mlp", "kernel", seeds, ranks, m=m, hidden=hidden,
                                   d=value_dim, feature=feature, encoding=encoding, skip=skip,
                                   readout=readout, affine_values=affine_values))


def mlp_softmax_heads(m: int, seeds: Sequence[int], hidden: Sequence[int] = (64,),
                      value_dim: int = 16, score_std: float = 0.2, encoding: str = "01",
                      skip: bool = False, readout: str = "learned",
                      affine_values: bool = False) -> StackedHeads:
    """E2's dense heads on m-bit tokens, scores q, k in R^m from the same kind of MLP."""
    return StackedHeads(HeadConfig("mlp", "softmax", seeds, m=m, hidden=hidden, d=value_dim,
                                   score_dim=m, encoding=encoding, skip=skip, readout=readout,
                                   qk_std=score_std, affine_values=affine_values))


def group_ranks(ranks: Sequence[int], overhead: float = 48.0) -> list[list[int]]:
    """Contiguous groups of the distinct ranks, each padded to its largest, minimising
    sum (models x padded rank) + overhead x groups: exact DP, O(n) by the convex-hull trick."""
    rs = sorted(set(ranks))
    n = len(rs)
    best, cut = [0.0] * (n + 1), [0] * (n + 1)
    hull, h = [0], 0  # cuts whose lines form the lower envelope; h: the current minimum
    for j in range(1, n + 1):
        x = rs[j - 1]
        while h + 1 < len(hull) and (best[hull[h + 1]] - hull[h + 1] * x
                                     < best[hull[h]] - hull[h] * x):
            h += 1  # ties keep the smaller cut, as the quadratic search did
        i = hull[h]
        best[j], cut[j] = best[i] + (j - i) * x + overhead, i
        while len(hull) - h >= 2 and ((best[j] - best[hull[-2]]) * (hull[-1] - hull[-2])
                                      <= (best[hull[-1]] - best[hull[-2]]) * (j - hull[-2])):
            hull.pop()  # never strictly below both neighbours
        hull.append(j)
    groups, j = [], n
    while j > 0:
        groups.append(rs[cut[j]:j])
        j = cut[j]
    return groups[::-1]
