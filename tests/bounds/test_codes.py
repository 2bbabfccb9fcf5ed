"""Constant-weight codes: the Paley Hadamard code and the seeded greedy + expurgation search."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from companion.bounds.codes import _paley_hadamard_matrix as paley_hadamard_matrix
from companion.bounds.codes import check_code, paley_hadamard_code


@pytest.mark.parametrize("q", [3, 7, 11, 19, 23, 31, 43])
def test_paley_code_properties(q):
    H = paley_hadamard_matrix(q)
    assert np.array_equal(H @ H.T, (q + 1) * np.eye(q + 1))
    assert np.all(H[0] == 1) and np.all(H[:, 0] == 1)
    S = paley_hadamard_code(q)
    m, w = q + 1, (q + 1) // 2
    assert S.shape == (2 * q, m) and np.all(S.sum(axis=1) == w)
    ov = S @ S.T
    spectrum = Counter(int(ov[i, j]) for i in range(len(S)) for j in range(i + 1, len(S)))
    assert spectrum == {0: q, m // 4: q * (2 * q - 1) - q}
    G = w - S @ S.T
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


def test_bad_inputs():
    with pytest.raises(ValueError, match="constant weight"):
        check_code(np.array([[1, 0, 0], [1, 1, 0]]))
    with pytest.raises(ValueError, match="at least 2"):
        check_code(np.array([[1, 0, 0]]))
    with pytest.raises(ValueError, match="shape"):
        check_code(np.array([[[1, 0]], [[0, 1]]]))
    with pytest.raises(ValueError, match="0 and 1"):
        check_code(np.array([[1, -1], [0, 1]]))
