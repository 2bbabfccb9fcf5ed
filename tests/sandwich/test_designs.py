"""sandwich/designs: block designs and the nonnegative heads they give (E1 at rank 26 from the
affine plane AG(2, 5) lifted; the 46 words at 42 from TD(6, 7), 36 from TD(5, 7) lifted and
35 from a seeded packing on 34 points lifted); every head checked exactly."""

import itertools
from fractions import Fraction

import numpy as np
import pytest

from companion.bounds.codes import paley_subset
from companion.bounds.rank_bounds import near_orthogonal_rank_bound
from companion.bounds.witness import witness_family
from companion.sandwich.designs import (
    LIFT_TOP,
    affine_plane,
    design_factors,
    disjoint_classes,
    packing,
    transversal_design,
)
from companion.sandwich.heads import build_exact_head
from companion.sandwich.matrix import (
    admissibility_violations,
    ratio_bounds,
    ratio_matrix_of_factors,
)

HALF = Fraction(1, 2)


@pytest.fixture(scope="module")
def e1():
    return ratio_bounds(witness_family(paley_subset(23, 5, 23), 3))


@pytest.fixture(scope="module")
def code46():
    return ratio_bounds(witness_family(paley_subset(23, 23, 23), 3))


@pytest.mark.parametrize("k,q", [(5, 7), (6, 7), (3, 5), (5, 5)])
def test_transversal_design_is_a_packing(k, q):
    classes = transversal_design(k, q)
    blocks = [b for c in classes for b in c]
    assert len(classes) == q and len(blocks) == q * q
    assert all(len(b) == k for b in blocks) and set().union(*blocks) == set(range(k * q))
    assert all(len(a & b) <= 1 for a, b in itertools.combinations(blocks, 2))
    assert all(not a & b for c in classes for a, b in itertools.combinations(c, 2))


def test_affine_plane_has_every_pair_of_points_on_one_line():
    lines = [b for c in affine_plane(5) for b in c]
    assert len(lines) == 30
    for p, r in itertools.combinations(range(25), 2):
        assert sum({p, r} <= line for line in lines) == 1


def test_e1_affine_plane_lifted_gives_an_exact_nonnegative_head_of_rank_26(e1):
    Q, K = design_factors(e1, affine_plane(5), lift=True)
    assert Q.shape == (28, 26) and all(v >= 0 for v in [*Q.ravel(), *K.ravel()])
    M = ratio_matrix_of_factors(Q, K)
    assert not admissibility_violations(M, e1)
    # Lemma N: 26 is the least rank of a nonnegative factorisation of an admissible M here
    assert near_orthogonal_rank_bound(e1.upper).rank == 26
    head = build_exact_head(e1.family, Q, K)
    assert head.nonnegative and head.rank == 26 and head.max_error < HALF
    # the slack is small but exact: the closest entry is within 1e-11 of its bound 1/5
    slack = min(e1.upper[x, y] - M[x, y] for x in range(28) for y in range(28) if x != y)
    assert 0 < slack < Fraction(1, 10**11)


def test_without_the_lift_the_affine_plane_reaches_the_bounds(e1):
    """The unlifted lines (1_L / 5 against 1_L) meet the bound 1/5 with equality: the closed
    box, not admissible; the lift exists for this."""
    with pytest.raises(ValueError, match="matching|not admissible"):
        design_factors(e1, affine_plane(5), lift=False)


@pytest.mark.parametrize("k,lift,rank", [(5, True, 36), (6, False, 42)])
def test_46_words_from_transversal_designs(code46, k, lift, rank):
    Q, K = design_factors(code46, transversal_design(k, 7), lift=lift)
    assert Q.shape == (46, rank)
    head = build_exact_head(code46.family, Q, K)
    assert head.nonnegative and head.rank == rank and head.max_error < HALF


def test_td67_is_the_closed_form_of_the_issue(code46):
    """TD(6, 7): Q_x = 1_T / (6 (1 + 1/100)), K_y = 1_T + 1/100, so M_xy = (|T_x & T_y| +
    6/100) / (6 + 6/100): 53/303 < 1/5 for meeting blocks, 1/101 < 1/27
    for the disjoint blocks of complementary words."""
    Q, K = design_factors(code46, transversal_design(6, 7))
    M = ratio_matrix_of_factors(Q, K)
    off = {M[x, y] for x in range(46) for y in range(46) if x != y}
    assert off <= {Fraction(1, 101), Fraction(53, 303)}
    assert all(M[x, y] == Fraction(1, 101) for x in range(46) for y in range(46)
               if code46.upper[x, y] == Fraction(1, 27))


def test_lift_scales_separate_the_classes():
    k = 5
    ts = [LIFT_TOP / (2 * k + 1) ** c for c in range(7)]
    for a, b in itertools.combinations(ts, 2):
        ga, sa = (k - a * a) / (k + a * a), 2 * k * a / (k + a * a)
        gb, sb = (k - b * b) / (k + b * b), 2 * k * b / (k + b * b)
        assert ga * ga + sa * sa / k == 1
        assert ga * gb + sa * sb < 1  # meeting blocks of two classes: below 1/k


def test_design_arguments(e1):
    with pytest.raises(ValueError, match="prime"):
        transversal_design(3, 6)
    with pytest.raises(ValueError, match="q"):
        transversal_design(6, 5)
    with pytest.raises(ValueError, match="fewer than the 28 queries"):
        design_factors(e1, transversal_design(6, 7)[:1])
    with pytest.raises(ValueError, match="one size"):
        design_factors(e1, [[frozenset({0, 1})], [frozenset({2, 3, 4})]])
    with pytest.raises(TypeError, match="classes"):
        design_factors(e1, [[{0, 1}]])
    with pytest.raises(ValueError, match="classes"):
        design_factors(e1, [[frozenset({-1, 2})]])
    with pytest.raises(TypeError):
        design_factors(e1, affine_plane(5), lift="yes")
    assert np.shape(design_factors(e1, affine_plane(5), lift=True)[0]) == (28, 26)


def test_packing_is_seeded_and_a_packing():
    a, b = packing(34, 46, seed=0), packing(34, 46, seed=0)
    assert a == b and len(a) == 46 and all(len(x) == 5 for x in a)
    assert all(len(x & y) <= 1 for x, y in itertools.combinations(a, 2))
    classes = disjoint_classes(a)
    assert sum(map(len, classes)) == 46
    assert all(not x & y for c in classes for x, y in itertools.combinations(c, 2))
    with pytest.raises(ValueError, match="found no packing"):
        packing(10, 10, steps=1000)  # above the Johnson bound: 10/5 * floor(9/4) = 4


def test_46_words_from_a_packing_on_34_points_at_rank_35(code46):
    Q, K = design_factors(code46, disjoint_classes(packing(34, 46)), lift=True)
    head = build_exact_head(code46.family, Q, K)
    assert head.nonnegative and head.rank == 35 and head.max_error < HALF
