"""Theorem G's collision on a model that is right on one of the two inputs: the designed
CountingSketchModel is exact on as many answer vectors as it has transcripts, so below the
bound every other answer vector shares a transcript with one it gets right."""

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from companion.transcript.bound import (
    BlockConstruction,
    count_transcripts,
    find_collision,
    find_forced_error,
    verify_exhaustively,
)
from companion.transcript.sketch import S_RANGE, CountingSketchModel, QuantisedSketchModel
from companion.transcript.sketch import _dequantise as dequantise
from companion.transcript.sketch import _quantise as quantise

# (q, s, d, b), every key token enumerated (q*s <= 9): clamped counts (s > 2^b - 1), unread
# blocks (d < q), both, neither; below and above the bound
GRID = [(3, 1, 1, 1), (3, 2, 3, 1), (3, 3, 2, 1), (4, 2, 1, 2), (2, 4, 1, 2), (6, 1, 5, 1),
        (6, 1, 6, 1), (2, 2, 2, 2), (3, 3, 3, 2), (9, 1, 4, 1)]


def _exact_set(model):
    c = model.construction
    tokens = c.all_key_tokens()
    answers = c.answers(tokens)
    right = {tuple(a) for z, a in zip(tokens, answers.tolist(), strict=True)
             if np.max(np.abs(model.outputs(z) - np.array(a))) < 0.5}
    return tokens, right


@pytest.mark.parametrize("q, s, d, b", GRID)
def test_counting_sketch_is_a_transcript_model_exact_where_claimed(q, s, d, b):
    c = BlockConstruction(q, s)
    model = CountingSketchModel(c, value_dim=d, bits=b)
    tokens, right = _exact_set(model)
    for z in tokens:
        out, t = model.forward(z)
        assert len(t) == model.length == d + 1 and all(0 <= v < 2**b for v in t)
        assert np.array_equal(model.read(t), out)  # Bob's outputs from the transcript alone
    cap = min(s, 2**b - 1)
    predicted = {v for v in itertools.product(range(s + 1), repeat=q)
                 if all(x <= cap for x in v[:d]) and all(x == 0 for x in v[d:])}
    assert right == predicted
    assert len(right) == model.exact_answer_vectors() == count_transcripts(model, tokens)


@pytest.mark.parametrize("q, s, d, b", GRID)
def test_forced_error_found_exactly_when_below_the_bound(q, s, d, b):
    """Every transcript this model uses names one answer it gets right, so a forced error
    exists exactly when the model is not exact everywhere; below the bound it never is."""
    model = CountingSketchModel(BlockConstruction(q, s), value_dim=d, bits=b)
    col = find_forced_error(model)
    exact_everywhere = d == q and s <= 2**b - 1
    if model.below_bound():
        assert not exact_everywhere
    if exact_everywhere:
        assert col is None and verify_exhaustively(model) == 2 ** (q * s)
    else:
        assert col is not None
        assert col.errors[0] < 0.5 <= col.errors[1] and col.wrong_on == (1,)
        assert model.transcript(col.key_tokens[0]) == model.transcript(col.key_tokens[1])
        assert col.answers[0] != col.answers[1]


def test_smallest_demo():
    """The chapter's smallest sketch (L = H = r = d = b = 1) on q = 3, s = 1, with weights
    designed rather than random: right on (0,0,0), hence wrong on (0,0,1)."""
    model = CountingSketchModel(BlockConstruction(3, 1))
    col = find_forced_error(model)
    assert col.answers == ((0, 0, 0), (0, 0, 1))
    assert col.predicted == (0, 0, 0) and col.errors == (0.0, 1.0)
    # the random-weight model of the chapter's first demo is wrong on both colliding inputs
    tiny = QuantisedSketchModel(BlockConstruction(3, 1))
    first = find_collision(tiny)
    assert first.wrong_on == (0, 1)


def test_at_most_one_right_answer_per_transcript():
    """Within a transcript class the outputs coincide, so at most one answer is right."""
    for seed in range(4):
        model = QuantisedSketchModel(BlockConstruction(4, 2), bits=2, rank=2, seed=seed)
        c = model.construction
        classes = {}
        for z, a in zip(c.all_key_tokens(), c.answers(c.all_key_tokens()).tolist(), strict=True):
            if np.max(np.abs(model.outputs(z) - np.array(a))) < 0.5:
                classes.setdefault(model.transcript(z), set()).add(tuple(a))
        assert all(len(v) == 1 for v in classes.values())


def test_per_query_quantisation_after_the_query_step_widens_the_bidirectional_channel():
    """Bidirectional form, rank 2: if each query quantises its own numerator
    phi_Q(x_i)^T (S_B + S_A) with one bit, Alice's one number a (S_A = (a, a)^T, from
    phi_K = (1, 1) and v = a) reaches q + 1 distinct transcripts, more than the 2 of one
    shared 1-bit code of a."""
    q = 5
    i = np.arange(1, q + 1)
    phi_q = np.stack([i, q + 1 - i], axis=1) / (q + 1)  # (q, 2), positive
    s_bob = np.array([-1.0, 1.0])  # Bob's own key sketch (values -1 and +1 on the two rows)
    a = np.linspace(-1, 1, 2001)  # Alice's value, tanh-range
    numerators = (s_bob[None, None, :] + a[:, None, None]) * phi_q[None, :, :]
    per_query = quantise(numerators.sum(axis=-1), *S_RANGE, 1)  # (2001, q)
    assert len({tuple(row) for row in per_query.tolist()}) == q + 1 > 2**1
    shared = quantise(a, *S_RANGE, 1)  # the corollary's channel: one code, before the query
    assert len(set(shared.tolist())) == 2


def test_bad_input():
    with pytest.raises(ValueError, match="value_dim"):
        CountingSketchModel(BlockConstruction(2, 2), value_dim=3)
    with pytest.raises(TypeError, match="construction"):
        CountingSketchModel((2, 2))
    with pytest.raises(ValueError, match="max_vectors"):
        find_forced_error(CountingSketchModel(BlockConstruction(21, 1)))


@given(st.lists(st.floats(-10, 10), min_size=1, max_size=20), st.integers(1, 30))
def test_quantise_codes_lie_in_range_and_round_to_the_nearest_level(values, bits):
    codes = quantise(values, -10, 10, bits)
    assert codes.min() >= 0 and codes.max() <= 2**bits - 1
    step = 20 / (2**bits - 1)
    assert np.all(np.abs(dequantise(codes, -10, 10, bits) - np.asarray(values)) <= step / 2 + 1e-9)

