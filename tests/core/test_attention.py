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


def sketch_form(head, seqs, convention="bidirectional"):
    """The sketch form as an oracle: keys compressed into S = sum_p phi_K(x_p) v(x_p)^T and
    u = sum_p phi_K(x_p), whose size does not grow with n; y = <a, phi_Q^T S> / phi_Q^T u + b."""
    q = task.query_index(seqs.shape[-2], convention)
    x = seqs[..., q, :]
    phi_k = np.stack([head.key_features(seqs[:, p], p) for p in range(seqs.shape[1])], 1)
    vals = np.stack([head.values(seqs[:, p], p) for p in range(seqs.shape[1])], 1)
    S, u = np.einsum("bpr,bpd->brd", phi_k, vals), phi_k.sum(1)
    phi_q = head.query_features(x)
    num = (np.einsum("br,brd->bd", phi_q, S) * head.readout_weights(x)).sum(-1)
    return num / (phi_q * u).sum(-1) + head.readout_bias(x)


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
    sketch = sketch_form(head, seqs, convention)
    np.testing.assert_allclose(sketch, direct, rtol=1e-12, atol=1e-12)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**31), st.integers(1, 4), st.integers(1, 3), st.integers(1, 3))
def test_exact_forms_agree_with_each_other_and_with_floats(seed, m, r, n):
    rng = np.random.default_rng(seed)
    head = random_head(rng, m, r, 2, n, integer=True)
    seqs = rng.integers(0, 2, size=(8, n, m))
    direct = attention.kernel_attention(head, seqs, exact=True)
    num, den = attention.kernel_attention_integer(head, seqs)
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
