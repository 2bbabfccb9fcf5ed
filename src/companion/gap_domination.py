"""Lemma B: the mediant identity and gap domination.

A head with error <= eps on the pure sequences (x, z, ..., z), (x, z', ..., z') and on every
arrangement of k copies of z and l copies of z' must put much more total weight on the worse
candidate: D(x;z) / D(x;z') >= c_{n,eps}(g) = (l/k) (g - 2 eps) / (2 eps), g = <x,z'> - <x,z>.

Sequences follow :mod:`companion.task`: the query sits at position 0 ("bidirectional") or at
position n-1 ("causal"); the other n-1 positions carry the keys. Heads are
:class:`companion.attention.KernelAttentionHead` with position-dependent key and value maps,
evaluated with the package's own evaluators, so every check here runs the real forward pass.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from itertools import combinations
from numbers import Rational

import numpy as np

from .attention import KernelAttentionHead, kernel_attention, kernel_weights
from .task import check_convention, check_tokens, query_index

#: Largest number of arrangements C(k+l, k) that :func:`mixed_sequences` materialises.
MAX_ARRANGEMENTS = 2**16

#: Largest token width for lookup-table heads (tables have 2**m rows per position).
MAX_TABLE_WIDTH = 12


# --------------------------------------------------------------------------- argument checks


def check_eps(eps) -> Fraction:
    """Error level eps in (0, 1/2] as a Fraction; eps = 1/2 is the limit valid for every
    head with error < 1/2 (the factor decreases in eps)."""
    if isinstance(eps, bool) or not isinstance(eps, (Rational, float, np.floating)):
        raise TypeError(
            f"eps must be a real number (int, Fraction or float), got {type(eps).__name__}")
    if isinstance(eps, (float, np.floating)) and not np.isfinite(eps):
        raise ValueError(f"eps must lie in (0, 1/2], got {eps}")
    value = Fraction(eps)
    if not 0 < value <= Fraction(1, 2):
        raise ValueError(f"eps must lie in (0, 1/2] (exact means error < 1/2), got {eps}")
    return value


def check_length(n) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"n must be an int, got {type(n).__name__}")
    if n < 3:
        raise ValueError(f"n (sequence length) must be >= 3 for gap domination, got {n}")
    return int(n)


def _check_int(value, name: str, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < low or (high is not None and value > high):
        accepted = f"[{low}, {high}]" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be an int in {accepted}, got {value}")
    return int(value)


def _check_copies(k, l) -> tuple[int, int]:
    """k copies of z and l copies of z' with k, l >= 1 (so n = 1 + k + l >= 3)."""
    k = _check_int(k, "k (copies of z)", 1)
    l = _check_int(l, "l (copies of z')", 1)
    if math.comb(k + l, k) > MAX_ARRANGEMENTS:
        raise ValueError(
            f"k={k}, l={l} give C(k+l, k) = {math.comb(k + l, k)} arrangements, above "
            f"MAX_ARRANGEMENTS={MAX_ARRANGEMENTS}; choose k + l smaller"
        )
    return k, l


def check_token(token, name: str, m: int | None = None) -> np.ndarray:
    """One 0/1 token of shape (m,) as int64 (width m checked when given)."""
    arr = check_tokens(token, name, min_ndim=1)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one token of shape (m,), got shape {arr.shape}")
    if m is not None and arr.shape[0] != m:
        raise ValueError(f"{name} must have width m = {m} like the query, got {arr.shape[0]}")
    return arr


def _check_head(head) -> KernelAttentionHead:
    if not isinstance(head, KernelAttentionHead):
        raise TypeError(f"head must be a KernelAttentionHead, got {type(head).__name__}")
    return head


# --------------------------------------------------------------------------- the factor


def gap_domination_factor(g, n: int = 3, eps=Fraction(1, 2), k: int = 1) -> Fraction:
    """c_{n,eps}(g) = (l/k) (g - 2 eps) / (2 eps) with l = n - 1 - k (exact).

    The default k = 1 maximises it. A value <= 0 proves nothing about the weight ratio.
    """
    n = check_length(n)
    eps = check_eps(eps)
    if isinstance(g, bool) or not isinstance(g, (int, np.integer)):
        raise TypeError(f"g (gap) must be an int, got {type(g).__name__}")
    if g < 1:
        raise ValueError(f"g (gap between overlaps) must be an int >= 1, got {g}")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= n - 2:
        raise ValueError(
            f"k (copies of the better key) must be an int in [1, n-2] = [1, {n - 2}], got {k}")
    l = n - 1 - k
    return Fraction(l, int(k)) * (int(g) - 2 * eps) / (2 * eps)


def split_gap_domination_factor(g, n: int, eps_pure, eps_mixed, k: int = 1) -> Fraction:
    """(l/k) (g - eps_P - eps_M) / (eps_P + eps_M): Lemma B with separate error budgets on the
    pure sequences (eps_P) and on the mixed arrangements (eps_M); equals c_{n,eps}(g) when
    eps_P = eps_M = eps. Budgets lie in [0, 1/2] and may not both be 0."""
    n = check_length(n)
    g = _check_int(g, "g (gap between overlaps)", 1)
    k = _check_int(k, "k (copies of z)", 1, n - 2)
    budgets = []
    for name, value in (("eps_pure", eps_pure), ("eps_mixed", eps_mixed)):
        if isinstance(value, bool) or not isinstance(value, (Rational, float, np.floating)):
            raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
        if isinstance(value, (float, np.floating)) and not np.isfinite(value):
            raise ValueError(f"{name} must lie in [0, 1/2], got {value}")
        value = Fraction(value)
        if not 0 <= value <= Fraction(1, 2):
            raise ValueError(f"{name} must lie in [0, 1/2], got {value}")
        budgets.append(value)
    total = budgets[0] + budgets[1]
    if total == 0:
        raise ValueError("eps_pure + eps_mixed must be > 0 (error 0 is impossible: Observation A')")
    return Fraction(n - 1 - k, k) * (g - total) / total


def min_error_for_ratio(ratio, g, n: int = 3, k: int = 1) -> float:
    """Lemma B solved for the error: a head with D(z)/D(z') = ratio has error at least
    l g / (2 (k ratio + l)) on the pure and mixed sequences of a link of gap g."""
    n = check_length(n)
    g = _check_int(g, "g (gap between overlaps)", 1)
    k = _check_int(k, "k (copies of z)", 1, n - 2)
    if isinstance(ratio, Rational) and not isinstance(ratio, bool):
        if ratio <= 0:
            raise ValueError(f"ratio (D(z)/D(z')) must be > 0, got {ratio}")
        return Fraction(n - 1 - k) * g / (2 * (k * Fraction(ratio) + n - 1 - k))
    r = np.asarray(ratio, dtype=np.float64)
    if not np.all(np.isfinite(r)) or np.any(r <= 0):
        raise ValueError("ratio (D(z)/D(z')) must be finite and > 0")
    out = (n - 1 - k) * g / (2.0 * (k * r + n - 1 - k))
    return float(out) if out.ndim == 0 else out


# --------------------------------------------------------------------------- sequences


def key_positions(n: int, convention: str = "bidirectional") -> list[int]:
    """The n-1 key positions (0-based): every position but the query's."""
    q = query_index(_check_int(n, "n", 2), convention)
    return [p for p in range(n) if p != q]


def pure_sequence(x, z, n: int, convention: str = "bidirectional") -> np.ndarray:
    """P_z = the query x and n-1 copies of z: shape (n, m); target min(|x|, <x,z>) = <x,z>."""
    x = check_token(x, "x")
    z = check_token(z, "z", x.shape[0])
    n = _check_int(n, "n (sequence length)", 2)
    check_convention(convention)
    seq = np.repeat(z[None, :], n, axis=0)
    seq[query_index(n, convention)] = x
    return seq


def arrangements(k: int, l: int) -> np.ndarray:
    """All C(k+l, k) ways to place k copies of z among k+l key slots: boolean (C, k+l),
    True where z sits; lexicographic order of the chosen slots."""
    k, l = _check_copies(k, l)
    slots = list(combinations(range(k + l), k))
    out = np.zeros((len(slots), k + l), dtype=bool)
    for row, chosen in enumerate(slots):
        out[row, list(chosen)] = True
    return out


def mixed_sequences(x, z, z_prime, k: int, l: int,
                    convention: str = "bidirectional") -> np.ndarray:
    """Every arrangement of k copies of z and l copies of z' in the key positions of a
    length n = 1 + k + l sequence with query x: shape (C(k+l, k), n, m); target <x,z> if
    <x,z> <= <x,z'>."""
    x = check_token(x, "x")
    z = check_token(z, "z", x.shape[0])
    z_prime = check_token(z_prime, "z_prime", x.shape[0])
    check_convention(convention)
    places = arrangements(k, l)
    n = 1 + k + l
    keys = np.where(places[:, :, None], z[None, None, :], z_prime[None, None, :])
    seqs = np.empty((len(places), n, x.shape[0]), dtype=np.int64)
    seqs[:, key_positions(n, convention), :] = keys
    seqs[:, query_index(n, convention), :] = x
    return seqs


# --------------------------------------------------------------------------- weights, mediant


def _total(values, exact: bool):
    if exact:
        return sum((Fraction(v) for v in np.ravel(values)), Fraction(0))
    return float(np.sum(values))


def total_weight(head, x, z, n: int, convention: str = "bidirectional", exact: bool = False):
    """D(x;z) = alpha_q(x,x) + sum over key positions p of alpha_p(x,z): the total
    unnormalised weight of the pure sequence P_z."""
    _check_head(head)
    n = check_length(n)
    alpha = kernel_weights(head, pure_sequence(x, z, n, convention)[None], convention, exact)
    return _total(alpha, exact)


def gap_domination_ratio(head, x, z, z_prime, n: int, convention: str = "bidirectional",
                         exact: bool = False):
    """D(x;z) / D(x;z'): the weight ratio that Lemma B bounds from below."""
    num = total_weight(head, x, z, n, convention, exact)
    den = total_weight(head, x, z_prime, n, convention, exact)
    if den == 0:
        raise ValueError("D(x;z') = 0: the head's denominator vanishes on the pure sequence")
    return num / den


def mediant_of_arrangements(head, x, z, z_prime, k: int, l: int,
                            convention: str = "bidirectional", exact: bool = False):
    """sum_A N_A / sum_A D_A over all arrangements A of the mixed sequence, i.e. the outputs
    y_A averaged with weights D_A (N_A = D_A y_A is the head's numerator including b(x))."""
    _check_head(head)
    seqs = mixed_sequences(x, z, z_prime, k, l, convention)
    y = kernel_attention(head, seqs, convention, exact)
    dens = kernel_weights(head, seqs, convention, exact).sum(axis=-1)
    if exact:
        num = sum((Fraction(d) * Fraction(v) for d, v in zip(dens, y, strict=True)), Fraction(0))
        return num / sum((Fraction(d) for d in dens), Fraction(0))
    return float(np.sum(dens * y) / np.sum(dens))


def mediant_closed_form(head, x, z, z_prime, k: int, l: int,
                        convention: str = "bidirectional", exact: bool = False):
    """(k D(z) y(P_z) + l D(z') y(P_z')) / (k D(z) + l D(z')): the right side of the
    mediant identity, from the two pure sequences only."""
    _check_head(head)
    k, l = _check_copies(k, l)
    n = 1 + k + l
    pure = np.stack([pure_sequence(x, z, n, convention), pure_sequence(x, z_prime, n, convention)])
    y = kernel_attention(head, pure, convention, exact)
    dens = kernel_weights(head, pure, convention, exact).sum(axis=-1)
    if exact:
        d0, d1 = Fraction(dens[0]), Fraction(dens[1])
        return (k * d0 * Fraction(y[0]) + l * d1 * Fraction(y[1])) / (k * d0 + l * d1)
    return float((k * dens[0] * y[0] + l * dens[1] * y[1]) / (k * dens[0] + l * dens[1]))


def mediant_relative_error(head, x, z, z_prime, k: int, l: int,
                           convention: str = "bidirectional") -> float:
    """|mediant - closed form| in float64, relative to the D-weighted mean of |y_A|.

    That scale is what float64 sums of the numerators can resolve: it equals |mediant| when
    the outputs share a sign, and stays meaningful when signed outputs cancel.
    """
    seqs = mixed_sequences(x, z, z_prime, k, l, convention)
    y = kernel_attention(head, seqs, convention)
    dens = kernel_weights(head, seqs, convention).sum(axis=-1)
    scale = float(np.sum(dens * np.abs(y)) / np.sum(dens))
    direct = float(np.sum(dens * y) / np.sum(dens))
    closed = mediant_closed_form(head, x, z, z_prime, k, l, convention)
    diff = abs(direct - closed)
    return diff / scale if scale > 0 else diff


# --------------------------------------------------------------------------- gap domination


@dataclass(frozen=True)
class LinkCheck:
    """Lemma B on one link (x; z, z'): errors, the weight ratio and the factor it must beat."""

    gap: int  # g = <x,z'> - <x,z>
    k: int
    l: int
    pure_errors: tuple[float, float]  # |y(P_z) - a|, |y(P_z') - b|
    mixed_error: float  # max over arrangements of |y_A - a|
    eps: float  # max of all three: the head's error on this link's family
    ratio: float  # D(z)/D(z')
    factor: float | None  # c_{n,eps}(g) when eps in (0, 1/2], else None (lemma silent)

    @property
    def holds(self) -> bool:
        """ratio >= factor (vacuously true when the lemma is silent). Relative slack 1e-9
        covers float64 rounding of the two sides."""
        return self.factor is None or self.ratio >= self.factor * (1 - 1e-9)


def link_check(head, x, z, z_prime, k: int = 1, l: int = 1,
               convention: str = "bidirectional") -> LinkCheck:
    """Evaluate the head on P_z, P_z' and every arrangement of the mixed sequence, and
    compare D(z)/D(z') with c_{n,eps}(g) at the head's own error eps on this family."""
    _check_head(head)
    x = check_token(x, "x")
    z = check_token(z, "z", x.shape[0])
    z_prime = check_token(z_prime, "z_prime", x.shape[0])
    k, l = _check_copies(k, l)
    a, b = int(x @ z), int(x @ z_prime)
    if a >= b:
        raise ValueError(f"need <x,z> < <x,z'> (z is the worse candidate), got {a} and {b}")
    n = 1 + k + l
    pure = np.stack([pure_sequence(x, z, n, convention), pure_sequence(x, z_prime, n, convention)])
    y_pure = kernel_attention(head, pure, convention)
    y_mixed = kernel_attention(head, mixed_sequences(x, z, z_prime, k, l, convention), convention)
    pure_errors = (float(abs(y_pure[0] - a)), float(abs(y_pure[1] - b)))
    mixed_error = float(np.max(np.abs(y_mixed - a)))
    eps = max(*pure_errors, mixed_error)
    ratio = gap_domination_ratio(head, x, z, z_prime, n, convention)
    factor = None
    if 0 < eps <= 0.5:
        factor = float(gap_domination_factor(b - a, n, eps, k))
    return LinkCheck(b - a, k, l, pure_errors, mixed_error, eps, ratio, factor)


# --------------------------------------------------------------------------- heads


def _codes(tokens: np.ndarray, m: int) -> np.ndarray:
    tokens = np.asarray(tokens)
    if tokens.shape[-1] != m:
        raise ValueError(f"tokens must have width m = {m}, got {tokens.shape[-1]}")
    return tokens.astype(np.int64) @ (1 << np.arange(m - 1, -1, -1, dtype=np.int64))


def lookup_head(query_features, key_features, values, readout_weights,
                readout_bias) -> KernelAttentionHead:
    """An NKA head given by tables over the 2**m tokens (row = token's binary code).

    query_features (2**m, r) >= 0; key_features (n, 2**m, r) >= 0 and values (n, 2**m, d)
    per position p < n; readout_weights (2**m, d); readout_bias (2**m,). Object-dtype tables
    of Python ints or Fractions give an exact head.
    """
    qf, kf, vals = np.asarray(query_features), np.asarray(key_features), np.asarray(values)
    a, b = np.asarray(readout_weights), np.asarray(readout_bias)
    if qf.ndim != 2:
        raise ValueError(f"query_features must have shape (2**m, r), got {qf.shape}")
    size, rank = qf.shape
    m = int(size).bit_length() - 1
    if size < 2 or 2**m != size or m > MAX_TABLE_WIDTH:
        raise ValueError(f"query_features must have 2**m rows with 1 <= m <= {MAX_TABLE_WIDTH}, "
                         f"got {size}")
    if kf.ndim != 3 or kf.shape[1:] != (size, rank):
        raise ValueError(f"key_features must have shape (n, {size}, {rank}), got {kf.shape}")
    n = kf.shape[0]
    if vals.ndim != 3 or vals.shape[:2] != (n, size):
        raise ValueError(f"values must have shape ({n}, {size}, d), got {vals.shape}")
    if a.shape != (size, vals.shape[2]) or b.shape != (size,):
        raise ValueError(f"readout tables must have shapes ({size}, {vals.shape[2]}) and ({size},)")
    if np.any(qf < 0) or np.any(kf < 0):
        raise ValueError("query_features and key_features must be nonnegative (alpha >= 0)")

    def at_position(table, p):
        if isinstance(p, bool) or not isinstance(p, (int, np.integer)) or not 0 <= p < n:
            raise ValueError(f"position p must be an int in [0, {n - 1}] for this head, got {p}")
        return table[p]

    return KernelAttentionHead(
        rank=int(rank),
        query_features=lambda x: qf[_codes(x, m)],
        key_features=lambda z, p: at_position(kf, p)[_codes(z, m)],
        values=lambda z, p: at_position(vals, p)[_codes(z, m)],
        readout_weights=lambda x: a[_codes(x, m)],
        readout_bias=lambda x: b[_codes(x, m)],
    )


def random_kernel_head(m: int, n: int, rank: int = 3, d: int = 2, seed: int = 0,
                       integer: bool = False, zero_fraction: float = 0.25) -> KernelAttentionHead:
    """A seeded random NKA head with position-dependent key and value maps (lookup tables).

    Float heads draw features from a wide log-normal (weights spanning several orders of
    magnitude) and signed normal values and readouts; integer heads draw small nonnegative
    integers (features) and signed integers (values) for exact evaluation. A fraction of
    feature entries is zeroed so that sparse kernels are covered; coordinate 0 of every
    query and key feature stays positive so that no denominator vanishes.
    """
    m = _check_int(m, "m", 1, MAX_TABLE_WIDTH)
    n = _check_int(n, "n", 1)
    rank = _check_int(rank, "rank", 1)
    d = _check_int(d, "d", 1)
    if not isinstance(zero_fraction, (int, float)) or not 0 <= zero_fraction < 1:
        raise ValueError(f"zero_fraction must lie in [0, 1), got {zero_fraction!r}")
    rng = np.random.default_rng(seed)
    size = 2**m
    if integer:
        qf = rng.integers(0, 10, size=(size, rank))
        kf = rng.integers(0, 10, size=(n, size, rank))
        vals = rng.integers(-9, 10, size=(n, size, d))
        a = rng.integers(-5, 6, size=(size, d))
        b = rng.integers(-5, 6, size=size)
    else:
        qf = rng.lognormal(0.0, 2.0, size=(size, rank))
        kf = rng.lognormal(0.0, 2.0, size=(n, size, rank))
        vals = rng.normal(size=(n, size, d))
        a = rng.normal(size=(size, d))
        b = rng.normal(size=size)
    qf = qf * (rng.random(qf.shape) >= zero_fraction)
    kf = kf * (rng.random(kf.shape) >= zero_fraction)
    qf[:, 0] = np.maximum(qf[:, 0], 1)
    kf[:, :, 0] = np.maximum(kf[:, :, 0], 1)
    if integer:  # Python ints: exact arithmetic without int64 overflow
        qf, kf, vals, a, b = (t.astype(object) for t in (qf, kf, vals, a, b))
    return lookup_head(qf, kf, vals, a, b)


def softmax_kernel_head(beta: float, m: int, n: int) -> KernelAttentionHead:
    """Proposition F's head written as an NKA head: alpha(x,z) = exp(-beta <x,z>) as a
    table, phi_Q(x) = one-hot(x) (rank 2**m), v(z) = z, readout <x, o>."""
    m = _check_int(m, "m", 1, MAX_TABLE_WIDTH)
    n = _check_int(n, "n", 1)
    if isinstance(beta, bool) or not isinstance(beta, (int, float, np.integer, np.floating)):
        raise TypeError(f"beta must be a real number, got {type(beta).__name__}")
    if not math.isfinite(beta) or beta < 0:
        raise ValueError(f"beta must be a finite number >= 0, got {beta}")
    tokens = ((np.arange(2**m)[:, None] >> np.arange(m - 1, -1, -1)) & 1).astype(np.int64)
    kernel = np.exp(-float(beta) * (tokens @ tokens.T))  # kernel[x, z]
    return lookup_head(np.eye(2**m), np.repeat(kernel.T[None], n, axis=0),
                       np.repeat(tokens[None].astype(np.float64), n, axis=0),
                       tokens.astype(np.float64), np.zeros(2**m))


def perturbed_head(base: KernelAttentionHead, m: int, n: int, sigma: float,
                   seed: int = 0) -> KernelAttentionHead:
    """`base` with every position's kernel multiplied by exp(sigma * N(0,1)) entrywise and its
    per-token scores shifted by sigma/4 * N(0,1): a position-dependent head near `base`.

    The perturbed kernel is tabulated as alpha_p(x, z) (rank 2**m, one-hot query features).
    """
    _check_head(base)
    m = _check_int(m, "m", 1, MAX_TABLE_WIDTH)
    n = _check_int(n, "n", 1)
    if not isinstance(sigma, (int, float)) or not math.isfinite(sigma) or sigma < 0:
        raise ValueError(f"sigma must be a finite number >= 0, got {sigma!r}")
    rng = np.random.default_rng(seed)
    size = 2**m
    tokens = ((np.arange(size)[:, None] >> np.arange(m - 1, -1, -1)) & 1).astype(np.int64)
    qf = np.asarray(base.query_features(tokens), dtype=np.float64)  # (size, r)
    a = np.asarray(base.readout_weights(tokens), dtype=np.float64)  # (size, d)
    b = np.asarray(base.readout_bias(tokens), dtype=np.float64)
    kernels, scores = [], []
    for p in range(n):
        kf = np.asarray(base.key_features(tokens, p), dtype=np.float64)  # (size, r)
        vals = np.asarray(base.values(tokens, p), dtype=np.float64)  # (size, d)
        kernel = qf @ kf.T * np.exp(sigma * rng.normal(size=(size, size)))  # [x, z]
        kernels.append(kernel.T)  # row z: key feature of z = column of the kernel
        scores.append(vals @ a.T + b[None, :] + sigma / 4 * rng.normal(size=(size, size)))
    # Query-dependent scores f_p(x, z) as values with d = 2**m and readout a(x) = one-hot(x).
    return lookup_head(np.eye(size), np.stack(kernels), np.stack(scores), np.eye(size),
                       np.zeros(size))


def balanced_link_head(x, z, z_prime, ratio, n: int, shift=None,
                       convention: str = "bidirectional") -> KernelAttentionHead:
    """A rank-1 head on the link (x; z, z') with D(z)/D(z') = ratio: weight ratio on z,
    1 on every other key, 0 on the query's own slot; scores <x,z> - shift.

    With shift = None it takes the balanced shift l g / (2 (ratio + l)) (k = 1), which makes
    the pure and the mixed errors equal, so its error is exactly Lemma B's minimum
    :func:`min_error_for_ratio`. Ratio and shift may be Fractions (exact head).
    """
    x = check_token(x, "x")
    z = check_token(z, "z", x.shape[0])
    z_prime = check_token(z_prime, "z_prime", x.shape[0])
    n = check_length(n)
    check_convention(convention)
    g = int(x @ z_prime) - int(x @ z)
    if g < 1:
        raise ValueError(f"need <x,z> < <x,z'> (gap g >= 1), got gap {g}")
    exact = isinstance(ratio, Rational) and not isinstance(ratio, bool)
    if not exact and not (isinstance(ratio, (float, np.floating)) and math.isfinite(ratio)):
        raise TypeError(f"ratio must be a Fraction/int or a finite float, got {ratio!r}")
    if ratio <= 0:
        raise ValueError(f"ratio (D(z)/D(z')) must be > 0, got {ratio}")
    if shift is None:
        shift = min_error_for_ratio(ratio, g, n, 1)
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


# --------------------------------------------------------------------------- surveys


@dataclass(frozen=True)
class MediantCase:
    """One random check of the mediant identity."""

    seed: int
    m: int
    n: int
    k: int
    rank: int
    convention: str
    relative_error: float  # float64 check (see mediant_relative_error)
    exact_equal: bool | None  # exact check on an integer head; None when not run


def _random_link(rng, max_m: int, max_n: int):
    m = int(rng.integers(1, max_m + 1))
    n = int(rng.integers(3, max_n + 1))
    k = int(rng.integers(1, n - 1))
    x, z, z_prime = (rng.integers(0, 2, size=m) for _ in range(3))
    return m, n, k, x, z, z_prime


def mediant_survey(num_heads: int, seed: int = 0, max_m: int = 4, max_n: int = 6,
                   exact_every: int = 4) -> list[MediantCase]:
    """The mediant identity on `num_heads` random position-dependent heads (random m <= max_m,
    n <= max_n, k, rank, tokens), each in both conventions: float64 relative error, plus an
    exact Fraction check on an integer head for every `exact_every`-th case."""
    num_heads = _check_int(num_heads, "num_heads", 1)
    exact_every = _check_int(exact_every, "exact_every", 1)
    max_m = _check_int(max_m, "max_m", 1, MAX_TABLE_WIDTH)
    max_n = _check_int(max_n, "max_n", 3, 16)
    rng = np.random.default_rng(seed)
    cases = []
    for i in range(num_heads):
        m, n, k, x, z, z_prime = _random_link(rng, max_m, max_n)
        rank = int(rng.integers(1, 5))
        head_seed = int(rng.integers(2**32))
        head = random_kernel_head(m, n, rank=rank, d=int(rng.integers(1, 4)), seed=head_seed)
        integer_head = None
        if i % exact_every == 0:
            integer_head = random_kernel_head(m, n, rank=rank, d=2, seed=head_seed, integer=True)
        for convention in ("bidirectional", "causal"):
            rel = mediant_relative_error(head, x, z, z_prime, k, n - 1 - k, convention)
            exact_equal = None
            if integer_head is not None:
                exact_equal = (
                    mediant_of_arrangements(integer_head, x, z, z_prime, k, n - 1 - k,
                                            convention, exact=True)
                    == mediant_closed_form(integer_head, x, z, z_prime, k, n - 1 - k,
                                           convention, exact=True))
            cases.append(MediantCase(head_seed, m, n, k, rank, convention, rel, exact_equal))
    return cases


def chain_keys(m: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """Query x = 1^m and keys z_j = 1^j 0^(m-j), j = 0..m, so <x, z_j> = j: every pair
    (z_i, z_j), i < j, is a link of gap j - i."""
    m = _check_int(m, "m", 1, MAX_TABLE_WIDTH)
    return (np.ones(m, dtype=np.int64),
            [np.array([1] * j + [0] * (m - j), dtype=np.int64) for j in range(m + 1)])


def family_checks(head, m: int, n: int, convention: str = "bidirectional") -> list[LinkCheck]:
    """link_check (k = 1, l = n - 2) on every link of the chain family of :func:`chain_keys`."""
    x, keys = chain_keys(m)
    n = check_length(n)
    return [link_check(head, x, keys[i], keys[j], 1, n - 2, convention)
            for i in range(m + 1) for j in range(i + 1, m + 1)]
