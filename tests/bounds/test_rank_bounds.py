"""The n -> oo limit of Theorem E: the bound of a code tends to its size, so the best bound
tends to L(m) = max_w A(m, w); ceil(C(m, m//2)/m) <= L(m) <= max_w floor(C(m, w-1)/w)."""

import itertools
import math
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from companion.bounds.amplification import best_chain_factor
from companion.bounds.asymptotics import (
    BaseCode,
    base_codes,
    code_size_lower_bound,
    code_size_upper_bound,
    concatenate_distributions,
    explicit_code_log2_bounds,
    gap_distribution,
    graham_sloane_code,
    large_context_limit_bounds,
    large_context_limit_log2_bounds,
    large_context_lower_log2,
    max_code_size_gap_two,
    random_code_log2_estimate,
)
from companion.bounds.codes import gap_matrix, paley_hadamard_code, paley_subset
from companion.bounds.gap_domination import total_weights
from companion.bounds.rank_bounds import (
    approximate_identity_bound,
    certified_rank_bound,
    nonnegative_rank_bound,
    sharp_rank_bound,
    sharpened_value,
    shifted_trace_bound,
    trace_rank_bound,
)
from companion.bounds.witness import witness_family
from companion.core.attention import KernelAttentionHead
from companion.experiments.e1 import experiment_witness_24
from companion.sandwich.matrix import exact_rank

SMALL = [(m, w) for m in range(4, 10) for w in range(2, m // 2 + 1) if math.comb(m, w) <= 84]


@pytest.mark.parametrize("m, w", SMALL)
def test_exact_code_sizes_lie_between_the_bounds(m, w):
    A = max_code_size_gap_two(m, w)
    assert code_size_lower_bound(m, w) <= A <= code_size_upper_bound(m, w)
    best_class = max(len(graham_sloane_code(m, w, r)) for r in range(m))
    assert code_size_lower_bound(m, w) <= best_class <= A


def test_known_values_of_A():
    # A(n, 4, w) from the tables of constant-weight codes (Brouwer et al.)
    assert max_code_size_gap_two(7, 3) == 7
    assert max_code_size_gap_two(8, 4) == 14
    assert max_code_size_gap_two(9, 3) == 12


@pytest.mark.parametrize("m, w", [(6, 3), (7, 3), (8, 4), (10, 5), (11, 4)])
def test_graham_sloane_classes_have_all_gaps_at_least_two(m, w):
    sizes = 0
    for r in range(m):
        code = graham_sloane_code(m, w, r)
        sizes += len(code)
        if len(code) >= 2:
            G = gap_matrix(code)
            assert np.all(G[~np.eye(len(code), dtype=bool)] >= 2)
    assert sizes == math.comb(m, w)  # the classes partition the weight-w words


def test_the_book_column_is_not_the_limit():
    """log2(C(m, m/2)/m) is a lower bound on the limit; at m = 8 the limit is 14 > 70/8."""
    assert large_context_lower_log2(8) == pytest.approx(math.log2(70 / 8))
    assert max_code_size_gap_two(8, 4) == 14 > 70 / 8
    for m in range(2, 400):
        lo, hi = large_context_limit_log2_bounds(m)
        assert large_context_lower_log2(m) <= lo + 1e-12
        assert lo <= hi < lo + 1  # pinned within one bit


def test_limit_interval_closed_forms():
    for m in range(2, 300):
        lo, hi = large_context_limit_bounds(m)
        assert lo == -(-math.comb(m, m // 2) // m)
        assert hi == math.comb(m + 1, (m + 1) // 2) // (m + 1)


def test_theorem_e_bound_tends_to_the_code_size():
    """For a code with all gaps >= 2: |S|^2/(|S| + |S|(|S|-1)/(n-2)^2) <= bound <= |S|."""
    code = graham_sloane_code(8, 4, 0)
    S = len(code)
    for n in (3, 4, 10, 100, 10**4):
        b = certified_rank_bound(code, n).trace_bound
        assert S * S / (S + S * (S - 1) / (n - 2) ** 2) <= b <= S
    assert certified_rank_bound(code, 10**6).trace_bound > S - 1e-3


def test_bad_input():
    with pytest.raises(ValueError, match="MAX_EXACT_WORDS"):
        max_code_size_gap_two(9, 4)
    with pytest.raises(ValueError, match="w"):
        code_size_upper_bound(6, 6)
    with pytest.raises(ValueError, match="residue"):
        graham_sloane_code(6, 3, 6)
    with pytest.raises(TypeError, match="m"):
        large_context_limit_bounds(8.0)


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


@pytest.mark.parametrize("n", [3, 4, 6, 10])
def test_asymptotic_table_exact_equals_float(n):
    """The table's certified column, exactly (integer convolution, Fraction bound) and by the
    float64 convolution: equal to 1e-9 in log2 and identical when printed to 2 decimals."""
    widths = (24, 48, 100, 200, 500, 1000)
    bases = base_codes(n, widths=(12, 16, 20, 24, 28), seed=0, max_size=1000)
    exact = explicit_code_log2_bounds(bases, widths, n, exact=True)
    floats = explicit_code_log2_bounds(bases, widths, n)
    for m in widths:
        assert isinstance(exact[m], Fraction)
        log2_exact = math.log2(exact[m].numerator) - math.log2(exact[m].denominator)
        assert log2_exact == pytest.approx(floats[m], abs=1e-9)
        assert f"{log2_exact:.2f}" == f"{floats[m]:.2f}"
    if n == 3:
        assert f"{math.log2(exact[1000].numerator) - math.log2(exact[1000].denominator):.2f}" \
            == "184.65"


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
    bound, c = nonnegative_rank_bound(N, M)  # off-diagonal bounds = the entries themselves
    assert 0 <= c <= Fraction(1, 2)
    assert bound <= np.linalg.matrix_rank(M, tol=1e-9) + 1e-6


@settings(max_examples=40, deadline=None)
@given(N=st.integers(2, 60), data=st.data())
def test_lemma_D_prime_optimum_beats_a_grid(N, data):
    us = data.draw(st.lists(st.fractions(min_value=0, max_value=1, max_denominator=50),
                            min_size=1, max_size=4))
    counts = {}
    left = N * (N - 1)
    for u in us:
        k = data.draw(st.integers(0, left))
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


def test_concatenation_distribution_and_supermultiplicativity():
    A = paley_hadamard_code(7)[[0, 1, 2, 8]]
    B = paley_hadamard_code(11)[[0, 3, 5]]
    prod = np.array([np.concatenate([a, b]) for a, b in itertools.product(A, B)])
    assert gap_distribution(prod) == concatenate_distributions(gap_distribution(A),
                                                               gap_distribution(B))
    for n in (3, 4, 10):
        assert (certified_rank_bound(prod, n).trace_bound
                >= certified_rank_bound(A, n).trace_bound * certified_rank_bound(B, n).trace_bound)


def test_explicit_float_and_exact_agree():
    bases = [BaseCode.from_code("p23", PALEY23), BaseCode.from_code("p11", paley_hadamard_code(11))]
    widths = [24, 36, 100, 240]
    fl = explicit_code_log2_bounds(bases, widths, 3)
    ex = explicit_code_log2_bounds(bases, widths, 3, exact=True)
    for m in widths:
        assert fl[m] == pytest.approx(math.log2(ex[m].numerator) - math.log2(ex[m].denominator),
                                      abs=1e-9)
    assert ex[24] == certified_rank_bound(PALEY23).trace_bound


def test_large_context_limit_is_reached_by_graham_sloane_code():
    m = 10
    words = np.array([w for w in itertools.product([0, 1], repeat=m) if sum(w) == m // 2])
    classes = (words @ np.arange(m)) % m
    largest = np.bincount(classes).argmax()
    code = words[classes == largest]
    assert len(code) >= math.comb(m, m // 2) / m
    assert math.log2(len(code)) >= large_context_lower_log2(m) - 1e-12
    b = certified_rank_bound(code, n=10**6)  # every gap >= 2, so the check passes
    assert len(code) - 1 < b.trace_bound <= len(code)


def test_random_estimate_is_sane():
    assert random_code_log2_estimate(1000, 3) > random_code_log2_estimate(500, 3) > 0
    for n in (4, 6, 10):
        assert random_code_log2_estimate(200, n) > random_code_log2_estimate(200, n - 1)
        assert random_code_log2_estimate(200, n) < large_context_lower_log2(200) + 1


def test_bad_inputs():
    with pytest.raises(ValueError, match="square"):
        trace_rank_bound(np.ones((2, 3)))
    with pytest.raises(ValueError, match="nonzero"):
        trace_rank_bound(np.zeros((3, 3)))
    with pytest.raises(ValueError, match="finite"):
        trace_rank_bound(np.array([[1.0, np.nan], [0, 1]]))
    with pytest.raises(TypeError, match="M"):
        trace_rank_bound("eye")
    with pytest.raises(ValueError, match="N"):
        approximate_identity_bound(0, 2)
    with pytest.raises(ValueError, match="R"):
        approximate_identity_bound(3, -1)
    with pytest.raises(ValueError, match="N"):
        nonnegative_rank_bound(0, {})
    with pytest.raises(ValueError, match="N\\(N-1\\)"):
        nonnegative_rank_bound(2, {Fraction(1, 2): 3})
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
    with pytest.raises(ValueError, match="m"):
        random_code_log2_estimate(2)
    with pytest.raises(ValueError, match="w"):
        random_code_log2_estimate(100, w=99)


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
    assert bound.value == nonnegative_rank_bound(N, counts)[0] + 1
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
