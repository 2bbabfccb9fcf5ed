"""Several NKA heads: the evaluator, the two exact constructions, the transcript count."""

import itertools
from fractions import Fraction

import numpy as np
import pytest

from companion.bounds.codes import paley_subset
from companion.bounds.witness import witness_family
from companion.core.attention import kernel_attention
from companion.core.task import all_sequences
from companion.open.multihead import (
    answer_function_count,
    cauchy_level_max_error,
    cauchy_overlap_heads,
    multihead_attention,
    multihead_max_error_exact,
    transcript_numbers_needed,
    two_head_witness_heads,
)


@pytest.fixture(scope="module")
def small_family():
    return witness_family(paley_subset(6, 2))


def exhaustive_max_error(heads, m: int) -> Fraction:
    """Exact max error over all 2^(3m) length-3 inputs in {0,1}^m (the oracle)."""
    return multihead_max_error_exact(heads, all_sequences(3, m))


def test_two_rank_one_heads_are_exact_on_a_witness_family(small_family):
    heads = two_head_witness_heads(small_family)
    assert [h.rank for h in heads] == [1, 1]
    assert multihead_max_error_exact(heads, small_family.sequences) == 0
    # the kernels are nonnegative: both are NKA heads (kernel_attention checks alpha >= 0)
    for h in heads:
        kernel_attention(h, small_family.sequences[:50], exact=True)
    # neither head alone solves the family: the sum is what matters
    for h in heads:
        y = kernel_attention(h, small_family.sequences, exact=True)
        err = max(abs(Fraction(v) - int(t)) for v, t in zip(y, small_family.targets))
        assert err >= Fraction(1, 2)
    assert small_family.certificate.bound.rank >= 2


def test_two_head_construction_also_works_in_the_causal_form():
    fam = witness_family(paley_subset(5, 1), convention="causal")
    heads = two_head_witness_heads(fam)
    assert multihead_max_error_exact(heads, fam.sequences, "causal") == 0


@pytest.mark.slow
def test_two_rank_one_heads_are_exact_on_the_e1_witness():
    pytest.importorskip("torch")  # E1's family is chosen in the experiment module (torch)
    from companion.experiments.e1 import experiment_witness_24

    fam = experiment_witness_24()
    assert fam.certificate.bound.rank == 20
    assert multihead_max_error_exact(two_head_witness_heads(fam), fam.sequences) == 0


def test_two_head_construction_rejects_bad_input(small_family):
    with pytest.raises(TypeError, match="WitnessFamily"):
        two_head_witness_heads(small_family.sequences)
    with pytest.raises(ValueError, match="positive"):
        two_head_witness_heads(small_family, key_weight=[1] * 3)
    with pytest.raises(ValueError, match="ties"):
        two_head_witness_heads(small_family, key_weight=[1] * len(small_family.tokens))


@pytest.mark.parametrize("m", [1, 2, 3])
def test_cauchy_heads_are_exact_on_every_length_3_input(m):
    heads = cauchy_overlap_heads(m)
    assert len(heads) == 2 * m + 1 and all(h.rank == m + 1 for h in heads)
    assert exhaustive_max_error(heads, m) == 0


def test_cauchy_heads_fail_without_one_of_them():
    heads = cauchy_overlap_heads(2)
    assert exhaustive_max_error(heads[:-1], 2) > 0


@pytest.mark.parametrize("m", range(1, 9))
def test_cauchy_heads_are_exact_on_every_input_class(m):
    assert cauchy_level_max_error(m) == 0


def test_cauchy_bad_input():
    with pytest.raises(ValueError, match="distinct"):
        cauchy_overlap_heads(2, shifts=[1, 1, 2, 3, 4])
    with pytest.raises(ValueError, match="m must"):
        cauchy_overlap_heads(0)
    with pytest.raises(TypeError, match="m must"):
        cauchy_level_max_error(2.0)


def test_multihead_is_the_sum_of_heads(small_family):
    heads = two_head_witness_heads(small_family)
    seqs = small_family.sequences[:20]
    total = multihead_attention(heads, seqs)
    assert np.allclose(total, sum(kernel_attention(h, seqs) for h in heads))
    with pytest.raises(TypeError, match="KernelAttentionHead"):
        multihead_attention([heads[0], "head"], seqs)


@pytest.mark.parametrize("m", [1, 2, 3])
def test_answer_function_count_by_brute_force(m):
    toks = list(itertools.product((0, 1), repeat=m))
    tables = {tuple(min(np.dot(x, z), np.dot(x, zp)) for x in toks)
              for z in toks for zp in toks}
    assert answer_function_count(m) == len(tables)


def test_transcript_numbers():
    count = answer_function_count(4)
    bits = (count - 1).bit_length()
    assert transcript_numbers_needed(4, 1) == bits
    assert transcript_numbers_needed(4, 32) == 1
    with pytest.raises(ValueError, match="bits"):
        transcript_numbers_needed(4, 0)


def test_two_overlap_heads_suffice_on_all_inputs_at_small_m():
    from companion.open.multihead import lp_overlap_heads, overlap_level_max_error

    heads, P, shifts = lp_overlap_heads(3, 2)
    assert [h.rank for h in heads] == [4, 4]
    level = overlap_level_max_error(P, shifts)
    assert level < Fraction(1, 2)
    assert exhaustive_max_error(heads, 3) == level  # the classes are every input


def test_one_overlap_head_cannot_and_the_lp_says_so():
    from companion.open.multihead import overlap_scores_lp

    assert overlap_scores_lp(3, 1, Fraction(1, 2)) is None
    assert overlap_scores_lp(3, 2, Fraction(499, 1000)) is not None
    with pytest.raises(ValueError, match="error"):
        overlap_scores_lp(3, 2, 1)
