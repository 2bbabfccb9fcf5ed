"""bounds/code_search: greedy codes, expurgation and the seeded code search, each certified."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from companion.bounds.code_search import _expurgate as expurgate
from companion.bounds.code_search import _greedy_code as greedy_code
from companion.bounds.code_search import search_code
from companion.bounds.codes import check_code
from companion.bounds.rank_bounds import certified_rank_bound


@settings(max_examples=30, deadline=None)
@given(m=st.integers(6, 40), data=st.data())
def test_greedy_code_respects_the_constraints(m, data):
    w = data.draw(st.integers(2, m - 2))
    min_gap = data.draw(st.integers(2, w))
    seed = data.draw(st.integers(0, 2**32 - 1))
    S = greedy_code(m, w, min_gap, seed, candidates=500, max_size=100)
    assert np.all(S.sum(axis=1) == w)
    if len(S) >= 2:
        G = w - S @ S.T
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
    with pytest.raises(ValueError, match=r"m must be an int in \[4, 64\]"):
        search_code(100)
