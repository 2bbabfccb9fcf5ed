"""The NKA head: sketch form equals direct form; exact and float evaluators agree; errors."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from companion.core import attention, task
from companion.core.constructions import rank_one_head


def random_head(rng, m, r, d, n, integer=False):
    """A head with position-dependent key and value tables (positions 0..n-1)."""
    draw = (lambda *s: rng.integers(0, 4, size=s)) if integer else (lambda *s: rng.random(s))
    wq, wk, wv = draw(m, r), draw(n, m, r), rng.normal(size=(n, m, d))
    if integer:
        wv = rng.integers(-3, 4, size=(n, m, d))
    wa, wb = (
        (rng.integers(-2, 3, size=(m, d)), rng.integers(-2, 3, size=m))
        if integer
        else (rng.normal(size=(m, d)), rng.normal(size=m))
    )
    plus = 1 if integer else 0.1  # keeps every weight and denominator positive
    return attention.KernelAttentionHead(
        rank=r,
        query_features=lambda x: x @ wq + plus,
        key_features=lambda z, p: z @ wk[p] + plus,
        values=lambda z, p: z @ wv[p],
        readout_weights=lambda x: x @ wa,
        readout_bias=lambda x: x @ wb,
    )


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 2**31),
    st.integers(1, 5),
    st.integers(1, 4),
    st.integers(1, 3),
    st.integers(1, 4),
    st.sampled_from(task.CONVENTIONS),
)
def test_sketch_form_equals_direct_form(seed, m, r, d, n, convention):
    rng = np.random.default_rng(seed)
    head = random_head(rng, m, r, d, n)
    seqs = rng.integers(0, 2, size=(16, n, m))
    direct = attention.kernel_attention(head, seqs, convention)
    sketch = attention.kernel_attention_sketch(head, seqs, convention)
    np.testing.assert_allclose(sketch, direct, rtol=1e-12, atol=1e-12)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**31), st.integers(1, 4), st.integers(1, 3), st.integers(1, 3))
def test_exact_forms_agree_with_each_other_and_with_floats(seed, m, r, n):
    rng = np.random.default_rng(seed)
    head = random_head(rng, m, r, 2, n, integer=True)
    seqs = rng.integers(0, 2, size=(8, n, m))
    direct = attention.kernel_attention(head, seqs, exact=True)
    sketch = attention.kernel_attention_sketch(head, seqs, exact=True)
    num, den = attention.kernel_attention_integer(head, seqs)
    assert list(direct) == list(sketch)
    assert [y.numerator * dd == nn * y.denominator for y, nn, dd in zip(direct, num, den)]
    assert all(y * int(dd) == int(nn) for y, nn, dd in zip(direct, num, den))
    np.testing.assert_allclose(
        attention.kernel_attention(head, seqs), [float(y) for y in direct], rtol=1e-12
    )


def test_output_is_convex_combination_of_per_token_scores():
    # y - b lies between the smallest and largest per-token score <a(x), v_p>
    rng = np.random.default_rng(3)
    head = random_head(rng, 4, 3, 2, 3)
    seqs = rng.integers(0, 2, size=(200, 3, 4))
    y = attention.kernel_attention(head, seqs) - head.readout_bias(seqs[:, 0])
    scores = np.stack(
        [(head.values(seqs[:, p], p) * head.readout_weights(seqs[:, 0])).sum(-1) for p in range(3)],
        axis=-1,
    )
    assert np.all(y >= scores.min(-1) - 1e-12) and np.all(y <= scores.max(-1) + 1e-12)


def test_key_sketch_size_does_not_grow_with_length():
    phi = np.ones((5, 7, 3))
    vals = np.ones((5, 7, 2))
    s, u = attention.key_sketch(phi, vals)
    assert s.shape == (5, 3, 2) and u.shape == (5, 3)
    s2, _ = attention.key_sketch(np.ones((5, 70, 3)), np.ones((5, 70, 2)))
    assert s2.shape == s.shape


def test_torch_forward_matches_numpy():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    head = random_head(rng, 4, 3, 2, 3)
    seqs = rng.integers(0, 2, size=(10, 3, 4))
    x = seqs[:, 0]
    phi_k = np.stack([head.key_features(seqs[:, p], p) for p in range(3)], 1)
    vals = np.stack([head.values(seqs[:, p], p) for p in range(3)], 1)
    got = attention.kernel_attention_torch(
        *(
            torch.tensor(a)
            for a in (
                head.query_features(x),
                phi_k,
                vals,
                head.readout_weights(x),
                head.readout_bias(x),
            )
        )
    )
    np.testing.assert_allclose(got.numpy(), attention.kernel_attention(head, seqs), rtol=1e-12)


def _head(**overrides):
    base = dict(
        rank=1,
        query_features=lambda x: np.ones(x.shape[:-1] + (1,)),
        key_features=lambda z, p: np.ones(z.shape[:-1] + (1,)),
        values=lambda z, p: z.astype(float),
        readout_weights=lambda x: x.astype(float),
        readout_bias=lambda x: np.zeros(x.shape[:-1]),
    )
    base.update(overrides)
    return attention.KernelAttentionHead(**base)


@pytest.mark.parametrize(
    "make, exc, match",
    [
        (lambda: _head(rank=-1), ValueError, "rank must be an int >= 1"),
        (lambda: _head(rank=0), ValueError, "rank must be an int >= 1"),
        (lambda: _head(rank=1.5), TypeError, "rank must be an int"),
        (lambda: _head(values=3), TypeError, "values must be callable"),
    ],
)
def test_bad_head_definitions(make, exc, match):
    with pytest.raises(exc, match=match):
        make()


@pytest.mark.parametrize(
    "head, match",
    [
        (_head(query_features=lambda x: -np.ones(x.shape[:-1] + (1,))), "nonnegative"),
        (_head(query_features=lambda x: np.zeros(x.shape[:-1] + (1,))), "denominator"),
        (_head(values=lambda z, p: np.full(z.shape, np.nan)), "NaN"),
        (_head(key_features=lambda z, p: np.ones(z.shape[:-1] + (2,))), "key_features must return"),
        (
            _head(readout_weights=lambda x: np.ones(x.shape[:-1] + (9,))),
            "readout_weights must return",
        ),
    ],
)
def test_bad_heads_fail_with_a_clear_error(head, match):
    seqs = np.array([[[1, 0], [0, 1], [1, 1]]])
    with pytest.raises(ValueError, match=match):
        attention.kernel_attention(head, seqs)


def test_integer_evaluator_refuses_float_heads():
    with pytest.raises(TypeError, match="integer"):
        attention.kernel_attention_integer(_head(), np.array([[[1, 0]]]))


def test_bad_sequences_reach_the_head_as_clear_errors():
    with pytest.raises(ValueError, match="only 0 and 1"):
        attention.kernel_attention(rank_one_head(), np.array([[[3, 0]]]))
    with pytest.raises(ValueError, match="convention"):
        attention.kernel_attention(rank_one_head(), np.array([[[1, 0]]]), convention="middle")



def test_torch_forward_refuses_negative_or_zero_sum_features():
    torch = pytest.importorskip("torch")
    q, k = torch.ones(2, 3), torch.ones(2, 4, 3)
    v, a, b = torch.ones(2, 4, 2), torch.ones(2, 2), torch.zeros(2)
    with pytest.raises(ValueError, match="query_features"):
        attention.kernel_attention_torch(torch.zeros(2, 3), k, v, a, b)
    with pytest.raises(ValueError, match="key_features"):
        attention.kernel_attention_torch(q, -k, v, a, b)
    with pytest.raises(ValueError, match="values"):
        attention.kernel_attention_torch(q, k, v * float("nan"), a, b)
    assert torch.equal(attention.kernel_attention_torch(q, k, v, a, b), torch.full((2,), 2.0))
