"""One normalised attention head, NKA (alpha_p(x, z) = <phi_Q(x), phi_K^(p)(z)> >= 0, rank r,
y = <a(x), sum_p alpha_p v_p / sum_p alpha_p> + b(x)) or dense softmax (alpha = exp(<q, k>)),
in float64 or exactly (chapter 1: ``thm-rank-one``, ``obs-no-zero-error``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from companion.checks import check_instance, check_tokens
from companion.core.task import check_convention, query_index

__all__ = ["kernel_attention", "softmax_attention", "softmax_weights"]

TokenMap = Callable[[np.ndarray], np.ndarray]
PositionalMap = Callable[[np.ndarray, int], np.ndarray]


@dataclass(frozen=True)
class KernelAttentionHead:
    """A normalised NKA head of rank r: query_features(x), key_features(z, p) -> (..., r);
    values(z, p), readout_weights(x) -> (..., d); readout_bias(x) -> (...)."""

    rank: int
    query_features: TokenMap
    key_features: PositionalMap
    values: PositionalMap
    readout_weights: TokenMap
    readout_bias: TokenMap


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
    return x, x[..., query_index(x.shape[-2], check_convention(convention)), :]


def _table(value, dtype, name: str, shape: tuple) -> np.ndarray:
    arr = np.asarray(value)
    if dtype is np.int64 and not np.issubdtype(arr.dtype, np.integer):
        raise TypeError("kernel_attention_integer needs a head whose maps return integer arrays")
    arr = arr.astype(dtype)
    if arr.shape != shape:
        raise ValueError(f"{name} must return shape {shape}, got {arr.shape}")
    if dtype is np.float64 and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} returned NaN or infinite entries")
    return arr


def _features(head: KernelAttentionHead, x, query, dtype):
    """Query features (..., r), key features (..., n, r), values (..., n, d), a, b."""
    check_instance(head, "head", KernelAttentionHead)
    batch, n, r = x.shape[:-2], x.shape[-2], head.rank
    phi_q = _table(head.query_features(query), dtype, "query_features", batch + (r,))
    phi_k = np.stack([_table(head.key_features(x[..., p, :], p), dtype, "key_features",
                             batch + (r,)) for p in range(n)], axis=-2)
    vals = [np.asarray(head.values(x[..., p, :], p)) for p in range(n)]
    d = vals[0].shape[-1] if vals[0].ndim == len(batch) + 1 else "d"
    vals = np.stack([_table(v, dtype, "values", batch + (d,)) for v in vals], axis=-2)
    a = _table(head.readout_weights(query), dtype, "readout_weights", batch + (d,))
    b = _table(head.readout_bias(query), dtype, "readout_bias", batch)
    return phi_q, phi_k, vals, a, b


def _weights_total(alpha) -> np.ndarray:
    if np.any(alpha < 0):
        raise ValueError("kernel weights must be nonnegative; the head produced a negative one")
    total = alpha.sum(axis=-1)
    if np.any(total <= 0):
        raise ValueError("the attention denominator sum_p alpha_p is 0 on some input")
    return total


def kernel_terms(head: KernelAttentionHead, sequences, convention="bidirectional",
                 exact: bool = False):
    """The one evaluator of a kernel head: (alpha, scores, b) with alpha (..., n) the weights
    <phi_Q(x), phi_K^(p)(x_p)> of any sign, scores (..., n) the values' readouts
    <a(x), v_p(x_p)> and b (...) the bias, so y = sum_p alpha_p scores_p / sum_p alpha_p + b."""
    x, query = _prepare(sequences, convention)
    phi_q, phi_k, vals, a, b = _features(head, x, query, object if exact else np.float64)
    alpha = (phi_k * phi_q[..., None, :]).sum(axis=-1)
    return alpha, (vals * a[..., None, :]).sum(axis=-1), b


def kernel_weights(head: KernelAttentionHead, sequences, convention="bidirectional",
                   exact: bool = False) -> np.ndarray:
    """alpha_p(x, x_p) for every position p: shape (..., n). Unnormalised."""
    x, query = _prepare(sequences, convention)
    phi_q, phi_k, *_ = _features(head, x, query, object if exact else np.float64)
    return (phi_k * phi_q[..., None, :]).sum(axis=-1)


def kernel_attention(head: KernelAttentionHead, sequences, convention="bidirectional",
                     exact: bool = False) -> np.ndarray:
    """y = <a(x), sum_p alpha_p v_p / sum_p alpha_p> + b(x), shape (...)."""
    alpha, scores, b = kernel_terms(head, sequences, convention, exact)
    total = _weights_total(alpha)
    num = (alpha * scores).sum(axis=-1)
    if not exact:
        return num / total + b
    out = np.empty(np.shape(num), dtype=object)
    out.reshape(-1)[:] = [Fraction(u) / Fraction(v) for u, v in
                          zip(np.ravel(num).tolist(), np.ravel(total).tolist())]
    return out + b


def kernel_attention_integer(head: KernelAttentionHead, sequences, convention="bidirectional"):
    """(num, den) int64 arrays with y = num / den for heads whose maps return ints (chapter 1's
    exhaustive checks): den = sum_p alpha_p, num = sum_p alpha_p <a, v_p> + b den."""
    x, query = _prepare(sequences, convention)
    phi_q, phi_k, vals, a, b = _features(head, x, query, np.int64)
    alpha = (phi_k * phi_q[..., None, :]).sum(axis=-1)
    den = _weights_total(alpha)
    return (alpha * (vals * a[..., None, :]).sum(axis=-1)).sum(axis=-1) + b * den, den


def _softmax_scores(head: SoftmaxAttentionHead, sequences, convention):
    check_instance(head, "head", SoftmaxAttentionHead)
    x, query = _prepare(sequences, convention)
    q = np.asarray(head.query_map(query), dtype=np.float64)
    logits = (np.asarray(head.key_map(x), dtype=np.float64) * q[..., None, :]).sum(axis=-1)
    return x, query, logits


def softmax_attention(head: SoftmaxAttentionHead, sequences,
                      convention="bidirectional") -> np.ndarray:
    """Dense softmax head in float64 (max-subtracted, so large temperatures do not overflow)."""
    x, query, logits = _softmax_scores(head, sequences, convention)
    w = np.exp(logits - logits.max(axis=-1, keepdims=True))
    w /= w.sum(axis=-1, keepdims=True)
    scores = (np.asarray(head.values(x), dtype=np.float64)
              * np.asarray(head.readout_weights(query), dtype=np.float64)[..., None, :])
    return (w * scores.sum(axis=-1)).sum(axis=-1) + np.asarray(head.readout_bias(query),
                                                            dtype=np.float64)


def softmax_weights(head: SoftmaxAttentionHead, sequences, convention="bidirectional"):
    """Unnormalised softmax weights exp(<q(x), k(x_p)>) for every position: shape (..., n)."""
    return np.exp(_softmax_scores(head, sequences, convention)[2])
