"""The sandwich as a matrix problem (Chapter 3, {prf:ref}`prop-sandwich-matrix-problem`): M is
admissible for F(S) if M[x,x] = 1, 0 <= M[x,y] < 1/rho_xy and each row's zeros sit at one gap
G_xy; explicit factors (query indicators, the spread of {prf:ref}`prop-one-query-spread`).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from companion.bounds.witness import WitnessFamily
from companion.checks import check_exact_array, check_fraction, check_instance, check_int
from companion.core.exact import exact_rank  # noqa: F401 (the sandwich's rank, chapter 3)
from companion.core.task import token_index

__all__ = ["ratio_bounds", "admissibility_violations", "spread_products", "indicator_factors",
           "spread_factors", "ratio_matrix_of_factors"]

#: Most entries of one exact factor (|S| x r Fractions; the book's largest has 2116).
MAX_FACTOR_ENTRIES = 2**16


@dataclass(frozen=True, eq=False)
class RatioBounds:
    """What F(S) asks of a ratio matrix: upper[x,y] = 1/rho_xy (diagonal 1), gaps[x,y] = G_xy,
    column_tokens[y] = token id of complement(S[y]), ladders[(x,y)] = (token ids, link gaps),
    sharers[z] = the queries whose ladders pass through the intermediate key z."""

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


def ratio_bounds(family: WitnessFamily) -> RatioBounds:
    """The box of admissible ratio matrices of F(S): 1/rho_xy from the family's certificate,
    with the ladders and which queries share each intermediate ladder key."""
    check_instance(family, "family", WitnessFamily)
    cert = family.certificate
    S = np.asarray(cert.S, dtype=np.int64)
    N = len(S)
    index = token_index(family.tokens)
    columns = tuple(index[(1 - x).astype(np.int64).tobytes()] for x in S)
    upper = np.full((N, N), Fraction(1), dtype=object)
    gaps = np.zeros((N, N), dtype=np.int64)
    ladders = {}
    w = int(S[0].sum())
    for i, j in itertools.permutations(range(N), 2):
        upper[i, j] = 1 / cert.rho[(i, j)]
        gaps[i, j] = w - int(S[i] @ S[j])
        chain = tuple(index[np.asarray(t, dtype=np.int64).tobytes()] for t in cert.chains[(i, j)])
        ladders[(i, j)] = (chain, tuple(cert.gaps[(i, j)]))
    sharers = _ladder_sharers(family, ladders)
    return RatioBounds(family, upper, gaps, columns, ladders, sharers)


def _ladder_sharers(family: WitnessFamily, ladders: dict) -> dict:
    """{intermediate token: set of queries whose ladders pass through it}; raises ValueError
    if an intermediate key occurs in a sequence of a query whose ladders do not use it."""
    keys = np.delete(family.token_ids, family.query_position, axis=1)
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


def admissibility_violations(M, bounds: RatioBounds) -> list[str]:
    """Every reason M is not admissible (empty list: admissible). Exact arithmetic."""
    N = check_instance(bounds, "bounds", RatioBounds).size
    M = check_exact_factor(M, "M", N, N)
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


def check_exact_factor(F, name: str, rows: int | None = None,
                       cols: int | None = None) -> np.ndarray:
    """F (exact numbers: checks.check_exact) as an object array of Fractions of shape (rows,
    cols), each None for any size >= 1; at most MAX_FACTOR_ENTRIES entries."""
    arr = check_exact_array(F, name, 2, MAX_FACTOR_ENTRIES)
    rows = arr.shape[0] if rows is None else rows
    if arr.shape[0] != rows or arr.shape[1] < 1 or cols not in (None, arr.shape[1]):
        raise ValueError(f"{name} must have shape ({rows}, {cols or 'r >= 1'}), got {arr.shape}")
    return np.array([Fraction(v) for v in arr.flat], dtype=object).reshape(arr.shape)


def exact_dot(a, b) -> Fraction:
    """<a, b> in exact arithmetic."""
    return sum((u * v for u, v in zip(a, b, strict=True)), Fraction(0))


def ratio_matrix_of_factors(query_factor, key_factor) -> np.ndarray:
    """M[x,y] = <Q_x, K_y> / <Q_x, K_x> (exact); Q_x = phi_Q(S[x]), K_y = phi_K(complement
    S[y]), both exact factors (ints or Fractions) of one shape."""
    Q = check_exact_factor(query_factor, "query_factor")
    K = check_exact_factor(key_factor, "key_factor", *Q.shape)
    N = len(Q)
    M = np.empty((N, N), dtype=object)
    for x in range(N):
        d = exact_dot(Q[x], K[x])
        if d <= 0:
            raise ValueError(f"<Q_x, K_x> = {d} <= 0 for x = {x}: K(x, complement x) must be > 0")
        M[x] = [exact_dot(Q[x], K[y]) / d for y in range(N)]
    return M


# --------------------------------------------------------------------------- constructions


def indicator_factors(bounds: RatioBounds, fill=Fraction(1, 2)):
    """Rank |S|, nonnegative: Q = I, K_y[x] = M[x,y], M = I + fill * (1/rho) off the diagonal."""
    fill = check_fraction(fill, "fill", 0, 1, low_open=True, high_open=True)
    N = check_instance(bounds, "bounds", RatioBounds).size
    Q = np.array([[Fraction(int(i == j)) for j in range(N)] for i in range(N)], dtype=object)
    K = np.array([[Fraction(1) if x == y else fill * bounds.upper[x, y] for x in range(N)]
                  for y in range(N)], dtype=object)
    return Q, K


def spread_products(bounds: RatioBounds) -> list[Fraction]:
    """P_s = sum_{k != s} u_sk u_ks (u = 1/rho): a one-query spread of query s exists iff
    P_s > 1 (see :func:`spread_factors`)."""
    N = check_instance(bounds, "bounds", RatioBounds).size
    return [sum((bounds.upper[s, k] * bounds.upper[k, s] for k in range(N) if k != s),
                Fraction(0)) for s in range(N)]


def spread_factors(bounds: RatioBounds, s: int | None = None):
    """(Q, K) of rank |S| - 1, nonnegative: queries k != s one-hot, query s (default: largest
    P_s) spread over them, M[k,s] = theta u_ks, M[k,y] = tau u_ky, theta P_s = (1 + P_s)/2;
    it exists iff P_s > 1."""
    N = check_instance(bounds, "bounds", RatioBounds).size
    P = spread_products(bounds)
    if s is None:
        s = max(range(N), key=lambda k: (P[k], k))
    s = check_int(s, "s", 0, N - 1)
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
    Q = np.full((N, N - 1), Fraction(0), dtype=object)
    K = np.empty((N, N - 1), dtype=object)
    for c, k in enumerate(others):
        Q[k, c], Q[s, c] = Fraction(1), u[s, k]
        for y in range(N):
            K[y, c] = Fraction(1) if y == k else theta * u[k, s] if y == s else tau * u[k, y]
    return Q, K
