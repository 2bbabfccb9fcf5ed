"""Exact linear feasibility with checkable certificates: A x <= b over the rationals.

:func:`feasible_point` returns either a point x with A x <= b or a Farkas certificate
y >= 0 with y^T A = 0 and y^T b < 0 (which proves that no x exists), both in Fractions and
both re-checked by plain multiplication before they are returned — so a caller never has
to trust the simplex code, only the check. The simplex is the textbook phase-one method
on a dense tableau (slack columns as the starting basis where they fit, Dantzig's rule with
a fall-back to Bland's rule against cycling), for the small systems of this book.

Serves chapter 8 (``prf:prop-cauchy-heads``: how many overlap heads reach error < 1/2, and the
level-head degrees, each answer backed by a re-checked point or Farkas certificate).
"""

from __future__ import annotations

from fractions import Fraction

from companion.checks import check_fraction, check_instance

__all__ = ["feasible_point", "FarkasCertificate", "check_point", "check_farkas"]


class FarkasCertificate:
    """y >= 0 with y^T A = 0 and y^T b < 0: summing the rows of A x <= b with weights y
    gives 0 <= y^T b < 0, so the system has no solution."""

    def __init__(self, y):
        if isinstance(y, (str, bytes, dict)) or not hasattr(y, "__len__") or len(y) > 2**20:
            raise TypeError("y must be a sequence of at most 2**20 numbers")
        self.y = [check_fraction(v, "y[i]") for v in y]


#: Most entries of A (dense Fraction tableau): the chapter's largest LP has ~6,000.
MAX_LP_ENTRIES = 2**16
#: Most cells of the tableau (rows x (2 cols + rows)): the slack columns make it quadratic in
#: the number of rows.
MAX_TABLEAU = 2**18
#: Most simplex work (each pivot: rows x the pivot row's nonzero entries, each weighted by its
#: size in 64-bit words), a few seconds; the chapter's LPs use a small fraction of it. Past
#: it the LP is refused (a bound on time, whatever the input's bit sizes or pivot count).
MAX_LP_WORK = 5 * 10**7


def _matrix(A, b):
    for name, v in (("A", A), ("b", b)):
        if isinstance(v, (str, bytes, dict)) or v is None or not hasattr(v, "__len__"):
            raise TypeError(f"{name} must be a sequence of numbers, got {type(v).__name__}")
    if not len(A) or len(A) != len(b) or not all(
            hasattr(r, "__len__") and not isinstance(r, (str, bytes)) for r in A):
        raise ValueError("A must be a non-empty list of rows with one b entry per row")
    if len({len(r) for r in A}) != 1 or not len(A[0]) or len(A) * len(A[0]) > MAX_LP_ENTRIES:
        raise ValueError(f"A must be rectangular with 1 to {MAX_LP_ENTRIES} entries")
    if len(A) * (2 * len(A[0]) + len(A)) > MAX_TABLEAU:
        raise ValueError(f"A has {len(A)} rows and {len(A[0])} columns: its simplex tableau "
                         f"would exceed MAX_TABLEAU = {MAX_TABLEAU} cells")
    A = [[check_fraction(v, "A[i][j]") for v in row] for row in A]
    b = [check_fraction(v, "b[i]") for v in b]
    return A, b


def check_point(A, b, x) -> bool:
    """A x <= b, exactly."""
    A, b = _matrix(A, b)
    if isinstance(x, (str, bytes, dict)) or not hasattr(x, "__len__") or len(x) != len(A[0]):
        raise ValueError(f"x must hold {len(A[0])} numbers (one per column of A)")
    x = [check_fraction(v, "x[i]") for v in x]
    return all(sum((a * xi for a, xi in zip(row, x)), Fraction(0)) <= bi
               for row, bi in zip(A, b))


def check_farkas(A, b, cert: FarkasCertificate) -> bool:
    """y >= 0, y^T A = 0, y^T b < 0, exactly."""
    check_instance(cert, "cert", FarkasCertificate)
    A, b = _matrix(A, b)
    y = cert.y
    if len(y) != len(A) or any(v < 0 for v in y):
        return False
    cols = len(A[0])
    if any(sum((y[i] * A[i][j] for i in range(len(A))), Fraction(0)) != 0 for j in range(cols)):
        return False
    return sum((yi * bi for yi, bi in zip(y, b)), Fraction(0)) < 0


def _phase_one(M: list[list[Fraction]], rhs: list[Fraction], unit_columns=None):
    """A z >= 0 with M z = rhs, or None: phase one of the simplex method.

    ``unit_columns[r]`` may name a column that is the unit vector e_r (a slack): rows with
    rhs >= 0 start with it in the basis, the others get an artificial variable. Entering
    column: most negative reduced cost (Dantzig), switching to Bland's rule (smallest
    index, which cannot cycle) after a run of degenerate pivots.
    """
    rows, cols = len(M), len(M[0])
    unit_columns = unit_columns or [None] * rows
    T, basis, artificial = [], [], []
    for r in range(rows):
        row = list(M[r]) + [rhs[r]]
        if rhs[r] < 0:
            row = [-v for v in row]
        T.append(row)
    for r in range(rows):
        j = unit_columns[r]
        if j is not None and rhs[r] >= 0:
            basis.append(j)
        else:
            basis.append(None)
            artificial.append(r)
    # artificial columns appended after the real ones (one per row that needs one)
    width = cols + len(artificial)
    for r in range(rows):
        T[r] = T[r][:-1] + [Fraction(0)] * len(artificial) + [T[r][-1]]
    for idx, r in enumerate(artificial):
        T[r][cols + idx] = Fraction(1)
        basis[r] = cols + idx
    obj = [Fraction(0)] * (width + 1)  # reduced costs of min sum(artificials)
    for r in artificial:
        for j in range(width + 1):
            obj[j] -= T[r][j]
    for idx in range(len(artificial)):
        obj[cols + idx] = Fraction(0)
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
    A, b = _matrix(A, b)
    m, n = len(A), len(A[0])
    # x = x+ - x-, slack s >= 0:  [A  -A  I] (x+, x-, s) = b
    M = [row + [-v for v in row] + [Fraction(int(i == r)) for i in range(m)]
         for r, row in enumerate(A)]
    z = _phase_one(M, b, unit_columns=[2 * n + r for r in range(m)])
    if z is not None:
        x = [u - v for u, v in zip(z[:n], z[n:2 * n])]
        if not check_point(A, b, x):
            raise RuntimeError("simplex returned a point that violates A x <= b")
        return x
    # Farkas: A^T y = 0, b^T y = -1, y >= 0
    M2 = [[A[i][j] for i in range(m)] for j in range(n)] + [list(b)]
    y = _phase_one(M2, [Fraction(0)] * n + [Fraction(-1)])
    if y is None:
        raise RuntimeError("neither a point nor a Farkas certificate was found")
    cert = FarkasCertificate(y)
    if not check_farkas(A, b, cert):
        raise RuntimeError("simplex returned an invalid Farkas certificate")
    return cert
