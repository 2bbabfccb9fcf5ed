"""One normalised attention head, in the two forms the paper compares.

* Nonnegative kernel attention (NKA): weights alpha_p(x, z) = <phi_Q(x), phi_K^(p)(z)> >= 0
  of feature rank r, values v^(p)(z) in R^d, query-dependent affine readout
  y = <a(x), o> + b(x) with o = sum_p alpha_p v_p / sum_p alpha_p.
* Dense softmax attention: alpha(x, z) = exp(<q(x), k(z)>), no finite rank in general.

The head is a bundle of maps from tokens (..., m) to arrays; key and value maps also get the
0-based position p. Evaluators work in float64 numpy or exactly (``exact=True``: Python ints
and ``fractions.Fraction`` in object arrays). The *direct* form sums over tokens; the *sketch*
form first compresses the keys into S = sum_p phi_K(x_p) v(x_p)^T (r x d) and
u = sum_p phi_K(x_p) (r), whose size does not grow with n — why NKA is "linear attention".
A torch version of the same forward pass serves training.

Serves chapter 1 (``thm-rank-one``, ``obs-no-zero-error``) and every chapter that evaluates a
head.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from companion.checks import check_instance, check_int, check_tokens
from companion.core.task import check_convention, query_index

TokenMap = Callable[[np.ndarray], np.ndarray]
PositionalMap = Callable[[np.ndarray, int], np.ndarray]


@dataclass(frozen=True)
class KernelAttentionHead:
    """A normalised nonnegative kernel-attention head of feature rank `rank`.

    query_features(x) -> (..., r); key_features(z, p) -> (..., r); values(z, p) -> (..., d);
    readout_weights(x) -> (..., d); readout_bias(x) -> (...).
    """

    rank: int
    query_features: TokenMap
    key_features: PositionalMap
    values: PositionalMap
    readout_weights: TokenMap
    readout_bias: TokenMap

    def __post_init__(self):
        check_int(self.rank, "rank", 1)
        for field in (
            "query_features",
            "key_features",
            "values",
            "readout_weights",
            "readout_bias",
        ):
            if not callable(getattr(self, field)):
                raise TypeError(f"{field} must be callable")


@dataclass(frozen=True)
class SoftmaxAttentionHead:
    """Dense softmax head: alpha(x, z) = exp(<q(x), k(z)>), values v(z), readout <a, o> + b."""

    query_map: TokenMap
    key_map: TokenMap
    values: TokenMap
    readout_weights: TokenMap
    readout_bias: TokenMap


def _prepare(sequences, convention):
    x = check_tokens(sequences)
    check_convention(convention)
    q = query_index(x.shape[-2], convention)
    return x, x[..., q, :]


def _as_array(value, exact: bool, name: str, shape_prefix: tuple, last: int | None):
    arr = np.asarray(value, dtype=object if exact else np.float64)
    want = shape_prefix + ((last,) if last is not None else ())
    if last is None and arr.shape != shape_prefix:
        raise ValueError(f"{name} must return shape {want}, got {arr.shape}")
    if last is not None and arr.shape != want:
        raise ValueError(f"{name} must return shape {want}, got {arr.shape}")
    if not exact and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} returned NaN or infinite entries")
    return arr


def _features(head: KernelAttentionHead, x, query, exact: bool):
    """Query features (..., r), key features (..., n, r), values (..., n, d), a, b."""
    check_instance(head, "head", KernelAttentionHead)
    batch, n = x.shape[:-2], x.shape[-2]
    phi_q = _as_array(head.query_features(query), exact, "query_features", batch, head.rank)
    phi_k = np.stack(
        [
            _as_array(head.key_features(x[..., p, :], p), exact, "key_features", batch, head.rank)
            for p in range(n)
        ],
        axis=-2,
    )
    vals = [
        np.asarray(head.values(x[..., p, :], p), dtype=object if exact else np.float64)
        for p in range(n)
    ]
    if vals[0].ndim != len(batch) + 1:
        raise ValueError(f"values must return shape {batch + ('d',)}, got {vals[0].shape}")
    vals = np.stack(
        [_as_array(v, exact, "values", batch, vals[0].shape[-1]) for v in vals], axis=-2
    )
    a = _as_array(head.readout_weights(query), exact, "readout_weights", batch, vals.shape[-1])
    b = _as_array(head.readout_bias(query), exact, "readout_bias", batch, None)
    return phi_q, phi_k, vals, a, b


def _check_weights(alpha, exact: bool):
    if exact:
        if any(w < 0 for w in np.ravel(alpha)):
            raise ValueError("kernel weights must be nonnegative; the head produced a negative one")
    elif np.any(alpha < 0):
        raise ValueError("kernel weights must be nonnegative; the head produced a negative one")
    total = alpha.sum(axis=-1)
    if np.any(np.asarray(total <= 0, dtype=bool)):
        raise ValueError("the attention denominator sum_p alpha_p is 0 on some input")
    return total


def kernel_weights(
    head: KernelAttentionHead, sequences, convention="bidirectional", exact: bool = False
) -> np.ndarray:
    """alpha_p(x, x_p) for every position p: shape (..., n). Unnormalised."""
    x, query = _prepare(sequences, convention)
    phi_q, phi_k, *_ = _features(head, x, query, exact)
    return (phi_k * phi_q[..., None, :]).sum(axis=-1)


def kernel_attention(
    head: KernelAttentionHead, sequences, convention="bidirectional", exact: bool = False
) -> np.ndarray:
    """Direct form: y = <a(x), sum_p alpha_p v_p / sum_p alpha_p> + b(x), shape (...)."""
    x, query = _prepare(sequences, convention)
    phi_q, phi_k, vals, a, b = _features(head, x, query, exact)
    alpha = (phi_k * phi_q[..., None, :]).sum(axis=-1)
    total = _check_weights(alpha, exact)
    scores = (vals * a[..., None, :]).sum(axis=-1)  # f_p = <a(x), v_p>: per-token scores
    num = (alpha * scores).sum(axis=-1)
    return _divide(num, total, exact) + b


def kernel_attention_sketch(
    head: KernelAttentionHead, sequences, convention="bidirectional", exact: bool = False
) -> np.ndarray:
    """Sketch form: compress keys into (S, u), then y = <a, phi_Q^T S> / (phi_Q^T u) + b."""
    x, query = _prepare(sequences, convention)
    phi_q, phi_k, vals, a, b = _features(head, x, query, exact)
    sketch_s, sketch_u = key_sketch(phi_k, vals)
    total = (phi_q * sketch_u).sum(axis=-1)
    _check_weights((phi_k * phi_q[..., None, :]).sum(axis=-1), exact)
    num = ((phi_q[..., :, None] * sketch_s).sum(axis=-2) * a).sum(axis=-1)
    return _divide(num, total, exact) + b


def kernel_attention_integer(head: KernelAttentionHead, sequences, convention="bidirectional"):
    """Exact output as integer (numerator, denominator) arrays, for heads whose maps return ints.

    y = num / den with num = sum_p alpha_p <a, v_p> + b sum_p alpha_p and den = sum_p alpha_p.
    Vectorised int64 arithmetic: the exhaustive checks of constructions use it at scale.
    """
    x, query = _prepare(sequences, convention)
    phi_q, phi_k, vals, a, b = _features(head, x, query, exact=False)
    ints = (
        [np.asarray(head.query_features(query))]
        + [np.asarray(f(x[..., 0, :], 0)) for f in (head.key_features, head.values)]
        + [np.asarray(head.readout_weights(query)), np.asarray(head.readout_bias(query))]
    )
    if not all(np.issubdtype(arr.dtype, np.integer) for arr in ints):
        raise TypeError("kernel_attention_integer needs a head whose maps return integer arrays")
    phi_q, phi_k, vals, a, b = (np.asarray(t).astype(np.int64) for t in (phi_q, phi_k, vals, a, b))
    alpha = (phi_k * phi_q[..., None, :]).sum(axis=-1)
    den = _check_weights(alpha, exact=False)
    num = (alpha * (vals * a[..., None, :]).sum(axis=-1)).sum(axis=-1) + b * den
    return num, den


def key_sketch(key_features: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """S = sum_p phi_K(x_p) v(x_p)^T of shape (..., r, d) and u = sum_p phi_K(x_p), (..., r)."""
    for name, arr in (("key_features", key_features), ("values", values)):
        if not isinstance(arr, np.ndarray) or arr.ndim < 2 or arr.dtype.kind not in "iufO":
            raise TypeError(f"{name} must be a numeric array of shape (..., n, r or d), got "
                            f"{type(arr).__name__} {getattr(arr, 'shape', '')}")
    if key_features.shape[:-1] != values.shape[:-1]:
        raise ValueError(f"key_features {key_features.shape} and values {values.shape} must "
                         "agree on (..., n)")
    sketch_s = (key_features[..., :, :, None] * values[..., :, None, :]).sum(axis=-3)
    return sketch_s, key_features.sum(axis=-2)


def softmax_attention(
    head: SoftmaxAttentionHead, sequences, convention="bidirectional"
) -> np.ndarray:
    """Dense softmax head in float64 (max-subtracted, so large temperatures do not overflow)."""
    check_instance(head, "head", SoftmaxAttentionHead)
    x, query = _prepare(sequences, convention)
    batch = x.shape[:-2]
    q = np.asarray(head.query_map(query), dtype=np.float64)
    k = np.asarray(head.key_map(x), dtype=np.float64)
    v = np.asarray(head.values(x), dtype=np.float64)
    a = np.asarray(head.readout_weights(query), dtype=np.float64)
    b = np.asarray(head.readout_bias(query), dtype=np.float64)
    if q.shape[:-1] != batch or k.shape[:-1] != x.shape[:-1] or k.shape[-1] != q.shape[-1]:
        raise ValueError(f"query_map/key_map shapes {q.shape}, {k.shape} do not match the input")
    if v.shape[:-1] != x.shape[:-1] or a.shape != batch + v.shape[-1:] or b.shape != batch:
        raise ValueError("values/readout shapes do not match the input")
    for name, arr in (
        ("query_map", q),
        ("key_map", k),
        ("values", v),
        ("readout_weights", a),
        ("readout_bias", b),
    ):
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{name} returned NaN or infinite entries")
    logits = (k * q[..., None, :]).sum(axis=-1)
    w = np.exp(logits - logits.max(axis=-1, keepdims=True))
    w /= w.sum(axis=-1, keepdims=True)
    return (w * (v * a[..., None, :]).sum(axis=-1)).sum(axis=-1) + b


def softmax_weights(head: SoftmaxAttentionHead, sequences, convention="bidirectional"):
    """Unnormalised softmax weights exp(<q(x), k(x_p)>) for every position: shape (..., n)."""
    check_instance(head, "head", SoftmaxAttentionHead)
    x, query = _prepare(sequences, convention)
    q = np.asarray(head.query_map(query), dtype=np.float64)
    k = np.asarray(head.key_map(x), dtype=np.float64)
    return np.exp((k * q[..., None, :]).sum(axis=-1))


def _divide(num, den, exact: bool):
    if exact:
        out = np.empty(np.shape(num), dtype=object)
        flat_n, flat_d = (
            np.ravel(np.asarray(num, dtype=object)),
            np.ravel(np.asarray(den, dtype=object)),
        )
        out.reshape(-1)[:] = [Fraction(nn) / Fraction(dd) for nn, dd in zip(flat_n, flat_d)]
        return out
    return num / den


def kernel_attention_torch(query_features, key_features, values, readout_weights, readout_bias):
    """Torch forward pass of an NKA head, batched over any leading dims.

    query_features (..., r) >= 0, key_features (..., n, r) >= 0, values (..., n, d),
    readout_weights (..., d), readout_bias (...) -> (...).
    """
    import torch

    for name, t in (("query_features", query_features), ("key_features", key_features),
                    ("values", values), ("readout_weights", readout_weights),
                    ("readout_bias", readout_bias)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dtype == torch.bool or t.is_complex() or not torch.isfinite(t).all():
            raise ValueError(f"{name} must be a finite real tensor")
    for name, t in (("query_features", query_features), ("key_features", key_features)):
        if (t < 0).any():
            raise ValueError(f"{name} must be >= 0 (nonnegative kernel attention)")
    try:
        alpha = torch.einsum("...r,...nr->...n", query_features, key_features)
        scores = torch.einsum("...nd,...d->...n", values, readout_weights)
        total = alpha.sum(-1)
        out = (alpha * scores).sum(-1) / total + readout_bias
    except RuntimeError as exc:  # shapes that do not fit together
        raise ValueError(f"query_features, key_features, values, readout_weights and "
                         f"readout_bias do not fit together: {exc}") from exc
    if (total == 0).any():
        raise ValueError("query_features: the attention weights sum to 0 on some input (a "
                         "query feature vector orthogonal to every key, e.g. all zero): the "
                         "head is undefined there")
    return out
