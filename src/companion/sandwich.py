"""The sandwich as a matrix problem: exact heads on F(S) <-> admissible ratio matrices.

Column y of the kernel table is the key token complement(y). A ratio matrix M (|S| x |S|) is
*admissible* for F(S) if M[x,x] = 1, 0 <= M[x,y] < 1/rho_xy (rho_xy = prod c_{n,1/2}(g) over
the certificate's ladder for (x, y)) and the zeros of each row all sit at one gap G_xy.
Every head with error < 1/2 on F(S) has M[x,y] = K(x, ybar)/K(x, xbar) admissible of rank
<= its feature rank; conversely every admissible M of rank r (or nonnegative rank r) gives
an exact head of feature rank r (with nonnegative features), built by
:func:`build_exact_head`. So the minimum feature rank on F(S) is the minimum rank of an
admissible M, and the sandwich narrows to [Lemma D' bound, best admissible M found].

This module holds the bounds, the exact admissibility check, the map from factors of M to
an explicit head (intermediate ladder keys as scaled copies of the bottom key), the
one-query spread (its exact feasibility criterion sum_k u_sk u_ks > 1) and a numerical
search for low-rank admissible factors, rounded to rationals and re-checked exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from .attention import KernelAttentionHead
from .gap_domination import gap_domination_factor
from .witness import WitnessFamily

#: Denominators tried, in order, when rounding float factors to rationals.
ROUNDING_DENOMINATORS = (2**10, 2**14, 2**20, 2**30)


# --------------------------------------------------------------------------- the bounds


@dataclass(frozen=True, eq=False)
class RatioBounds:
    """What F(S) asks of a ratio matrix: upper[x,y] = 1/rho_xy (diagonal 1, Fractions),
    gaps[x,y] = G_xy, column_tokens[y] = token id of complement(S[y]), ladders[(x,y)] =
    (token ids z_0 .. z_k, link gaps) of the certificate's ladder, sharers[z] = the queries
    whose ladders pass through the intermediate key z (one query: a private key)."""

    family: WitnessFamily
    upper: np.ndarray
    gaps: np.ndarray
    column_tokens: tuple[int, ...]
    ladders: dict
    sharers: dict

    @property
    def private_ladders(self) -> bool:
        """True when no intermediate ladder key is used by two queries."""
        return all(len(v) == 1 for v in self.sharers.values())

    @property
    def size(self) -> int:
        return len(self.upper)

    def upper_float(self) -> np.ndarray:
        return np.vectorize(float, otypes=[np.float64])(self.upper)


def _check_family(family) -> WitnessFamily:
    if not isinstance(family, WitnessFamily):
        raise TypeError(f"family must be a WitnessFamily, got {type(family).__name__}")
    return family


def ratio_bounds(family: WitnessFamily) -> RatioBounds:
    """The box of admissible ratio matrices of F(S): 1/rho_xy from the family's certificate,
    with the ladders and which queries share each intermediate ladder key."""
    family = _check_family(family)
    cert = family.certificate
    S = np.asarray(cert.S, dtype=np.int64)
    N = len(S)
    index = {t.tobytes(): k for k, t in enumerate(family.tokens)}
    columns = tuple(index[(1 - x).astype(np.int64).tobytes()] for x in S)
    upper = np.empty((N, N), dtype=object)
    gaps = np.zeros((N, N), dtype=np.int64)
    ladders = {}
    w = int(S[0].sum())
    for i in range(N):
        upper[i, i] = Fraction(1)
        for j in range(N):
            if i == j:
                continue
            upper[i, j] = 1 / cert.rho[(i, j)]
            gaps[i, j] = w - int(S[i] @ S[j])
            chain = tuple(index[np.asarray(t, dtype=np.int64).tobytes()]
                          for t in cert.chains[(i, j)])
            ladders[(i, j)] = (chain, tuple(cert.gaps[(i, j)]))
    sharers = _ladder_sharers(family, ladders)
    return RatioBounds(family, upper, gaps, columns, ladders, sharers)


def _ladder_sharers(family: WitnessFamily, ladders: dict) -> dict:
    """{intermediate token: set of queries whose ladders pass through it}; raises ValueError
    if an intermediate key occurs in a sequence of a query whose ladders do not use it."""
    q = family.query_position
    keys = np.delete(family.token_ids, q, axis=1)
    seen: dict[int, set] = {}
    for row, qid in enumerate(family.query_ids.tolist()):
        for t in keys[row].tolist():
            seen.setdefault(t, set()).add(qid)
    sharers: dict[int, set] = {}
    for (i, _j), (chain, _) in ladders.items():
        for t in chain[1:-1]:
            sharers.setdefault(t, set()).add(i)
    for t, users in sharers.items():
        if seen.get(t, set()) != users:
            raise ValueError(f"the intermediate ladder key (token {t}) occurs in sequences of "
                             f"queries {sorted(seen.get(t, set()) - users)} that do not use it")
    return sharers


# --------------------------------------------------------------------------- admissibility


def _as_fraction_matrix(M, N: int, name: str = "M") -> np.ndarray:
    arr = np.asarray(M, dtype=object)
    if arr.shape != (N, N):
        raise ValueError(f"{name} must be an |S| x |S| = {N} x {N} matrix, got shape {arr.shape}")
    out = np.empty((N, N), dtype=object)
    for idx, v in np.ndenumerate(arr):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer, Fraction)):
            raise TypeError(f"{name} must hold ints or Fractions (exact), got {type(v).__name__}")
        out[idx] = Fraction(int(v)) if isinstance(v, np.integer) else Fraction(v)
    return out


def admissibility_violations(M, bounds: RatioBounds) -> list[str]:
    """Every reason M is not admissible (empty list: admissible). Exact arithmetic."""
    if not isinstance(bounds, RatioBounds):
        raise TypeError(f"bounds must be RatioBounds, got {type(bounds).__name__}")
    N = bounds.size
    M = _as_fraction_matrix(M, N)
    problems = []
    for x in range(N):
        if M[x, x] != 1:
            problems.append(f"M[{x},{x}] = {M[x, x]} != 1")
        zero_gaps = set()
        for y in range(N):
            if x == y:
                continue
            if M[x, y] < 0:
                problems.append(f"M[{x},{y}] = {M[x, y]} < 0")
            elif not M[x, y] < bounds.upper[x, y]:
                problems.append(f"M[{x},{y}] = {M[x, y]} >= 1/rho = {bounds.upper[x, y]}")
            if M[x, y] == 0:
                zero_gaps.add(int(bounds.gaps[x, y]))
        if len(zero_gaps) > 1:
            problems.append(f"row {x} has zeros at gaps {sorted(zero_gaps)}: the query's own "
                            "score can match only one")
    return problems


def exact_rank(rows) -> int:
    """Rank over Q of a matrix of ints/Fractions (Bareiss fraction-free elimination: every
    division is exact and entries stay minors of the integer matrix)."""
    mat = []
    for row in rows:
        row = [Fraction(v) for v in row]
        den = math.lcm(*(v.denominator for v in row)) if row else 1
        mat.append([int(v * den) for v in row])
    if not mat or not mat[0]:
        return 0
    n_rows, n_cols = len(mat), len(mat[0])
    prev, rank = 1, 0
    for _ in range(min(n_rows, n_cols)):
        pivot = next(((i, j) for i in range(rank, n_rows) for j in range(rank, n_cols)
                      if mat[i][j] != 0), None)
        if pivot is None:
            break
        i, j = pivot
        mat[rank], mat[i] = mat[i], mat[rank]
        for row in mat:
            row[rank], row[j] = row[j], row[rank]
        p = mat[rank][rank]
        for i in range(rank + 1, n_rows):
            a = mat[i][rank]
            mat[i] = [0] * (rank + 1) + [(mat[i][c] * p - a * mat[rank][c]) // prev
                                         for c in range(rank + 1, n_cols)]
        prev = p
        rank += 1
    return rank


# --------------------------------------------------------------------------- factors -> head


@dataclass(frozen=True, eq=False)
class ExactHead:
    """An NKA head on F(S) given by tables (all Fractions).

    query_features (N, r): phi_Q(S[x]); key_features {token id: (r,)} at every key position;
    self_features (N, r): the key map at the query's own position on S[x]; self_value_scale
    (N,): value mu(x) S[x] at the query's position (v(z) = z at key positions); bias (N,):
    readout y = <x, o> + bias[x]. max_error: the exact max error this module computed.
    """

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
        tables = [self.query_features.ravel(), self.self_features.ravel()]
        tables += [np.asarray(v, dtype=object) for v in self.key_features.values()]
        return all(v >= 0 for t in tables for v in t)

    def kernel_table(self) -> np.ndarray:
        """alpha(S[x], z) at key positions for every query x and key token: (N, T) Fractions."""
        ids = sorted(self.key_features)
        out = np.empty((len(self.query_features), len(ids)), dtype=object)
        for x, q in enumerate(self.query_features):
            for c, t in enumerate(ids):
                out[x, c] = sum((a * b for a, b in zip(q, self.key_features[t], strict=True)),
                                Fraction(0))
        return out

    def to_kernel_head(self) -> KernelAttentionHead:
        """The same head as a :class:`KernelAttentionHead` (exact object arrays); tokens
        outside the family get zero features."""
        return tables_to_kernel_head(self.family, self.query_features, self.key_features,
                                     self.self_features, self.self_value_scale, self.bias)


def tables_to_kernel_head(family, query_features, key_features, self_features,
                          self_value_scale, bias) -> KernelAttentionHead:
    """A KernelAttentionHead reading phi_Q, phi_K, the query-position tables and the bias
    from lookup tables keyed by token (see :class:`ExactHead`)."""
    S = np.asarray(family.S, dtype=np.int64)
    r, q = len(query_features[0]), family.query_position
    qrow = {x.tobytes(): i for i, x in enumerate(S)}
    krow = {family.tokens[t].tobytes(): tuple(v) for t, v in key_features.items()}
    zero = (Fraction(0),) * r

    def lookup(tokens, table, width):
        tokens = np.asarray(tokens, dtype=np.int64)
        out = np.empty(tokens.shape[:-1] + ((width,) if width else ()), dtype=object)
        flat = tokens.reshape(-1, tokens.shape[-1])
        view = out.reshape((-1, width) if width else (-1,))
        for k, tok in enumerate(flat):
            view[k] = table(tok.tobytes())
        return out

    def query(b):
        i = qrow.get(b)
        return tuple(query_features[i]) if i is not None else zero

    def key(z, p):
        if p == q:
            return lookup(z, lambda b: tuple(self_features[qrow[b]]) if b in qrow else zero, r)
        return lookup(z, lambda b: krow.get(b, zero), r)

    def values(z, p):
        z = np.asarray(z, dtype=np.int64)
        if p != q:
            return z
        scale = lookup(z, lambda b: self_value_scale[qrow[b]] if b in qrow else Fraction(1), 0)
        return z.astype(object) * scale[..., None]

    return KernelAttentionHead(
        rank=r, query_features=lambda x: lookup(x, query, r), key_features=key, values=values,
        readout_weights=lambda x: np.asarray(x, dtype=np.int64),
        readout_bias=lambda x: lookup(x, lambda b: bias[qrow[b]] if b in qrow else Fraction(0), 0))


def _fraction_factor(F, name: str, N: int) -> np.ndarray:
    arr = np.asarray(F, dtype=object)
    if arr.ndim != 2 or arr.shape[0] != N or arr.shape[1] < 1:
        raise ValueError(f"{name} must have shape (|S| = {N}, r >= 1), got {arr.shape}")
    out = np.empty(arr.shape, dtype=object)
    for idx, v in np.ndenumerate(arr):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer, Fraction)):
            raise TypeError(f"{name} must hold ints or Fractions (exact), got {type(v).__name__}")
        out[idx] = Fraction(int(v)) if isinstance(v, np.integer) else Fraction(v)
    return out


def _dot(a, b) -> Fraction:
    return sum((u * v for u, v in zip(a, b, strict=True)), Fraction(0))


def ratio_matrix_of_factors(query_factor, key_factor) -> np.ndarray:
    """M[x,y] = <Q_x, K_y> / <Q_x, K_x> (exact); Q_x phi_Q(S[x]), K_y phi_K(complement S[y])."""
    N = len(query_factor)
    Q, K = _fraction_factor(query_factor, "query_factor", N), _fraction_factor(
        key_factor, "key_factor", N)
    if Q.shape != K.shape:
        raise ValueError(f"query_factor and key_factor must have the same shape, got {Q.shape} "
                         f"and {K.shape}")
    M = np.empty((N, N), dtype=object)
    for x in range(N):
        d = _dot(Q[x], K[x])
        if d <= 0:
            raise ValueError(f"<Q_x, K_x> = {d} <= 0 for x = {x}: K(x, complement x) must be > 0")
        for y in range(N):
            M[x, y] = _dot(Q[x], K[y]) / d
    return M


def _ladder_trees(bounds: RatioBounds, M) -> dict:
    """Per query x: {intermediate token: (parent token or None, prod of c up to it)} and the
    leaf values tau = M[x,y] rho_xy hanging below each token."""
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


#: Where inside each sharer's window (0: at the leaves' value, 1: at the root's) a shared
#: ladder key's targets are tried, in order.
SHARED_TARGETS = (Fraction(1, 2), Fraction(3, 4), Fraction(7, 8), Fraction(15, 16),
                  Fraction(1, 4))


def _shared_key_weights(bounds: RatioBounds, M, trees, nonnegative: bool) -> dict:
    """For a key z shared by queries X: weights lambda with phi_K(z) = sum_{x in X} lambda_x K_x,
    so t_x(z) = (M_XX lambda)_x; targets tau_x = m + f (1 - m) inside each sharer's window
    (m: largest leaf tau below z), f from SHARED_TARGETS until lambda >= 0 where needed."""
    out = {}
    for z, users in bounds.sharers.items():
        if len(users) == 1:
            continue
        X = sorted(users)
        for x in X:
            nodes, _ = trees[x]
            if any(len(bounds.sharers[a]) > 1 for a in _ancestors(nodes, z)):
                raise ValueError(f"ladder key {z} and one of its ancestors are both shared")
        A = [[M[a, b] for b in X] for a in X]
        for f in SHARED_TARGETS:
            t = []
            for x in X:
                nodes, leaves = trees[x]
                m = _max_leaf_below(nodes, leaves, z)
                t.append((m + f * (1 - m)) / nodes[z][1])
            lam = _solve(A, t)
            if lam is not None and (not nonnegative or all(v >= 0 for v in lam)):
                # simpler weights: moving each lambda by < delta moves every t_x by
                # < |X| delta (entries of M_XX are <= 1), half the distance to its window
                room = min(min(tx - _max_leaf_below(*trees[x], z) / trees[x][0][z][1],
                               1 / trees[x][0][z][1] - tx) for x, tx in zip(X, t, strict=True))
                delta = room / (2 * len(X))
                lam = [simplest_between(max(v - delta, Fraction(0)) if v > 0 else v - delta,
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


def _solve(A, b):
    """Exact solution of the square system A lam = b (Fractions), None if singular."""
    n = len(A)
    rows = [list(map(Fraction, r)) + [Fraction(v)] for r, v in zip(A, b, strict=True)]
    for c in range(n):
        p = next((r for r in range(c, n) if rows[r][c] != 0), None)
        if p is None:
            return None
        rows[c], rows[p] = rows[p], rows[c]
        for r in range(n):
            if r != c and rows[r][c] != 0:
                f = rows[r][c] / rows[c][c]
                rows[r] = [u - f * v for u, v in zip(rows[r], rows[c], strict=True)]
    return [rows[i][n] / rows[i][i] for i in range(n)]


def _ladder_levels(bounds: RatioBounds, M, trees, shared_tau) -> dict:
    """Normalised kernel values t(z) = K(x,z)/K(x,xbar) of every private ladder key.

    Along a ladder with link factors c_i, tau(z_i) = t(z_i) prod_{j<=i} c_j must fall
    strictly from tau = 1 at the bottom key to tau = M[x,y] rho_xy < 1 at complement(y).
    Parents first, a free key takes the simplest rational in the middle third of
    (lo, tau(parent)) (tau = 1 at the bottom key), lo the largest tau of the fixed keys and
    leaves below it; tau then falls strictly along every ladder.
    """
    out = {}
    for x in range(bounds.size):
        nodes, leaves = trees[x]
        fixed = {z: shared_tau[(x, z)] for z in nodes if (x, z) in shared_tau}
        children: dict = {}
        for z, (p, _) in nodes.items():
            children.setdefault(p, []).append(z)

        def lo(z, fixed=fixed, leaves=leaves, children=children):
            vals = list(leaves.get(z, []))
            for c in children.get(z, []):
                vals.append(fixed[c] if c in fixed else lo(c))
            return max(vals)

        tau = dict(fixed)
        depth = {z: sum(1 for _ in _ancestors(nodes, z)) for z in nodes}
        for z in sorted(nodes, key=lambda t: depth[t]):  # parents before children
            if z in fixed:
                continue
            parent = nodes[z][0]
            up = Fraction(1) if parent is None else tau[parent]
            low = lo(z)
            tau[z] = simplest_between(low + (up - low) / 3, low + 2 * (up - low) / 3)
            out[(x, z)] = tau[z] / nodes[z][1]
    return out


def build_exact_head(family: WitnessFamily, query_factor, key_factor, strict: bool = True,
                     self_weight=Fraction(1, 1000)) -> ExactHead:
    """The head of the reduction from factors of M = diag(<Q_x,K_x>)^-1 Q K^T (exact).

    phi_Q(S[x]) = Q_x; phi_K(complement S[y]) = K_y at every key position; an intermediate
    ladder key z of query x gets t(z) K_x (a scaled copy of the bottom key), one shared by
    queries X the combination sum_{x in X} lambda_x K_x that puts each t_x(z) inside its
    window (nonnegative lambda for nonnegative factors); values v(z) = z;
    readout <x, o> + b(x) with b(x) centring the errors of x's sequences. Rows of M with
    zeros also get a small self-weight at the query's position with score G_0 (the zeros'
    common gap). With strict=True, raises ValueError unless M is admissible.
    """
    bounds = ratio_bounds(family)
    N = bounds.size
    Q = _fraction_factor(query_factor, "query_factor", N)
    K = _fraction_factor(key_factor, "key_factor", N)
    M = ratio_matrix_of_factors(Q, K)
    problems = admissibility_violations(M, bounds)
    if strict and problems:
        raise ValueError(f"M = Q K^T (rows normalised) is not admissible: {problems[:3]}")
    trees = _ladder_trees(bounds, M)
    nonnegative = all(v >= 0 for v in Q.ravel()) and all(v >= 0 for v in K.ravel())
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
    """Key features at the query's own position and its value scale: for a row x of M with
    zeros at gap G_0, self-weight weight * (smallest positive ratio) * <Q_x, K_x> and score
    G_0 (value (G_0/w) x); zero elsewhere."""
    N, r = Q.shape
    self_features = np.full((N, r), Fraction(0), dtype=object)
    self_scale = np.full(N, Fraction(1), dtype=object)
    for x, (g0, smallest) in zero_rows.items():
        self_scale[x] = Fraction(g0, w)
        qx = Q[x]
        # alpha_q(x, x) = <Q_x, phi> is free: the token S[x] is only ever at the query
        # position. A multiple of a unit vector keeps nonnegative features nonnegative.
        target = weight * smallest * _dot(qx, K[x])
        i = max(range(r), key=lambda k: qx[k])
        if all(v >= 0 for v in qx):
            self_features[x, i] = target / qx[i]
        else:
            norm = _dot(qx, qx)
            self_features[x] = [target * v / norm for v in qx]
    return self_features, self_scale


def _raw_errors(family, Q, key_features, self_features, self_scale):
    """Per row: output minus target with bias 0, exact; raises on a negative weight or a zero
    denominator."""
    q = family.query_position
    S = family.S
    cache: dict = {}
    errors = []
    for row in range(len(family)):
        x = int(family.query_ids[row])
        num = den = Fraction(0)
        for p, t in enumerate(family.token_ids[row].tolist()):
            if p == q:
                a = _dot(Q[x], self_features[x])
                s = self_scale[x] * int(S[x].sum())
            else:
                if (x, t) not in cache:
                    if t not in key_features:
                        raise ValueError(f"no key features for token {t} (row {row})")
                    cache[(x, t)] = _dot(Q[x], key_features[t])
                a = cache[(x, t)]
                s = int(family.tokens[t] @ S[x])
            if a < 0:
                raise ValueError(f"negative attention weight {a} at row {row}, position {p}")
            num += a * s
            den += a
        if den <= 0:
            raise ValueError(f"attention denominator {den} <= 0 at row {row}")
        errors.append(num / den - int(family.targets[row]))
    return errors


def simplest_between(lo, hi) -> Fraction:
    """The rational with the smallest denominator in the open interval (lo, hi), lo < hi
    (continued fractions; keeps the head files short)."""
    lo, hi = Fraction(lo), Fraction(hi)
    if not lo < hi:
        raise ValueError(f"need lo < hi, got {lo} and {hi}")
    if lo < 0 < hi:
        return Fraction(0)
    if hi <= 0:
        return -simplest_between(-hi, -lo)
    fl = math.floor(lo)
    if fl + 1 < hi:
        return Fraction(fl + 1)
    if lo == fl:
        return fl + Fraction(1, math.floor(1 / (hi - fl)) + 1)
    return fl + 1 / simplest_between(1 / (hi - fl), 1 / (lo - fl))


def _centre_biases(family, Q, key_features, self_features, self_scale):
    errors = _raw_errors(family, Q, key_features, self_features, self_scale)
    N = len(Q)
    lo, hi = [None] * N, [None] * N
    for row, e in enumerate(errors):
        x = int(family.query_ids[row])
        lo[x] = e if lo[x] is None else min(lo[x], e)
        hi[x] = e if hi[x] is None else max(hi[x], e)
    bias = np.empty(N, dtype=object)
    for x in range(N):
        centre, half = -(lo[x] + hi[x]) / 2, (hi[x] - lo[x]) / 2
        slack = (Fraction(1, 2) - half) / 4
        bias[x] = simplest_between(centre - slack, centre + slack) if slack > 0 else centre
    max_error = max(max(hi[x] + bias[x], -(lo[x] + bias[x])) for x in range(N))
    return bias, max_error


# --------------------------------------------------------------------------- constructions


def indicator_factors(bounds: RatioBounds, fill=Fraction(1, 2)):
    """Rank |S|, nonnegative: Q = I, K_y[x] = M[x,y] with M = I + fill * (1/rho) off the
    diagonal (the query-indicator head's kernel table, any fill in (0, 1))."""
    fill = Fraction(fill)
    if not 0 < fill < 1:
        raise ValueError(f"fill must lie in (0, 1), got {fill}")
    N = bounds.size
    Q = np.array([[Fraction(int(i == j)) for j in range(N)] for i in range(N)], dtype=object)
    K = np.array([[Fraction(1) if x == y else fill * bounds.upper[x, y] for x in range(N)]
                  for y in range(N)], dtype=object)
    return Q, K


def spread_products(bounds: RatioBounds) -> list[Fraction]:
    """P_s = sum_{k != s} u_sk u_ks (u = 1/rho): a one-query spread of query s exists iff
    P_s > 1 (see :func:`spread_factors`)."""
    N = bounds.size
    return [sum((bounds.upper[s, k] * bounds.upper[k, s] for k in range(N) if k != s),
                Fraction(0)) for s in range(N)]


def spread_factors(bounds: RatioBounds, s: int | None = None):
    """Rank |S| - 1, nonnegative: every query k != s one-hot, query s spread over them.

    M[k,s] = theta u_ks, M[k,y] = tau u_ky (y != k, s), row s proportional to
    sum_k u_sk M[k,:] with theta P_s = (1 + P_s)/2. Row s of any admissible M that is a
    nonnegative combination sum gamma_k M[k,:] of the other rows has gamma_y <= M[s,y] < u_sy,
    so 1 = M[s,s] < sum u_sk u_ks = P_s: the construction exists iff P_s > 1.
    Default s: the largest P_s. Returns (Q, K) with r = |S| - 1.
    """
    N = bounds.size
    P = spread_products(bounds)
    if s is None:
        s = max(range(N), key=lambda k: (P[k], k))
    if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or not 0 <= s < N:
        raise ValueError(f"s must be an int in [0, |S|) = [0, {N}), got {s!r}")
    s = int(s)
    if not P[s] > 1:
        raise ValueError(f"no one-query spread of query {s} exists: sum_k u_sk u_ks = {P[s]} "
                         "<= 1")
    u = bounds.upper
    others = [k for k in range(N) if k != s]
    theta = (1 + P[s]) / (2 * P[s])
    # tau: row s must stay below u_sy: u_sy + tau sum_{k != y} u_sk u_ky < theta P_s u_sy
    slack = min((theta * P[s] - 1) * u[s, y]
                / max(sum((u[s, k] * u[k, y] for k in others if k != y), Fraction(0)),
                      Fraction(1, 10**9)) for y in others)
    tau = Fraction(1, 2 ** max(1, (1 / slack).numerator.bit_length()))
    while not tau < slack:
        tau /= 2
    Mb = {}
    for k in others:
        for y in range(N):
            Mb[(k, y)] = (Fraction(1) if y == k else theta * u[k, s] if y == s
                          else tau * u[k, y])
    col = {k: c for c, k in enumerate(others)}
    Q = np.full((N, N - 1), Fraction(0), dtype=object)
    for k in others:
        Q[k, col[k]] = Fraction(1)
    for k in others:
        Q[s, col[k]] = u[s, k]
    K = np.empty((N, N - 1), dtype=object)
    for y in range(N):
        for k in others:
            K[y, col[k]] = Mb[(k, y)]
    return Q, K


# --------------------------------------------------------------------------- numerical search


@dataclass(frozen=True)
class SearchResult:
    """Float factors (Q, K) with Q K^T admissible up to the margin (rows normalised), the
    restart and round that found them; None factors when the search failed."""

    rank: int
    nonnegative: bool
    seed: int
    query_factor: np.ndarray | None
    key_factor: np.ndarray | None
    restart: int | None
    worst_violation: float


def _violation(X, upper, margin, floor):
    N = len(X)
    off = ~np.eye(N, dtype=bool)
    d = np.diag(X)
    if np.any(d <= 0):
        return np.inf
    Xn = X / d[:, None]
    return float(max(np.max(Xn[off] - upper[off] * (1 - margin / 2)),
                     np.max(upper[off] * floor / 2 - Xn[off])))


def _signed_search(upper, r, rng, margin, floor, rounds, torch, start=None):
    N = len(upper)
    U = torch.tensor(upper, dtype=torch.float64)
    hi, lo = U * (1 - margin), U * floor
    off = 1 - torch.eye(N, dtype=torch.float64)
    init = rng.uniform(0, 1, (2, N, r)) / np.sqrt(r) if start is None else start
    A = torch.tensor(init[0], requires_grad=True)
    B = torch.tensor(init[1], requires_grad=True)
    opt = torch.optim.LBFGS([A, B], max_iter=500, line_search_fn="strong_wolfe",
                            tolerance_grad=1e-14, tolerance_change=1e-16, history_size=50)

    def closure():
        opt.zero_grad()
        X = A @ B.T
        loss = ((torch.diagonal(X) - 1) ** 2).sum() + (
            (torch.relu(X - hi) ** 2 + torch.relu(lo - X) ** 2) * off).sum()
        loss.backward()
        return loss

    worst = np.inf
    for _ in range(rounds):
        opt.step(closure)
        Q, K = A.detach().numpy().copy(), B.detach().numpy().copy()
        worst = min(worst, _violation(Q @ K.T, upper, margin, floor))
        if worst < 0:
            return Q, K, worst
    return None, None, worst


def _hals(X, W, H):
    """One sweep of HALS: nonnegative least squares for W, then H, in X ~ W H^T."""
    for A, B, T in ((W, H, X), (H, W, X.T)):
        BtB, TB = B.T @ B, T @ B
        for i in range(A.shape[1]):
            A[:, i] = np.maximum(1e-12, A[:, i] + (TB[:, i] - A @ BtB[:, i])
                                 / max(BtB[i, i], 1e-12))


def _nonnegative_search(upper, r, rng, margin, floor, rounds):
    N = len(upper)
    hi, lo = upper * (1 - margin), upper * floor
    W, H = rng.uniform(0, 1, (N, r)), rng.uniform(0, 1, (N, r))
    worst = np.inf
    for _ in range(rounds * 100):
        X = W @ H.T
        worst = min(worst, _violation(X, upper, margin, floor))
        if worst < 0:
            return W, H, worst
        Y = np.clip(X, lo, hi)
        np.fill_diagonal(Y, 1.0)
        _hals(Y, W, H)
    return None, None, worst


def _warm_start(start, rank: int):
    """Rank-`rank` truncation (SVD) of a matrix, as a (2, N, rank) factor pair; None passes."""
    if start is None:
        return None
    X = np.asarray(start, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] != X.shape[1] or not np.all(np.isfinite(X)):
        raise ValueError(f"start must be a finite square matrix, got shape {X.shape}")
    u, sv, vt = np.linalg.svd(X)
    root = np.sqrt(sv[:rank])
    return np.stack([u[:, :rank] * root, vt[:rank].T * root])


def search_ratio_factors(bounds: RatioBounds, rank: int, seed: int = 0, nonnegative=False,
                         restarts: int = 4, rounds: int = 30, margin: float = 2e-3,
                         floor: float = 1e-4, start=None) -> SearchResult:
    """Look for float factors Q, K (|S| x rank) with Q K^T admissible, entries kept in
    [floor u, (1 - margin) u] off the diagonal so rounding to rationals keeps them inside.

    Signed: L-BFGS on sum (diag - 1)^2 + hinge^2 outside the box (torch, float64, one
    thread). Nonnegative: alternating projections between the box and nonnegative rank-r
    matrices (one HALS sweep per projection). Seeded; each restart draws a new start;
    `start` (an N x N matrix, e.g. an admissible M of higher rank) seeds the first signed
    restart with its rank-`rank` truncation.
    """
    if not isinstance(bounds, RatioBounds):
        raise TypeError(f"bounds must be RatioBounds, got {type(bounds).__name__}")
    N = bounds.size
    if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) or not 1 <= rank <= N:
        raise ValueError(f"rank must be an int in [1, |S|] = [1, {N}], got {rank!r}")
    for name, v in (("restarts", restarts), ("rounds", rounds), ("seed", seed)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise ValueError(f"{name} must be an int >= 0, got {v!r}")
    if not (0 < margin < 1 and 0 < floor < 1):
        raise ValueError(f"margin and floor must lie in (0, 1), got {margin}, {floor}")
    upper = bounds.upper_float()
    rng = np.random.default_rng(seed)
    worst = np.inf
    if not nonnegative:
        import torch

        torch.set_num_threads(1)
    for restart in range(restarts):
        if nonnegative:
            Q, K, v = _nonnegative_search(upper, int(rank), rng, margin, floor, rounds)
        else:
            Q, K, v = _signed_search(upper, int(rank), rng, margin, floor, rounds, torch,
                                     _warm_start(start, int(rank)) if restart == 0 else None)
        worst = min(worst, v)
        if Q is not None:
            return SearchResult(int(rank), bool(nonnegative), int(seed), Q, K, restart, v)
    return SearchResult(int(rank), bool(nonnegative), int(seed), None, None, None, worst)


def rationalise(factor: np.ndarray, denominator: int) -> np.ndarray:
    """Round every entry to the nearest multiple of 1/denominator (exact Fractions); a
    nonnegative entry stays nonnegative."""
    if isinstance(denominator, bool) or not isinstance(denominator, (int, np.integer)) or (
            denominator < 1):
        raise ValueError(f"denominator must be an int >= 1, got {denominator!r}")
    arr = np.asarray(factor, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError("factor must hold finite floats")
    out = np.empty(arr.shape, dtype=object)
    for idx, v in np.ndenumerate(arr):
        out[idx] = Fraction(int(round(v * denominator)), int(denominator))
    return out


def exact_head_from_search(family: WitnessFamily, result: SearchResult,
                           denominators=ROUNDING_DENOMINATORS) -> ExactHead:
    """Round a search result's factors (rows of Q scaled so diag(Q K^T) = 1 first) with the
    smallest denominator that leaves M admissible, then build and check the head exactly."""
    if not isinstance(result, SearchResult) or result.query_factor is None:
        raise ValueError("result must be a successful SearchResult (query_factor not None)")
    bounds = ratio_bounds(family)
    Qf, Kf = result.query_factor, result.key_factor
    Qf = Qf / np.einsum("ij,ij->i", Qf, Kf)[:, None]
    for den in denominators:
        Q, K = rationalise(Qf, den), rationalise(Kf, den)
        try:
            M = ratio_matrix_of_factors(Q, K)
        except ValueError:
            continue
        if not admissibility_violations(M, bounds):
            return build_exact_head(family, Q, K)
    raise ValueError(f"no denominator in {tuple(denominators)} keeps the rounded M admissible")
