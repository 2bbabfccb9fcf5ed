"""From factors of an admissible ratio matrix to an explicit exact head (Chapter 3,
{prf:ref}`prop-sandwich-matrix-problem` (ii)), checked exactly before it is returned; the
witness heads of chapters 3 and 6 (one feature per key token, per query, one query spread).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from companion.bounds.gap_domination import gap_domination_factor
from companion.bounds.witness import WitnessFamily
from companion.checks import check_fraction, check_instance, check_int
from companion.core.attention import KernelAttentionHead, attention_output
from companion.core.exact import solve
from companion.core.task import token_index
from companion.sandwich.matrix import (
    RatioBounds,
    admissibility_violations,
    check_exact_factor,
    exact_dot,
    indicator_factors,
    ratio_bounds,
    ratio_matrix_of_factors,
    spread_factors,
)

__all__ = ["build_exact_head", "indicator_head", "query_indicator_head", "spread_query_head"]


@dataclass(frozen=True, eq=False)
class ExactHead:
    """An NKA head on F(S) as Fraction tables: query_features (N, r), key_features {token id:
    (r,)}, at the query's own position self_features (N, r) and self_value_scale (N,)."""

    family: WitnessFamily
    query_features: np.ndarray
    key_features: dict
    self_features: np.ndarray
    self_value_scale: np.ndarray
    bias: np.ndarray
    max_error: Fraction

    @property
    def rank(self) -> int:
        return self.query_features.shape[1]

    @property
    def nonnegative(self) -> bool:
        return all_nonnegative(self.query_features, self.self_features, self.key_features)

    @property
    def attention_head(self) -> KernelAttentionHead:
        """The head as a :class:`KernelAttentionHead` (Fractions; zero outside F(S))."""
        return tables_to_kernel_head(self.family, self.query_features, self.key_features,
                                     self.self_features, self.self_value_scale, self.bias)


def all_nonnegative(*tables) -> bool:
    """Whether every entry of the tables (arrays, or dicts {token id: features}) is >= 0."""
    return all(v >= 0 for t in tables
               for v in np.ravel(list(t.values()) if isinstance(t, dict) else t))


def token_lookup(tokens, table, width: int) -> np.ndarray:
    """table(token bytes) for every token of `tokens` (..., m): shape (..., width), or (...)
    when width is 0 (object arrays)."""
    tokens = np.asarray(tokens, dtype=np.int64)
    out = np.empty(tokens.shape[:-1] + ((width,) if width else ()), dtype=object)
    view = out.reshape((-1, width) if width else (-1,))
    for k, tok in enumerate(tokens.reshape(-1, tokens.shape[-1])):
        view[k] = table(tok.tobytes())
    return out


def tables_to_kernel_head(family, query_features, key_features, self_features,
                          self_value_scale, bias) -> KernelAttentionHead:
    """The KernelAttentionHead of :class:`ExactHead`'s tables (tokens outside: zero)."""
    r, q = query_features.shape[1], family.query_position
    qrow = token_index(np.asarray(family.S, dtype=np.int64))
    krow = {family.tokens[t].tobytes(): tuple(v) for t, v in key_features.items()}
    zero = (Fraction(0),) * r

    def per_query(table, other, width=0):  # tokens -> table[x] at the query S[x], else other
        return lambda z: token_lookup(z, lambda b: table[qrow[b]] if b in qrow else other, width)

    self_keys, scale = per_query(self_features, zero, r), per_query(self_value_scale, Fraction(1))

    def key(z, p):
        return self_keys(z) if p == q else token_lookup(z, lambda b: krow.get(b, zero), r)

    def values(z, p):
        z = np.asarray(z, dtype=np.int64)
        return z if p != q else z.astype(object) * scale(z)[..., None]

    return KernelAttentionHead(
        rank=r, query_features=per_query(query_features, zero, r), key_features=key,
        values=values, readout_weights=lambda x: np.asarray(x, dtype=np.int64),
        readout_bias=per_query(bias, Fraction(0)))


def _ladder_trees(bounds: RatioBounds, M) -> dict:
    """Per query x: {intermediate token: (parent or None, prod of c up to it)} and the leaf
    values tau = M[x,y] rho_xy below each token."""
    n = bounds.family.n
    trees = {}
    for x in range(bounds.size):
        nodes, leaves = {}, {}
        for y in range(bounds.size):
            if y == x:
                continue
            chain, gaps = bounds.ladders[(x, y)]
            prod, parent = Fraction(1), None
            for t, g in zip(chain[1:-1], gaps, strict=False):
                prod *= gap_domination_factor(g, n, Fraction(1, 2))
                if nodes.get(t, (parent, prod)) != (parent, prod):
                    raise ValueError(f"the ladders of query S[{x}] reach key {t} along two "
                                     "different paths: they must form a tree")
                nodes[t] = (parent, prod)
                parent = t
            if parent is not None:
                leaves.setdefault(parent, []).append(M[x, y] / bounds.upper[x, y])
        trees[x] = (nodes, leaves)
    return trees


#: Where in each sharer's window (0: the leaves' value, 1: the root's) a shared key is tried.
SHARED_TARGETS = (Fraction(1, 2), Fraction(3, 4), Fraction(7, 8), Fraction(15, 16),
                  Fraction(1, 4))


def _shared_key_weights(bounds: RatioBounds, M, trees, nonnegative: bool) -> dict:
    """For a key z shared by queries X: lambda with phi_K(z) = sum_x lambda_x K_x, (M_XX
    lambda)_x hitting m + f (1 - m) (m: largest leaf tau below z, f from SHARED_TARGETS)."""
    out = {}
    for z, users in bounds.sharers.items():
        if len(users) == 1:
            continue
        X = sorted(users)
        if any(len(bounds.sharers[a]) > 1 for x in X for a in _ancestors(trees[x][0], z)):
            raise ValueError(f"ladder key {z} and one of its ancestors are both shared")
        A = [[M[a, b] for b in X] for a in X]
        below = [(_max_leaf_below(*trees[x], z), trees[x][0][z][1]) for x in X]  # (m, prod c)
        for f in SHARED_TARGETS:
            t = [(m + f * (1 - m)) / c for m, c in below]
            lam = solve(A, t)
            if lam is not None and (not nonnegative or all(v >= 0 for v in lam)):
                # simpler weights: moving each lambda by < delta moves every t_x by
                # < |X| delta (entries of M_XX are <= 1), half the distance to its window
                room = min(min(tx - m / c, 1 / c - tx) for (m, c), tx in zip(below, t, strict=True))
                delta = room / (2 * len(X))
                lam = [_simplest_between(max(v - delta, Fraction(0)) if v > 0 else v - delta,
                                        v + delta) for v in lam]
                out[z] = dict(zip(X, lam, strict=True))
                break
        else:
            raise ValueError(f"found no {'nonnegative ' if nonnegative else ''}features for the "
                             f"ladder key {z} shared by queries {X}")
    return out


def _ancestors(nodes, z):
    p = nodes[z][0]
    while p is not None:
        yield p
        p = nodes[p][0]


def _max_leaf_below(nodes, leaves, z) -> Fraction:
    return max(v for t, vals in leaves.items() if t == z or z in _ancestors(nodes, t)
               for v in vals)


def _ladder_levels(bounds: RatioBounds, M, trees, shared_tau) -> dict:
    """t(z) = K(x,z)/K(x,xbar) of every private ladder key: tau(z) = t(z) prod c_j falls from 1
    to M[x,y] rho_xy, each the simplest rational in the middle third of (lo, tau(parent))."""
    out = {}
    for x in range(bounds.size):
        nodes, leaves = trees[x]
        fixed = {z: shared_tau[(x, z)] for z in nodes if (x, z) in shared_tau}
        children: dict = {}
        for z, (p, _) in nodes.items():
            children.setdefault(p, []).append(z)

        def lo(z, fixed=fixed, leaves=leaves, children=children):
            return max(leaves.get(z, []) + [fixed[c] if c in fixed else lo(c)
                                            for c in children.get(z, [])])

        tau = dict(fixed)
        depth = {z: sum(1 for _ in _ancestors(nodes, z)) for z in nodes}
        for z in sorted(nodes, key=lambda t: depth[t]):  # parents before children
            if z in fixed:
                continue
            parent = nodes[z][0]
            up = Fraction(1) if parent is None else tau[parent]
            low = lo(z)
            tau[z] = _simplest_between(low + (up - low) / 3, low + 2 * (up - low) / 3)
            out[(x, z)] = tau[z] / nodes[z][1]
    return out


def build_exact_head(family: WitnessFamily, query_factor, key_factor, strict: bool = True,
                     self_weight=Fraction(1, 1000)) -> ExactHead:
    """The head of the reduction from factors of M = diag(<Q_x,K_x>)^-1 Q K^T (exact):
    phi_Q(S[x]) = Q_x, phi_K(complement S[y]) = K_y, ladder keys t(z) K_x, v(z) = z, centred
    biases, a small self-weight in rows with zeros. strict: ValueError unless M is admissible."""
    bounds = ratio_bounds(family)
    self_weight = check_fraction(self_weight, "self_weight", 0, 1, low_open=True)
    N = bounds.size
    Q = check_exact_factor(query_factor, "query_factor", N)
    K = check_exact_factor(key_factor, "key_factor", N, Q.shape[1])
    M = ratio_matrix_of_factors(Q, K)
    problems = admissibility_violations(M, bounds)
    if strict and problems:
        raise ValueError(f"M = Q K^T (rows normalised) is not admissible: {problems[:3]}")
    trees = _ladder_trees(bounds, M)
    nonnegative = all_nonnegative(Q, K)
    shared = _shared_key_weights(bounds, M, trees, nonnegative)
    shared_tau = {(x, z): sum((lam[b] * M[x, b] for b in lam), Fraction(0)) * trees[x][0][z][1]
                  for z, lam in shared.items() for x in lam}
    levels = _ladder_levels(bounds, M, trees, shared_tau)
    key_features = {bounds.column_tokens[y]: tuple(K[y]) for y in range(N)}
    for (x, t), value in levels.items():
        key_features[t] = tuple(value * v for v in K[x])
    for z, lam in shared.items():
        key_features[z] = tuple(sum((lam[b] * K[b, c] for b in lam), Fraction(0))
                                for c in range(Q.shape[1]))
    w = int(family.S[0].sum())
    zero_rows = {}
    for x in range(N):
        zeros = [y for y in range(N) if y != x and M[x, y] == 0]
        if zeros:
            positive = [M[x, y] for y in range(N) if M[x, y] > 0]
            positive += [v for (xx, _), v in levels.items() if xx == x and v > 0]
            positive += [shared_tau[(xx, z)] / trees[x][0][z][1] for (xx, z) in shared_tau
                         if xx == x]
            zero_rows[x] = (int(bounds.gaps[x, zeros[0]]), min(positive))
    weight = Fraction(self_weight)
    for _ in range(8):  # shrink the self-weight until every sequence is exact
        self_features, self_scale = _self_tables(Q, K, zero_rows, weight, w)
        bias, max_error = _centre_biases(family, Q, key_features, self_features, self_scale)
        if max_error < Fraction(1, 2) or not zero_rows:
            break
        weight /= 64
    if strict and not max_error < Fraction(1, 2):
        raise ValueError(f"the built head has max error {max_error} >= 1/2 (this is a bug)")
    return ExactHead(family, Q, key_features, self_features, self_scale, bias, max_error)


def _self_tables(Q, K, zero_rows: dict, weight: Fraction, w: int):
    """Query-position key features and value scale: for a row x of M with zeros at gap G_0,
    weight * (smallest positive ratio) * <Q_x, K_x> and value (G_0/w) x; zero elsewhere."""
    N, r = Q.shape
    self_features = np.full((N, r), Fraction(0), dtype=object)
    self_scale = np.full(N, Fraction(1), dtype=object)
    for x, (g0, smallest) in zero_rows.items():
        self_scale[x] = Fraction(g0, w)
        qx = Q[x]
        # alpha_q(x, x) = <Q_x, phi> is free: the token S[x] is only ever at the query
        # position. A multiple of a unit vector keeps nonnegative features nonnegative.
        target = weight * smallest * exact_dot(qx, K[x])
        i = max(range(r), key=lambda k: qx[k])
        if all(v >= 0 for v in qx):
            self_features[x, i] = target / qx[i]
        else:
            norm = exact_dot(qx, qx)
            self_features[x] = [target * v / norm for v in qx]
    return self_features, self_scale


def _simplest_between(lo, hi) -> Fraction:
    """The rational of least denominator in (lo, hi) (continued fractions: short files)."""
    if lo < 0 < hi:
        return Fraction(0)
    if hi <= 0:
        return -_simplest_between(-hi, -lo)
    fl = math.floor(lo)
    if fl + 1 < hi:
        return Fraction(fl + 1)
    if lo == fl:
        return fl + Fraction(1, math.floor(1 / (hi - fl)) + 1)
    return fl + 1 / _simplest_between(1 / (hi - fl), 1 / (lo - fl))


def _centre_biases(family, Q, key_features, self_features, self_scale):
    """Biases centring each query's exact error range (bias 0: the package's forward pass)."""
    N = len(Q)
    zero = np.full(N, Fraction(0), dtype=object)
    head = tables_to_kernel_head(family, Q, key_features, self_features, self_scale, zero)
    y = attention_output(head, family.sequences, family.convention, exact=True)
    errors: dict = {}
    for x, v, t in zip(family.query_ids.tolist(), y.tolist(), family.targets.tolist(), strict=True):
        errors.setdefault(x, []).append(v - int(t))
    lo, hi = ([f(errors[x]) for x in range(N)] for f in (min, max))
    bias = np.empty(N, dtype=object)
    for x in range(N):
        centre, half = -(lo[x] + hi[x]) / 2, (hi[x] - lo[x]) / 2
        slack = (Fraction(1, 2) - half) / 4
        bias[x] = _simplest_between(centre - slack, centre + slack) if slack > 0 else centre
    max_error = max(max(hi[x] + bias[x], -(lo[x] + bias[x])) for x in range(N))
    return bias, max_error


# --------------------------------------------------------------------------- witness heads


def query_indicator_head(family: WitnessFamily) -> KernelAttentionHead:
    """The exact head of rank |S|: one feature per query, from the factors Q = I,
    K_y[x] = M_xy = u_xy / 2 (:func:`companion.sandwich.matrix.indicator_factors`)."""
    check_instance(family, "family", WitnessFamily)
    return build_exact_head(family, *indicator_factors(ratio_bounds(family))).attention_head


def spread_query_head(family: WitnessFamily) -> KernelAttentionHead:
    """The exact head of rank |S| - 1: one query spread over the others' features
    (:func:`companion.sandwich.matrix.spread_factors`, {prf:ref}`prop-one-query-spread`);
    ValueError when no spread exists (every P_s <= 1)."""
    check_instance(family, "family", WitnessFamily)
    return build_exact_head(family, *spread_factors(ratio_bounds(family))).attention_head


def indicator_head(family: WitnessFamily, base: int | None = None) -> KernelAttentionHead:
    """The exact head with one feature per key token: phi_K(z) = e_z, phi_Q(x)_z = base^-<x,z>
    (default base 2n); error (n-2) g / (base^g + n - 2) < 1/2 on a mixed sequence of gap g."""
    check_instance(family, "family", WitnessFamily)
    n, q = family.n, family.query_position
    base = 2 * n if base is None else check_int(base, f"base (above n - 2 = {n - 2})", n - 1)
    key_ids = sorted(set(np.delete(family.token_ids, q, axis=1).ravel().tolist()))
    keys = family.tokens[key_ids]
    index, r = token_index(keys), len(keys)
    eye, zero = np.eye(r, dtype=np.int64), np.zeros(r, dtype=np.int64)

    def query(x):
        ov = np.asarray(x, dtype=np.int64) @ keys.T
        return np.array([Fraction(1, base ** int(v)) for v in ov.ravel()],
                        dtype=object).reshape(ov.shape)

    return KernelAttentionHead(
        rank=r, query_features=query,
        key_features=lambda z, p: token_lookup(
            z, lambda b: eye[index[b]] if p != q and b in index else zero, r).astype(np.int64),
        values=lambda z, p: np.asarray(z, dtype=np.int64),
        readout_weights=lambda x: np.asarray(x, dtype=np.int64),
        readout_bias=lambda x: np.zeros(np.shape(x)[:-1], dtype=np.int64))
