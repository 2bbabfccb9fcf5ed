"""Lemmas D, D', N and Theorem E (bounds/rank_bounds.py): the trace bound, its nonnegative and
shifted sharpenings, the certified rank bound of a code, exact on big integers; Lemma N's
tight cases, a randomized check and an attack."""

import itertools
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from companion.bounds import rank_bounds
from companion.bounds.amplification import best_chain_factor
from companion.bounds.codes import paley_hadamard_code, paley_subset
from companion.bounds.gap_domination import total_weights
from companion.bounds.rank_bounds import (
    certified_rank_bound,
    near_orthogonal_attack,
    near_orthogonal_rank_bound,
    sharp_rank_bound,
    shifted_trace_attack,
    shifted_trace_bound,
    unit_diagonal_from_factors,
)
from companion.bounds.witness import witness_family
from companion.core.attention import KernelAttentionHead
from companion.experiments.e1 import experiment_witness_24
from companion.sandwich.matrix import exact_rank

trace_rank_bound = rank_bounds._trace_rank_bound
approximate_identity_bound = rank_bounds._approximate_identity_bound


def nonnegative_rank_bound(N, counts):
    """Lemma D' optimised over c: the sharper lemma's value minus 1 (entries <= 1)."""
    value, c = rank_bounds._sharp(N, counts)
    return value - 1, c


def sharpened_value(N: int, counts: dict, c: Fraction) -> Fraction:
    """Lemma D' at one c (the oracle): N^2 (1-c)^2 / (N (1-c)^2 + sum_u k_u max(c, u-c)^2) - 1."""
    den = N * (1 - c) ** 2 + sum((k * max(c, u - c) ** 2 for u, k in counts.items()),
                                 Fraction(0))
    return N * N * (1 - c) ** 2 / den - 1


# ----
# Chapter 3 fixes: K(x, complement x) > 0 follows from the weights alone when R > 1, and
# the asymptotic table's certified column is computed exactly.
def _query_only_head(m: int) -> KernelAttentionHead:
    """Rank 1, attends only to the query's own position (K = 0 on every key)."""
    def key_features(z, p):
        shape = np.shape(z)[:-1] + (1,)
        return np.ones(shape, np.int64) if p == 0 else np.zeros(shape, np.int64)

    return KernelAttentionHead(
        rank=1, query_features=lambda x: np.ones(np.shape(x)[:-1] + (1,), np.int64),
        key_features=key_features, values=lambda z, p: np.asarray(z, np.int64),
        readout_weights=lambda x: np.asarray(x, np.int64),
        readout_bias=lambda x: np.zeros(np.shape(x)[:-1], np.int64))


def _weight_inequality_holds(head, family) -> bool:
    """D(x; complement x) >= rho_xy D(x; complement y) for every pair of the certificate."""
    D = total_weights(head, family.sequences, family.convention, exact=True)
    index = {t.tobytes(): k for k, t in enumerate(family.tokens)}
    comp = [index[(1 - x).astype(np.int64).tobytes()] for x in family.S]
    return all(D[family.pure_rows[(i, comp[i])]] >= r * D[family.pure_rows[(i, comp[j])]]
               for (i, j), r in family.certificate.rho.items())


def test_r_equal_one_is_the_only_case_needing_the_pure_targets():
    """A head attending only to the query meets every weight inequality with R = 1 (gap 2 at
    n = 3) with K(x, complement x) = 0; with R > 1 it cannot meet them, because
    K(x, x~) >= (R-1) alpha_q + R K(x, y~) >= (R-1) D(x; y~) > 0."""
    assert best_chain_factor(2) == 1 and best_chain_factor(3) == 2
    S_gap_two = np.array([[1, 1, 0, 0], [0, 0, 1, 1]])  # w = 2, overlap 0: gap 2, R = 1
    fam = witness_family(S_gap_two)
    assert set(fam.certificate.rho.values()) == {Fraction(1)}
    assert _weight_inequality_holds(_query_only_head(4), fam)
    fam24 = experiment_witness_24()
    assert min(fam24.certificate.rho.values()) > 1  # the book's witness: R > 1 throughout
    assert not _weight_inequality_holds(_query_only_head(24), fam24)


# ----
# Lemma D, Lemma D' and Theorem E's certified bound; the asymptotic helpers.
PALEY23 = paley_hadamard_code(23)


def _low_rank_unit_diagonal(N, k, seed, nonnegative=False, spread=1.0):
    """M = V V^T with unit rows V (N x k): unit diagonal, rank <= k. With `nonnegative`, V's
    entries are |normal|**spread (large spread: nearly orthogonal, so M is near the identity)."""
    V = np.random.default_rng(seed).normal(size=(N, k))
    if nonnegative:
        V = np.abs(V) ** spread
    V /= np.linalg.norm(V, axis=1, keepdims=True)
    M = V @ V.T
    np.fill_diagonal(M, 1.0)
    return M


@settings(max_examples=60, deadline=None)
@given(N=st.integers(2, 14), k=st.integers(1, 14), seed=st.integers(0, 2**32 - 1))
def test_lemma_D_never_exceeds_the_true_rank(N, k, seed):
    rng = np.random.default_rng(seed)
    M = rng.normal(size=(N, k)) @ rng.normal(size=(k, N))
    assert trace_rank_bound(M) <= np.linalg.matrix_rank(M) + 1e-9


@settings(max_examples=60, deadline=None)
@given(N=st.integers(2, 9), k=st.integers(1, 9), seed=st.integers(0, 2**32 - 1))
def test_lemma_D_exact_on_integer_matrices(N, k, seed):
    rng = np.random.default_rng(seed)
    M = rng.integers(-3, 4, size=(N, k)) @ rng.integers(-3, 4, size=(k, N))
    if not M.any():
        return
    bound = trace_rank_bound(M)
    assert isinstance(bound, Fraction)
    assert bound <= np.linalg.matrix_rank(M)


@settings(max_examples=60, deadline=None)
@given(N=st.integers(3, 40), k=st.integers(1, 40), seed=st.integers(0, 2**32 - 1))
def test_near_identity_bound_below_true_rank(N, k, seed):
    # unit diagonal, |off-diagonal| <= 1/R with R read off the matrix: rank >= N/(1+(N-1)/R^2)
    M = _low_rank_unit_diagonal(N, k, seed)
    off = np.abs(M[~np.eye(N, dtype=bool)]).max()
    R = 1 / Fraction(float(off))
    assert approximate_identity_bound(N, R) <= np.linalg.matrix_rank(M) + 1e-9
    assert trace_rank_bound(M) <= np.linalg.matrix_rank(M) + 1e-9


def test_approximate_identity_bound_values():
    assert approximate_identity_bound(10, 3) == Fraction(10) / (1 + Fraction(9, 9))
    assert approximate_identity_bound(1, 1) == 1
    # the identity itself: R -> large gives N
    assert approximate_identity_bound(7, 10**9) > Fraction(7) - Fraction(1, 10**6)


@settings(max_examples=60, deadline=None)
@given(N=st.integers(3, 30), k=st.integers(1, 30), seed=st.integers(0, 2**32 - 1),
       spread=st.sampled_from([1.0, 3.0, 8.0]))
def test_lemma_D_prime_never_exceeds_the_true_rank(N, k, seed, spread):
    M = _low_rank_unit_diagonal(N, k, seed, nonnegative=True, spread=spread)
    # off-diagonal bounds = the entries themselves
    bound, c = nonnegative_rank_bound(N, Counter(Fraction(v) for v in M[~np.eye(N, dtype=bool)]))
    assert 0 <= c <= Fraction(1, 2)
    assert bound <= np.linalg.matrix_rank(M, tol=1e-9) + 1e-6


@settings(max_examples=40, deadline=None)
@given(N=st.integers(2, 60), data=st.data())
def test_lemma_D_prime_optimum_beats_a_grid(N, data):
    us = data.draw(st.lists(st.fractions(min_value=0, max_value=1, max_denominator=50),
                            min_size=1, max_size=4))
    counts = {}
    left = N * (N - 1)
    for i, u in enumerate(us):
        k = left if i == len(us) - 1 else data.draw(st.integers(0, left))
        counts[u] = counts.get(u, 0) + k
        left -= k
    best, c = nonnegative_rank_bound(N, counts)
    assert best == sharpened_value(N, counts, c)
    for i in range(201):
        assert sharpened_value(N, counts, Fraction(i, 400)) <= best


def test_lemma_D_prime_at_zero_is_lemma_D_minus_one():
    M = np.eye(5, dtype=object) + Fraction(1, 7) * (np.ones((5, 5), dtype=object)
                                                    - np.eye(5, dtype=object))
    counts = {Fraction(1, 7): 20}
    assert sharpened_value(5, counts, Fraction(0)) == trace_rank_bound(M) - 1


def test_theorem_E_on_paley_codes_matches_closed_forms():
    rho6, rho12 = best_chain_factor(6), best_chain_factor(12)
    assert (rho6, rho12) == (5, 27)
    # all 46 words: each row has 1 diagonal, 44 gaps of 6 and one gap of 12
    b = certified_rank_bound(PALEY23)
    assert b.trace_bound == Fraction(46) / (1 + Fraction(44, 25) + Fraction(1, 27**2))
    # 23 rows: all gaps 6
    b23 = certified_rank_bound(PALEY23[:23])
    assert b23.trace_bound == Fraction(23) / (1 + Fraction(22, 25)) and b23.trace_rank == 13
    assert b23.sharpened_rank == 18


def test_theory_claim_32_query_witness_15_to_23():
    # THEORY 5: a 32-query 24-bit witness goes from r >= 15 (Lemma D) to r >= 23 (Lemma D')
    S = np.concatenate([PALEY23[:16], PALEY23[23:39]])
    b = certified_rank_bound(S)
    assert (b.trace_rank, b.sharpened_rank) == (15, 23)


@settings(max_examples=30, deadline=None)
@given(idx=st.lists(st.integers(0, 45), min_size=2, max_size=46, unique=True),
       n=st.integers(3, 8))
def test_certified_bound_at_most_size(idx, n):
    b = certified_rank_bound(PALEY23[sorted(idx)], n)
    assert 1 <= b.trace_bound <= len(idx)
    assert b.sharpened_bound <= len(idx)
    assert certified_rank_bound(PALEY23[sorted(idx)], n + 1).trace_bound >= b.trace_bound


def test_bad_inputs():
    with pytest.raises(ValueError, match="constant weight"):
        certified_rank_bound(np.array([[1, 1, 0, 0], [1, 0, 0, 0]]))
    with pytest.raises(ValueError, match="too small for any chain"):
        certified_rank_bound(np.array([[1, 1, 0, 0], [1, 0, 1, 0]]))
    with pytest.raises(ValueError, match="distinct"):
        certified_rank_bound(np.array([[1, 1, 0, 0], [1, 1, 0, 0]]))
    with pytest.raises(ValueError, match="eps"):
        certified_rank_bound(PALEY23, eps=Fraction(1))
    with pytest.raises(ValueError, match="0 and 1"):
        certified_rank_bound(2 * PALEY23)
    with pytest.raises(ValueError, match="square"):
        shifted_trace_bound(np.ones((2, 3)))
    with pytest.raises(ValueError, match="finite"):
        shifted_trace_bound(np.array([[1.0, np.nan], [0, 1]]))
    with pytest.raises(TypeError, match="M"):
        shifted_trace_bound("eye")


# ------------------------------------------------------------------ exact stays exact

BIGINT = st.integers(-2**100, 2**100)


@settings(max_examples=80, deadline=None)
@example(M=[[0, 0], [1, 2**63]])  # a list numpy would turn into floats (2**63 > int64)
@given(st.integers(1, 5).flatmap(lambda n: st.lists(
    st.lists(st.one_of(BIGINT, st.builds(Fraction, BIGINT, st.integers(1, 2**64))),
             min_size=n, max_size=n), min_size=n, max_size=n)))
def test_trace_bound_is_exact_on_big_integers(M):
    """Lemma D's (tr M)^2 / ||M||_F^2 against a plain-Python evaluation, also when M comes
    as an int64 or object numpy array: never an int64 product on the way."""
    frob = sum(Fraction(v) ** 2 for row in M for v in row)
    if frob == 0:  # an internal helper: its callers pass nonzero matrices
        with pytest.raises(ZeroDivisionError):
            trace_rank_bound(M)
        return
    want = sum(Fraction(row[i]) for i, row in enumerate(M)) ** 2 / frob
    assert trace_rank_bound(M) == want
    assert trace_rank_bound(np.array(M, dtype=object)) == want
    if all(isinstance(v, int) and abs(v) < 2**62 for row in M for v in row):
        assert trace_rank_bound(np.array(M, dtype=np.int64)) == want


def test_trace_bound_big_entries_of_the_boundary_issue():
    assert trace_rank_bound([[2**33, 7], [7, 2**31]]) == Fraction(
        (2**33 + 2**31) ** 2, 2**66 + 2**62 + 98)
    assert trace_rank_bound([[2**40, 0], [0, 2**40]]) == 2  # not "zero"


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 10**6), st.fractions(min_value=Fraction(1, 10**9), max_value=10**9))
def test_approximate_identity_bound_is_exact(N, R):
    assert approximate_identity_bound(N, R) == Fraction(N) / (1 + Fraction(N - 1) / (R * R))


# --------------------------------------------------------------------------- the sharper lemma
# rank M >= N^2 (1-c)^2 / ||M - cJ||_F^2 for unit-diagonal M, c in [0, 1) (Chapter 3,
# lem-shifted-trace), and its box form sharp_rank_bound.


def _unit_diagonal(A, B):
    """M = diag(<A_x, B_x>)^-1 A B^T exactly (None if a diagonal entry is 0): rank <= k."""
    G = [[sum((Fraction(int(a)) * int(b) for a, b in zip(r, s, strict=True)), Fraction(0))
          for s in B] for r in A]
    if any(G[i][i] == 0 for i in range(len(G))):
        return None
    return [[v / G[i][i] for v in row] for i, row in enumerate(G)]


def test_sharper_lemma_never_exceeds_the_exact_rank():
    rng = np.random.default_rng(7)
    checked = 0
    for _ in range(200):
        N, k = int(rng.integers(2, 14)), int(rng.integers(1, 8))
        lo = 0 if rng.random() < 0.5 else -3
        A, B = rng.integers(lo, 4, (N, k)), rng.integers(lo, 4, (N, k))
        M = _unit_diagonal(A, B)
        if M is None:
            continue
        rank = exact_rank(M)
        best, c = shifted_trace_bound(M)
        assert best <= rank
        for t in (Fraction(0), Fraction(1, 3), Fraction(9, 10), c):  # the best c is the best
            assert shifted_trace_bound(M, t)[0] <= best
        checked += 1
    assert checked > 100


@pytest.mark.parametrize("k, b", [(1, 5), (3, 4), (6, 2)])
def test_sharper_lemma_is_tight_on_blocks_of_ones(k, b):
    # k diagonal blocks J_b: rank k, and the bound at c = 0 is exactly k
    N = k * b
    M = [[Fraction(int(i // b == j // b)) for j in range(N)] for i in range(N)]
    assert exact_rank(M) == k and shifted_trace_bound(M) == (k, 0)


def test_sharper_lemma_refuses_a_non_unit_diagonal():
    with pytest.raises(ValueError, match="unit diagonal"):
        shifted_trace_bound([[2, 0], [0, 1]])
    with pytest.raises(ValueError, match="c"):
        shifted_trace_bound(np.eye(2), Fraction(1))


@pytest.mark.parametrize("a, b, value, rank", [
    (23, 5, Fraction(21), 22), (23, 0, Fraction(1863, 103), 19), (23, 23, Fraction(207, 7), 30),
])
def test_sharp_bound_on_the_three_families(a, b, value, rank):
    fam = witness_family(paley_subset(a, b, 23), 3)
    N = len(fam.S)
    counts = dict(Counter(1 / r for r in fam.certificate.rho.values()))
    bound = sharp_rank_bound(N, counts)
    assert (bound.value, bound.c, bound.rank) == (value, Fraction(1, 10), rank)
    # Lemma D' without its "- 1", at the same c
    assert (bound.value, bound.c) == (fam.certificate.bound.sharpened_bound + 1,
                                      fam.certificate.bound.sharpened_c)
    # no rational c on a fine grid does better: the optimum is exact
    for i in range(200):
        c = Fraction(i, 200)
        assert N * N * (1 - c) ** 2 / (N * (1 - c) ** 2 + sum(
            k * max(c, u - c) ** 2 for u, k in counts.items())) <= bound.value


def test_sharp_bound_is_the_optimum_over_random_boxes():
    rng = np.random.default_rng(3)
    for _ in range(40):
        N = int(rng.integers(2, 9))
        U = [[Fraction(int(rng.integers(0, 9)), int(rng.integers(1, 9))) for _ in range(N)]
             for _ in range(N)]
        bound = sharp_rank_bound(N, U)
        off = [U[i][j] for i in range(N) for j in range(N) if i != j]
        for i in range(100):
            c = Fraction(i, 100)
            assert N * N * (1 - c) ** 2 / (N * (1 - c) ** 2 + sum(
                max(c, u - c) ** 2 for u in off)) <= bound.value
        # every matrix of the box, its corners included, has rank >= the value at c
        corner = [[Fraction(1) if i == j else U[i][j] * int(rng.integers(0, 2))
                   for j in range(N)] for i in range(N)]
        assert shifted_trace_bound(corner, bound.c)[0] >= bound.value
        assert exact_rank(corner) >= bound.closed_rank


def test_strict_entries_beat_the_value():
    # inside the open box (M_xy < u_xy) the value is exceeded unless M = I: on E1's bounds
    # (value 21 at c = 1/10) every such matrix has ||M - J/10||^2 < 30.24, bound > 21
    fam = witness_family(paley_subset(23, 5, 23), 3)
    N, rho = len(fam.S), fam.certificate.rho
    rng = np.random.default_rng(0)
    for _ in range(20):
        M = [[Fraction(1) if i == j else (1 / rho[(i, j)]) * Fraction(
            int(rng.integers(0, 1000)), 1000) for j in range(N)] for i in range(N)]
        assert shifted_trace_bound(M, Fraction(1, 10))[0] > 21


def test_sharp_bound_arguments():
    with pytest.raises(ValueError, match="N\\(N-1\\)"):
        sharp_rank_bound(3, {Fraction(1, 2): 5})
    with pytest.raises(ValueError, match="off_diagonal_bounds"):
        sharp_rank_bound(3, [[0, -1, 0], [0, 0, 0], [0, 0, 0]])
    assert sharp_rank_bound(1, {}).rank == 1
    assert sharp_rank_bound(2, {Fraction(0): 2}).value == 2  # entries pinned to 0: M = I


def test_unit_diagonal_from_factors_has_unit_diagonal_and_low_rank():
    A, B = [[1, 2], [0, 1], [3, 1]], [[1, 0], [2, 1], [1, 1]]
    M = unit_diagonal_from_factors(A, B)
    assert all(M[i][i] == 1 for i in range(3))
    assert exact_rank(M) <= 2
    assert unit_diagonal_from_factors([[1, 0]], [[0, 1]]) is None  # a zero diagonal entry


def test_the_attack_pushes_the_bound_up_but_never_past_the_rank():
    import torch

    gen = torch.Generator().manual_seed(1)
    A, B = shifted_trace_attack(8, 3, False, gen, steps=100)
    assert A.shape == B.shape == (8, 3)
    M = unit_diagonal_from_factors(np.rint(A * 2**10).astype(int).tolist(),
                                   np.rint(B * 2**10).astype(int).tolist())
    value, _ = shifted_trace_bound(M)
    assert 2 < value <= exact_rank(M) <= 3


# ---- Lemma N: r + 1 nonnegative unit vectors in R^r hold a pair with <v, v'> >= 1/sqrt(r)


def _tight_vectors(r: int) -> list[list[Fraction]]:
    """The squares p = v o v of e_1, ..., e_r and 1/sqrt(r): probability vectors (exact)."""
    return [[Fraction(int(i == k)) for k in range(r)] for i in range(r)] + [[Fraction(1, r)] * r]


def _inner_squared_single_overlap(p, q) -> Fraction:
    """<v, v'>^2 for v = sqrt(p), v' = sqrt(q) sharing at most one coordinate (exact)."""
    shared = [k for k in range(len(p)) if p[k] and q[k]]
    assert len(shared) <= 1
    return p[shared[0]] * q[shared[0]] if shared else Fraction(0)


@pytest.mark.parametrize("r", [1, 2, 3, 5, 8, 25, 26])
def test_lemma_n_is_tight_on_the_basis_and_the_diagonal(r):
    P = _tight_vectors(r)
    squares = [_inner_squared_single_overlap(P[i], P[j])
               for i in range(r + 1) for j in range(i + 1, r + 1)]
    assert max(squares) == Fraction(1, r)  # the largest inner product is exactly 1/sqrt(r)
    assert all(sum(p) == 1 for p in P)  # unit vectors


def test_lemma_n_is_tight_on_the_affine_plane():
    """The 30 lines of AG(2, 5) as vectors 1_L / sqrt 5 in R^25: pairwise inner products 0 or
    exactly 1/5 = 1/sqrt(25), so 30 > 26 vectors meet the lemma's bound with equality: the
    closed box allows nonnegative rank 25 on E1 and only strictness excludes it."""
    from companion.sandwich.designs import affine_plane

    lines = [b for c in affine_plane(5) for b in c]
    inner = {Fraction(len(a & b), 5) for a, b in itertools.combinations(lines, 2)}
    assert len(lines) == 30 and inner == {0, Fraction(1, 5)}
    assert len(set().union(*lines)) == 25


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 12), st.integers(0, 3), st.integers(0, 2**32 - 1),
       st.sampled_from([1.0, 4.0, "sparse"]))
def test_lemma_n_on_random_nonnegative_vectors(r, extra, seed, kind):
    rng = np.random.default_rng(seed)
    V = np.abs(rng.normal(size=(r + 1 + extra, r)))
    if kind == "sparse":
        V = V * (rng.random(V.shape) < 0.3)
        V[np.arange(len(V)), rng.integers(0, r, len(V))] += 1e-3  # no zero vector
    else:
        V = V ** kind
    V /= np.linalg.norm(V, axis=1, keepdims=True)
    G = V @ V.T
    np.fill_diagonal(G, -1)
    assert G.max() >= 1 / np.sqrt(r) - 1e-12


@pytest.mark.parametrize("r", [2, 3, 6, 10])
def test_the_attack_never_beats_lemma_n(r):
    torch = pytest.importorskip("torch")
    V = near_orthogonal_attack(r, torch.Generator().manual_seed(r), steps=1500)
    G = V @ V.T
    np.fill_diagonal(G, -1)
    assert np.all(V >= 0) and np.allclose(np.linalg.norm(V, axis=1), 1)
    assert 1 / np.sqrt(r) - 1e-9 <= G.max() < 1.2 / np.sqrt(r)  # close to tight, never below


def test_near_orthogonal_rank_bound_on_boxes():
    def box(N, u, pairs=()):
        M = np.full((N, N), u, dtype=object)
        for x, y in pairs:
            M[x, y] = M[y, x] = Fraction(1, 27)
        return M

    assert near_orthogonal_rank_bound(box(23, Fraction(1, 5))).rank == 23
    e1 = near_orthogonal_rank_bound(box(28, Fraction(1, 5), [(i, 23 + i) for i in range(5)]))
    assert (e1.beta_squared, e1.rank) == (Fraction(1, 25), 26)
    assert near_orthogonal_rank_bound(box(46, Fraction(1, 5))).rank == 26
    # u_xy = 1/4 above the diagonal, 1/6 below: beta^2 = 1/24, so r >= 25
    M = box(40, Fraction(1, 6))
    M[np.triu_indices(40, 1)] = Fraction(1, 4)
    assert near_orthogonal_rank_bound(M).beta_squared == Fraction(1, 24)
    assert near_orthogonal_rank_bound(M).rank == 25
    # an asymmetric box: beta^2 is the largest product u_xy u_yx
    M = box(3, Fraction(1, 2))
    M[0, 1], M[1, 0] = Fraction(1), Fraction(1, 100)
    assert near_orthogonal_rank_bound(M).beta_squared == Fraction(1, 4)
    assert near_orthogonal_rank_bound(box(5, Fraction(0))).rank == 5  # disjoint supports


def test_near_orthogonal_rank_bound_arguments():
    with pytest.raises(ValueError, match="at least 2 x 2"):
        near_orthogonal_rank_bound([[1]])
    with pytest.raises(ValueError, match=">= 0"):
        near_orthogonal_rank_bound([[1, -1], [0, 1]])
    with pytest.raises(ValueError, match="square"):
        near_orthogonal_rank_bound([[1, 0]])


def test_lemma_n_holds_for_a_nonnegative_head_ratio_matrix():
    """The v_x = sqrt(A_x o B_x) of the committed E1 rank-26 head's factors: unit vectors
    with <v_x, v_y> <= sqrt(M_xy M_yx) (Cauchy-Schwarz), in R^26."""
    from companion.sandwich.designs import affine_plane, design_factors
    from companion.sandwich.matrix import ratio_bounds, ratio_matrix_of_factors

    bounds = ratio_bounds(witness_family(paley_subset(23, 5, 23), 3))
    Q, K = design_factors(bounds, affine_plane(5), lift=True)
    M = ratio_matrix_of_factors(Q, K)
    A = np.array(Q, dtype=float) / np.array([float(sum(a * b for a, b in zip(Q[x], K[x])))
                                             for x in range(len(Q))])[:, None]
    V = np.sqrt(A * np.array(K, dtype=float))
    assert np.allclose(np.linalg.norm(V, axis=1), 1) and V.shape[1] == 26
    G = V @ V.T
    Mf = np.array(M, dtype=float)
    off = ~np.eye(len(V), dtype=bool)
    assert np.all(G[off] <= np.sqrt(Mf * Mf.T)[off] + 1e-12)
    assert G[off].max() < 1 / 5 and G[off].max() >= 1 / np.sqrt(26) - 1e-12
