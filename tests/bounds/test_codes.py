"""Constant-weight codes: the Paley Hadamard code and the seeded greedy + expurgation search."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from companion.bounds.code_search import expurgate, greedy_code, search_code
from companion.bounds.codes import (
    check_code,
    gap_matrix,
    overlap_spectrum,
    paley_hadamard_code,
    paley_hadamard_matrix,
)
from companion.bounds.rank_bounds import certified_rank_bound


@pytest.mark.parametrize("q", [3, 7, 11, 19, 23, 31, 43])
def test_paley_code_properties(q):
    H = paley_hadamard_matrix(q)
    assert np.array_equal(H @ H.T, (q + 1) * np.eye(q + 1))
    assert np.all(H[0] == 1) and np.all(H[:, 0] == 1)
    S = paley_hadamard_code(q)
    m, w = q + 1, (q + 1) // 2
    assert S.shape == (2 * q, m) and np.all(S.sum(axis=1) == w)
    assert overlap_spectrum(S) == {0: q, m // 4: q * (2 * q - 1) - q}
    G = gap_matrix(S)
    assert set(np.unique(G[~np.eye(2 * q, dtype=bool)]).tolist()) == {m // 4, w}


def test_paley_24_is_the_theory_code():
    S = paley_hadamard_code(23)
    assert S.shape == (46, 24) and set(S.sum(axis=1).tolist()) == {12}
    gram = S @ S.T
    assert set(gram[~np.eye(46, dtype=bool)].tolist()) == {0, 6}
    np.testing.assert_array_equal(S[23:], 1 - S[:23])
    assert paley_hadamard_code(23, complements=False).shape == (23, 24)


@pytest.mark.parametrize("q", [2, 4, 5, 9, 13, 1031, 3.0])
def test_paley_rejects_bad_q(q):
    with pytest.raises((ValueError, TypeError), match="q"):
        paley_hadamard_code(q)


@settings(max_examples=30, deadline=None)
@given(m=st.integers(6, 40), data=st.data())
def test_greedy_code_respects_the_constraints(m, data):
    w = data.draw(st.integers(2, m - 2))
    min_gap = data.draw(st.integers(2, w))
    seed = data.draw(st.integers(0, 2**32 - 1))
    S = greedy_code(m, w, min_gap, seed, candidates=500, max_size=100)
    assert np.all(S.sum(axis=1) == w)
    if len(S) >= 2:
        G = gap_matrix(S)
        assert G[~np.eye(len(S), dtype=bool)].min() >= min_gap
    np.testing.assert_array_equal(S, greedy_code(m, w, min_gap, seed, candidates=500,
                                                 max_size=100))


@settings(max_examples=20, deadline=None)
@given(m=st.integers(8, 28), seed=st.integers(0, 2**32 - 1), n=st.integers(3, 6))
def test_expurgation_never_lowers_the_bound(m, seed, n):
    S = greedy_code(m, m // 2, 2, seed, candidates=300, max_size=80)
    if len(S) < 3:
        return
    E = expurgate(S, n)
    assert {tuple(r) for r in E} <= {tuple(r) for r in S}
    assert certified_rank_bound(E, n).trace_bound >= certified_rank_bound(S, n).trace_bound


def test_search_code_is_seeded_and_certified():
    a, b = search_code(20, seed=3), search_code(20, seed=3)
    np.testing.assert_array_equal(a.code, b.code)
    check_code(a.code)
    bound = certified_rank_bound(a.code)
    # the search keeps its best code, which beats the raw greedy code of every min_gap it tried
    for g in range(2, 6):
        raw = greedy_code(20, 10, g, 3, 3000, 300)
        if len(raw) >= 2:
            assert bound.trace_bound >= certified_rank_bound(raw).trace_bound
    assert bound.trace_rank > 8


def test_bad_inputs():
    with pytest.raises(ValueError, match=r"m must be an int in \[2, 64\]"):
        greedy_code(65, 30, 2)
    with pytest.raises(ValueError, match="w"):
        greedy_code(10, 10, 2)
    with pytest.raises(ValueError, match="min_gap"):
        greedy_code(10, 5, 6)
    with pytest.raises(TypeError, match="m"):
        greedy_code(10.0, 5, 2)
    with pytest.raises(ValueError, match=r"m must be an int in \[4, 64\]"):
        search_code(100)
    with pytest.raises(ValueError, match="constant weight"):
        check_code(np.array([[1, 0, 0], [1, 1, 0]]))
    with pytest.raises(ValueError, match="at least 2"):
        check_code(np.array([[1, 0, 0]]))
    with pytest.raises(ValueError, match="shape"):
        check_code(np.array([[[1, 0]], [[0, 1]]]))
    with pytest.raises(ValueError, match="0 and 1"):
        check_code(np.array([[1, -1], [0, 1]]))
