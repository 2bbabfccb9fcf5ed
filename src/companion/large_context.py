"""The large-context limit of Theorem E: as n -> oo the bound of a code S tends to |S|, so the
best bound tends to the largest size of a constant-weight code with all gaps >= 2.

For fixed m, Theorem E's bound for a code S (constant weight w, every gap G_xy >= 2) lies
between |S|^2 / (|S| + |S|(|S|-1)/(n-2)^2) and |S|, because rho_{n,1/2}(G) >= c(G) =
(n-2)(G-1) >= n-2 for G >= 2. So the limit over n of the best bound at width m is

    L(m) = max_w A(m, w),  A(m, w) = largest weight-w code in {0,1}^m with all gaps >= 2,

(gap >= 2 means overlap <= w - 2, i.e. Hamming distance >= 4). Two classical counts pin it:
the Graham-Sloane classes (weight-w words whose positions sum to a fixed residue mod m) have
all gaps >= 2, so A(m, w) >= C(m, w)/m; and two words of such a code never share w - 1 ones,
so each (w-1)-subset lies in at most one word and A(m, w) <= C(m, w-1)/w. Hence

    ceil(C(m, floor(m/2)) / m) <= L(m) <= floor(C(m+1, floor((m+1)/2)) / (m+1)),

two numbers less than 2 (one bit) apart in ratio, up to rounding. The book's "large-n limit"
column is the lower end of this interval, a lower bound on the limit, not the limit itself.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

#: Most words C(m, w) that :func:`max_code_size_gap_two` searches exhaustively (m = 9, w = 3
#: takes seconds; m = 9, w = 4, with 126 words, takes minutes).
MAX_EXACT_WORDS = 84


def _check_width(m, low: int = 2) -> int:
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)):
        raise TypeError(f"m (token width) must be an int, got {type(m).__name__}")
    if m < low:
        raise ValueError(f"m (token width) must be an int >= {low}, got {m}")
    return int(m)


def _check_weight(w, m: int) -> int:
    if isinstance(w, bool) or not isinstance(w, (int, np.integer)):
        raise TypeError(f"w (weight) must be an int, got {type(w).__name__}")
    if not 1 <= w <= m - 1:
        raise ValueError(f"w (weight) must be an int in [1, m-1] = [1, {m - 1}], got {w}")
    return int(w)


def graham_sloane_code(m: int, w: int, residue: int) -> np.ndarray:
    """All weight-w words of {0,1}^m whose positions (0..m-1) sum to `residue` mod m.

    Every two of them have gap >= 2: words at gap 1 differ by moving one 1 from position i
    to j != i, which changes the sum by j - i, not 0 mod m. Shape (size, m); may be empty."""
    m = _check_width(m)
    w = _check_weight(w, m)
    if isinstance(residue, bool) or not isinstance(residue, (int, np.integer)):
        raise TypeError(f"residue must be an int, got {type(residue).__name__}")
    if not 0 <= residue < m:
        raise ValueError(f"residue must be an int in [0, m-1] = [0, {m - 1}], got {residue}")
    if math.comb(m, w) > 2**22:
        raise ValueError(f"C(m, w) = {math.comb(m, w)} words is too many to list; choose a "
                         "smaller m")
    rows = [c for c in itertools.combinations(range(m), w) if sum(c) % m == residue]
    code = np.zeros((len(rows), m), dtype=np.int64)
    for i, c in enumerate(rows):
        code[i, list(c)] = 1
    return code


def code_size_lower_bound(m: int, w: int) -> int:
    """ceil(C(m, w)/m) <= A(m, w): the largest of the m Graham-Sloane classes has this many."""
    m = _check_width(m)
    w = _check_weight(w, m)
    return -(-math.comb(m, w) // m)


def code_size_upper_bound(m: int, w: int) -> int:
    """A(m, w) <= floor(C(m, w-1)/w): each (w-1)-subset lies in at most one codeword (two
    words sharing w-1 ones have gap 1) and each codeword contains w of them."""
    m = _check_width(m)
    w = _check_weight(w, m)
    return math.comb(m, w - 1) // w


def large_context_limit_bounds(m: int) -> tuple[int, int]:
    """(lower, upper) with lower <= L(m) <= upper, L(m) = lim_{n->oo} of the best Theorem E
    bound at width m = max_w A(m, w): ceil(C(m, m//2)/m) and max_w floor(C(m, w-1)/w)."""
    m = _check_width(m)
    lower = max(code_size_lower_bound(m, w) for w in range(1, m))
    upper = max(code_size_upper_bound(m, w) for w in range(1, m))
    return lower, upper


def large_context_limit_log2_bounds(m: int) -> tuple[float, float]:
    """log2 of large_context_limit_bounds(m) (computed from the exact integers)."""
    lower, upper = large_context_limit_bounds(m)
    return math.log2(lower), math.log2(upper)


def max_code_size_gap_two(m: int, w: int) -> int:
    """A(m, w) exactly, by an exhaustive branch-and-bound clique search over all weight-w
    words (C(m, w) <= MAX_EXACT_WORDS): the largest set with every pairwise overlap <= w - 2."""
    m = _check_width(m)
    w = _check_weight(w, m)
    if math.comb(m, w) > MAX_EXACT_WORDS:
        raise ValueError(f"C(m, w) = {math.comb(m, w)} words exceeds MAX_EXACT_WORDS = "
                         f"{MAX_EXACT_WORDS} for the exhaustive search; choose smaller m or w")
    words = [sum(1 << i for i in c) for c in itertools.combinations(range(m), w)]
    N = len(words)
    # adjacency as bitsets: i ~ j when the two words may both be in the code (overlap <= w-2)
    adj = [sum(1 << j for j in range(N) if j != i and bin(words[i] & words[j]).count("1") <= w - 2)
           for i in range(N)]
    best = 0

    def colour_bound(cand: int) -> int:
        """Greedy colouring of the candidate set: a clique uses at most one vertex per colour."""
        colours, rest = 0, cand
        while rest:
            colours += 1
            avail = rest
            while avail:
                v = avail & -avail
                i = v.bit_length() - 1
                rest &= ~v
                avail &= ~v & ~adj[i]
        return colours

    def expand(size: int, cand: int) -> None:
        nonlocal best
        if cand == 0:
            best = max(best, size)
            return
        if size + colour_bound(cand) <= best:
            return
        while cand:
            if size + bin(cand).count("1") <= best:
                return
            v = cand & -cand
            i = v.bit_length() - 1
            expand(size + 1, cand & adj[i])
            cand &= ~v

    expand(0, (1 << N) - 1)
    return best
