"""Level heads for all length-3 inputs at small m (chapter 8, ``prf:prop-level-heads``): a
head seeing (x, z, z') only through w = |x|, <x, z>, <x, z'>, kernel of degree <= k (feature
rank B(m, k) + 1); per w an exact LP, for 'nka' (P, s >= 0) and 'positive' (den > 0).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from companion.checks import check_choice, check_int
from companion.core.lp import FarkasCertificate, feasible_point
from companion.open.multihead import overlap_scores_lp

__all__ = ["LevelSolution", "min_level_degree", "level_feature_rank", "exact_probe_tables"]

KINDS = ("nka", "positive")


@dataclass(frozen=True)
class LevelSolution:
    """A level head for query weight w: kernels P[p][a] (p = 0, 1 for key positions 1, 2;
    a = 0..w), numerators N[p][a] (= P F), self-weight s, self-numerator S0."""

    w: int
    k: int
    kind: str
    P: tuple[tuple[Fraction, ...], tuple[Fraction, ...]]
    N: tuple[tuple[Fraction, ...], tuple[Fraction, ...]]
    s: Fraction
    S0: Fraction

    def output(self, a: int, b: int) -> Fraction:
        den = self.s + self.P[0][a] + self.P[1][b]
        if den == 0:
            raise ValueError(f"denominator 0 at (a, b) = ({a}, {b})")
        return (self.S0 + self.N[0][a] + self.N[1][b]) / den


def _level_lp(w: int, k: int, kind: str = "nka", error=Fraction(1, 2), repair: bool = True):
    """Exact LP: a level head for weight w, kernel degree <= k, max error <= ``error``, or None
    (a checked Farkas certificate). Keys shared by the positions lose nothing (average a
    solution with its swap); ``repair`` lifts zero weights carrying a numerator."""
    k = min(k, w)
    # variable layout: [c_0..c_k] [s] [S0] [N_0..N_w]
    i_s, i_S0, i_N = k + 1, k + 2, k + 3
    nvar = i_N + w + 1
    basis = [[Fraction(math.comb(a, j)) for j in range(k + 1)] for a in range(w + 1)]

    def P_row(a):
        return basis[a] + [Fraction(0)] * (nvar - k - 1)

    A, bvec = [], []
    for a in range(w + 1):
        for b in range(a, w + 1):
            D = [u + v for u, v in zip(P_row(a), P_row(b))]
            D[i_s] += 1
            Nn = [Fraction(0)] * nvar
            Nn[i_S0] += 1
            Nn[i_N + a] += 1
            Nn[i_N + b] += 1
            t = min(a, b)
            A.append([-v for v in D])  # den >= 1
            bvec.append(Fraction(-1))
            # num - t den <= E den  and  -(num - t den) <= E den
            A.append([nv - t * dv - error * dv for nv, dv in zip(Nn, D)])
            bvec.append(Fraction(0))
            A.append([-nv + t * dv - error * dv for nv, dv in zip(Nn, D)])
            bvec.append(Fraction(0))
    if kind == "nka":
        for a in range(w + 1):
            A.append([-v for v in P_row(a)])  # P(a) >= 0
            bvec.append(Fraction(0))
        row = [Fraction(0)] * nvar
        row[i_s] = Fraction(-1)  # s >= 0
        A.append(row)
        bvec.append(Fraction(0))
    x = feasible_point(A, bvec)
    if isinstance(x, FarkasCertificate):
        return None
    P = tuple(sum(basis[a][j] * x[j] for j in range(k + 1)) for a in range(w + 1))
    N = tuple(x[i_N:i_N + w + 1])
    sol = LevelSolution(w, k, kind, (P, P), (N, N), x[i_s], x[i_S0])
    return _repair(sol, error) if repair else sol


def _repair(sol: LevelSolution, error: Fraction) -> LevelSolution:
    """The LP relaxes N = P F: a token of weight 0 may carry a numerator. Add a small delta to
    every kernel value (and a zero self-weight) while the exact error stays <= (error + 1/2)/2."""
    bad = any(sol.P[p][a] == 0 and sol.N[p][a] != 0 for p in range(2) for a in range(sol.w + 1))
    bad |= sol.s == 0 and sol.S0 != 0
    if not bad:
        return sol
    target = (error + Fraction(1, 2)) / 2
    delta = Fraction(1, 2 ** 10)
    for _ in range(80):
        P = tuple(tuple(v + delta for v in row) for row in sol.P)
        s = sol.s + delta if sol.s == 0 else sol.s
        if all(v != 0 for row in P for v in row):
            cand = LevelSolution(sol.w, sol.k, sol.kind, P, sol.N, s, sol.S0)
            try:
                if _level_max_error(cand) <= target:
                    return cand
            except ValueError:
                pass
        delta /= 2
    raise RuntimeError("could not repair a zero-weight token in the LP solution")


def _level_max_error(sol: LevelSolution) -> Fraction:
    """Exact max |y - min(a, b)| over a, b in 0..w (ValueError at a zero denominator)."""
    return max(abs(sol.output(a, b) - min(a, b))
               for a in range(sol.w + 1) for b in range(sol.w + 1))


def min_level_degree(w: int, kind: str = "nka"):
    """(k, solution, proved): the least k whose level LP is feasible at error 1/2 - 1/1000, and
    the smaller k whose LP at error exactly 1/2 is infeasible (no such head has error < 1/2)."""
    w = check_int(w, "w", 0, 8)
    check_choice(kind, "kind", KINDS)
    error = Fraction(1, 2) - Fraction(1, 1000)
    proved = []
    for k in range(w + 1):
        sol = _level_lp(w, k, kind, error)
        if sol is not None:
            return k, sol, proved
        if _level_lp(w, k, kind, Fraction(1, 2), repair=False) is None:
            proved.append(k)
    return None, None, proved


def level_feature_rank(m: int, k: int) -> int:
    """Feature rank of a degree-<=k level head on {0,1}^m: B(m, k) monomial features (keys
    shared by the positions) plus one for the self-weight."""
    m = check_int(m, "m", 1, 4096)
    k = check_int(k, "k", 0)
    return sum(math.comb(m, j) for j in range(min(k, m) + 1)) + 1


def _level_degree_table(max_w: int, kinds=("nka", "positive")) -> list[dict]:
    """Per kind and w = 1..max_w: least degree k, degrees proved impossible, error, rank."""
    rows = []
    for kind in kinds:
        for w in range(1, max_w + 1):
            k, sol, proved = min_level_degree(w, kind)
            rows.append({"kind": kind, "w": w, "k": k, "proved_impossible": proved,
                         "max_error": None if sol is None else str(_level_max_error(sol)),
                         "feature_rank": None if k is None else level_feature_rank(w, k)})
    return rows


def exact_probe_tables(max_w: int = 8) -> dict:
    """Chapter 8's exact tables (``probes --exact``): ``level``, the least level-head degrees,
    and ``overlap_heads``, per w the least number of heads with kernels <x,z> + h + 1/2."""
    max_w = check_int(max_w, "max_w", 1, 8)
    overlap = []
    for w in range(1, max_w + 1):
        proved, heads = [], None
        for h in range(1, 2 * w + 2):
            if overlap_scores_lp(w, h, Fraction(499, 1000)) is not None:
                heads = h
                break
            if overlap_scores_lp(w, h, Fraction(1, 2)) is None:
                proved.append(h)
        overlap.append({"w": w, "heads": heads, "proved_impossible": proved})
    return {"level": _level_degree_table(max_w), "overlap_heads": overlap}
