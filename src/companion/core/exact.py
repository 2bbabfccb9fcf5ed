"""Exact evaluation in integer / rational arithmetic: exhaustive checks (chapter 1,
``thm-rank-one``), trained float64 table heads read as dyadic rationals (chapter 8,
``prf:prop-signed-certificate``), and one fraction-free Gauss-Jordan elimination over Python
integers behind :func:`exact_rank`, :func:`rank_factorisation` and :func:`solve`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from companion.checks import check_exact_array, check_instance, check_int
from companion.core.attention import KernelAttentionHead, kernel_attention_integer
from companion.core.task import check_convention, iter_sequences, query_target

__all__ = ["exhaustive_check", "exact_rank", "rank_factorisation"]


#: Largest exhaustive check, 2**22 sequences (~7 s; the book's largest is 2**21).
MAX_EXHAUSTIVE_BITS = 22


@dataclass(frozen=True)
class ExhaustiveCheck:
    """Result of checking a head on all 2**(n*m) sequences of length n over {0,1}^m."""

    n: int
    m: int
    convention: str
    sequences: int  # how many inputs were evaluated
    exact: int  # outputs equal to the target
    within_half: int  # |error| < 1/2: rounding returns the target
    max_error: Fraction  # exact maximum of |y - t|
    worst_sequence: np.ndarray  # an input attaining max_error


def exhaustive_check(head: KernelAttentionHead, n: int, m: int, convention: str = "bidirectional",
                     chunk: int = 2**16) -> ExhaustiveCheck:
    """Evaluate an integer-valued head exactly on every length-n sequence over {0,1}^m
    (n*m <= MAX_EXHAUSTIVE_BITS); |y - t| = |num - t den| / den is compared in integers (int64
    where every product fits, else Python ints on at most MAX_BIG_INTEGER_SEQUENCES a chunk)."""
    check_instance(head, "head", KernelAttentionHead)
    check_convention(convention)
    n, m = check_int(n, "n", 1), check_int(m, "m", 1)
    chunk = check_int(chunk, "chunk", 1, 2**24)
    if n * m > MAX_EXHAUSTIVE_BITS:
        raise ValueError(f"an exhaustive check of n={n}, m={m} needs 2**{n * m} sequences, "
                         f"above 2**{MAX_EXHAUSTIVE_BITS} (choose n*m <= {MAX_EXHAUSTIVE_BITS})")
    total = exact = within = 0
    best = (Fraction(-1), None)
    for batch in iter_sequences(n, m, chunk):
        num, den = kernel_attention_integer(head, batch, convention)
        gap = np.abs(num - query_target(batch, convention).astype(num.dtype) * den)  # exact
        total += len(batch)
        exact += int((gap == 0).sum())
        within += int((2 * gap < den).sum())
        # the largest ratio gap/den: floats shortlist near-maximal candidates, Fractions decide
        ratio = gap / den
        shortlist = np.flatnonzero(ratio >= ratio.max() - 1e-9)
        i = max(shortlist, key=lambda j: Fraction(int(gap[j]), int(den[j])))
        if Fraction(int(gap[i]), int(den[i])) > best[0]:
            best = (Fraction(int(gap[i]), int(den[i])), batch[i].copy())
    return ExhaustiveCheck(n, m, convention, total, exact, within, best[0], best[1])


@dataclass(frozen=True)
class HeadTables:
    """A trained model as float64 tables: ``heads`` = ((phi_Q (T, r), phi_K (P, T, r),
    v (P, T, d), a (T, d)), ...), ``bias`` (T,); P = n (position-dependent keys) or 1."""

    heads: tuple
    bias: np.ndarray
    positional: bool
    query_position: int


def _dyadic(arr: np.ndarray) -> tuple[np.ndarray, int]:
    """(ints as an object array, K) with arr == ints / 2^K entry by entry."""
    fr = [Fraction(v) for v in np.ravel(arr).tolist()]
    K = max((f.denominator.bit_length() - 1 for f in fr), default=0)
    ints = np.empty(np.shape(arr), dtype=object)
    ints.reshape(-1)[:] = [f.numerator << (K - (f.denominator.bit_length() - 1)) for f in fr]
    return ints, K


def exact_table_outputs(tables: HeadTables, token_ids) -> tuple[list[Fraction], list[tuple]]:
    """Outputs on every row of ``token_ids`` (N, n) in exact arithmetic, and each row's
    denominators (D_1, ..., D_H). ValueError naming the input if a denominator vanishes."""
    ids = np.asarray(token_ids)
    n, t = ids.shape[1], len(tables.heads[0][0])
    bias_int, bias_k = _dyadic(tables.bias)
    pos = np.arange(n) if tables.positional else np.zeros(n, dtype=np.int64)
    x = ids[:, tables.query_position]
    per_head = []
    for h, head in enumerate(tables.heads):
        (Q, kq), (K, kk), (V, kv), (A, ka) = (_dyadic(t_) for t_ in head)
        P = K.shape[0]
        # integer pair tables: alpha[x, p, z] * 2^(kq+kk) and score[x, p, z] * 2^(ka+kv)
        alpha = Q.dot(K.reshape(P * t, -1).T).reshape(t, P, t)
        score = A.dot(V.reshape(P * t, -1).T).reshape(t, P, t)
        al = np.stack([alpha[x, pos[p], ids[:, p]] for p in range(n)], -1)
        sc = np.stack([score[x, pos[p], ids[:, p]] for p in range(n)], -1)
        den, num = al.sum(-1), (al * sc).sum(-1)
        bad = [i for i, d in enumerate(den.tolist()) if d == 0]
        if bad:
            raise ValueError(f"token_ids: head {h} has a vanishing denominator on the input "
                             f"{ids[bad[0]].tolist()}")
        per_head.append((den, num, kq + kk, ka + kv))
    outputs = [Fraction(int(bias_int[x[i]]), 1 << bias_k)
               + sum((Fraction(int(num[i]), int(den[i]) << k_s) for den, num, _, k_s in per_head),
                     Fraction(0)) for i in range(len(ids))]
    dens = [tuple(Fraction(int(den[i]), 1 << k_a) for den, _, k_a, _ in per_head)
            for i in range(len(ids))]
    return outputs, dens


def exact_table_max_error(tables: HeadTables, token_ids, targets) -> Fraction:
    """max_i |y_i - t_i| over the rows, exactly (see :func:`exact_table_outputs`)."""
    return exact_max_error(exact_table_outputs(tables, token_ids)[0], targets)


def exact_max_error(outputs, targets) -> Fraction:
    """max_i |y_i - t_i| over paired outputs (ints / Fractions) and integer targets, exactly
    (every target through int(): never an int64 subtraction)."""
    return max(abs(Fraction(y) - int(t))
               for y, t in zip(np.ravel(np.asarray(outputs, dtype=object)).tolist(),
                               np.ravel(np.asarray(targets, dtype=object)).tolist(),
                               strict=True))


# --------------------------------------------------------------------------- linear algebra

#: Most multiply-adds rows x cols x min(rows, cols) of one elimination (book: 275,080), and most
#: cost units: step j makes (rows - j)(cols - j) minors of ~j b bits, each 1 + (B/64)^2 units.
MAX_EXACT_WORK = 2**22
MAX_EXACT_COST = 3 * 10**8


def _bit_cap(rows: int, cols: int) -> int:
    """The largest entry bit size b whose elimination cost stays within MAX_EXACT_COST."""
    k = min(rows, cols)

    def cost(bits: int) -> float:
        b = bits + k.bit_length()
        return sum((rows - j) * (cols - j) * (1 + (j * b / 64) ** 2) for j in range(1, k + 1))

    lo, hi = 0, 2**24
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if cost(mid) <= MAX_EXACT_COST else (lo, mid - 1)
    return lo


def _check_integer_rows(M, name: str) -> tuple[np.ndarray, list[list[int]]]:
    """(M as exact numbers, its rows each times the lcm of its denominators: the same row
    space) for a non-empty 2-d M within the work limits."""
    arr = check_exact_array(M, name, 2)
    if 0 in arr.shape:
        raise ValueError(f"{name} must be a non-empty 2-d matrix, got shape {arr.shape}")
    rows, cols = arr.shape
    work = rows * cols * min(rows, cols)
    if work > MAX_EXACT_WORK:
        raise ValueError(f"{name} has shape {arr.shape}: rows x columns x min(rows, columns) "
                         f"= {work} exceeds MAX_EXACT_WORK = {MAX_EXACT_WORK}")
    cap = _bit_cap(rows, cols)
    out = []
    for i, row in enumerate(arr.tolist()):
        den, d_bits = 1, 0
        for v in row:  # stop early on lower bounds of the cleared entries' size
            if isinstance(v, Fraction):
                den = math.lcm(den, v.denominator)
                d_bits = max(d_bits, v.denominator.bit_length())
                if (abs(v.numerator).bit_length() > cap + 1
                        or den.bit_length() - d_bits - 1 > cap):
                    break
            elif abs(v).bit_length() > cap:
                break
        else:
            ints = [int(v * den) for v in row]
            if max(abs(v) for v in ints).bit_length() <= cap:
                out.append(ints)
                continue
        raise ValueError(f"{name}: row {i} has entries of more than {cap} bits after clearing "
                         f"its denominators, the most a {rows} x {cols} matrix may have "
                         f"(MAX_EXACT_COST = {MAX_EXACT_COST}); limit the entries' bit size")
    return arr, out


def _reduce(mat: list[list[int]], ncols: int, jordan: bool = True
            ) -> tuple[list[list[int]], list[int], int]:
    """Fraction-free Gauss-Jordan on the first ``ncols`` columns, in place: (mat, pivots, d),
    mat / d the reduced row echelon form (exact divisions: minors); ``jordan=False``: Bareiss."""
    prev, rank = 1, 0
    pivots = []
    for c in range(ncols):
        i = next((i for i in range(rank, len(mat)) if mat[i][c] != 0), None)
        if i is None:
            continue
        mat[rank], mat[i] = mat[i], mat[rank]
        prow = mat[rank]
        p = prow[c]
        for i in range(0 if jordan else rank + 1, len(mat)):
            row = mat[i]
            if i == rank:
                continue
            a = row[c]
            mat[i] = [(p * u - a * v) // prev for u, v in zip(row, prow)]
        prev = p
        pivots.append(c)
        rank += 1
    return mat, pivots, prev


def exact_rank(M) -> int:
    """Rank over Q of a matrix of exact numbers (checks.check_exact: floats read exactly),
    within MAX_EXACT_WORK and MAX_EXACT_COST."""
    rows = _check_integer_rows(M, "M")[1]
    return len(_reduce(rows, len(rows[0]), jordan=False)[1])


def rank_factorisation(M) -> tuple[np.ndarray, np.ndarray]:
    """Exact M = U V^T with U (rows, rank) = M's pivot columns and V (cols, rank) = the
    reduced row echelon form's nonzero rows, transposed (object arrays of Fractions)."""
    original, rows = _check_integer_rows(M, "M")
    red, pivots, d = _reduce([list(r) for r in rows], len(rows[0]))
    U = np.array([[Fraction(original[i, c]) for c in pivots]
                  for i in range(len(rows))], dtype=object).reshape(len(rows), len(pivots))
    V = np.array([[Fraction(v, d) for v in red[k]] for k in range(len(pivots))],
                 dtype=object).reshape(len(pivots), len(rows[0])).T
    return U, V


def solve(A, b) -> list[Fraction] | None:
    """The solution of the square system A x = b (ints / Fractions), None if A is singular."""
    n = len(A)
    rows = []
    for row, v in zip(A, b, strict=True):
        row = [Fraction(u) for u in row] + [Fraction(v)]
        den = math.lcm(*(u.denominator for u in row))
        rows.append([int(u * den) for u in row])
    red, pivots, d = _reduce(rows, n)
    if len(pivots) < n:
        return None
    return [Fraction(red[i][n], d) for i in range(n)]
