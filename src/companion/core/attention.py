"""One normalised attention head, NKA (alpha_p(x, z) = <phi_Q(x), phi_K^(p)(z)> >= 0, rank r,
y = <a(x), sum_p alpha_p v_p / sum_p alpha_p> + b(x)) or dense softmax (alpha = exp(<q, k>)),
in float64 or exactly (chapter 1: ``thm-rank-one``, ``obs-no-zero-error``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from companion.checks import check_bool, check_exact_array, check_instance, check_tokens
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


def _check_head(head, kind, sequences, convention) -> tuple[np.ndarray, str]:
    """(0/1 tokens as int64, the convention) for a head of class `kind`."""
    check_instance(head, "head", kind)
    return check_tokens(sequences), check_convention(convention)


def _query(x: np.ndarray, convention: str) -> np.ndarray:
    return x[..., query_index(x.shape[-2], convention), :]


def _table(value, dtype, name: str, shape: tuple) -> np.ndarray:
    """A map's output as float64 (finite), as exact numbers (dtype object: checks.check_exact,
    so float maps are read exactly) or as integers (dtype int: an int or object array)."""
    if dtype is object:
        arr = check_exact_array(value, name)
    else:
        arr = np.asarray(value)
        if dtype is int and not (arr.dtype.kind in "iu" or (arr.dtype == object and all(
                isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in arr.flat))):
            raise TypeError("head: exhaustive checks need maps that return integer arrays, "
                            f"but {name} returned dtype {arr.dtype}")
        arr = arr.astype(object if dtype is int else dtype)
    if arr.shape != shape:
        raise ValueError(f"{name} must return shape {shape}, got {arr.shape}")
    if dtype is np.float64 and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} returned NaN or infinite entries")
    return arr


def _features(head: KernelAttentionHead, x, query, dtype):
    """Query features (..., r), key features (..., n, r), values (..., n, d), a, b."""
    batch, n, r = x.shape[:-2], x.shape[-2], head.rank
    phi_q = _table(head.query_features(query), dtype, "head.query_features", batch + (r,))
    phi_k = np.stack([_table(head.key_features(x[..., p, :], p), dtype, "head.key_features",
                             batch + (r,)) for p in range(n)], axis=-2)
    vals = [np.asarray(head.values(x[..., p, :], p)) for p in range(n)]
    d = vals[0].shape[-1] if vals[0].ndim == len(batch) + 1 else "d"
    vals = np.stack([_table(v, dtype, "head.values", batch + (d,)) for v in vals], axis=-2)
    a = _table(head.readout_weights(query), dtype, "head.readout_weights", batch + (d,))
    b = _table(head.readout_bias(query), dtype, "head.readout_bias", batch)
    return phi_q, phi_k, vals, a, b


def _weights_total(alpha) -> np.ndarray:
    if np.any(alpha < 0):
        raise ValueError("kernel weights must be nonnegative; the head produced a negative one")
    total = alpha.sum(axis=-1)
    if np.any(total <= 0):
        raise ValueError("the attention denominator sum_p alpha_p is 0 on some input")
    return total


def kernel_terms(head: KernelAttentionHead, x: np.ndarray, convention: str,
                 exact: bool = False, scaled: bool = False):
    """The one evaluator of a kernel head, on checked tokens: (alpha, scores, b) with alpha
    (..., n) the weights <phi_Q(x), phi_K^(p)(x_p)> of any sign, scores (..., n) the values'
    readouts <a(x), v_p(x_p)> and b (...) the bias, so y = sum_p alpha_p scores_p / sum_p
    alpha_p + b. ``scaled`` (float only): alpha times a power of two per sequence, which
    leaves y unchanged bit for bit and keeps every product of two features finite."""
    phi_q, phi_k, vals, a, b = _features(head, x, _query(x, convention),
                                         object if exact else np.float64)
    if scaled:
        phi_q, phi_k = _scale_out(phi_q, -1), _scale_out(phi_k, (-2, -1))
    alpha = (phi_k * phi_q[..., None, :]).sum(axis=-1)
    return alpha, (vals * a[..., None, :]).sum(axis=-1), b


def kernel_weights(head: KernelAttentionHead, sequences, convention="bidirectional",
                   exact: bool = False) -> np.ndarray:
    """alpha_p(x, x_p) for every position p: shape (..., n), unnormalised (checked tokens)."""
    x = np.asarray(sequences)
    phi_q, phi_k, *_ = _features(head, x, _query(x, convention), object if exact else np.float64)
    return (phi_k * phi_q[..., None, :]).sum(axis=-1)


def _scale_out(features: np.ndarray, axes) -> np.ndarray:
    """features times a power of two per sequence (max |entry| in [1/2, 1)): an exact scaling,
    so y is unchanged bit for bit and no product of two features overflows float64."""
    top = np.max(np.abs(features), axis=axes, keepdims=True) if features.size else 0.0
    return np.ldexp(features, -np.frexp(top)[1])


def kernel_attention(head: KernelAttentionHead, sequences, convention="bidirectional",
                     exact: bool = False) -> np.ndarray:
    """y = <a(x), sum_p alpha_p v_p / sum_p alpha_p> + b(x), shape (...); with `exact` every
    map's output is read exactly (ints and Fractions) and y is exact."""
    x, convention = _check_head(head, KernelAttentionHead, sequences, convention)
    return attention_output(head, x, convention, check_bool(exact, "exact"))


def attention_output(head: KernelAttentionHead, x: np.ndarray, convention: str,
                     exact: bool = False) -> np.ndarray:
    """:func:`kernel_attention` on checked arguments (int64 tokens): the package's own calls."""
    alpha, scores, b = kernel_terms(head, x, convention, exact, scaled=not exact)
    y = weighted_mean(alpha, scores, _weights_total(alpha), exact) + b
    if not (exact or np.all(np.isfinite(y))):
        raise ValueError("head: its values times readout weights overflow float64 on some "
                         "input; use exact=True")
    return y


def weighted_mean(alpha, scores, total, exact: bool) -> np.ndarray:
    """sum_p alpha_p scores_p / total (Fractions with `exact`): a head's output less its bias."""
    num = (alpha * scores).sum(axis=-1)
    if not exact:
        return num / total
    out = np.empty(np.shape(num), dtype=object)
    out.reshape(-1)[:] = [Fraction(u) / Fraction(v) for u, v in
                          zip(np.ravel(num).tolist(), np.ravel(total).tolist())]
    return out


#: Most exhaustive sequences evaluated in Python ints when a head's integers exceed int64.
MAX_BIG_INTEGER_SEQUENCES = 2**14


def kernel_attention_integer(head: KernelAttentionHead, sequences, convention="bidirectional"):
    """(num, den) with y = num / den for heads whose maps return ints (chapter 1's exhaustive
    checks, on checked tokens): den = sum_p alpha_p, num = sum_p alpha_p <a, v_p> + b den; int64
    arrays when a bound on every product fits int64, else object arrays of Python ints."""
    x = np.asarray(sequences)
    phi_q, phi_k, vals, a, b = _features(head, x, _query(x, convention), int)
    n, (r, d) = x.shape[-2], (phi_q.shape[-1], vals.shape[-1])
    top = [max(map(abs, t.flat), default=0) for t in (phi_q, phi_k, vals, a, b)]
    alpha_top = r * top[0] * top[1]
    if n * alpha_top * (d * top[2] * top[3] + top[4]) < 2**62:
        phi_q, phi_k, vals, a, b = (t.astype(np.int64) for t in (phi_q, phi_k, vals, a, b))
    elif len(x) > MAX_BIG_INTEGER_SEQUENCES:
        raise ValueError(f"head: its integers (up to 2**{max(top).bit_length()}) exceed int64 "
                         f"products, and checks of more than MAX_BIG_INTEGER_SEQUENCES = "
                         f"{MAX_BIG_INTEGER_SEQUENCES} sequences are int64 only")
    alpha = (phi_k * phi_q[..., None, :]).sum(axis=-1)
    den = _weights_total(alpha)
    return (alpha * (vals * a[..., None, :]).sum(axis=-1)).sum(axis=-1) + b * den, den


def _softmax_scores(head: SoftmaxAttentionHead, x, convention):
    query = _query(x, convention)
    q = np.asarray(head.query_map(query), dtype=np.float64)
    logits = (np.asarray(head.key_map(x), dtype=np.float64) * q[..., None, :]).sum(axis=-1)
    return x, query, logits


def softmax_attention(head: SoftmaxAttentionHead, sequences,
                      convention="bidirectional") -> np.ndarray:
    """Dense softmax head in float64 (max-subtracted, so large temperatures do not overflow)."""
    x, convention = _check_head(head, SoftmaxAttentionHead, sequences, convention)
    x, query, logits = _softmax_scores(head, x, convention)
    w = np.exp(logits - logits.max(axis=-1, keepdims=True))
    w /= w.sum(axis=-1, keepdims=True)
    scores = (np.asarray(head.values(x), dtype=np.float64)
              * np.asarray(head.readout_weights(query), dtype=np.float64)[..., None, :])
    return (w * scores.sum(axis=-1)).sum(axis=-1) + np.asarray(head.readout_bias(query),
                                                            dtype=np.float64)


def softmax_weights(head: SoftmaxAttentionHead, sequences, convention="bidirectional"):
    """Unnormalised softmax weights exp(<q(x), k(x_p)>) for every position: shape (..., n)."""
    x, convention = _check_head(head, SoftmaxAttentionHead, sequences, convention)
    return np.exp(_softmax_scores(head, x, convention)[2])
