"""Explicit heads from the paper: the rank-1 head of Theorem A and the softmax head of
Proposition F."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from .attention import KernelAttentionHead, SoftmaxAttentionHead


def _ones(x):
    return np.ones(np.shape(x)[:-1] + (1,), dtype=np.int64)


def rank_one_head() -> KernelAttentionHead:
    """Theorem A: uniform attention (phi = 1), v(z) = z, a(x) = 2x, b(x) = -|x|.

    Exact Min-IP at lengths 1 and 2 for every width m: y = <x, x + z> - |x| = <x, z>.
    """
    return KernelAttentionHead(
        rank=1,
        query_features=_ones,
        key_features=lambda z, p: _ones(z),
        values=lambda z, p: np.asarray(z, dtype=np.int64),
        readout_weights=lambda x: 2 * np.asarray(x, dtype=np.int64),
        readout_bias=lambda x: -np.asarray(x, dtype=np.int64).sum(axis=-1),
    )


def softmax_min_ip_head(beta: float) -> SoftmaxAttentionHead:
    """Proposition F: scores <-beta x, z> in R^m, v(z) = z, readout y = <x, o>.

    Attention concentrates on the tokens of least overlap with the query; error <= (n-1)e^-beta.
    """
    if isinstance(beta, bool) or not isinstance(beta, (int, float, np.integer, np.floating)):
        raise TypeError(f"beta must be a real number, got {type(beta).__name__}")
    if not math.isfinite(beta) or beta < 0:
        raise ValueError(f"beta must be a finite number >= 0, got {beta}")
    beta = float(beta)
    return SoftmaxAttentionHead(
        query_map=lambda x: -beta * np.asarray(x, dtype=np.float64),
        key_map=lambda z: np.asarray(z, dtype=np.float64),
        values=lambda z: np.asarray(z, dtype=np.float64),
        readout_weights=lambda x: np.asarray(x, dtype=np.float64),
        readout_bias=lambda x: np.zeros(np.shape(x)[:-1]),
    )


# --- Theorem A's head at length 3: the exact worst case ------------------------------------
#
# With uniform weights over (x, z, z') the head returns y = (2a + 2b - w)/3, where w = |x|,
# a = <x, z>, b = <x, z'>, and the target is min(a, b). With a <= b <= w <= m the error is
# y - t = (2b - a - w)/3, which lies in [-(w - a)/3, (b - a)/3] and so in [-m/3, m/3].


def rank_one_length_three_error(w: int, a: int, b: int) -> Fraction:
    """y - t of the rank-1 head on a length-3 input with |x| = w and key overlaps a, b:
    (2a + 2b - w)/3 - min(a, b), exactly. Requires 0 <= a, b <= w."""
    for name, v in (("w", w), ("a", a), ("b", b)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"{name} must be an int, got {type(v).__name__}")
    if not (0 <= a <= w and 0 <= b <= w):
        raise ValueError(f"overlaps must satisfy 0 <= a, b <= w = |x|, got w={w}, a={a}, b={b}")
    return Fraction(2 * int(a) + 2 * int(b) - int(w), 3) - min(int(a), int(b))


def rank_one_length_three_max_error(m: int) -> Fraction:
    """m/3: the rank-1 head's largest |y - t| over all length-3 inputs on {0,1}^m (proved:
    |2b - a - w| <= m whenever 0 <= a <= b <= w <= m)."""
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1:
        raise ValueError(f"m (token width) must be an int >= 1, got {m!r}")
    return Fraction(int(m), 3)


def rank_one_length_three_worst_inputs(m: int) -> np.ndarray:
    """The three length-3 sequences (query first) on which the rank-1 head's error is m/3:
    (1^m, 0, 1^m) and (1^m, 1^m, 0), overshooting by m/3, and (1^m, 0, 0), undershooting.
    Shape (3, 3, m); the proof shows there are no others."""
    rank_one_length_three_max_error(m)  # validates m
    one, zero = np.ones(m, dtype=np.int64), np.zeros(m, dtype=np.int64)
    return np.array([[one, zero, one], [one, one, zero], [one, zero, zero]])
