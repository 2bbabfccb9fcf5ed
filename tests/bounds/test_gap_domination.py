"""Lemma B (mediant identity, gap domination) and Observation A': checks that could fail."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from companion.bounds.gap_domination import (
    balanced_link_head,
    gap_domination_factor,
    gap_domination_ratio,
    link_check,
    mediant_closed_form,
    mediant_of_arrangements,
    mediant_relative_error,
    min_error_for_ratio,
    mixed_sequences,
    pure_sequence,
    split_gap_domination_factor,
    total_weight,
)
from companion.bounds.random_heads import _perturbed_head as perturbed_head
from companion.bounds.random_heads import random_kernel_head
from companion.checks import check_eps
from companion.core.attention import KernelAttentionHead, kernel_attention, kernel_weights
from companion.core.constructions import softmax_kernel_head
from companion.core.task import query_target

CONVENTIONS = st.sampled_from(["bidirectional", "causal"])


@st.composite
def links(draw, max_m=4, max_n=6):
    """(m, n, k, l, x, z, z') with arbitrary tokens (no ordering needed for the identity)."""
    m = draw(st.integers(1, max_m))
    n = draw(st.integers(3, max_n))
    k = draw(st.integers(1, n - 2))
    token = st.lists(st.integers(0, 1), min_size=m, max_size=m).map(np.array)
    return m, n, k, n - 1 - k, draw(token), draw(token), draw(token)


# --------------------------------------------------------------------------- mediant identity


@settings(max_examples=150, deadline=None)
@given(link=links(), seed=st.integers(0, 2**32 - 1), rank=st.integers(1, 4),
       d=st.integers(1, 3), convention=CONVENTIONS)
def test_mediant_identity_random_float_heads(link, seed, rank, d, convention):
    m, n, k, l, x, z, zp = link
    head = random_kernel_head(m, n, rank=rank, d=d, seed=seed)
    assert mediant_relative_error(head, x, z, zp, k, l, convention) <= 1e-12


@settings(max_examples=80, deadline=None)
@given(link=links(max_m=3, max_n=5), seed=st.integers(0, 2**32 - 1), convention=CONVENTIONS)
def test_mediant_identity_exact_integer_heads(link, seed, convention):
    m, n, k, l, x, z, zp = link
    head = random_kernel_head(m, n, rank=2, d=2, seed=seed, integer=True)
    direct = mediant_of_arrangements(head, x, z, zp, k, l, convention, exact=True)
    closed = mediant_closed_form(head, x, z, zp, k, l, convention, exact=True)
    assert isinstance(direct, Fraction) and direct == closed


@settings(max_examples=60, deadline=None)
@given(link=links(max_m=3, max_n=5), seed=st.integers(0, 2**32 - 1), convention=CONVENTIONS)
def test_sum_of_denominators_is_pascal_split(link, seed, convention):
    """sum_A D_A = C(n-2, k-1) D(z) + C(n-2, k) D(z'): the counting step of the proof."""
    m, n, k, l, x, z, zp = link
    head = random_kernel_head(m, n, rank=2, d=1, seed=seed, integer=True)
    seqs = mixed_sequences(x, z, zp, k, l, convention)
    lhs = kernel_weights(head, seqs, convention, exact=True).sum()
    rhs = (math.comb(n - 2, k - 1) * total_weight(head, x, z, n, convention, exact=True)
           + math.comb(n - 2, k) * total_weight(head, x, zp, n, convention, exact=True))
    assert lhs == rhs


def test_mediant_check_detects_wrong_weights():
    """The identity is not automatic: the plain average of the arrangements, or the closed
    form with k and l swapped, differ from it on position-dependent heads."""
    x, z, zp = np.array([1, 1, 0]), np.array([0, 1, 0]), np.array([1, 1, 1])
    head = random_kernel_head(3, 5, rank=2, d=2, seed=7, integer=True)
    seqs = mixed_sequences(x, z, zp, 1, 3, "bidirectional")
    plain = sum(Fraction(v) for v in kernel_attention(head, seqs, exact=True)) / len(seqs)
    mediant = mediant_of_arrangements(head, x, z, zp, 1, 3, exact=True)
    swapped = mediant_closed_form(head, x, z, zp, 3, 1, exact=True)
    assert mediant == mediant_closed_form(head, x, z, zp, 1, 3, exact=True)
    assert plain != mediant and swapped != mediant


@pytest.mark.parametrize("convention", ["bidirectional", "causal"])
def test_position_independent_head_every_arrangement_equals_mediant(convention):
    head = softmax_kernel_head(1.3, 3, 6)
    x, z, zp = np.array([1, 1, 1]), np.array([1, 0, 0]), np.array([1, 1, 0])
    y = kernel_attention(head, mixed_sequences(x, z, zp, 2, 3, convention), convention)
    closed = mediant_closed_form(head, x, z, zp, 2, 3, convention)
    assert np.max(np.abs(y - closed)) <= 1e-12 * max(1.0, abs(closed))


def test_sequences_have_the_lemma_targets():
    x, z, zp = np.array([1, 1, 1, 0]), np.array([1, 0, 0, 1]), np.array([1, 1, 0, 1])
    for convention in ("bidirectional", "causal"):
        seqs = mixed_sequences(x, z, zp, 2, 2, convention)
        assert len(seqs) == 6 and len({s.tobytes() for s in seqs}) == 6
        assert set(query_target(seqs, convention).tolist()) == {1}
        for key, target in ((z, 1), (zp, 2)):
            pure = pure_sequence(x, key, 5, convention)
            assert query_target(pure[None], convention)[0] == target
    assert len(mixed_sequences(x, z, zp, 2, 3)) == math.comb(5, 2)


# --------------------------------------------------------------------------- gap domination


def _chain_family():
    """Query 1111 and keys 1^j 0^(4-j), j = 0..4: every pair is a link of gap j' - j."""
    x = np.ones(4, dtype=np.int64)
    return x, [np.array([1] * j + [0] * (4 - j)) for j in range(5)]


def test_gap_domination_on_heads_with_small_error():
    """Heads near an exact-ish one (perturbed softmax kernels) and near a tight one (perturbed
    balanced heads), in both forms: whenever the error on a link's family is < 1/2, the ratio
    D(z)/D(z') is at least c_{n,eps}(g) at that error. Non-vacuous: many links qualify, some
    sit within 10% of the bound, and heads with error >= 1/2 do violate the bound at 1/2."""
    x, keys = _chain_family()
    checked, slack, violations_above_half = 0, [], 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        n = 3 + seed % 2
        heads = [perturbed_head(softmax_kernel_head(float(rng.uniform(0.5, 4)), 4, n), 4, n,
                                float(rng.uniform(0, 1)), seed=seed)]
        for (i, j) in ((0, 3), (1, 4), (0, 4)):
            c_half = gap_domination_factor(j - i, n, Fraction(1, 2))
            ratio = Fraction(c_half) * Fraction(rng.uniform(0.6, 1.6)).limit_denominator(100)
            tight = balanced_link_head(x, keys[i], keys[j], float(ratio), n)
            heads.append(perturbed_head(tight, 4, n, float(rng.uniform(0, 0.2)), seed=seed))
        convention = ("bidirectional", "causal")[seed // 2 % 2]
        for head in heads:
            for i in range(5):
                for j in range(i + 1, 5):
                    check = link_check(head, x, keys[i], keys[j], 1, n - 2, convention)
                    if check.eps < 0.5:
                        assert check.holds, check
                        checked += 1
                        if check.factor > 1:
                            slack.append(check.ratio / check.factor)
                    elif check.ratio < gap_domination_factor(check.gap, n, Fraction(1, 2)):
                        violations_above_half += 1
    assert checked >= 100
    assert len(slack) >= 50 and min(slack) < 1.1
    assert violations_above_half >= 5


@settings(max_examples=60, deadline=None)
@given(g=st.integers(1, 6), n=st.integers(3, 6), num=st.integers(1, 400),
       den=st.integers(1, 40), convention=CONVENTIONS)
def test_balanced_head_attains_lemma_b_exactly(g, n, num, den, convention):
    """The rank-1 balanced head's error equals l g / (2 (ratio + l)) exactly, so the lemma's
    inequality is tight: at ratio = c_{n,eps}(g) the error is exactly eps."""
    m = g + 1
    x = np.ones(m, dtype=np.int64)
    z, zp = np.zeros(m, dtype=np.int64), np.array([1] * g + [0])
    ratio = Fraction(num, den)
    head = balanced_link_head(x, z, zp, ratio, n, convention=convention)
    assert gap_domination_ratio(head, x, z, zp, n, convention, exact=True) == ratio
    outs = kernel_attention(head, np.concatenate([
        np.stack([pure_sequence(x, z, n, convention), pure_sequence(x, zp, n, convention)]),
        mixed_sequences(x, z, zp, 1, n - 2, convention)]), convention, exact=True)
    errs = [abs(outs[0] - 0), abs(outs[1] - g)] + [abs(v - 0) for v in outs[2:]]
    eps = min_error_for_ratio(ratio, g, n)
    assert all(e == eps for e in errs)
    if eps <= Fraction(1, 2):
        assert gap_domination_factor(g, n, eps) == ratio


@settings(max_examples=100, deadline=None)
@given(g=st.integers(1, 30), eps=st.fractions(Fraction(1, 1000), Fraction(1, 2)),
       n=st.integers(3, 12))
def test_factor_shape(g, eps, n):
    c = gap_domination_factor(g, n, eps)
    assert c == split_gap_domination_factor(g, n, eps, eps)
    assert gap_domination_factor(g + 1, n, eps) > c
    assert all(gap_domination_factor(g, n, eps, k) <= c for k in range(1, n - 1))
    if eps < Fraction(1, 2) and n == 3:
        assert c > g - 1
    if eps < Fraction(1, 2):
        assert c > gap_domination_factor(g, n, Fraction(1, 2))


def test_factor_gap_three_forces_two():
    assert gap_domination_factor(3, 3, Fraction(1, 2)) == 2
    assert gap_domination_factor(3, 3, Fraction(49, 100)) > 2
    assert gap_domination_factor(2, 3, Fraction(1, 2)) == 1
    assert gap_domination_factor(1, 3, Fraction(1, 2)) == 0


# --------------------------------------------------------------------------- Observation A'


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), rank=st.integers(1, 4), convention=CONVENTIONS)
def test_observation_a_prime_no_zero_error_at_length_3(seed, rank, convention):
    """Every head (random, exact arithmetic) has error > 0 on the length-3 family of the
    link x = 1, z = 0, z' = 1 (m = 1), at least Lemma B's l g / (2 (k rho + l))."""
    x, z, zp = np.array([1]), np.array([0]), np.array([1])
    head = random_kernel_head(1, 3, rank=rank, d=2, seed=seed, integer=True)
    seqs = np.concatenate([pure_sequence(x, z, 3, convention)[None],
                           pure_sequence(x, zp, 3, convention)[None],
                           mixed_sequences(x, z, zp, 1, 1, convention)])
    errs = [abs(y - t) for y, t in zip(kernel_attention(head, seqs, convention, exact=True),
                                       query_target(seqs, convention), strict=True)]
    ratio = gap_domination_ratio(head, x, z, zp, 3, convention, exact=True)
    assert max(errs) >= min_error_for_ratio(ratio, 1, 3) > 0


def test_observation_a_prime_softmax_error_positive_but_vanishing():
    x, z, zp = np.array([1]), np.array([0]), np.array([1])
    errors = []
    for beta in (1.0, 5.0, 10.0, 20.0):
        check = link_check(softmax_kernel_head(beta, 1, 3), x, z, zp)
        errors.append(check.eps)
        assert check.eps >= min_error_for_ratio(check.ratio, 1, 3) * (1 - 1e-9) > 0
    assert errors == sorted(errors, reverse=True) and errors[-1] < 1e-8


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("eps", [0, -0.1, 0.6, Fraction(3, 4), float("nan"), float("inf")])
def test_eps_out_of_range(eps):
    with pytest.raises(ValueError, match="eps"):
        check_eps(eps)
    with pytest.raises(ValueError, match="eps"):
        gap_domination_factor(3, 3, eps)


@pytest.mark.parametrize("eps", ["0.1", None, True, 1j])
def test_eps_wrong_type(eps):
    with pytest.raises(TypeError, match="eps"):
        gap_domination_factor(3, 3, eps)


def test_bad_gap_length_copies():
    with pytest.raises(ValueError, match="g"):
        gap_domination_factor(0, 3)
    with pytest.raises(TypeError, match="g"):
        gap_domination_factor(1.5, 3)
    with pytest.raises(ValueError, match="n"):
        gap_domination_factor(3, 2)
    with pytest.raises(ValueError, match=r"k .*\[1, 2\]"):
        gap_domination_factor(3, 4, Fraction(1, 2), k=3)
    with pytest.raises(ValueError, match="k"):
        gap_domination_factor(3, 4, Fraction(1, 2), k=0)
    with pytest.raises(ValueError, match="eps_pure"):
        split_gap_domination_factor(3, 3, 0.7, 0.1)
    with pytest.raises(ValueError, match="eps_pure"):
        split_gap_domination_factor(3, 3, 0, 0)
    with pytest.raises(ValueError, match="ratio"):
        min_error_for_ratio(0, 3)
    with pytest.raises(ValueError, match="ratio"):
        min_error_for_ratio(float("nan"), 3)


def test_bad_sequences():
    x, z = np.array([1, 0, 1]), np.array([0, 1, 1])
    with pytest.raises(ValueError, match="k"):
        mixed_sequences(x, z, z, 0, 2)
    with pytest.raises(ValueError, match="l"):
        mixed_sequences(x, z, z, 2, 0)
    with pytest.raises(ValueError, match="arrangements"):
        mixed_sequences(x, z, z, 20, 20)
    with pytest.raises(ValueError, match="z_prime must have width m = 3"):
        mixed_sequences(x, z, np.array([1, 0]), 1, 1)
    with pytest.raises(ValueError, match="x must"):
        pure_sequence(np.array([[1, 0, 1]]), z, 3)
    with pytest.raises(ValueError, match="convention"):
        pure_sequence(x, z, 3, "left")
    with pytest.raises(ValueError, match="only 0 and 1"):
        pure_sequence(x, np.array([0, 2, 1]), 3)
    with pytest.raises(ValueError, match="n"):
        total_weight(random_kernel_head(3, 3), x, z, 2)
    with pytest.raises(TypeError, match="head"):
        total_weight(lambda t: t, x, z, 3)


def test_bad_link_and_heads():
    x = np.array([1, 1, 0])
    head = random_kernel_head(3, 3, seed=1)
    with pytest.raises(ValueError, match="position p must be an int in \\[0, 2\\]"):
        total_weight(head, x, x, 4)
    with pytest.raises(ValueError, match="m"):
        random_kernel_head(13, 3)
    with pytest.raises(ValueError, match="ratio"):
        balanced_link_head(x, np.array([0, 0, 0]), x, -1.0, 3)
    with pytest.raises(ValueError, match="beta"):
        softmax_kernel_head(float("nan"), 2, 3)
    assert isinstance(head, KernelAttentionHead)
