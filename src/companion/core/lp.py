"""Exact linear feasibility A x <= b over the rationals (chapter 8, ``prf:prop-cauchy-heads``):
a point or a Farkas certificate, each re-checked by multiplication before it is returned (phase
one on a dense tableau, Dantzig's rule falling back to Bland's against cycling)."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

__all__: list[str] = []


@dataclass
class FarkasCertificate:
    """y >= 0 with y^T A = 0 and y^T b < 0: the rows of A x <= b weighted by y give 0 < 0."""

    y: list


#: Most simplex work (rows x the pivot row's nonzeros, weighted by size in 64-bit words).
MAX_LP_WORK = 5 * 10**7


def _dot(u, v) -> Fraction:
    return sum((a * b for a, b in zip(u, v, strict=True)), Fraction(0))


def _is_point(A, b, x) -> bool:
    """A x <= b, exactly."""
    return all(_dot(row, x) <= bi for row, bi in zip(A, b))


def _is_farkas(A, b, cert: FarkasCertificate) -> bool:
    """y >= 0, y^T A = 0, y^T b < 0, exactly."""
    y = cert.y
    if len(y) != len(A) or any(v < 0 for v in y):
        return False
    return all(_dot(y, col) == 0 for col in zip(*A)) and _dot(y, b) < 0


def _phase_one(M: list[list[Fraction]], rhs: list[Fraction], unit_columns=None):
    """A z >= 0 with M z = rhs, or None (simplex phase one). ``unit_columns[r]``: a slack column
    e_r that starts in the basis when rhs[r] >= 0; other rows get an artificial variable."""
    rows, cols = len(M), len(M[0])
    unit_columns = unit_columns or [None] * rows
    artificial = [r for r in range(rows) if unit_columns[r] is None or rhs[r] < 0]
    basis = list(unit_columns)
    T = []  # rows with rhs >= 0, then one artificial column per row that needs one
    for r in range(rows):
        sign = -1 if rhs[r] < 0 else 1
        T.append([sign * v for v in M[r]] + [Fraction(0)] * len(artificial) + [sign * rhs[r]])
    for idx, r in enumerate(artificial):
        T[r][cols + idx] = Fraction(1)
        basis[r] = cols + idx
    width = cols + len(artificial)
    # reduced costs of min sum(artificials)
    obj = [Fraction(0) if cols <= j < width else -sum((T[r][j] for r in artificial), Fraction(0))
           for j in range(width + 1)]
    degenerate = work = 0
    while True:
        candidates = [j for j in range(width) if obj[j] < 0]
        if not candidates:
            break
        enter = candidates[0] if degenerate > 50 else min(candidates, key=lambda j: obj[j])
        best, leave = None, None
        for r in range(rows):
            if T[r][enter] > 0:
                ratio = T[r][-1] / T[r][enter]
                if best is None or ratio < best or (ratio == best and basis[r] < basis[leave]):
                    best, leave = ratio, r
        if leave is None:  # cannot happen: the phase-one objective is bounded below by 0
            raise RuntimeError("phase one is unbounded")
        degenerate = degenerate + 1 if best == 0 else 0
        piv = T[leave][enter]
        pivot_row = [v / piv for v in T[leave]]
        nz = [j for j, v in enumerate(pivot_row) if v != 0]
        work += rows * sum((1 + (pivot_row[j].numerator.bit_length()
                                 + pivot_row[j].denominator.bit_length()) / 64) ** 2 for j in nz)
        if work > MAX_LP_WORK:
            raise ValueError(f"A, b: the simplex passed MAX_LP_WORK = {MAX_LP_WORK} (entry "
                             "updates times their size in 64-bit words): a system this large "
                             "or with entries this long is beyond the exact LP")
        T[leave] = pivot_row
        for r in range(rows):
            f = T[r][enter]
            if r != leave and f != 0:
                row = T[r]
                for j in nz:
                    row[j] -= f * pivot_row[j]
        f = obj[enter]
        for j in nz:
            obj[j] -= f * pivot_row[j]
        basis[leave] = enter
    if obj[-1] != 0:  # the minimum of the artificials' sum is positive
        return None
    z = [Fraction(0)] * cols
    for r, j in enumerate(basis):
        if j < cols:
            z[j] = T[r][-1]
    return z


def feasible_point(A, b):
    """A point x (list of Fractions) with A x <= b, or a FarkasCertificate if none exists.
    Both are verified exactly before they are returned."""
    A = [[Fraction(v) for v in row] for row in A]
    b = [Fraction(v) for v in b]
    m, n = len(A), len(A[0])
    # x = x+ - x-, slack s >= 0:  [A  -A  I] (x+, x-, s) = b
    M = [row + [-v for v in row] + [Fraction(int(i == r)) for i in range(m)]
         for r, row in enumerate(A)]
    z = _phase_one(M, b, unit_columns=[2 * n + r for r in range(m)])
    if z is not None:
        x = [u - v for u, v in zip(z[:n], z[n:2 * n])]
        if not _is_point(A, b, x):
            raise RuntimeError("simplex returned a point that violates A x <= b")
        return x
    # Farkas: A^T y = 0, b^T y = -1, y >= 0
    M2 = [[A[i][j] for i in range(m)] for j in range(n)] + [list(b)]
    y = _phase_one(M2, [Fraction(0)] * n + [Fraction(-1)])
    if y is None:
        raise RuntimeError("neither a point nor a Farkas certificate was found")
    cert = FarkasCertificate(y)
    if not _is_farkas(A, b, cert):
        raise RuntimeError("simplex returned an invalid Farkas certificate")
    return cert
