"""E2's stacked heads on Boolean tokens: small MLPs of the bits give every map (chapter 7).

:class:`MLPKernelHeads` holds M independent NKA heads (every parameter has a leading model
dimension; feature ranks padded to the stack's largest and masked), :class:`MLPSoftmaxHeads`
M dense softmax heads with scores in R^m. Because the maps are functions of the bits, a
trained head can be evaluated on tokens it never saw. Both compute their maps once per pool
token and evaluate the head only at the (query, key) pool pairs the rows use
(:mod:`companion.experiments.pair_readout`). Inputs come from
:func:`companion.experiments.e2.data.pool_inputs`. In this module ``m`` is always the token
width; the number of stacked models is ``M`` (or ``num_models``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

from companion.checks import (
    check_bool,
    check_choice,
    check_float,
    check_int_sequence,
    check_positive_int,
)
from companion.experiments.engine import check_model_size
from companion.experiments.pair_readout import (
    make_pair_plan,
    pair_readout,
    pair_values,
    rank_blocks,
    ranked_pair_values,
    shifted_exp,
)

FEATURES = ("exp", "softplus")
ENCODINGS = ("01", "pm1")
READOUTS = ("learned", "overlap")


def _model_seed(*parts) -> int:
    return int(np.random.SeedSequence([int(p) for p in parts]).generate_state(1)[0])


def _init_layers(m: int, hidden: tuple[int, ...], out: int, seed: int, out_std: float):
    """One model's layers (weight, bias), He-initialised from its own seed."""
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
    nn = torch.nn
    pad_widths = [max(o[j] for o in outs) for j in range(len(outs[0]))]
    per_model = []
    for o, s in zip(outs, seeds_per_model, strict=False):
        layers = _init_layers(m, hidden, sum(o), s, out_std)
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
    module.readout = check_choice(readout, "readout", READOUTS)
    module.encoding = check_choice(encoding, "encoding", ENCODINGS)
    check_bool(skip, "skip")
    num_models = module.weights[0].shape[0]
    module.skip = (torch.nn.Parameter(torch.zeros(num_models, m, out_width))
                   if skip and module.hidden else None)


def _readout(module, rows, bits, left, right, a, v, b, mode, blocks=None):
    """y = sum_p w_p f_p / sum_p w_p + b(x) with w from <left(x), right(z)> and the scores
    f(x, z) at the pool pairs the rows use (:mod:`companion.experiments.pair_readout`).
    Learned readout: f = <a(x), v(z)>. Overlap readout (the constructions' form, nothing
    learned): v(z) = z, a(x) = x, b = 0, so f(x, z) = <x, z> and the head must only learn
    where to attend."""
    size = left.shape[1]
    cached = module.__dict__.get("_plan_cache")  # one plan per rows tensor (a training set)
    if cached is not None and cached[0] is rows and cached[1:3] == (rows._version, size):
        plan = cached[3]
    else:
        plan = make_pair_plan(rows[:, :1] * size + rows[:, 1:], size, size, bias_idx=rows[:, 0])
        module.__dict__["_plan_cache"] = (rows, rows._version, size, plan)
    values = (pair_values(left, right, plan) if blocks is None
              else ranked_pair_values(left, right, plan, blocks))
    if module.readout == "overlap":
        scores, bias = pair_values(bits.unsqueeze(0), bits.unsqueeze(0), plan), None
    else:
        scores, bias = pair_values(a, v, plan), b
    return pair_readout(values, scores, bias, plan, mode)


def _check_mlp_size(models: int, m: int, hidden, out: int) -> None:
    widths = [m, *hidden, out]
    check_model_size(models * sum((a + 1) * b for a, b in zip(widths, widths[1:])),
                     "seeds x (m, hidden, value_dim, ranks)")


class MLPKernelHeads(torch.nn.Module):
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
        self.ranks = check_int_sequence(ranks, "ranks", 1)
        self.seeds = check_int_sequence(seeds, "seeds", 0)
        if len(self.seeds) != len(self.ranks):
            raise ValueError(
                f"seeds must have one entry per rank ({len(self.ranks)}), "
                f"got {len(self.seeds)}")
        self.hidden = tuple(check_int_sequence(hidden, "hidden", 1, allow_empty=True))
        self.value_dim = check_positive_int(value_dim, "value_dim")
        self.feature = check_choice(feature, "feature", FEATURES)
        d = self.value_dim
        _check_mlp_size(len(self.ranks), self.m, self.hidden, 2 * max(self.ranks) + 2 * d + 1)
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
        # split, not slices: a slice's backward zero-fills the whole output once per slice
        pq, pk, v, a, b = out.split([r, r, d, d, 1], dim=-1)
        b = b.squeeze(-1)
        mask = self.mask.unsqueeze(1)
        if self.feature == "exp":
            # per-query and per-model constant shifts (max over the model's own columns): they
            # cancel in the normalised head
            own = mask.to(pq.dtype)
            off = torch.zeros_like(own).masked_fill_(~mask, float("-inf"))  # (M, 1, R)
            q_shift = (pq.detach() + off).amax(-1, keepdim=True)
            k_shift = (pk.detach() + off).amax((-2, -1), keepdim=True)
            phi_q = shifted_exp(pq, q_shift, own)
            phi_k = shifted_exp(pk, k_shift, own)
        else:
            phi_q = torch.nn.functional.softplus(pq) * mask
            phi_k = torch.nn.functional.softplus(pk) * mask
        return phi_q, phi_k, v, a, b

    def forward(self, inputs):
        rows, pool = inputs
        phi_q, phi_k, v, a, b = self.token_maps(pool.bits)
        return _readout(self, rows, pool.bits, phi_q, phi_k, a, v, b, "kernel",
                        rank_blocks(self.ranks))

class MLPSoftmaxHeads(torch.nn.Module):
    """M stacked dense softmax heads: alpha(x, z) = exp(<q(x), k(z)>) with q, k in R^m,
    values and readout from the same kind of MLP of the bits. Same forward contract as
    `MLPKernelHeads`."""

    def __init__(self, m: int, seeds: Sequence[int], hidden: Sequence[int] = (64,),
                 value_dim: int = 16, score_std: float = 0.2, encoding: str = "01",
                 skip: bool = False, readout: str = "learned"):
        super().__init__()
        self.m = check_positive_int(m, "m")
        self.seeds = check_int_sequence(seeds, "seeds", 0)
        self.hidden = tuple(check_int_sequence(hidden, "hidden", 1, allow_empty=True))
        self.value_dim = check_positive_int(value_dim, "value_dim")
        score_std = check_float(score_std, "score_std", 0)
        d = self.value_dim
        _check_mlp_size(len(self.seeds), self.m, self.hidden, 2 * self.m + 2 * d + 1)
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
        q, k, v, a, b = out.split([m, m, d, d, 1], dim=-1)
        return _readout(self, rows, pool.bits, q, k, a, v, b.squeeze(-1), "logits")
