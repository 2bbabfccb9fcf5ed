"""core/lp: the exact LP returns a point or a Farkas certificate, each re-checked; its
answers against a plain-Python check on random big-integer systems; its cost limits."""

from __future__ import annotations

import random
import time
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from companion.core.lp import FarkasCertificate, _is_farkas, _is_point, feasible_point


def test_exact_lp_point_and_certificate():
    A = [[1, 1], [-1, 0], [0, -1]]
    x = feasible_point(A, [4, -1, -2])
    assert _is_point(A, [4, -1, -2], x)
    cert = feasible_point(A, [2, -1, -2])  # x >= 1, y >= 2, x + y <= 2: empty
    assert isinstance(cert, FarkasCertificate) and _is_farkas(A, [2, -1, -2], cert)
    # a doctored certificate fails its check
    cert.y[0] += 1
    assert not _is_farkas(A, [2, -1, -2], cert)
    assert feasible_point([[1], [-1]], [-1, 3]) == [Fraction(-1)]  # free variables


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 5).flatmap(lambda cols: st.tuples(
    st.lists(st.lists(st.integers(-2**70, 2**70), min_size=cols, max_size=cols), min_size=1,
             max_size=5),
    st.lists(st.integers(-2**70, 2**70), min_size=5, max_size=5))))
def test_point_or_certificate_against_plain_python(system):
    A, b = system
    b = b[:len(A)]
    out = feasible_point(A, b)
    if isinstance(out, FarkasCertificate):  # y >= 0, y^T A = 0, y^T b < 0, in plain ints
        y = out.y
        assert all(v >= 0 for v in y)
        assert all(sum(y[i] * A[i][j] for i in range(len(A))) == 0 for j in range(len(A[0])))
        assert sum(yi * bi for yi, bi in zip(y, b)) < 0
    else:
        assert all(sum(a * x for a, x in zip(row, out)) <= bi for row, bi in zip(A, b))


def test_cost_is_bounded_by_size_and_bit_length():
    rng = random.Random(0)
    big = [[Fraction(rng.randint(-2**300, 2**300), rng.randint(1, 2**300)) for _ in range(20)]
           for _ in range(20)]
    t = time.process_time()
    with pytest.raises(ValueError, match="MAX_LP_WORK"):
        feasible_point(big, [Fraction(rng.randint(-2**300, 2**300)) for _ in range(20)])
    assert time.process_time() - t < 10
