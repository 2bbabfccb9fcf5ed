"""core/exact: the one exact rank / rank factorisation / solve and exact max error, each
against a plain-Python evaluation (Fractions, textbook elimination) on random big-integer
input; their limits; and the exhaustive check's limits."""

from __future__ import annotations

import time
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from companion.core.constructions import rank_one_head
from companion.core.exact import (
    MAX_EXACT_COST,
    exact_max_error,
    exact_rank,
    exhaustive_check,
    rank_factorisation,
    solve,
)

BIG = st.integers(-2**80, 2**80)
RATIONAL = st.builds(Fraction, BIG, st.integers(1, 2**40))


def _rref(rows):
    """Textbook Gauss-Jordan over Fractions: (reduced nonzero rows, pivot columns)."""
    rows = [[Fraction(v) for v in r] for r in rows]
    pivots, rank = [], 0
    for c in range(len(rows[0])):
        piv = next((i for i in range(rank, len(rows)) if rows[i][c] != 0), None)
        if piv is None:
            continue
        rows[rank], rows[piv] = rows[piv], rows[rank]
        rows[rank] = [v / rows[rank][c] for v in rows[rank]]
        for i in range(len(rows)):
            if i != rank and rows[i][c] != 0:
                f = rows[i][c]
                rows[i] = [a - f * b for a, b in zip(rows[i], rows[rank])]
        pivots.append(c)
        rank += 1
    return rows[:rank], pivots


@st.composite
def low_rank_matrices(draw, entries=RATIONAL):
    """A product of (rows x k) and (k x cols) random rationals, sometimes perturbed: every
    rank from 0 to min(rows, cols) occurs."""
    rows, cols = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    k = draw(st.integers(0, min(rows, cols)))
    A = [[draw(entries) for _ in range(k)] for _ in range(rows)]
    B = [[draw(entries) for _ in range(cols)] for _ in range(k)]
    M = [[sum((A[i][t] * B[t][j] for t in range(k)), Fraction(0)) for j in range(cols)]
         for i in range(rows)]
    if draw(st.booleans()):
        M[draw(st.integers(0, rows - 1))][draw(st.integers(0, cols - 1))] += draw(BIG)
    return M


@settings(max_examples=60, deadline=None)
@given(low_rank_matrices())
def test_exact_rank_matches_plain_elimination(M):
    assert exact_rank(M) == len(_rref(M)[1])


@settings(max_examples=60, deadline=None)
@given(low_rank_matrices(BIG))
def test_exact_rank_of_big_integers_and_numpy_object_arrays(M):
    ints = [[int(v) for v in row] for row in M]
    assert exact_rank(np.array(ints, dtype=object)) == len(_rref(ints)[1])


@settings(max_examples=60, deadline=None)
@given(low_rank_matrices())
def test_rank_factorisation_is_exact_and_is_the_rref(M):
    U, V = rank_factorisation(M)
    rref, pivots = _rref(M)
    assert U.shape == (len(M), len(pivots)) and V.shape == (len(M[0]), len(pivots))
    assert V.T.tolist() == rref
    assert (U.dot(V.T) == np.array(M, dtype=object)).all() if pivots else not any(
        v for row in M for v in row)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 6).flatmap(lambda n: st.tuples(
    st.lists(st.lists(RATIONAL, min_size=n, max_size=n), min_size=n, max_size=n),
    st.lists(RATIONAL, min_size=n, max_size=n))))
def test_solve_solves_or_reports_singular(system):
    A, b = system
    x = solve(A, b)
    if x is None:
        assert len(_rref(A)[1]) < len(A)
    else:
        assert all(sum((a * v for a, v in zip(row, x)), Fraction(0)) == bi
                   for row, bi in zip(A, b))


@given(st.lists(st.tuples(RATIONAL, BIG), min_size=1, max_size=20))
def test_exact_max_error_is_the_plain_maximum(pairs):
    outputs, targets = zip(*pairs)
    want = max(abs(y - t) for y, t in pairs)
    assert exact_max_error(list(outputs), list(targets)) == want
    small = [t for t in targets if abs(t) < 2**62]
    if small:  # int64 targets go through int(), never an int64 subtraction
        ys = outputs[:len(small)]
        assert exact_max_error(list(ys), np.array(small, dtype=np.int64)) == max(
            abs(y - t) for y, t in zip(ys, small))


def test_exact_rank_limits_bit_sizes_not_only_shapes():
    t = time.process_time()
    for M in ([[Fraction(1, 3**10**6), Fraction(1, 2)]] * 3, [[2**10**7, 1], [1, 1]],
              [[Fraction(k + 1, 10**60 + k) for k in range(130)]] * 46):
        with pytest.raises(ValueError, match="bit size"):
            exact_rank(M)
    assert time.process_time() - t < 5
    assert exact_rank([[2**10**4]]) == 1  # one big entry is cheap: allowed
    assert exact_rank([[Fraction(1, 3**10**6)] * 3] * 3) == 1  # rows clear to small ints
    with pytest.raises(ValueError, match="MAX_EXACT_WORK"):
        exact_rank(np.ones((200, 200, 1))[..., 0].astype(int).tolist())
    assert MAX_EXACT_COST > 0


@pytest.mark.parametrize("bad, exc", [(None, TypeError), ("ab", TypeError), ([[1, 2], [3]],
                                      TypeError), ([[]], ValueError), ([[True]], TypeError),
                                      ([[float("nan")]], ValueError), ([1, 2], ValueError)])
def test_exact_rank_bad_input_names_the_matrix(bad, exc):
    with pytest.raises(exc, match="M"):
        exact_rank(bad)


def test_exact_rank_reads_floats_exactly():
    assert exact_rank([[0.1, 0.2], [0.2, 0.4]]) == 1
    assert exact_rank([[1.0, 1e-300], [1.0, 0.0]]) == 2


def test_exhaustive_check_refuses_huge_enumerations():
    with pytest.raises(ValueError, match="n\\*m <= 22"):
        exhaustive_check(rank_one_head(), 3, 9)
    with pytest.raises(ValueError, match="n must be"):
        exhaustive_check(rank_one_head(), 0, 2)


def test_exact_rank_matches_numpy_on_random_rational_matrices():
    rng = np.random.default_rng(0)
    for _ in range(100):
        n, m, k = rng.integers(1, 8), rng.integers(1, 8), rng.integers(0, 5)
        A = [[Fraction(int(rng.integers(-3, 4)), int(rng.integers(1, 5))) for _ in range(k)]
             for _ in range(n)]
        B = [[Fraction(int(rng.integers(-3, 4)), int(rng.integers(1, 5))) for _ in range(m)]
             for _ in range(k)]
        M = [[sum((A[i][t] * B[t][j] for t in range(k)), Fraction(0)) for j in range(m)]
             for i in range(n)]
        assert exact_rank(M) == np.linalg.matrix_rank(np.array(M, dtype=float))
    # a rank-deficient matrix that floats can get wrong is exact here
    big = Fraction(1, 3**40)
    assert exact_rank([[1, big], [1 + big, big + big * big]]) == 1

