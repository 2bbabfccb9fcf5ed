"""The explicit heads of chapter 1 (``thm-rank-one``) and chapter 4 (``prop-dense-softmax``),
and table heads; Lemma B's balanced link head is in ``bounds.gap_domination`` and the heads on
a witness family F(S) (chapter 3) in ``sandwich.heads``."""

from __future__ import annotations

import numpy as np

from companion.checks import check_beta, check_int
from companion.core.attention import KernelAttentionHead, SoftmaxAttentionHead
from companion.core.task import all_tokens

__all__ = ["rank_one_head", "rank_one_length_three_worst_inputs", "softmax_min_ip_head",
           "softmax_kernel_head"]

#: Widest lookup-table heads and largest key table n x 2**m x 2**m (float64, 128 MB).
MAX_TABLE_WIDTH = 12
MAX_KEY_TABLE = 2**24


def _ones(x):
    return np.ones(np.shape(x)[:-1] + (1,), dtype=np.int64)


def rank_one_head() -> KernelAttentionHead:
    """Theorem A: uniform attention (phi = 1), v(z) = z, a(x) = 2x, b(x) = -|x|; exact at
    lengths 1 and 2 for every width m: y = <x, x + z> - |x| = <x, z>."""
    return KernelAttentionHead(
        rank=1,
        query_features=_ones,
        key_features=lambda z, p: _ones(z),
        values=lambda z, p: np.asarray(z, dtype=np.int64),
        readout_weights=lambda x: 2 * np.asarray(x, dtype=np.int64),
        readout_bias=lambda x: -np.asarray(x, dtype=np.int64).sum(axis=-1),
    )


def softmax_min_ip_head(beta: float) -> SoftmaxAttentionHead:
    """Proposition F: scores <-beta x, z> in R^m, v(z) = z, readout y = <x, o>; error <=
    (n-1) e^-beta (attention concentrates on the tokens of least overlap with the query)."""
    beta = check_beta(beta)
    return SoftmaxAttentionHead(
        query_map=lambda x: -beta * np.asarray(x, dtype=np.float64),
        key_map=lambda z: np.asarray(z, dtype=np.float64),
        values=lambda z: np.asarray(z, dtype=np.float64),
        readout_weights=lambda x: np.asarray(x, dtype=np.float64),
        readout_bias=lambda x: np.zeros(np.shape(x)[:-1]),
    )


def _codes(tokens: np.ndarray, m: int) -> np.ndarray:
    return np.asarray(tokens).astype(np.int64) @ (1 << np.arange(m - 1, -1, -1, dtype=np.int64))


def lookup_head(query_features, key_features, values, readout_weights,
                readout_bias) -> KernelAttentionHead:
    """An NKA head of tables indexed by the tokens' binary codes: query_features (2**m, r),
    key_features (n, 2**m, r), values (n, 2**m, d), readout_weights (2**m, d), readout_bias."""
    qf, kf, vals, a, b = (np.asarray(t) for t in (query_features, key_features, values,
                                                   readout_weights, readout_bias))
    m, n = len(qf).bit_length() - 1, len(kf)

    def at(table, p):
        return table[check_int(p, "position p", 0, n - 1)]

    return KernelAttentionHead(
        rank=qf.shape[1],
        query_features=lambda x: qf[_codes(x, m)],
        key_features=lambda z, p: at(kf, p)[_codes(z, m)],
        values=lambda z, p: at(vals, p)[_codes(z, m)],
        readout_weights=lambda x: a[_codes(x, m)],
        readout_bias=lambda x: b[_codes(x, m)],
    )


def softmax_kernel_head(beta: float, m: int, n: int) -> KernelAttentionHead:
    """Proposition F's kernel exp(-beta <x,z>) as a table NKA head (rank 2**m), v(z) = z,
    readout <x, o>. Limits: m <= 12 and n * 4**m <= 2**24 (the key table)."""
    m = check_int(m, "m", 1, MAX_TABLE_WIDTH)
    n = check_int(n, "n", 1, MAX_KEY_TABLE // 4**m)
    beta = check_beta(beta)
    tokens = all_tokens(m)
    kernel = np.exp(-beta * (tokens @ tokens.T))  # kernel[x, z]
    return lookup_head(np.eye(2**m), np.repeat(kernel.T[None], n, axis=0),
                       np.repeat(tokens[None].astype(np.float64), n, axis=0),
                       tokens.astype(np.float64), np.zeros(2**m))


def rank_one_length_three_worst_inputs(m: int) -> np.ndarray:
    """(1^m, 0, 1^m), (1^m, 1^m, 0) (overshoot) and (1^m, 0, 0): the three inputs where the
    rank-1 head's error is its maximum m/3 (``prop-rank-one-length-three``); m <= 10**6."""
    m = check_int(m, "m (token width)", 1, 10**6)
    one, zero = np.ones(m, dtype=np.int64), np.zeros(m, dtype=np.int64)
    return np.array([[one, zero, one], [one, one, zero], [one, zero, zero]])
