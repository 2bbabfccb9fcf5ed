"""Exhaustive, exact checks of a head against Min-IP over every input of a given size.

Serves chapter 1 (``thm-rank-one``): exhaustive checks of the rank-1 head.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from .attention import KernelAttentionHead, kernel_attention_integer
from .checks import check_int
from .task import check_convention, iter_sequences, query_target

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
