"""bounds/random_heads: random and perturbed nonnegative heads, and the surveys of Chapter 2
built from them (the mediant identity, Lemma B on perturbed heads, the error floor)."""

from __future__ import annotations

import numpy as np
import pytest

from companion.bounds.gap_domination import gap_domination_factor
from companion.bounds.random_heads import _perturbed_head as perturbed_head
from companion.bounds.random_heads import (
    counterexample_search,
    error_floor_survey,
    mediant_survey,
    perturbed_link_survey,
    random_kernel_head,
)
from companion.core.attention import kernel_weights
from companion.core.task import all_sequences


def test_random_heads_are_seeded_and_nonnegative():
    seqs = all_sequences(3, 3)
    w = kernel_weights(random_kernel_head(3, 3, seed=4), seqs)
    assert np.all(w >= 0)
    np.testing.assert_array_equal(w, kernel_weights(random_kernel_head(3, 3, seed=4), seqs))
    assert not np.array_equal(w, kernel_weights(random_kernel_head(3, 3, seed=5), seqs))
    pert = perturbed_head(random_kernel_head(3, 3, seed=4), 3, 3, 0.5, seed=1)
    assert np.all(kernel_weights(pert, seqs) >= 0)


def test_mediant_survey_holds_exactly_and_in_floats():
    cases = mediant_survey(12, seed=3, exact_every=2)
    assert len(cases) == 24 and {c.convention for c in cases} == {"bidirectional", "causal"}
    assert max(c.relative_error for c in cases) < 1e-9
    assert all(c.exact_equal for c in cases if c.exact_equal is not None)
    assert sum(c.exact_equal is not None for c in cases) == 12


def test_no_perturbed_head_breaks_lemma_b():
    x, z, zp = np.array([1, 1, 1, 0]), np.array([0, 0, 0, 1]), np.array([1, 1, 1, 1])
    checks = perturbed_link_survey(x, z, zp, 3, 20)
    assert len(checks) == 20 and all(c.holds for c in checks)
    records = counterexample_search(num_heads=6, m=3, seed=1000)
    assert {n for n, _ in records} == {3, 4, 5} and all(c.holds for _, c in records)
    # the factor each check must beat is Lemma B's, where the lemma speaks
    for n, c in records:
        if c.factor is not None and c.eps == 0.5:
            assert c.factor == float(gap_domination_factor(c.gap, n, c.eps))


def test_error_floor_is_never_undercut():
    pairs = error_floor_survey(12)
    assert len(pairs) == 24 and all(err >= floor for err, floor in pairs)


def test_perturbed_link_survey_needs_a_link():
    x = np.array([1, 1, 0])
    with pytest.raises(ValueError, match="<x,z> < <x,z'>"):
        perturbed_link_survey(x, x, np.array([1, 0, 0]), 3, 1)
