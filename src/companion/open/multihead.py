"""Several NKA heads, y(X) = sum_h [<a_h(x), o_h> + b_h(x)] (chapter 8: ``prf:prop-two-heads``,
``prf:prop-cauchy-heads``): a sum of convex combinations is not one; the exact constructions pay
in the value dimension, which the single-head theorem leaves free.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from companion.bounds.witness import WitnessFamily
from companion.checks import check_instance, check_int, check_tokens
from companion.core.attention import KernelAttentionHead, kernel_attention
from companion.core.exact import exact_max_error, solve
from companion.core.lp import FarkasCertificate, feasible_point
from companion.core.task import check_convention, query_target, token_ids, token_index
from companion.sandwich.heads import token_lookup

__all__ = [
    "multihead_max_error_exact",
    "two_head_witness_heads",
    "cauchy_level_max_error",
    "answer_function_count",
]

#: Most sequences an exact multi-head evaluation accepts (Python Fractions).
MAX_EXACT_SEQUENCES = 2**12


def _check_heads(heads) -> tuple[KernelAttentionHead, ...]:
    if isinstance(heads, KernelAttentionHead):
        heads = (heads,)
    if isinstance(heads, (str, bytes)) or not isinstance(heads, Sequence) or not heads:
        raise TypeError("heads must be a non-empty sequence of KernelAttentionHead")
    if len(heads) > 1024:
        raise ValueError(f"heads must hold at most 1024 heads, got {len(heads)}")
    return tuple(check_instance(h, f"heads[{i}]", KernelAttentionHead)
                 for i, h in enumerate(heads))


def multihead_max_error_exact(heads, sequences, convention="bidirectional") -> Fraction:
    """max |y - t| over the given sequences, in exact arithmetic."""
    heads = _check_heads(heads)
    check_convention(convention)
    x = check_tokens(sequences)
    if x.size == 0 or x.size // (x.shape[-1] * x.shape[-2]) > MAX_EXACT_SEQUENCES:
        raise ValueError(f"sequences must hold 1 to {MAX_EXACT_SEQUENCES} sequences (exact "
                         f"evaluation), got shape {x.shape}")
    y = sum(kernel_attention(h, x, convention, exact=True) for h in heads)
    return exact_max_error(y, query_target(x, convention))


# --------------------------------------------------------------- two heads on a witness


def two_head_witness_heads(family) -> tuple[KernelAttentionHead, ...]:
    """Two rank-1 NKA heads exact on F(S): weights 1 and psi(z) = 1 + token id; along each
    query's link forest F_2 grows by mu_1 g / (mu_1 - mu_2), F_1 = <x, z> - F_2 (values one-hot
    over S). ValueError if some query's links are not a forest."""
    check_instance(family, "family", WitnessFamily)
    n, q = family.n, family.query_position
    T, S = len(family.tokens), np.asarray(family.S, dtype=np.int64)
    psi = [Fraction(1 + i) for i in range(T)]  # distinct: no link ties
    k_copies, l_copies = 1, n - 2
    scores2: list[dict[int, Fraction]] = []
    for i in range(len(S)):
        keys = [tid for (qi, tid) in family.pure_rows if qi == i]
        links = [lk for lk in family.links if lk.query == i]
        children = defaultdict(list)
        indegree = defaultdict(int)
        for lk in links:
            children[lk.better].append(lk)
            indegree[lk.worse] += 1
        if any(v > 1 for v in indegree.values()) or len(links) >= len(keys):
            raise ValueError(f"the links of query S[{i}] are not a forest")
        f2: dict[int, Fraction] = {}
        mu1 = Fraction(l_copies, k_copies + l_copies)
        for root in keys:
            if indegree[root] or root in f2:
                continue
            f2[root] = Fraction(0)
            todo = deque([root])
            while todo:
                z = todo.popleft()
                for lk in children[z]:
                    mu2 = l_copies * psi[lk.worse] / (k_copies * psi[lk.better]
                                                      + l_copies * psi[lk.worse])
                    f2[lk.worse] = f2[z] + mu1 * lk.gap / (mu1 - mu2)
                    todo.append(lk.worse)
        if len(f2) != len(keys):
            raise ValueError(f"the links of query S[{i}] are not a forest")
        scores2.append(f2)
    index = token_index(family.tokens)
    query_index = token_index(S)
    N = len(S)
    v1 = np.zeros((T, N), dtype=object)
    v2 = np.zeros((T, N), dtype=object)
    v1[:], v2[:] = Fraction(0), Fraction(0)
    for i, f2 in enumerate(scores2):
        for tid, val in f2.items():
            v2[tid, i] = val
            v1[tid, i] = Fraction(int(family.tokens[tid] @ S[i])) - val

    eye = np.eye(N, dtype=np.int64)

    def make(weight, values):
        return KernelAttentionHead(
            rank=1,
            query_features=lambda x: np.ones(np.shape(x)[:-1] + (1,), dtype=np.int64),
            key_features=lambda z, p: token_lookup(
                z, lambda b: (Fraction(0) if p == q else weight[index[b]],), 1),
            values=lambda z, p: values[token_ids(index, z)],
            readout_weights=lambda x: token_lookup(x, lambda b: eye[query_index[b]], N),
            readout_bias=lambda x: np.zeros(np.shape(x)[:-1], dtype=np.int64),
        )

    return make([Fraction(1)] * T, v1), make(psi, v2)


# --------------------------------------------------------- all inputs: Cauchy heads


def _default_shifts(count: int) -> list[Fraction]:
    return [Fraction(2 * h + 1, 2) for h in range(count)]  # t_h = h + 1/2 > 0


def _cauchy_scores(m: int, shifts: Sequence[Fraction]) -> dict[int, list[list[Fraction]]]:
    """P[w][h][a]: numerator functions with sum_h (P_h(a) + P_h(b)) / (a + b + 2 t_h) =
    min(a, b) for all a, b in 0..w, for each query weight w = 0..m."""
    out = {}
    for w in range(m + 1):
        sums = list(range(2 * w + 1))
        H = len(sums)  # heads 0..2w suffice for weight w; the others get zero scores
        t = list(shifts[:H])
        # Psi[s][h] = 1 / (s + 2 t_h); solve C Psi^T = I, i.e. C = (Psi^T)^-1
        psi = [[1 / (s + 2 * th) for th in t] for s in sums]
        # row s0 of (Psi^T)^-1 solves Psi c = e_s0
        inv = [solve(psi, [Fraction(int(s == s0)) for s in sums]) for s0 in sums]
        # delta_{s0}(s) = sum_h C[s0][h] psi_h(s) with C = inv (rows s0)
        P = [[Fraction(0)] * (w + 1) for _ in range(len(shifts))]
        for s0 in sums:
            for a in range(w + 1):
                g = Fraction(min(a, s0 - a), 2)
                for h in range(H):
                    P[h][a] += inv[s0][h] * g
        out[w] = P
    return out


def overlap_scores_lp(w: int, heads: int, error=Fraction(499, 1000)):
    """Exact LP: numerators P[h][a] (h < heads, a <= w) with |sum_h (P_h(a) + P_h(b)) /
    (a + b + 2 t_h) - min(a, b)| <= error for all a, b <= w (t_h = h + 1/2), or
    None (infeasible, with a checked Farkas certificate)."""
    shifts = _default_shifts(heads)
    nv = heads * (w + 1)
    A, bvec = [], []
    for a in range(w + 1):
        for b in range(a, w + 1):
            row = [Fraction(0)] * nv
            for h in range(heads):
                c = 1 / (a + b + 2 * shifts[h])
                row[h * (w + 1) + a] += c
                row[h * (w + 1) + b] += c
            t = min(a, b)
            A.append(row)
            bvec.append(t + error)
            A.append([-v for v in row])
            bvec.append(-t + error)
    result = feasible_point(A, bvec)
    if isinstance(result, FarkasCertificate):
        return None
    return [list(result[h * (w + 1):(h + 1) * (w + 1)]) for h in range(heads)]


def _overlap_level_max_error(P: dict, shifts) -> Fraction:
    """Exact max error of overlap heads with numerators P[w][h][a] and shifts t_h over every
    input class (|x|, <x,z>, <x,z'>) — exhaustive, since the heads see nothing else."""
    worst = Fraction(0)
    for w, Pw in P.items():
        for a in range(w + 1):
            for b in range(w + 1):
                y = sum(((Pw[h][a] + Pw[h][b]) / (a + b + 2 * th)
                         for h, th in enumerate(shifts)), Fraction(0))
                worst = max(worst, abs(y - min(a, b)))
    return worst


def cauchy_level_max_error(m: int) -> Fraction:
    """Exact max error of the 2m+1 Cauchy heads (kernels <x,z> + t_h, rank m+1) over every
    class (|x|, <x,z>, <x,z'>): exhaustive on all length-3 inputs, the heads see nothing else."""
    m = check_int(m, "m", 1, 8)
    shifts = _default_shifts(2 * m + 1)
    return _overlap_level_max_error(_cauchy_scores(m, shifts), shifts)


def answer_function_count(m: int) -> int:
    """Number of distinct answer tables x -> min(<x,z>, <x,z'>) over key pairs (z, z'):
    what Bob (the query) must tell apart from Alice's (the keys') transcript."""
    m = check_int(m, "m", 1, 8)
    toks = ((np.arange(2 ** m)[:, None] >> np.arange(m)) & 1).astype(np.int8)
    ov = (toks.astype(np.int16) @ toks.T.astype(np.int16)).astype(np.int8)  # (z, x)
    seen = set()
    for z in range(2 ** m):
        tables = np.minimum(ov[z][None, :], ov[z:])  # pairs (z, z') with z' >= z
        seen.update(row.tobytes() for row in tables)
    return len(seen)

