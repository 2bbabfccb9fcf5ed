"""Explicit heads from the paper: the rank-1 head of Theorem A and the softmax head of
Proposition F."""

from __future__ import annotations

import math

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
