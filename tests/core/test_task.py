"""Min-IP targets, enumeration, pools: against brute force and on bad input."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from companion.core import task


def brute_force_targets(seq):
    return [min(sum(a * b for a, b in zip(xi, xj)) for xj in seq) for xi in seq]


@settings(max_examples=200, deadline=None)
@given(arrays(np.int8, st.tuples(st.integers(1, 3), st.integers(1, 5), st.integers(1, 6)),
              elements=st.integers(0, 1)))
def test_targets_equal_brute_force_loop(batch):
    got = task.min_ip_targets(batch)
    assert got.shape == batch.shape[:2]
    for seq, row in zip(batch.tolist(), got.tolist()):
        assert row == brute_force_targets(seq)
    # the query target is the target at position 0 (bidirectional) or n-1 (causal)
    assert np.array_equal(task.query_target(batch, "bidirectional"), got[:, 0])
    assert np.array_equal(task.query_target(batch, "causal"), got[:, -1])


def test_target_never_exceeds_query_weight():
    seqs = task.all_sequences(3, 3)
    assert np.all(task.min_ip_targets(seqs) <= seqs.sum(-1))


def test_all_sequences_is_every_sequence_once():
    seqs = task.all_sequences(2, 3)
    assert seqs.shape == (64, 2, 3)
    as_tuples = {tuple(s.ravel()) for s in seqs}
    assert as_tuples == set(itertools.product((0, 1), repeat=6))


def test_iter_sequences_chunks_cover_all_sequences():
    chunks = list(task.iter_sequences(3, 2, chunk=10))
    assert sum(len(c) for c in chunks) == 64
    assert np.array_equal(np.concatenate(chunks), task.all_sequences(3, 2))


def test_all_sequences_refuses_large_enumerations():
    with pytest.raises(ValueError, match="max_sequences"):
        task.all_sequences(3, 10)


def test_pools_are_disjoint_and_seeded():
    pool = task.token_pool(10, 300, seed=1)
    assert len(np.unique(pool, axis=0)) == 300
    train, test = task.split_pool(pool, 0.7, seed=2)
    assert len(train) == 210 and len(test) == 90
    train_set = {tuple(t) for t in train}
    assert not any(tuple(t) in train_set for t in test)
    again = task.split_pool(task.token_pool(10, 300, seed=1), 0.7, seed=2)
    assert np.array_equal(again[0], train) and np.array_equal(again[1], test)


def test_large_width_pool_uses_distinct_tokens():
    pool = task.token_pool(40, 500, seed=0)
    assert pool.shape == (500, 40) and len(np.unique(pool, axis=0)) == 500


@pytest.mark.parametrize(
    "bad, exc, match",
    [
        (np.array([[[0, 2]]]), ValueError, "only 0 and 1"),
        (np.array([0, 1]), ValueError, "at least 2 dimensions"),
        (np.zeros((2, 0, 3)), ValueError, "n >= 1"),
        (np.zeros((2, 3, 0)), ValueError, "m >= 1"),
        (np.array([[[np.nan, 1.0]]]), ValueError, "NaN"),
        ("0101", TypeError, "sequences must be an array"),
        (np.array([[["a", "b"]]]), TypeError, "dtype"),
    ],
)
def test_bad_sequences_are_rejected_with_a_named_argument(bad, exc, match):
    with pytest.raises(exc, match=match):
        task.min_ip_targets(bad)


@pytest.mark.parametrize(
    "call, exc, match",
    [
        (lambda: task.query_target(np.zeros((1, 2, 2), int), "left"), ValueError, "convention"),
        (lambda: task.all_sequences(0, 2), ValueError, "n must be"),
        (lambda: task.all_sequences(2, 2.0), TypeError, "m must be an int"),
    ],
)
def test_bad_arguments_raise_clear_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_token_pool_dense_draw_at_a_wide_width_is_the_whole_cube():
    """Drawing (nearly) the whole cube permutes instead of rejection sampling, which would
    never end; every token appears once."""
    pool = task.token_pool(21, 2**21, 0)
    codes = pool.astype(np.int64) @ (1 << np.arange(21, dtype=np.int64))[::-1]
    assert pool.shape == (2**21, 21) and len(np.unique(codes)) == 2**21
