"""Lemma B: the mediant identity and gap domination.

A head with error <= eps on the pure sequences (x, z, ..., z), (x, z', ..., z') and on every
arrangement of k copies of z and l copies of z' must put much more total weight on the worse
candidate: D(x;z) / D(x;z') >= c_{n,eps}(g) = (l/k) (g - 2 eps) / (2 eps), g = <x,z'> - <x,z>.

Sequences follow :mod:`companion.core.task`: the query sits at position 0 ("bidirectional") or at
position n-1 ("causal"); the other n-1 positions carry the keys. Heads are
:class:`companion.core.attention.KernelAttentionHead` with position-dependent key and value maps,
evaluated with the package's own evaluators, so every check here runs the real forward pass.

Serves chapter 2 (``lem-mediant``, ``lem-gap-domination``, ``cor-error-floor``); chapters 3, 4
and 6 use its link checks and D.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from itertools import combinations
from numbers import Rational

import numpy as np

from companion.checks import (
    check_eps,
    check_fraction,
    check_instance,
    check_int,
    check_length,
    check_token,
)
from companion.core.attention import KernelAttentionHead, kernel_attention, kernel_weights
from companion.core.task import check_convention, query_index, query_target

#: Largest number of arrangements C(k+l, k) that :func:`mixed_sequences` materialises.
MAX_ARRANGEMENTS = 2**16
#: Longest explicit sequence built here (pure and mixed sequences, n = 1 + k + l): the heads
#: evaluate them position by position.
MAX_SEQUENCE_LENGTH = 10_000
#: Widest chain family that :func:`family_checks` runs (m (m + 1) / 2 link checks).
MAX_FAMILY_WIDTH = 16


def _check_copies(k, l) -> tuple[int, int]:
    """k copies of z and l copies of z' with k, l >= 1 (so n = 1 + k + l >= 3)."""
    k = check_int(k, "k (copies of z)", 1, MAX_SEQUENCE_LENGTH)
    l = check_int(l, "l (copies of z')", 1, MAX_SEQUENCE_LENGTH - 1 - k)
    if math.comb(k + l, k) > MAX_ARRANGEMENTS:
        raise ValueError(
            f"k={k}, l={l} give C(k+l, k) = {math.comb(k + l, k)} arrangements, above "
            f"MAX_ARRANGEMENTS={MAX_ARRANGEMENTS}; choose k + l smaller"
        )
    return k, l


# --------------------------------------------------------------------------- the factor


def gap_domination_factor(g, n: int = 3, eps=Fraction(1, 2), k: int = 1) -> Fraction:
    """c_{n,eps}(g) = (l/k) (g - 2 eps) / (2 eps) with l = n - 1 - k (exact).

    The default k = 1 maximises it. A value <= 0 proves nothing about the weight ratio.
    """
    n = check_length(n)
    eps = check_eps(eps)
    g = check_int(g, "g (gap between overlaps)", 1)
    k = check_int(k, f"k (copies of the better key, at most n-2 = {n - 2})", 1, n - 2)
    l = n - 1 - k
    return Fraction(l, int(k)) * (int(g) - 2 * eps) / (2 * eps)


def split_gap_domination_factor(g, n: int, eps_pure, eps_mixed, k: int = 1) -> Fraction:
    """(l/k) (g - eps_P - eps_M) / (eps_P + eps_M): Lemma B with separate error budgets on the
    pure sequences (eps_P) and on the mixed arrangements (eps_M); equals c_{n,eps}(g) when
    eps_P = eps_M = eps. Budgets lie in [0, 1/2] and may not both be 0."""
    n = check_length(n)
    g = check_int(g, "g (gap between overlaps)", 1)
    k = check_int(k, "k (copies of z)", 1, n - 2)
    total = (check_fraction(eps_pure, "eps_pure", 0, Fraction(1, 2))
             + check_fraction(eps_mixed, "eps_mixed", 0, Fraction(1, 2)))
    if total == 0:
        raise ValueError("eps_pure + eps_mixed must be > 0 (error 0 is impossible: Observation A')")
    return Fraction(n - 1 - k, k) * (g - total) / total


def min_error_for_ratio(ratio, g, n: int = 3, k: int = 1) -> float:
    """Lemma B solved for the error: a head with D(z)/D(z') = ratio has error at least
    l g / (2 (k ratio + l)) on the pure and mixed sequences of a link of gap g."""
    n = check_length(n)
    g = check_int(g, "g (gap between overlaps)", 1)
    k = check_int(k, "k (copies of z)", 1, n - 2)
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


def _key_positions(n: int, convention: str) -> list[int]:
    """The n-1 key positions (0-based): every position but the query's."""
    q = query_index(n, convention)
    return [p for p in range(n) if p != q]


def pure_sequence(x, z, n: int, convention: str = "bidirectional") -> np.ndarray:
    """P_z = the query x and n-1 copies of z: shape (n, m); target min(|x|, <x,z>) = <x,z>.
    Limit: n <= 10000 (:data:`MAX_SEQUENCE_LENGTH`)."""
    x = check_token(x, "x")
    z = check_token(z, "z", x.shape[0])
    n = check_int(n, "n (sequence length)", 2, MAX_SEQUENCE_LENGTH)
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
    seqs[:, _key_positions(n, convention), :] = keys
    seqs[:, query_index(n, convention), :] = x
    return seqs


# --------------------------------------------------------------------------- weights, mediant


def total_weights(head, sequences, convention: str = "bidirectional", exact: bool = False):
    """Delta(X) = sum_p alpha_p(x, x_p), the total unnormalised weight of each sequence X,
    shape (...). On a pure sequence P_z it is D(x;z): the one definition of D in the package."""
    check_instance(head, "head", KernelAttentionHead)
    return kernel_weights(head, sequences, convention, exact).sum(axis=-1)


def total_weight(head, x, z, n: int, convention: str = "bidirectional", exact: bool = False):
    """D(x;z) = alpha_q(x,x) + sum over key positions p of alpha_p(x,z): the total
    unnormalised weight of the pure sequence P_z. Limit: n <= 10000."""
    n = check_length(n)
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
    """sum_A N_A / sum_A D_A over all arrangements A of the mixed sequence, i.e. the outputs
    y_A averaged with weights D_A (N_A = D_A y_A is the head's numerator including b(x))."""
    seqs = mixed_sequences(x, z, z_prime, k, l, convention)
    dens = total_weights(head, seqs, convention, exact)
    y = kernel_attention(head, seqs, convention, exact)
    if exact:
        num = sum((Fraction(d) * Fraction(v) for d, v in zip(dens, y, strict=True)), Fraction(0))
        return num / sum((Fraction(d) for d in dens), Fraction(0))
    return float(np.sum(dens * y) / np.sum(dens))


def mediant_closed_form(head, x, z, z_prime, k: int, l: int,
                        convention: str = "bidirectional", exact: bool = False):
    """(k D(z) y(P_z) + l D(z') y(P_z')) / (k D(z) + l D(z')): the right side of the
    mediant identity, from the two pure sequences only."""
    k, l = _check_copies(k, l)
    n = 1 + k + l
    pure = np.stack([pure_sequence(x, z, n, convention), pure_sequence(x, z_prime, n, convention)])
    dens = total_weights(head, pure, convention, exact)
    y = kernel_attention(head, pure, convention, exact)
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
    dens = total_weights(head, seqs, convention)
    y = kernel_attention(head, seqs, convention)
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

    @classmethod
    def from_errors(cls, gap: int, k: int, l: int, pure_errors, mixed_error: float,
                    ratio: float) -> LinkCheck:
        """The check at the head's own error eps = max(pure errors, mixed error)."""
        pure_errors = (float(pure_errors[0]), float(pure_errors[1]))
        eps = max(*pure_errors, float(mixed_error))
        factor = None
        if 0 < eps <= 0.5:
            factor = float(gap_domination_factor(int(gap), 1 + k + l, eps, k))
        return cls(int(gap), k, l, pure_errors, float(mixed_error), eps, float(ratio), factor)


def link_errors(head, x, z, z_prime, k: int = 1, l: int = 1,
                convention: str = "bidirectional", exact: bool = False):
    """The head's errors on one link's sequences: ((|y(P_z) - t|, |y(P_z') - t'|), the largest
    |y_A - t_A| over the arrangements A of k copies of z and l of z'); Fractions if exact."""
    check_instance(head, "head", KernelAttentionHead)
    x = check_token(x, "x")
    z = check_token(z, "z", x.shape[0])
    z_prime = check_token(z_prime, "z_prime", x.shape[0])
    k, l = _check_copies(k, l)
    n = 1 + k + l
    pure = np.stack([pure_sequence(x, z, n, convention), pure_sequence(x, z_prime, n, convention)])
    mixed = mixed_sequences(x, z, z_prime, k, l, convention)
    errors = []
    for seqs in (pure, mixed):
        y = kernel_attention(head, seqs, convention, exact)
        t = query_target(seqs, convention)
        errors.append([abs(Fraction(v) - int(tv)) if exact else float(abs(v - tv))
                       for v, tv in zip(y, t, strict=True)])
    return (errors[0][0], errors[0][1]), max(errors[1])


def link_check(head, x, z, z_prime, k: int = 1, l: int = 1,
               convention: str = "bidirectional") -> LinkCheck:
    """Evaluate the head on P_z, P_z' and every arrangement of the mixed sequence, and
    compare D(z)/D(z') with c_{n,eps}(g) at the head's own error eps on this family."""
    x = check_token(x, "x")
    z = check_token(z, "z", x.shape[0])
    z_prime = check_token(z_prime, "z_prime", x.shape[0])
    a, b = int(x @ z), int(x @ z_prime)
    if a >= b:
        raise ValueError(f"need <x,z> < <x,z'> (z is the worse candidate), got {a} and {b}")
    pure_errors, mixed_error = link_errors(head, x, z, z_prime, k, l, convention)
    ratio = gap_domination_ratio(head, x, z, z_prime, 1 + k + l, convention)
    return LinkCheck.from_errors(b - a, k, l, pure_errors, mixed_error, ratio)


# --------------------------------------------------------------------------- chain family


def chain_keys(m: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """Query x = 1^m and keys z_j = 1^j 0^(m-j), j = 0..m, so <x, z_j> = j: every pair
    (z_i, z_j), i < j, is a link of gap j - i. Limit: m <= 1024 (m + 1 keys of width m)."""
    m = check_int(m, "m", 1, 1024)
    return (np.ones(m, dtype=np.int64),
            [np.array([1] * j + [0] * (m - j), dtype=np.int64) for j in range(m + 1)])


def family_checks(head, m: int, n: int, convention: str = "bidirectional") -> list[LinkCheck]:
    """link_check (k = 1, l = n - 2) on every link of the chain family of :func:`chain_keys`.
    Limits: m <= 16 (:data:`MAX_FAMILY_WIDTH`), n <= 10000."""
    m = check_int(m, "m", 1, MAX_FAMILY_WIDTH)
    x, keys = chain_keys(m)
    n = check_length(n)
    n = check_int(n, "n (sequence length)", 3, MAX_SEQUENCE_LENGTH)
    return [link_check(head, x, keys[i], keys[j], 1, n - 2, convention)
            for i in range(m + 1) for j in range(i + 1, m + 1)]
