"""The sandwich as a matrix problem (companion.sandwich.matrix), checked exactly on small families.

Small families: Paley q = 11 (12-bit, 14 queries, single links of gaps 3 and 6) and q = 19
(20-bit, 16 queries, complement pairs on two-step ladders 5 + 5).
"""

from fractions import Fraction

import numpy as np
import pytest

from companion.bounds.codes import paley_subset
from companion.bounds.witness import kernel_ratio_matrix, max_error_exact, witness_family
from companion.sandwich.heads import (
    ExactHead,
    build_exact_head,
    indicator_head,
    query_indicator_head,
)
from companion.sandwich.matrix import (
    RatioBounds,
    admissibility_violations,
    exact_rank,
    indicator_factors,
    ratio_bounds,
    ratio_matrix_of_factors,
    spread_factors,
    spread_products,
)
from companion.sandwich.search import (
    exact_head_from_search,
    search_ratio_factors,
)

HALF = Fraction(1, 2)


def _low_rank_admissible(bounds: RatioBounds, rank: int, seed: int = 0):
    res = search_ratio_factors(bounds, rank, seed=seed, restarts=3, rounds=20)
    assert res.query_factor is not None, res
    return res


def test_bounds_are_one_over_rho(single, ladders):
    b = ratio_bounds(single)
    G = b.gaps
    assert b.size == 14 and b.private_ladders
    for (x, y), r in single.certificate.rho.items():
        assert b.upper[x, y] == 1 / r
        # single links at n = 3, eps = 1/2: rho = c(G) = G - 1
        assert r == G[x, y] - 1
    lb = ratio_bounds(ladders)
    assert {g for _, g in lb.ladders.values()} == {(5,), (5, 5)}
    assert {lb.upper[x, y] for (x, y) in lb.ladders} == {Fraction(1, 4), Fraction(1, 16)}


@pytest.mark.parametrize("fixture,rank", [("single", 9), ("ladders", 14)])
def test_admissible_matrix_gives_exact_head_of_the_same_rank(request, fixture, rank, kernel_head):
    """Part (ii): factors of an admissible M of rank r give a head of feature rank r that is
    exact on F(S) (checked by the package's own exact forward pass), whose kernel ratio
    matrix is M itself."""
    pytest.importorskip("torch")  # the exact forward pass builds a torch head
    fam = request.getfixturevalue(fixture)
    b = ratio_bounds(fam)
    head = exact_head_from_search(fam, _low_rank_admissible(b, rank))
    M = ratio_matrix_of_factors(head.query_features,
                                np.array([head.key_features[t] for t in b.column_tokens],
                                         dtype=object))
    assert admissibility_violations(M, b) == []
    assert exact_rank(M) == head.rank == rank
    kh = kernel_head(head)
    err = max_error_exact(kh, fam)
    assert err == head.max_error and err < HALF
    assert np.array_equal(kernel_ratio_matrix(kh, fam, exact=True), M)


def test_exact_heads_have_admissible_ratio_matrices(single, ladders):
    """Part (i) on the package's independent exact heads."""
    for fam in (single, ladders):
        b = ratio_bounds(fam)
        for head in (indicator_head(fam), query_indicator_head(fam)):
            assert max_error_exact(head, fam) < HALF
            M = kernel_ratio_matrix(head, fam, exact=True)
            assert admissibility_violations(M, b) == []


def test_the_open_bound_is_sharp(single, kernel_head):
    """An entry exactly at 1/rho (closed box) leaves a mixed sequence with error exactly 1/2
    at best: the strict inequality of the definition cannot be relaxed."""
    b = ratio_bounds(single)
    Q, K = indicator_factors(b)
    K = K.copy()
    K[1, 0] = b.upper[0, 1]  # M[0, 1] = 1/rho
    assert any(">= 1/rho" in p for p in admissibility_violations(ratio_matrix_of_factors(Q, K), b))
    with pytest.raises(ValueError, match="not admissible"):
        build_exact_head(single, Q, K)
    head = build_exact_head(single, Q, K, strict=False)
    assert head.max_error == HALF
    assert max_error_exact(kernel_head(head), single) == HALF


def test_zeros_at_one_gap_use_the_query_position(single, kernel_head):
    b = ratio_bounds(single)
    Q, K = indicator_factors(b)
    x = 0
    one_gap = [y for y in range(b.size) if y != x and b.gaps[x, y] == 3]
    K = K.copy()
    for y in one_gap:
        K[y, x] = Fraction(0)
    M = ratio_matrix_of_factors(Q, K)
    assert admissibility_violations(M, b) == []
    head = build_exact_head(single, Q, K)
    assert any(v != 0 for v in head.self_features[x])
    assert head.self_value_scale[x] == Fraction(3, 6)
    assert max_error_exact(kernel_head(head), single) == head.max_error < HALF


def test_zeros_at_two_gaps_are_not_admissible(single):
    """Condition 3: a row with zeros at gaps 3 and 6 cannot be exact (the query's own score
    must match both pure targets)."""
    b = ratio_bounds(single)
    Q, K = indicator_factors(b)
    x = 0
    K = K.copy()
    for y in range(b.size):
        if y != x:
            K[y, x] = Fraction(0)
    assert len(set(b.gaps[x, y] for y in range(b.size) if y != x)) == 2
    problems = admissibility_violations(ratio_matrix_of_factors(Q, K), b)
    assert any("zeros at gaps [3, 6]" in p for p in problems)
    head = build_exact_head(single, Q, K, strict=False)
    assert head.max_error >= HALF


def test_spread_products_and_the_spread_criterion():
    """P_s = sum_k u_sk u_ks on the three book families; a one-query spread exists iff
    P_s > 1 (the 23-row family has none)."""
    fam28 = witness_family(paley_subset(23, 5), 3, HALF)
    P = spread_products(ratio_bounds(fam28))
    assert set(P) == {Fraction(27, 25), Fraction(26, 25) + Fraction(1, 729)}
    rows23 = ratio_bounds(witness_family(paley_subset(23, 0), 3, HALF))
    assert set(spread_products(rows23)) == {Fraction(22, 25)}
    with pytest.raises(ValueError, match="no one-query spread"):
        spread_factors(rows23)
    # spread a query whose complement is in S: the even spread fails there (u = 1/27 in
    # its column), the proportional one is exact
    b = ratio_bounds(fam28)
    Q, K = spread_factors(b, s=0)
    assert Q.shape == (28, 27) and all(v >= 0 for v in np.ravel(Q)) and all(
        v >= 0 for v in np.ravel(K))
    head = build_exact_head(fam28, Q, K)
    assert head.rank == 27 and head.nonnegative and head.max_error < HALF


def test_bad_input(single):
    b = ratio_bounds(single)
    with pytest.raises(TypeError, match="WitnessFamily"):
        ratio_bounds("family")
    with pytest.raises(TypeError, match="RatioBounds"):
        admissibility_violations(np.eye(14), "bounds")
    with pytest.raises(ValueError, match="shape \\(14, 14\\)"):
        admissibility_violations([[Fraction(1)]], b)
    assert admissibility_violations(np.eye(14), b) == admissibility_violations(  # floats: exact
        np.eye(14, dtype=np.int64), b)
    with pytest.raises(TypeError, match="M must be an array of numbers"):
        admissibility_violations(np.full((14, 14), "1"), b)
    with pytest.raises(ValueError, match="s must be"):
        spread_factors(b, s=14)
    with pytest.raises(ValueError, match="fill"):
        indicator_factors(b, fill=1)
    Q, K = indicator_factors(b)
    with pytest.raises(ValueError, match="shape"):
        build_exact_head(single, Q[:, :3], K)
    with pytest.raises(ValueError, match="query_factor must be a finite number"):
        build_exact_head(single, np.full((14, 14), np.nan), K)
    K0 = K.copy()
    K0[0] = [Fraction(0)] * 14
    with pytest.raises(ValueError, match="must be > 0"):
        build_exact_head(single, Q, K0)
    assert isinstance(build_exact_head(single, Q, K), ExactHead)


