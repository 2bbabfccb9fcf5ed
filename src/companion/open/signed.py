"""Signed kernel heads (chapter 8, ``prf:prop-signed-certificate``): y = sum_p alpha_p f_p /
sum_p alpha_p + b(x) with D = sum_p alpha_p != 0 ("nonzero") or one sign of D per query
("positive"); the rank of an overlap kernel (``prf:prop-overlap-rank``).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from companion.bounds.rank_bounds import RankLowerBound, SharpRankBound
from companion.bounds.witness import WitnessFamily
from companion.checks import (
    check_bool,
    check_choice,
    check_exact_array,
    check_fraction,
    check_instance,
    check_int,
    check_tokens,
)
from companion.core.attention import KernelAttentionHead, kernel_terms, weighted_mean
from companion.core.exact import rank_factorisation
from companion.core.task import check_convention, query_index, token_index
from companion.sandwich.heads import token_lookup

__all__ = [
    "signed_denominators",
    "signed_attention",
    "signed_rank_lower_bound",
    "one_sign_rank_lower_bound",
    "signed_link_counterexample",
    "newton_coefficients",
    "overlap_kernel_rank",
    "overlap_kernel_head",
]

DENOMINATOR_CONVENTIONS = ("nonzero", "positive")
#: Settings of :func:`signed_rank_lower_bound`.
SIGNED_SETTINGS = ("nka", "positive", "shared_keys", "position_dependent")
#: Most sequences one evaluation accepts (float / exact: Python Fractions, ~0.5 ms each).
MAX_SIGNED_SEQUENCES = 2**20
MAX_EXACT_SEQUENCES = 2**12


def _check_signed(head, sequences, convention: str, exact) -> tuple:
    """(tokens, convention, exact): the arguments of the signed evaluations."""
    check_instance(head, "head", KernelAttentionHead)
    exact = check_bool(exact, "exact")
    x = check_tokens(sequences)
    limit = MAX_EXACT_SEQUENCES if exact else MAX_SIGNED_SEQUENCES
    if x.size // x.shape[-1] // x.shape[-2] > limit or x.shape[-1] > 4096:
        raise ValueError(f"sequences: at most {limit} sequences of width <= 4096 "
                         f"({'exact' if exact else 'float'} evaluation), got shape {x.shape}")
    return x, check_convention(convention), exact


def signed_denominators(head, sequences, convention="bidirectional", exact: bool = False):
    """D = sum_p alpha_p(x, x_p) on every sequence, any sign: shape (...)."""
    return kernel_terms(head, *_check_signed(head, sequences, convention, exact))[0].sum(axis=-1)


def signed_attention(head, sequences, convention="bidirectional", exact: bool = False,
                     denominators: str = "nonzero"):
    """y = sum_p alpha_p f_p / sum_p alpha_p + b(x) for a head of any sign (Fractions with
    ``exact``); ValueError where the convention fails: a denominator 0 ('nonzero'), or a query
    whose denominators do not share one sign ('positive')."""
    check_choice(denominators, "denominators", DENOMINATOR_CONVENTIONS)
    x, convention, exact = _check_signed(head, sequences, convention, exact)
    alpha, scores, b = kernel_terms(head, x, convention, exact)
    den = alpha.sum(axis=-1)
    flat_d = np.ravel(den)
    if any(d == 0 for d in flat_d):
        raise ValueError("a denominator sum_p alpha_p is 0: the signed head is undefined there")
    if denominators == "positive":
        q = query_index(x.shape[-2], convention)
        queries = x[..., q, :].reshape(-1, x.shape[-1])
        signs: dict[bytes, int] = {}
        for tok, d in zip(queries, flat_d):
            s = 1 if d > 0 else -1
            if signs.setdefault(tok.tobytes(), s) != s:
                raise ValueError("denominators change sign for one query: the 'positive' "
                                 "convention fails")
    return weighted_mean(alpha, scores, den, exact) + b


def signed_rank_lower_bound(bound: RankLowerBound, setting: str) -> int | None:
    """The rank a head must have to solve F(S), from the family's certified bound: 'nka'
    bound.rank; 'positive' (signed, one sign per query) bound.rank - 1; 'shared_keys' (signed,
    keys shared by the positions) trace_rank - 1; 'position_dependent': None (open)."""
    check_instance(bound, "bound", RankLowerBound)
    check_choice(setting, "setting", SIGNED_SETTINGS)
    if setting == "nka":
        return bound.rank
    if setting == "positive":
        return max(bound.rank - 1, 1)
    if setting == "shared_keys":
        return max(bound.trace_rank - 1, 1)
    return None


def signed_link_counterexample(g: int = 4, eps=Fraction(2, 5)):
    """(head, x, z, z'): a rank-1 signed head with position-dependent keys, errors 0, 0, +eps,
    -eps on a link's four sequences, yet D(z) / D(z') = 1 < c_{3,eps}(g) (``ex-signed-link``)."""
    g = check_int(g, "g", 1, 64)
    eps = check_fraction(eps, "eps", 0, Fraction(1, 2), low_open=True, high_open=True)
    x = np.array([1] * g + [0], dtype=np.int64)     # |x| = g
    z = np.array([0] * g + [1], dtype=np.int64)     # <x, z> = 0
    zp = np.array([1] * g + [1], dtype=np.int64)    # <x, z'> = g
    K = 1 + Fraction(g) / (2 * eps)
    A = {(1, 0): K - 1, (2, 0): 2 - K, (1, 1): Fraction(0), (2, 1): Fraction(1)}  # (p, key)
    a_low = Fraction(0)
    n2_z = (a_low - eps) * (2 - K)      # arrangement (x, z', z) lands on a - eps
    n1_z = a_low - n2_z                 # pure z exact
    F = {(1, 0): n1_z / A[(1, 0)], (2, 0): n2_z / A[(2, 0)], (1, 1): Fraction(0),
         (2, 1): Fraction(g)}           # pure z' exact: F_2(z') = g
    keys = {z.tobytes(): 0, zp.tobytes(): 1}

    def per_token(table, p, zz):  # position 0 (the query's) and unknown tokens: 0
        return token_lookup(zz, lambda b: (table.get((p, keys.get(b)), Fraction(0)),), 1)

    head = KernelAttentionHead(
        rank=1,
        query_features=lambda xx: np.ones(np.shape(xx)[:-1] + (1,), dtype=np.int64),
        key_features=lambda zz, p: per_token(A, p, zz),
        values=lambda zz, p: per_token(F, p, zz),
        readout_weights=lambda xx: np.ones(np.shape(xx)[:-1] + (1,), dtype=np.int64),
        readout_bias=lambda xx: np.zeros(np.shape(xx)[:-1], dtype=np.int64),
    )
    return head, x, z, zp


# ----------------------------------------------------- kernels that depend on the overlap


def _check_values(values) -> list[Fraction]:
    values = check_exact_array(values, "values", 1, 4096)
    if not len(values):
        raise ValueError("values must hold 1 to 4096 numbers, got none")
    return [Fraction(v) for v in values.tolist()]


def _newton(vals: list[Fraction]) -> list[Fraction]:
    out = []
    while vals:
        out.append(vals[0])
        vals = [b - a for a, b in zip(vals, vals[1:])]
    return out


def newton_coefficients(values) -> list[Fraction]:
    """Forward differences Delta^j P(0), j = 0..len-1, of P given on 0, 1, ..., so that
    P(t) = sum_j Delta^j P(0) C(t, j)."""
    return _newton(_check_values(values))


def overlap_kernel_rank(values, m: int) -> int:
    """Rank of the 2^m x 2^m matrix [P(<x,z>)] for P on 0..m: sum of C(m, j) over the j with
    Delta^j P(0) != 0, as C(<x,z>, j) = sum_{|J|=j} x_J z_J (a monomial basis)."""
    m = check_int(m, "m", 1, 4095)
    vals = _check_values(values)
    if len(vals) != m + 1:
        raise ValueError(f"values must give P on 0..m ({m + 1} numbers), got {len(vals)}")
    return sum(math.comb(m, j) for j, c in enumerate(_newton(vals)) if c != 0)


def overlap_kernel_head(family, kernel, shift=Fraction(9, 20)):
    """(head, rank): kernel(<x, z>) >= 0 at the key positions (0 at the query's), realised
    with signed features by an exact rank factorisation of the |S| x T table; values z,
    readout <x, o> - shift."""
    check_instance(family, "family", WitnessFamily)
    if not callable(kernel):
        raise TypeError("kernel must be callable (overlap -> number)")
    shift = check_fraction(shift, "shift")
    S, tokens = np.asarray(family.S, dtype=np.int64), np.asarray(family.tokens, dtype=np.int64)
    table = np.empty((len(S), len(tokens)), dtype=object)
    for i, x in enumerate(S):
        for j, t in enumerate(tokens):
            val = check_fraction(kernel(int(x @ t)), "kernel(overlap)")
            if val < 0:
                raise ValueError(f"kernel({int(x @ t)}) = {val} < 0: not a nonnegative kernel")
            table[i, j] = val
    U, V = rank_factorisation(table)
    r = U.shape[1]
    q_index, t_index = token_index(S), token_index(tokens)
    qpos, zero = family.query_position, (Fraction(0),) * r

    def key_features(z, p):
        return token_lookup(z, lambda b: zero if p == qpos else V[t_index[b]], r)

    head = KernelAttentionHead(
        rank=r,
        query_features=lambda x: token_lookup(x, lambda b: U[q_index[b]], r),
        key_features=key_features,
        values=lambda z, p: np.asarray(z, dtype=np.int64),
        readout_weights=lambda x: np.asarray(x, dtype=np.int64),
        readout_bias=lambda x: np.full(np.shape(x)[:-1], -shift, dtype=object),
    )
    return head, r


def one_sign_rank_lower_bound(sharp: SharpRankBound) -> int:
    """Part (a) with the sharper lemma: one sign per query gives a ratio matrix of rank <= r + 1
    inside (0, 1/rho), so r >= sharp.rank - 1."""
    check_instance(sharp, "sharp", SharpRankBound)
    return max(sharp.rank - 1, 1)
