"""Every explicit head of the book: chapter 1 (``thm-rank-one``), chapter 2 (table heads,
``lem-gap-domination``), chapter 3 (exact heads on a witness family F(S),
``thm-exponential-rank``) and chapter 4 (``prop-dense-softmax``)."""

from __future__ import annotations

from fractions import Fraction
from numbers import Rational

import numpy as np

from companion.bounds.gap_domination import min_error_for_ratio
from companion.bounds.witness import WitnessFamily
from companion.checks import (
    check_beta,
    check_float,
    check_fraction,
    check_instance,
    check_int,
    check_length,
    check_token,
)
from companion.core.attention import KernelAttentionHead, SoftmaxAttentionHead
from companion.core.task import all_tokens, check_convention, query_index, token_index

__all__ = ["rank_one_head", "rank_one_length_three_worst_inputs", "softmax_min_ip_head",
           "softmax_kernel_head", "balanced_link_head", "indicator_head",
           "query_indicator_head", "spread_query_head"]

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


def balanced_link_head(x, z, z_prime, ratio, n: int, shift=None,
                       convention: str = "bidirectional") -> KernelAttentionHead:
    """A rank-1 head on the link (x; z, z') with D(z)/D(z') = ratio, scores <x,z> - shift; shift
    None: the balanced shift, error exactly :func:`min_error_for_ratio` (Fractions: exact)."""
    x = check_token(x, "x")
    z = check_token(z, "z", x.shape[0])
    z_prime = check_token(z_prime, "z_prime", x.shape[0])
    n = check_length(n)
    check_convention(convention)
    g = int(x @ z_prime) - int(x @ z)
    if g < 1:
        raise ValueError(f"need <x,z> < <x,z'> (gap g >= 1), got gap {g}")
    exact = isinstance(ratio, Rational) and not isinstance(ratio, bool)
    ratio = (check_fraction if exact else check_float)(ratio, "ratio (D(z)/D(z'))", 0,
                                                        low_open=True)
    shift = (min_error_for_ratio(ratio, g, n, 1) if shift is None else
             (check_fraction if exact else check_float)(shift, "shift"))
    q = query_index(n, convention)
    dtype = object if exact else np.float64
    one = Fraction(1) if exact else 1.0

    def key_weight(tokens, p):
        tokens = np.asarray(tokens)
        is_z = np.all(tokens == z, axis=-1)
        w = np.where(is_z, ratio if exact else float(ratio), one).astype(dtype)
        if p == q:
            w = w * 0
        return w[..., None]

    return KernelAttentionHead(
        rank=1,
        query_features=lambda t: np.full(np.shape(t)[:-1] + (1,), one, dtype=dtype),
        key_features=key_weight,
        values=lambda t, p: np.asarray(t, dtype=np.int64).astype(dtype),
        readout_weights=lambda t: np.asarray(t, dtype=np.int64).astype(dtype),
        readout_bias=lambda t: np.full(np.shape(t)[:-1], -shift, dtype=dtype),
    )


def _rows(tokens, row_of, r: int, dtype=object) -> np.ndarray:
    """row_of(token bytes), r entries, for every token of `tokens`: shape (..., r)."""
    tokens = np.asarray(tokens, dtype=np.int64)
    out = np.zeros(tokens.shape[:-1] + (r,), dtype=dtype)
    view = out.reshape(-1, r)
    for k, tok in enumerate(tokens.reshape(-1, tokens.shape[-1])):
        view[k] = row_of(tok.tobytes())
    return out


def _one_hot(tokens, index: dict, r: int) -> np.ndarray:
    """Indicator features e_index[token] (a zero row for tokens outside `index`): (..., r)."""
    eye = np.eye(r, dtype=np.int64)
    return _rows(tokens, lambda b: eye[index[b]] if b in index else 0, r, np.int64)


def _powers(ov: np.ndarray, base: int, zero: bool = False) -> np.ndarray:
    """base^-ov entrywise as Fractions (0 everywhere if zero: the query's own slot)."""
    out = np.empty(ov.shape, dtype=object)
    out.reshape(-1)[:] = [Fraction(0) if zero else Fraction(1, base ** int(v)) for v in ov.ravel()]
    return out


def _family_head(r: int, query_features, key_features, bias=None) -> KernelAttentionHead:
    """The heads on F(S): values v(z) = z, readout <x, o> + bias (None: 0)."""
    return KernelAttentionHead(
        rank=r, query_features=query_features, key_features=key_features,
        values=lambda z, p: np.asarray(z, dtype=np.int64),
        readout_weights=lambda x: np.asarray(x, dtype=np.int64),
        readout_bias=lambda x: (np.zeros(np.shape(x)[:-1], dtype=np.int64) if bias is None
                                else np.full(np.shape(x)[:-1], bias, dtype=object)))


def _check_family_and_base(family, base) -> tuple[int, int, int]:
    """(n, query position, base) for the indicator heads; base > n - 2 keeps every error < 1/2."""
    check_instance(family, "family", WitnessFamily)
    n = family.n
    base = 2 * n if base is None else check_int(base, f"base (above n - 2 = {n - 2})", n - 1)
    return n, family.query_position, base


def indicator_head(family: WitnessFamily, base: int | None = None) -> KernelAttentionHead:
    """The exact head with one feature per key token: phi_K(z) = e_z, phi_Q(x)_z = base^-<x,z>;
    error (n-2) g / (base^g + n - 2) < 1/2 on a mixed sequence of gap g."""
    n, q, base = _check_family_and_base(family, base)
    key_ids = sorted(set(family.token_ids[:, [p for p in range(n) if p != q]].ravel().tolist()))
    keys = family.tokens[key_ids]
    index, r = token_index(keys), len(keys)
    return _family_head(r, lambda x: _powers(np.asarray(x, dtype=np.int64) @ keys.T, base),
                        lambda z, p: _one_hot(z, index if p != q else {}, r))


def query_indicator_head(family: WitnessFamily, base: int | None = None) -> KernelAttentionHead:
    """The exact head of rank |S|: phi_Q(x) = e_x, phi_K(z)_x = base^-<x,z>, the kernel (and
    error) of :func:`indicator_head`."""
    n, q, base = _check_family_and_base(family, base)
    S = family.S
    index, r = token_index(S), len(S)
    return _family_head(r, lambda x: _one_hot(x, index, r),
                        lambda z, p: _powers(np.asarray(z, dtype=np.int64) @ S.T, base, p == q))


def spread_query_head(family: WitnessFamily, eta=Fraction(1, 1000),
                      tau=Fraction(1, 10**4)) -> KernelAttentionHead:
    """An exact head of rank |S| - 1: one-hot queries but one, s, spread over all; scores shift
    by 1/2 - eta, so a gap-g link needs a weight ratio above l (g - 1 + eta)/(1 - eta)."""
    check_instance(family, "family", WitnessFamily)
    eta = check_fraction(eta, "eta", 0, Fraction(1, 2), low_open=True, high_open=True)
    tau = check_fraction(tau, "tau", 0, 1, low_open=True, high_open=True)
    cert, n, q = family.certificate, family.n, family.query_position
    S = np.asarray(cert.S, dtype=np.int64)
    N = len(S)
    delta = Fraction(1, 2) - eta

    def need(g: int) -> Fraction:  # weight ratio that makes a gap-g link exact, plus 0.1%
        return (n - 2) * (g - 1 + eta) / (1 - eta) * Fraction(1001, 1000)

    single = [all(len(cert.gaps[(k, s)]) == 1 and len(cert.gaps[(s, k)]) == 1
                  for k in range(N) if k != s) for s in range(N)]
    if not any(single):
        raise ValueError("family must have a query whose ladders are all single links "
                         "(spread_query_head spreads that query)")
    s = max(i for i in range(N) if single[i])
    others = [k for k in range(N) if k != s]
    column = {k: c for c, k in enumerate(others)}
    comp_s = tuple((1 - S[s]).tolist())
    weights: dict[tuple, list] = {}  # key token -> its entries, one per one-hot query

    def entry(token, k, value):
        weights.setdefault(token, [Fraction(0)] * (N - 1))[column[k]] = value

    for k in others:
        for j in range(N):
            if j == k:
                continue
            chain, gaps = cert.chains[(k, j)], cert.gaps[(k, j)]
            entry(chain[0], k, Fraction(1))
            if len(gaps) == 1:
                if chain[-1] != comp_s:
                    entry(chain[-1], k, tau)
                continue
            w = Fraction(1)
            for token, g in zip(chain[1:], gaps, strict=True):
                w /= need(g)
                entry(token, k, w)
    lower = max(need(cert.gaps[(s, j)][0]) * sum(weights[cert.chains[(s, j)][-1]])
                for j in others) / (N - 1)
    upper = min(1 / need(cert.gaps[(k, s)][0]) for k in others)
    if not lower < upper:
        raise ValueError(f"no spread weight c works for this family (and eta, tau): need "
                         f"{float(lower):.4f} < c < {float(upper):.4f}")
    c = (lower + upper) / 2
    for k in others:
        entry(comp_s, k, c)
    index = {bytes(np.asarray(t, dtype=np.int64).tobytes()): v for t, v in weights.items()}
    eye, zero = np.eye(N - 1, dtype=np.int64), [Fraction(0)] * (N - 1)
    rows = {S[k].tobytes(): eye[column[k]] for k in others} | {S[s].tobytes(): 1}
    return _family_head(
        N - 1, lambda x: _rows(x, lambda b: rows.get(b, 0), N - 1, np.int64),
        lambda z, p: _rows(z, lambda b: zero if p == q else index.get(b, zero), N - 1), -delta)


def rank_one_length_three_worst_inputs(m: int) -> np.ndarray:
    """(1^m, 0, 1^m), (1^m, 1^m, 0) (overshoot) and (1^m, 0, 0): the three inputs where the
    rank-1 head's error is its maximum m/3 (``prop-rank-one-length-three``); m <= 10**6."""
    m = check_int(m, "m (token width)", 1, 10**6)
    one, zero = np.ones(m, dtype=np.int64), np.zeros(m, dtype=np.int64)
    return np.array([[one, zero, one], [one, one, zero], [one, zero, zero]])
