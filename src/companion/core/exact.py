"""Exact evaluation: every head the book calls exact is checked here in integer / rational
arithmetic, never in floats.

* :func:`exhaustive_check` (chapter 1, ``thm-rank-one``): a head against Min-IP over every
  input of a given size.
* Trained table heads (chapter 8, ``prf:prop-signed-certificate``, ``prf:prop-two-heads``):
  a model (one signed head, or H nonnegative heads summed by a readout) is exported as plain
  tables (:class:`HeadTables`, every float64 entry a dyadic rational) and evaluated on every
  input of a family:

      y(X) = sum_h [ sum_p alpha^h_p <a_h(x), v^h_p(x_p)> / sum_p alpha^h_p ] + b(x),
      alpha^h_p = <phi^h_Q(x), phi^h_K,p(x_p)>.

  Nothing is rounded: a head reported as solving a family has exact max error < 1/2 there. A
  vanishing denominator (possible only for signed features) is refused: the head then defines
  no output on that input, so it cannot count as a solution."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from companion.checks import check_bool, check_instance, check_int
from companion.core.attention import KernelAttentionHead, kernel_attention_integer
from companion.core.task import check_convention, iter_sequences, query_target

__all__ = ["ExhaustiveCheck", "exhaustive_check", "HeadTables", "exact_table_outputs",
           "exact_table_max_error"]


#: Largest exhaustive check (number of sequences) the functions here accept: 2**22 (~7 s on
#: a shared core; the book's largest is 2**21, length 3 at width 7). Compared by exponent:
#: 2**(n*m) itself is never built, so n = 10**9 is refused at once.
MAX_EXHAUSTIVE_BITS = 22
MAX_EXHAUSTIVE_SEQUENCES = 2**MAX_EXHAUSTIVE_BITS


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
    (n*m <= MAX_EXHAUSTIVE_BITS = 22).

    |y - t| = |num - t den| / den is compared in integers, so the maximum is exact.
    """
    check_convention(convention)
    n, m = check_int(n, "n", 1), check_int(m, "m", 1)
    if n * m > MAX_EXHAUSTIVE_BITS:
        raise ValueError(
            f"an exhaustive check of n={n}, m={m} needs 2**{n * m} sequences; the limit is "
            f"2**{MAX_EXHAUSTIVE_BITS} (choose n*m <= {MAX_EXHAUSTIVE_BITS})"
        )
    total = exact = within = 0
    best = (Fraction(-1), None)
    for batch in iter_sequences(n, m, chunk):
        num, den = kernel_attention_integer(head, batch, convention)
        t = query_target(batch, convention)
        gap = np.abs(num - t * den)  # |y - t| * den, an exact integer
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


#: Most inputs one exact evaluation accepts (Python integers: ~10 us per input and head).
MAX_EXACT_ROWS = 2**20
#: Most table entries of one head (the exact pair tables are T * P * T Python integers).
MAX_TABLE_ENTRIES = 2**22


def _float_table(t, name: str, ndim: int) -> np.ndarray:
    if isinstance(t, (str, bytes)) or t is None:
        raise TypeError(f"{name} must be a float array, got {type(t).__name__}")
    try:
        arr = np.asarray(t, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a rectangular float array ({exc})") from exc
    if arr.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {arr.shape}")
    if arr.size > MAX_TABLE_ENTRIES:
        raise ValueError(f"{name} has {arr.size} entries, above {MAX_TABLE_ENTRIES}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must hold finite numbers")
    return arr


class HeadTables:
    """A trained model as plain float64 tables: ``heads`` = ((phi_Q (T, r), phi_K (P, T, r),
    v (P, T, d), a (T, d)), ...), ``bias`` (T,); P = n (position-dependent keys) or 1."""

    def __init__(self, heads, bias, positional: bool, query_position: int):
        if not isinstance(heads, (tuple, list)) or not heads:
            raise TypeError("heads must be a non-empty tuple of (phi_Q, phi_K, v, a) tables")
        tables = []
        for i, h in enumerate(heads):
            if not isinstance(h, (tuple, list)) or len(h) != 4:
                raise TypeError(f"heads[{i}] must be a tuple (phi_Q, phi_K, v, a)")
            fq, fk, v, a = (_float_table(t, f"heads[{i}][{j}]", nd)
                            for j, (t, nd) in enumerate(zip(h, (2, 3, 3, 2))))
            if fk.shape[1:] != fq.shape or v.shape[:2] != fk.shape[:2] \
                    or a.shape != (fq.shape[0], v.shape[2]):
                raise ValueError(f"heads[{i}]: table shapes {fq.shape}, {fk.shape}, {v.shape}, "
                                 f"{a.shape} do not fit together")
            tables.append((fq, fk, v, a))
        if len({t[0].shape[0] for t in tables}) != 1:
            raise ValueError("heads must all be tables over the same T tokens")
        self.heads = tuple(tables)
        self.bias = _float_table(bias, "bias", 1)
        if self.bias.shape != (tables[0][0].shape[0],):
            raise ValueError(f"bias must have shape ({tables[0][0].shape[0]},), "
                             f"got {self.bias.shape}")
        self.positional = check_bool(positional, "positional")
        self.query_position = check_int(query_position, "query_position", 0, 1024)

    @property
    def ranks(self) -> tuple[int, ...]:
        """Feature rank of each head."""
        return tuple(h[0].shape[1] for h in self.heads)


def _dyadic(arr: np.ndarray) -> tuple[np.ndarray, int]:
    """(ints as an object array, K) with arr == ints / 2^K entry by entry."""
    fr = [Fraction(v) for v in arr.ravel().tolist()]
    K = max((f.denominator.bit_length() - 1 for f in fr), default=0)
    ints = np.empty(arr.shape, dtype=object)
    ints.reshape(-1)[:] = [f.numerator << (K - (f.denominator.bit_length() - 1)) for f in fr]
    return ints, K


def _check_ids(tables: HeadTables, token_ids) -> np.ndarray:
    if isinstance(token_ids, (str, bytes)) or token_ids is None:
        raise TypeError(f"token_ids must be an int array (N, n), got {type(token_ids).__name__}")
    ids = np.asarray(token_ids)
    if ids.ndim != 2 or not np.issubdtype(ids.dtype, np.integer) or ids.size == 0:
        raise ValueError(f"token_ids must be a non-empty int array (N, n), got {ids.shape}")
    if len(ids) > MAX_EXACT_ROWS:
        raise ValueError(f"token_ids has {len(ids)} rows, above MAX_EXACT_ROWS")
    n, t = ids.shape[1], tables.heads[0][0].shape[0]
    if not tables.query_position < n:
        raise ValueError(f"token_ids rows have length {n}; query_position "
                         f"{tables.query_position} does not fit")
    if ids.min() < 0 or ids.max() >= t:
        raise ValueError(f"token_ids must lie in [0, {t - 1}]")
    for h, (_, fk, _, _) in enumerate(tables.heads):
        if fk.shape[0] != (n if tables.positional else 1):
            raise ValueError(f"token_ids has length {n} but head {h} has {fk.shape[0]} key "
                             "tables")
    return ids


def exact_table_outputs(tables: HeadTables, token_ids) -> tuple[list[Fraction], list[tuple]]:
    """Outputs on every row of ``token_ids`` (N, n) in exact arithmetic, and each row's
    denominators (D_1, ..., D_H). ValueError naming the input if a denominator vanishes."""
    check_instance(tables, "tables", HeadTables)
    ids = _check_ids(tables, token_ids)
    n, t = ids.shape[1], tables.heads[0][0].shape[0]
    bias_int, bias_k = _dyadic(tables.bias)
    pos = np.arange(n) if tables.positional else np.zeros(n, dtype=np.int64)
    x = ids[:, tables.query_position]
    per_head = []
    for h, (fq, fk, v, a) in enumerate(tables.heads):
        (Q, kq), (K, kk), (V, kv), (A, ka) = (_dyadic(t_) for t_ in (fq, fk, v, a))
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
    outputs, dens = [], []
    for i in range(len(ids)):
        y = Fraction(int(bias_int[x[i]]), 1 << bias_k)
        row = []
        for den, num, k_alpha, k_score in per_head:
            y += Fraction(int(num[i]), int(den[i]) << k_score)
            row.append(Fraction(int(den[i]), 1 << k_alpha))
        outputs.append(y)
        dens.append(tuple(row))
    return outputs, dens


def exact_table_max_error(tables: HeadTables, token_ids, targets) -> Fraction:
    """max_i |y_i - t_i| over the rows, exactly (see :func:`exact_table_outputs`)."""
    check_instance(tables, "tables", HeadTables)
    ids = _check_ids(tables, token_ids)
    if isinstance(targets, (str, bytes)) or targets is None:
        raise TypeError(f"targets must be an int array, got {type(targets).__name__}")
    try:
        targets = np.asarray(targets)
    except ValueError as exc:  # ragged
        raise TypeError(f"targets must be a rectangular int array ({exc})") from exc
    if targets.shape != (len(ids),) or not np.issubdtype(targets.dtype, np.integer):
        raise ValueError(f"targets must be ints of shape ({len(ids)},), got {targets.shape} "
                         f"{targets.dtype}")
    outputs, _ = exact_table_outputs(tables, ids)
    return max(abs(y - int(t)) for y, t in zip(outputs, targets.tolist()))
