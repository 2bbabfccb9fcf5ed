"""Lemma B: error <= eps on P_z, P_z' and every arrangement of k z's and l z''s forces
D(x;z) / D(x;z') >= c_{n,eps}(g) = (l/k) (g - 2 eps) / (2 eps), g = <x,z'> - <x,z> (chapter 2:
``lem-mediant``, ``lem-gap-domination``, ``cor-error-floor``; chapters 3, 4, 6 use D)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from itertools import combinations
from numbers import Rational

import numpy as np

from companion.checks import (
    check_eps,
    check_float,
    check_fraction,
    check_instance,
    check_int,
    check_length,
    check_token,
)
from companion.core.attention import KernelAttentionHead, kernel_attention, kernel_weights
from companion.core.task import check_convention, query_index, query_target

__all__ = [
    "gap_domination_factor", "split_gap_domination_factor", "min_error_for_ratio",
    "pure_sequence", "mixed_sequences", "total_weight", "gap_domination_ratio",
    "mediant_of_arrangements", "mediant_closed_form", "link_errors", "family_checks",
    "balanced_link_head",
]

#: Most arrangements C(k+l, k) that :func:`mixed_sequences` materialises.
MAX_ARRANGEMENTS = 2**16
#: Longest explicit sequence built here (the heads evaluate it position by position).
MAX_SEQUENCE_LENGTH = 10_000
#: Widest chain family that :func:`family_checks` runs (m (m + 1) / 2 link checks).
MAX_FAMILY_WIDTH = 16


def _check_copies(k, l) -> tuple[int, int]:
    """k copies of z and l copies of z', k, l >= 1, at most MAX_ARRANGEMENTS arrangements."""
    k = check_int(k, "k (copies of z)", 1, MAX_SEQUENCE_LENGTH)
    l = check_int(l, "l (copies of z')", 1, MAX_SEQUENCE_LENGTH - 1 - k)
    if math.comb(k + l, k) > MAX_ARRANGEMENTS:
        raise ValueError(f"k={k}, l={l} give C(k+l, k) = {math.comb(k + l, k)} arrangements, "
                         f"above MAX_ARRANGEMENTS={MAX_ARRANGEMENTS}; choose k + l smaller")
    return k, l


def _check_gap_k(g, n, k) -> tuple[int, int, int]:
    n = check_length(n)
    g = check_int(g, "g (gap between overlaps)", 1)
    return g, n, check_int(k, f"k (copies of the better key, at most n-2 = {n - 2})", 1, n - 2)


def gap_domination_factor(g, n: int = 3, eps=Fraction(1, 2), k: int = 1) -> Fraction:
    """c_{n,eps}(g) = (l/k) (g - 2 eps) / (2 eps), l = n - 1 - k (exact; k = 1 maximises it).
    A value <= 0 proves nothing about the weight ratio."""
    g, n, k = _check_gap_k(g, n, k)
    return domination_factor(g, n, 2 * check_eps(eps), k)


def domination_factor(g: int, n: int, total: Fraction, k: int = 1) -> Fraction:
    """(l/k) (g - total) / total, l = n - 1 - k, for checked arguments (total = eps_P + eps_M > 0):
    the core of the two functions around it, for the package's own calls."""
    return Fraction(n - 1 - k, k) * (g - total) / total


def split_gap_domination_factor(g, n: int, eps_pure, eps_mixed, k: int = 1) -> Fraction:
    """(l/k) (g - eps_P - eps_M) / (eps_P + eps_M): Lemma B with separate error budgets on the
    pure (eps_P) and mixed (eps_M) sequences, each in [0, 1/2], not both 0."""
    g, n, k = _check_gap_k(g, n, k)
    total = (check_fraction(eps_pure, "eps_pure", 0, Fraction(1, 2))
             + check_fraction(eps_mixed, "eps_mixed", 0, Fraction(1, 2)))
    if total == 0:
        raise ValueError("eps_pure + eps_mixed must be > 0 (error 0 is impossible: Observation A')")
    return domination_factor(g, n, total, k)


def min_error_for_ratio(ratio, g, n: int = 3, k: int = 1):
    """Lemma B solved for the error: D(z)/D(z') = ratio forces error >= l g / (2 (k ratio + l))
    (``cor-error-floor``); exact for a rational ratio, float64 (array) otherwise."""
    g, n, k = _check_gap_k(g, n, k)
    if isinstance(ratio, Rational) and not isinstance(ratio, bool):
        ratio = check_fraction(ratio, "ratio (D(z)/D(z'))", 0, low_open=True)
        return Fraction(n - 1 - k) * g / (2 * (k * ratio + n - 1 - k))
    r = np.asarray(ratio, dtype=np.float64)
    if not np.all(np.isfinite(r)) or np.any(r <= 0):
        raise ValueError("ratio (D(z)/D(z')) must be finite and > 0")
    out = (n - 1 - k) * g / (2.0 * (k * r + n - 1 - k))
    return float(out) if out.ndim == 0 else out


def pure_sequence(x, z, n: int, convention: str = "bidirectional") -> np.ndarray:
    """P_z = the query x and n-1 copies of z: shape (n, m); target <x,z>."""
    x = check_token(x, "x")
    z = check_token(z, "z", x.shape[0])
    n = check_int(n, "n (sequence length)", 2, MAX_SEQUENCE_LENGTH)
    check_convention(convention)
    seq = np.repeat(z[None, :], n, axis=0)
    seq[query_index(n, convention)] = x
    return seq


def mixed_sequences(x, z, z_prime, k: int, l: int,
                    convention: str = "bidirectional") -> np.ndarray:
    """Every arrangement (lexicographic) of k copies of z and l of z' in the key slots of a
    length 1 + k + l sequence with query x: shape (C(k+l, k), n, m)."""
    x = check_token(x, "x")
    z = check_token(z, "z", x.shape[0])
    z_prime = check_token(z_prime, "z_prime", x.shape[0])
    check_convention(convention)
    k, l = _check_copies(k, l)
    n, q = 1 + k + l, query_index(1 + k + l, convention)
    places = np.zeros((math.comb(k + l, k), k + l), dtype=bool)  # True where z sits
    for row, chosen in enumerate(combinations(range(k + l), k)):
        places[row, list(chosen)] = True
    seqs = np.empty((len(places), n, x.shape[0]), dtype=np.int64)
    seqs[:, [p for p in range(n) if p != q], :] = np.where(places[:, :, None], z, z_prime)
    seqs[:, q, :] = x
    return seqs


def total_weights(head, sequences, convention: str = "bidirectional", exact: bool = False):
    """Delta(X) = sum_p alpha_p(x, x_p) per sequence; on P_z it is D(x;z) (the one D)."""
    return kernel_weights(head, sequences, convention, exact).sum(axis=-1)


def total_weight(head, x, z, n: int, convention: str = "bidirectional", exact: bool = False):
    """D(x;z) = alpha_q(x,x) + sum_{p != q} alpha_p(x,z), the total weight of P_z."""
    check_instance(head, "head", KernelAttentionHead)
    n = check_int(n, "n (sequence length)", 3, MAX_SEQUENCE_LENGTH)
    total = total_weights(head, pure_sequence(x, z, n, convention)[None], convention, exact)[0]
    return Fraction(total) if exact else float(total)


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
    """sum_A N_A / sum_A D_A over all arrangements A: the outputs y_A averaged with weights
    D_A (N_A = D_A y_A includes b(x)); the left side of the mediant identity."""
    check_instance(head, "head", KernelAttentionHead)
    seqs = mixed_sequences(x, z, z_prime, k, l, convention)
    dens = total_weights(head, seqs, convention, exact)
    y = kernel_attention(head, seqs, convention, exact)
    if exact:  # Fractions (float weights read exactly)
        dens, y = (np.array([Fraction(v) for v in a], dtype=object) for a in (dens, y))
    value = np.sum(dens * y) / np.sum(dens)
    return value if exact else float(value)


def _pure_pair(x, z, z_prime, n, convention) -> np.ndarray:
    return np.stack([pure_sequence(x, z, n, convention), pure_sequence(x, z_prime, n, convention)])


def mediant_closed_form(head, x, z, z_prime, k: int, l: int,
                        convention: str = "bidirectional", exact: bool = False):
    """(k D(z) y(P_z) + l D(z') y(P_z')) / (k D(z) + l D(z')): the mediant identity's right side"""
    check_instance(head, "head", KernelAttentionHead)
    k, l = _check_copies(k, l)
    pure = _pure_pair(x, z, z_prime, 1 + k + l, convention)
    dens = total_weights(head, pure, convention, exact)
    y = kernel_attention(head, pure, convention, exact)
    if exact:
        dens, y = [Fraction(v) for v in dens], [Fraction(v) for v in y]
    value = (k * dens[0] * y[0] + l * dens[1] * y[1]) / (k * dens[0] + l * dens[1])
    return value if exact else float(value)


def mediant_relative_error(head, x, z, z_prime, k: int, l: int,
                           convention: str = "bidirectional") -> float:
    """|mediant - closed form| in float64, relative to the D-weighted mean of |y_A| (the scale
    float64 sums resolve, also when signed outputs cancel)."""
    seqs = mixed_sequences(x, z, z_prime, k, l, convention)
    dens = total_weights(head, seqs, convention)
    y = kernel_attention(head, seqs, convention)
    scale = float(np.sum(dens * np.abs(y)) / np.sum(dens))
    diff = abs(float(np.sum(dens * y) / np.sum(dens))
               - mediant_closed_form(head, x, z, z_prime, k, l, convention))
    return diff / scale if scale > 0 else diff


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
        """ratio >= factor (vacuous when the lemma is silent), relative slack 1e-9 for float64."""
        return self.factor is None or self.ratio >= self.factor * (1 - 1e-9)

    @classmethod
    def from_errors(cls, gap: int, k: int, l: int, pure_errors, mixed_error: float,
                    ratio: float) -> LinkCheck:
        """The check at the head's own error eps = max(pure errors, mixed error)."""
        pure_errors = (float(pure_errors[0]), float(pure_errors[1]))
        eps = max(*pure_errors, float(mixed_error))
        factor = (float(gap_domination_factor(int(gap), 1 + k + l, eps, k)) if 0 < eps <= 0.5
                  else None)
        return cls(int(gap), k, l, pure_errors, float(mixed_error), eps, float(ratio), factor)


def link_errors(head, x, z, z_prime, k: int = 1, l: int = 1,
                convention: str = "bidirectional", exact: bool = False):
    """((|y(P_z) - t|, |y(P_z') - t'|), max over arrangements A of |y_A - t_A|): the head's
    errors on one link's sequences; Fractions if exact."""
    check_instance(head, "head", KernelAttentionHead)
    mixed = mixed_sequences(x, z, z_prime, k, l, convention)
    pure = _pure_pair(x, z, z_prime, mixed.shape[1], convention)
    errors = []
    for seqs in (pure, mixed):
        y = kernel_attention(head, seqs, convention, exact)
        t = query_target(seqs, convention)
        errors.append([abs(Fraction(v) - int(tv)) if exact else float(abs(v - tv))
                       for v, tv in zip(y, t, strict=True)])
    return (errors[0][0], errors[0][1]), max(errors[1])


def link_check(head, x, z, z_prime, k: int = 1, l: int = 1,
               convention: str = "bidirectional") -> LinkCheck:
    """D(z)/D(z') against c_{n,eps}(g) at the head's own error eps on the link's sequences."""
    a, b = int(np.dot(x, z)), int(np.dot(x, z_prime))
    pure_errors, mixed_error = link_errors(head, x, z, z_prime, k, l, convention)
    ratio = gap_domination_ratio(head, x, z, z_prime, 1 + k + l, convention)
    return LinkCheck.from_errors(b - a, k, l, pure_errors, mixed_error, ratio)


def chain_keys(m: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """Query 1^m and keys z_j = 1^j 0^(m-j), j = 0..m: each pair i < j is a link of gap j - i."""
    return (np.ones(m, dtype=np.int64),
            [np.array([1] * j + [0] * (m - j), dtype=np.int64) for j in range(m + 1)])


def family_checks(head, m: int, n: int, convention: str = "bidirectional") -> list[LinkCheck]:
    """link_check (k = 1, l = n - 2) on every link of the chain family of width m <= 16."""
    m = check_int(m, "m", 1, MAX_FAMILY_WIDTH)
    n = check_int(n, "n (sequence length)", 3, MAX_SEQUENCE_LENGTH)
    x, keys = chain_keys(m)
    return [link_check(head, x, keys[i], keys[j], 1, n - 2, convention)
            for i in range(m + 1) for j in range(i + 1, m + 1)]


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
        w = np.where(np.all(np.asarray(tokens) == z, axis=-1), ratio, one).astype(dtype)
        return (w * 0 if p == q else w)[..., None]

    return KernelAttentionHead(
        rank=1,
        query_features=lambda t: np.full(np.shape(t)[:-1] + (1,), one, dtype=dtype),
        key_features=key_weight,
        values=lambda t, p: np.asarray(t, dtype=np.int64).astype(dtype),
        readout_weights=lambda t: np.asarray(t, dtype=np.int64).astype(dtype),
        readout_bias=lambda t: np.full(np.shape(t)[:-1], -shift, dtype=dtype),
    )
